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
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple, Protocol, runtime_checkable

from ..errors import InvalidPlan
from .leases import DEFAULT_LEASE_S
from .metrics import TimelinePoint
from .task import Status, Task

__all__ = ["BacksOffResources", "CompletesAndClaims", "ListsReadyBriefly", "ReadyTask",
           "ReportsWork", "StoreStats", "TaskStore", "TracksWorkers", "WakesOnWork",
           "WorkerRecord", "WorkerTotals",
           "conflicting_readd", "pruned_readd", "same_task", "validate_new_tasks"]


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
    """Durable task records. All times come from the store's clock.

    Every store also implements :class:`foreperson.journal.Journal` (``get_step``,
    ``put_step``, ``list_steps``) and :class:`foreperson.journal.RunLedger` (the durable
    runs of ``foreperson.runtime``) in the same database, with the same migrations.
    Status transitions follow :mod:`foreperson.work.policy`.
    """

    def batch(self) -> AbstractContextManager[None]:
        """Group the calls made inside, on this thread, into one transaction with one
        commit (group commit). A call that fails inside is undone alone."""
        ...

    def add(self, tasks: Sequence[Task]) -> list[str]:
        """Insert new tasks (PENDING). A task whose id is already stored with the same
        kind and payload is skipped, so adding the same deterministic ids twice is
        harmless.

        Returns:
            ids actually inserted.

        Raises:
            InvalidPlan: a dependency that is neither stored nor in ``tasks``, a
                dependency cycle, a malformed task, or an id already stored with
                another kind or payload; nothing is inserted.
        """
        ...

    def get(self, task_id: str) -> Task | None:
        """The task, or None."""
        ...

    def list_tasks(self, status: Status | None = None, kind: str | None = None,
                   limit: int | None = None, *, run_id: str | None = None,
                   newest_first: bool = False, offset: int = 0) -> list[Task]:
        """Tasks in insertion order (``newest_first``: the latest added first), optionally
        filtered (``run_id``: one run's), skipping the first ``offset`` (paging).

        Every filter given is served by an index, so listing one status or one run costs
        what it returns; ``list_tasks()`` with no filter and no limit reads everything."""
        ...

    def ready(self, kinds: Collection[str], limit: int) -> list[Task]:
        """Up to ``limit`` tasks that may be claimed now: PENDING or FAILED, past
        ``not_before``, every dependency COMPLETED, none of their locks held."""
        ...

    def assign(self, pairs: Sequence[tuple[str, str]], *, start: bool | int = False,
               lease_s: float = DEFAULT_LEASE_S) -> list[Task]:
        """Claim specific tasks for specific workers: ``[(task_id, worker), …]``.

        Each task that is still ready becomes ASSIGNED with a new lease token, its
        locks held and a lease of its own ``stale_after`` (else ``lease_s``) seconds;
        the others are skipped. With ``start=True`` it goes straight to RUNNING and the
        attempt is counted (see :mod:`~foreperson.work.policy`); with a number N, the
        first N pairs do and the rest are prefetched.

        Returns:
            the claimed tasks, with their lease tokens.
        """
        ...

    def claim(self, worker: str, kinds: Collection[str], limit: int, *,
              start: bool | int = False, lease_s: float = DEFAULT_LEASE_S) -> list[Task]:
        """``ready`` + ``assign`` in one atomic step, for workers that pull; with ``start``
        a number N, the first N tasks claimed (queue order) start at once."""
        ...

    def start(self, task_id: str, token: str) -> bool:
        """ASSIGNED -> RUNNING, counting the attempt. False when the lease is gone."""
        ...

    def start_many(self, leases: Mapping[str, str]) -> set[str]:
        """:meth:`start` for many held tasks at once (``{task_id: token}``).

        Returns:
            ids whose lease is gone.
        """
        ...

    def heartbeat(self, leases: Mapping[str, str]) -> set[str]:
        """Renew the leases of held tasks (``{task_id: token}``): each expires its own
        lease seconds from now.

        Returns:
            ids whose lease is gone (the holder must stop writing).
        """
        ...

    def complete(self, task_id: str, token: str, result: Any) -> bool:
        """Store the result and mark COMPLETED; release locks. False when the lease is gone.

        Raises:
            TypeError: ``result`` is not JSON (nothing is stored, the lease stays).
        """
        ...

    def complete_many(self, items: Sequence[tuple[str, str, Any]]) -> set[str]:
        """:meth:`complete` for many held tasks: ``[(task_id, token, result), …]``.

        Returns:
            ids whose result was stored (the others had lost their lease).

        Raises:
            TypeError: a result is not JSON (nothing is stored).
        """
        ...

    def fail(self, task_id: str, token: str, error: str, *,
             retry_at: float | None) -> Status | None:
        """Record a failed attempt: FAILED with ``not_before = retry_at`` (epoch seconds),
        or DEAD when ``retry_at`` is None (reason ``retries_exhausted`` or
        ``not_retryable``).

        Returns:
            the new status, or None when the lease is gone.
        """
        ...

    def release(self, task_id: str, token: str) -> bool:
        """Give an unfinished task back (graceful shutdown): PENDING, a started attempt
        not counted. False when the lease is gone."""
        ...

    def reclaim_stale(self, *, holder_prefix: str | None = None) -> list[str]:
        """Take back tasks whose holder is presumed dead: every lease that expired
        (the store's clock), plus, with ``holder_prefix``, every task held by a worker
        whose name starts with it (the caller knows those are dead, e.g. a job's own
        earlier incarnation that it holds an exclusive lock against). See
        :mod:`~foreperson.work.policy` for what a reclaim does.

        Returns:
            ids reclaimed.
        """
        ...

    def park_blocked(self, after: Collection[str] | None = None) -> list[str]:
        """Park DEAD every waiting task (PENDING or FAILED) that depends, directly or not,
        on a DEAD task (reason ``dependency_dead``): those that depend on the tasks
        ``after`` (that just went DEAD), or with None every waiting task with a DEAD
        dependency (a sweep over the waiting tasks, never the finished ones).

        Returns:
            the ids parked.
        """
        ...

    def retry_dead(self, ids: Sequence[str] | None = None) -> list[str]:
        """Put DEAD tasks back to PENDING with fresh attempts (all of them when ``ids``
        is None), together with the dependents that were parked because of them.

        Returns:
            ids revived.
        """
        ...

    def claim_effect(self, key: str, task_id: str, token: str) -> bool:
        """Say that the current lease of ``task_id`` is doing the side effect ``key``.

        At-least-once: True when the effect must be done now, i.e. it was never
        claimed, or an earlier attempt claimed it and never marked it done (it may
        have crashed before or after doing it: the receiver dedupes by ``key``).
        False when it is done already, when this very attempt claimed it before, or
        when the lease is gone.
        """
        ...

    def effect_done(self, key: str, task_id: str, token: str) -> bool:
        """Record that the side effect ``key`` is done: no later attempt does it again.
        False when the lease is gone."""
        ...

    def finished_among(self, ids: Collection[str]) -> dict[str, Task]:
        """The tasks among ``ids`` that are COMPLETED or DEAD, by id (for waiters)."""
        ...

    def mean_durations(self) -> dict[str, float]:
        """Mean seconds from start to finish of the COMPLETED tasks the store holds, per
        kind (kept as a running sum, so it costs nothing however many there are; pruned
        tasks leave it)."""
        ...

    def stats(self, *, run_id: str | None = None) -> StoreStats:
        """A snapshot for metrics: the whole store, or one run's tasks. Its cost does not
        grow with the history: the whole store's counts are kept as aggregates, one run's
        are counted on an index, and the rest reads only the unfinished tasks."""
        ...

    def close(self) -> None:
        """Release connections. Idempotent."""
        ...


