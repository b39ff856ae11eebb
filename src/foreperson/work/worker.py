"""Workers: declare what they can do, execute one task per slot, report back.

A worker holds no view of the overall job (seed 000). It never touches the store
itself: the supervisor (or a worker process's runtime) claims, heartbeats and settles
on its behalf, with the task's lease token.

A batch worker (``Worker(..., batch_size=N)``) takes up to N ready tasks of one kind in
one call: its function receives a list and returns one result, or one exception, per
task. Each task keeps its own lease, attempts, retries and DEAD verdict; the call
shares only its cost (one model forward pass, one bulk API request).
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import json
import threading
import warnings
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, overload

import anyio
import anyio.from_thread
import anyio.to_thread

from ..errors import ConfigurationError, GiveUp, LeaseLost, RunError
from .task import Status, Task

if TYPE_CHECKING:
    from .handles import TaskHandle
    from .store import TaskStore

__all__ = ["BatchContext", "SettlesTasks", "TaskContext", "TaskRuntime", "Worker",
           "checked_result", "current_batch", "current_task"]

class SettlesTasks(Protocol):
    """What seed 000's threaded wiring reports a finished attempt to (a
    :class:`~foreperson.work.Supervisor`): its store, and where outcomes go."""

    store: TaskStore

    def on_complete(self, task: Task | str, result: Any) -> bool:
        """Record a finished attempt; False when its lease was lost."""
        ...

    def on_fail(self, task: Task | str, error: BaseException | str) -> Status | None:
        """Record a failed attempt; returns the task's new status."""
        ...


TaskFn = Callable[[Task], Any] | Callable[[Task], Awaitable[Any]]
BatchFn = Callable[[list[Task]], Any] | Callable[[list[Task]], Awaitable[Any]]


class TaskRuntime(Protocol):
    """What the run loop offers a running task (see :class:`TaskContext`)."""

    async def submit_children(self, parent: Task, tasks: list[Task],
                              context: TaskContext) -> list[TaskHandle]:
        """Submit ``tasks`` as children of ``parent``; handles that lend its slot."""
        ...

    def lend(self, task: Task) -> AbstractContextManager[None]:
        """While inside, ``task``'s worker slot serves other work."""
        ...


