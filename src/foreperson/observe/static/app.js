// foreperson serve: the page. Every value from the server is put in the document as
// text (textContent / attributes set by the DOM API), never parsed as markup.
"use strict";

const TOKEN = document.querySelector('meta[name="foreperson-token"]').content;
const ALLOW_RETRY =
  document.querySelector('meta[name="foreperson-allow-retry"]').content === "true";
const STATUSES = ["pending", "assigned", "running", "completed", "failed", "dead"];
const CHART = ["unfinished", "completed", "dead"];    // what the history keeps, per second
const KEEP = 300;                        // samples kept per chart (5 minutes at 1/s)
const PAGE = 50;                         // DEAD tasks a page (the server's PROBLEMS_SHOWN)
const PALETTE = ["#268bd2", "#2aa36b", "#d33c3c", "#b58900", "#6c71c4", "#e08a00",
                 "#2aa198", "#d33682", "#859900", "#8a94a0"];
const SVG = "http://www.w3.org/2000/svg";
const params = new URLSearchParams(location.search);
const RUN = params.get("run") || "";

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = String(value);
    else if (key === "style") node.style.cssText = value;   // CSSOM: allowed by the CSP
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  return node;
}

// Run fn every ms milliseconds, the next time only once this one answered: a slow store
// never has two polls of one page in flight.
function every(ms, fn) {
  const tick = async () => {
    try { await fn(); } finally { setTimeout(tick, ms); }
  };
  setTimeout(tick, ms);
}

// fn, one call at a time: a call while one is in flight (a click during a poll) waits for
// it and then runs once more, so a page never has two polls in flight.
function single(fn) {
  let running = null;
  let again = false;
  return () => {
    if (running) { again = true; return running; }
    running = (async () => {
      try { do { again = false; await fn(); } while (again); } finally { running = null; }
    })();
    return running;
  };
}

const FETCH_TIMEOUT_MS = 10000;          // a request that hangs is given up (the poll goes on)

