"""Worker processes: run an :class:`~foreperson.work.app.App`'s task functions against a
shared store, on any machine (``foreperson worker`` is a thin CLI over this module).

How work is placed: there is no central dispatcher. Each worker process claims ready
tasks only into its free slots (``concurrency``, plus a look-ahead of ``prefetch`` tasks
so a finishing slot starts the next one at once), so a busy process claims nothing and
an idle one takes the next task: load goes to the least-loaded processes by
construction, and a process that can do only some kinds is never handed the others. A
prefetched task stuck more than 2 s behind a long one is given back for another process.

Every process also sweeps: a task whose lease expired (judged by the store's clock,
whoever's the lease) goes back to PENDING, or DEAD once its attempts are used up; tasks
whose dependency is DEAD are parked. So a killed worker (even ``kill -9``) strands
nothing, with no separate sweeper to run.

Stopping (:func:`serve`): SIGTERM or SIGINT stops claiming, lets in-flight tasks finish
for up to ``grace_s`` seconds, then gives back (releases, attempt not counted) whatever is
still held and exits. A second signal skips the wait.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import signal
import socket
import sys
import warnings
from typing import Any

import anyio
import anyio.to_thread

from ..errors import ConfigurationError, StoreError
from .app import App
from .leases import DEFAULT_LEASE_S
from .retention import Retention
from .store import TaskStore, TracksWorkers
from .supervisor import Supervisor
from .task import Status, Task
from .worker import Worker

__all__ = ["PROCESS_PREFETCH", "AppWorker", "default_worker_name", "load_app", "process_gone",
           "process_supervisor", "serve"]

PROCESS_PREFETCH = 16
"""Default most tasks a worker process holds beyond its slots (used in full only for tasks
short enough: see :data:`~foreperson.work.dispatcher.LOOK_AHEAD_S`). Eight one-slot
processes on one PostgreSQL drained no-op tasks at 0.4x the rate of one eight-slot
process with one per slot, at 1.35x with this."""

log = logging.getLogger("foreperson.worker")


def load_app(spec: str) -> App:
    """Import the :class:`~foreperson.work.app.App` named by ``spec``.

    Args:
        spec: ``package.module`` (its attribute ``app``) or ``package.module:attr``.
            The current directory is importable, as with ``python -m``.

    Returns:
        the App.

    Raises:
        ConfigurationError: the module cannot be imported, has no such attribute, or
            the attribute is not an App.
    """
    module_name, _, attr = spec.partition(":")
    attr = attr or "app"
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"cannot import {module_name!r} for the app {spec!r}: {exc} "
                                 "(run from the project's directory or set PYTHONPATH)") from exc
    try:
        app = getattr(module, attr)
    except AttributeError:
        raise ConfigurationError(f"module {module_name!r} has no attribute {attr!r}: "
                                 f"name the App as {module_name}:NAME") from None
    if not isinstance(app, App):
        raise ConfigurationError(f"{spec} is a {type(app).__name__}, not a foreperson App")
    return app


class AppWorker(Worker):
    """One worker for every chosen function of an :class:`~foreperson.work.app.App`,
    async and blocking alike: coroutine functions run on the event loop, blocking ones in
    threads (at most ``concurrency`` at a time), so one process name covers them all.

    Args:
        app: the App.
        name: the worker's name (``host:pid`` for ``foreperson worker``).
        kinds: kinds to take (default: all of the app's).
        concurrency: calls at once (>= 1); a batch worker (the app's functions were
            registered with ``batch_size``) takes up to that many tasks per call.

    Raises:
        ConfigurationError: a kind the app does not have, an app without functions, or
            batch and one-task functions mixed.
    """

    def __init__(self, app: App, name: str, *, kinds: list[str] | None = None,
                 concurrency: int = 1) -> None:
        chosen = list(dict.fromkeys(kinds)) if kinds else sorted(app.kinds)
        unknown = sorted(set(chosen) - app.kinds)
        if unknown:
            raise ConfigurationError(
                f"the app has no task function for {unknown}; it has {sorted(app.kinds)}")
        if not chosen:
            raise ConfigurationError("the app has no task functions")
        super().__init__(name, chosen, concurrency=concurrency,
                         batch_size=app.batch_size_of(chosen))
        self._functions = {k: app.functions[k] for k in chosen}
        self._threads = anyio.CapacityLimiter(concurrency)

    async def execute_batch(self, tasks: list[Task]) -> Any:
        """Run a batch's function (one kind): awaited when async, in a thread when
        blocking."""
        fn = self._functions[tasks[0].kind]
        if _is_coroutine_function(fn):
            return await fn(tasks)
        return await anyio.to_thread.run_sync(fn, tasks, limiter=self._threads)

    async def execute(self, task: Task) -> Any:
        """Run the task's function: awaited when async, in a thread when blocking."""
        fn = self._functions[task.kind]
        if _is_coroutine_function(fn):
            return await fn(task)
        return await anyio.to_thread.run_sync(fn, task, limiter=self._threads)


def _is_coroutine_function(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn)


def process_gone(pid: int) -> bool:
    """Whether process ``pid`` of this machine has ended (a zombie nobody reaped yet has:
    it runs nothing). Another user's live process counts as running.

    Args:
        pid: the process id.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:     # another user's process: alive
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def default_worker_name() -> str:
    """``host:pid``: unique among live workers, and says where to look."""
    return f"{socket.gethostname()}:{os.getpid()}"


def process_supervisor(store: TaskStore, worker: Worker, *,
                       stale_after: float = DEFAULT_LEASE_S, prefetch: int | None = None,
                       retention: Retention | None = None,
                       stale_after_s: float | None = None) -> Supervisor:
    """The supervisor one worker process runs around its worker.

    Pull mode: the process claims for itself, only kinds ``worker`` can do, only into
    its free slots plus a look-ahead of ``prefetch`` tasks, so a finishing slot starts
    the next task at once instead of waiting for a round trip to the database (a
    prefetched task stuck more than 2 s behind a long one is given back for another
    process). All free slots are filled in one transaction.

    Args:
        store: the shared store.
        worker: the process's worker (``concurrency`` slots).
        stale_after: seconds without a heartbeat before a task is reclaimed.
        prefetch: most tasks held beyond the slots; default :data:`PROCESS_PREFETCH`, or
            the concurrency when more. One per slot is always allowed; more only as many
            as the slots finish in :data:`~foreperson.work.dispatcher.LOOK_AHEAD_S` (short
            tasks are claimed many per round trip, long ones are not hoarded). A
            prefetched task costs no attempt, and one waiting more than 2 s is given back.
        retention: prune old finished work while serving (``foreperson worker
            --retain``); None: never.
        stale_after_s: the deprecated name of ``stale_after``.

    Returns:
        the supervisor, with ``worker`` registered.
    """
    if stale_after_s is not None:
        warnings.warn("process_supervisor(stale_after_s=) is now stale_after=; "
                      "stale_after_s will be removed", DeprecationWarning, stacklevel=2)
        stale_after = stale_after_s
    prefetch = max(worker.concurrency, PROCESS_PREFETCH) if prefetch is None else prefetch
    supervisor = Supervisor(store, pull=True, stale_after=stale_after, prefetch=prefetch,
                            claim_batch=worker.slots + prefetch * (worker.batch_size or 1),
                            kinds=worker.can_do, retention=retention)
    supervisor.register(worker)
    return supervisor


async def serve(supervisor: Supervisor, *, grace_s: float = 30.0,
                idle_wait_s: float = 1.0, signals: bool = True) -> bool:
    """Run ``supervisor`` as a worker process until SIGTERM / SIGINT.

    On the first signal the supervisor stops claiming; in-flight tasks get ``grace_s``
    seconds to finish, then whatever is still held is released (back to PENDING, the
    attempt not counted) and the run is cancelled. A second signal skips the wait.
    While running, the process records its heartbeat in the store (``worker_seen``,
    when the store keeps a worker table) for ``foreperson status``.

    Args:
        supervisor: a ``pull=True`` supervisor with its worker registered.
        grace_s: seconds in-flight tasks may take to finish after a stop signal.
        idle_wait_s: longest pause when idle, seconds (wake-ups from the store, such as
            PostgreSQL's NOTIFY, usually end it sooner).
        signals: install the SIGTERM / SIGINT handlers (the main thread only).

    Returns:
        True when every in-flight task finished within the grace period, False when some
        had to be released.
    """
    process = _Process(supervisor, grace_s)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(process.registration)
            tg.start_soon(process.report_unclaimable)
            if signals:
                tg.start_soon(process.watch_signals)
            tg.start_soon(process.enforce_grace)
            with process.run_scope:
                await supervisor.run(until_finished=False, idle_wait_s=idle_wait_s)
            tg.cancel_scope.cancel()
    except BaseExceptionGroup as errors:
        # the run's own error (a store that failed for good), not a group of one: the
        # CLI reports it in one line
        if len(errors.exceptions) == 1:
            raise errors.exceptions[0] from None
        raise
    await process.forget()
    return process.drained


class _Process:
    """The side tasks of one worker process: its heartbeat row, signals, the grace."""

    def __init__(self, supervisor: Supervisor, grace_s: float) -> None:
        self.supervisor = supervisor
        self.grace_s = grace_s
        self.worker = next(iter(supervisor.workers.values()))
        store = supervisor.store
        self.tracks = store if isinstance(store, TracksWorkers) else None
        self.drained = True
        self.stopping = anyio.Event()
        self.hard_stop = anyio.Event()
        self.run_scope = anyio.CancelScope()

    async def registration(self) -> None:
        """Record this process's heartbeat (for ``foreperson status``) while it runs."""
        worker = self.worker
        while self.tracks is not None:
            try:
                await anyio.to_thread.run_sync(self.tracks.worker_seen, worker.name,
                                               sorted(worker.can_do), worker.concurrency)
            except StoreError as exc:
                log.warning("cannot record this worker's heartbeat: %s", exc)
            await anyio.sleep(self.supervisor.heartbeat_every_s)

    async def report_unclaimable(self, every_s: float = 30.0) -> None:
        """Log, once per kind, the kinds of pending tasks this worker cannot take (a
        worker started with other settings than the job that waits for it)."""
        told: set[str] = set()
        while True:
            try:
                pending = await anyio.to_thread.run_sync(
                    lambda: self.supervisor.store.list_tasks(status=Status.PENDING, limit=500))
            except StoreError as exc:
                log.warning("cannot list pending tasks: %s", exc)
                pending = []
            strange = sorted({t.kind for t in pending} - set(self.worker.can_do) - told)
            if strange:
                told.update(strange)
                log.warning("pending tasks of kinds this worker cannot take: %s (it takes %s); "
                            "start a worker whose app and settings provide them",
                            ", ".join(strange[:5]), ", ".join(sorted(self.worker.can_do)[:5]))
            await anyio.sleep(every_s)

    async def watch_signals(self) -> None:
        """First SIGTERM/SIGINT: stop claiming; the second: give held tasks back now."""
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as received:
            async for signum in received:
                name = signal.Signals(signum).name
                if not self.stopping.is_set():
                    log.info("%s: stopping; in-flight tasks have %g s to finish", name,
                             self.grace_s)
                    self.stopping.set()
                else:
                    log.info("%s again: giving held tasks back now", name)
                    self.hard_stop.set()

    async def enforce_grace(self) -> None:
        """After a stop, wait the grace period, then release what is held and exit."""
        await self.stopping.wait()
        self.supervisor.stop()
        with anyio.move_on_after(self.grace_s):
            await self.hard_stop.wait()
        self.drained = False
        released = await anyio.to_thread.run_sync(self.supervisor.release_held)
        if released:
            log.warning("grace period over: released %d task(s) still held: %s",
                        len(released), released[:5])
        self.run_scope.cancel()
        # A blocking task function cannot be interrupted; its lease is already given
        # back (any late write is refused), so do not wait for it.
        await anyio.sleep(1.0)
        log.warning("abandoning blocking task function(s) still running")
        logging.shutdown()
        os._exit(0)

    async def forget(self) -> None:
        """Remove this process from the worker table (it stopped cleanly)."""
        if self.tracks is None:
            return
        try:
            await anyio.to_thread.run_sync(self.tracks.worker_gone, self.worker.name)
        except StoreError as exc:  # pragma: no cover - the store went away meanwhile
            log.warning("cannot remove this worker from the worker table: %s", exc)
