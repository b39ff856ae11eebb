"""Shared fixtures: store factories for the contract suite, the anyio backend."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from foreperson.testing import ManualClock
from foreperson.work import MemoryStore, SqliteStore, TaskStore

STORE_KINDS = ["memory", "sqlite"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(params=STORE_KINDS)
def make_store(request: pytest.FixtureRequest, tmp_path) -> Iterator[Callable[..., TaskStore]]:
    """A factory of fresh stores of one kind: ``make_store(clock=...)``."""
    made: list[TaskStore] = []

    def factory(clock=None) -> TaskStore:
        if request.param == "memory":
            store: TaskStore = MemoryStore(clock=clock)
        elif request.param == "sqlite":
            store = SqliteStore(tmp_path / f"tasks{len(made)}.db", clock=clock)
        else:  # pragma: no cover - extended by other store kinds
            raise AssertionError(request.param)
        made.append(store)
        return store

    yield factory
    for store in made:
        store.close()