@dataclass(frozen=True)
class TaskContext:
    """What the running task may ask of the runtime (see :func:`current_task`).

    Attributes:
        task: the task, with its lease token.
        worker: the worker's name.
        store: the store holding the task.
        runtime: the run loop running it (None under seed 000's threaded wiring, where
            child tasks cannot be submitted).
    """

    task: Task
    worker: str
    store: TaskStore
    runtime: TaskRuntime | None = None
    _children: list[int] = field(default_factory=lambda: [0], repr=False, compare=False)

    def next_child(self) -> int:
        """The place, from 1, of the next child task this attempt submits."""
        self._children[0] += 1
        return self._children[0]

    def effect_key(self, name: str = "effect") -> str:
        """The idempotency key of the side effect ``name`` of this task: the same on
        every attempt and every reclaim (seed 000: "a claim key derived from the task
        ID"). Give it to a receiver that dedupes (an ``Idempotency-Key`` header)."""
        return f"{self.task.claim_key}:{name}"

    def once(self, name: str = "effect") -> bool:
        """Whether to do the side effect ``name`` now (seed 000: "make the side effect
        conditional on a claim key derived from the task ID").

        The guarantee is **at least once**, never zero: True when the effect was never
        claimed, or an earlier attempt claimed it but did not mark it :meth:`done` (it
        crashed, or its lease was taken, before or after doing it; only the receiver
        can tell, so send :meth:`effect_key` with the effect and let it dedupe). False
        when it is done, or this very attempt claimed it already. Call :meth:`done`
        right after the effect succeeds; a task that COMPLETES never runs again, so its
        effects need no more care.

        Returns:
            True: do the effect now (with :meth:`effect_key`). False: it is done.

        Raises:
            LeaseLost: this worker no longer holds the task (it was reclaimed after its
                lease expired, or finished elsewhere): stop, do nothing more.
            StoreError: the store failed.
        """
        token = self.task.lease_token or ""
        if self.store.claim_effect(self.effect_key(name), self.task.id, token):
            return True
        if self.store.heartbeat({self.task.id: token}):      # the lease is gone
            raise LeaseLost(self.task.id)
        return False

    def done(self, name: str = "effect") -> None:
        """Record that the side effect ``name`` succeeded: no later attempt repeats it.

        Raises:
            LeaseLost: this worker no longer holds the task.
            StoreError: the store failed.
        """
        if not self.store.effect_done(self.effect_key(name), self.task.id,
                                      self.task.lease_token or ""):
            raise LeaseLost(self.task.id)

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

    @overload
    async def submit(self, task: Task, /) -> TaskHandle: ...

    @overload
    async def submit(self, task: Task, second: Task, /, *more: Task) -> list[TaskHandle]: ...

    async def submit(self, task: Task, /, *more: Task) -> TaskHandle | list[TaskHandle]:
        """Submit a child task into this task's run (``parent_id`` = this task) and get
        its handle, as :meth:`Supervisor.submit` does. Awaiting the handle lends this
        task's worker slot to other work until the child finishes, so parents waiting
        on children never hold every slot hostage (async task functions; a blocking one
        uses :meth:`submit_sync`).

        Children get ids derived from this task's id and their order
        (``<task id>/1``, ``/2`` …; ``depends_on`` among them is rewritten to match): a
        retried parent that submits the same children in the same order awaits the
        ones already there instead of running them again. A child that ends DEAD makes
        ``result()`` raise :class:`~foreperson.errors.TaskFailed`, which is not retried:
        the parent goes DEAD too, with the child's error.

        Args:
            task: the child.
            *more: deprecated: several children at once return a list; use
                :meth:`submit_many`.

        Returns:
            the child's :class:`~foreperson.work.handles.TaskHandle`.

        Raises:
            RunError: the task is not run by :meth:`Supervisor.run` (seed 000's
                threaded wiring cannot await children).
            InvalidPlan: a kind no worker can do, an unknown dependency, a cycle.
        """
        if more:
            warnings.warn("current_task().submit(a, b, ...) with several tasks is now "
                          "submit_many([a, b, ...]); submit(task) returns one handle, as "
                          "Supervisor.submit does", DeprecationWarning, stacklevel=2)
            return await self.submit_many([task, *more])
        (handle,) = await self.submit_many([task])
        return handle

    async def submit_many(self, tasks: Sequence[Task]) -> list[TaskHandle]:
        """:meth:`submit` for several children, stored in one transaction (dependencies
        among them allowed), as :meth:`Supervisor.submit_many` does.

        Returns:
            one handle per task, in order.

        Raises:
            RunError, InvalidPlan: as :meth:`submit`.
        """
        if self.runtime is None:
            raise RunError("child tasks can be submitted only from a task run by "
                           "Supervisor.run() (or serving()), not by seed 000's "
                           "dispatch_round() threads")
        return await self.runtime.submit_children(self.task, list(tasks), self)

    @overload
    def submit_sync(self, task: Task, /) -> TaskHandle: ...

    @overload
    def submit_sync(self, task: Task, second: Task, /, *more: Task) -> list[TaskHandle]: ...

    def submit_sync(self, task: Task, /, *more: Task) -> TaskHandle | list[TaskHandle]:
        """:meth:`submit` from a blocking task function (it runs in a worker thread);
        wait with ``handle.result_sync()``. Several tasks at once are deprecated: use
        :meth:`submit_many_sync`."""
        if more:
            warnings.warn("current_task().submit_sync(a, b, ...) with several tasks is now "
                          "submit_many_sync([a, b, ...])", DeprecationWarning, stacklevel=2)
            return self.submit_many_sync([task, *more])
        (handle,) = self.submit_many_sync([task])
        return handle

    def submit_many_sync(self, tasks: Sequence[Task]) -> list[TaskHandle]:
        """:meth:`submit_many` from a blocking task function."""
        return anyio.from_thread.run(lambda: self.submit_many(tasks))

    @contextmanager
    def lending_slot(self) -> Iterator[None]:
        """While inside, this task's worker slot serves other work (used by a child's
        handle while its parent waits)."""
        if self.runtime is None:
            yield
            return
        with self.runtime.lend(self.task):
            yield


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


