"""``foreperson serve``: a local web page over a task store, with no service to install.

The standard library's threading HTTP server, one page (HTML, script and style shipped
in this package: no CDN, works offline) that polls a JSON API once a second:

* ``GET /``, ``/task/<id>``, ``/runs``, ``/runs/<id>``: the page (it routes by path);
* ``GET /api/snapshot[?run=ID]``: seed 000's three numbers now (tasks by status and
  kind, active per worker, oldest unfinished age), the live workers, the newest DEAD
  and FAILED tasks with every attempt's error;
* ``GET /api/tasks?status=dead|failed&offset=N``: the next page of DEAD or FAILED tasks;
* ``GET /api/history[?run=ID]``: unfinished, COMPLETED and DEAD tasks over the last
  hour of activity (or one run), from the changes the store keeps per second;
* ``GET /api/task/<id>``: one task with its dependencies, dependents and timeline;
* ``GET /api/runs``, ``GET /api/runs/<id>``: durable agent runs and a run as a tree;
* ``GET /metrics``: Prometheus metrics (with ``prometheus-client``);
* ``POST /api/retry`` (only with ``allow_retry``): revive DEAD tasks, the rule of
  ``foreperson retry``.

Every answer costs what it shows, not what the store holds: a year of history is read
through aggregates and indexes, never row by row. Read-only by default. Safety: every
value reaches the page as JSON and is put in the document as text (never as markup),
under a Content-Security-Policy that allows only this server's own script; the server
answers only requests whose ``Host`` is the address it is bound to (no DNS rebinding),
and a retry must be a same-origin JSON POST carrying the page's per-process token (no
cross-site request can forge one).
"""

from __future__ import annotations

import hmac
import json
import logging
import secrets
import threading
from datetime import datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from ..errors import StoreError
from ..journal import RunLedger
from ..work.store import ReportsWork, TaskStore
from ..work.task import Status, Task
from .workers import live_workers

__all__ = ["PROBLEMS_SHOWN", "StatusServer", "history", "problems", "snapshot", "task_detail"]

log = logging.getLogger("foreperson.observe")

PROBLEMS_SHOWN = 50
"""DEAD and FAILED tasks listed on the page (each; the counts say how many there are)."""

_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _task_row(task: Task) -> dict[str, Any]:
    """A task as the lists of the page show it (no payload or result)."""
    return {"id": task.id, "kind": task.kind, "status": task.status.value,
            "attempts": task.attempts, "max_attempts": task.max_attempts,
            "reason": task.reason, "error": task.error, "errors": task.errors,
            "assigned_to": task.assigned_to, "run_id": task.run_id,
            "created_at": _iso(task.created_at), "finished_at": _iso(task.finished_at),
            "not_before": _iso(task.not_before)}


def problems(store: TaskStore, status: Status, *, run_id: str | None = None,
             limit: int = PROBLEMS_SHOWN, offset: int = 0) -> list[dict[str, Any]]:
    """A page of the DEAD (or FAILED) tasks, the newest first, with every attempt's error
    (an index read of the page, however many there are).

    Args:
        store: the store.
        status: ``Status.DEAD`` or ``Status.FAILED``.
        run_id: one run's (None: the whole store's).
        limit: tasks in the page.
        offset: tasks skipped, newest first (the next page: ``offset + limit``).
    """
    return [_task_row(t) for t in store.list_tasks(status=status, run_id=run_id,
                                                   limit=limit, offset=offset,
                                                   newest_first=True)]


def snapshot(store: TaskStore, *, run_id: str | None = None,
             limit: int = PROBLEMS_SHOWN) -> dict[str, Any]:
    """What the page shows now, as JSON; its cost does not grow with the history.

    Args:
        store: the store.
        run_id: one run's tasks (None: the whole store). Workers are the store's.
        limit: most DEAD and most FAILED tasks listed (the newest; the counts say how
            many there are, ``/api/tasks`` pages through the rest).

    Returns:
        ``now``, ``total``, ``counts`` (status -> n), ``by_kind`` (kind -> status -> n),
        ``active_by_worker``, ``oldest_unfinished_age_s`` (seconds or None),
        ``workers`` (the live ones: name, process, last_heartbeat, active, completed,
        failed, health), ``dead`` and ``failed`` (tasks with every attempt's error).

    Raises:
        StoreError: the store failed.
    """
    stats = store.stats(run_id=run_id)
    by_kind = store.counts_by_kind(run_id=run_id) if isinstance(store, ReportsWork) else {}
    return {
        "now": _iso(stats.now), "run_id": run_id, "total": stats.total,
        "counts": {s.value: n for s, n in stats.counts.items()},
        "by_kind": {k: {s.value: n for s, n in v.items()} for k, v in sorted(by_kind.items())},
        "active_by_worker": stats.active_by_worker,
        "oldest_unfinished_age_s": stats.oldest_unfinished_age_s,
        "workers": live_workers(store, stats),
        "dead": problems(store, Status.DEAD, run_id=run_id, limit=limit),
        "failed": problems(store, Status.FAILED, run_id=run_id, limit=limit),
    }


