"""``foreperson status``: counts by status, workers, the oldest unfinished task."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from ..work.store import ReportsWork, StoreStats
from ..work.task import Status, Task

if TYPE_CHECKING:
    from ..work.metrics import TimelinePoint
from ._common import DB_HELP, DSN_HELP, SCHEMA_HELP, open_store, shown, where


def status(
    db: Annotated[Optional[str], typer.Option(help=DB_HELP)] = None,  # noqa: UP045
    dsn: Annotated[Optional[str], typer.Option(help=DSN_HELP)] = None,  # noqa: UP045
    schema: Annotated[Optional[str], typer.Option(help=SCHEMA_HELP)] = None,  # noqa: UP045
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    points: Annotated[int, typer.Option(
        min=1, max=100,
        help="Rows in the tasks-over-time table.")] = 8,
    watch: Annotated[bool, typer.Option(
        "--watch",
        help="Redraw the three numbers as terminal charts every --interval seconds until "
             "Ctrl-C.")] = False,
    interval: Annotated[float, typer.Option(
        min=0.1, max=3600.0,
        help="Seconds between redraws with --watch.")] = 1.0,
    run: Annotated[Optional[str], typer.Option(help="With --watch: only this run's tasks.")] = None,  # noqa: UP045
    frames: Annotated[Optional[int], typer.Option(min=1, hidden=True)] = None,  # noqa: UP045
) -> None:
    """Show tasks by status (now, and over the last hour of activity), the live workers
    with what they hold and did, the age of the oldest unfinished task, and the newest
    DEAD tasks with their errors. It reads aggregates and indexes only, so it answers as
    fast with a year of history as with an empty store. With --watch, redraw them as live
    terminal charts."""
    from ..observe.workers import held_tasks, live_workers

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
        dead = store.list_tasks(status=Status.DEAD, limit=20, newest_first=True)
        history = store.history(points=points) if isinstance(store, ReportsWork) else []
        held = held_tasks(store)
        workers = live_workers(store, stats, held)
    finally:
        store.close()
    if as_json:
        typer.echo(json.dumps({
            "source": source,
            "counts": {s.value: n for s, n in stats.counts.items()},
            "active_by_worker": stats.active_by_worker,
            "workers": workers,
            "workers_last_seen": {w["name"]: w["last_heartbeat"] for w in workers
                                  if w["last_heartbeat"]},
            "workers_health": {w["name"]: w["health"] for w in workers},
            "oldest_unfinished_age_s": stats.oldest_unfinished_age_s,
            "dead": [{"id": t.id, "kind": t.kind, "reason": t.reason, "error": t.error}
                     for t in dead],
            "history": [{"at": p.at.isoformat(), "unfinished": p.unfinished,
                         "completed": p.completed, "dead": p.dead} for p in history],
        }))
        return
    _print(source, stats, workers, history, dead)


def _print(source: str, stats: StoreStats, workers: list[dict[str, Any]],
           history: list[TimelinePoint], dead: list[Task]) -> None:
    from rich.console import Console

    console = Console()
    console.print(_counts_table(source, stats))
    age = stats.oldest_unfinished_age_s
    console.print("oldest unfinished task: " + ("none" if age is None else f"{age:.1f} s old"))
    for table in (_workers_table(workers) if workers else None,
                  _history_table(history) if history else None,
                  _dead_table(stats, dead) if dead else None):
        if table is not None:
            console.print(table)


def _counts_table(source: str, stats: StoreStats) -> Any:
    from rich.table import Table

    counts = Table(title=shown(f"{stats.total} tasks in {source}"))
    for s in Status:
        counts.add_column(s.value, justify="right")
    counts.add_row(*(str(stats.counts[s]) for s in Status))
    return counts


def _workers_table(workers: list[dict[str, Any]]) -> Any:
    from rich.table import Table

    table = Table(title="workers")
    for col in ("worker", "active", "completed", "failed", "last heartbeat", "health"):
        table.add_column(col, justify="right" if col in ("active", "completed", "failed")
                         else "left")
    for w in workers:
        beat = w["last_heartbeat"]
        table.add_row(shown(w["name"]), str(w["active"]), str(w["completed"]), str(w["failed"]),
                      beat[:19].replace("T", " ") if beat else "-", w["health"])
    return table


def _history_table(history: list[TimelinePoint]) -> Any:
    from rich.table import Table

    over = Table(title="tasks over time (the last hour of activity)")
    for col in ("at (UTC)", "unfinished", "completed", "dead"):
        over.add_column(col, justify="right")
    for p in history:
        over.add_row(p.at.strftime("%H:%M:%S"), str(p.unfinished), str(p.completed),
                     str(p.dead))
    return over


def _dead_table(stats: StoreStats, dead: list[Task]) -> Any:
    from rich.table import Table

    how_many = (f"the newest {len(dead)} of {stats.counts[Status.DEAD]}"
                if stats.counts[Status.DEAD] > len(dead) else f"{len(dead)}")
    table = Table(title=f"DEAD tasks, {how_many} shown (foreperson retry puts them back)")
    table.add_column("id", overflow="fold", no_wrap=False)   # whole: for `retry ID`
    for col in ("kind", "attempts", "why", "error"):
        table.add_column(col)
    for t in dead:
        table.add_row(shown(t.id), shown(t.kind), str(t.attempts),
                      (t.reason or "").replace("_", " "), shown((t.error or "")[:120]))
    return table


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
    app.command()(status)
