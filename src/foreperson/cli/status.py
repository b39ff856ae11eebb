"""``foreperson status``: counts by status, workers, the oldest unfinished task."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer

from ..work.metrics import timeline
from ..work.task import Status
from ._common import DB_HELP, DSN_HELP, open_store


def status(
    db: Annotated[Optional[str], typer.Option(help=DB_HELP)] = None,  # noqa: UP045
    dsn: Annotated[Optional[str], typer.Option(help=DSN_HELP)] = None,  # noqa: UP045
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    points: Annotated[int, typer.Option(min=1, max=100, help="Rows in the tasks-over-time table.")] = 8,
) -> None:
    """Show tasks by status (now and over time), active tasks per worker, the age of the
    oldest unfinished task, and the DEAD tasks with their errors."""
    store = open_store(db, dsn, must_exist=True)
    try:
        stats = store.stats()
        dead = store.list_tasks(status=Status.DEAD, limit=20)
        history = timeline(store.list_tasks(), points)
    finally:
        store.close()
    if as_json:
        typer.echo(json.dumps({
            "counts": {s.value: n for s, n in stats.counts.items()},
            "active_by_worker": stats.active_by_worker,
            "workers_last_seen": {k: v.isoformat() for k, v in stats.workers.items()},
            "oldest_unfinished_age_s": stats.oldest_unfinished_age_s,
            "dead": [{"id": t.id, "kind": t.kind, "error": t.error} for t in dead],
        }))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    counts = Table(title=f"{stats.total} tasks")
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
        for name in sorted(set(stats.active_by_worker) | set(stats.workers)):
            seen = stats.workers.get(name)
            workers.add_row(name, str(stats.active_by_worker.get(name, 0)),
                            seen.isoformat(timespec="seconds") if seen else "")
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
        for col in ("id", "kind", "attempts", "error"):
            table.add_column(col)
        for t in dead:
            table.add_row(t.id, t.kind, str(t.attempts), (t.error or "")[:120])
        console.print(table)


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
    app.command()(status)
