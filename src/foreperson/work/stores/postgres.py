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
import threading
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ...errors import ConfigurationError, MissingDependency, StoreError
from ..store import StoreStats, validate_new_tasks
from ..task import Clock, Status, SystemClock, Task, from_epoch
from ._pg_schema import FRESH, LATEST, MIGRATIONS

if TYPE_CHECKING:  # pragma: no cover
    import psycopg

__all__ = ["DEFAULT_SCHEMA", "PostgresStore", "ResourceLimit", "migrate_schema"]

log = logging.getLogger("foreperson.store.postgres")

DEFAULT_SCHEMA = "foreperson"
"""The PostgreSQL schema that holds foreperson's tables unless told otherwise (the
``FOREPERSON_PG_SCHEMA`` environment variable, or ``schema=``)."""

_COLUMNS = ("id, kind, payload, status, assigned_to, attempts, max_attempts, result, error, "
            "heartbeat_at, depends_on, locks, created_at, started_at, finished_at, not_before, "
            "estimate_s, errors, lease_token, seq")

# Every "now" in SQL: the database's clock, or the fake clock's time in tests.
_NOW = "coalesce(%(now)s::timestamptz, statement_timestamp())"
_ISO = (f"to_char(({_NOW}) AT TIME ZONE 'UTC', "
        "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"')")

_FREE_SLOTS = "UPDATE lock_slots s SET task_id = NULL FROM {src} WHERE s.task_id = {src}.id"


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
     estimate_s, errors, lease_token, _seq) = row
    return Task(
        kind=kind, payload=payload, id=id_, status=Status(status), assigned_to=assigned_to,
        attempts=attempts, max_attempts=max_attempts, result=result, error=error,
        heartbeat_at=_utc(heartbeat_at), depends_on=list(depends_on), locks=list(locks),
        created_at=_utc(created_at), started_at=_utc(started_at),
        finished_at=_utc(finished_at), not_before=_utc(not_before), estimate_s=estimate_s,
        errors=list(errors), lease_token=lease_token,
    )


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
            with conn.transaction(), conn.cursor() as cur:
                return _apply_migrations(cur, schema, target)
    except psycopg.Error as exc:
        raise StoreError(f"cannot migrate schema {schema}: {exc}") from exc


def _apply_migrations(cur: Any, schema: str, target: int | None) -> tuple[int, int]:
    from psycopg import sql

    target = LATEST if target is None else target
    if not 0 <= target <= LATEST:
        raise StoreError(f"no schema version {target}: this foreperson knows 0..{LATEST}")
    cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"foreperson.migrate:{schema}",))
    cur.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
    cur.execute("SELECT to_regclass(format('%%I.schema_migrations', %s::text))", (schema,))
    version = 0
    if cur.fetchone()[0] is not None:
        cur.execute("SELECT coalesce(max(version), 0) FROM schema_migrations")
        version = int(cur.fetchone()[0])
    if version > target:
        raise StoreError(f"schema {schema!r} is at version {version}, past {target}"
                         + (": upgrade foreperson" if target == LATEST else ""))
    if version == 0 and target == LATEST:
        cur.execute(FRESH)
        for number in range(1, LATEST + 1):
            cur.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (number,))
        log.info("installed schema %s at version %d", schema, LATEST)
        return 0, LATEST
    for number in range(version, target):
        cur.execute(MIGRATIONS[number])
        cur.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (number + 1,))
        log.info("migrated schema %s to version %d", schema, number + 1)
    return version, target


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