@runtime_checkable
class WakesOnWork(Protocol):
    """A store that can tell an idle worker that work may be ready (PostgreSQL's
    ``LISTEN``/``NOTIFY``) instead of leaving it to poll."""

    def wait_for_work(self, kinds: Collection[str] | None = None,
                      timeout_s: float = 1.0) -> bool:
        """Block until a task of ``kinds`` may have become claimable, or ``timeout_s``
        seconds. Returns True when woken, False on timeout."""
        ...

    def wait_for_finished(self, timeout_s: float = 1.0) -> bool:
        """Block until an awaited task may have finished, or ``timeout_s`` seconds.
        Returns True when woken, False on timeout."""
        ...


@runtime_checkable
class CompletesAndClaims(Protocol):
    """A store that can do a pulling worker's whole turn (record starts, store results,
    claim new work) in one statement: one round trip and one commit (PostgreSQL)."""

    def complete_and_claim(self, starts: Mapping[str, str],
                           items: Sequence[tuple[str, str, Any]], worker: str,
                           kinds: Collection[str], limit: int, *, start: int = 0,
                           lease_s: float = DEFAULT_LEASE_S) -> tuple[set[str], list[Task]]:
        """Returns ``(ids whose result was stored, tasks claimed)``."""
        ...


class ReadyTask(NamedTuple):
    """What placing a ready task needs of it: its ``id``, ``kind`` and ``estimate_s``
    (seconds, or None: its kind's learned mean)."""

    id: str
    kind: str
    estimate_s: float | None


