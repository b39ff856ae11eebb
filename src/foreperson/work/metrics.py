"""The three numbers seed 000 says to instrument from the start, and their history.

* tasks by status over time (is the run converging?),
* per-worker active count (is distribution balancing?),
* age of the oldest unfinished task (a stuck task shows as an age that only climbs).

The live values come from :meth:`TaskStore.stats`. The history is rebuilt from
*changes*: each change says that the count of one status moved by ``n`` during one
second. The counts at an instant are the counts now minus every change after that
instant, so a chart of the last hour reads the last hour's changes and nothing older,
however long the store has run. The SQL stores keep those changes in a table their
triggers fill (``task_history``); :func:`changes_of` derives them from task records
(one run's tasks, or the memory store's).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from .task import Status, Task, from_epoch, to_epoch

__all__ = ["HISTORY_KEPT_S", "HISTORY_WINDOW_S", "Change", "TimelinePoint", "changes_of",
           "default_until", "history_points", "history_window", "timeline"]

Change = tuple[int, Status, int]
"""``(epoch second, status, n)``: the count of ``status`` moved by ``n`` in that second."""

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
        counts: tasks per status at that instant (every status present).
    """

    at: datetime
    counts: dict[Status, int] = field(default_factory=dict)

    @property
    def waiting(self) -> int:
        """PENDING, ASSIGNED (claimed, not started) and FAILED (a retry scheduled)."""
        return sum(self.counts.get(s, 0) for s in (Status.PENDING, Status.ASSIGNED,
                                                    Status.FAILED))

    @property
    def running(self) -> int:
        """RUNNING."""
        return self.counts.get(Status.RUNNING, 0)

    @property
    def completed(self) -> int:
        """COMPLETED."""
        return self.counts.get(Status.COMPLETED, 0)

    @property
    def dead(self) -> int:
        """DEAD."""
        return self.counts.get(Status.DEAD, 0)


def history_points(now_counts: Mapping[Status, int], changes: Iterable[Change],
                   since: float, until: float, points: int) -> list[TimelinePoint]:
    """Counts by status at ``points`` instants evenly spaced from ``since`` to ``until``.

    Args:
        now_counts: the counts now (after every change).
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
    pending = sorted(changes, key=lambda c: c[0], reverse=True)
    counts = {s: now_counts.get(s, 0) for s in Status}
    out: list[TimelinePoint] = []
    i = 0
    for at in reversed(instants):
        while i < len(pending) and pending[i][0] > at:
            _, status, n = pending[i]
            counts[status] -= n
            i += 1
        when = from_epoch(at)
        assert when is not None
        out.append(TimelinePoint(when, {s: max(0, n) for s, n in counts.items()}))
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


def changes_of(rows: Iterable[tuple[Status, datetime | None, datetime | None,
                                    datetime | None, datetime | None]]) -> list[Change]:
    """The changes a set of task records went through, from their timestamps: created
    (PENDING), started (PENDING -> RUNNING), and the last change, to the status each has
    now (at ``finished_at``, else its last heartbeat, else its start).

    Args:
        rows: ``(status, created_at, started_at, finished_at, heartbeat_at)`` per task.

    Returns:
        the changes, in no particular order (the net change per second and status).
    """
    net: dict[tuple[int, Status], int] = {}

    def add(at: datetime | None, status: Status, n: int) -> None:
        second = int(to_epoch(at) or 0.0)
        net[(second, status)] = net.get((second, status), 0) + n

    for status, created, started, finished, beat in rows:
        if created is None:
            continue
        add(created, Status.PENDING, 1)
        between = Status.PENDING
        if started is not None:
            add(started, Status.PENDING, -1)
            add(started, Status.RUNNING, 1)
            between = Status.RUNNING
        if status is not between:
            last = finished or beat or started or created
            add(last, between, -1)
            add(last, status, 1)
    return [(at, status, n) for (at, status), n in net.items() if n]


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
    changes = changes_of((t.status, t.created_at, t.started_at, t.finished_at,
                          t.heartbeat_at) for t in tasks)
    now_counts = {s: 0 for s in Status}
    for task in tasks:
        now_counts[task.status] += 1
    first = min(c[0] for c in changes)
    last = to_epoch(until) if until is not None else float(max(c[0] for c in changes))
    return history_points(now_counts, changes, float(first), float(last or first), points)
