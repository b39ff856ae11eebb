"""The supervisor: decides who does what, and never does the work itself (seed 000).

It owns dispatch (strategies, dependency readiness, locks), failure handling (stale
reclaim, retry with backoff and jitter, error classification, dead-letter, parking the
dependents of a dead task) and the run loop. Two ways to drive it:

* ``await supervisor.run()`` / ``supervisor.run_sync()``: the async runtime. Workers
  run on an anyio task group (blocking work in threads), heartbeats and sweeps happen
  on their own, and the call returns a :class:`RunReport` when every task is finished.
* seed 000's loop: ``while not sup.finished(): sup.dispatch_round(); time.sleep(0.05)``
  with workers that run each task on a thread via :meth:`Worker.submit`.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from ..errors import ConfigurationError, InvalidPlan, RateLimited, StoreError
from ..retry import backoff_seconds, is_retryable, retry_after_seconds
from .store import StoreStats, TaskStore
from .stores.memory import MemoryStore
from .strategies import STRATEGIES, WorkerSlot, pick_worker
from .task import Clock, Status, SystemClock, Task
from .worker import Worker

__all__ = ["RunReport", "Supervisor"]

log = logging.getLogger("foreperson.supervisor")

_DEFAULT_ESTIMATE_S = 1.0


@dataclass
class _Flight:
    worker: str
    token: str
    kind: str
    estimate_s: float
    began: float  # time.monotonic()


class _Inbox:
    """Tasks handed to one worker, waiting for a free slot. Taking a task that is
    already there does not yield to the event loop, so a slot moves from one task to
    the next at once."""

    def __init__(self) -> None:
        self.items: deque[tuple[Task, float]] = deque()   # (task, time.monotonic() queued)
        self._waiters: deque[anyio.Event] = deque()

    def put(self, task: Task) -> None:
        self.items.append((task, time.monotonic()))
        if self._waiters:
            self._waiters.popleft().set()

    async def get(self) -> Task:
        while not self.items:
            waiter = anyio.Event()
            self._waiters.append(waiter)
            await waiter.wait()
        return self.items.popleft()[0]

    def overdue(self, older_than_s: float) -> list[Task]:
        """Take out the tasks that waited longer than ``older_than_s`` seconds."""
        out = []
        limit = time.monotonic() - older_than_s
        while self.items and self.items[0][1] < limit:
            out.append(self.items.popleft()[0])
        return out


@dataclass
class RunReport:
    """What a run did.

    Attributes:
        stats: the store's snapshot at the end.
        elapsed_s: wall time of the run, seconds.
        retries: failed attempts that were scheduled again.
        reclaimed: tasks taken back from workers that stopped heartbeating.
        lease_lost: results discarded because the worker no longer held the lease.
        parked: tasks parked DEAD because a dependency was DEAD.
    """

    stats: StoreStats
    elapsed_s: float
    retries: int = 0
    reclaimed: int = 0
    lease_lost: int = 0
    parked: int = 0
    history: list[tuple[float, dict[Status, int]]] = field(default_factory=list)


class Supervisor:
    """Hands tasks from a store to registered workers and handles what fails.

    Args:
        store: where task records live (default: a new :class:`MemoryStore`).
        strategy: ``"balanced"`` (default), ``"least_loaded"``, ``"round_robin"`` or
            ``"capability"`` (see :mod:`foreperson.work.strategies`).
        stale_after: seconds without a heartbeat after which a held task is reclaimed
            (seed 000: three to five times the p99 task duration; default 90).
        kinds: kinds accepted by ``add_task`` besides those of registered workers (for
            workers that run in other processes).
        backoff_base_s: first retry delay, seconds (default 2).
        backoff_cap_s: largest retry delay before jitter, seconds (default 60).
        heartbeat_every_s: seconds between heartbeats of running tasks
            (default ``stale_after / 3``, at most 10).
        sweep_every_s: seconds between stale sweeps (default ``stale_after / 3``, at
            most 10).
        clock: source of time (defaults to the store's clock).
        rng: randomness for backoff jitter (a seeded ``random.Random`` in tests).
        prefetch: tasks each worker may hold beyond its ``concurrency`` in
            :meth:`run`, so its next task starts the moment one ends (default 1). A
            prefetched task that waits more than 2 s (behind a long task) is given back
            to the store for another worker, and that worker stops prefetching until
            its running task ends.
        prefetch_wait_s: seconds a prefetched task may wait for its worker (default 2).
        pull: workers claim for themselves (``store.claim``) instead of being chosen
            per task; used by worker processes, where placement emerges from who has
            a free slot.

    Raises:
        ConfigurationError: unknown strategy or a non-positive ``stale_after``.
    """

    def __init__(self, store: TaskStore | None = None, *, strategy: str = "balanced",
                 stale_after: float = 90.0, kinds: Iterable[str] = (),
                 backoff_base_s: float = 2.0, backoff_cap_s: float = 60.0,
                 heartbeat_every_s: float | None = None, sweep_every_s: float | None = None,
                 clock: Clock | None = None, rng: random.Random | None = None,
                 pull: bool = False, prefetch: int = 1,
                 prefetch_wait_s: float = 2.0) -> None:
        if strategy not in STRATEGIES:
            raise ConfigurationError(f"unknown strategy {strategy!r}: choose one of {STRATEGIES}")
        if stale_after <= 0:
            raise ConfigurationError("stale_after must be > 0 seconds")
        self.store: TaskStore = store if store is not None else MemoryStore(clock=clock)
        self.strategy = strategy
        self.stale_after = float(stale_after)
        self.kinds = set(kinds)
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        default_tick = min(self.stale_after / 3, 10.0)
        self.heartbeat_every_s = heartbeat_every_s or default_tick
        self.sweep_every_s = sweep_every_s or default_tick
        self.clock: Clock = clock or getattr(self.store, "clock", None) or SystemClock()
        self.rng = rng or random.Random()
        self.pull = pull
        self.workers: dict[str, Worker] = {}
        self._slots: dict[str, WorkerSlot] = {}
        self._inflight: dict[str, _Flight] = {}
        self._rr: dict[str, int] = {}
        self._estimates: dict[str, float] | None = None
        self._lock = threading.RLock()
        self._next_sweep = 0.0
        self._next_heartbeat = 0.0
        self._stopping = False
        self._wake: anyio.Event | None = None
        self._outcomes: list[tuple[Task, bool, Any]] = []
        self._started: list[Task] = []
        self._unstarted: list[Task] = []
        self.prefetch = prefetch
        self.prefetch_wait_s = prefetch_wait_s
        self._no_prefetch: set[str] = set()
        self.claim_batch = 16   # tasks claimed per store transaction: small, so work starts early
        self.retries = self.reclaimed = self.lease_lost = self.parked = 0
        self.history: list[tuple[float, dict[Status, int]]] = []
        self._stored: dict[tuple[str, str], bool] = {}   # settled in bulk
        self._settled = True
        self._outage_s = 0.0

    # -- set-up ----------------------------------------------------------------
    def register(self, worker: Worker) -> Worker:
        """Add a worker to the roster; it reports to this supervisor.

        Returns:
            the worker, for chaining.

        Raises:
            ConfigurationError: a worker with that name is already registered.
        """
        with self._lock:
            if worker.name in self.workers:
                raise ConfigurationError(f"a worker named {worker.name!r} is already registered")
            worker.supervisor = self
            self.workers[worker.name] = worker
            self._slots[worker.name] = WorkerSlot(worker.name, worker.can_do, dict(worker.skill),
                                                  capacity=worker.concurrency)
            return worker

    def known_kinds(self) -> set[str]:
        """Kinds some registered worker (or ``kinds=``) can do."""
        with self._lock:
            return self.kinds.union(*(w.can_do for w in self.workers.values()))

    def add_tasks(self, tasks: Sequence[Task]) -> list[str]:
        """Validate and store tasks (seed 000: a plan is checked before anything runs).

        Returns:
            ids newly stored (ids already stored are skipped: re-adding is harmless).

        Raises:
            InvalidPlan: a kind no registered worker can do, an unknown dependency, a
                dependency cycle or a malformed task; nothing from the batch is stored.
        """
        known = self.known_kinds()
        for task in tasks:
            if task.kind not in known:
                raise InvalidPlan(
                    f"task {task.id}: no registered worker can do kind {task.kind!r} "
                    f"(known kinds: {sorted(known)}); register a worker for it first",
                    task_id=task.id)
        return self.store.add(list(tasks))

    def add_task(self, task: Task) -> str:
        """Validate and store one task (seed 000's ``add_task``). See :meth:`add_tasks`.

        Returns:
            the task id.
        """
        self.add_tasks([task])
        return task.id

    # -- estimates -------------------------------------------------------------
    def estimate_s(self, task: Task) -> float:
        """Expected seconds for ``task``: its ``estimate_s``, else the learned mean for
        its kind, else 1 s."""
        if task.estimate_s is not None:
            return task.estimate_s
        if self._estimates is None:
            self._estimates = dict(self.store.mean_durations())
        return self._estimates.get(task.kind, _DEFAULT_ESTIMATE_S)

    def _learn(self, kind: str, seconds: float) -> None:
        estimates = self._estimates if self._estimates is not None else {}
        old = estimates.get(kind)
        estimates[kind] = seconds if old is None else 0.8 * old + 0.2 * seconds
        self._estimates = estimates

    # -- dispatch --------------------------------------------------------------
    def _sweep_if_due(self) -> None:
        now = self.clock.now()
        if now < self._next_sweep:
            return
        self._next_sweep = now + self.sweep_every_s
        reclaimed = self.store.reclaim_stale(self.stale_after)
        if reclaimed:
            log.warning("reclaimed %d stale task(s): %s", len(reclaimed), reclaimed[:5])
            self.reclaimed += len(reclaimed)
        self.parked += len(self.store.park_blocked())

    def _dispatch(self, start: bool, extra: int = 0) -> list[tuple[Worker, Task]]:
        """Sweep when due, then claim ready tasks for workers with free slots (each
        worker may hold ``concurrency + extra`` tasks)."""
        with self._lock:
            try:
                return self._claim_free_slots(start, extra)
            finally:
                self._sweep_if_due()        # after claiming, so work starts first

    def _claim_free_slots(self, start: bool, extra: int) -> list[tuple[Worker, Task]]:
        with self._lock:
            if self._stopping:
                return []
            for slot in self._slots.values():
                slot.capacity = self.workers[slot.name].concurrency + (
                    0 if slot.name in self._no_prefetch else extra)
            free = [s for s in self._slots.values() if s.free()]
            if not free:
                return []
            if self.pull:
                claimed = []
                for slot in free:
                    got = self.store.claim(slot.name, slot.can_do,
                                           min(slot.capacity - slot.active, self.claim_batch),
                                           start=start)
                    for task in got:
                        self._hold(task)
                    claimed += got
                return [(self.workers[t.assigned_to or ""], t) for t in claimed]
            kinds = set().union(*(s.can_do for s in free))
            room = min(sum(s.capacity - s.active for s in free), self.claim_batch)
            ready = self.store.ready(kinds, room * 2)     # look ahead: longest first
            if self.strategy == "balanced":
                ready.sort(key=self.estimate_s, reverse=True)     # longest first
            pairs: list[tuple[str, str, float]] = []
            try:
                for task in ready:
                    if len(pairs) >= room:
                        break
                    slot = pick_worker(self.strategy, task.kind, list(self._slots.values()),
                                       self._rr)
                    if slot is None:
                        continue
                    estimate = self.estimate_s(task)
                    slot.active += 1            # tentative, so the next pick sees it
                    slot.load_s += estimate
                    pairs.append((task.id, slot.name, estimate))
                claimed = self.store.assign([(t, w) for t, w, _ in pairs], start=start)
            finally:                            # undo the tentative load, even on failure
                for _, name, estimate in pairs:
                    self._slots[name].active -= 1
                    self._slots[name].load_s -= estimate
            for task in claimed:
                self._hold(task)
            return [(self.workers[t.assigned_to or ""], t) for t in claimed]

    def _hold(self, task: Task) -> None:
        est = self.estimate_s(task)
        slot = self._slots[task.assigned_to or ""]
        slot.active += 1
        slot.load_s += est
        self._inflight[task.id] = _Flight(slot.name, task.lease_token or "", task.kind, est,
                                          time.monotonic())

    def _let_go(self, task_id: str, token: str) -> _Flight | None:
        with self._lock:
            flight = self._inflight.get(task_id)
            if flight is None or flight.token != token:
                return None
            del self._inflight[task_id]
            slot = self._slots.get(flight.worker)
            if slot is not None:
                slot.active -= 1
                slot.load_s = max(0.0, slot.load_s - flight.estimate_s)
            return flight

    def dispatch_round(self) -> int:
        """One pass of seed 000's loop: sweep stale tasks when due, heartbeat running
        ones, and hand every ready task a free worker can take to that worker via
        :meth:`Worker.submit`.

        Returns:
            the number of tasks handed out.
        """
        self._heartbeat_if_due()
        handed = self._dispatch(start=False)
        for worker, task in handed:
            worker.submit(task)
        return len(handed)

    def finished(self) -> bool:
        """True when every task is COMPLETED or DEAD (seed 000)."""
        return self.store.stats().unfinished == 0

    # -- settling --------------------------------------------------------------
    def _token_of(self, task: Task | str) -> tuple[str, str, Task | None]:
        if isinstance(task, Task):
            return task.id, task.lease_token or "", task
        with self._lock:
            flight = self._inflight.get(task)
        return task, flight.token if flight else "", None

    def on_complete(self, task: Task | str, result: Any) -> bool:
        """Record a finished attempt (seed 000). Fenced by the lease token: a worker
        whose task was reclaimed gets False and its result is discarded.

        Args:
            task: the task as handed out (carrying its lease token), or its id.
            result: the JSON result.

        Returns:
            True when the result was stored.
        """
        task_id, token, _ = self._token_of(task)
        flight = self._let_go(task_id, token)
        if flight is not None:
            self._no_prefetch.discard(flight.worker)
        ok = self._stored.pop((task_id, token), None)
        if ok is None:
            ok = self.store.complete(task_id, token, result)
        if ok and flight is not None:
            self._learn(flight.kind, time.monotonic() - flight.began)
        if not ok:
            self.lease_lost += 1
            log.warning("task %s: result discarded, lease lost", task_id)
        return ok

    def on_fail(self, task: Task | str, error: BaseException | str) -> Status | None:
        """Record a failed attempt (seed 000), classifying the error first: a retryable
        failure with attempts left is FAILED with a backoff (``not_before``); anything
        else is DEAD, and its dependents are parked.

        Args:
            task: the task as handed out, or its id.
            error: the exception (classified by
                :func:`~foreperson.retry.is_retryable`) or a message (retryable).

        Returns:
            the new status, or None when the lease was lost.
        """
        task_id, token, record = self._token_of(task)
        if isinstance(error, RateLimited) and hasattr(self.store, "back_off"):
            return self._back_off(task_id, token, error)
        if record is None:
            record = self.store.get(task_id)
        if isinstance(error, BaseException):
            text = f"{type(error).__name__}: {error}"
            retryable = is_retryable(error)
            wait = retry_after_seconds(error)
        else:
            text, retryable, wait = str(error), True, None
        attempts = record.attempts if record else 1
        max_attempts = record.max_attempts if record else 1
        retry_at = None
        if retryable and attempts < max_attempts:
            if wait is None:
                wait = backoff_seconds(attempts, self.backoff_base_s, self.backoff_cap_s,
                                       rng=self.rng)
            retry_at = self.clock.now() + wait
        flight = self._let_go(task_id, token)
        if flight is not None:
            self._no_prefetch.discard(flight.worker)
        status = self.store.fail(task_id, token, text, retry_at=retry_at)
        if status is None:
            self.lease_lost += 1
            log.warning("task %s: result discarded, lease lost (the attempt ended with %s)",
                        task_id, text)
        elif status is Status.FAILED:
            self.retries += 1
        elif status is Status.DEAD:
            self.parked += len(self.store.park_blocked())
        return status

    # -- heartbeats ------------------------------------------------------------
    def _heartbeat_if_due(self) -> None:
        now = self.clock.now()
        if now < self._next_heartbeat:
            return
        self._next_heartbeat = now + self.heartbeat_every_s
        with self._lock:
            leases = {task_id: f.token for task_id, f in self._inflight.items()}
        if leases:
            lost = self.store.heartbeat(leases)
            with self._lock:        # settled meanwhile by this very supervisor: not lost
                lost = {i for i in lost if i in self._inflight
                        and self._inflight[i].token == leases[i]}
            if lost:
                log.warning("lease lost for %d running task(s): %s", len(lost), sorted(lost)[:5])

    # -- the async runtime -----------------------------------------------------

    async def _execute(self, worker: Worker, task: Task) -> None:
        try:
            outcome = (task, True, await worker.run_task(task, self.store))
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):   # give the task back, do not lose it
                await anyio.to_thread.run_sync(self._release, task)
            raise
        except Exception as exc:      # classified in on_fail
            outcome = (task, False, exc)
        self._outcomes.append(outcome)
        if self._wake is not None:
            self._wake.set()

    def _cycle(self, outcomes: list[tuple[Task, bool, Any]], started: list[Task],
               sample: Callable[[], StoreStats]
               ) -> tuple[list[tuple[Worker, Task]], StoreStats | None]:
        """Record starts, settle finished attempts and hand out new work, in one store
        transaction; when nothing is left in flight, also take a snapshot."""
        handed = self._settle_then_claim(outcomes, started)
        idle = not handed and not self._inflight
        return handed, (sample() if idle else None)

    def _release(self, task: Task) -> None:
        self._let_go(task.id, task.lease_token or "")
        try:
            self.store.release(task.id, task.lease_token or "")
        except StoreError as exc:
            log.warning("task %s: cannot give it back (%s); it is reclaimed after "
                        "stale_after", task.id, exc)

    def _settle_then_claim(self, outcomes: list[tuple[Task, bool, Any]],
                           started: list[Task]) -> list[tuple[Worker, Task]]:
        """Record starts, settle finished attempts and claim new work in one store
        transaction. Stores with ``start_many`` / ``complete_many`` (PostgreSQL) write
        the turn's starts and completions in one statement each. If the transaction
        fails, what it claimed is forgotten (it was rolled back) and StoreError
        propagates; the caller keeps the outcomes and tries again."""
        with self._lock:
            before = set(self._inflight)
        self._settled = False
        try:
            with self.store.batch():
                start_many = getattr(self.store, "start_many", None)
                if start_many is not None and len(started) > 1:
                    start_many({t.id: t.lease_token or "" for t in started})
                else:
                    for task in started:
                        self.store.start(task.id, task.lease_token or "")
                done = [(t, v) for t, ok, v in outcomes if ok]
                complete_many = getattr(self.store, "complete_many", None)
                if complete_many is not None and len(done) > 1:
                    stored = complete_many([(t.id, t.lease_token or "", v) for t, v in done])
                    self._stored = {(t.id, t.lease_token or ""): t.id in stored
                                    for t, _ in done}
                for task, ok, value in outcomes:
                    if ok:
                        self.on_complete(task, value)
                    else:
                        self.on_fail(task, value)
                handed = self._dispatch(start=False, extra=self.prefetch)
        except StoreError:
            self._stored.clear()
            with self._lock:
                claimed = [(i, f.token) for i, f in self._inflight.items() if i not in before]
            for task_id, token in claimed:
                self._let_go(task_id, token)
            raise
        self._settled = True
        self._outage_s = 0.0
        return handed

    async def _store_unavailable(self, exc: StoreError, outcomes: list[tuple[Task, bool, Any]],
                                 started: list[Task]) -> None:
        if not self._settled:             # the turn was rolled back: settle it again
            self._outcomes[:0] = outcomes
            self._started[:0] = started
        self._outage_s = min(max(self._outage_s * 2, 0.1), 5.0)
        log.warning("store unavailable, retrying in %.1f s: %s", self._outage_s, exc)
        await anyio.sleep(self._outage_s)

    def _back_off(self, task_id: str, token: str, signal: RateLimited) -> Status | None:
        wait = signal.after_s
        if wait is None:
            wait = backoff_seconds(1, self.backoff_base_s, self.backoff_cap_s, rng=self.rng)
        self._let_go(task_id, token)
        if not self.store.back_off(task_id, token, signal.resource, wait):  # type: ignore[attr-defined]
            self.lease_lost += 1
            return None
        log.info("task %s: %s; backing off %.1f s, attempt not counted", task_id, signal, wait)
        return Status.PENDING

    async def _listen(self, waiter: Callable[..., bool]) -> None:
        kinds = self.known_kinds()
        while True:
            woke = await anyio.to_thread.run_sync(waiter, kinds, 1.0, abandon_on_cancel=True)
            if woke and self._wake is not None:
                self._wake.set()

    def release_held(self) -> list[str]:
        """Give back every task this supervisor holds, running or prefetched (back to
        PENDING, the attempt not counted): for a worker process whose shutdown grace
        period is over. Their running functions' late writes are then refused.

        Returns:
            ids released.
        """
        with self._lock:
            held = [(task_id, f.token) for task_id, f in self._inflight.items()]
        released = []
        for task_id, token in held:
            self._let_go(task_id, token)
            try:
                if self.store.release(task_id, token):
                    released.append(task_id)
            except StoreError as exc:
                log.warning("task %s: cannot give it back (%s); it is reclaimed after "
                            "stale_after", task_id, exc)
        return released

    def stop(self) -> None:
        """Ask :meth:`run` to stop handing out tasks; it returns once in-flight tasks
        settle (or are released, when the run is cancelled)."""
        self._stopping = True

    async def run(self, *, until_finished: bool = True,
                  progress: Callable[[StoreStats], None] | None = None,
                  progress_every_s: float = 0.5, idle_wait_s: float = 0.25) -> RunReport:
        """Dispatch until every task is finished (or :meth:`stop` is called).

        Each worker runs ``concurrency`` tasks at once and holds up to ``prefetch`` more
        (ASSIGNED), so a finished slot starts its next task without waiting for the
        store. Finished attempts are settled and new work is claimed in one store
        transaction per loop turn (group commit).

        Args:
            until_finished: return when the store has no unfinished task; False keeps
                serving (a worker process) until :meth:`stop`.
            progress: called with a :class:`StoreStats` every ``progress_every_s``
                seconds and once at the end.
            progress_every_s: seconds between progress calls and history samples.
            idle_wait_s: longest pause, seconds, when nothing signals new work (new
                tasks added elsewhere, backoffs expiring). A store with
                ``wait_for_work`` (PostgreSQL's LISTEN/NOTIFY) ends it as soon as work
                may be ready. While the store is unreachable the loop keeps its
                outcomes and retries, pausing up to 5 s.

        Returns:
            a :class:`RunReport`.

        Raises:
            ConfigurationError: no worker is registered.
            StoreError: the store failed in a way retrying cannot fix (``transient`` is
                False); transient failures are retried with a growing pause.
        """
        if not self.workers:
            raise ConfigurationError("no workers registered: call supervisor.register(Worker(...))")
        began = time.monotonic()
        store_limiter = anyio.CapacityLimiter(1)
        next_progress = next_overdue_check = 0.0
        self._stopping = False
        inboxes = {name: _Inbox() for name in self.workers}

        def sample() -> StoreStats:
            stats = self.store.stats()
            self.history.append((stats.now.timestamp(), dict(stats.counts)))
            return stats

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._heartbeat_loop)
                waiter = getattr(self.store, "wait_for_work", None)
                if waiter is not None:     # e.g. PostgreSQL LISTEN: wake when work is added
                    tg.start_soon(self._listen, waiter)
                consuming: set[str] = set()     # a worker's slots start with its first task
                final: StoreStats | None = None
                while True:
                    self._wake = anyio.Event()
                    outcomes, self._outcomes = self._outcomes, []
                    started, self._started = self._started, []
                    try:
                        with anyio.CancelScope(shield=True):   # a started status write finishes
                            handed, stats = await anyio.to_thread.run_sync(
                                self._cycle, outcomes, started, sample, limiter=store_limiter)
                    except StoreError as exc:   # unreachable: keep the outcomes, retry
                        if not exc.transient:   # would fail the same way again: stop here
                            raise
                        await self._store_unavailable(exc, outcomes, started)
                        continue
                    for worker, task in handed:
                        if worker.name not in consuming:
                            consuming.add(worker.name)
                            for _ in range(worker.concurrency):
                                tg.start_soon(self._consume, worker, inboxes[worker.name])
                        inboxes[worker.name].put(task)
                    now = time.monotonic()
                    busy = self._inflight or handed or self._outcomes or self._started
                    due = now >= next_progress
                    if stats is None and due:
                        try:
                            stats = await anyio.to_thread.run_sync(sample, limiter=store_limiter)
                        except StoreError as exc:   # the turn itself is settled: just wait
                            if not exc.transient:
                                raise
                            await self._store_unavailable(exc, [], [])
                            continue
                    if stats is not None:
                        if due:     # history is sampled every progress_every_s, callback or not
                            next_progress = now + progress_every_s
                            if progress is not None:
                                progress(stats)
                        if not busy and ((until_finished and stats.unfinished == 0)
                                         or self._stopping):
                            final = stats
                            break
                    if now >= next_overdue_check:   # a prefetched task stuck behind a long one
                        next_overdue_check = now + 0.25
                        await self._release_overdue(inboxes)
                    if self._stopping:
                        await self._give_back_queued(inboxes)
                        if not self._inflight and not self._outcomes:
                            break
                    if not self._outcomes and len(handed) < self.claim_batch:
                        with anyio.move_on_after(idle_wait_s):
                            await self._wake.wait()

                tg.cancel_scope.cancel()
        except BaseExceptionGroup as group:   # one failure: raise it, not a group
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        self._wake = None
        stats = final or await anyio.to_thread.run_sync(sample)
        if progress is not None:
            progress(stats)
        return RunReport(stats, time.monotonic() - began, self.retries, self.reclaimed,
                         self.lease_lost, self.parked, list(self.history))

    async def _consume(self, worker: Worker, inbox: _Inbox) -> None:
        while True:
            task = await inbox.get()
            if self._stopping:           # not started: handed back by _give_back_queued
                self._unstarted.append(task)
                continue
            self._started.append(task)
            await self._execute(worker, task)

    async def _release_overdue(self, inboxes: dict[str, _Inbox]) -> None:
        for name, inbox in inboxes.items():
            overdue = inbox.overdue(self.prefetch_wait_s)
            if overdue:
                self._no_prefetch.add(name)     # until its running task ends
                with anyio.CancelScope(shield=True):
                    for task in overdue:
                        await anyio.to_thread.run_sync(self._release, task)

    async def _give_back_queued(self, inboxes: dict[str, _Inbox]) -> None:
        for inbox in inboxes.values():
            self._unstarted.extend(task for task, _ in inbox.items)
            inbox.items.clear()
        unstarted, self._unstarted = self._unstarted, []
        with anyio.CancelScope(shield=True):
            for task in unstarted:
                await anyio.to_thread.run_sync(self._release, task)

    async def _heartbeat_loop(self) -> None:
        while True:
            await anyio.sleep(self.heartbeat_every_s)
            try:
                await anyio.to_thread.run_sync(self._heartbeat_if_due)
            except StoreError as exc:
                log.warning("heartbeat failed (%s); retrying next beat", exc)

    def run_sync(self, **kwargs: Any) -> RunReport:
        """Blocking :meth:`run`; refuses to run inside a running event loop.

        Raises:
            RuntimeError: called from inside an event loop (use ``await run()``).
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return anyio.run(lambda: self.run(**kwargs))
        raise RuntimeError("run_sync() called inside a running event loop: use await run()")

    def stats(self) -> StoreStats:
        """The store's snapshot: counts per status, active per worker, oldest age."""
        return self.store.stats()