@runtime_checkable
class ListsReadyBriefly(Protocol):
    """A store that can list ready tasks without decoding their whole records (SQLite):
    the dispatcher's look-ahead reads twice the tasks it can place, and decoding the
    payloads, results and times of those it leaves cost more than claiming them."""

    def ready_brief(self, kinds: Collection[str], limit: int) -> list[ReadyTask]:
        """What :meth:`TaskStore.ready` returns, in the same order, as
        :class:`ReadyTask`."""
        ...


@runtime_checkable
class BacksOffResources(Protocol):
    """A store that limits shared resources across machines and can close one for a
    while after a 429 (see :class:`~foreperson.errors.RateLimited`)."""

    def back_off(self, task_id: str, token: str, resource: str | None,
                 after_s: float) -> bool:
        """Give the task back (attempt not counted) and close ``resource`` for
        ``after_s`` seconds. False when the lease is gone."""
        ...


@dataclass(frozen=True)
class WorkerRecord:
    """A worker as a store that tracks workers records it.

    Attributes:
        name: the worker's name (``assigned_to`` of the tasks it holds).
        kinds: the kinds it takes.
        concurrency: tasks it runs at once.
        host: the machine of the process that runs it (None when not recorded).
        pid: that process's id (None when not recorded).
        started_at: when it was first seen (UTC).
        heartbeat_at: its last heartbeat (UTC).
    """

    name: str
    kinds: tuple[str, ...]
    concurrency: int
    host: str | None
    pid: int | None
    started_at: datetime
    heartbeat_at: datetime


@runtime_checkable
class TracksWorkers(Protocol):
    """A store that records workers, the process that runs each and its last heartbeat."""

    def worker_seen(self, name: str, kinds: Collection[str] = (), concurrency: int = 1) -> None:
        """Record that worker ``name`` is alive, run by the calling process (its host and
        pid are recorded with it)."""
        ...

    def worker_gone(self, name: str) -> None:
        """Forget worker ``name`` (it stopped cleanly)."""
        ...

    def list_workers(self) -> list[WorkerRecord]:
        """Every recorded worker, by name."""
        ...


@dataclass
class WorkerTotals:
    """What one worker did, counted as it happened (in the same transaction as each
    completion and failure, so pruning old tasks does not lower it).

    Attributes:
        completed: tasks it completed (COMPLETED with ``assigned_to`` = the worker).
        failed: failed attempts recorded against it (``errors`` entries naming it, a
            reclaim after its lease expired included).
        last_at: when it last completed or failed a task (UTC; not compared).
    """

    completed: int = 0
    failed: int = 0
    last_at: datetime | None = field(default=None, compare=False)


