"""``App``: task functions by kind, importable by any process that runs workers.

A module declares what its workers can do once::

    app = App()

    @app.task("classify_ticket")
    def classify(task: Task) -> dict: ...

and ``foreperson worker mypackage.jobs:app --dsn …`` (or the Python API) builds a
:class:`~foreperson.work.worker.Worker` from it on any machine.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

from ..errors import ConfigurationError
from .task import Task
from .worker import TaskFn, Worker

__all__ = ["App"]


class App:
    """A registry of task functions, one per kind."""

    def __init__(self) -> None:
        self.functions: dict[str, TaskFn] = {}

    def task(self, kind: str) -> Callable[[TaskFn], TaskFn]:
        """Decorator: ``fn(task) -> JSON result`` (sync or async) handles ``kind``.

        Raises:
            ConfigurationError: ``kind`` already has a function.
        """
        def register(fn: TaskFn) -> TaskFn:
            if kind in self.functions:
                raise ConfigurationError(f"kind {kind!r} already has a task function")
            self.functions[kind] = fn
            return fn
        return register

    @property
    def kinds(self) -> frozenset[str]:
        """Kinds this app can do."""
        return frozenset(self.functions)

    def worker(self, name: str, *, kinds: Iterable[str] | None = None, concurrency: int = 1,
               timeout_s: float | None = None) -> Worker:
        """A worker that runs this app's functions.

        Args:
            name: the worker's name (unique among live workers, e.g. host + pid).
            kinds: restrict to these kinds (default: all of the app's).
            concurrency: tasks at once.
            timeout_s: per-attempt limit, seconds.

        Raises:
            ConfigurationError: a kind the app does not have, or mixing sync and async
                functions (give them separate workers).
        """
        chosen = set(kinds) if kinds is not None else set(self.functions)
        unknown = chosen - set(self.functions)
        if unknown:
            raise ConfigurationError(
                f"the app has no task function for {sorted(unknown)}; "
                f"it has {sorted(self.functions)}")
        fns = {k: self.functions[k] for k in chosen}
        if not fns:
            raise ConfigurationError("the app has no task functions")
        modes = {inspect.iscoroutinefunction(f) for f in fns.values()}
        if len(modes) > 1:
            raise ConfigurationError("mix of async and blocking task functions: run them "
                                     "as separate workers (kinds=...)")
        if modes == {True}:
            async def run_async(task: Task) -> Any:
                return await fns[task.kind](task)
            fn: TaskFn = run_async
        else:
            def run_blocking(task: Task) -> Any:
                return fns[task.kind](task)
            fn = run_blocking
        return Worker(name, fns, fn=fn, concurrency=concurrency, timeout_s=timeout_s)
