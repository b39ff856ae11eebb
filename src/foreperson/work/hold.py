"""Holding a task while this code does it: the work layer's lifecycle for work that is
not handed to a :class:`~foreperson.work.Worker` (a team's delegation, run inside the
team's run).

The record goes through the same statuses, under the same rules
(:mod:`foreperson.work.policy`), as a task a :class:`~foreperson.work.Supervisor` runs:

- **claim**: added and claimed RUNNING in one transaction (:meth:`Hold.add_and_claim`),
  or, when an earlier incarnation of the same work may have left the task
  (:meth:`Hold.claim`), taken over from a dead holder, revived from DEAD, waited for
  through its retry backoff, found COMPLETED (the work only replays), or found held
  elsewhere;
- **renew**: the lease is renewed by the process's one
  :data:`~foreperson.work.leases.LEASES` keeper while an attempt runs;
- **settle**: completed, or failed under :func:`retry_delay` (the Supervisor's
  classification and backoff: retried in place after the delay while attempts remain,
  else DEAD), or released (attempt not counted) on cancellation or a park.

:func:`await_elsewhere` is the other way to do a task: submit it for worker processes
and wait until it finishes.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, TypeVar

import anyio
import anyio.to_thread

from ..errors import ConfigurationError, describe, redact
from ..retry import backoff_seconds, is_retryable, retry_after_seconds
from .handles import Waiters
from .leases import DEFAULT_LEASE_S, LEASES
from .store import TaskStore
from .task import Status, Task

__all__ = ["BACKOFF_BASE_S", "BACKOFF_CAP_S", "Failed", "Hold", "await_elsewhere", "error_text",
           "retry_delay", "revive_dead", "store_call"]

T = TypeVar("T")

log = logging.getLogger("foreperson.work")

BACKOFF_BASE_S = 2.0
"""First retry delay, seconds (seed 000: doubled per attempt, jittered)."""
BACKOFF_CAP_S = 60.0
"""Largest retry delay before jitter, seconds."""


def retry_delay(error: BaseException | str, attempts: int, max_attempts: int, *,
                base_s: float = BACKOFF_BASE_S, cap_s: float = BACKOFF_CAP_S,
                rng: random.Random | None = None) -> float | None:
    """Seconds until a failed attempt is tried again, or None when it is not.

    An exception is classified by :func:`~foreperson.retry.is_retryable` (a 4xx,
    ``GiveUp`` or a validation error is not retried) and waits what it asks
    (:func:`~foreperson.retry.retry_after_seconds`, a ``Retry-After``) or the backoff of
    :func:`~foreperson.retry.backoff_seconds`; a message (a string) is retryable.

    Args:
        error: what the attempt ended with.
        attempts: attempts counted so far, including the failed one (at least 1).
        max_attempts: attempts allowed.
        base_s: the first delay, seconds.
        cap_s: the largest delay before jitter, seconds (never below ``base_s``).
        rng: randomness for the jitter (a seeded ``random.Random`` repeats it).

    Returns:
        The delay, seconds (>= 0), or None: the task is DEAD.
    """
    if isinstance(error, BaseException):
        retryable, wait = is_retryable(error), retry_after_seconds(error)
    else:
        retryable, wait = True, None
    attempts = max(attempts, 1)
    if not retryable or attempts >= max_attempts:
        return None
    if wait is None:
        wait = backoff_seconds(attempts, base_s, max(cap_s, base_s), rng=rng)
    return wait


def error_text(error: BaseException | str) -> str:
    """How a failure is recorded: ``"<ExceptionType>: <message>"``, or the message, with
    credentials replaced (:func:`foreperson.errors.describe`, :func:`~foreperson.errors.redact`)."""
    if isinstance(error, BaseException):
        return describe(error)
    return redact(str(error))


async def store_call(store: TaskStore, call: Callable[[], T]) -> T:
    """Make a store call from an event loop: in a worker thread, shielded from
    cancellation (a status write that started finishes), or directly for a store whose
    calls never wait on I/O (``store.blocking`` is False: the in-memory store).

    Args:
        store: the store ``call`` uses.
        call: a blocking call without arguments.

    Returns:
        What ``call`` returns.
    """
    if not getattr(store, "blocking", True):
        return call()       # nothing to await, so nothing can cancel it halfway
    with anyio.CancelScope(shield=True):
        result = await anyio.to_thread.run_sync(call)
    return result


def _now(store: TaskStore) -> float:
    """The store's time (its clock's, so a test's manual clock holds), epoch seconds."""
    clock = getattr(store, "clock", None)
    return clock.now() if clock is not None else time.time()


@dataclass(frozen=True)
class Failed:
    """A held task's work that ended without a result, and the task settled for it
    (DEAD, or FAILED with a retry nobody here could claim).

    Attributes:
        error: the failure as recorded (``"<Type>: <message>"``, plus why no retry ran
            here when one was scheduled).
        attempts: attempts made in this hold.
    """

    error: str
    attempts: int