@runtime_checkable
class ReportsWork(Protocol):
    """Read-only aggregates for status pages and metrics (every bundled store)."""

    def counts_by_kind(self, *, run_id: str | None = None) -> dict[str, dict[Status, int]]:
        """Tasks per kind and status (every status present per kind listed), of the whole
        store or of one run."""
        ...

    def worker_totals(self, names: Collection[str] | None = None, *,
                      since: float | None = None) -> dict[str, WorkerTotals]:
        """Per worker name: tasks completed and failed attempts, counted as they happened
        (pruning tasks does not lower them).

        Args:
            names: these workers only (None: every name, or those of ``since``).
            since: with ``names`` None, the workers that completed or failed a task at or
                after this time, epoch seconds (an index read: the recent ones only).
        """
        ...

    def history(self, *, run_id: str | None = None, points: int = 60,
                since: float | None = None, until: float | None = None
                ) -> list[TimelinePoint]:
        """Tasks by status at ``points`` instants evenly spaced over a window.

        Args:
            run_id: one run's tasks (rebuilt from their records), or None: the whole
                store's, from the changes kept per second (only the window's are read).
            points: instants (>= 1).
            since: the window's start, epoch seconds (default: the last hour of activity,
                from after its last pause of five minutes; at most seven days back).
            until: its end, epoch seconds (default: now, or the last activity when that
                was more than an hour ago).

        Returns:
            :class:`~foreperson.work.metrics.TimelinePoint` values, oldest first (empty
            for a run with no task).
        """
        ...

    def dependents(self, task_id: str) -> list[str]:
        """Ids of the tasks that depend directly on ``task_id``, in insertion order."""
        ...


def same_task(stored: Task, new: Task) -> bool:
    """Whether re-adding ``new`` over ``stored`` (same id) is the same work (kind and
    payload equal), so skipping it is harmless."""
    return stored.kind == new.kind and stored.payload == new.payload


def conflicting_readd(stored: Task, new: Task) -> InvalidPlan:
    """The error for an id re-added with other work."""
    return InvalidPlan(
        f"task {new.id!r} is already stored as another task (kind {stored.kind!r}, "
        f"payload {_short(stored.payload)}) and was added again as kind {new.kind!r}, "
        f"payload {_short(new.payload)}: give the new task another id", task_id=new.id)


def pruned_readd(task_id: str, pruned_at: float) -> InvalidPlan:
    """The error for adding an id whose task was finished and then removed by retention
    (:meth:`~foreperson.work.retention.Prunes.prune`): it is not run a second time.

    Args:
        task_id: the id.
        pruned_at: when it was removed, epoch seconds.
    """
    when = datetime.fromtimestamp(pruned_at, UTC).isoformat(timespec="seconds")
    return InvalidPlan(
        f"task {task_id!r} already ran: it was finished and then removed by retention "
        f"(prune) at {when}, so it is not run again; to run that work once more, add it "
        "under another id", task_id=task_id)


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def validate_new_tasks(tasks: Sequence[Task], exists: Callable[[list[str]], set[str]],
                       stored: Mapping[str, Task] | None = None) -> None:
    """Checks every store runs before inserting a batch.

    Args:
        tasks: the batch.
        exists: given ids, returns those already stored.
        stored: tasks already stored under ids of the batch, to refuse a re-add of an
            id with other work (None: the store checks that itself).

    Raises:
        InvalidPlan: a malformed task, a duplicate id in the batch, a dependency that is
            neither stored nor in the batch, a cycle (found with :mod:`graphlib`), or an
            id already stored with another kind or payload.
    """
    batch: dict[str, Task] = {}
    for task in tasks:
        task.check()
        if task.id in batch:
            raise InvalidPlan(f"task id {task.id!r} appears twice in one add", task_id=task.id)
        batch[task.id] = task
        earlier = stored.get(task.id) if stored else None
        if earlier is not None and not same_task(earlier, task):
            raise conflicting_readd(earlier, task)
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
    if not any(graph.values()):
        return      # no edge inside the batch: no cycle (a batch of one, most often)
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        cycle = exc.args[1]
        raise InvalidPlan("dependency cycle: " + " -> ".join(cycle) +
                          " (no task in a cycle can ever become ready)",
                          task_id=cycle[0]) from None
