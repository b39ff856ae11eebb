"""Shared fixtures: store factories for the contract suite, PostgreSQL, the anyio backend.

PostgreSQL tests run when ``FOREPERSON_TEST_DSN`` names a database (``.ci/run`` creates
a throwaway one), or else against this machine's ``test`` database on 127.0.0.1:5432
when it answers. Without it they are skipped, unless ``FOREPERSON_REQUIRE_POSTGRES=1``
(set by CI): then they fail, so a CI run cannot silently lose its PostgreSQL coverage.
Each store gets a schema of its own (dropped afterwards), so tests never see each
other's rows.
"""

from __future__ import annotations

import functools
import os
import tempfile
import uuid
from collections.abc import Callable, Iterator

import pytest

from foreperson.testing import ManualClock
from foreperson.work import MemoryStore, SqliteStore, TaskStore

# Subprocesses started by tests (the CLI, worker processes) import this tree's code, not
# whatever foreperson happens to be installed.
_SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (_SRC, os.environ.get("PYTHONPATH", "")) if p)

# The models the ticket job trains (the classifier, triage's learned signals) are cached
# as JSON; tests keep theirs in one folder of their own per session (subprocesses
# inherit it), never in the user's ~/.cache.
os.environ.setdefault("FOREPERSON_CACHE_DIR", os.path.join(
    tempfile.gettempdir(), f"foreperson-test-cache-{os.getuid()}"))

SLOW_FOLDERS = {"integration", "acceptance"}
"""Test folders whose every test is ``slow``: they start processes, servers or a browser,
or fill stores with a year of history. In tests/unit and tests/contract a test over about
5 s carries the marker itself."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.parent.name in SLOW_FOLDERS:
            item.add_marker(pytest.mark.slow)


STORE_KINDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


LOCAL_TEST_DSN = "postgresql://postgres@127.0.0.1:5432/test"


@functools.lru_cache(maxsize=1)
def _local_test_database() -> str:
    """This machine's PostgreSQL test database when it answers (each test works in a
    schema of its own), so the plain ``python3 -m pytest`` of README.md runs the
    PostgreSQL tests too; "" when there is none."""
    try:
        import psycopg

        with psycopg.connect(LOCAL_TEST_DSN, connect_timeout=2):
            return LOCAL_TEST_DSN
    except Exception:
        return ""


def _postgres_dsn() -> str:
    """The test DSN, checked to answer; skips or fails (CI) when there is none."""
    dsn = os.environ.get("FOREPERSON_TEST_DSN") or _local_test_database()
    required = os.environ.get("FOREPERSON_REQUIRE_POSTGRES") == "1"
    if not dsn:
        if required:
            pytest.fail("FOREPERSON_REQUIRE_POSTGRES=1 but FOREPERSON_TEST_DSN is not set")
        pytest.skip("PostgreSQL tests need FOREPERSON_TEST_DSN")
    try:
        import psycopg
    except ImportError:
        pytest.fail("FOREPERSON_TEST_DSN is set but psycopg is not installed: "
                    "pip install -e '.[dev]'")
    try:
        with psycopg.connect(dsn, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        pytest.fail(f"FOREPERSON_TEST_DSN={dsn} does not answer: {exc}")
    return dsn


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    """DSN of the test database (see the module docstring)."""
    return _postgres_dsn()


def drop_schema(dsn: str, schema: str) -> None:
    """Drop a test schema and everything in it."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture
def pg_schema(pg_dsn: str) -> Iterator[str]:
    """A fresh, unused schema name; the schema is dropped after the test."""
    schema = f"fp_test_{uuid.uuid4().hex[:12]}"
    yield schema
    drop_schema(pg_dsn, schema)


@pytest.fixture(params=STORE_KINDS)
def make_store(request: pytest.FixtureRequest, tmp_path) -> Iterator[Callable[..., TaskStore]]:
    """A factory of fresh stores of one kind: ``make_store(clock=...)``."""
    made: list[TaskStore] = []
    schemas: list[str] = []
    dsn = _postgres_dsn() if request.param == "postgres" else ""

    def factory(clock=None) -> TaskStore:
        if request.param == "memory":
            store: TaskStore = MemoryStore(clock=clock)
        elif request.param == "sqlite":
            store = SqliteStore(tmp_path / f"tasks{len(made)}.db", clock=clock)
        elif request.param == "postgres":
            from foreperson.work.stores.postgres import PostgresStore

            schema = f"fp_test_{uuid.uuid4().hex[:12]}"
            schemas.append(schema)
            store = PostgresStore(dsn, schema=schema, clock=clock, pool_size=12)
        else:  # pragma: no cover - extended by other store kinds
            raise AssertionError(request.param)
        made.append(store)
        return store

    yield factory
    for store in made:
        store.close()
    for schema in schemas:
        drop_schema(dsn, schema)


class _SpanSwitch:
    """A span processor that hands finished spans to an in-memory exporter only while a
    test that asked for them runs (the SDK's tracer provider is set once per process)."""

    def __init__(self) -> None:
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )

        self.exporter = InMemorySpanExporter()
        self.active = False

    def on_start(self, span, parent_context=None) -> None:
        pass

    def on_end(self, span) -> None:
        if self.active:
            self.exporter.export([span])

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


@functools.lru_cache(maxsize=1)
def _span_switch() -> _SpanSwitch:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

    class Switch(_SpanSwitch, SpanProcessor):
        pass

    switch = Switch()
    provider = TracerProvider()
    provider.add_span_processor(switch)
    trace.set_tracer_provider(provider)
    return switch


@pytest.fixture
def spans():
    """The spans finished during the test (the OpenTelemetry SDK, exporting to memory)."""
    switch = _span_switch()
    switch.exporter.clear()
    switch.active = True
    try:
        yield switch.exporter
    finally:
        switch.active = False
        switch.exporter.clear()