class Hold(Generic[T]):
    """One task, held by this code while it does the work.

    Use :meth:`claim` or :meth:`add_and_claim` (or pass the latter to the first
    attempt, to overlap the store's commit with the work's start), then :meth:`run` the
    attempts, then settle a result with :meth:`complete` or :meth:`give_up`.

    Args:
        store: where the task is recorded.
        task: the record to add (its ``id``, ``max_attempts`` and payload as stored).
        holder: who holds it (``assigned_to``), e.g. ``run:<run id>@<owner>``.
        lease_s: the lease, seconds (renewed every third of it while an attempt runs).
        backoff_base_s: first retry delay, seconds.
        backoff_cap_s: largest retry delay before jitter, seconds.
        takes_over: given the holder of an active task found by :meth:`claim`, whether
            that holder is an earlier incarnation of this work that is gone (its
            attempt is given back and the task claimed here); None: never.
    """

    def __init__(self, store: TaskStore, task: Task, *, holder: str,
                 lease_s: float = DEFAULT_LEASE_S, backoff_base_s: float = BACKOFF_BASE_S,
                 backoff_cap_s: float = BACKOFF_CAP_S,
                 takes_over: Callable[[str | None], bool] | None = None) -> None:
        self.store = store
        self.task = task
        self.holder = holder
        self.lease_s = lease_s
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self.takes_over = takes_over or (lambda _holder: False)
        self.token: str | None = None
        self.finished = False       # the task was COMPLETED before: the work only replays
        self.attempts = 0

    # -- claiming --------------------------------------------------------------------

    async def add_and_claim(self) -> None:
        """Add the task and claim it RUNNING in one transaction (the task must not
        exist yet).

        Raises:
            ConfigurationError: the store did not let it be claimed right after adding
                it (a task of that id exists, or another holder took it): give this
                work a store of its own.
        """
        store, task = self.store, self.task

        def add_and_claim() -> list[Task]:
            with store.batch():
                store.add([task])
                return store.assign([(task.id, self.holder)], start=True,
                                    lease_s=self.lease_s)

        claimed = await store_call(store, add_and_claim)
        if not claimed or claimed[0].lease_token is None:
            raise ConfigurationError(
                f"the store did not let task {task.id} be claimed right after adding it "
                "(a task of that id exists, or another holder took it); give this work a "
                "store of its own")
        self._held(claimed[0].lease_token)

    async def claim(self) -> bool:
        """Claim the task, which an earlier incarnation of this work may have left:
        new or pending, taken over from a holder ``takes_over`` accepts, revived from
        DEAD, or claimed once the backoff of a FAILED attempt is over. A COMPLETED task
        is left as it is (:attr:`finished`: the work replays, nothing is written).

        Returns:
            True when the task is held here or finished; False when another holder has
            it (a worker process: see :func:`await_elsewhere`).
        """
        while True:
            start, stored = await store_call(self.store, self._claim_once)
            if start == "claimed":
                assert stored.lease_token is not None
                self._held(stored.lease_token)
                return True
            if start == "completed":
                self.finished = True
                return True
            if start == "later" and stored.not_before is not None:
                await anyio.sleep(max(0.0, stored.not_before.timestamp() - _now(self.store)))
                continue
            return False

    def _claim_once(self) -> tuple[str, Task]:
        """One transaction: ``("claimed" | "completed" | "later" | "elsewhere", task)``."""
        store, task, holder = self.store, self.task, self.holder
        with store.batch():
            store.add([task])       # skipped when stored with the same work
            claimed = store.assign([(task.id, holder)], start=True, lease_s=self.lease_s)
            if claimed:
                return "claimed", claimed[0]
            stored = store.get(task.id)
            assert stored is not None
            if stored.status is Status.COMPLETED:
                return "completed", stored
            if stored.status.active:
                if not self.takes_over(stored.assigned_to):
                    return "elsewhere", stored
                store.release(stored.id, stored.lease_token or "")
            elif stored.status is Status.DEAD:
                store.retry_dead([stored.id])
            elif stored.status is Status.FAILED:
                return "later", stored      # an earlier incarnation's retry, backing off
            claimed = store.assign([(task.id, holder)], start=True, lease_s=self.lease_s)
            if claimed:
                return "claimed", claimed[0]
            again = store.get(task.id)
            assert again is not None
            return "elsewhere", again

    def _held(self, token: str) -> None:
        self.token = token
        store, task_id = self.store, self.task.id
        LEASES.keep((id(store), task_id), lambda: not store.heartbeat({task_id: token}),
                    self.lease_s)

    # -- attempts ----------------------------------------------------------------------

    async def run(
        self,
        attempt: Callable[[int, Callable[[], Coroutine[Any, Any, None]] | None], Awaitable[T]],
        *,
        propagate: tuple[type[BaseException], ...] = (),
        release_on: tuple[type[BaseException], ...] = (),
        first_claims: bool = False,
    ) -> T | Failed:
        """Run attempts of the work until one returns, under the retry rules.

        Args:
            attempt: ``attempt(number, beside)`` does the work once (``number`` counts
                from 1 in this hold); ``beside``, when not None, is the task's claim
                (:meth:`add_and_claim`), to run beside the work's start (the attempt
                must await it before it returns or raises).
            propagate: errors that are the program's, not the attempt's: the task is
                failed without a retry and the error raised.
            release_on: errors that stop the work for now (a run parked for a human):
                the task is given back (attempt not counted) and the error raised, as on
                cancellation.
            first_claims: the first attempt is given ``beside`` (the task was not
                claimed yet).

        Returns:
            What the attempt returned (the task still held: settle it), or
            :class:`Failed` once the task is settled for a failure.

        Raises:
            BaseException: ``propagate`` and ``release_on`` errors, cancellation, and
                the failure of work that only replays (:attr:`finished`).
        """
        cancelled = anyio.get_cancelled_exc_class()
        while True:
            self.attempts += 1
            beside = self.add_and_claim if first_claims and self.attempts == 1 else None
            try:
                return await attempt(self.attempts, beside)
            except propagate as exc:
                await self._fail(error_text(exc), retry_in=None)
                raise
            except (*release_on, cancelled):
                await self.release()
                raise
            except Exception as exc:
                if self.token is None:      # nothing held: a replay of finished work failed
                    raise
                failure: Exception = exc
            finally:
                LEASES.drop((id(self.store), self.task.id))   # a lost lease shows at settling
            failed = await self._retry(failure)
            if failed is not None:
                return failed

    async def _retry(self, failure: Exception) -> Failed | None:
        """Settle a failed attempt: None when a retry was claimed here, else how it
        ended."""
        text = error_text(failure)
        wait = retry_delay(failure, self.attempts, self.task.max_attempts,
                           base_s=self.backoff_base_s, cap_s=self.backoff_cap_s)
        await self._fail(text, retry_in=wait)
        if wait is None:
            return Failed(text, self.attempts)
        await anyio.sleep(wait)
        store, task = self.store, self.task
        again = await store_call(store, partial(store.assign, [(task.id, self.holder)],
                                                start=True, lease_s=self.lease_s))
        if again and again[0].lease_token is not None:
            self._held(again[0].lease_token)
            return None
        return Failed(text + "; its retry could not be claimed (another process holds the "
                      "task)", self.attempts)

    async def _fail(self, text: str, *, retry_in: float | None) -> Status | None:
        token = self.token
        if token is None:
            return None
        store, task_id = self.store, self.task.id

        def fail() -> Status | None:
            retry_at = None if retry_in is None else _now(store) + retry_in
            return store.fail(task_id, token, text, retry_at=retry_at)

        return await store_call(store, fail)

    # -- settling ----------------------------------------------------------------------

    async def complete(self, output: Any) -> bool:
        """Record the work's result (JSON); False when the lease was lost (another
        process reclaimed the task) and the record was not updated. Nothing is written
        for :attr:`finished` work."""
        token = self.token
        if token is None:
            return self.finished
        store = self.store
        return await store_call(store, partial(store.complete, self.task.id, token, output))

    def complete_later(self, output: Any) -> Callable[[], None]:
        """:meth:`complete` as a blocking call to make later (in a journal's write
        order); a lost lease is logged."""
        store, task_id, token = self.store, self.task.id, self.token

        def complete() -> None:
            if token is not None and not store.complete(task_id, token, output):
                log.warning("task %s: its lease was lost before its completion was written "
                            "(reclaimed by another process); the record was not updated",
                            task_id)

        return complete

    async def give_up(self, error: str) -> bool:
        """Fail the task without a retry (DEAD); False when the lease was lost."""
        return await self._fail(error, retry_in=None) is Status.DEAD

    async def release(self) -> None:
        """Give the task back (PENDING, the attempt not counted), for whoever runs the
        work again."""
        token = self.token
        if token is not None:
            store = self.store
            await store_call(store, partial(store.release, self.task.id, token))


