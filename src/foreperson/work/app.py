"""``App``: task functions by kind, importable by any process that runs workers.

A module declares what its workers can do once::

    app = App()

    @app.task("classify_ticket")
    def classify(task: Task) -> dict: ...

and ``foreperson worker mypackage.jobs:app --dsn …`` (or the Python API) builds a
:class:`~foreperson.work.worker.Worker` from it on any machine. A function registered
with ``batch_size`` takes a list of tasks of its kind and returns one result (or
exception) per task (see :class:`~foreperson.work.worker.Worker`)::

    @app.task("embed", batch_size=64)
    def embed(tasks: list[Task]) -> list[dict]: ...
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

from ..errors import ConfigurationError
from .task import Task
from .worker import BatchFn, TaskFn, Worker

__all__ = ["App"]


class App:
    """A registry of task functions, one per kind."""

    def __init__(self) -> None:
        self.functions: dict[str, Any] = {}
        self.batch_sizes: dict[str, int] = {}

    def task(self, kind: str, *, batch_size: int | None = None) -> Callable[[Any], Any]:
        """Decorator: ``fn(task) -> JSON result`` (sync or async) handles ``kind``; with
        ``batch_size``, ``fn(tasks) -> [result or exception per task]`` takes up to that
        many tasks of ``kind`` per call.

        Raises:
            ConfigurationError: ``kind`` already has a function, or batch_size < 1.
        """
        if batch_size is not None and batch_size < 1:
            raise ConfigurationError(f"kind {kind!r}: batch_size must be >= 1")

        def register(fn: TaskFn | BatchFn) -> TaskFn | BatchFn:
            if kind in self.functions:
                raise ConfigurationError(f"kind {kind!r} already has a task function")
            self.functions[kind] = fn
            if batch_size is not None:
                self.batch_sizes[kind] = batch_size
            return fn
        return register

    def batch_size_of(self, kinds: Iterable[str]) -> int | None:
        """The batch size of a worker for ``kinds``: the smallest of their functions'
        (None when none is a batch function).

        Raises:
            ConfigurationError: batch and one-task functions mixed (give them separate
                workers).
        """
        chosen = list(kinds)
        sizes = [self.batch_sizes[k] for k in chosen if k in self.batch_sizes]
        if sizes and len(sizes) != len(chosen):
            raise ConfigurationError("mix of batch and one-task functions: run them as "
                                     "separate workers (kinds=...)")
        return min(sizes) if sizes else None

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
                functions, or batch and one-task functions (give them separate workers).
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
        batch_size = self.batch_size_of(fns)
        fn = _dispatch(fns, is_async=modes == {True})
        return Worker(name, fns, fn=fn, concurrency=concurrency, timeout_s=timeout_s,
                      batch_size=batch_size)


def _dispatch(fns: dict[str, Any], *, is_async: bool) -> Any:
    """One function calling each kind's own: with a task, or with a batch (one kind)."""
    def kind_of(arg: Task | list[Task]) -> str:
        return arg[0].kind if isinstance(arg, list) else arg.kind

    if is_async:
        async def run_async(arg: Any) -> Any:
            return await fns[kind_of(arg)](arg)
        return run_async

    def run_blocking(arg: Any) -> Any:
        return fns[kind_of(arg)](arg)
    return run_blocking
