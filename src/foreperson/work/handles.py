"""Submit and await: a handle per submitted task, resolved when the task finishes.

A task settled by this process's own run loop resolves its handle at once. A task
finished elsewhere (a worker process on another machine, another supervisor on the same
file) is found by asking the store which awaited tasks have finished: PostgreSQL wakes
the asker through ``NOTIFY`` (channel ``<schema>.done``), the other stores are polled
with a delay that starts at 10 ms and never exceeds :data:`POLL_MAX_S`. Only one
coroutine asks at a time, for every waiter at once.
"""

from __future__ import annotations

import json
import threading
import time
import warnings
from collections import deque
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import anyio.from_thread
import anyio.to_thread

from ..errors import TaskFailed
from .store import TaskStore, WakesOnWork
from .task import Status, Task

__all__ = ["POLL_MAX_S", "LendsSlot", "TaskHandle", "Waiters", "as_completed"]

POLL_MAX_S = 0.5
"""Longest delay, seconds, before a waiter asks the store again (stores without
notifications): a task finished by another process is seen within this bound."""

_POLL_MIN_S = 0.01
_LISTEN_S = 1.0


@dataclass(eq=False)
class _Pending:
    task_id: str
    event: anyio.Event
    outcome: Task | None = None
    since: float = field(default_factory=time.monotonic)


