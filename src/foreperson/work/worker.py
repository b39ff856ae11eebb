"""Workers: declare what they can do, execute one task per slot, report back.

A worker holds no view of the overall job (seed 000). It never touches the store
itself: the supervisor (or a worker process's runtime) claims, heartbeats and settles
on its behalf, with the task's lease token.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import json
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from ..errors import ConfigurationError, GiveUp, LeaseLost
from .task import Task

if TYPE_CHECKING:
    from .store import TaskStore
    from .supervisor import Supervisor

__all__ = ["TaskContext", "Worker", "checked_result", "current_task"]

TaskFn = Callable[[Task], Any] | Callable[[Task], Awaitable[Any]]


@dataclass(frozen=True)
class TaskContext:
    """What the running task may ask of the runtime (see :func:`current_task`).

    Attributes:
        task: the task, with its lease token.
        worker: the worker's name.
        store: the store holding the task.
    """

    task: Task
    worker: str
    store: TaskStore

    def once(self, name: str = "effect") -> bool:
        """Claim the side effect ``name`` for this task: True exactly once per task and
        name, across every attempt and reclaim, and only while this worker still holds
        the lease (seed 000: "make the side effect conditional on a claim key derived
        from the task ID"). Do the effect only when it returns True.

        Returns:
            True: do the effect now. False: it was claimed before (by an earlier attempt).

        Raises:
            LeaseLost: this worker no longer holds the task (it was reclaimed after
                ``stale_after``, or finished elsewhere): stop, do nothing more.
            StoreError: the store failed.
        """
        key = f"{self.task.claim_key}:{name}"
        token = self.task.lease_token or ""
        if self.store.claim_effect(key, self.task.id, token):
            return True
        if self.store.heartbeat({self.task.id: token}):      # the lease is gone
            raise LeaseLost(self.task.id)
        return False


    def dependency_results(self) -> dict[str, Any]:
        """Results of the tasks this one depends on, by id (all COMPLETED, or the task
        would not have been ready).

        Raises:
            StoreError: the store failed.
        """
        out = {}
        for dep in self.task.depends_on:
            record = self.store.get(dep)
            out[dep] = record.result if record is not None else None
        return out




def checked_result(result: Any) -> Any:
    """``result`` if it is JSON (what a store can keep).

    Raises:
        GiveUp: it is not JSON (a set, a datetime, an object …): the same code would
            return the same thing again, so the task is parked DEAD with the reason.
    """
    try:
        json.dumps(result, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise GiveUp(f"the task's result is not JSON ({exc}); return dicts, lists, "
                     "strings, numbers, booleans or None") from None
    return result


_CURRENT: contextvars.ContextVar[TaskContext] = contextvars.ContextVar("foreperson_task")


def current_task() -> TaskContext:
    """The context of the task running in this thread or coroutine.

    Raises:
        LookupError: called outside a task.
    """
    try:
        return _CURRENT.get()
    except LookupError:
        raise LookupError("current_task() is only available inside a running task") from None


class Worker:
    """Executes tasks of the kinds it declares.

    Subclass and override :meth:`execute` (plain or ``async def``), or pass ``fn``.

    Args:
        name: unique name, used in ``assigned_to`` and metrics.
        can_do: kinds this worker accepts.
        skill: kind -> skill score for the ``capability`` strategy (default 1.0 each).
        supervisor: the supervisor to report to from :meth:`submit` (seed 000's
            wiring); :meth:`Supervisor.register` sets it too.
        fn: the work, ``fn(task) -> result`` (sync or async); the result must be JSON.
        concurrency: tasks this worker runs at once (>= 1). Blocking work runs in
            threads, at most ``concurrency`` at a time.
        timeout_s: seconds an attempt may take before it fails with TimeoutError
            (retryable); None = no limit. Only async work can be interrupted; a blocking
            function's late result is discarded.

    Raises:
        ConfigurationError: empty name, no kinds, or concurrency < 1.
    """

    def __init__(self, name: str, can_do: Iterable[str] | None = None,
                 skill: Mapping[str, float] | None = None,
                 supervisor: Supervisor | None = None, *, fn: TaskFn | None = None,
                 concurrency: int = 1, timeout_s: float | None = None) -> None:
        if not name:
            raise ConfigurationError("a worker needs a name")
        self.name = name
        if isinstance(can_do, str):        # Worker("w", "classify"): one kind, not letters
            can_do = [can_do]
        self.can_do = frozenset(can_do if can_do is not None else (skill or {}))
        if not self.can_do:
            raise ConfigurationError(f"worker {name!r} declares no kinds (can_do)")
        if concurrency < 1:
            raise ConfigurationError(f"worker {name!r}: concurrency must be >= 1")
        self.skill = {k: float(v) for k, v in (skill or {}).items()}
        self.supervisor = supervisor
        self.fn = fn
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self._limiter: anyio.CapacityLimiter | None = None

    def __repr__(self) -> str:
        return (f"Worker({self.name!r}, can_do={sorted(self.can_do)}, "
                f"concurrency={self.concurrency})")

    def execute(self, task: Task) -> Any:
        """Do the work of one task and return its JSON result.

        Raise :class:`~foreperson.errors.Retry` or :class:`~foreperson.errors.GiveUp` to
        steer retries; any other exception is classified (see
        :func:`~foreperson.retry.is_retryable`).

        Raises:
            NotImplementedError: neither overridden nor given ``fn``.
        """
        if self.fn is None:
            raise NotImplementedError(f"worker {self.name!r}: override execute() or pass fn=")
        return self.fn(task)

    @property
    def is_async(self) -> bool:
        """True when the work is a coroutine function (run on the event loop)."""
        if type(self).execute is not Worker.execute:
            return inspect.iscoroutinefunction(self.execute)
        return inspect.iscoroutinefunction(self.fn)

    @functools.cached_property
    def _is_async(self) -> bool:
        return self.is_async

    async def run_task(self, task: Task, store: TaskStore) -> Any:
        """Execute ``task`` with :func:`current_task` set: async work on the loop,
        blocking work in a thread (at most ``concurrency`` threads)."""
        reset = _CURRENT.set(TaskContext(task, self.name, store))
        try:
            if self.timeout_s is None:
                return checked_result(await self._run(task))
            with anyio.fail_after(self.timeout_s):
                return checked_result(await self._run(task))
        finally:
            _CURRENT.reset(reset)

    async def _run(self, task: Task) -> Any:
        if self._is_async:
            return await self.execute(task)
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.concurrency)
        # with a timeout, a blocking function that overruns is left behind in its thread
        # (Python cannot stop a thread); its late result is discarded
        return await anyio.to_thread.run_sync(self.execute, task, limiter=self._limiter,
                                              abandon_on_cancel=self.timeout_s is not None)

    # -- seed 000's synchronous wiring ----------------------------------------
    def submit(self, task: Task) -> None:
        """Run ``task`` on a new thread and report to the supervisor (seed 000's wiring,
        used by :meth:`Supervisor.dispatch_round`).

        Raises:
            ConfigurationError: the worker has no supervisor.
        """
        if self.supervisor is None:
            raise ConfigurationError(f"worker {self.name!r} has no supervisor to report to")
        threading.Thread(target=self._run_in_thread, args=(task,), daemon=True,
                         name=f"foreperson-{self.name}").start()

    def _run_in_thread(self, task: Task) -> None:
        supervisor = self.supervisor
        assert supervisor is not None
        supervisor.store.start(task.id, task.lease_token or "")
        reset = _CURRENT.set(TaskContext(task, self.name, supervisor.store))
        try:
            if self.is_async:
                result = checked_result(anyio.run(self.execute, task))
            else:
                result = checked_result(self.execute(task))
        except Exception as exc:
            supervisor.on_fail(task, exc)
        else:
            supervisor.on_complete(task, result)
        finally:
            _CURRENT.reset(reset)