class PostgresStore:
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
        clock: **tests only**: a fake clock whose time replaces the database's in every
            statement, so the shared contract suite (which moves time by hand) runs here.
            Leave None in production: then every time is the server's.

    Raises:
        MissingDependency: psycopg / psycopg-pool are not installed.
        StoreError: the server cannot be reached, or the schema is newer than this
            foreperson (upgrade foreperson), or missing / old with ``migrate=False``.
    """

    def __init__(self, dsn: str, *, schema: str | None = None, migrate: bool = True,
                 pool_size: int = 10, connect_timeout_s: float = 10.0,
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
        self._listen_lock = threading.Lock()
        self._listen_conn: psycopg.Connection | None = None
        self._closed = False
        self._psycopg = psycopg
        schema_name = self.schema

        def configure(conn: psycopg.Connection) -> None:
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
        except BaseException:
            self._pool.close()
            raise

    # -- plumbing --------------------------------------------------------------
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
                        yield cur
                else:
                    with conn.cursor() as cur:
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

        Raises:
            StoreError: the database failed; nothing of the batch was committed.
        """
        if getattr(self._local, "conn", None) is not None:
            yield
            return
        psycopg = self._psycopg
        if self._closed:
            raise StoreError("the store is closed")
        try:
            with self._pool.connection() as conn, conn.transaction():
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
        with self._cursor(transaction=True) as cur:
            return _apply_migrations(cur, self.schema, target)[1]

    # -- contract --------------------------------------------------------------
    def add(self, tasks: Sequence[Task]) -> list[str]:
        """See :meth:`TaskStore.add`. One INSERT for the whole batch; ids already
        stored are skipped (``ON CONFLICT DO NOTHING``), so concurrent adds of the same
        deterministic ids from several machines are harmless."""
        tasks = list(tasks)
        # One statement (its own transaction outside a batch). The existence check of
        # outside dependencies may run first on its own: tasks are never deleted.
        with self._cursor(transaction=False) as cur:
            def exists(ids: list[str]) -> set[str]:
                cur.execute("SELECT id FROM tasks WHERE id = ANY(%s)", (ids,))
                return {r[0] for r in cur.fetchall()}

            validate_new_tasks(tasks, exists)
            if not tasks:
                return []
            cur.execute(
                f"""
                WITH new AS (
                    SELECT * FROM unnest(%(ids)s::text[], %(kinds)s::text[],
                        %(payloads)s::text[], %(max_attempts)s::int[], %(deps)s::text[],
                        %(locks)s::text[], %(created)s::timestamptz[],
                        %(not_before)s::timestamptz[], %(estimates)s::float8[])
                        WITH ORDINALITY
                        AS n(id, kind, payload, max_attempts, deps, locks, created_at,
                             not_before, estimate_s, ord)
                ), ins AS (
                    INSERT INTO tasks (id, kind, payload, max_attempts, depends_on, locks,
                                       created_at, not_before, estimate_s)
                    SELECT n.id, n.kind, n.payload::jsonb, n.max_attempts,
                           ARRAY(SELECT jsonb_array_elements_text(n.deps::jsonb)),
                           ARRAY(SELECT jsonb_array_elements_text(n.locks::jsonb)),
                           coalesce(n.created_at, {_NOW}), n.not_before, n.estimate_s
                    FROM new n ORDER BY n.ord
                    ON CONFLICT (id) DO NOTHING
                    RETURNING id, seq, depends_on, locks
                ), deps AS (
                    INSERT INTO task_deps (task_id, dep_id)
                    SELECT DISTINCT ins.id, d FROM ins, unnest(ins.depends_on) AS d
                    ON CONFLICT DO NOTHING
                ), slots AS (
                    INSERT INTO lock_slots (name, slot)
                    SELECT DISTINCT l, 0 FROM ins, unnest(ins.locks) AS l
                    ON CONFLICT DO NOTHING
                )
                SELECT id FROM ins ORDER BY seq
                """,
                {"ids": [t.id for t in tasks], "kinds": [t.kind for t in tasks],
                 "payloads": [json.dumps(t.payload) for t in tasks],
                 "max_attempts": [t.max_attempts for t in tasks],
                 "deps": [json.dumps(list(dict.fromkeys(t.depends_on))) for t in tasks],
                 "locks": [json.dumps(list(dict.fromkeys(t.locks))) for t in tasks],
                 "created": [t.created_at for t in tasks],
                 "not_before": [t.not_before for t in tasks],
                 "estimates": [t.estimate_s for t in tasks], "now": self._now()})
            return [r[0] for r in cur.fetchall()]

    def get(self, task_id: str) -> Task | None:
        """See :meth:`TaskStore.get`."""
        with self._cursor(transaction=False) as cur:
            cur.execute(f"SELECT {_COLUMNS} FROM tasks WHERE id = %s", (task_id,))
            row = cur.fetchone()
        return _row_to_task(row) if row else None

    def list_tasks(self, status: Status | None = None, kind: str | None = None,
                   limit: int | None = None) -> list[Task]:
        """See :meth:`TaskStore.list_tasks`."""
        with self._cursor(transaction=False) as cur:
            cur.execute(
                f"SELECT {_COLUMNS} FROM tasks WHERE (%(status)s::text IS NULL OR "
                "status = %(status)s) AND (%(kind)s::text IS NULL OR kind = %(kind)s) "
                "ORDER BY seq LIMIT %(limit)s",
                {"status": status.value if status else None, "kind": kind, "limit": limit})
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
                cur.execute("SELECT id FROM claim_tasks('', %(kinds)s, NULL, %(limit)s, "
                            "false, %(now)s)",
                            {"kinds": kinds, "limit": limit, "now": self._now()})
                ids = [r[0] for r in cur.fetchall()]
            cur.execute(f"SELECT {_COLUMNS} FROM tasks WHERE id = ANY(%s) ORDER BY seq",
                        (ids,))
            return [_row_to_task(r) for r in cur.fetchall()]

    def assign(self, pairs: Sequence[tuple[str, str]], *, start: bool = False) -> list[Task]:
        """See :meth:`TaskStore.assign`."""
        if not pairs:
            return []
        by_worker: dict[str, list[str]] = {}
        for task_id, worker in pairs:
            by_worker.setdefault(worker, []).append(task_id)
        claimed: dict[str, Task] = {}
        with self._cursor(transaction=True) as cur:
            for worker, ids in by_worker.items():
                cur.execute(f"SELECT {_COLUMNS} FROM claim_tasks(%(worker)s, NULL, %(ids)s, "
                            "%(limit)s, %(start)s, %(now)s)",
                            {"worker": worker, "ids": ids, "limit": len(ids), "start": start,
                             "now": self._now()})
                for row in cur.fetchall():
                    task = _row_to_task(row)
                    claimed[task.id] = task
        return [claimed[task_id] for task_id, _ in pairs if task_id in claimed]

    def claim(self, worker: str, kinds: Collection[str], limit: int, *,
              start: bool = False) -> list[Task]:
        """See :meth:`TaskStore.claim`. One statement (``claim_tasks``): ready tasks of
        ``kinds`` in insertion order, ``FOR UPDATE SKIP LOCKED``, with their lock slots
        and rate tokens taken, attempts counted and fresh lease tokens."""
        kinds = list(kinds)
        if not kinds or limit <= 0:
            return []
        with self._cursor(transaction=False) as cur:
            cur.execute(f"SELECT {_COLUMNS} FROM claim_tasks(%(worker)s, %(kinds)s, NULL, "
                        "%(limit)s, %(start)s, %(now)s) ORDER BY seq",
                        {"worker": worker, "kinds": kinds, "limit": limit, "start": start,
                         "now": self._now()})
            return [_row_to_task(r) for r in cur.fetchall()]

    def start(self, task_id: str, token: str) -> bool:
        """See :meth:`TaskStore.start`."""
        with self._cursor(transaction=False) as cur:
            cur.execute(f"UPDATE tasks SET status = 'running', started_at = {_NOW}, "
                        f"heartbeat_at = {_NOW} WHERE id = %(id)s AND lease_token = %(token)s",
                        {"id": task_id, "token": token, "now": self._now()})
            return cur.rowcount == 1

    def start_many(self, leases: Mapping[str, str]) -> set[str]:
        """Mark many held tasks RUNNING in one statement (``{task_id: token}``).

        Returns:
            ids whose lease is gone.
        """
        if not leases:
            return set()
        with self._cursor(transaction=False) as cur:
            cur.execute(
                f"UPDATE tasks t SET status = 'running', started_at = {_NOW}, "
                f"heartbeat_at = {_NOW} FROM unnest(%(ids)s::text[], %(tokens)s::text[]) "
                "AS l(id, token) WHERE t.id = l.id AND t.lease_token = l.token "
                "RETURNING t.id",
                {"ids": list(leases), "tokens": list(leases.values()), "now": self._now()})
            return set(leases) - {r[0] for r in cur.fetchall()}

    def heartbeat(self, leases: Mapping[str, str]) -> set[str]:
        """See :meth:`TaskStore.heartbeat`. One statement for every lease; the time
        written is the server's."""
        if not leases:
            return set()
        with self._cursor(transaction=False) as cur:
            cur.execute(
                f"UPDATE tasks t SET heartbeat_at = {_NOW} "
                "FROM unnest(%(ids)s::text[], %(tokens)s::text[]) AS l(id, token) "
                "WHERE t.id = l.id AND t.lease_token = l.token RETURNING t.id",
                {"ids": list(leases), "tokens": list(leases.values()), "now": self._now()})
            return set(leases) - {r[0] for r in cur.fetchall()}

    def complete(self, task_id: str, token: str, result: Any) -> bool:
        """See :meth:`TaskStore.complete`."""
        return bool(self.complete_many([(task_id, token, result)]))

    def complete_many(self, items: Sequence[tuple[str, str, Any]]) -> set[str]:
        """Complete many held tasks in one statement: ``[(task_id, token, result), …]``.

        Returns:
            ids whose result was stored (the others had lost their lease).

        Raises:
            TypeError: a result is not JSON-serialisable.
        """
        if not items:
            return set()
        results = [json.dumps(result) for _, _, result in items]
        with self._cursor(transaction=False) as cur:
            cur.execute(
                f"""
                WITH done AS (
                    UPDATE tasks t SET status = 'completed', result = l.result::jsonb,
                        error = NULL, finished_at = {_NOW}, lease_token = NULL
                    FROM unnest(%(ids)s::text[], %(tokens)s::text[], %(results)s::text[])
                        AS l(id, token, result)
                    WHERE t.id = l.id AND t.lease_token = l.token
                    RETURNING t.id
                ), freed AS ({_FREE_SLOTS.format(src="done")})
                SELECT id FROM done
                """,
                {"ids": [i for i, _, _ in items], "tokens": [t for _, t, _ in items],
                 "results": results, "now": self._now()})
            return {r[0] for r in cur.fetchall()}

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
        with self._cursor(transaction=False) as cur:
            cur.execute(
                f"""
                WITH f AS (
                    UPDATE tasks SET status = %(status)s, error = %(error)s,
                        errors = errors || jsonb_build_array(jsonb_build_object(
                            'attempt', attempts, 'error', %(error)s::text, 'at', {_ISO})),
                        not_before = {_NOW} + make_interval(secs => %(delay)s::float8),
                        finished_at = CASE WHEN %(status)s = 'dead' THEN {_NOW} END,
                        lease_token = NULL, assigned_to = NULL
                    WHERE id = %(id)s AND lease_token = %(token)s
                    RETURNING id
                ), freed AS ({_FREE_SLOTS.format(src="f")})
                SELECT count(*) FROM f
                """,
                {"status": status.value, "error": error, "delay": delay, "id": task_id,
                 "token": token, "now": self._now()})
            return status if cur.fetchone()[0] == 1 else None  # type: ignore[index]

    def release(self, task_id: str, token: str) -> bool:
        """See :meth:`TaskStore.release`."""
        with self._cursor(transaction=False) as cur:
            cur.execute(
                f"""
                WITH r AS (
                    UPDATE tasks SET status = 'pending', attempts = greatest(0, attempts - 1),
                        lease_token = NULL, assigned_to = NULL
                    WHERE id = %(id)s AND lease_token = %(token)s
                    RETURNING id
                ), freed AS ({_FREE_SLOTS.format(src="r")})
                SELECT count(*) FROM r
                """, {"id": task_id, "token": token})
            return cur.fetchone()[0] == 1  # type: ignore[index]

    def back_off(self, task_id: str, token: str, resource: str | None,
                 after_s: float) -> bool:
        """A shared resource answered "too many requests" (HTTP 429): give the task back
        without counting the attempt, and keep every machine from claiming tasks that
        use the resource for ``after_s`` seconds.

        The task goes back to PENDING (its locks freed, ``attempts`` one less, ``error``
        saying why, ``not_before`` = now + ``after_s``); the rate bucket of ``resource``
        (or, when None, of every rate-limited resource the task uses) is pushed so its
        next token is free in ``after_s`` seconds, server time.

        Args:
            task_id: the task.
            token: its lease token.
            resource: the resource that refused, or None for all of the task's.
            after_s: seconds to keep off the resource (a ``Retry-After``).

        Returns:
            False when the lease is gone (nothing changed).
        """
        after_s = max(0.0, float(after_s))
        reason = (f"rate limited by {resource or 'a shared resource'}: "
                  f"backing off {after_s:g} s (attempt not counted)")
        with self._cursor(transaction=False) as cur:
            cur.execute(
                f"""
                WITH b AS (
                    UPDATE tasks SET status = 'pending', attempts = greatest(0, attempts - 1),
                        lease_token = NULL, assigned_to = NULL, error = %(reason)s,
                        not_before = {_NOW} + make_interval(secs => %(after)s::float8)
                    WHERE id = %(id)s AND lease_token = %(token)s
                    RETURNING id, kind, locks
                ), freed AS ({_FREE_SLOTS.format(src="b")}
                ), pushed AS (
                    UPDATE limits l SET tat = greatest(l.tat, {_NOW} + make_interval(
                        secs => %(after)s::float8 + (l.burst - 1) / l.rate_per_s))
                    FROM b
                    WHERE l.rate_per_s IS NOT NULL
                      AND CASE WHEN %(resource)s::text IS NULL
                               THEN l.name = ANY (b.locks || ('kind:' || b.kind))
                               ELSE l.name = %(resource)s END
                )
                SELECT count(*) FROM b
                """,
                {"reason": reason, "after": after_s, "id": task_id, "token": token,
                 "resource": resource, "now": self._now()})
            return cur.fetchone()[0] == 1  # type: ignore[index]

    def reclaim_stale(self, stale_after_s: float) -> list[str]:
        """See :meth:`TaskStore.reclaim_stale`. Staleness is judged by the server's
        clock; rows are picked ``FOR UPDATE SKIP LOCKED`` and updated only if still
        stale, so any number of processes may sweep at once. Also forgets worker
        processes not seen for a day."""
        message = ("'worker ' || coalesce(t.assigned_to, '?') || "
                   "' stopped heartbeating for more than ' || %(stale_txt)s || "
                   "' s (attempt ' || t.attempts || ')'")
        with self._cursor(transaction=False) as cur:
            cur.execute(
                f"""
                WITH stale AS (
                    SELECT id FROM tasks
                    WHERE status IN ('assigned', 'running')
                      AND heartbeat_at < {_NOW} - make_interval(secs => %(stale)s::float8)
                    FOR UPDATE SKIP LOCKED
                ), upd AS (
                    UPDATE tasks t SET
                        status = CASE WHEN t.attempts >= t.max_attempts THEN 'dead'
                                      ELSE 'pending' END,
                        error = {message},
                        errors = t.errors || jsonb_build_array(jsonb_build_object(
                            'attempt', t.attempts, 'error', {message}, 'at', {_ISO})),
                        lease_token = NULL, assigned_to = NULL,
                        finished_at = CASE WHEN t.attempts >= t.max_attempts THEN {_NOW} END
                    FROM stale WHERE t.id = stale.id
                    RETURNING t.id, t.seq
                ), freed AS ({_FREE_SLOTS.format(src="upd")}
                ), forgotten AS (
                    DELETE FROM workers WHERE heartbeat_at < {_NOW} - interval '1 day'
                )
                SELECT id FROM upd ORDER BY seq
                """,
                {"stale": float(stale_after_s), "stale_txt": f"{stale_after_s:g}",
                 "now": self._now()})
            return [r[0] for r in cur.fetchall()]

    def park_blocked(self) -> list[str]:
        """See :meth:`TaskStore.park_blocked`."""
        parked: list[str] = []
        with self._cursor(transaction=True) as cur:
            while True:
                cur.execute(
                    f"""
                    UPDATE tasks t SET status = 'dead', finished_at = {_NOW},
                        error = 'dependency ' || b.dep_id || ' is dead'
                    FROM (SELECT DISTINCT ON (d.task_id) d.task_id, d.dep_id
                          FROM tasks p JOIN task_deps d ON d.dep_id = p.id
                          WHERE p.status = 'dead'
                          ORDER BY d.task_id, d.dep_id) AS b
                    WHERE t.id = b.task_id AND t.status IN ('pending', 'failed')
                    RETURNING t.id
                    """, {"now": self._now()})
                rows = [r[0] for r in cur.fetchall()]
                if not rows:
                    return parked
                parked.extend(rows)

    def retry_dead(self, ids: Sequence[str] | None = None) -> list[str]:
        """See :meth:`TaskStore.retry_dead`."""
        with self._cursor(transaction=False) as cur:
            cur.execute(
                """
                WITH RECURSIVE chosen(id) AS (
                    SELECT id FROM tasks
                    WHERE status = 'dead' AND (%(ids)s::text[] IS NULL OR id = ANY (%(ids)s))
                    UNION
                    SELECT t.id FROM chosen c
                    JOIN task_deps d ON d.dep_id = c.id
                    JOIN tasks t ON t.id = d.task_id
                    WHERE t.status = 'dead' AND t.error LIKE 'dependency %%'
                ), upd AS (
                    UPDATE tasks t SET status = 'pending', attempts = 0, not_before = NULL,
                        finished_at = NULL
                    FROM chosen c WHERE t.id = c.id
                    RETURNING t.id, t.seq
                )
                SELECT id FROM upd ORDER BY seq
                """, {"ids": None if ids is None else list(ids)})
            return [r[0] for r in cur.fetchall()]

    def claim_effect(self, key: str, task_id: str, token: str) -> bool:
        """See :meth:`TaskStore.claim_effect`. The task row is share-locked while the
        effect is recorded, so a concurrent reclaim either happens first (and this call
        returns False) or waits until the effect is committed."""
        with self._cursor(transaction=False) as cur:
            cur.execute(
                f"""
                INSERT INTO effects (key, task_id, lease_token, created_at)
                SELECT %(key)s, t.id, t.lease_token, {_NOW} FROM tasks t
                WHERE t.id = %(id)s AND t.lease_token = %(token)s
                  AND t.status IN ('assigned', 'running')
                FOR SHARE
                ON CONFLICT (key) DO NOTHING
                RETURNING key
                """, {"key": key, "id": task_id, "token": token, "now": self._now()})
            return cur.fetchone() is not None

    def mean_durations(self) -> dict[str, float]:
        """See :meth:`TaskStore.mean_durations`."""
        with self._cursor(transaction=False) as cur:
            cur.execute("SELECT kind, avg(extract(epoch FROM finished_at - started_at)) "
                        "FROM tasks WHERE status = 'completed' AND started_at IS NOT NULL "
                        "GROUP BY kind")
            return {kind: float(mean) for kind, mean in cur.fetchall() if mean is not None}

    def stats(self) -> StoreStats:
        """See :meth:`TaskStore.stats`. ``workers`` holds every worker process that
        registered with :meth:`worker_seen` (``foreperson worker`` does), with its last
        heartbeat; ``now`` is the server's clock."""
        with self._cursor(transaction=False) as cur:
            cur.execute(
                f"""
                SELECT
                  (SELECT coalesce(jsonb_object_agg(status, n), '{{}}')
                   FROM (SELECT status, count(*) AS n FROM tasks GROUP BY status) s),
                  (SELECT coalesce(jsonb_object_agg(assigned_to, n), '{{}}')
                   FROM (SELECT assigned_to, count(*) AS n FROM tasks
                         WHERE status IN ('assigned', 'running') AND assigned_to IS NOT NULL
                         GROUP BY assigned_to) a),
                  (SELECT min(created_at) FROM tasks
                   WHERE status IN ('pending', 'assigned', 'running', 'failed')),
                  {_NOW},
                  (SELECT coalesce(jsonb_object_agg(name, extract(epoch FROM heartbeat_at)),
                                   '{{}}') FROM workers)
                """, {"now": self._now()})
            counts_raw, active, oldest, now, workers = cur.fetchone()  # type: ignore[misc]
        counts = {s: 0 for s in Status}
        for status, n in counts_raw.items():
            counts[Status(status)] = int(n)
        return StoreStats(counts, {k: int(v) for k, v in active.items()}, _utc(oldest),
                          _utc(now),  # type: ignore[arg-type]
                          {k: from_epoch(float(v)) for k, v in workers.items()})  # type: ignore[misc]

    # -- worker processes --------------------------------------------------------
    def worker_seen(self, name: str, kinds: Collection[str] = (), concurrency: int = 1) -> None:
        """Record that worker process ``name`` is alive (its last heartbeat, server
        time), for :meth:`stats` and ``foreperson status``.

        Args:
            name: the process's worker name (``host:pid``).
            kinds: kinds it claims.
            concurrency: tasks it runs at once.
        """
        with self._cursor(transaction=False) as cur:
            cur.execute(
                f"INSERT INTO workers (name, kinds, concurrency, started_at, heartbeat_at) "
                f"VALUES (%(name)s, %(kinds)s, %(concurrency)s, {_NOW}, {_NOW}) "
                "ON CONFLICT (name) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at, "
                "kinds = EXCLUDED.kinds, concurrency = EXCLUDED.concurrency",
                {"name": name, "kinds": sorted(kinds), "concurrency": concurrency,
                 "now": self._now()})

    def worker_gone(self, name: str) -> None:
        """Forget worker process ``name`` (it stopped cleanly)."""
        with self._cursor(transaction=False) as cur:
            cur.execute("DELETE FROM workers WHERE name = %s", (name,))

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
        psycopg = self._psycopg
        from psycopg import sql

        wanted = None if kinds is None else set(kinds)
        deadline = time.monotonic() + timeout_s
        with self._listen_lock:
            try:
                if self._listen_conn is None or self._listen_conn.closed:
                    if self._closed:
                        return False
                    conn = psycopg.connect(self.dsn, autocommit=True,
                                           connect_timeout=max(1, int(timeout_s)))
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
                    self._listen_conn = conn
                    if self._closed:          # closed while connecting
                        conn.close()
                        return False
                while True:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    for note in self._listen_conn.notifies(timeout=left, stop_after=1):
                        if (not note.payload or wanted is None
                                or wanted & set(note.payload.split(","))):
                            return True
            except psycopg.Error as exc:
                if self._closed:              # close() ended the wait
                    return False
                log.warning("listening for new tasks failed (%s); will reconnect", exc)
                if self._listen_conn is not None:
                    self._listen_conn.close()
                self._listen_conn = None
                time.sleep(max(0.0, min(deadline - time.monotonic(), 1.0)))
                return False

    # -- life cycle ------------------------------------------------------------
    def close(self) -> None:
        """Close every connection. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._pool.close()
        conn = self._listen_conn
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