async function getJSON(url) {
  const response = await fetch(url, { headers: { Accept: "application/json" },
                                      signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
  if (!response.ok) throw new Error(`${url}: ${response.status}`);
  return response.json();
}

function withRun(url) {
  return RUN ? `${url}${url.includes("?") ? "&" : "?"}run=${encodeURIComponent(RUN)}` : url;
}

function when(iso) {
  if (!iso) return "-";
  const date = new Date(iso);
  return isNaN(date) ? String(iso) : date.toLocaleString();
}

function seconds(value) {
  if (value === null || value === undefined) return "none";
  if (value < 60) return `${value.toFixed(1)} s`;
  if (value < 3600) return `${(value / 60).toFixed(1)} min`;
  return `${(value / 3600).toFixed(1)} h`;
}

function taskLink(id) {
  return el("a", { href: `/task/${encodeURIComponent(id)}`, text: id });
}

function statusText(status) {
  return el("span", { class: `status ${status}`, text: status });
}

function setLine(text) {
  document.getElementById("status-line").textContent = text;
}

async function retry(body) {
  const response = await fetch("/api/retry", {
    method: "POST", credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-Foreperson-Token": TOKEN },
    body: JSON.stringify(body), signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
  });
  const answer = await response.json();
  if (!response.ok) throw new Error(answer.error || response.status);
  setLine(`${answer.revived.length} task(s) back to pending`);
  return answer.revived;
}

function retryButton(body, label) {
  if (!ALLOW_RETRY) return null;
  return el("button", {
    class: "retry", type: "button", text: label, "data-retry": body.all ? "all" : body.ids[0],
    onclick: async (event) => {
      event.target.disabled = true;
      try { await retry(body); } catch (err) { setLine(`retry failed: ${err.message}`); }
      refresh();
    },
  });
}

// -- charts -------------------------------------------------------------------------

class LineChart {
  constructor(id, title, unit) {
    this.series = new Map();           // name -> [values]
    this.times = [];
    this.unit = unit;
    this.svg = svg("svg", { class: "chart", viewBox: "0 0 600 160", preserveAspectRatio: "none",
                            role: "img", "aria-label": title });
    this.legend = el("div", { class: "legend" });
    this.card = el("section", { class: "card", id },
                   el("h3", { text: title }), this.svg, this.legend);
    this.colors = new Map();
  }

  color(name) {
    if (!this.colors.has(name)) {
      const css = getComputedStyle(document.documentElement).getPropertyValue(`--${name}`).trim();
      this.colors.set(name, css || PALETTE[this.colors.size % PALETTE.length]);
    }
    return this.colors.get(name);
  }

  push(time, values) {
    this.times.push(time);
    for (const name of Object.keys(values)) {
      if (!this.series.has(name)) this.series.set(name, new Array(this.times.length - 1).fill(0));
    }
    for (const [name, list] of this.series) list.push(values[name] || 0);
    if (this.times.length > KEEP) {
      this.times.shift();
      for (const list of this.series.values()) list.shift();
    }
  }

  draw(order) {
    const names = order || [...this.series.keys()].sort();
    const top = Math.max(1, ...[...this.series.values()].flat());
    const n = this.times.length;
    this.svg.replaceChildren(
      svg("line", { class: "axis", x1: 40, y1: 145, x2: 595, y2: 145 }),
      svg("line", { class: "axis", x1: 40, y1: 5, x2: 40, y2: 145 }));
    const label = (y, text) => { const t = svg("text", { x: 36, y, "text-anchor": "end" });
                                 t.textContent = text; this.svg.append(t); };
    label(12, this.unit === "s" ? seconds(top) : String(top));
    label(148, "0");
    for (const name of names) {
      const list = this.series.get(name) || [];
      const points = list.map((v, i) => {
        const x = 40 + (n > 1 ? (555 * i) / (n - 1) : 555);
        return `${x.toFixed(1)},${(145 - (140 * v) / top).toFixed(1)}`;
      });
      this.svg.append(svg("polyline", { points: points.join(" "), stroke: this.color(name),
                                        "data-series": name }));
    }
    this.svg.setAttribute("data-samples", String(n));
    this.legend.replaceChildren(...names.map((name) => {
      const list = this.series.get(name) || [];
      const last = list.length ? list[list.length - 1] : 0;
      return el("span", {},
        el("span", { class: "sw", style: `background:${this.color(name)}` }), `${name} `,
        el("span", { class: "v", "data-series": name,
                     text: this.shown ?? (this.unit === "s" ? seconds(last) : last) }));
    }));
  }
}

// -- the dashboard ----------------------------------------------------------------------

const charts = {};
let refresh = () => {};

function errorsList(task) {
  const entries = task.errors && task.errors.length ? task.errors
    : (task.error ? [{ attempt: task.attempts, error: task.error }] : []);
  return el("ol", { class: "errors" }, entries.map((e) =>
    el("li", { text: `attempt ${e.attempt ?? "?"}${e.at ? ` at ${when(e.at)}` : ""}` +
                     `${e.worker ? ` on ${e.worker}` : ""}: ${e.error}` })));
}

function problemsTable(rows, dead) {
  if (!rows.length) return el("p", { class: "muted", text: dead ? "no DEAD tasks" : "no FAILED tasks" });
  return el("table", { id: dead ? "dead-table" : "failed-table" },
    el("thead", {}, el("tr", {}, ["task", "kind", "attempts", "why", "errors (every attempt)",
                                  dead ? "died" : "retry at", ""].map((h) => el("th", { text: h })))),
    el("tbody", {}, rows.map((t) => el("tr", { "data-task": t.id },
      el("td", {}, taskLink(t.id)), el("td", { text: t.kind }),
      el("td", { class: "num", text: `${t.attempts}/${t.max_attempts}` }),
      el("td", { text: (t.reason || "").replaceAll("_", " ") }),
      el("td", {}, errorsList(t)),
      el("td", { text: when(dead ? t.finished_at : t.not_before) }),
      el("td", {}, dead ? retryButton({ ids: [t.id] }, "retry") : null)))));
}

function workersTable(workers) {
  if (!workers.length) return el("p", { class: "muted", text: "no workers seen yet" });
  return el("table", { id: "workers-table" },
    el("thead", {}, el("tr", {}, ["worker", "host:pid", "last heartbeat", "active", "completed",
                                  "failed", "health"].map((h) => el("th", { text: h })))),
    el("tbody", {}, workers.map((w) => el("tr", { "data-worker": w.name },
      el("td", { text: w.name }), el("td", { text: w.process || "-" }),
      el("td", { text: when(w.last_heartbeat) }),
      el("td", { class: "num", text: w.active }), el("td", { class: "num", text: w.completed }),
      el("td", { class: "num", text: w.failed }), el("td", { text: w.health })))));
}

function kindsTable(byKind) {
  const kinds = Object.keys(byKind);
  if (!kinds.length) return null;
  return el("table", { id: "kinds-table" },
    el("thead", {}, el("tr", {}, el("th", { text: "kind" }),
                       STATUSES.map((s) => el("th", { text: s })))),
    el("tbody", {}, kinds.map((k) => el("tr", {}, el("td", { text: k }),
      STATUSES.map((s) => el("td", { class: "num", text: byKind[k][s] || 0 }))))));
}

async function dashboard(main) {
  charts.status = new LineChart("chart-status", "tasks by status over time", "");
  charts.workers = new LineChart("chart-workers", "active tasks per worker", "");
  charts.oldest = new LineChart("chart-oldest", "age of the oldest unfinished task", "s");
  const counts = el("div", { id: "counts" });
  const body = el("div", {});
  main.replaceChildren(
    el("p", { class: "muted", text: RUN ? `run ${RUN}` : "the whole store" }),
    el("div", { class: "cards" }, charts.status.card, charts.workers.card, charts.oldest.card),
    counts, body);
  try {                                  // the last hour of activity, kept by the store
    for (const p of await getJSON(withRun("/api/history"))) {
      charts.status.push(p.at, { unfinished: p.unfinished, completed: p.completed,
                                 dead: p.dead });
    }
  } catch (err) { /* the live samples still come */ }
  let olderDead = 0;                     // DEAD tasks skipped (0: the newest page)
  const pager = (count, shown) => {
    if (count <= PAGE && olderDead === 0) return null;
    const move = (by) => el("button", { type: "button", class: "page", text: by > 0
      ? "older" : "newer", onclick: () => { olderDead = Math.max(0, olderDead + by); refresh(); } });
    return el("p", { class: "muted" }, `showing ${olderDead + 1}-${olderDead + shown} of ${count} `,
              olderDead > 0 ? move(-PAGE) : null, olderDead + shown < count ? move(PAGE) : null);
  };
  refresh = single(async () => {
    let snap;
    try { snap = await getJSON(withRun("/api/snapshot")); } catch (err) {
      setLine(`cannot reach the store: ${err.message}`); return;
    }
    setLine(`${snap.total} tasks, updated ${when(snap.now)}`);
    const c = snap.counts;
    charts.status.push(snap.now, { unfinished: (c.pending || 0) + (c.assigned || 0) +
      (c.running || 0) + (c.failed || 0), completed: c.completed || 0, dead: c.dead || 0 });
    charts.status.draw(CHART);
    let deadRows = snap.dead;
    if (olderDead > 0) {
      try {
        deadRows = (await getJSON(withRun(`/api/tasks?status=dead&offset=${olderDead}`))).tasks;
      } catch (err) { deadRows = []; }
    }
    const active = {};
    for (const w of snap.workers) active[w.name] = w.active;
    for (const [name, n] of Object.entries(snap.active_by_worker)) active[name] = n;
    charts.workers.push(snap.now, active);
    charts.workers.draw();
    charts.oldest.push(snap.now, { oldest: snap.oldest_unfinished_age_s || 0 });
    charts.oldest.shown = snap.oldest_unfinished_age_s === null ? "none" : null;
    charts.oldest.draw(["oldest"]);
    const dead = snap.counts.dead || 0;
    counts.replaceChildren(kindsTable(snap.by_kind) || "");
    body.replaceChildren(
      el("h2", { text: "workers" }), workersTable(snap.workers),
      el("h2", {}, `DEAD tasks (${dead}) `, dead ? retryButton({ all: true }, "retry all DEAD") : null),
      problemsTable(deadRows, true), pager(dead, deadRows.length),
      el("h2", { text: `FAILED tasks, retry scheduled (${snap.counts.failed || 0})` }),
      problemsTable(snap.failed, false));
  });
  await refresh();
  every(1000, () => refresh());
}

// -- one task -----------------------------------------------------------------------------

function json(value) {
  return el("pre", { text: value === null || value === undefined ? "null"
                                                                   : JSON.stringify(value, null, 2) });
}

function linkList(items) {
  if (!items.length) return el("p", { class: "muted", text: "none" });
  return el("ul", {}, items.map((t) => el("li", {}, taskLink(t.id), ` ${t.kind || ""} `,
                                          statusText(t.status))));
}

async function taskPage(main, id) {
  refresh = single(async () => {
    let t;
    try { t = await getJSON(`/api/task/${encodeURIComponent(id)}`); } catch (err) {
      main.replaceChildren(el("p", { text: `no task ${id}` })); return;
    }
    const rows = [["id", t.id], ["kind", t.kind], ["status", statusText(t.status)],
                  ["why", t.reason || "-"], ["attempts", `${t.attempts} of ${t.max_attempts}`],
                  ["worker", t.assigned_to || "-"], ["run", t.run_id || "-"],
                  ["parent", t.parent_id ? taskLink(t.parent_id) : "-"],
                  ["locks", (t.locks || []).join(", ") || "-"],
                  ["lease expires", when(t.lease_expires_at)]];
    main.replaceChildren(
      el("h2", {}, `task ${t.id} `, t.status === "dead" ? retryButton({ ids: [t.id] }, "retry") : null),
      el("table", { class: "kv" }, el("tbody", {}, rows.map(([k, v]) =>
        el("tr", {}, el("td", { text: k }), el("td", {}, v))))),
      el("h2", { text: "payload" }), el("div", { id: "payload" }, json(t.payload)),
      el("h2", { text: "result" }), el("div", { id: "result" }, json(t.result)),
      el("h2", { text: "errors" }), errorsList(t),
      el("h2", { text: "depends on" }), linkList(t.depends_on),
      el("h2", { text: "dependents" }), linkList(t.dependents),
      el("h2", { text: "timeline" }),
      el("table", { id: "timeline" }, el("tbody", {}, t.timeline.map((e) => el("tr", {},
        el("td", { text: when(e.at) }), el("td", { text: e.what }),
        el("td", { text: e.detail || "" }))))));
    setLine(`task ${t.id}: ${t.status}`);
  });
  await refresh();
  every(2000, () => refresh());
}

// -- agent runs ------------------------------------------------------------------------

async function runsPage(main) {
  const answer = await getJSON("/api/runs");
  const runs = answer.runs;
  const hidden = answer.shown === "none";          // no user to show them to: say so
  main.replaceChildren(el("h2", { text: "durable agent runs" }),
    answer.note ? el("p", { class: "muted", id: "runs-note", text: answer.note }) : null,
    runs.length
    ? el("table", { id: "runs-table" },
        el("thead", {}, el("tr", {}, ["run", "agent", "user", "status", "stop reason", "started",
                                      "updated"].map((h) => el("th", { text: h })))),
        el("tbody", {}, runs.map((r) => el("tr", {},
          el("td", {}, el("a", { href: `/runs/${encodeURIComponent(r.run_id)}`, text: r.run_id })),
          el("td", { text: r.agent }), el("td", { text: r.user_id || "-" }),
          el("td", {}, statusText(r.status)), el("td", { text: r.stop_reason || "-" }),
          el("td", { text: when(r.created_at) }), el("td", { text: when(r.updated_at) })))))
    : (hidden ? null : el("p", { class: "muted", text: "no durable runs shown here (a state " +
                              "machine's run: open /runs/RUN_ID)" })));
  setLine(`${runs.length} run(s)`);
}

async function runPage(main, id) {
  refresh = single(async () => {
    let run;
    try { run = await getJSON(`/api/runs/${encodeURIComponent(id)}`); } catch (err) {
      main.replaceChildren(el("p", { text: `no run ${id}` })); return;
    }
    main.replaceChildren(
      el("h2", {}, `run ${run.run_id} `, run.status ? statusText(run.status) : null),
      el("div", { class: "muted" }, run.header.map((line) => el("div", { text: line }))),
      el("div", { class: "tree", id: "run-tree" }, run.lines.map((line) =>
        el("div", { style: `margin-left:${1.4 * line.depth}em`, "data-depth": line.depth,
                    text: line.text }))),
      el("p", {}, el("a", { href: `/?run=${encodeURIComponent(run.run_id)}`,
                            text: "this run's tasks" })));
    setLine(`run ${run.run_id}`);
  });
  await refresh();
  every(2000, () => refresh());
}

// -- routing ---------------------------------------------------------------------------

function start() {
  const main = document.getElementById("main");
  const input = document.getElementById("run-input");
  input.value = RUN;
  document.getElementById("run-filter").addEventListener("submit", (event) => {
    event.preventDefault();
    location.href = input.value ? `/?run=${encodeURIComponent(input.value)}` : "/";
  });
  const path = location.pathname;
  if (path.startsWith("/task/")) taskPage(main, decodeURIComponent(path.slice(6)));
  else if (path === "/runs") runsPage(main);
  else if (path.startsWith("/runs/")) runPage(main, decodeURIComponent(path.slice(6)));
  else dashboard(main);
}

start();