class Waiters:
    """The handles waiting on one store (one per supervisor).

    Thread-safe where it must be: :meth:`settled` is called from the thread that writes
    the outcome; the events are set on the event loop (:meth:`deliver`, or the poll).
    """

    def __init__(self, store: TaskStore) -> None:
        self.store = store
        self._pending: dict[str, _Pending] = {}
        self._delivered: deque[_Pending] = deque()
        self._wakeups: list[anyio.Event] = []
        self._lock = threading.Lock()
        self._polling: anyio.Lock | None = None    # made on the event loop, lazily
        self._generation = 0

    def watch(self, task_id: str) -> _Pending:
        """Start waiting for ``task_id`` (on the event loop)."""
        with self._lock:
            pending = self._pending.get(task_id)
            if pending is None:
                pending = self._pending[task_id] = _Pending(task_id, anyio.Event())
            return pending

    def watching(self, task_id: str) -> bool:
        """Whether someone waits for ``task_id`` (cheap: the settle path asks for every
        task)."""
        return task_id in self._pending

    def settled(self, task: Task) -> None:
        """Record a finished task's outcome (any thread); :meth:`deliver` wakes its
        waiter on the loop."""
        with self._lock:
            pending = self._pending.pop(task.id, None)
            if pending is None:
                return
            pending.outcome = task
            self._delivered.append(pending)

    def completed(self, task_id: str, result: Any) -> None:
        """:meth:`settled` for a task this process just completed with ``result``."""
        if task_id in self._pending:
            self.settled(Task("", id=task_id, status=Status.COMPLETED,
                              result=json.loads(json.dumps(result))))

    def deliver(self) -> None:
        """Wake the waiters whose outcome was recorded (on the event loop)."""
        with self._lock:
            ready, self._delivered = list(self._delivered), deque()
            wakeups, self._wakeups = (self._wakeups, []) if ready else ([], self._wakeups)
        for pending in ready:
            pending.event.set()
        for wakeup in wakeups:
            wakeup.set()

    def wakeup(self) -> anyio.Event:
        """An event set the next time any waiter's outcome is delivered (on the loop)."""
        event = anyio.Event()
        with self._lock:
            self._wakeups.append(event)
        return event

    async def poll(self) -> None:
        """Ask the store, once for every waiter, which awaited tasks have finished.
        When another coroutine is asking already, wait for its answer instead."""
        if self._polling is None:
            self._polling = anyio.Lock()
        generation = self._generation
        async with self._polling:
            if generation != self._generation:
                return                   # someone asked while we waited for the lock
            with self._lock:
                ids = list(self._pending)
            if ids:
                found = await anyio.to_thread.run_sync(self.store.finished_among, ids)
                for task in found.values():
                    self.settled(task)
                self.deliver()
            self._generation += 1

    async def listen(self, timeout_s: float) -> None:
        """Block up to ``timeout_s`` seconds for a store notification that an awaited
        task ended (stores that send them), else just sleep that long."""
        if isinstance(self.store, WakesOnWork):
            await anyio.to_thread.run_sync(self.store.wait_for_finished, timeout_s,
                                           abandon_on_cancel=True)
        else:
            await anyio.sleep(timeout_s)

    async def news(self, event: anyio.Event, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` seconds for ``event`` (set when this process settles
        a waited-for task) or, on a store that notifies, for word that an awaited task
        ended in another process."""
        if not isinstance(self.store, WakesOnWork):
            with anyio.move_on_after(timeout_s):
                await event.wait()
            return
        async with anyio.create_task_group() as group:
            async def local() -> None:
                await event.wait()
                group.cancel_scope.cancel()

            group.start_soon(local)
            await self.listen(timeout_s)
            group.cancel_scope.cancel()

    async def wait(self, pending: _Pending, timeout_s: float | None) -> Task:
        """The finished task of ``pending``, asking the store with a growing delay.

        Raises:
            TimeoutError: not finished within ``timeout_s`` seconds.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        delay = _POLL_MIN_S
        notifies = isinstance(self.store, WakesOnWork)
        while pending.outcome is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError(f"task {pending.task_id} did not finish within "
                                   f"{timeout_s:g} s")
            step = _LISTEN_S if notifies else delay
            await self.news(pending.event, step if left is None else min(step, left))
            if pending.outcome is None:
                await self.poll()
            delay = min(delay * 2, POLL_MAX_S)
        self.deliver()
        return pending.outcome

class LendsSlot(Protocol):
    """What a handle needs of the task that submitted it (a
    :class:`~foreperson.work.TaskContext`): its worker slot, lent while it waits."""

    def lending_slot(self) -> AbstractContextManager[None]:
        """While inside, the submitting task's worker slot serves other work."""
        ...


class TaskHandle:
    """A submitted task, to await (``await supervisor.submit(task)`` returns one).

    Attributes:
        task_id: the task's id.
        run_id: its run.
    """

    def __init__(self, waiters: Waiters, task: Task, *,
                 context: LendsSlot | None = None) -> None:
        self.task_id = task.id
        self.run_id = task.run_id
        self._waiters = waiters
        self._pending = waiters.watch(task.id)
        self._context = context

    def __repr__(self) -> str:
        return f"TaskHandle({self.task_id!r}, done={self.done})"

    def __iter__(self) -> Iterator[TaskHandle]:
        """Deprecated: ``(handle,) = await current_task().submit(task)``, from when that
        returned a list, still unpacks (with a warning); ``submit`` returns the handle."""
        warnings.warn("current_task().submit(task) returns the handle itself now: write "
                      "`handle = await ...submit(task)`, not `(handle,) = ...`",
                      DeprecationWarning, stacklevel=2)
        yield self

    @property
    def done(self) -> bool:
        """Whether the task's outcome is known here."""
        return self._pending.outcome is not None

    async def wait(self, timeout_s: float | None = None) -> Task:
        """The finished task record (COMPLETED or DEAD), without raising for DEAD.

        Inside a running task (a child submitted with ``current_task().submit``), the
        waiting task lends its worker slot to other work until this returns, so parents
        waiting on children never hold every slot hostage.

        Args:
            timeout_s: longest wait, seconds; None waits until the task ends.

        Raises:
            TimeoutError: it did not finish within ``timeout_s``.
        """
        if self._pending.outcome is not None:
            return self._pending.outcome
        if self._context is None:
            return await self._waiters.wait(self._pending, timeout_s)
        with self._context.lending_slot():
            return await self._waiters.wait(self._pending, timeout_s)

    async def result(self, timeout_s: float | None = None) -> Any:
        """The task's result once it is COMPLETED.

        Args:
            timeout_s: longest wait, seconds; None waits until the task ends.

        Returns:
            the JSON result.

        Raises:
            TaskFailed: the task ended DEAD (its last error and reason code kept).
            TimeoutError: it did not finish within ``timeout_s``.
        """
        task = await self.wait(timeout_s)
        if task.status is Status.DEAD:
            raise TaskFailed(task.id, task.error, task.reason)
        return task.result

    def result_sync(self, timeout_s: float | None = None) -> Any:
        """:meth:`result` from a blocking task function (a worker thread of the run
        loop); the waiting task lends its slot as with :meth:`result`.

        Raises:
            TaskFailed, TimeoutError: as :meth:`result`.
            RuntimeError: called from a thread the run loop did not start.
        """
        return anyio.from_thread.run(self.result, timeout_s)


async def as_completed(handles: Iterable[TaskHandle]) -> AsyncIterator[TaskHandle]:
    """Yield ``handles`` as their tasks finish (COMPLETED or DEAD), each once.

    Handles settled by this process's run loop come out at once; for the rest the store
    is asked once per poll for all of them (on notifications with PostgreSQL), so
    waiting on 10,000 tasks costs one query per poll, not 10,000.
    """
    remaining = {h._pending: h for h in handles}
    if not remaining:
        return
    waiters = next(iter(remaining.values()))._waiters
    notifies = isinstance(waiters.store, WakesOnWork)
    delay = _POLL_MIN_S
    while remaining:
        wakeup = waiters.wakeup()
        waiters.deliver()
        done = [p for p in remaining if p.outcome is not None]
        for pending in done:
            yield remaining.pop(pending)
        if done or not remaining:
            delay = _POLL_MIN_S
            continue
        await waiters.news(wakeup, _LISTEN_S if notifies else delay)
        if not wakeup.is_set():
            await waiters.poll()
            delay = min(delay * 2, POLL_MAX_S)
