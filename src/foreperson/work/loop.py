"""The run loop: turns of settle-and-claim, worker lanes, and the side tasks of a run.

One turn, in one store transaction (group commit): record the attempts that started,
settle the ones that finished, claim new work into free slots. Claimed tasks go to
their worker's lane; each lane runs ``concurrency`` consumers that take the next task
the moment one ends (its prefetched tasks are already there); a batch worker's
consumer takes up to ``batch_size`` queued tasks of one kind at once. Side tasks: heartbeats
(at a third of the shortest lease held, at most every 10 s), wake-ups from the store
(PostgreSQL ``LISTEN``), giving back prefetched tasks stuck behind a long one, progress
callbacks (run in a thread, never on the event loop), and retention when the supervisor
has one (old finished work pruned in the background).

A task waiting on its children lends its slot (:meth:`RunLoop.lend`): the lane gets one
more consumer until the task resumes, so parents waiting on children never starve them.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.abc
import anyio.to_thread

from .. import telemetry
from ..errors import StoreError
from ._observe import attempt_began, attempt_ended, attempt_span
from .leases import RENEW_FRACTION
from .policy import Reason
from .retention import Prunes, Retention
from .store import StoreStats, TracksWorkers, WakesOnWork
from .task import Status, Task
from .worker import Worker

if TYPE_CHECKING:
    from .dispatcher import Dispatcher
    from .handles import TaskHandle, Waiters
    from .store import TaskStore
    from .worker import TaskContext

__all__ = ["Outcome", "RunCounters", "RunLoop", "RunReport", "Supervises"]

log = logging.getLogger("foreperson.supervisor")

Outcome = tuple[Task, bool, Any]
"""``(task, succeeded, result or exception)`` of one finished attempt."""


@dataclass
class RunCounters:
    """What happened during the current run (reset when a run starts)."""

    retries: int = 0
    reclaimed: int = 0
    lease_lost: int = 0
    parked: int = 0


class Supervises(Protocol):
    """What a :class:`RunLoop` needs of the supervisor it runs for (a
    :class:`~foreperson.work.Supervisor`): its store and dispatcher, its settings, and
    the one-transaction turn that settles and claims."""

    store: TaskStore
    dispatcher: Dispatcher
    waiters: Waiters
    counters: RunCounters
    retention: Retention | None
    stopping: bool
    settled_last_turn: bool
    heartbeat_every_s: float
    prefetch: int
    prefetch_wait_s: float

    @property
    def workers(self) -> dict[str, Worker]:
        """The roster."""
        ...

    @property
    def pull(self) -> bool:
        """Whether workers claim for themselves."""
        ...

    def known_kinds(self) -> set[str]:
        """Kinds some worker can do."""
        ...

    def heartbeat(self) -> None:
        """Renew held leases when due."""
        ...

    def release(self, task: Task) -> None:
        """Give one held task back."""
        ...

    def release_held(self) -> list[str]:
        """Give back every held task."""
        ...

    def settle_and_claim(self, outcomes: list[Outcome],
                         started: list[Task]) -> list[tuple[Worker, Task]]:
        """One turn in one store transaction."""
        ...

    async def submit_many(self, tasks: Sequence[Task]) -> list[TaskHandle]:
        """Store tasks and return handles."""
        ...


@dataclass
class RunReport:
    """What one run (one call of :meth:`Supervisor.run`) did.

    Attributes:
        stats: the store's snapshot at the end (of the run's tasks with ``run_id``).
        elapsed_s: wall time of the run, seconds.
        retries: failed attempts scheduled again during this run.
        reclaimed: tasks taken back from holders whose lease expired, during this run.
        lease_lost: results discarded because the worker no longer held the lease.
        parked: tasks parked DEAD during this run because a dependency was DEAD.
        history: ``(epoch seconds, counts by status)`` sampled every
            ``progress_every_s`` seconds.
    """

    stats: StoreStats
    elapsed_s: float
    retries: int = 0
    reclaimed: int = 0
    lease_lost: int = 0
    parked: int = 0
    history: list[tuple[float, dict[Status, int]]] = field(default_factory=list)


class _Lane:
    """One worker's inbox and consumers. Taking a task that is already there does not
    yield to the event loop, so a slot moves from one task to the next at once."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.items: deque[tuple[Task, float]] = deque()   # (task, time.monotonic() queued)
        self._waiters: deque[anyio.Event] = deque()
        self.started = False
        self.excess = 0        # consumers to retire (lent slots given back)

    def put(self, task: Task) -> None:
        self.items.append((task, time.monotonic()))
        if self._waiters:
            self._waiters.popleft().set()

    async def get(self) -> tuple[list[Task], float]:
        """The next task, or for a batch worker up to ``batch_size`` queued tasks of the
        first one's kind (the others keep their place), and the ``time.monotonic()`` the
        first was queued at (its claim)."""
        while not self.items:
            waiter = anyio.Event()
            self._waiters.append(waiter)
            await waiter.wait()
        first, queued = self.items.popleft()
        size = self.worker.batch_size or 1
        if size == 1 or not self.items:
            return [first], queued
        batch, rest = [first], deque[tuple[Task, float]]()
        for item in self.items:
            if len(batch) < size and item[0].kind == first.kind:
                batch.append(item[0])
            else:
                rest.append(item)
        self.items = rest
        return batch, queued

    def overdue(self, older_than_s: float) -> list[Task]:
        """Take out the tasks that waited longer than ``older_than_s`` seconds."""
        out = []
        limit = time.monotonic() - older_than_s
        while self.items and self.items[0][1] < limit:
            out.append(self.items.popleft()[0])
        return out


