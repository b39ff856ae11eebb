"""The three numbers seed 000 says to instrument from the start, and their history.

* tasks by status over time (is the run converging?),
* per-worker active count (is distribution balancing?),
* age of the oldest unfinished task (a stuck task shows as an age that only climbs).

The live values come from :meth:`TaskStore.stats`. The history is rebuilt from
*changes*: each change says that the count of unfinished, COMPLETED or DEAD tasks moved
by ``n`` during one second. The counts at an instant are the counts now minus every
change after that instant, so a chart of the last hour reads the last hour's changes and
nothing older, however long the store has run. The SQL stores keep those changes in a
table their triggers fill (``task_history``); :func:`changes_of` derives them from task
records (one run's tasks, or the memory store's).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from .task import Status, Task, from_epoch, to_epoch

__all__ = ["CHART", "HISTORY_KEPT_S", "HISTORY_WINDOW_S", "QUIET_GAP_S", "Change",
           "TimelinePoint", "changes_of", "chart_counts", "default_until", "history_points",
           "history_window", "timeline"]

CHART = ("unfinished", "completed", "dead")
"""What a history counts: tasks not finished yet (any status but COMPLETED and DEAD),
COMPLETED and DEAD."""

Change = tuple[int, str, int]
"""``(epoch second, what, n)``: the count of ``what`` (one of :data:`CHART`) moved by
``n`` in that second."""

HISTORY_WINDOW_S = 3600.0
"""The span a history shows by default: the last hour of activity."""

HISTORY_KEPT_S = 7 * 86400.0
"""Seconds of changes a store always keeps (``prune`` removes older ones): the longest
span a history chart can show."""

QUIET_GAP_S = 300.0
"""A pause this long (seconds) in the default window starts the chart after it."""


@dataclass(frozen=True)
class TimelinePoint:
    """Task counts at one instant.

    Attributes:
        at: the instant (UTC).
        unfinished: tasks created by then and not finished (PENDING, ASSIGNED, RUNNING
            or FAILED).
        completed: COMPLETED by then.
        dead: DEAD by then.
    """

    at: datetime
    unfinished: int
    completed: int
    dead: int


def chart_counts(counts: Mapping[Status, int]) -> dict[str, int]:
    """Counts by status as a history counts them (:data:`CHART`)."""
    return {"unfinished": sum(n for s, n in counts.items() if not s.finished),
            "completed": counts.get(Status.COMPLETED, 0), "dead": counts.get(Status.DEAD, 0)}


def history_points(now_counts: Mapping[Status, int], changes: Iterable[Change],
                   since: float, until: float, points: int) -> list[TimelinePoint]:
    """Counts at ``points`` instants evenly spaced from ``since`` to ``until``.

    Args:
        now_counts: the counts by status now (after every change).
        changes: every change after ``since`` (older ones are not needed); a change in
            second ``s`` counts as made at ``s``, so after an instant ``t`` when ``s > t``.
        since: the first instant, epoch seconds.
        until: the last instant, epoch seconds (>= ``since``).
        points: how many instants (>= 1).

    Returns:
        the points, oldest first.
    """
    points = max(1, points)
    step = (until - since) / max(points - 1, 1)
    instants = [since + step * i for i in range(points)] if until > since else [until]
    instants[-1] = until            # exactly: a sum of steps may land a hair before it
    pending = sorted(changes, key=lambda c: c[0], reverse=True)
    counts = chart_counts(now_counts)
    out: list[TimelinePoint] = []
    i = 0
    for at in reversed(instants):
        while i < len(pending) and pending[i][0] > at:
            _, what, n = pending[i]
            counts[what] = counts.get(what, 0) - n
            i += 1
        when = from_epoch(at)
        assert when is not None
        out.append(TimelinePoint(when, *(max(0, counts.get(k, 0)) for k in CHART)))
    out.reverse()
    return out


def default_until(now: float, last_change: float | None) -> float:
    """Where a history chart ends unless told: now, when something changed in the last
    :data:`HISTORY_WINDOW_S`, else just after the newest change (the last activity).

    Args:
        now: the store's clock, epoch seconds.
        last_change: the second of the newest change, or None.
    """
    if last_change is None or last_change >= now - HISTORY_WINDOW_S:
        return now
    return float(last_change + 1)


def history_window(changes: Sequence[Change], since: float | None,
                   until: float) -> tuple[float, float]:
    """The span of a history chart: ``[since, until]`` when ``since`` is given, else the
    :data:`HISTORY_WINDOW_S` before ``until``, starting at its first change after the last
    pause of :data:`QUIET_GAP_S`, so a five-minute job fills the chart.

    Args:
        changes: the changes of at least ``[until - HISTORY_WINDOW_S, until]``.
        since: the asked start, epoch seconds (None: chosen as above).
        until: the end, epoch seconds.

    Returns:
        ``(since, until)``, epoch seconds, ``since <= until``.
    """
    if since is not None:
        return min(since, until), until
    seconds = sorted({c[0] for c in changes if until - HISTORY_WINDOW_S <= c[0] <= until})
    start = float(seconds[0]) if seconds else until - HISTORY_WINDOW_S
    for earlier, later in zip(seconds, seconds[1:], strict=False):
        if later - earlier >= QUIET_GAP_S:
            start = float(later)
    return min(start, until), until


def changes_of(rows: Iterable[tuple[Status, datetime | None, datetime | None]]
               ) -> list[Change]:
    """The changes a set of task records went through, from their timestamps: created
    (one more unfinished) and, for a finished one, finished (one unfinished less, one
    more COMPLETED or DEAD).

    Args:
        rows: ``(status, created_at, finished_at)`` per task.

    Returns:
        the net change per second and count, in no particular order.
    """
    net: dict[tuple[int, str], int] = {}

    def add(at: datetime, what: str, n: int) -> None:
        second = int(to_epoch(at) or 0.0)
        net[(second, what)] = net.get((second, what), 0) + n

    for status, created, finished in rows:
        if created is None:
            continue
        add(created, "unfinished", 1)
        if status.finished:
            add(finished or created, "unfinished", -1)
            add(finished or created, status.value, 1)
    return [(at, what, n) for (at, what), n in net.items() if n]


def timeline(tasks: Sequence[Task], points: int = 10,
             until: datetime | None = None) -> list[TimelinePoint]:
    """Tasks by status over time, rebuilt from the records' timestamps (for a set of
    tasks in hand; a store answers :meth:`~foreperson.work.store.ReportsWork.history`
    without reading its records).

    Args:
        tasks: the records.
        points: number of evenly spaced instants, from the first creation to ``until``.
        until: the last instant (default: the latest timestamp seen).

    Returns:
        ``points`` :class:`TimelinePoint` values (empty when there are no tasks).
    """
    if not tasks or points < 1:
        return []
    changes = changes_of((t.status, t.created_at, t.finished_at) for t in tasks)
    now_counts = {s: 0 for s in Status}
    for task in tasks:
        now_counts[task.status] += 1
    first = min(c[0] for c in changes)
    last = to_epoch(until) if until is not None else float(max(c[0] for c in changes))
    return history_points(now_counts, changes, float(first), float(last or first), points)