@dataclass(frozen=True)
class BatchContext:
    """What a batch function may ask while it runs (see :func:`current_batch`).

    Attributes:
        tasks: the tasks of the call, one kind, each with its own lease token.
        worker: the worker's name.
        store: the store holding them.
    """

    tasks: tuple[Task, ...]
    worker: str
    store: TaskStore

    def dependency_results(self) -> dict[str, dict[str, Any]]:
        """The results of every dependency of every task of the batch, read in one
        store query: ``{task id: {dependency id: result}}`` (all COMPLETED, or the task
        would not have been ready).

        Raises:
            StoreError: the store failed.
        """
        wanted = list(dict.fromkeys(d for t in self.tasks for d in t.depends_on))
        found = self.store.finished_among(wanted) if wanted else {}
        return {t.id: {d: (found[d].result if d in found else None) for d in t.depends_on}
                for t in self.tasks}


def _per_task(results: Any, tasks: list[Task]) -> list[tuple[bool, Any]]:
    """A batch function's return value as ``(succeeded, result or exception)`` per task:
    an exception in the list fails only its task; a non-JSON result is a GiveUp."""
    if not isinstance(results, (list, tuple)) or len(results) != len(tasks):
        got = len(results) if isinstance(results, (list, tuple)) else type(results).__name__
        error = TypeError(f"a batch function must return a list with one result or "
                          f"exception per task: got {got} for {len(tasks)} tasks")
        return [(False, error)] * len(tasks)
    out: list[tuple[bool, Any]] = []
    for value in results:
        if isinstance(value, BaseException):
            out.append((False, value))
            continue
        try:
            out.append((True, checked_result(value)))
        except GiveUp as exc:
            out.append((False, exc))
    return out


_CURRENT: contextvars.ContextVar[TaskContext] = contextvars.ContextVar("foreperson_task")
_CURRENT_BATCH: contextvars.ContextVar[BatchContext] = contextvars.ContextVar(
    "foreperson_batch")


def current_task() -> TaskContext:
    """The context of the task running in this thread or coroutine.

    Raises:
        LookupError: called outside a task.
    """
    try:
        return _CURRENT.get()
    except LookupError:
        raise LookupError("current_task() is only available inside a running task") from None


def current_batch() -> BatchContext:
    """The context of the batch call running in this thread or coroutine (a worker
    with ``batch_size``).

    Raises:
        LookupError: called outside a batch function.
    """
    try:
        return _CURRENT_BATCH.get()
    except LookupError:
        raise LookupError("current_batch() is only available inside a batch function "
                          "(a Worker with batch_size)") from None