def history(store: TaskStore, *, run_id: str | None = None, points: int = 60
            ) -> list[dict[str, Any]]:
    """Unfinished, COMPLETED and DEAD tasks over the last hour of activity (or over one
    run), from the store's kept changes (:meth:`~foreperson.work.store.ReportsWork.history`)."""
    if not isinstance(store, ReportsWork):
        return []
    return [{"at": _iso(p.at), "unfinished": p.unfinished, "completed": p.completed,
             "dead": p.dead} for p in store.history(run_id=run_id, points=points)]


def _brief(store: TaskStore, ids: list[str]) -> list[dict[str, Any]]:
    out = []
    for task_id in ids:
        task = store.get(task_id)
        out.append({"id": task_id, "kind": task.kind if task else None,
                    "status": task.status.value if task else "unknown"})
    return out


def _events(task: Task) -> list[dict[str, Any]]:
    """A task's timeline: created, each failed attempt, started, finished, backoff."""
    events: list[dict[str, Any]] = []
    if task.created_at is not None:
        events.append({"at": _iso(task.created_at), "what": "created"})
    for entry in task.errors:
        who = f" on {entry['worker']}" if entry.get("worker") else ""
        events.append({"at": entry.get("at"),
                       "what": f"attempt {entry.get('attempt')} failed{who}",
                       "detail": entry.get("error")})
    if task.started_at is not None:
        events.append({"at": _iso(task.started_at),
                       "what": f"attempt {task.attempts} started"
                       + (f" on {task.assigned_to}" if task.assigned_to else "")})
    if task.heartbeat_at is not None and task.status.active:
        events.append({"at": _iso(task.heartbeat_at), "what": "last heartbeat"})
    if task.finished_at is not None:
        events.append({"at": _iso(task.finished_at), "what": task.status.value,
                       "detail": task.reason})
    if task.not_before is not None and task.status is Status.FAILED:
        events.append({"at": _iso(task.not_before), "what": "retry due"})
    return sorted(events, key=lambda e: e["at"] or "")


def task_detail(store: TaskStore, task_id: str) -> dict[str, Any] | None:
    """One task for its page: the record with payload and result, its dependencies
    and dependents (id, kind, status) and its timeline; None when unknown.

    Raises:
        StoreError: the store failed.
    """
    task = store.get(task_id)
    if task is None:
        return None
    dependents = store.dependents(task_id) if isinstance(store, ReportsWork) else [
        t.id for t in store.list_tasks() if task_id in t.depends_on]
    return {**_task_row(task), "payload": task.payload, "result": task.result,
            "locks": task.locks, "parent_id": task.parent_id,
            "started_at": _iso(task.started_at), "heartbeat_at": _iso(task.heartbeat_at),
            "lease_expires_at": _iso(task.lease_expires_at),
            "depends_on": _brief(store, task.depends_on),
            "dependents": _brief(store, dependents), "timeline": _events(task)}


def _runs(store: TaskStore) -> list[dict[str, Any]]:
    if not isinstance(store, RunLedger):
        return []
    return [{"run_id": r.run_id, "agent": r.agent, "user_id": r.user_id, "status": r.status,
             "stop_reason": r.stop_reason, "created_at": _iso(r.created_at),
             "updated_at": _iso(r.updated_at)} for r in store.list_runs(limit=100)]


def _run_tree(store: TaskStore, run_id: str) -> dict[str, Any] | None:
    """A run as a tree: a durable agent run from its record and journal, or any other
    journaled run (a state machine's) as its steps."""
    from ..runtime import outline_run

    steps = store.list_steps(run_id) if hasattr(store, "list_steps") else []
    record = store.get_run(run_id) if isinstance(store, RunLedger) else None
    if record is not None:
        head, outline = outline_run(record, steps)
        return {"run_id": run_id, "status": record.status, "header": head,
                "lines": [{"depth": d, "text": t} for d, t in outline]}
    if not steps:
        return None
    start = steps[0].created_at
    lines: list[dict[str, Any]] = []
    for step in steps:
        offset = (f"  +{(step.created_at - start).total_seconds():.3f}s"
                  if start and step.created_at else "")
        lines.append({"depth": step.key.count("/"),
                      "text": f"{step.kind} {step.key}: {_short(step.result)}{offset}"})
    return {"run_id": run_id, "status": None, "header": [f"run {run_id}: {len(steps)} steps"],
            "lines": lines}


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                           default=str)
    return text if len(text) <= limit else text[:limit - 3] + "..."


