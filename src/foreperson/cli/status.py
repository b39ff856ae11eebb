"""``foreperson status``: counts by status, workers, the oldest unfinished task."""

from __future__ import annotations

import json
import socket
from typing import Annotated, Optional

import typer

from ..work.metrics import timeline
from ..work.store import StoreStats
from ..work.task import Status, Task
from ._common import DB_HELP, DSN_HELP, SCHEMA_HELP, open_store, where


def status(
    db: Annotated[Optional[str], typer.Option(help=DB_HELP)] = None,  # noqa: UP045
    dsn: Annotated[Optional[str], typer.Option(help=DSN_HELP)] = None,  # noqa: UP045
    schema: Annotated[Optional[str], typer.Option(help=SCHEMA_HELP)] = None,  # noqa: UP045
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    points: Annotated[int, typer.Option(min=1, max=100, help="Rows in the tasks-over-time table.")] = 8,
    watch: Annotated[bool, typer.Option("--watch", help="Redraw the three numbers as terminal charts every --interval seconds until Ctrl-C.")] = False,
    interval: Annotated[float, typer.Option(min=0.1, max=3600.0, help="Seconds between redraws with --watch.")] = 1.0,
    run: Annotated[Optional[str], typer.Option(help="With --watch: only this run's tasks.")] = None,  # noqa: UP045
    frames: Annotated[Optional[int], typer.Option(min=1, hidden=True)] = None,  # noqa: UP045
) -> None:
    """Show tasks by status (now and over time), active tasks per worker, the age of the
    oldest unfinished task, and the DEAD tasks with their errors. With --watch, redraw
    them as live terminal charts."""
    store = open_store(db, dsn, must_exist=True, schema=schema)
    if watch:
        from ..observe.watch import watch as watch_store

        try:
            watch_store(store, interval_s=interval, run_id=run, frames=frames)
        finally:
            store.close()
        return
    source = where(store, db)
    try:
        stats = store.stats()
        dead = store.list_tasks(status=Status.DEAD, limit=20)
        history = timeline(store.list_tasks(), points)
        held = store.list_tasks(status=Status.ASSIGNED) + store.list_tasks(status=Status.RUNNING)
    finally:
        store.close()
    health = worker_health(stats, held)
    if as_json:
        typer.echo(json.dumps({
            "source": source,
            "counts": {s.value: n for s, n in stats.counts.items()},
            "active_by_worker": stats.active_by_worker,
            "workers_last_seen": {k: v.isoformat() for k, v in stats.workers.items()},
            "workers_health": health,
            "oldest_unfinished_age_s": stats.oldest_unfinished_age_s,
            "dead": [{"id": t.id, "kind": t.kind, "reason": t.reason, "error": t.error}
                     for t in dead],
        }))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    counts = Table(title=f"{stats.total} tasks in {source}")
    for s in Status:
        counts.add_column(s.value, justify="right")
    counts.add_row(*(str(stats.counts[s]) for s in Status))
    console.print(counts)
    age = stats.oldest_unfinished_age_s
    console.print("oldest unfinished task: " + ("none" if age is None else f"{age:.1f} s old"))
    if stats.active_by_worker or stats.workers:
        workers = Table(title="workers")
        workers.add_column("worker")
        workers.add_column("active", justify="right")
        workers.add_column("last seen")
        workers.add_column("health")
        for name in sorted(set(stats.active_by_worker) | set(stats.workers)):
            seen = stats.workers.get(name)
            workers.add_row(name, str(stats.active_by_worker.get(name, 0)),
                            seen.isoformat(timespec="seconds") if seen else "-",
                            health.get(name, ""))
        console.print(workers)
    if history:
        over = Table(title="tasks over time")
        for col in ("at (UTC)", "waiting", "running", "completed", "dead"):
            over.add_column(col, justify="right")
        for p in history:
            over.add_row(p.at.strftime("%H:%M:%S"), str(p.waiting), str(p.running),
                         str(p.completed), str(p.dead))
        console.print(over)
    if dead:
        shown = (f"{len(dead)} of {stats.counts[Status.DEAD]}"
                 if stats.counts[Status.DEAD] > len(dead) else f"{len(dead)}")
        table = Table(title=f"DEAD tasks, {shown} shown (foreperson retry puts them back)")
        table.add_column("id", overflow="fold", no_wrap=False)   # whole: for `retry ID`
        for col in ("kind", "attempts", "why", "error"):
            table.add_column(col)
        for t in dead:
            table.add_row(t.id, t.kind, str(t.attempts), (t.reason or "").replace("_", " "),
                          (t.error or "")[:120])
        console.print(table)


STALE_WORKER_S = 30.0
"""A worker process that has not recorded a heartbeat for this long is shown as stale."""


def worker_health(stats: StoreStats, held: list[Task]) -> dict[str, str]:
    """Per worker: ``"ok"``, or why it looks dead: every lease it holds has expired (the
    next sweep by any process takes them back), or its process stopped heartbeating.

    Args:
        stats: the store's snapshot (``workers``: last heartbeat per process).
        held: the ASSIGNED and RUNNING tasks.

    Returns:
        worker name -> a short, readable verdict.
    """
    out: dict[str, str] = {}
    by_worker: dict[str, list[Task]] = {}
    for task in held:
        by_worker.setdefault(task.assigned_to or "?", []).append(task)
    for name in set(by_worker) | set(stats.workers):
        tasks = by_worker.get(name, [])
        expiries = [t.lease_expires_at for t in tasks if t.lease_expires_at is not None]
        seen = stats.workers.get(name)
        if expiries and max(expiries) < stats.now:
            ago = (stats.now - max(expiries)).total_seconds()
            out[name] = (f"stale: its leases expired {ago:.0f} s ago (presumed dead; the "
                         "next sweep takes its tasks back)")
        elif _local_process_gone(name):
            out[name] = ("stale: its process on this machine is gone (its leases expire, "
                         "then any sweep takes its tasks back)")
        elif seen is not None and (stats.now - seen).total_seconds() > STALE_WORKER_S:
            out[name] = (f"stale: no heartbeat for {(stats.now - seen).total_seconds():.0f} s")
        else:
            out[name] = "ok"
    return out


def _local_process_gone(name: str) -> bool:
    """For a worker named ``[prefix@]host:pid[:...]`` of this machine: whether that
    process has ended."""
    from ..work.process import process_gone

    parts = name.split("@", 1)[-1].split(":")
    return (len(parts) >= 2 and parts[0] == socket.gethostname() and parts[1].isdigit()
            and process_gone(int(parts[1])))


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
    app.command()(status)