class Worker:
    """Executes tasks of the kinds it declares.

    Subclass and override :meth:`execute` (plain or ``async def``), or pass ``fn``.
    With ``batch_size``, override :meth:`execute_batch` instead, or pass a ``fn`` that
    takes a list of tasks.

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
            function's late result is discarded. For a batch worker, the bound of one
            call.
        batch_size: take up to this many ready tasks of one kind per call (>= 1); the
            function receives ``list[Task]`` and returns a list with one JSON result,
            or one exception instance, per task, in order (an exception raised by the
            call fails every task of it). Each task is still fenced by its own lease,
            retried and parked DEAD on its own. The worker holds up to ``concurrency *
            batch_size`` tasks running. None (default): one task per call.

    Raises:
        ConfigurationError: empty name, no kinds, concurrency < 1 or batch_size < 1.
    """

    def __init__(self, name: str, can_do: Iterable[str] | None = None,
                 skill: Mapping[str, float] | None = None,
                 supervisor: SettlesTasks | None = None, *, fn: TaskFn | None = None,
                 concurrency: int = 1, timeout_s: float | None = None,
                 batch_size: int | None = None) -> None:
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
        if batch_size is not None and batch_size < 1:
            raise ConfigurationError(f"worker {name!r}: batch_size must be >= 1")
        self.batch_size = batch_size
        self.skill = {k: float(v) for k, v in (skill or {}).items()}
        self.supervisor = supervisor
        self.fn = fn
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self._limiter: anyio.CapacityLimiter | None = None

    def __repr__(self) -> str:
        batch = f", batch_size={self.batch_size}" if self.batch_size is not None else ""
        return (f"Worker({self.name!r}, can_do={sorted(self.can_do)}, "
                f"concurrency={self.concurrency}{batch})")

    @property
    def slots(self) -> int:
        """Tasks this worker runs at once: ``concurrency``, times ``batch_size`` for a
        batch worker."""
        return self.concurrency * (self.batch_size or 1)

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

    def execute_batch(self, tasks: list[Task]) -> Any:
        """Do the work of a batch of tasks of one kind (a worker with ``batch_size``).

        Returns:
            a list with one JSON result, or one exception instance, per task, in order.

        Raises:
            NotImplementedError: neither overridden nor given ``fn``.
        """
        if self.fn is None:
            raise NotImplementedError(f"worker {self.name!r}: override execute_batch() or "
                                      "pass fn=")
        return self.fn(tasks)  # type: ignore[arg-type]

    @property
    def is_async(self) -> bool:
        """True when the work is a coroutine function (run on the event loop)."""
        if self.batch_size is not None and type(self).execute_batch is not Worker.execute_batch:
            return inspect.iscoroutinefunction(self.execute_batch)
        if type(self).execute is not Worker.execute:
            return inspect.iscoroutinefunction(self.execute)
        return inspect.iscoroutinefunction(self.fn)

    @functools.cached_property
    def _is_async(self) -> bool:
        return self.is_async

    async def run_task(self, task: Task, store: TaskStore, *,
                       runtime: TaskRuntime | None = None) -> Any:
        """Execute ``task`` with :func:`current_task` set: async work on the loop,
        blocking work in a thread (at most ``concurrency`` threads).

        Raises:
            TimeoutError: the attempt took longer than ``timeout_s`` (the message names
                the bound).
            Exception: what the work raised.
        """
        reset = _CURRENT.set(TaskContext(task, self.name, store, runtime))
        try:
            if self.timeout_s is None:
                return checked_result(await self._run(task))
            try:
                with anyio.fail_after(self.timeout_s):
                    return checked_result(await self._run(task))
            except TimeoutError as exc:
                if str(exc):
                    raise
                raise TimeoutError(f"worker {self.name!r}: the attempt took longer than "
                                   f"timeout_s={self.timeout_s:g} s") from None
        finally:
            _CURRENT.reset(reset)

    async def run_batch(self, tasks: list[Task], store: TaskStore) -> list[tuple[bool, Any]]:
        """Execute a batch of tasks of one kind in one call, with :func:`current_batch`
        set (async work on the loop, blocking work in a thread).

        Returns:
            ``(succeeded, result or exception)`` per task, in order: an exception
            raised by the call (a timeout included) fails every task of the batch.
        """
        reset = _CURRENT_BATCH.set(BatchContext(tuple(tasks), self.name, store))
        try:
            bound = (anyio.fail_after(self.timeout_s) if self.timeout_s is not None
                     else nullcontext())
            with bound:
                results = await self._call_batch(tasks)
        except TimeoutError as exc:
            if not str(exc):
                exc = TimeoutError(f"worker {self.name!r}: the batch call took longer "
                                   f"than timeout_s={self.timeout_s:g} s")
            return [(False, exc)] * len(tasks)
        except Exception as exc:        # classified per task in on_fail
            return [(False, exc)] * len(tasks)
        finally:
            _CURRENT_BATCH.reset(reset)
        return _per_task(results, tasks)

    async def _call_batch(self, tasks: list[Task]) -> Any:
        if self._is_async:
            return await self.execute_batch(tasks)
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.concurrency)
        return await anyio.to_thread.run_sync(self.execute_batch, tasks, limiter=self._limiter,
                                              abandon_on_cancel=self.timeout_s is not None)

    async def _run(self, task: Task) -> Any:
        if self._is_async:
            return await self.execute(task)
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.concurrency)
        # with a timeout, a blocking function that overruns is left behind in its thread
        # (Python cannot stop a thread); its late result is discarded
        return await anyio.to_thread.run_sync(self.execute, task, limiter=self._limiter,
                                              abandon_on_cancel=self.timeout_s is not None)

    def _batch_in_thread(self, tasks: list[Task], store: TaskStore) -> list[tuple[bool, Any]]:
        reset = _CURRENT_BATCH.set(BatchContext(tuple(tasks), self.name, store))
        try:
            if self.is_async:
                results = anyio.run(self.execute_batch, tasks)
            else:
                results = self.execute_batch(tasks)
        except Exception as exc:
            return [(False, exc)] * len(tasks)
        finally:
            _CURRENT_BATCH.reset(reset)
        return _per_task(results, tasks)

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
        if supervisor.store.start(task.id, task.lease_token or ""):
            task.status = Status.RUNNING
            task.attempts += 1
        if self.batch_size is not None:         # a batch of one, in this thread
            ((ok, value),) = self._batch_in_thread([task], supervisor.store)
            if ok:
                supervisor.on_complete(task, value)
            else:
                supervisor.on_fail(task, value)
            return
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