class StatusServer:
    """The web page and its API over one store, in a thread pool of its own.

    Args:
        store: the store to show (it is used from several threads; the bundled stores
            allow that).
        host: the address to bind (default 127.0.0.1: this machine only).
        port: the TCP port (0: any free one; see :attr:`url`).
        allow_retry: show retry buttons and accept ``POST /api/retry``.
        metrics: serve ``/metrics`` (needs prometheus-client; None: when installed).

    Raises:
        OSError: the address cannot be bound.
    """

    def __init__(self, store: TaskStore, *, host: str = "127.0.0.1", port: int = 8710,
                 allow_retry: bool = False, metrics: bool | None = None) -> None:
        self.store = store
        self.allow_retry = allow_retry
        self.token = secrets.token_urlsafe(24)
        self.registry = self._registry(metrics)
        self._httpd = ThreadingHTTPServer((host, port), _handler(self))
        self._httpd.daemon_threads = True
        address = self._httpd.server_address
        self.host, self.port = str(address[0]), int(address[1])
        self._thread: threading.Thread | None = None

    def _registry(self, metrics: bool | None) -> Any:
        if metrics is False:
            return None
        from .metrics import metrics_registry

        try:
            registry, _ = metrics_registry(self.store, sink=False)
        except ImportError:
            if metrics:
                raise
            return None
        return registry

    @property
    def url(self) -> str:
        """The page's address, e.g. ``http://127.0.0.1:8710/``."""
        host = f"[{self.host}]" if ":" in str(self.host) else self.host
        return f"http://{host}:{self.port}/"

    def serve_forever(self) -> None:
        """Serve until :meth:`shutdown` (or Ctrl-C in the calling thread)."""
        self._httpd.serve_forever(poll_interval=0.25)

    def start(self) -> StatusServer:
        """Serve from a daemon thread; returns self."""
        self._thread = threading.Thread(target=self.serve_forever, daemon=True,
                                        name="foreperson-serve")
        self._thread.start()
        return self

    def shutdown(self) -> None:
        """Stop serving and close the socket (the store is left open)."""
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


def _static(name: str) -> bytes:
    return resources.files(__package__).joinpath("static", name).read_bytes()


_STATIC = {"app.js": "text/javascript; charset=utf-8", "app.css": "text/css; charset=utf-8"}


def _handler(server: StatusServer) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        app = server
    return Handler


