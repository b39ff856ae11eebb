"""One long-lived event loop for blocking callers (``Agent.run_sync``, the ticket job's
worker threads), so that the clients it opens are reused.

An SDK client's pooled connections belong to the event loop that opened them. A
blocking call that made its own loop each time (``anyio.run``) had to open a new client
and a new TCP connection for every call, and close them at the end: 34-78 ms per call
on loopback where an awaited call costs 2-9 ms. Here blocking calls
are sent to one event loop running in a daemon thread, started on first use; the
providers keep one client for that loop (:class:`~foreperson.models.Provider`), so
every blocking call after the first reuses its connections.

The loop is shut down at interpreter exit (the models handed to :func:`run_blocking`
are closed first, on the loop that opened their clients), or earlier by
:func:`shutdown_blocking_loop`; a later blocking call starts a new one. A child process
made by ``fork`` starts its own loop on first use (the parent's thread is not there).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import contextvars
import logging
import os
import threading
import weakref
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any, TypeVar

__all__ = ["run_blocking", "shutdown_blocking_loop"]

logger = logging.getLogger("foreperson.models")

T = TypeVar("T")

START_TIMEOUT_S = 10.0
"""Seconds the loop thread may take to start before a blocking call fails."""

SHUTDOWN_TIMEOUT_S = 5.0
"""Seconds closing the models and stopping the loop may take at shutdown."""


class _Loop:
    """An asyncio event loop running forever in a daemon thread."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        # by id: a model need not be hashable; the entry goes when the model does
        self.closers: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
        self._tasks: dict[Future[Any], asyncio.Task[Any]] = {}   # running calls
        self._tasks_lock = threading.Lock()
        self.thread = threading.Thread(
            target=self._main, name="foreperson-blocking-loop", daemon=True
        )
        ready = threading.Event()
        self.loop.call_soon(ready.set)
        self.thread.start()
        if not ready.wait(START_TIMEOUT_S):
            raise RuntimeError(
                f"the blocking-call event loop did not start within {START_TIMEOUT_S:.0f} s"
            )

    def _main(self) -> None:
        loop = self.loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            # stopped: cancel what still runs, give it SHUTDOWN_TIMEOUT_S to finish
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.wait(pending, timeout=SHUTDOWN_TIMEOUT_S))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()

    def submit(self, result: Future[T], fn: Callable[[], Awaitable[T]],
               context: contextvars.Context) -> None:
        """Start ``fn()`` as a task of the loop, in ``context``, settling ``result``
        (made by the caller first, so an interruption at any point can still cancel
        it: :meth:`cancel` stops the task, or keeps it from starting)."""

        def start() -> None:
            if not result.set_running_or_notify_cancel():
                return                                    # cancelled before it started
            task = self.loop.create_task(_call(fn))       # copies `context`, current here

            def settle(done: asyncio.Task[T]) -> None:
                with self._tasks_lock:
                    self._tasks.pop(result, None)
                if done.cancelled():   # by cancel() (the caller left) or by a shutdown
                    result.set_exception(RuntimeError(
                        "the call was cancelled: interrupted, or the blocking-call event "
                        "loop shut down while it ran"))
                elif done.exception() is not None:
                    result.set_exception(done.exception())
                else:
                    result.set_result(done.result())

            task.add_done_callback(settle)
            with self._tasks_lock:
                self._tasks[result] = task

        self.loop.call_soon_threadsafe(start, context=context)

    def cancel(self, future: Future[Any]) -> None:
        """Cancel the task behind ``future`` (from any thread)."""
        if future.cancel():
            return                                        # had not started: it never will

        def cancel_task() -> None:
            with self._tasks_lock:
                task = self._tasks.pop(future, None)
            if task is not None:
                task.cancel()

        with contextlib.suppress(RuntimeError):           # the loop is closed already
            self.loop.call_soon_threadsafe(cancel_task)

    def stop(self) -> None:
        """Close the registered models on the loop, then stop it; bounded in time."""
        if not self.thread.is_alive():
            return
        closers = list(self.closers.values())

        async def close_all() -> None:
            for closer in closers:
                try:
                    await closer.aclose()
                except Exception:  # noqa: BLE001 - shutting down: log and go on
                    logger.warning("closing %r at shutdown failed", closer, exc_info=True)

        done = asyncio.run_coroutine_threadsafe(close_all(), self.loop)
        try:
            done.result(SHUTDOWN_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - the loop is going away either way
            done.cancel()
            logger.warning("closing models at shutdown failed or took over %.0f s",
                           SHUTDOWN_TIMEOUT_S, exc_info=True)
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(2 * SHUTDOWN_TIMEOUT_S)


_lock = threading.Lock()
_current: _Loop | None = None


def _loop() -> _Loop:
    global _current
    with _lock:
        if _current is None or _current.pid != os.getpid() or not _current.thread.is_alive():
            _current = _Loop()
        return _current


def run_blocking(fn: Callable[[], Awaitable[T]], *, close_at_exit: Any = None) -> T:
    """Run ``await fn()`` on the shared event loop and wait for it.

    The caller's context variables are visible to ``fn`` (as with ``asyncio.run``). If
    the waiting thread is interrupted (``KeyboardInterrupt``), the call is cancelled on
    the loop before the interruption propagates.

    Args:
        fn: an async function of no arguments (``functools.partial`` binds them).
        close_at_exit: something with an async ``aclose()`` (e.g. the model ``fn``
            uses) to close on this loop when it shuts down; held by a weak reference.

    Returns:
        What ``fn`` returned.

    Raises:
        RuntimeError: called from a thread that runs an event loop (await ``fn()``
            there), or the loop thread could not start within ``START_TIMEOUT_S``.
        BaseException: whatever ``fn`` raised.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError("run_blocking() cannot be called from a running event loop; "
                           "await the coroutine instead")
    loop = _loop()
    if close_at_exit is not None and hasattr(close_at_exit, "aclose"):
        with contextlib.suppress(TypeError):    # not weakly referenceable: not tracked
            loop.closers[id(close_at_exit)] = close_at_exit
    future: Future[T] = Future()
    try:
        loop.submit(future, fn, contextvars.copy_context())
        return future.result()
    except BaseException:
        if not future.done():     # interrupted while waiting: do not leave it running
            loop.cancel(future)
        raise


async def _call(fn: Callable[[], Awaitable[T]]) -> T:
    return await fn()


def shutdown_blocking_loop() -> None:
    """Close the models registered with :func:`run_blocking` and stop the shared loop.

    Called at interpreter exit; call it earlier to release connections at a point of
    your choosing (before ``os.fork``, at the end of a test). A later
    :func:`run_blocking` starts a new loop. Bounded by ``SHUTDOWN_TIMEOUT_S`` seconds
    (plus one) for the closing and as much again for the thread to end.
    """
    global _current
    with _lock:
        loop, _current = _current, None
    if loop is not None and loop.pid == os.getpid():
        loop.stop()


def _forget_after_fork() -> None:
    global _current, _lock
    _current = None             # the parent's loop thread does not exist here
    _lock = threading.Lock()    # it may have been held by a thread that is gone


atexit.register(shutdown_blocking_loop)
os.register_at_fork(after_in_child=_forget_after_fork)
