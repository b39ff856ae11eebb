"""The ``TaskStore`` protocol: the one seam between the work layer and durable storage.

Every store (in-memory, SQLite, PostgreSQL) obeys the same contract, checked by one
shared test suite (``tests/contract``). The methods are blocking; async code calls them
through ``anyio.to_thread``. Blocking is the honest shape for SQLite, works for
psycopg's pool, and lets seed 000's synchronous wiring call a store directly.

Fencing: a claim (``assign`` / ``claim``) draws a fresh ``lease_token``; ``start``,
``heartbeat``, ``complete``, ``fail``, ``release`` and ``claim_effect`` succeed only with
the current token, so a worker whose task was reclaimed cannot write any more.
"""

from __future__ import annotations

import graphlib
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from ..errors import InvalidPlan
from .task import Status, Task

__all__ = ["StoreStats", "TaskStore", "validate_new_tasks"]


@dataclass
class StoreStats:
    """A snapshot of a store, for metrics and ``foreperson status``.

    Attributes:
        counts: number of tasks per status (every status present, zero included).
        active_by_worker: worker name -> tasks it holds (ASSIGNED or RUNNING).
        oldest_unfinished_at: creation time of the oldest task that is neither
            COMPLETED nor DEAD (UTC), or None when everything is finished.
        now: the store's clock when the snapshot was taken (UTC).
        workers: for stores that record worker processes, name -> last seen (UTC).
    """

    counts: dict[Status, int]
    active_by_worker: dict[str, int]
    oldest_unfinished_at: datetime | None
    now: datetime
    workers: dict[str, datetime] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """All tasks."""
        return sum(self.counts.values())

    @property
    def unfinished(self) -> int:
        """Tasks neither COMPLETED nor DEAD."""
        return sum(n for s, n in self.counts.items() if not s.finished)

    @property
    def oldest_unfinished_age_s(self) -> float | None:
        """Age in seconds of the oldest unfinished task, or None."""
        if self.oldest_unfinished_at is None:
            return None
        return max(0.0, (self.now - self.oldest_unfinished_at).total_seconds())


@runtime_checkable
class TaskStore(Protocol):
    """Durable task records. All times come from the store's clock."""

    def batch(self) -> AbstractContextManager[None]:
        """Group the calls made inside, on this thread, into one transaction with one
        commit (group commit). A call that fails inside is undone alone."""
        ...

    def add(self, tasks: Sequence[Task]) -> list[str]:
        """Insert new tasks (PENDING). A task whose id is already stored is skipped, so
        adding the same deterministic ids twice is harmless.

        Returns:
            ids actually inserted.

        Raises:
            InvalidPlan: a dependency that is neither stored nor in ``tasks``, a
                dependency cycle, or a malformed task; nothing is inserted.
        """
        ...

    def get(self, task_id: str) -> Task | None:
        """The task, or None."""
        ...

    def list_tasks(self, status: Status | None = None, kind: str | None = None,
                   limit: int | None = None) -> list[Task]:
        """Tasks in insertion order, optionally filtered."""
        ...

    def ready(self, kinds: Collection[str], limit: int) -> list[Task]:
        """Up to ``limit`` tasks that may be claimed now: PENDING or FAILED, past
        ``not_before``, every dependency COMPLETED, none of their locks held."""
        ...

    def assign(self, pairs: Sequence[tuple[str, str]], *, start: bool = False) -> list[Task]:
        """Claim specific tasks for specific workers: ``[(task_id, worker), …]``.

        Each task that is still ready becomes ASSIGNED (RUNNING with ``start=True``, for
        a worker that begins at once) with a new lease token, one more attempt (attempts
        are counted at claim), ``heartbeat_at`` = now and its locks held; the others are
        skipped.

        Returns:
            the claimed tasks, with their lease tokens.
        """
        ...

    def claim(self, worker: str, kinds: Collection[str], limit: int, *,
              start: bool = False) -> list[Task]:
        """``ready`` + ``assign`` in one atomic step, for workers that pull."""
        ...

    def start(self, task_id: str, token: str) -> bool:
        """ASSIGNED -> RUNNING. False when the lease is gone."""
        ...

    def heartbeat(self, leases: Mapping[str, str]) -> set[str]:
        """Refresh ``heartbeat_at`` of held tasks (``{task_id: token}``).

        Returns:
            ids whose lease is gone (the holder must stop writing).
        """
        ...

    def complete(self, task_id: str, token: str, result: Any) -> bool:
        """Store the result and mark COMPLETED; release locks. False when the lease is gone."""
        ...

    def fail(self, task_id: str, token: str, error: str, *,
             retry_at: float | None) -> Status | None:
        """Record a failed attempt: FAILED with ``not_before = retry_at`` (epoch seconds),
        or DEAD when ``retry_at`` is None.

        Returns:
            the new status, or None when the lease is gone.
        """
        ...

    def release(self, task_id: str, token: str) -> bool:
        """Give an unfinished task back (graceful shutdown): PENDING, attempt not counted."""
        ...

    def reclaim_stale(self, stale_after_s: float) -> list[str]:
        """Tasks held past ``stale_after_s`` seconds without a heartbeat go back to
        PENDING (or DEAD once ``attempts >= max_attempts``: a poison task that kills its
        worker every time stops there).

        Returns:
            ids reclaimed.
        """
        ...

    def park_blocked(self) -> list[str]:
        """Park DEAD every unfinished task that depends, directly or not, on a DEAD task,
        with the reason. Returns the ids parked."""
        ...

    def retry_dead(self, ids: Sequence[str] | None = None) -> list[str]:
        """Put DEAD tasks back to PENDING with fresh attempts (all of them when ``ids``
        is None), together with the dependents that were parked because of them.

        Returns:
            ids revived.
        """
        ...

    def claim_effect(self, key: str, task_id: str, token: str) -> bool:
        """Record that the side effect ``key`` is being done by the current lease of
        ``task_id``. True exactly once per key, and only while the lease is held."""
        ...

    def mean_durations(self) -> dict[str, float]:
        """Mean seconds from start to finish of COMPLETED tasks, per kind."""
        ...

    def stats(self) -> StoreStats:
        """A snapshot for metrics."""
        ...

    def close(self) -> None:
        """Release connections. Idempotent."""
        ...


def validate_new_tasks(tasks: Sequence[Task], exists: Callable[[list[str]], set[str]]) -> None:
    """Checks every store runs before inserting a batch.

    Args:
        tasks: the batch.
        exists: given ids, returns those already stored.

    Raises:
        InvalidPlan: a malformed task, a duplicate id in the batch, a dependency that is
            neither stored nor in the batch, or a cycle (found with :mod:`graphlib`).
    """
    batch: dict[str, Task] = {}
    for task in tasks:
        task.check()
        if task.id in batch:
            raise InvalidPlan(f"task id {task.id!r} appears twice in one add", task_id=task.id)
        batch[task.id] = task
    outside = {d for t in tasks for d in t.depends_on if d not in batch}
    if outside:
        missing = outside - exists(sorted(outside))
        if missing:
            bad = next(t for t in tasks if missing & set(t.depends_on))
            raise InvalidPlan(
                f"task {bad.id} ({bad.kind}) depends on unknown task(s) "
                f"{sorted(missing & set(bad.depends_on))}: add dependencies first or "
                "in the same batch", task_id=bad.id)
    graph = {t.id: [d for d in t.depends_on if d in batch] for t in tasks}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        cycle = exc.args[1]
        raise InvalidPlan("dependency cycle: " + " -> ".join(cycle) +
                          " (no task in a cycle can ever become ready)",
                          task_id=cycle[0]) from None
