"""The live workers, as ``foreperson status`` and the page show them.

A worker is shown when it holds tasks, or when its process recorded a heartbeat or it
finished a task in the last :data:`GONE_AFTER_S` seconds (so a worker that just died is
still shown, as stale, and the workers of a run that just ended, as finished). Workers
that are gone and hold nothing drop out of the table; what they did stays in
the store's per-worker counts (``worker_totals``). Everything here reads the held tasks
and the worker table only: its cost is the size of the table it draws.
"""

from __future__ import annotations

import socket
from datetime import datetime
from typing import Any

from ..work.store import ReportsWork, StoreStats, TaskStore, TracksWorkers
from ..work.task import Status, Task

__all__ = ["GONE_AFTER_S", "STALE_WORKER_S", "held_tasks", "live_workers", "worker_health"]

STALE_WORKER_S = 30.0
"""A worker process that has not recorded a heartbeat for this long is shown as stale."""

GONE_AFTER_S = 600.0
"""A worker that holds nothing and has neither recorded a heartbeat nor finished a task
for this long is no longer shown (seconds)."""


def held_tasks(store: TaskStore, run_id: str | None = None) -> list[Task]:
    """The ASSIGNED and RUNNING tasks (of one run, or of the store): an index read of
    the work in hand."""
    return (store.list_tasks(status=Status.ASSIGNED, run_id=run_id)
            + store.list_tasks(status=Status.RUNNING, run_id=run_id))


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


def live_workers(store: TaskStore, stats: StoreStats,
                 held: list[Task] | None = None) -> list[dict[str, Any]]:
    """The live workers, by name: ``name``, ``process`` (host:pid or None),
    ``last_heartbeat`` (ISO time or None), ``active``, ``completed``, ``failed`` (their
    counts so far), ``health``.

    Args:
        store: the store (its worker table and per-worker counts, when it keeps them).
        stats: its snapshot (active tasks per worker, last heartbeat per process).
        held: the ASSIGNED and RUNNING tasks (read when None).
    """
    held = held_tasks(store) if held is None else held
    health = worker_health(stats, held)
    records = {w.name: w for w in store.list_workers()} if isinstance(store, TracksWorkers) \
        else {}
    last_beat: dict[str, datetime] = {}
    for task in held:
        if task.assigned_to and task.heartbeat_at is not None:
            seen = last_beat.get(task.assigned_to)
            last_beat[task.assigned_to] = max(seen, task.heartbeat_at) if seen else \
                task.heartbeat_at
    recent = stats.now.timestamp() - GONE_AFTER_S
    names = set(stats.active_by_worker) | {
        name for name, record in records.items() if record.heartbeat_at.timestamp() >= recent}
    totals = {}
    if isinstance(store, ReportsWork):       # and those that did work lately (a run ended)
        totals = store.worker_totals(since=recent)
        names |= set(totals)
        missing = names - set(totals)
        if missing:
            totals.update(store.worker_totals(missing))
    out = []
    for name in sorted(names):
        record = records.get(name)
        beat = record.heartbeat_at if record is not None else last_beat.get(name)
        total = totals.get(name)
        out.append({
            "name": name,
            "process": (f"{record.host}:{record.pid}" if record is not None and record.host
                        else None),
            "last_heartbeat": None if beat is None else beat.isoformat(),
            "active": stats.active_by_worker.get(name, 0),
            "completed": total.completed if total else 0,
            "failed": total.failed if total else 0,
            "health": health.get(name, "finished" if not stats.active_by_worker.get(name)
                                 else "ok"),
        })
    return out
