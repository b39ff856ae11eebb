"""PostgreSQL task store: workers in many processes on many machines share one database.

The contract is the one every store obeys (:class:`~foreperson.work.store.TaskStore`);
what PostgreSQL adds:

* **One-statement claims.** ``claim`` calls the ``claim_tasks`` SQL function: ready rows
  are picked ``FOR UPDATE SKIP LOCKED`` (two claimers never wait for, nor take, the same
  row), their lock slots and rate tokens are taken, the attempt is counted and a fresh
  ``lease_token`` is drawn, all in one statement. Every later write (start, heartbeat,
  complete, fail, release, back-off, ``claim_effect``) names that token, so a worker
  whose task was reclaimed cannot write any more, whatever it believes.
* **The database's clock rules.** ``heartbeat_at``, lease expiry, stale detection,
  ``not_before`` and rate buckets are computed by the server (``statement_timestamp()``),
  never by a worker: a worker whose clock is off by minutes can neither keep a dead
  lease alive nor reclaim a live one. A backoff a worker asks for (``retry_at``) is
  turned into a delay and added to the server's time. The ``clock`` argument exists only
  so the shared contract suite can run here with a fake clock; leave it None.
* **Placement emerges from free slots.** There is no central dispatcher: each worker
  process claims only the kinds it can do and only as many tasks as it has free slots
  (``concurrency`` + prefetch), so a busy process claims nothing and an idle one takes
  the next ready task. Load spreads to the least-loaded processes without anyone
  computing it.
* **Limits that hold across machines.** A task's ``locks`` name the resources it needs.
  A name without a limit is a plain lock (one holder). :meth:`PostgresStore.set_limit`
  gives a name ``max_active`` slots and/or a rate (``rate_per_s`` with ``burst``, a
  token bucket updated inside the claim); ``kind:<kind>`` limits a whole kind. A task
  whose resource is full or out of tokens is simply not claimed (no worker slot waits on
  it); a 429 from the resource is reported with
  :class:`~foreperson.errors.RateLimited`, and :meth:`PostgresStore.back_off` gives
  the attempt back and pushes the resource's next free time for every machine.
* **Wake-ups, not polling.** Adding tasks, a task going back to PENDING, a lock slot
  being freed and a task with dependents completing each ``NOTIFY`` the channel
  ``<schema>.ready``; :meth:`PostgresStore.wait_for_work` blocks on it (``LISTEN``), and
  the supervisor's run loop uses it to wake idle workers.
* **Anyone may sweep.** ``reclaim_stale`` and ``park_blocked`` are conditional updates
  (rows picked ``FOR UPDATE SKIP LOCKED``), so every worker process runs them and a dead
  supervisor strands nothing.
* **A versioned schema.** Numbered migrations (:mod:`._pg_schema`), applied on first use
  under an advisory lock (many processes may start at once) or by
  ``foreperson db migrate --dsn``.

psycopg 3 and psycopg-pool are imported lazily: ``pip install 'foreperson[postgres]'``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ...errors import ConfigurationError, MissingDependency, StoreError
from ...journal import RunRecord, Step, check_run_version, check_version
from ..leases import DEFAULT_LEASE_S
from ..metrics import (
    HISTORY_KEPT_S,
    HISTORY_WINDOW_S,
    TimelinePoint,
    changes_of,
    default_until,
    history_points,
    history_window,
)
from ..policy import Reason
from ..store import (
    StoreStats,
    WorkerRecord,
    WorkerTotals,
    conflicting_readd,
    pruned_readd,
    validate_new_tasks,
)
from ..task import Clock, Status, SystemClock, Task, from_epoch
from ._pg_migrate import apply_migrations
from ._pg_prune import PostgresPruning
from ._pg_queries import COLUMNS, RUN_COLUMNS, Q
from ._pg_reconnect import DEFAULT_RECONNECT_S, Outage, quiet_pool_outages, reconnecting
from ._pg_schema import LATEST

if TYPE_CHECKING:  # pragma: no cover
    import psycopg

__all__ = ["DEFAULT_SCHEMA", "SCHEMA_VERSION", "PostgresStore", "ResourceLimit",
           "migrate_schema"]

SCHEMA_VERSION = LATEST
"""The schema version this foreperson reads and writes (``foreperson db version``). A
store opened on an older schema migrates it (``migrate=True``, the default) or asks for
``foreperson db migrate``; one on a newer schema is refused."""

log = logging.getLogger("foreperson.store.postgres")

DEFAULT_SCHEMA = "foreperson"
"""The PostgreSQL schema that holds foreperson's tables unless told otherwise (the
``FOREPERSON_PG_SCHEMA`` environment variable, or ``schema=``)."""

_WARNED_AUTOVACUUM: set[str] = set()
"""Servers already warned about (``PostgresStore._check_autovacuum``)."""


def _psycopg() -> Any:
    try:
        import psycopg
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        raise MissingDependency(
            "PostgresStore needs psycopg 3 and psycopg-pool: "
            "pip install 'foreperson[postgres]'") from exc
    return psycopg


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC)


def _row_to_task(row: Sequence[Any]) -> Task:
    (id_, kind, payload, status, assigned_to, attempts, max_attempts, result, error,
     heartbeat_at, depends_on, locks, created_at, started_at, finished_at, not_before,
     estimate_s, errors, lease_token, run_id, parent_id, reason, stale_after,
     lease_expires_at, awaited, trace_context) = row[:26]
    return Task(
        kind=kind, payload=payload, id=id_, status=Status(status), assigned_to=assigned_to,
        attempts=attempts, max_attempts=max_attempts, result=result, error=error,
        heartbeat_at=_utc(heartbeat_at), depends_on=list(depends_on), locks=list(locks),
        created_at=_utc(created_at), started_at=_utc(started_at),
        finished_at=_utc(finished_at), not_before=_utc(not_before), estimate_s=estimate_s,
        errors=list(errors), lease_token=lease_token, run_id=run_id, parent_id=parent_id,
        reason=reason, stale_after=stale_after, lease_expires_at=_utc(lease_expires_at),
        awaited=bool(awaited), trace_context=trace_context,
    )


def _filters(**equal: Any) -> tuple[str, dict[str, Any]]:
    """A ``WHERE`` clause of the equalities whose value is not None, and its parameters.
    Written out, not as ``(%(x)s IS NULL OR x = %(x)s)``: a generic plan of that (psycopg
    prepares a statement used five times) cannot use an index."""
    given = {column: value for column, value in equal.items() if value is not None}
    if not given:
        return "", {}
    return " WHERE " + " AND ".join(f"{c} = %({c})s" for c in given), given


def _rows(cur: Any) -> list[tuple[Any, ...]]:
    """The rows of the statement just run (none for one that returns none). Asks the
    result, not ``cur.description``, which builds a column object per column: a turn
    returns 27 of them, and that cost more than decoding the rows."""
    result = cur.pgresult
    return cur.fetchall() if result is not None and result.nfields else []


def _starting(start: bool | int, count: int) -> int:
    """How many of ``count`` claims start at once (``start``: all, none, or a number)."""
    if isinstance(start, bool):
        return count if start else 0
    return max(0, min(int(start), count))


def _row_to_step(row: Sequence[Any]) -> Step:
    run_id, key, kind, digest, result, version, created_at, seq, request = row
    return Step(run_id, key, kind, digest, result, version, _utc(created_at), seq, request)


def _row_to_run(row: Sequence[Any]) -> RunRecord:
    (run_id, agent, user_id, status, input_, result, error, stop_reason, owner,
     lease_expires_at, version, created_at, updated_at) = row
    return check_run_version(RunRecord(
        run_id, agent, user_id, status, input_, result, error, stop_reason, owner,
        _utc(lease_expires_at), version, _utc(created_at), _utc(updated_at)))


def migrate_schema(dsn: str, *, schema: str | None = None,
                   target: int | None = None) -> tuple[int, int]:
    """Create foreperson's schema, or apply the numbered migrations it lacks
    (``foreperson db migrate``).

    Safe to run from many processes at once: a transaction-scoped advisory lock
    serialises them and the later ones find nothing to do. A new schema gets the whole
    current schema in one step (``FRESH``); an existing one gets each missing migration,
    recorded in ``schema_migrations``. A test keeps both paths equal.

    Args:
        dsn: a libpq connection string or URL.
        schema: the PostgreSQL schema (default ``FOREPERSON_PG_SCHEMA`` or
            ``"foreperson"``).
        target: version to reach (tests stop at an older one); None = the latest.

    Returns:
        ``(version before, version after)``.

    Raises:
        MissingDependency: psycopg is not installed.
        StoreError: the schema is newer than ``target``, or the database failed.
    """
    import os

    psycopg = _psycopg()
    schema = schema or os.environ.get("FOREPERSON_PG_SCHEMA") or DEFAULT_SCHEMA
    try:
        with psycopg.connect(dsn, autocommit=True, application_name="foreperson") as conn:
            conn.execute("SELECT set_config('search_path', quote_ident(%s), false)", (schema,))
            return apply_migrations(conn, schema, target)
    except psycopg.Error as exc:
        raise StoreError(f"cannot migrate schema {schema}: {exc}") from exc


class _Listener:
    """``LISTEN`` on one channel, on a connection of its own (opened on first use,
    reopened after an error). One thread waits at a time."""

    def __init__(self, store: PostgresStore, channel: str) -> None:
        self._store = store
        self.channel = channel
        self._lock = threading.Lock()
        self._conn: Any = None

    def wait(self, timeout_s: float, wanted: Callable[[str], bool]) -> bool:
        """Block until a notification whose payload ``wanted`` accepts, or ``timeout_s``
        seconds; a connection error is logged and counts as a timeout. Right after the
        connection is (re)opened it returns True at once: what was notified while nobody
        listened is lost, so the caller should look."""
        psycopg = self._store._psycopg
        deadline = time.monotonic() + timeout_s
        with self._lock:
            try:
                if self._conn is None or self._conn.closed:
                    return self._connection(timeout_s) is not None
                conn = self._conn
                while conn is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    for note in conn.notifies(timeout=left, stop_after=1):
                        if wanted(note.payload):
                            return True
                return False
            except psycopg.Error as exc:
                if self._store._closed:              # close() ended the wait
                    return False
                log.debug("listening on %s failed (%s); will reconnect", self.channel, exc)
                self._store._outage.went_away(exc)
                if self._conn is not None:
                    self._conn.close()
                self._conn = None
                time.sleep(max(0.0, min(deadline - time.monotonic(), 1.0)))
                return False

    def _connection(self, timeout_s: float) -> Any:
        """The listening connection, opened when missing; None once the store closed."""
        store = self._store
        if self._conn is not None and not self._conn.closed:
            return self._conn
        if store._closed:
            return None
        from psycopg import sql

        began = store._outage.now()
        conn = store._psycopg.connect(store.dsn, autocommit=True,
                                      connect_timeout=max(1, int(timeout_s)))
        conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
        self._conn = conn
        store._outage.came_back(began)
        if store._closed:          # closed while connecting
            conn.close()
            return None
        return conn

    def close(self) -> None:
        """Close the connection (ends a wait in progress)."""
        conn = self._conn
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()


class ResourceLimit:
    """The limits on one named resource (a row of the ``limits`` table).

    Attributes:
        name: the resource, as tasks name it in ``locks`` (``kind:<kind>`` for a kind).
        max_active: tasks that may hold it at once across every machine; None = no cap.
        rate_per_s: claims per second allowed across every machine; None = no rate.
        burst: claims allowed at once before the rate applies (>= 1).
        next_free_at: earliest time (UTC) a rate token is free, None without a rate.
    """

    __slots__ = ("burst", "max_active", "name", "next_free_at", "rate_per_s")

    def __init__(self, name: str, max_active: int | None, rate_per_s: float | None,
                 burst: int, next_free_at: datetime | None) -> None:
        self.name = name
        self.max_active = max_active
        self.rate_per_s = rate_per_s
        self.burst = burst
        self.next_free_at = next_free_at

    def __repr__(self) -> str:
        return (f"ResourceLimit({self.name!r}, max_active={self.max_active}, "
                f"rate_per_s={self.rate_per_s}, burst={self.burst})")


class PostgresStore(PostgresPruning):
    """A :class:`~foreperson.work.store.TaskStore` in PostgreSQL, shared by worker
    processes on any number of machines. See the module docstring for how claims, leases,
    limits and wake-ups work.

    Args:
        dsn: a libpq connection string or URL, e.g. ``postgresql://user@host/db``.
        schema: the PostgreSQL schema holding foreperson's tables (created when missing);
            default ``FOREPERSON_PG_SCHEMA`` from the environment, else ``"foreperson"``.
        migrate: bring the schema to the current version on first use (default True;
            concurrent first uses are serialised by an advisory lock). With False, a
            schema that is missing or old raises StoreError: run ``foreperson db migrate``.
        pool_size: most connections this store opens (default 10; a worker process uses
            one for the run loop, one for heartbeats, one per task calling ``once``).
        connect_timeout_s: seconds to wait for a connection before a call fails with
            StoreError (default 10); the pool keeps reconnecting in the background, so a
            restarted server is picked up again.
        reconnect_s: seconds a store call keeps trying while the server is away (a
            restart, a dropped connection) before it raises StoreError (default 60;
            0: fail at once). One line is logged when the database goes away and one
            when it is back; see :mod:`~foreperson.work.stores._pg_reconnect` for why a
            retried call never completes a task twice.
        clock: **tests only**: a fake clock whose time replaces the database's in every
            statement, so the shared contract suite (which moves time by hand) runs here.
            Leave None in production: then every time is the server's.

    Raises:
        MissingDependency: psycopg / psycopg-pool are not installed.
        StoreError: the server cannot be reached, or the schema is newer than this
            foreperson (upgrade foreperson), or missing / old with ``migrate=False``.
    """

    _task_columns = COLUMNS
    _run_columns = RUN_COLUMNS
    _row_to_task = staticmethod(_row_to_task)
    _row_to_run = staticmethod(_row_to_run)

    def __init__(self, dsn: str, *, schema: str | None = None, migrate: bool = True,
                 pool_size: int = 10, connect_timeout_s: float = 10.0,
                 reconnect_s: float = DEFAULT_RECONNECT_S,
                 clock: Clock | None = None) -> None:
        import os

        psycopg = _psycopg()
        from psycopg_pool import ConnectionPool

        self.dsn = dsn
        self.schema = schema or os.environ.get("FOREPERSON_PG_SCHEMA") or DEFAULT_SCHEMA
        self.channel = f"{self.schema}.ready"
        self._fake_clock = clock
        self.clock: Clock = clock or SystemClock()
        self._local = threading.local()
        self._closed = False
        self._pruned_locks: set[str] = set()
        self._ready = _Listener(self, self.channel)
        self._done = _Listener(self, f"{self.schema}.done")
        self._psycopg = psycopg
        self._outage = Outage(self._where(), reconnect_s, on_back=self._drop_dead)
        quiet_pool_outages()
        schema_name = self.schema

        def configure(conn: Any) -> None:
            conn.execute("SELECT set_config('search_path', quote_ident(%s), false), "
                         "set_config('application_name', 'foreperson', false)",
                         (schema_name,))

        self._probe(dsn, connect_timeout_s)
        self._pool = ConnectionPool(
            dsn, min_size=1, max_size=max(2, pool_size), open=False, configure=configure,
            kwargs={"autocommit": True}, timeout=connect_timeout_s,
            name=f"foreperson-{schema_name}", reconnect_timeout=24 * 3600.0)
        try:
            self._pool.open(wait=True, timeout=connect_timeout_s)
        except Exception as exc:
            self._pool.close()
            raise StoreError(f"cannot connect to PostgreSQL ({self._where()}): {exc}",
                             transient=True) from exc
        try:
            version = self.schema_version
            if version > LATEST:
                raise StoreError(
                    f"schema {self.schema!r} has version {version}, newer than this "
                    f"foreperson knows ({LATEST}): upgrade foreperson")
            if version < LATEST:
                if not migrate:
                    raise StoreError(
                        f"schema {self.schema!r} is at version {version}, this foreperson "
                        f"needs {LATEST}: run `foreperson db migrate --dsn ...`")
                self.migrate()
            self._check_autovacuum()
        except BaseException:
            self._pool.close()
            raise

    # -- plumbing --------------------------------------------------------------
    def _check_autovacuum(self) -> None:
        """Warn once per server when autovacuum is off: every claim and completion leaves
        a dead row version, and without vacuum they pile up in the indexes of the
        unfinished, so claims and monitoring slow down with the churn."""
        where = self._where()
        if where in _WARNED_AUTOVACUUM:
            return
        with self._cursor(transaction=False) as cur:
            cur.execute("SELECT current_setting('autovacuum')")
            row = cur.fetchone()
        if row is not None and row[0] == "off":
            _WARNED_AUTOVACUUM.add(where)
            log.warning("autovacuum is off on %s: foreperson's tables then keep every dead "
                        "row version and claims slow down as work goes through; turn it on "
                        "(ALTER SYSTEM SET autovacuum = on), or VACUUM the schema's tables "
                        "regularly (foreperson db prune does after it removes)", where)

    def _probe(self, dsn: str, timeout_s: float) -> None:
        """Fail fast, in one line, on a malformed DSN or a server that refuses us (the
        pool would retry quietly for ``connect_timeout_s``)."""
        psycopg = self._psycopg
        try:
            psycopg.conninfo.conninfo_to_dict(dsn)
        except psycopg.ProgrammingError as exc:
            raise ConfigurationError(
                f"--dsn is not a PostgreSQL connection string ({str(exc).strip()}); expected "
                "postgresql://user@host:port/database") from None
        try:
            psycopg.connect(dsn, connect_timeout=max(1, int(timeout_s)),
                            autocommit=True).close()
        except psycopg.Error as exc:
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise StoreError(f"cannot connect to PostgreSQL ({self._where()}): {reason}",
                             transient=True) from exc

    def _drop_dead(self) -> None:
        """Test the idle pooled connections and drop those that died (after an outage:
        a restart leaves every idle one dead, and each would fail its next call)."""
        pool = getattr(self, "_pool", None)
        if pool is not None and not self._closed:
            pool.check()

    def _where(self) -> str:
        try:
            from psycopg.conninfo import conninfo_to_dict
            info = conninfo_to_dict(self.dsn)
            return f"{info.get('host', 'localhost')}/{info.get('dbname', '')}"
        except Exception:
            return "the given DSN"

    def _now(self) -> datetime | None:
        """The fake clock's time, or None: the SQL then uses the server's clock."""
        return None if self._fake_clock is None else from_epoch(self._fake_clock.now())

    def _set_clock(self, cur: Any) -> None:
        """With a fake clock (tests), tell the session its time, for the triggers that
        keep the aggregates (``fp_clock()``); without one they use the server's."""
        if self._fake_clock is not None:
            cur.execute("SELECT set_config('foreperson.now', %s, false)",
                        (from_epoch(self._fake_clock.now()).isoformat(),))  # type: ignore[union-attr]

    def _failed(self, exc: Exception) -> StoreError:
        psycopg = self._psycopg
        if isinstance(exc, psycopg.OperationalError):
            # A lost server leaves dead connections idle in the pool: drop them now so the
            # next call reconnects instead of failing once per stale connection.
            with contextlib.suppress(Exception):
                self._pool.check()
        transient = isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))
        if getattr(self._local, "conn", None) is not None and transient:
            self._local.transient = True
        return StoreError(f"PostgreSQL ({self._where()}, schema {self.schema}): {exc}",
                          transient=transient)

    @contextmanager
    def _cursor(self, *, transaction: bool) -> Iterator[psycopg.Cursor]:
        """A cursor on the batch's connection (already in its transaction), or on a
        pooled one: in a transaction when ``transaction``, else autocommit (one
        statement is its own transaction: one round trip)."""
        psycopg = self._psycopg
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            try:
                with conn.cursor() as cur:
                    self._set_clock(cur)
                    yield cur
            except psycopg.Error as exc:
                self._local.failed = True
                raise self._failed(exc) from exc
            return
        if self._closed:
            raise StoreError("the store is closed")
        try:
            with self._pool.connection() as conn:
                if transaction:
                    with conn.transaction(), conn.cursor() as cur:
                        self._set_clock(cur)
                        yield cur
                else:
                    with conn.cursor() as cur:
                        self._set_clock(cur)
                        yield cur
        except psycopg.Error as exc:
            raise self._failed(exc) from exc

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Run the store calls made inside (on this thread) in one transaction with one
        commit: group commit, so a worker process settling many tasks pays one WAL flush.

        A call that raises before writing (an :class:`~foreperson.errors.InvalidPlan`)
        leaves nothing behind. A *database* error aborts the whole transaction: every
        call of the batch is undone and StoreError is raised (at the failing call and
        again on leaving the block); retry the batch.

        Beginning the transaction rides out an outage like a single call does (see
        :mod:`._pg_reconnect`): a pooled connection that died while idle (a server
        restart) is found at ``BEGIN``, before anything of the batch ran, so the batch
        waits for the server instead of failing.

        Raises:
            StoreError: the database failed; nothing of the batch was committed.
        """
        if getattr(self._local, "conn", None) is not None:
            yield
            return
        psycopg = self._psycopg
        conn, opened = self._outage.call(self._begin_batch)
        try:
            with opened:
                self._local.conn = conn
                self._local.failed = False
                self._local.transient = False
                try:
                    yield
                finally:
                    self._local.conn = None
                if self._local.failed:
                    raise StoreError("a database error aborted this batch; "
                                     "nothing of it was committed",
                                     transient=self._local.transient)
        except psycopg.Error as exc:
            raise self._failed(exc) from exc

    def _begin_batch(self) -> tuple[Any, contextlib.ExitStack]:
        """A pooled connection with a transaction begun on it, and the stack that commits
        (or rolls back) and returns it on exit.

        Raises:
            StoreError: the store is closed, or no connection could begin a transaction
                (``transient`` for a lost server: :meth:`batch` then tries again).
        """
        psycopg = self._psycopg
        if self._closed:
            raise StoreError("the store is closed")
        opened = contextlib.ExitStack()
        try:
            conn = opened.enter_context(self._pool.connection())
            opened.enter_context(conn.transaction())
        except psycopg.Error as exc:
            with contextlib.suppress(psycopg.Error):   # the pool drops a broken connection
                opened.__exit__(type(exc), exc, exc.__traceback__)
            raise self._failed(exc) from exc
        return conn, opened

    # -- schema ----------------------------------------------------------------
    @property
    def schema_version(self) -> int:
        """The schema's migration number (0 when foreperson was never installed there).

        Raises:
            StoreError: the database failed.
        """
        with self._cursor(transaction=False) as cur:
            cur.execute("SELECT to_regclass(format('%%I.schema_migrations', %s::text))",
                        (self.schema,))
            row = cur.fetchone()
            if row is None or row[0] is None:
                return 0
            cur.execute("SELECT coalesce(max(version), 0) FROM schema_migrations")
            return int(cur.fetchone()[0])  # type: ignore[index]

    def migrate(self, target: int | None = None) -> int:
        """Bring this store's schema to version ``target`` (default: the latest); see
        :func:`migrate_schema`.

        Returns:
            the version reached.

        Raises:
            StoreError: the schema is past ``target``, or the database failed.
        """
        try:
            with self._pool.connection() as conn:
                return apply_migrations(conn, self.schema, target)[1]
        except self._psycopg.Error as exc:
            raise self._failed(exc) from exc

    def _run(self, name: str, params: Mapping[str, Any], *,
             transaction: bool = False) -> list[tuple[Any, ...]]:
        """Run the named query ``name`` (one statement: its own transaction outside a
        batch) and return its rows."""
        with self._cursor(transaction=transaction) as cur:
            cur.execute(Q[name], {"now": self._now(), **params})
            return _rows(cur)

    # -- contract --------------------------------------------------------------
    def add(self, tasks: Sequence[Task]) -> list[str]:
        """See :meth:`TaskStore.add`. One INSERT for the whole batch; ids already
        stored with the same work are skipped (``ON CONFLICT DO NOTHING``), so
        concurrent adds of the same deterministic ids from several machines are harmless;
        an id stored with other work makes the whole statement insert nothing."""
        tasks = list(tasks)
        with self._cursor(transaction=False) as cur:
            def exists(ids: list[str]) -> set[str]:
                cur.execute("SELECT id FROM tasks WHERE id = ANY(%s)", (ids,))
                return {r[0] for r in cur.fetchall()}

            validate_new_tasks(tasks, exists)
            if not tasks:
                return []
            cur.execute(Q["add"], {
                "ids": [t.id for t in tasks], "kinds": [t.kind for t in tasks],
                "payloads": [json.dumps(t.payload) for t in tasks],
                "max_attempts": [t.max_attempts for t in tasks],
                "deps": [json.dumps(list(dict.fromkeys(t.depends_on))) for t in tasks],
                "locks": [json.dumps(list(dict.fromkeys(t.locks))) for t in tasks],
                "created": [t.created_at for t in tasks],
                "not_before": [t.not_before for t in tasks],
                "estimates": [t.estimate_s for t in tasks],
                "runs": [t.run_id for t in tasks], "parents": [t.parent_id for t in tasks],
                "stale": [t.stale_after for t in tasks],
                "awaited": [t.awaited for t in tasks],
                "traces": [None if t.trace_context is None else json.dumps(t.trace_context)
                           for t in tasks], "now": self._now()})
            rows = cur.fetchall()
        pruned = [r for r in rows if r[0] == "pruned"]
        if pruned:
            raise pruned_readd(pruned[0][1], float(pruned[0][2]))
        conflicts = [r for r in rows if r[0] == "conflict"]
        if conflicts:
            _, task_id, kind, payload = conflicts[0]
            new = next(t for t in tasks if t.id == task_id)
            raise conflicting_readd(Task(kind, json.loads(payload), id=task_id), new)
        return [r[1] for r in sorted((r for r in rows if r[0] == "inserted"),
                                     key=lambda r: int(r[2]))]

    def get(self, task_id: str) -> Task | None:
        """See :meth:`TaskStore.get`."""
        rows = self._run("get", {"id": task_id})
        return _row_to_task(rows[0]) if rows else None

    def list_tasks(self, status: Status | None = None, kind: str | None = None,
                   limit: int | None = None, *, run_id: str | None = None,
                   newest_first: bool = False, offset: int = 0) -> list[Task]:
        """See :meth:`TaskStore.list_tasks`."""
        where, params = _filters(status=status and status.value, kind=kind, run_id=run_id)
        order = "DESC" if newest_first else ""
        with self._cursor(transaction=False) as cur:
            cur.execute(f"SELECT {COLUMNS} FROM tasks{where} ORDER BY seq {order} "
                        "LIMIT %(limit)s OFFSET %(offset)s",
                        {**params, "limit": limit if limit is None else max(0, limit),
                         "offset": max(0, offset)})
            return [_row_to_task(r) for r in cur.fetchall()]

    def ready(self, kinds: Collection[str], limit: int) -> list[Task]:
        """See :meth:`TaskStore.ready`. Runs the claim itself and rolls it back, so
        "ready" means exactly "a claim would take it now" (dependencies, locks, limits,
        rate tokens included)."""
        kinds = list(kinds)
        if not kinds or limit <= 0:
            return []
        with self._cursor(transaction=True) as cur:
            with cur.connection.transaction(force_rollback=True):
                cur.execute(Q["ready"], {"kinds": kinds, "limit": limit, "now": self._now()})
                ids = [r[0] for r in cur.fetchall()]
            cur.execute(Q["get_many"], {"ids": ids})
            return [_row_to_task(r) for r in cur.fetchall()]

    def assign(self, pairs: Sequence[tuple[str, str]], *, start: bool | int = False,
               lease_s: float = DEFAULT_LEASE_S) -> list[Task]:
        """See :meth:`TaskStore.assign`. One ``claim_tasks`` call per worker (two when
        some of its tasks start at once and some are prefetched)."""
        if not pairs:
            return []
        starting = _starting(start, len(pairs))
        groups: dict[tuple[str, bool], list[str]] = {}
        for n, (task_id, worker) in enumerate(pairs):
            groups.setdefault((worker, n < starting), []).append(task_id)
        claimed: dict[str, Task] = {}
        with self._cursor(transaction=True) as cur:
            for (worker, now), ids in groups.items():
                cur.execute(Q["claim"], {"worker": worker, "kinds": None, "ids": ids,
                                         "limit": len(ids), "start": len(ids) if now else 0,
                                         "now": self._now(), "lease": float(lease_s)})
                for row in cur.fetchall():
                    task = _row_to_task(row)
                    claimed[task.id] = task
        return [claimed[task_id] for task_id, _ in pairs if task_id in claimed]

    def claim(self, worker: str, kinds: Collection[str], limit: int, *,
              start: bool | int = False, lease_s: float = DEFAULT_LEASE_S) -> list[Task]:
        """See :meth:`TaskStore.claim`. One statement (``claim_tasks``): ready tasks of
        ``kinds`` in insertion order, ``FOR UPDATE SKIP LOCKED``, with their lock slots
        and rate tokens taken and fresh lease tokens."""
        kinds = list(kinds)
        if not kinds or limit <= 0:
            return []
        return [_row_to_task(r) for r in self._run("claim", {
            "worker": worker, "kinds": kinds, "ids": None, "limit": limit,
            "start": _starting(start, limit), "lease": float(lease_s)})]

    def start(self, task_id: str, token: str) -> bool:
        """See :meth:`TaskStore.start`."""
        return not self.start_many({task_id: token})

    def start_many(self, leases: Mapping[str, str]) -> set[str]:
        """See :meth:`TaskStore.start_many`. One statement; rows locked in id order."""
        if not leases:
            return set()
        rows = self._run("start", {"ids": list(leases), "tokens": list(leases.values())})
        return set(leases) - {r[0] for r in rows}

    def heartbeat(self, leases: Mapping[str, str]) -> set[str]:
        """See :meth:`TaskStore.heartbeat`. One statement for every lease; the time
        written is the server's. A row another transaction holds (its completion in
        flight) is skipped, never waited for: heartbeats cannot deadlock with
        completions."""
        if not leases:
            return set()
        rows = self._run("heartbeat", {"ids": list(leases), "tokens": list(leases.values())})
        return {r[0] for r in rows}

    def complete(self, task_id: str, token: str, result: Any) -> bool:
        """See :meth:`TaskStore.complete`."""
        return bool(self.complete_many([(task_id, token, result)]))

    def complete_many(self, items: Sequence[tuple[str, str, Any]]) -> set[str]:
        """See :meth:`TaskStore.complete_many`. One statement; rows locked in id order."""
        if not items:
            return set()
        results = [json.dumps(result) for _, _, result in items]
        ids = [i for i, _, _ in items]
        rows = self._run("complete", {"ids": ids, "tokens": [t for _, t, _ in items],
                                      "results": results})
        return {r[0] for r in rows}

    def complete_and_claim(self, starts: Mapping[str, str],
                           items: Sequence[tuple[str, str, Any]], worker: str,
                           kinds: Collection[str], limit: int, *, start: int = 0,
                           lease_s: float = DEFAULT_LEASE_S) -> tuple[set[str], list[Task]]:
        """A worker process's turn in one statement (one round trip, one commit): mark
        ``starts`` RUNNING, store ``items``' results (``[(task_id, token, result), …]``)
        and claim up to ``limit`` tasks of ``kinds`` for ``worker``, the first ``start``
        of them RUNNING. Fenced like the separate calls.

        Returns:
            ``(ids whose result was stored, tasks claimed)``.

        Raises:
            TypeError: a result is not JSON (nothing is written).
            StoreError: the database failed (nothing is written).
        """
        ids = list(starts) + [i for i, _, _ in items]
        tokens = list(starts.values()) + [t for _, t, _ in items]
        results: list[str | None] = [None] * len(starts)
        results += [json.dumps(r) for _, _, r in items]
        rows = self._run("turn", {"ids": ids, "tokens": tokens, "results": results,
                                  "worker": worker, "kinds": list(kinds),
                                  "limit": max(0, limit), "start": max(0, start),
                                  "lease": float(lease_s)})
        stored = set(rows[0][0]) if rows else set()
        return stored, [_row_to_task(r[1:]) for r in rows if r[1] is not None]

    def _delay_s(self, at: float) -> float:
        """Epoch seconds on the caller's clock -> seconds from now, so the server adds
        the delay to its own time."""
        return max(0.0, at - self.clock.now())

    def fail(self, task_id: str, token: str, error: str, *,
             retry_at: float | None) -> Status | None:
        """See :meth:`TaskStore.fail`. ``retry_at`` is read as a delay from now on the
        caller's clock and added to the server's time."""
        status = Status.DEAD if retry_at is None else Status.FAILED
        delay = None if retry_at is None else self._delay_s(retry_at)
        rows = self._run("fail", {"status": status.value, "error": error, "delay": delay,
                                  "id": task_id, "token": token})
        return status if rows[0][0] == 1 else None

    def release(self, task_id: str, token: str) -> bool:
        """See :meth:`TaskStore.release`."""
        rows = self._run("release", {"reason": Reason.RELEASED.value, "id": task_id,
                                     "token": token})
        return bool(rows[0][0] == 1)

    def back_off(self, task_id: str, token: str, resource: str | None,
                 after_s: float) -> bool:
        """A shared resource answered "too many requests" (HTTP 429): give the task back
        without counting the attempt, and keep every machine from claiming tasks that
        use the resource for ``after_s`` seconds.

        The task goes back to PENDING (reason ``rate_limited``, its locks freed, a
        started attempt given back, ``error`` saying why, ``not_before`` = now +
        ``after_s``); the rate bucket of ``resource`` (or, when None, of every
        rate-limited resource the task uses) is pushed so its next token is free in
        ``after_s`` seconds, server time.

        Args:
            task_id: the task.
            token: its lease token.
            resource: the resource that refused, or None for all of the task's.
            after_s: seconds to keep off the resource (a ``Retry-After``).

        Returns:
            False when the lease is gone (nothing changed).
        """
        after_s = max(0.0, float(after_s))
        message = (f"rate limited by {resource or 'a shared resource'}: "
                   f"backing off {after_s:g} s (attempt not counted)")
        rows = self._run("back_off", {"reason": Reason.RATE_LIMITED.value, "message": message,
                                      "after": after_s, "id": task_id, "token": token,
                                      "resource": resource})
        return bool(rows[0][0] == 1)

    def reclaim_stale(self, *, holder_prefix: str | None = None) -> list[str]:
        """See :meth:`TaskStore.reclaim_stale`. Expiry is judged by the server's clock;
        rows are picked ``FOR UPDATE SKIP LOCKED`` and updated only if still stale, so
        any number of processes may sweep at once. Also forgets worker processes not
        seen for a day, and folds the aggregates' deltas (one sweeper at a time)."""
        reclaimed = [r[0] for r in self._run("reclaim", {"prefix": holder_prefix})]
        self._run("fold", {})
        return reclaimed

    def park_blocked(self, after: Collection[str] | None = None) -> list[str]:
        """See :meth:`TaskStore.park_blocked`."""
        parked: list[str] = []
        with self._cursor(transaction=True) as cur:
            frontier = None if after is None else list(after)
            while frontier is None or frontier:
                if frontier is None:
                    cur.execute(Q["park"], {"now": self._now()})
                else:
                    cur.execute(Q["park_after"], {"now": self._now(), "ids": frontier})
                rows = [r[0] for r in cur.fetchall()]
                if not rows:
                    return parked
                parked.extend(rows)
                if frontier is not None:
                    frontier = rows
            return parked

    def retry_dead(self, ids: Sequence[str] | None = None) -> list[str]:
        """See :meth:`TaskStore.retry_dead`."""
        if ids is None:
            with self._cursor(transaction=False) as cur:
                cur.execute("SELECT id FROM tasks WHERE status = 'dead' ORDER BY seq")
                ids = [r[0] for r in cur.fetchall()]
        return [r[0] for r in self._run("revive", {"ids": list(ids)})]

    def claim_effect(self, key: str, task_id: str, token: str) -> bool:
        """See :meth:`TaskStore.claim_effect`. The task row is share-locked while the
        effect is recorded, so a concurrent reclaim either happens first (and this call
        returns False) or waits until the effect is committed."""
        return bool(self._run("effect_claim", {"key": key, "id": task_id, "token": token}))

    def effect_done(self, key: str, task_id: str, token: str) -> bool:
        """See :meth:`TaskStore.effect_done`."""
        return bool(self._run("effect_done", {"key": key, "id": task_id, "token": token}))

    def finished_among(self, ids: Collection[str]) -> dict[str, Task]:
        """See :meth:`TaskStore.finished_among`."""
        return {r[0]: _row_to_task(r) for r in self._run("finished_among", {"ids": list(ids)})}

    def mean_durations(self) -> dict[str, float]:
        """See :meth:`TaskStore.mean_durations`: from the aggregates."""
        return {kind: float(mean) for kind, mean in self._run("mean_durations", {})
                if mean is not None}

    def stats(self, *, run_id: str | None = None) -> StoreStats:
        """See :meth:`TaskStore.stats`. ``workers`` holds every worker process that
        registered with :meth:`worker_seen` (``foreperson worker`` does), with its last
        heartbeat; ``now`` is the server's clock. The whole store's counts are the
        aggregates plus the deltas not folded yet (folded here first when thousands wait:
        a store nobody sweeps), one run's are counted on the ``(run_id, status)`` index."""
        with self._cursor(transaction=False) as cur:
            cur.execute(Q["stats" if run_id is None else "run_stats"],
                        {"run": run_id, "now": self._now()})
            ((active, oldest, now, workers, waiting),) = cur.fetchall()
            if waiting > 5000:
                cur.execute(Q["fold"])
            cur.execute(Q["counts" if run_id is None else "run_counts"], {"run": run_id})
            counts = {s: 0 for s in Status}
            for _, status, n in cur.fetchall():
                counts[Status(status)] += int(n)
        seen = {k: from_epoch(float(v)) for k, v in workers.items()}
        return StoreStats(counts, {k: int(v) for k, v in active.items()}, _utc(oldest),
                          _utc(now) or datetime.now(UTC),
                          {k: v for k, v in seen.items() if v is not None})

    # -- worker processes --------------------------------------------------------
    def worker_seen(self, name: str, kinds: Collection[str] = (), concurrency: int = 1) -> None:
        """Record that worker process ``name`` is alive (its last heartbeat, server
        time), for :meth:`stats` and ``foreperson status``.

        Args:
            name: the process's worker name (``host:pid``).
            kinds: kinds it claims.
            concurrency: tasks it runs at once.
        """
        self._run("worker_seen", {"name": name, "kinds": sorted(kinds),
                                  "concurrency": concurrency, "host": socket.gethostname(),
                                  "pid": os.getpid()})

    def worker_gone(self, name: str) -> None:
        """Forget worker process ``name`` (it stopped cleanly)."""
        self._run("worker_gone", {"name": name})

    def list_workers(self) -> list[WorkerRecord]:
        """See :meth:`TracksWorkers.list_workers`."""
        return [WorkerRecord(name, tuple(kinds), concurrency, host, pid,
                             _utc(started) or started, _utc(seen) or seen)
                for name, kinds, concurrency, host, pid, started, seen
                in self._run("workers", {})]

    # -- observation (ReportsWork) ------------------------------------------------
    def counts_by_kind(self, *, run_id: str | None = None) -> dict[str, dict[Status, int]]:
        """See :meth:`ReportsWork.counts_by_kind`."""
        out: dict[str, dict[Status, int]] = {}
        for kind, status, n in self._run("counts" if run_id is None else "run_counts",
                                         {"run": run_id}):
            out.setdefault(kind, dict.fromkeys(Status, 0))[Status(status)] = int(n)
        return out

    def worker_totals(self, names: Collection[str] | None = None, *,
                      since: float | None = None) -> dict[str, WorkerTotals]:
        """See :meth:`ReportsWork.worker_totals`: from the aggregates."""
        rows = self._run("worker_totals", {
            "names": None if names is None else sorted(set(names)),
            "since": None if since is None or names is not None else from_epoch(since)})
        return {name: WorkerTotals(int(done), int(failed), _utc(at))
                for name, done, failed, at in rows}

    def history(self, *, run_id: str | None = None, points: int = 60,
                since: float | None = None, until: float | None = None) -> list[TimelinePoint]:
        """See :meth:`ReportsWork.history`: the whole store's from the changes kept per
        second (the window's only), one run's from its records' timestamps."""
        stats = self.stats(run_id=run_id)
        now = stats.now.timestamp()
        if run_id is not None:
            rows = self._run("run_history", {"run": run_id})
            if not rows:
                return []
            def when(value: Any) -> datetime | None:
                return None if value is None else from_epoch(float(value))

            changes = changes_of((Status(st), when(c), when(f)) for st, c, f in rows)
            start = since if since is not None else float(min(c[0] for c in changes))
            end = until if until is not None else (
                now if stats.unfinished else float(max(c[0] for c in changes)))
            return history_points(stats.counts, (c for c in changes if c[0] > start), start,
                                  max(start, end), points)
        ((last,),) = self._run("history_last", {})
        end = until if until is not None else default_until(now, last)
        low = max(since if since is not None else end - HISTORY_WINDOW_S, now - HISTORY_KEPT_S)
        changes = [(int(at), status, int(n))
                   for at, status, n in self._run("history", {"low": int(low)})]
        start, end = history_window(changes, since, end)
        return history_points(stats.counts, (c for c in changes if c[0] > start), start, end,
                              points)

    def dependents(self, task_id: str) -> list[str]:
        """See :meth:`ReportsWork.dependents`."""
        return [r[0] for r in self._run("dependents", {"id": task_id})]

    # -- journal ---------------------------------------------------------------
    def get_step(self, run_id: str, key: str) -> Step | None:
        """See :meth:`foreperson.journal.Journal.get_step`."""
        rows = self._run("step_get", {"run_id": run_id, "key": key})
        return check_version(_row_to_step(rows[0])) if rows else None

    def put_step(self, step: Step) -> Step:
        """See :meth:`foreperson.journal.Journal.put_step`. One statement; first write
        wins across every process."""
        result = json.dumps(step.result, allow_nan=False)
        request = None if step.request is None else json.dumps(step.request, allow_nan=False)
        ((fresh, *row),) = self._run("step_put", {
            "run_id": step.run_id, "key": step.key, "kind": step.kind,
            "version": step.version, "digest": step.digest, "result": result,
            "request": request})
        stored = _row_to_step(tuple(row))
        return stored if fresh else check_version(stored)

    def has_steps(self, run_id: str) -> bool:
        """Whether run ``run_id`` has any journaled step (one index probe, however many
        it has).

        Args:
            run_id: the run.

        Returns:
            True when at least one step is recorded.

        Raises:
            StoreError: the store failed.
        """
        return bool(self._run("step_any", {"run_id": run_id}))

    def list_steps(self, run_id: str) -> list[Step]:
        """See :meth:`foreperson.journal.Journal.list_steps`."""
        return [check_version(_row_to_step(r)) for r in self._run("step_list",
                                                                 {"run_id": run_id})]

    # -- runs (foreperson.journal.RunLedger) ------------------------------------
    def create_run(self, record: RunRecord) -> RunRecord:
        """See :meth:`foreperson.journal.RunLedger.create_run`. One statement; first
        write wins across every process."""
        data = json.dumps(record.input, allow_nan=False)
        (row,) = self._run("run_create", {
            "run_id": record.run_id, "agent": record.agent, "user_id": record.user_id,
            "status": record.status, "input": data, "owner": record.owner,
            "lease_expires_at": record.lease_expires_at, "version": record.version})
        return _row_to_run(row)

    def get_run(self, run_id: str) -> RunRecord | None:
        """See :meth:`foreperson.journal.RunLedger.get_run`."""
        rows = self._run("run_get", {"run_id": run_id})
        return _row_to_run(rows[0]) if rows else None

    def list_runs(self, *, user_id: str | None = None, status: str | None = None,
                  limit: int = 100) -> list[RunRecord]:
        """See :meth:`foreperson.journal.RunLedger.list_runs`."""
        where, params = _filters(user_id=user_id, status=status)
        with self._cursor(transaction=False) as cur:
            cur.execute(f"SELECT {RUN_COLUMNS} FROM runs{where} "
                        "ORDER BY created_at DESC, seq DESC LIMIT %(limit)s",
                        {**params, "limit": max(0, limit)})
            return [_row_to_run(r) for r in cur.fetchall()]

    def claim_run(self, run_id: str, owner: str, lease_s: float, *,
                  take_from: str | None = None) -> RunRecord | None:
        """See :meth:`foreperson.journal.RunLedger.claim_run`."""
        rows = self._run("run_claim", {"run_id": run_id, "owner": owner,
                                       "take_from": take_from, "lease": float(lease_s)})
        return _row_to_run(rows[0]) if rows else None

    def renew_run(self, run_id: str, owner: str, lease_s: float) -> bool:
        """See :meth:`foreperson.journal.RunLedger.renew_run`."""
        return bool(self._run("run_renew", {"run_id": run_id, "owner": owner,
                                            "lease": float(lease_s)}))

    def end_run(self, run_id: str, owner: str, status: str, *, result: Any = None,
                error: str | None = None, stop_reason: str | None = None) -> bool:
        """See :meth:`foreperson.journal.RunLedger.end_run`."""
        data = None if result is None else json.dumps(result, allow_nan=False)
        return bool(self._run("run_end", {
            "run_id": run_id, "owner": owner, "status": status, "result": data,
            "error": error, "stop_reason": stop_reason}))

    # -- limits ----------------------------------------------------------------
    def set_limit(self, name: str, *, max_active: int | None = None,
                  rate_per_s: float | None = None, burst: int = 1) -> None:
        """Limit a shared resource for every machine at once.

        Tasks use the resource by naming it in their ``locks``; ``kind:<kind>`` limits
        every task of that kind. Without a limit a name is a plain lock (one holder).

        Args:
            name: the resource (``"model-api"``, ``"kind:classify_ticket"``).
            max_active: most tasks holding it at once; None = no cap (rate only).
            rate_per_s: most claims per second (seed 000: "throughput is capped by the
                scarcest shared resource"); None = no rate.
            burst: claims allowed back to back before the rate applies (>= 1).

        Raises:
            ConfigurationError: a negative ``max_active``, a rate outside 0.001..1e6 per
                second (NaN and infinity included) or burst < 1.
        """
        if max_active is not None and max_active < 0:
            raise ConfigurationError(f"limit {name!r}: max_active must be >= 0 (or None for no "
                                     f"cap), got {max_active}")
        if rate_per_s is not None and not (0.001 <= rate_per_s <= 1e6):   # also NaN, inf
            raise ConfigurationError(f"limit {name!r}: rate_per_s must be between 0.001 and "
                                     f"1,000,000 per second (or None for no rate), got "
                                     f"{rate_per_s}")
        if burst < 1:
            raise ConfigurationError(f"limit {name!r}: burst must be >= 1, got {burst}")
        with self._cursor(transaction=True) as cur:
            cur.execute(
                "INSERT INTO limits (name, max_active, rate_per_s, burst) "
                "VALUES (%(name)s, %(max)s, %(rate)s, %(burst)s) ON CONFLICT (name) DO UPDATE "
                "SET max_active = EXCLUDED.max_active, rate_per_s = EXCLUDED.rate_per_s, "
                "burst = EXCLUDED.burst",
                {"name": name, "max": max_active, "rate": rate_per_s, "burst": burst})
            if max_active:
                cur.execute("INSERT INTO lock_slots (name, slot) SELECT %s, g "
                            "FROM generate_series(0, %s - 1) AS g ON CONFLICT DO NOTHING",
                            (name, max_active))
            cur.execute("SELECT pg_notify(%s, '')", (self.channel,))

    def remove_limit(self, name: str) -> None:
        """Drop the limit on ``name``: it is a plain lock again (one holder)."""
        with self._cursor(transaction=False) as cur:
            cur.execute("DELETE FROM limits WHERE name = %s", (name,))

    def limits(self) -> dict[str, ResourceLimit]:
        """Every configured limit, by name."""
        with self._cursor(transaction=False) as cur:
            cur.execute("SELECT name, max_active, rate_per_s, burst, "
                        "CASE WHEN rate_per_s IS NOT NULL AND isfinite(tat) THEN tat END "
                        "FROM limits ORDER BY name")
            return {name: ResourceLimit(name, max_active, rate, burst, _utc(tat))
                    for name, max_active, rate, burst, tat in cur.fetchall()}

    # -- wake-ups --------------------------------------------------------------
    def wait_for_work(self, kinds: Collection[str] | None = None,
                      timeout_s: float = 1.0) -> bool:
        """Block until a task of ``kinds`` may have become claimable, or ``timeout_s``.

        Listens (``LISTEN``) on the channel ``<schema>.ready`` on a connection of its
        own. Meant for one thread (the run loop's waiter); a connection error is logged
        and reported as a timeout, and the next call reconnects.

        Args:
            kinds: kinds of interest (None: any).
            timeout_s: longest wait, seconds.

        Returns:
            True when woken by a notification, False on timeout.
        """
        wanted = None if kinds is None else set(kinds)
        return self._ready.wait(timeout_s, lambda payload: (
            not payload or wanted is None or bool(wanted & set(payload.split(",")))))

    def wait_for_finished(self, timeout_s: float = 1.0) -> bool:
        """Block until an awaited task (``Task.awaited``) ended, in any process, or
        ``timeout_s`` seconds: the channel ``<schema>.done``, on a connection of its own.

        Returns:
            True when woken by a notification, False on timeout.
        """
        return self._done.wait(timeout_s, lambda payload: True)

    # -- life cycle ------------------------------------------------------------
    def close(self) -> None:
        """Close every connection. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._pool.close()
        self._ready.close()
        self._done.close()

    def __repr__(self) -> str:
        return f"PostgresStore({self._where()!r}, schema={self.schema!r})"

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# Every store call that talks to the database rides out an outage (see _pg_reconnect):
# wrapped here, in one place, rather than one decorator per method.
for _name in (
        "add", "get", "list_tasks", "ready", "assign", "claim", "start", "start_many",
        "heartbeat", "complete", "complete_many", "complete_and_claim", "fail", "release",
        "back_off", "reclaim_stale", "park_blocked", "retry_dead", "claim_effect",
        "effect_done", "finished_among", "mean_durations", "stats", "worker_seen",
        "worker_gone", "list_workers", "counts_by_kind", "worker_totals", "history",
        "dependents", "get_step", "put_step", "list_steps", "create_run", "get_run",
        "list_runs", "claim_run", "renew_run", "end_run", "set_limit", "remove_limit",
        "limits", "prune", "migrate"):
    setattr(PostgresStore, _name, reconnecting(getattr(PostgresStore, _name)))
del _name