class RunLoop:
    """One run of a :class:`~foreperson.work.supervisor.Supervisor`.

    Args:
        supervisor: the supervisor (its store, dispatcher, settling rules).
        until_finished: end when nothing of the run is unfinished; False serves until
            :meth:`Supervisor.stop` (a worker process, or ``serving()``).
        run_id: end when this run is finished (None: the whole store).
        progress: called in a thread with a :class:`StoreStats` every
            ``progress_every_s`` seconds and once at the end.
        progress_every_s: seconds between progress calls and history samples.
        idle_wait_s: longest pause, seconds, when nothing signals new work.
    """

    def __init__(self, supervisor: Supervises, *, until_finished: bool = True,
                 run_id: str | None = None,
                 progress: Callable[[StoreStats], None] | None = None,
                 progress_every_s: float = 0.5, idle_wait_s: float = 0.25) -> None:
        self.sup = supervisor
        self.until_finished = until_finished
        self.run_id = run_id
        self.progress = progress
        self.progress_every_s = progress_every_s
        self.idle_wait_s = idle_wait_s
        self.lanes = {name: _Lane(w) for name, w in supervisor.dispatcher.workers.items()}
        self.outcomes: list[Outcome] = []
        self.started: list[Task] = []
        self.unstarted: list[Task] = []
        self.history: list[tuple[float, dict[Status, int]]] = []
        self._wake = anyio.Event()
        self._group: anyio.abc.TaskGroup | None = None
        self._store_lock = anyio.CapacityLimiter(1)
        self._outage_s = 0.0
        self._next_progress = 0.0
        self._next_overdue = 0.0

    # -- public hooks ------------------------------------------------------------
    def wake(self) -> None:
        """Start the next turn now (an attempt finished, work was added)."""
        self._wake.set()

    @contextmanager
    def lend(self, task: Task) -> Iterator[None]:
        """While inside, ``task``'s slot is lent to other work of its worker (it waits on
        child tasks): its lane gets one more consumer, and a blocking worker one more
        thread."""
        token = task.lease_token or ""
        flight = self.sup.dispatcher.suspend(task.id, token)
        lane = self.lanes.get(flight.worker) if flight is not None else None
        if lane is None or self._group is None:
            yield
            return
        limiter = lane.worker._limiter
        if limiter is not None:
            limiter.total_tokens += 1
        self._group.start_soon(self._consume, lane)
        self.wake()
        try:
            yield
        finally:
            self.sup.dispatcher.resume(task.id, token)
            lane.excess += 1
            if limiter is not None:
                limiter.total_tokens = max(1, limiter.total_tokens - 1)

    async def submit_children(self, parent: Task, tasks: list[Task],
                              context: TaskContext) -> list[TaskHandle]:
        """Submit ``tasks`` as children of the running ``parent`` (same run), with
        handles whose waits lend ``parent``'s slot.

        A child's id is derived from its parent's id and its place among the children
        this attempt submitted (``<parent>/<n>``; dependencies among them follow), so a
        retried parent that submits the same children finds the ones already there:
        a finished child is not run again."""
        renamed: dict[str, str] = {}
        for task in tasks:
            position = context.next_child()
            renamed[task.id] = f"{parent.id}/{position}"
        for task in tasks:
            task.id = renamed[task.id]
            task.depends_on = [renamed.get(d, d) for d in task.depends_on]
            task.run_id = task.run_id or parent.run_id
            task.parent_id = parent.id
        handles = await self.sup.submit_many(tasks)
        for handle in handles:
            handle._context = context
        self.wake()
        return handles

    # -- the run -----------------------------------------------------------------
    async def run(self) -> RunReport:
        """Dispatch until the run is finished (or stopped). See :meth:`Supervisor.run`."""
        began = time.monotonic()
        final: StoreStats | None = None
        try:
            async with anyio.create_task_group() as group:
                self._group = group
                group.start_soon(self._heartbeats)
                if isinstance(self.sup.store, TracksWorkers) and not self.sup.pull:
                    group.start_soon(self._registration, self.sup.store)
                if isinstance(self.sup.store, WakesOnWork):
                    group.start_soon(self._listen, self.sup.store)
                if self.sup.retention is not None and isinstance(self.sup.store, Prunes):
                    group.start_soon(self._retain, self.sup.store, self.sup.retention)
                final = await self._turns()
                group.cancel_scope.cancel()
        except BaseExceptionGroup as errors:   # one failure: raise it, not a group
            if len(errors.exceptions) == 1:
                raise errors.exceptions[0] from None
            raise
        finally:
            self._group = None
            with anyio.CancelScope(shield=True):   # Ctrl-C: give every held task back
                await anyio.to_thread.run_sync(self.sup.release_held)
        stats = final if final is not None else await anyio.to_thread.run_sync(self._sample)
        if self.progress is not None:
            await anyio.to_thread.run_sync(self.progress, stats)
        counters = self.sup.counters
        return RunReport(stats, time.monotonic() - began, counters.retries,
                         counters.reclaimed, counters.lease_lost, counters.parked,
                         list(self.history))

    async def _turns(self) -> StoreStats | None:
        """Turn after turn until the run is finished or stopped; the last snapshot."""
        while True:
            self._wake = anyio.Event()
            handed, stats = await self._turn()
            if handed is None:
                continue                          # the store failed; waited, try again
            self._hand_out(handed)
            stats = await self._observe(stats, bool(handed))
            if self._done(stats, bool(handed)):
                return stats
            await self._housekeeping()
            if self.sup.stopping and not self.sup.dispatcher.busy() and not self.outcomes:
                return stats
            # a full batch says the store may hold more: claim again at once, if some
            # slot can take it (else wait for an attempt to end: nothing would fit)
            more = (len(handed) >= self.sup.dispatcher.claim_batch
                    and self.sup.dispatcher.has_room(self.sup.prefetch))
            if not self.outcomes and not more:
                with anyio.move_on_after(self.idle_wait_s):
                    await self._wake.wait()

    async def _turn(self) -> tuple[list[tuple[Worker, Task]] | None, StoreStats | None]:
        """One settle-and-claim transaction in a thread (shielded: a status write that
        has started finishes). On a transient store failure the turn's outcomes are kept
        for the next turn and ``(None, None)`` is returned after a growing pause."""
        outcomes, self.outcomes = self.outcomes, []
        started, self.started = self.started, []
        try:
            with anyio.CancelScope(shield=True):
                handed = await anyio.to_thread.run_sync(
                    self.sup.settle_and_claim, outcomes, started, limiter=self._store_lock)
                idle = (self.until_finished and not handed
                        and not self.sup.dispatcher.busy())
                stats = (await anyio.to_thread.run_sync(self._sample,
                                                        limiter=self._store_lock)
                         if idle else None)
        except StoreError as exc:
            if not exc.transient:                 # would fail the same way again
                raise
            if not self.sup.settled_last_turn:    # rolled back: settle it again
                self.outcomes[:0] = outcomes
                self.started[:0] = started
            await self._store_unavailable(exc)
            return None, None
        self._outage_s = 0.0
        self.sup.waiters.deliver()
        return handed, stats

    async def _store_unavailable(self, exc: StoreError) -> None:
        self._outage_s = min(max(self._outage_s * 2, 0.1), 5.0)
        log.warning("store unavailable, retrying in %.1f s: %s", self._outage_s, exc)
        await anyio.sleep(self._outage_s)

    def _sample(self) -> StoreStats:
        stats = self.sup.store.stats(run_id=self.run_id)
        self.history.append((stats.now.timestamp(), dict(stats.counts)))
        return stats

    def _hand_out(self, handed: list[tuple[Worker, Task]]) -> None:
        for worker, task in handed:
            lane = self.lanes[worker.name]
            if not lane.started and self._group is not None:
                lane.started = True               # a worker's slots start with its task
                for _ in range(worker.concurrency):
                    self._group.start_soon(self._consume, lane)
            lane.put(task)

    async def _observe(self, stats: StoreStats | None, handed: bool) -> StoreStats | None:
        """Sample and report progress when due (or when idle, for the finish check)."""
        now = time.monotonic()
        # serving (until stopped) without a progress callback needs no snapshot: a
        # snapshot reads every task of the run, so taking one per tick costs O(N)
        due = now >= self._next_progress and (self.until_finished or self.progress is not None)
        if stats is None and due:
            try:
                stats = await anyio.to_thread.run_sync(self._sample,
                                                       limiter=self._store_lock)
            except StoreError as exc:             # the turn itself is settled: just wait
                if not exc.transient:
                    raise
                await self._store_unavailable(exc)
                return None
        if stats is not None and due:
            self._next_progress = now + self.progress_every_s
            if self.progress is not None:
                await anyio.to_thread.run_sync(self.progress, stats)
        return stats

    def _done(self, stats: StoreStats | None, handed: bool) -> bool:
        if self.sup.dispatcher.busy() or handed or self.outcomes or self.started:
            return False
        if self.sup.stopping:
            return True
        return self.until_finished and stats is not None and stats.unfinished == 0

    async def _housekeeping(self) -> None:
        now = time.monotonic()
        if now >= self._next_overdue:             # a prefetched task stuck behind a long one
            self._next_overdue = now + 0.25
            await self._release_overdue()
        if self.sup.stopping:
            await self._give_back_queued()

    # -- consumers -----------------------------------------------------------------
    async def _consume(self, lane: _Lane) -> None:
        while True:
            tasks, queued = await lane.get()
            if self.sup.stopping:          # not started: handed back by _give_back_queued
                self.unstarted.extend(tasks)
                continue
            tasks = [t for t in tasks if t.status is not Status.ASSIGNED or await self._start(t)]
            if not tasks:
                continue
            if telemetry.SINKS:
                for task in tasks:
                    attempt_began(task, time.monotonic() - queued)
            if lane.worker.batch_size is not None:
                await self._execute_batch(lane.worker, tasks)
            else:
                await self._execute(lane.worker, tasks[0])
            if lane.excess:                # a lent slot came back: one consumer retires
                lane.excess -= 1
                return

    async def _start(self, task: Task) -> bool:
        """A prefetched task starts: its attempt is recorded by the next turn, or, for a
        task whose last holder died (perhaps killed by this very task), before it runs,
        so a task that kills its worker is counted every time but once. False when its
        lease is gone."""
        if task.reason == Reason.LEASE_EXPIRED.value:
            started = await anyio.to_thread.run_sync(
                self.sup.store.start, task.id, task.lease_token or "",
                limiter=self._store_lock)
            if not started:
                self.sup.dispatcher.let_go(task.id, task.lease_token or "")
                return False
        else:
            self.started.append(task)
        task.status = Status.RUNNING
        task.attempts += 1
        return True

    async def _execute(self, worker: Worker, task: Task) -> None:
        span = attempt_span(worker.name, task)
        began = time.perf_counter()
        try:
            with telemetry.use_span(span):
                outcome: Outcome = (task, True, await worker.run_task(
                    task, self.sup.store, runtime=self))
        except anyio.get_cancelled_exc_class():
            telemetry.end_span(span, None, {"foreperson.task.outcome": "cancelled"})
            with anyio.CancelScope(shield=True):   # give the task back, do not lose it
                await anyio.to_thread.run_sync(self.sup.release, task)
            raise
        except Exception as exc:      # classified in on_fail
            outcome = (task, False, exc)
        took = time.perf_counter() - began
        attempt_ended(span, task, outcome[1], outcome[2], took)
        self.sup.dispatcher.ran(worker.name, took)
        self.outcomes.append(outcome)
        self._wake.set()

    async def _execute_batch(self, worker: Worker, tasks: list[Task]) -> None:
        """One call of a batch worker; each task settles on its own."""
        began = time.perf_counter()
        try:
            results = await worker.run_batch(tasks, self.sup.store)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):   # give the tasks back, do not lose them
                for task in tasks:
                    await anyio.to_thread.run_sync(self.sup.release, task)
            raise
        self.sup.dispatcher.ran(worker.name, time.perf_counter() - began)
        self.outcomes.extend((task, ok, value)
                             for task, (ok, value) in zip(tasks, results, strict=True))
        self._wake.set()

    async def _release_overdue(self) -> None:
        for name, lane in self.lanes.items():
            overdue = lane.overdue(self.sup.prefetch_wait_s)
            if overdue:
                self.sup.dispatcher.no_prefetch(name)   # until its running task ends
                with anyio.CancelScope(shield=True):
                    for task in overdue:
                        await anyio.to_thread.run_sync(self.sup.release, task)

    async def _give_back_queued(self) -> None:
        for lane in self.lanes.values():
            self.unstarted.extend(task for task, _ in lane.items)
            lane.items.clear()
        unstarted, self.unstarted = self.unstarted, []
        with anyio.CancelScope(shield=True):
            for task in unstarted:
                await anyio.to_thread.run_sync(self.sup.release, task)

    # -- side tasks ----------------------------------------------------------------
    async def _heartbeats(self) -> None:
        """Renew the held leases. Never during a turn: a task claimed by the turn's
        transaction is held before that transaction commits, and a heartbeat from another
        connection (PostgreSQL) would find its lease missing and call it lost."""
        while True:
            lease = self.sup.dispatcher.shortest_lease_s()
            await anyio.sleep(min(self.sup.heartbeat_every_s, lease * RENEW_FRACTION))
            try:
                await anyio.to_thread.run_sync(self.sup.heartbeat, limiter=self._store_lock)
            except StoreError as exc:
                log.warning("heartbeat failed (%s); retrying next beat", exc)

    async def _registration(self, store: TracksWorkers) -> None:
        """Record this run's workers, with this process, in the store's worker table
        while the run goes on (worker processes record themselves); forget them when it
        ends. Every worker goes in one transaction (one commit, not one per worker)."""
        workers = list(self.sup.workers.values())

        def record(seen: bool) -> None:
            with self.sup.store.batch():
                for worker in workers:
                    if seen:
                        store.worker_seen(worker.name, sorted(worker.can_do),
                                          worker.concurrency)
                    else:
                        store.worker_gone(worker.name)

        try:
            while True:
                try:
                    await anyio.to_thread.run_sync(record, True)
                except StoreError as exc:
                    log.warning("cannot record this run's workers: %s", exc)
                await anyio.sleep(self.sup.heartbeat_every_s)
        finally:
            with anyio.CancelScope(shield=True):
                try:
                    await anyio.to_thread.run_sync(record, False)
                except StoreError as exc:
                    log.warning("cannot forget this run's workers: %s", exc)

    async def _retain(self, store: Prunes, retention: Retention) -> None:
        """Prune old finished work every ``retention.every_s`` seconds, the first time a
        minute after the start, at most five seconds per call (the turns go on
        meanwhile: the store gives claims the lock between two batches)."""
        await anyio.sleep(min(60.0, retention.every_s))
        while True:
            try:
                report = await anyio.to_thread.run_sync(
                    lambda: store.prune(retention, max_seconds=5.0))
            except StoreError as exc:
                log.warning("retention: cannot prune now (%s); trying again later", exc)
            else:
                if report.tasks or report.steps:
                    log.info("retention: %s", report.summary())
                if not report.complete:
                    await anyio.sleep(1.0)
                    continue
            await anyio.sleep(retention.every_s)

    async def _listen(self, store: WakesOnWork) -> None:
        kinds = self.sup.known_kinds()
        while True:
            woke = await anyio.to_thread.run_sync(store.wait_for_work, kinds, 1.0,
                                                  abandon_on_cancel=True)
            if woke:
                self._wake.set()
