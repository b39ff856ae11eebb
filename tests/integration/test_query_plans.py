"""On a store that holds months of history, every statement a running supervisor or
worker executes, and every monitoring read, is served by an index (issue 18): a full
scan of the tasks, their edges, the journal, the runs or the effects cannot come back
unseen.

The workload is real (a supervisor pushing work with dependencies, locks, retries, a
DEAD task and its parked dependents, heartbeats and sweeps; then a worker process
pulling; then the page, ``status`` and ``/metrics`` reads; then a prune of the older
half of the history). SQLite: every statement is
traced and explained (``EXPLAIN QUERY PLAN``). PostgreSQL: ``auto_explain`` reports the
plan each statement actually ran with, nested ones (inside ``claim_tasks`` and the
triggers) included.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections import Counter

import anyio
import pytest

from foreperson.observe.metrics import StoreCollector
from foreperson.observe.server import RunScope, problems, snapshot, task_detail
from foreperson.observe.workers import live_workers
from foreperson.testing import FillPlan, fill_history
from foreperson.work import RunReport, SqliteStore, Status, Supervisor, Task, Worker
from foreperson.work.process import process_supervisor
from foreperson.work.retention import Retention

HISTORY = FillPlan(60_000, agent_runs_per_night=150, effects=20_000, tombstones=20_000)

# tables that grow with history; a scan of one is a full scan (worker_counts, lock_slots,
# task_counts, workers and clock stay small: a row per worker, lock, kind or process)
BIG = {"tasks", "task_deps", "steps", "runs", "effects", "task_history", "pruned_tasks",
       "task_locks"}
# partial indexes that hold the unfinished only: scanning one costs the work at hand
BOUNDED = {"tasks_claimable", "tasks_claimable_kind", "tasks_active"}


def workload(store) -> list[RunReport]:
    """What a deployment does in a night, with every kind of transition."""
    tries: Counter[str] = Counter()

    async def work(task: Task) -> dict:
        tries[task.id] += 1
        if task.payload.get("fail") == "once" and tries[task.id] == 1:
            raise TimeoutError("the model did not answer")
        if task.payload.get("fail") == "always":
            raise ValueError("this payload can never work")
        await anyio.sleep(0.03)
        return {"n": tries[task.id]}

    sup = Supervisor(store, stale_after=5, sweep_every_s=0.02, heartbeat_every_s=0.02,
                     backoff_base_s=0.01, backoff_cap_s=0.02)
    sup.register(Worker("tonight-1", {"k"}, fn=work, concurrency=4))
    sup.register(Worker("tonight-2", {"k"}, fn=work, concurrency=4))
    tasks = [Task("k", id=f"plain-{i}", run_id="tonight") for i in range(30)]
    tasks += [Task("k", id="a", run_id="tonight"),
              Task("k", id="b", depends_on=["a"], run_id="tonight"),
              Task("k", id="c", depends_on=["b"], run_id="tonight")]
    tasks += [Task("k", id=f"locked-{i}", locks=["row:1"], run_id="tonight")
              for i in range(4)]
    tasks += [Task("k", {"fail": "once"}, id=f"flaky-{i}", run_id="tonight")
              for i in range(3)]
    tasks += [Task("k", {"fail": "always"}, id="bad", max_attempts=1, run_id="tonight"),
              Task("k", id="after-bad", depends_on=["bad"], run_id="tonight")]
    sup.add_tasks(tasks)
    reports = [sup.run_sync(run_id="tonight")]
    store.retry_dead(["bad"])                               # a person retries it
    reports.append(sup.run_sync())
    pulled = process_supervisor(store, Worker("host:123", {"k"}, fn=work, concurrency=4),
                                stale_after=5)
    store.add([Task("k", id=f"pulled-{i}", run_id="pulled") for i in range(20)])
    reports.append(pulled.run_sync())
    return reports


def retention(store) -> None:
    """A prune of the older half of the history (its own statements: the candidates, the
    runs' checks, the removal, the ledger, the aggregates)."""
    # small transactions: with a big share of these tables in one, scanning them would
    # be the right plan; with a year in the store, it never is
    report = store.prune(Retention(10 * 86400.0, batch=20, transaction_s=0.001),
                         max_seconds=3)
    assert report.tasks > 0


def monitoring(store) -> None:
    """Every read of the page, ``status``, ``status --watch`` and ``/metrics``."""
    stats = store.stats()
    store.stats(run_id="tonight")
    store.counts_by_kind()
    store.counts_by_kind(run_id="tonight")
    store.history()
    store.history(run_id="tonight")
    store.mean_durations()
    snapshot(store)
    snapshot(store, run_id="tonight")
    snapshot(store, scope=RunScope(user="user-007"))      # a page with users: run rules
    snapshot(store, run_id="tonight", scope=RunScope())
    store.has_steps("agent-0000042")
    problems(store, Status.DEAD, offset=50)
    live_workers(store, stats)
    list(StoreCollector(store).collect())
    task_detail(store, "T00000042/draft")
    store.list_tasks(status=Status.DEAD, limit=20, newest_first=True)
    store.list_tasks(status=Status.PENDING, limit=500)
    store.list_runs(limit=100)
    store.list_runs(user_id="user-007", limit=100)
    store.list_steps("agent-0000042")
    store.get_run("agent-0000042")


def test_sqlite_statements_on_the_run_path_and_of_monitoring_use_indexes(tmp_path):
    store = SqliteStore(tmp_path / "year.db")
    fill_history(store, HISTORY)
    seen: list[str] = []
    store._conn.set_trace_callback(seen.append)
    reports = workload(store)
    monitoring(store)
    retention(store)
    store._conn.set_trace_callback(None)
    assert [r.stats.unfinished for r in reports] == [0, 0, 0]
    assert store.get("after-bad").reason == "dependency_dead"      # parked, twice

    statements = {s for s in seen if s.split(None, 1)[0].upper() in (
        "SELECT", "UPDATE", "DELETE", "INSERT", "WITH")}
    assert len(statements) > 30
    bad = {}
    for sql in sorted(statements):
        plan = [row[3] for row in store._conn.execute(   # (an expanded -inf is not SQL)
            "EXPLAIN QUERY PLAN " + sql.replace("-Inf", "-9e999"))]
        full = _sqlite_full_scans(sql, plan)
        if full:
            bad[sql[:300]] = full
    store.close()
    assert bad == {}


def _sqlite_full_scans(sql: str, plan: list[str]) -> list[str]:
    aliases = {}
    for table, alias in re.findall(
            r"\b(?:FROM|JOIN|UPDATE|INTO)\s+(\w+)(?:\s+(?:AS\s+)?(\w+))?", sql, re.I):
        aliases[table] = table
        if alias and alias.upper() not in ("WHERE", "SET", "ON", "USING", "VALUES", "AS",
                                           "ORDER", "GROUP", "LIMIT", "JOIN", "LEFT"):
            aliases[alias] = table
    # an index walked in its order and stopped by a LIMIT reads what it returns
    ordered = (re.search(r"ORDER BY .* LIMIT", sql, re.I | re.S) is not None
               and not any("TEMP B-TREE FOR ORDER BY" in step for step in plan))
    out = []
    for step in plan:
        match = re.match(r"SCAN (\w+)(?: USING (?:COVERING )?INDEX (\w+))?", step)
        if match and aliases.get(match.group(1), match.group(1)) in BIG \
                and match.group(2) not in BOUNDED and not (ordered and match.group(2)):
            out.append(step)
    return out


@pytest.mark.postgres
def test_postgres_plans_on_the_run_path_and_of_monitoring_use_indexes(pg_dsn, pg_schema,
                                                                       monkeypatch):
    import psycopg

    from foreperson.work.stores.postgres import PostgresStore

    filled = PostgresStore(pg_dsn, schema=pg_schema)
    fill_history(filled, HISTORY)
    filled.close()

    plans: list[dict] = []

    def keep(diag) -> None:
        text = diag.message_primary or ""
        if "plan:" in text:
            plans.append(json.loads(text.split("plan:", 1)[1]))

    connect = psycopg.Connection.connect.__func__

    def connect_and_listen(cls, *args, **kwargs):
        conn = connect(cls, *args, **kwargs)
        conn.add_notice_handler(keep)
        return conn

    monkeypatch.setattr(psycopg.Connection, "connect", classmethod(connect_and_listen))
    options = ("-c session_preload_libraries=auto_explain -c auto_explain.log_min_duration=0 "
               "-c auto_explain.log_nested_statements=on -c auto_explain.log_level=notice "
               "-c auto_explain.log_format=json -c client_min_messages=notice")
    dsn = pg_dsn + ("&" if "?" in pg_dsn else "?") + "options=" + urllib.parse.quote(options)
    store = PostgresStore(dsn, schema=pg_schema, pool_size=12)
    try:
        reports = workload(store)
        monitoring(store)
        retention(store)
    finally:
        store.close()
    assert [r.stats.unfinished for r in reports] == [0, 0, 0]
    assert len(plans) > 100
    bad: dict[str, list[str]] = {}
    for plan in plans:
        full = list(_pg_full_scans(plan["Plan"]))
        if full:
            bad.setdefault(" ".join(plan["Query Text"].split())[:300], full)
    assert bad == {}


def _pg_full_scans(node: dict, limited: bool = False):
    """Full scans of a big table in a plan: a sequential scan, or an index read whole
    (no condition, not a bounded partial index, and not walked in order under a LIMIT,
    which stops it at what it returns)."""
    kind, table = node.get("Node Type"), node.get("Relation Name")
    if table in BIG:
        if kind == "Seq Scan":
            yield f"Seq Scan on {table}"
        elif kind in ("Index Scan", "Index Only Scan") and "Index Cond" not in node \
                and node.get("Index Name") not in BOUNDED and not limited:
            yield f"{kind} of all of {node.get('Index Name')}"
    for child in node.get("Plans", []):
        yield from _pg_full_scans(child, kind == "Limit")