async def await_elsewhere(store: TaskStore, task: Task, timeout_s: float | None) -> Task:
    """Submit ``task`` for worker processes and wait until it finishes. A task stored
    already is kept (the work was submitted before) or, when DEAD, revived (the work is
    asked for again).

    Args:
        store: the store worker processes claim from.
        task: the record.
        timeout_s: the longest wait, seconds (None: no bound).

    Returns:
        The finished task (COMPLETED or DEAD).

    Raises:
        TimeoutError: it did not finish within ``timeout_s``.
    """
    def submit() -> None:
        with store.batch():
            if not store.add([task]):
                revive_dead(store, task.id)

    await store_call(store, submit)
    waiters = Waiters(store)
    return await waiters.wait(waiters.watch(task.id), timeout_s)



def revive_dead(store: TaskStore, task_id: str) -> bool:
    """Revive ``task_id`` when it is DEAD, as ``foreperson retry`` does
    (``store.retry_dead``: PENDING with fresh attempts, the tasks parked behind it
    too), because the work it records is asked for again (a resumed run re-executes
    the step). A blocking call.

    Returns:
        True when it was DEAD and is revived.
    """
    stored = store.get(task_id)
    if stored is None or stored.status is not Status.DEAD:
        return False
    revived = store.retry_dead([task_id])
    if revived:
        log.info("task %s: revived from DEAD (%s) because its work is asked for again",
                 task_id, stored.error)
    return bool(revived)
