"""The supervisor: decides who does what, and never does the work itself (seed 000).

This module is the facade, with seed 000's wiring and names: ``register``,
``add_task(s)``, ``dispatch_round``, ``on_complete``, ``on_fail``, ``finished``,
``tasks``. Its collaborators each own one thing:

* :class:`~foreperson.work.dispatcher.Dispatcher`: slots, the in-flight book,
  estimates, placement strategies;
* :class:`~foreperson.work.loop.RunLoop`: one run (settle-and-claim turns, lanes,
  heartbeats, wake-ups, progress);
* :class:`~foreperson.work.handles.Waiters`: submitted tasks and their waiters;
* the store, whose status transitions follow :mod:`foreperson.work.policy`.

Three ways to drive it:

* ``await supervisor.run()`` / ``run_sync()``: runs until every task (of the store, or
  of ``run_id``) is finished, and returns a :class:`RunReport` of that run;
* ``async with supervisor.serving():`` then ``await supervisor.submit(task)`` and
  ``await handle.result()``: submit and await, with the run loop in the background;
* seed 000's loop: ``while not sup.finished(): sup.dispatch_round(); time.sleep(0.05)``
  with workers that run each task on a thread via :meth:`Worker.submit`.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import random
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread

from .. import telemetry
from ..clock import Clock, SystemClock
from ..errors import ConfigurationError, InvalidPlan, RateLimited, StoreError
from ..retry import backoff_seconds
from .dispatcher import Dispatcher
from .handles import TaskHandle, Waiters, as_completed
from .hold import BACKOFF_BASE_S, BACKOFF_CAP_S, error_text, retry_delay
from .leases import DEFAULT_LEASE_S, RENEW_FRACTION
from .loop import Outcome, RunCounters, RunLoop, RunReport
from .retention import Retention
from .store import BacksOffResources, CompletesAndClaims, StoreStats, TaskStore
from .stores.memory import MemoryStore
from .strategies import STRATEGIES
from .task import Status, Task
from .worker import Worker

__all__ = ["RunReport", "Supervisor", "TasksView"]

log = logging.getLogger("foreperson.supervisor")


def _report_failure(status: Status, kind: str) -> None:
    """Tell the metric sinks that a ``kind`` task was retried or went DEAD."""
    for sink in telemetry.SINKS:
        if status is Status.FAILED:
            sink.task_retried(kind)
        else:
            sink.task_dead(kind)


class TasksView(Mapping[str, Task]):
    """Seed 000's ``sup.tasks``: a read-only mapping of task id -> :class:`Task`, read
    from the store (each lookup is a store read; a copy, so editing it changes
    nothing)."""

    def __init__(self, store: TaskStore) -> None:
        self._store = store

    def __getitem__(self, task_id: str) -> Task:
        task = self._store.get(task_id)
        if task is None:
            raise KeyError(task_id)
        return task

    def __iter__(self) -> Iterator[str]:
        return iter([t.id for t in self._store.list_tasks()])

    def __len__(self) -> int:
        return self._store.stats().total

    def values(self) -> list[Task]:  # type: ignore[override]
        """Every task, in insertion order (one store read)."""
        return self._store.list_tasks()


class Supervisor:
    """Hands tasks from a store to registered workers and handles what fails.

    Args:
        store: where task records live (default: a new :class:`MemoryStore`).
        strategy: ``"balanced"`` (default), ``"least_loaded"``, ``"round_robin"`` or
            ``"capability"`` (see :mod:`foreperson.work.strategies`).
        stale_after: the lease, seconds, of a task claimed here that has no
            ``stale_after`` of its own (nor one for its kind): a holder that does not
            heartbeat for that long is presumed dead (seed 000: three to five times
            the p99 task duration; default 90).
        stale_after_by_kind: kind -> lease seconds, given to tasks of that kind that
            are added without their own ``stale_after``.
        kinds: kinds accepted by ``add_task`` besides those of registered workers (for
            workers that run in other processes).
        backoff_base_s: first retry delay, seconds (default 2).
        backoff_cap_s: largest retry delay before jitter, seconds (default 60).
        heartbeat_every_s: longest time between heartbeats of held tasks, seconds
            (default ``stale_after / 3``, at most 10; a task with a shorter lease is
            heartbeaten at a third of it).
        sweep_every_s: seconds between sweeps for expired leases (default
            ``stale_after / 3``, at most 1).
        clock: source of time (defaults to the store's clock).
        rng: randomness for backoff jitter (a seeded ``random.Random`` in tests).
        pull: workers claim for themselves instead of being chosen per task (worker
            processes: placement emerges from who has a free slot).
        prefetch: tasks each worker may hold beyond its ``concurrency`` in
            :meth:`run`, so its next task starts the moment one ends (default 1).
        prefetch_wait_s: seconds a prefetched task may wait behind a long one before it
            is given back for another worker (default 2).
        claim_batch: most tasks claimed per store transaction (default: 16, small so
            work starts early, or half of all workers' slots when that is more).
        hung_after: an attempt still running after this many times its lease (default
            10; None: never) is presumed hung inside a live process: its heartbeat stops,
            so its lease expires and the task is reclaimed and run again, and the hung
            attempt's late result is refused. ``Worker(timeout_s=)`` bounds an attempt
            more precisely.
        retention: remove old finished work while running (a long-lived process, e.g.
            ``foreperson worker --retain 30d``): every ``retention.every_s`` seconds, in
            the background, a few seconds at a time (see :mod:`foreperson.work.retention`;
            None, the default: never).

    Raises:
        ConfigurationError: unknown strategy or a lease that is not a positive number
            of seconds.
    """

    def __init__(self, store: TaskStore | None = None, *, strategy: str = "balanced",
                 stale_after: float = DEFAULT_LEASE_S,
                 stale_after_by_kind: Mapping[str, float] | None = None,
                 kinds: Iterable[str] = (), backoff_base_s: float = BACKOFF_BASE_S,
                 backoff_cap_s: float = BACKOFF_CAP_S, heartbeat_every_s: float | None = None,
                 sweep_every_s: float | None = None, clock: Clock | None = None,
                 rng: random.Random | None = None, pull: bool = False, prefetch: int = 1,
                 prefetch_wait_s: float = 2.0, claim_batch: int | None = None,
                 hung_after: float | None = 10.0, retention: Retention | None = None) -> None:
        if strategy not in STRATEGIES:
            raise ConfigurationError(f"unknown strategy {strategy!r}: choose one of {STRATEGIES}")
        leases = {"stale_after": stale_after, **(stale_after_by_kind or {})}
        for name, seconds in leases.items():
            if not 0 < seconds < 1e9:
                raise ConfigurationError(f"{name} must be a positive number of seconds, "
                                         f"got {seconds}")
        self.store: TaskStore = store if store is not None else MemoryStore(clock=clock)
        # asked once: a runtime-checkable protocol's isinstance costs tens of microseconds
        self._one_statement = isinstance(self.store, CompletesAndClaims)
        self.strategy = strategy
        self.stale_after = float(stale_after)
        self.stale_after_by_kind = dict(stale_after_by_kind or {})
        self.kinds = set(kinds)
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        tick = min(self.stale_after * RENEW_FRACTION, 10.0)
        self.heartbeat_every_s = heartbeat_every_s or tick
        self.sweep_every_s = sweep_every_s or min(self.stale_after / 3, 1.0)
        self.clock: Clock = clock or getattr(self.store, "clock", None) or SystemClock()
        self.rng = rng or random.Random()
        self.prefetch = prefetch
        self.prefetch_wait_s = prefetch_wait_s
        self.dispatcher = Dispatcher(strategy, lease_s=self.stale_after, pull=pull,
                                     claim_batch=claim_batch)
        self.waiters = Waiters(self.store)
        self.counters = RunCounters()
        self.stopping = False
        self.settled_last_turn = True
        self._next_sweep = 0.0
        self._next_park = 0.0
        self._next_heartbeat = 0.0
        self._stored: dict[tuple[str, str], bool] = {}   # completions written in bulk
        self.hung_after = hung_after
        self.retention = retention
        self._hung: set[str] = set()
        self._loop: RunLoop | None = None
        # a store that refused a release for good (a deleted database): the tasks not
        # given back since, logged once by release_held
        self._refused: StoreError | None = None
        self._not_given_back: list[str] = []

    # -- set-up ----------------------------------------------------------------
    @property
    def workers(self) -> dict[str, Worker]:
        """The roster: worker name -> :class:`Worker`."""
        return self.dispatcher.workers

    @property
    def pull(self) -> bool:
        """Whether workers claim for themselves (worker processes)."""
        return self.dispatcher.pull

    @property
    def claim_batch(self) -> int:
        """Most tasks claimed per store transaction."""
        return self.dispatcher.claim_batch

    @property
    def tasks(self) -> TasksView:
        """Seed 000's inspection: a read-only mapping of task id -> :class:`Task`."""
        return TasksView(self.store)

    def register(self, worker: Worker) -> Worker:
        """Add a worker to the roster; it reports to this supervisor.

        Returns:
            the worker, for chaining.

        Raises:
            ConfigurationError: a worker with that name is already registered, or the
                supervisor is running.
        """
        with self.dispatcher.lock:
            if worker.name in self.workers:
                raise ConfigurationError(f"a worker named {worker.name!r} is already registered")
            if self._loop is not None:
                raise ConfigurationError(f"worker {worker.name!r}: register workers before "
                                         "the run starts")
            worker.supervisor = self
            self.dispatcher.add(worker)
            return worker

    def known_kinds(self) -> set[str]:
        """Kinds some registered worker (or ``kinds=``) can do."""
        return self.kinds | self.dispatcher.kinds()

    def add_tasks(self, tasks: Sequence[Task]) -> list[str]:
        """Validate and store tasks (seed 000: a plan is checked before anything runs).

        A task without ``stale_after`` gets its kind's from ``stale_after_by_kind``.

        Returns:
            ids newly stored (ids already stored with the same work are skipped:
            re-adding is harmless).

        Raises:
            InvalidPlan: a kind no registered worker can do, an unknown dependency, a
                dependency cycle, a malformed task, or an id already stored with other
                work; nothing from the batch is stored.
        """
        known = self.known_kinds()
        for task in tasks:
            if task.kind not in known:
                raise InvalidPlan(
                    f"task {task.id}: no registered worker can do kind {task.kind!r} "
                    f"(known kinds: {sorted(known)}); register a worker for it first",
                    task_id=task.id)
            if task.stale_after is None and task.kind in self.stale_after_by_kind:
                task.stale_after = self.stale_after_by_kind[task.kind]
        added = self.store.add(list(tasks))
        if self._loop is not None:
            self._loop.wake()
        return added

    def add_task(self, task: Task) -> str:
        """Validate and store one task (seed 000's ``add_task``). See :meth:`add_tasks`.

        Returns:
            the task id.
        """
        self.add_tasks([task])
        return task.id

    def estimate_s(self, task: Task) -> float:
        """Expected seconds for ``task``: its ``estimate_s``, else the learned mean for
        its kind, else 1 s."""
        return self.dispatcher.estimate_s(task, self.store)

    # -- submit and await ------------------------------------------------------
    async def submit(self, task: Task) -> TaskHandle:
        """Store ``task`` and return a handle to await its result.

        The task is marked ``awaited``; whoever finishes it (this process's run loop, or
        a worker process elsewhere on the same store) resolves the handle. Something
        must run it: :meth:`serving` (or :meth:`run`) here, or worker processes.

        Returns:
            the :class:`~foreperson.work.handles.TaskHandle`.

        Raises:
            InvalidPlan: as :meth:`add_tasks`.
        """
        (handle,) = await self.submit_many([task])
        return handle

    async def submit_many(self, tasks: Sequence[Task]) -> list[TaskHandle]:
        """:meth:`submit` for a batch, stored in one transaction (dependencies among
        them allowed).

        Returns:
            one handle per task, in order.

        Raises:
            InvalidPlan: as :meth:`add_tasks`; nothing of the batch is stored.
        """
        tasks = list(tasks)
        for task in tasks:
            task.awaited = True
        handles = [TaskHandle(self.waiters, task) for task in tasks]
        await anyio.to_thread.run_sync(self.add_tasks, tasks)
        return handles

    @staticmethod
    def as_completed(handles: Iterable[TaskHandle]) -> AsyncIterator[TaskHandle]:
        """Yield ``handles`` as their tasks finish (see
        :func:`~foreperson.work.handles.as_completed`)."""
        return as_completed(handles)

    @asynccontextmanager
    async def serving(self, *, progress: Callable[[StoreStats], None] | None = None
                      ) -> AsyncIterator[Supervisor]:
        """Run the loop in the background while the body submits and awaits::

            async with supervisor.serving():
                handle = await supervisor.submit(Task("classify", {...}))
                print(await handle.result())

        On leaving, the loop stops taking new work, lets what runs finish and returns.
        With no worker registered here (the work is done by ``foreperson worker``
        processes on the same store) there is no loop to run: submissions are awaited
        all the same. An error of the loop (a store that fails for good) ends the body
        and is raised as itself, not inside an exception group.
        """
        if not self.workers:
            yield self
            return
        failure: list[BaseException] = []
        try:
            async with anyio.create_task_group() as group:
                done = anyio.Event()

                async def serve() -> None:
                    try:
                        await self.run(until_finished=False, progress=progress)
                    except BaseException as exc:
                        failure.append(exc)
                        raise
                    finally:
                        done.set()

                group.start_soon(serve)
                try:
                    yield self
                finally:
                    self.stop()
                    with anyio.CancelScope(shield=True):
                        await done.wait()
        except BaseExceptionGroup as errors:   # one failure: raise it, not a group
            real = [e for e in errors.exceptions
                    if not isinstance(e, anyio.get_cancelled_exc_class())]
            if len(real) == 1:
                raise real[0] from None
            raise

    # -- seed 000's loop ---------------------------------------------------------
    def dispatch_round(self) -> int:
        """One pass of seed 000's loop: sweep expired leases when due, heartbeat held
        tasks, and hand every ready task a free worker can take to that worker via
        :meth:`Worker.submit`.

        Returns:
            the number of tasks handed out.
        """
        self.heartbeat()
        handed = self._claim(start=False)
        for worker, task in handed:
            worker.submit(task)
        return len(handed)

    def finished(self, run_id: str | None = None) -> bool:
        """True when every task (of the store, or of ``run_id``) is COMPLETED or DEAD
        (seed 000)."""
        return self.store.stats(run_id=run_id).unfinished == 0

    def stats(self, run_id: str | None = None) -> StoreStats:
        """The store's snapshot: counts per status, active per worker, oldest age (of the
        whole store, or of ``run_id``)."""
        return self.store.stats(run_id=run_id)

    # -- claiming and sweeping -------------------------------------------------
    def _claim(self, *, start: bool, extra: int = 0) -> list[tuple[Worker, Task]]:
        """Claim into free slots, then sweep when due (after: work starts first)."""
        try:
            return self.dispatcher.claim(self.store, start=start, extra=extra,
                                         stopping=self.stopping)
        finally:
            self.sweep_if_due()

    def sweep_if_due(self) -> None:
        """Every ``sweep_every_s``: reclaim expired leases (whoever's) and, after a
        reclaim or every 30 s, park the dependents of DEAD tasks (a task that fails DEAD
        parks its own dependents at once)."""
        now = self.clock.now()
        if now < self._next_sweep:
            return
        self._next_sweep = now + self.sweep_every_s
        reclaimed = self.store.reclaim_stale()
        if reclaimed:
            log.warning("reclaimed %d task(s) whose holder's lease expired: %s",
                        len(reclaimed), reclaimed[:5])
            self.counters.reclaimed += len(reclaimed)
            for sink in telemetry.SINKS:
                sink.tasks_reclaimed(len(reclaimed))
            self._resolve_finished(reclaimed)
        # a task failing DEAD parks its dependents at once (on_fail, in whichever process
        # failed it); a reclaim can end one DEAD too; the sweep over every waiting task
        # is a safety net, every 30 s
        if reclaimed:
            self._parked(self.store.park_blocked(reclaimed))
        if now >= self._next_park:
            self._next_park = now + 30.0
            self._parked(self.store.park_blocked())

    def _parked(self, ids: list[str]) -> None:
        self.counters.parked += len(ids)
        self._resolve_finished(ids)

    def _resolve_finished(self, ids: list[str]) -> None:
        """Resolve the waiters of ``ids`` that are now finished (read from the store)."""
        watched = [i for i in ids if self.waiters.watching(i)]
        if watched:
            for task in self.store.finished_among(watched).values():
                self.waiters.settled(task)

    # -- settling ----------------------------------------------------------------
    def settle_and_claim(self, outcomes: list[Outcome],
                         started: list[Task]) -> list[tuple[Worker, Task]]:
        """One turn of the run loop, in one store transaction: record starts, settle
        finished attempts, claim new work. If the transaction fails, what it claimed is
        forgotten (it was rolled back) and StoreError propagates; the caller keeps the
        outcomes and tries again."""
        finished = {t.id for t, _, _ in outcomes}   # completing or failing counts it
        started = [t for t in started if t.id not in finished]
        store = self.store
        if (self._one_statement and self.pull and len(self.workers) == 1
                and all(ok for _, ok, _ in outcomes) and len(finished) == len(outcomes)):
            return self._turn_in_one_statement(store, outcomes, started)  # type: ignore[arg-type]
        before = set(self.dispatcher.held())
        self.settled_last_turn = False
        try:
            with self.store.batch():
                if started:
                    self.store.start_many({t.id: t.lease_token or "" for t in started})
                self._complete_in_bulk([(t, v) for t, ok, v in outcomes if ok])
                for task, ok, value in outcomes:
                    if ok:
                        self.on_complete(task, value)
                    else:
                        self.on_fail(task, value)
                handed = self._claim(start=True, extra=self.prefetch)
        except StoreError:
            self._stored.clear()
            for task_id, token in set(self.dispatcher.held()) - before:
                self.dispatcher.let_go(task_id, token)
            raise
        self.settled_last_turn = True
        return handed

    def _turn_in_one_statement(self, store: CompletesAndClaims, outcomes: list[Outcome],
                               started: list[Task]) -> list[tuple[Worker, Task]]:
        """:meth:`settle_and_claim` for a worker process whose turn has only
        completions: one statement, one round trip, one commit."""
        self.settled_last_turn = False
        flights = [self.dispatcher.let_go(t.id, t.lease_token or "") for t, _, _ in outcomes]
        worker, room, now = self.dispatcher.pull_plan(self.prefetch, self.stopping)
        stored, claimed = store.complete_and_claim(
            {t.id: t.lease_token or "" for t in started},
            [(t.id, t.lease_token or "", v) for t, _, v in outcomes], worker.name,
            worker.can_do, room, start=now, lease_s=self.dispatcher.lease_s)
        self.settled_last_turn = True
        for (task, _, value), flight in zip(outcomes, flights, strict=True):
            if task.id not in stored:
                self.counters.lease_lost += 1
                log.warning("task %s: result discarded, lease lost", task.id)
                continue
            if flight is not None:
                self.dispatcher.learn(flight.kind, time.monotonic() - flight.began)
            self.waiters.completed(task.id, value)
        for task in claimed:
            self.dispatcher.hold(task, self.store)
        self.sweep_if_due()
        return [(worker, task) for task in claimed]

    def _complete_in_bulk(self, done: list[tuple[Task, Any]]) -> None:
        """Write the turn's completions in one statement. Two attempts of one task (a
        reclaimed one still running here, and its successor) are left to
        :meth:`on_complete`, one by one: the bulk answer names ids, not leases."""
        seen = collections.Counter(t.id for t, _ in done)
        unique = [(t, v) for t, v in done if seen[t.id] == 1]
        if len(unique) > 1:
            stored = self.store.complete_many([(t.id, t.lease_token or "", v)
                                               for t, v in unique])
            self._stored = {(t.id, t.lease_token or ""): t.id in stored for t, _ in unique}

    def _task_and_token(self, task: Task | str) -> tuple[str, str, Task | None]:
        if isinstance(task, Task):
            return task.id, task.lease_token or "", task
        return task, self.dispatcher.token_of(task), None

    def on_complete(self, task: Task | str, result: Any) -> bool:
        """Record a finished attempt (seed 000). Fenced by the lease token: a worker
        whose task was reclaimed gets False and its result is discarded.

        Args:
            task: the task as handed out (carrying its lease token), or its id.
            result: the JSON result.

        Returns:
            True when the result was stored.
        """
        task_id, token, _ = self._task_and_token(task)
        flight = self.dispatcher.let_go(task_id, token)
        ok = self._stored.pop((task_id, token), None)
        if ok is None:
            ok = self.store.complete(task_id, token, result)
        if not ok:
            self.counters.lease_lost += 1
            log.warning("task %s: result discarded, lease lost", task_id)
            return False
        if flight is not None:
            self.dispatcher.learn(flight.kind, time.monotonic() - flight.began)
        self.waiters.completed(task_id, result)
        return True

    def on_fail(self, task: Task | str, error: BaseException | str) -> Status | None:
        """Record a failed attempt (seed 000), classifying the error first: a retryable
        failure with attempts left is FAILED with a backoff (``not_before``); anything
        else is DEAD, and its dependents are parked.

        Args:
            task: the task as handed out, or its id.
            error: the exception (classified by :func:`~foreperson.retry.is_retryable`)
                or a message (retryable).

        Returns:
            the new status, or None when the lease was lost.
        """
        task_id, token, record = self._task_and_token(task)
        if isinstance(error, RateLimited) and isinstance(self.store, BacksOffResources):
            return self._back_off(self.store, task_id, token, error)
        if record is None:
            record = self.store.get(task_id)
        text, retry_at = self._classify(error, record)
        self.dispatcher.let_go(task_id, token)
        status = self.store.fail(task_id, token, text, retry_at=retry_at)
        if telemetry.SINKS and status is not None:
            _report_failure(status, record.kind if record is not None else "?")
        if status is None:
            self.counters.lease_lost += 1
            log.warning("task %s: result discarded, lease lost (the attempt ended with %s)",
                        task_id, text)
        elif status is Status.FAILED:
            self.counters.retries += 1
        else:
            self._resolve_finished([task_id])
            self._parked(self.store.park_blocked([task_id]))
        return status

    def _classify(self, error: BaseException | str, record: Task | None
                  ) -> tuple[str, float | None]:
        """The error's text and when to retry (None: do not)."""
        # the attempt that just failed counts, even if it was never marked started
        wait = retry_delay(error, record.attempts if record else 1,
                           record.max_attempts if record else 1, base_s=self.backoff_base_s,
                           cap_s=self.backoff_cap_s, rng=self.rng)
        return error_text(error), None if wait is None else self.clock.now() + wait

    def _back_off(self, store: BacksOffResources, task_id: str, token: str,
                  signal: RateLimited) -> Status | None:
        wait = signal.after_s
        if wait is None:
            wait = backoff_seconds(1, self.backoff_base_s, self.backoff_cap_s, rng=self.rng)
        self.dispatcher.let_go(task_id, token)
        if not store.back_off(task_id, token, signal.resource, wait):
            self.counters.lease_lost += 1
            return None
        log.info("task %s: %s; backing off %.1f s, attempt not counted", task_id, signal, wait)
        return Status.PENDING

    # -- leases ------------------------------------------------------------------
    def heartbeat(self) -> None:
        """Renew the leases of every task held here, when due (seed 000's loop calls
        it each round; the run loop on a timer). Warns only about leases really taken
        over: a task settled meanwhile by this supervisor is not "lost"."""
        now = self.clock.now()
        if now < self._next_heartbeat:
            return
        self._next_heartbeat = now + min(self.heartbeat_every_s,
                                         self.dispatcher.shortest_lease_s() * RENEW_FRACTION)
        leases, hung = self.dispatcher.leases(self.hung_after)
        for task_id in set(hung) - self._hung:
            log.warning("task %s has run for more than %g times its lease: presumed hung, its "
                        "heartbeat stops so it is reclaimed and retried (give the worker "
                        "timeout_s to bound an attempt)", task_id, self.hung_after)
        self._hung = set(hung)
        if not leases:
            return
        lost = {i for i in self.store.heartbeat(leases)
                if self.dispatcher.holds(i, leases[i])}
        if lost:
            log.warning("lease lost for %d running task(s) (reclaimed by another process "
                        "after their lease expired): %s", len(lost), sorted(lost)[:5])

    def release(self, task: Task) -> None:
        """Give one held task back (PENDING, a started attempt not counted). After the
        store refused one for good (a failure that is not transient) it is not asked
        again: :meth:`release_held` logs every task not given back in one line."""
        self.dispatcher.let_go(task.id, task.lease_token or "")
        if self._refused is not None:
            self._not_given_back.append(task.id)
            return
        try:
            self.store.release(task.id, task.lease_token or "")
        except StoreError as exc:
            if not exc.transient:
                self._refused = exc
                self._not_given_back.append(task.id)
                return
            log.warning("task %s: cannot give it back (%s); it is reclaimed when its "
                        "lease expires", task.id, exc)

    def release_held(self) -> list[str]:
        """Give back every task this supervisor holds, running or prefetched (back to
        PENDING, a started attempt not counted): on Ctrl-C, or for a worker process
        whose shutdown grace period is over. Their running functions' late writes are
        then refused.

        A store that fails is logged once for all of them (not once per task), and after
        a failure that is not transient (a deleted database) it is not asked again.

        Returns:
            ids released.
        """
        released: list[str] = []
        kept, self._not_given_back = self._not_given_back, []
        error = self._refused
        for task_id, token in self.dispatcher.held():
            self.dispatcher.let_go(task_id, token)
            if error is not None and not error.transient:
                kept.append(task_id)        # every write would fail the same way
                continue
            try:
                if self.store.release(task_id, token):
                    released.append(task_id)
            except StoreError as exc:
                error = exc
                kept.append(task_id)
        self._refused = None
        if kept:
            shown = ", ".join(kept[:5]) + (", ..." if len(kept) > 5 else "")
            log.warning("%d held task(s) not given back (%s): %s; they are reclaimed when "
                        "their lease expires", len(kept), shown, error)
        return released

    # -- the async runtime -----------------------------------------------------
    def stop(self) -> None:
        """Ask :meth:`run` to stop handing out tasks; it returns once in-flight tasks
        settle (or are released, when the run is cancelled)."""
        self.stopping = True
        if self._loop is not None:
            self._loop.wake()

    async def run(self, *, until_finished: bool = True, run_id: str | None = None,
                  progress: Callable[[StoreStats], None] | None = None,
                  progress_every_s: float = 0.5, idle_wait_s: float = 0.25) -> RunReport:
        """Dispatch until every task is finished (or :meth:`stop` is called).

        Each worker runs ``concurrency`` tasks at once and holds up to ``prefetch`` more
        (ASSIGNED, not yet counted as attempts), so a finished slot starts its next task
        without waiting for the store. Finished attempts are settled and new work is
        claimed in one store transaction per loop turn (group commit). Cancelled (Ctrl-C),
        it gives every held task back before returning.

        Args:
            until_finished: return when nothing is unfinished (of the store, or of
                ``run_id``); False keeps serving (a worker process) until :meth:`stop`.
            run_id: the run to finish (None: the whole store).
            progress: called in a thread (never on the event loop) with a
                :class:`StoreStats` every ``progress_every_s`` seconds and at the end.
            progress_every_s: seconds between progress calls and history samples.
            idle_wait_s: longest pause, seconds, when nothing signals new work. A store
                that notifies (PostgreSQL's LISTEN/NOTIFY) ends it as soon as work may
                be ready. While the store is unreachable the loop keeps its outcomes
                and retries, pausing up to 5 s.

        Returns:
            a :class:`RunReport` of this run.

        Raises:
            ConfigurationError: no worker is registered, or a run is already going on.
            StoreError: the store failed in a way retrying cannot fix (``transient`` is
                False); transient failures are retried with a growing pause.
        """
        if not self.workers:
            raise ConfigurationError("no workers registered: call supervisor.register(Worker(...))")
        if self._loop is not None:
            raise ConfigurationError("this supervisor is already running; submit to it, or "
                                     "use another Supervisor")
        self.stopping = False
        self.counters = RunCounters()
        self._loop = RunLoop(self, until_finished=until_finished, run_id=run_id,
                             progress=progress, progress_every_s=progress_every_s,
                             idle_wait_s=idle_wait_s)
        try:
            return await self._loop.run()
        finally:
            self._loop = None

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
