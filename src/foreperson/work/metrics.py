"""The three numbers seed 000 says to instrument from the start.

* tasks by status over time (is the run converging?),
* per-worker active count (is distribution balancing?),
* age of the oldest unfinished task (a stuck task shows as an age that only climbs).

The live values come from :meth:`TaskStore.stats`; :func:`timeline` rebuilds the
history afterwards from the records' own timestamps, so it needs no extra table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from .task import Status, Task

__all__ = ["TimelinePoint", "timeline"]


@dataclass(frozen=True)
class TimelinePoint:
    """Task counts at one instant.

    Attributes:
        at: the instant (UTC).
        waiting: created, not started.
        running: started, not finished (includes attempts that later failed).
        completed: finished COMPLETED by then.
        dead: finished DEAD by then.
    """

    at: datetime
    waiting: int
    running: int
    completed: int
    dead: int


def timeline(tasks: Sequence[Task], points: int = 10,
             until: datetime | None = None) -> list[TimelinePoint]:
    """Tasks by status over time, from ``created_at`` / ``started_at`` / ``finished_at``.

    Args:
        tasks: the records (e.g. ``store.list_tasks()``).
        points: number of evenly spaced instants, from the first creation to ``until``.
        until: the last instant (default: the latest timestamp seen).

    Returns:
        ``points`` :class:`TimelinePoint` values (empty when there are no tasks).
    """
    if not tasks or points < 1:
        return []
    stamps = [t for task in tasks for t in (task.created_at, task.started_at, task.finished_at)
              if t is not None]
    first = min(t.created_at for t in tasks if t.created_at is not None)
    last = until or max(stamps)
    span = (last - first) / max(points - 1, 1)
    out = []
    for i in range(points):
        at = first + span * i
        waiting = running = completed = dead = 0
        for task in tasks:
            if task.created_at is None or task.created_at > at:
                continue
            if task.finished_at is not None and task.finished_at <= at:
                if task.status is Status.COMPLETED:
                    completed += 1
                else:
                    dead += 1
            elif task.started_at is not None and task.started_at <= at:
                running += 1
            else:
                waiting += 1
        out.append(TimelinePoint(at, waiting, running, completed, dead))
    return out
