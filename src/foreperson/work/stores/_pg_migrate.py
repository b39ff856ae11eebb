"""Bringing a PostgreSQL schema to the current version (:mod:`._pg_schema`), also while
workers run on a populated one.

Each migration runs in a transaction of its own; the indexes it adds on tables that may
be large are then built ``CONCURRENTLY`` (writers never wait for them), and the
aggregates of version 6 are filled from a snapshot, without any lock that a claim or a
completion waits for. A session advisory lock serialises migrations of one schema
across processes (many workers may start at once): the later ones find nothing to do.
"""

from __future__ import annotations

import logging
from typing import Any

from ...errors import StoreError
from ..metrics import HISTORY_KEPT_S
from ._pg_schema import DROPPED, FRESH, INDEXES, LATEST, MIGRATIONS

__all__ = ["apply_migrations"]

log = logging.getLogger("foreperson.store.postgres")

_RUN_S = ("CASE WHEN status = 'completed' AND started_at IS NOT NULL AND finished_at IS NOT "
          "NULL THEN extract(epoch FROM finished_at - started_at) END")

# What the statement triggers would have written, had they been there from the start:
# COMPLETED and DEAD per kind, each worker's completions and failed attempts, and a week
# of changes for the history chart (created; finished).
_BACKFILL_V6 = [
    "DELETE FROM task_deltas",
    "DELETE FROM task_counts",
    "DELETE FROM worker_counts",
    "DELETE FROM task_history",
    f"""INSERT INTO task_counts (kind, status, n, run_s, run_n)
        SELECT kind, status, count(*), coalesce(sum({_RUN_S}), 0), count({_RUN_S})
        FROM tasks WHERE status IN ('completed', 'dead') GROUP BY kind, status""",
    """INSERT INTO worker_counts (name, completed, failed, last_at)
        SELECT name, sum(done), sum(failed), max(at) FROM (
            SELECT assigned_to AS name, 1 AS done, 0 AS failed,
                   coalesce(finished_at, created_at) AS at
            FROM tasks WHERE status = 'completed' AND assigned_to IS NOT NULL
            UNION ALL
            SELECT e ->> 'worker', 0, 1, created_at
            FROM tasks, jsonb_array_elements(tasks.errors) AS e
            WHERE tasks.errors <> '[]' AND e ->> 'worker' IS NOT NULL) w
        GROUP BY name""",
    f"""INSERT INTO task_history (at, status, n)
        SELECT at, status, sum(n) FROM (
            SELECT extract(epoch FROM created_at)::bigint AS at, 'unfinished' AS status,
                   1 AS n
            FROM tasks
            UNION ALL
            SELECT extract(epoch FROM coalesce(finished_at, created_at))::bigint, s.status,
                   s.n
            FROM tasks, LATERAL (VALUES ('unfinished', -1), (tasks.status, 1)) AS s(status, n)
            WHERE tasks.status IN ('completed', 'dead')) c
        WHERE at >= extract(epoch FROM statement_timestamp())::bigint - {int(HISTORY_KEPT_S)}
        GROUP BY at, status HAVING sum(n) <> 0""",
]


def apply_migrations(conn: Any, schema: str, target: int | None) -> tuple[int, int]:
    """Bring ``schema`` to version ``target`` on ``conn`` (autocommit, ``search_path``
    set to the schema).

    Returns:
        ``(version before, version after)``.

    Raises:
        StoreError: no such version, or the schema is past ``target``.
        psycopg.Error: the database failed (the caller wraps it).
    """
    target = LATEST if target is None else target
    if not 0 <= target <= LATEST:
        raise StoreError(f"no schema version {target}: this foreperson knows 0..{LATEST}")
    key = f"foreperson.migrate:{schema}"
    conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (key,))
    try:
        return _migrate(conn, schema, target)
    finally:
        conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (key,))


def _migrate(conn: Any, schema: str, target: int) -> tuple[int, int]:
    from psycopg import sql

    with conn.transaction():
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        exists = conn.execute("SELECT to_regclass(format('%%I.schema_migrations', %s::text))",
                              (schema,)).fetchone()[0]
        version = 0 if exists is None else int(conn.execute(
            "SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()[0])
    if version > target:
        raise StoreError(f"schema {schema!r} is at version {version}, past {target}"
                         + (": upgrade foreperson" if target == LATEST else ""))
    if version == 0 and target == LATEST:
        with conn.transaction():
            conn.execute(FRESH)
            for number in range(1, LATEST + 1):
                conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (number,))
        log.info("installed schema %s at version %d", schema, LATEST)
        return 0, LATEST
    for number in range(version + 1, target + 1):
        with conn.transaction():
            conn.execute(MIGRATIONS[number - 1])
        for index in INDEXES.get(number, []):
            _build_concurrently(conn, schema, index)
        for index in DROPPED.get(number, []):
            conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index}")
        if number == 6:
            _backfill_aggregates(conn, schema)
        with conn.transaction():
            conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (number,))
        log.info("migrated schema %s to version %d", schema, number)
    return version, target


def _build_concurrently(conn: Any, schema: str, index: str) -> None:
    """``CREATE INDEX CONCURRENTLY`` (outside any transaction): claims and completions go
    on while it builds. An invalid index left by an interrupted build is built again."""
    name = index.split()[0]
    valid = conn.execute("SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = "
                         "to_regclass(format('%%I.%%I', %s::text, %s::text))",
                         (schema, name)).fetchone()
    if valid is not None and not valid[0]:
        conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
    conn.execute(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {index}")


def _backfill_aggregates(conn: Any, schema: str) -> None:
    """Fill version 6's aggregates from the records, exactly, while workers write.

    The triggers exist already (the migration's transaction committed), so every change
    after it left a delta. In one REPEATABLE READ snapshot, the records are counted and
    the deltas that snapshot sees are dropped (their changes are in the count); deltas
    committed later stay, to be folded. Folding is held off meanwhile (its lock)."""
    key = f"{schema}.fold_task_deltas"
    conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (key,))
    try:
        with conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            for statement in _BACKFILL_V6:
                conn.execute(statement)
    finally:
        conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (key,))