class _Handler(BaseHTTPRequestHandler):
    app: StatusServer
    server_version = "foreperson"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        log.debug("%s %s", self.address_string(), format % args)

    # -- plumbing ----------------------------------------------------------------
    def _send(self, status: int, body: bytes, content_type: str,
              extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Content-Security-Policy", _CSP)
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, value: Any) -> None:
        body = json.dumps(value, ensure_ascii=False, default=str).encode()
        self._send(status, body, "application/json; charset=utf-8")

    def _error(self, status: HTTPStatus, message: str) -> None:
        self._json(status, {"error": message})

    def _host_ok(self) -> bool:
        """Only requests addressed to the bound address (defeats DNS rebinding)."""
        host = (self.headers.get("Host") or "").lower()
        bound = str(self.app.host).lower()
        allowed = {f"{bound}:{self.app.port}", f"[{bound}]:{self.app.port}"}
        if bound in ("127.0.0.1", "::1", "localhost"):
            allowed |= {f"localhost:{self.app.port}", f"127.0.0.1:{self.app.port}",
                        f"[::1]:{self.app.port}"}
        if bound in ("0.0.0.0", "::", ""):
            return bool(host)      # bound everywhere on purpose (--host): any name
        return host in allowed

    # -- GET -----------------------------------------------------------------------
    def do_HEAD(self) -> None:  # noqa: N802 - the base class's name
        self.do_GET()

    def do_GET(self) -> None:  # noqa: N802 - the base class's name
        if not self._host_ok():
            self._error(HTTPStatus.MISDIRECTED_REQUEST, "unknown Host")
            return
        url = urlsplit(self.path)
        path = url.path
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        try:
            self._get(path, query)
        except StoreError as exc:
            self._error(HTTPStatus.SERVICE_UNAVAILABLE, f"store unavailable: {exc}")

    def _get(self, path: str, query: dict[str, str]) -> None:
        store = self.app.store
        run_id = query.get("run") or None
        if path in ("/", "/runs") or path.startswith(("/task/", "/runs/")):
            self._page()
        elif path.startswith("/static/") and path[8:] in _STATIC:
            self._send(HTTPStatus.OK, _static(path[8:]), _STATIC[path[8:]],
                       {"Cache-Control": "max-age=300"})
        elif path == "/api/snapshot":
            self._json(HTTPStatus.OK, {**snapshot(store, run_id=run_id),
                                       "allow_retry": self.app.allow_retry})
        elif path == "/api/history":
            self._json(HTTPStatus.OK, history(store, run_id=run_id))
        elif path == "/api/tasks":
            self._page_of_problems(query, run_id)
        elif path.startswith("/api/task/"):
            self._found(task_detail(store, unquote(path[len("/api/task/"):])), "no such task")
        elif path == "/api/runs":
            self._json(HTTPStatus.OK, _runs(store))
        elif path.startswith("/api/runs/"):
            self._found(_run_tree(store, unquote(path[len("/api/runs/"):])), "no such run")
        elif path == "/metrics":
            self._metrics()
        else:
            self._error(HTTPStatus.NOT_FOUND, "not found")

    def _page_of_problems(self, query: dict[str, str], run_id: str | None) -> None:
        """``/api/tasks?status=dead|failed&offset=N[&limit=M][&run=ID]``: a page of the
        DEAD or FAILED tasks, the newest first."""
        try:
            status = Status(query.get("status", "dead"))
            offset = int(query.get("offset", "0"))
            limit = int(query.get("limit", str(PROBLEMS_SHOWN)))
        except ValueError:
            self._error(HTTPStatus.BAD_REQUEST, "status is dead or failed; offset and limit "
                        "are whole numbers")
            return
        if status not in (Status.DEAD, Status.FAILED) or offset < 0 or not 0 < limit <= 500:
            self._error(HTTPStatus.BAD_REQUEST, "status is dead or failed, offset >= 0, "
                        "0 < limit <= 500")
            return
        rows = problems(self.app.store, status, run_id=run_id, limit=limit, offset=offset)
        self._json(HTTPStatus.OK, {"status": status.value, "offset": offset, "tasks": rows,
                                   "allow_retry": self.app.allow_retry})

    def _found(self, value: dict[str, Any] | None, missing: str) -> None:
        if value is None:
            self._error(HTTPStatus.NOT_FOUND, missing)
        else:
            self._json(HTTPStatus.OK, {**value, "allow_retry": self.app.allow_retry})

    def _page(self) -> None:
        page = _static("index.html").decode()
        token = self.app.token if self.app.allow_retry else ""
        page = page.replace("{{TOKEN}}", token).replace(
            "{{ALLOW_RETRY}}", "true" if self.app.allow_retry else "false")
        self._send(HTTPStatus.OK, page.encode(), "text/html; charset=utf-8")

    def _metrics(self) -> None:
        if self.app.registry is None:
            self._send(HTTPStatus.NOT_IMPLEMENTED,
                       b"metrics need prometheus-client: pip install 'foreperson[observe]'\n",
                       "text/plain; charset=utf-8")
            return
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        self._send(HTTPStatus.OK, generate_latest(self.app.registry), CONTENT_TYPE_LATEST)

    # -- POST ------------------------------------------------------------------------
    def do_POST(self) -> None:  # noqa: N802 - the base class's name
        if urlsplit(self.path).path != "/api/retry" or not self.app.allow_retry:
            self._error(HTTPStatus.NOT_FOUND if not self.app.allow_retry
                        else HTTPStatus.NOT_FOUND, "read-only (start with --allow-retry)")
            return
        problem = self._forged()
        if problem is not None:
            self._error(HTTPStatus.FORBIDDEN, problem)
            return
        try:
            length = min(int(self.headers.get("Content-Length") or 0), 1 << 20)
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self._error(HTTPStatus.BAD_REQUEST, "the body must be JSON")
            return
        ids = body.get("ids") if isinstance(body, dict) else None
        every = isinstance(body, dict) and body.get("all") is True
        if every == bool(ids) or (ids is not None and not (
                isinstance(ids, list) and all(isinstance(i, str) for i in ids))):
            self._error(HTTPStatus.BAD_REQUEST, 'send {"ids": [...]} or {"all": true}')
            return
        try:
            revived = self.app.store.retry_dead(None if every else ids)
        except StoreError as exc:
            self._error(HTTPStatus.SERVICE_UNAVAILABLE, f"store unavailable: {exc}")
            return
        log.info("revived %d DEAD task(s) from the web page", len(revived))
        self._json(HTTPStatus.OK, {"revived": revived})

    def _forged(self) -> str | None:
        """Why this POST may come from another site, or None: it must be addressed to
        this server, come from its own page (Origin), be JSON (a cross-site form cannot
        send that without a preflight this server never grants) and carry the token."""
        if not self._host_ok():
            return "unknown Host"
        origin = self.headers.get("Origin")
        if origin is not None and origin.rstrip("/") != f"http://{self.headers.get('Host')}":
            return "cross-origin request refused"
        if (self.headers.get("Content-Type") or "").split(";")[0].strip() != "application/json":
            return "the body must be application/json"
        token = self.headers.get("X-Foreperson-Token") or ""
        if not hmac.compare_digest(token.encode(), self.app.token.encode()):
            return "missing or wrong token (reload the page)"
        return None
