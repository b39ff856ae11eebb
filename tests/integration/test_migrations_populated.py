"""Every schema change, from each earlier schema, on a store that holds 100,000 tasks
(issue 18): the migrated schema equals a fresh one, the aggregates it adds agree with
the records, and on PostgreSQL no migration keeps a writer waiting a second (a probe
updates and inserts tasks all along)."""

from __future__ import annotations

import sqlite3
import threading
import time

import psycopg
import pytest
from _pg_catalog import catalog
from psycopg import sql

from foreperson.work import SqliteStore, Status, Task
from foreperson.work.store import WorkerTotals
from foreperson.work.stores import _pg_schema
from foreperson.work.stores._sqlite_schema import MIGRATIONS, statements

N = 100_000

# version 1's columns only, so the rows fit every earlier schema: 98 % COMPLETED, 1 %
# DEAD (some parked), the rest PENDING or RUNNING with an old heartbeat; each task after
# the first of its group of three depends on the one before
_SQLITE_ROWS = """
WITH RECURSIVE g(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM g WHERE n + 1 < :n)
INSERT INTO tasks (id, kind, payload, status, assigned_to, attempts, max_attempts, result,
                   error, heartbeat_at, depends_on, created_at, started_at, finished_at,
                   errors)
SELECT printf('t%07d', n), CASE n % 3 WHEN 0 THEN 'classify' WHEN 1 THEN 'draft'
                                      ELSE 'triage' END, '{"ticket": 1}',
       CASE WHEN n % 100 = 99 THEN 'dead' WHEN n % 200 = 98 THEN 'pending'
            WHEN n % 200 = 97 THEN 'running' ELSE 'completed' END,
       printf('worker-%d', n / 3000), 1, 3,
       CASE WHEN n % 100 < 97 THEN '{"ok": true}' END,
       CASE WHEN n % 100 = 99 THEN CASE WHEN n % 300 = 99 THEN 'boom'
                                        ELSE 'dependency t0000000 is dead' END END,
       1700000000.0 + n, CASE WHEN n % 3 = 0 THEN '[]'
                              ELSE json_array(printf('t%07d', n - 1)) END,
       1700000000.0 + n, 1700000000.0 + n + 0.1,
       CASE WHEN n % 200 IN (97, 98) THEN NULL ELSE 1700000000.0 + n + 0.5 END,
       CASE WHEN n % 300 = 99 THEN json_array(json_object('attempt', 1, 'error', 'boom',
            'at', '2023-11-14T22:13:20+00:00', 'worker', printf('worker-%d', n / 3000)))
            ELSE '[]' END
FROM g
"""

_PG_ROWS = """
INSERT INTO tasks (id, kind, payload, status, assigned_to, attempts, max_attempts,
                       result, error, heartbeat_at, depends_on, created_at, started_at,
                       finished_at, errors)
SELECT format('t%s', lpad(n::text, 7, '0')),
       (ARRAY['classify', 'draft', 'triage'])[n % 3 + 1], '{{"ticket": 1}}',
       CASE WHEN n % 100 = 99 THEN 'dead' WHEN n % 200 = 98 THEN 'pending'
            WHEN n % 200 = 97 THEN 'running' ELSE 'completed' END,
       format('worker-%s', n / 3000), 1, 3,
       CASE WHEN n % 100 < 97 THEN '{{"ok": true}}'::jsonb END,
       CASE WHEN n % 100 = 99 THEN CASE WHEN n % 300 = 99 THEN 'boom'
                                        ELSE 'dependency t0000000 is dead' END END,
       to_timestamp(1700000000 + n),
       CASE WHEN n % 3 = 0 THEN '{{}}'::text[]
            ELSE ARRAY[format('t%s', lpad((n - 1)::text, 7, '0'))] END,
       to_timestamp(1700000000 + n), to_timestamp(1700000000 + n + 0.1),
       CASE WHEN n % 200 IN (97, 98) THEN NULL ELSE to_timestamp(1700000000 + n + 0.5) END,
       CASE WHEN n % 300 = 99 THEN jsonb_build_array(jsonb_build_object(
            'attempt', 1, 'error', 'boom', 'at', '2023-11-14T22:13:20+00:00',
            'worker', format('worker-%s', n / 3000))) ELSE '[]'::jsonb END
FROM generate_series(0, {n} - 1) AS n;
INSERT INTO task_deps (task_id, dep_id)
SELECT id, depends_on[1] FROM tasks WHERE depends_on <> '{{}}';
"""

WANTED = {Status.COMPLETED: 98_000, Status.DEAD: 1_000, Status.PENDING: 500,
          Status.RUNNING: 500, Status.ASSIGNED: 0, Status.FAILED: 0}
DONE_BY_WORKER_0 = 2_940                       # the COMPLETED of worker-0's 3,000
FAILED_BY_WORKER_0 = 10                        # its failed attempts ("boom")


@pytest.mark.parametrize("version", range(1, len(MIGRATIONS)))
def test_a_populated_sqlite_file_of_each_earlier_schema_migrates_to_the_fresh_one(
        tmp_path, version):
    path = tmp_path / f"v{version}.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.create_function("foreperson_now", 0, time.time)     # as SqliteStore gives it
    conn.execute("BEGIN")
    # the rows go in at version 1 and live through each later change, as a real file's
    # would (a row inserted finished would skip the triggers that keep the aggregates)
    for statement in statements(MIGRATIONS[0]):
        conn.execute(statement)
    conn.execute(_SQLITE_ROWS, {"n": N})
    conn.execute("INSERT INTO task_deps (task_id, dep_id) SELECT id, json_extract(depends_on, "
                 "'$[0]') FROM tasks WHERE depends_on != '[]'")
    for number in range(1, version):
        for statement in statements(MIGRATIONS[number]):
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {version}")
    conn.execute("COMMIT")
    conn.close()

    began = time.monotonic()
    migrated = SqliteStore(path)
    took = time.monotonic() - began
    fresh = SqliteStore(tmp_path / "fresh.db")
    schema = "SELECT type, name, sql FROM sqlite_master ORDER BY name"
    assert migrated._read(schema) == fresh._read(schema)
    assert migrated.stats().counts == WANTED
    assert migrated.counts_by_kind()["triage"][Status.DEAD] == 333
    assert migrated.worker_totals(["worker-0"])["worker-0"] == WorkerTotals(
        DONE_BY_WORKER_0, FAILED_BY_WORKER_0)
    migrated.add([Task("classify", id="after")])              # and it works on
    [task] = migrated.claim("w", {"classify"}, 1, start=True)
    assert migrated.complete(task.id, task.lease_token, {})
    assert migrated.stats().counts[Status.COMPLETED] == WANTED[Status.COMPLETED] + 1
    assert took < 30


@pytest.mark.postgres
@pytest.mark.parametrize("version", range(1, _pg_schema.LATEST))
def test_a_populated_postgres_schema_of_each_earlier_version_migrates_while_writers_go_on(
        pg_dsn, pg_schema, version):
    from foreperson.work.stores.postgres import PostgresStore, migrate_schema

    fresh = pg_schema + "_fresh"
    try:
        migrate_schema(pg_dsn, schema=pg_schema, target=version)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("SET search_path = {}").format(sql.Identifier(pg_schema)))
            conn.execute(_PG_ROWS.format(n=N))
            conn.execute("INSERT INTO tasks (id, kind, payload, max_attempts, created_at) "
                         "VALUES ('probe', 'k', '{}', 3, now())")
            conn.execute("ANALYZE tasks")
        waits, errors = _probe_while(lambda: migrate_schema(pg_dsn, schema=pg_schema),
                                     pg_dsn, pg_schema)
        assert errors == [] and max(waits) < 1.0, (max(waits), errors)
        migrate_schema(pg_dsn, schema=fresh)
        assert catalog(pg_dsn, pg_schema) == catalog(pg_dsn, fresh)
        with PostgresStore(pg_dsn, schema=pg_schema, migrate=False) as store:
            counts = store.stats().counts
            assert counts[Status.COMPLETED] == WANTED[Status.COMPLETED]
            assert counts[Status.DEAD] == WANTED[Status.DEAD]
            assert store.worker_totals(["worker-0"])["worker-0"] == WorkerTotals(
                DONE_BY_WORKER_0, FAILED_BY_WORKER_0)
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                sql.Identifier(fresh)))


def _probe_while(migrate, dsn: str, schema: str) -> tuple[list[float], list[str]]:
    """Run ``migrate`` while another connection writes to ``tasks`` over and over (an
    update of one row, an insert of a new one; at most 1 s of waiting for a lock each).

    Returns:
        each write's wall time, seconds; the errors of the writes.
    """
    waits: list[float] = []
    errors: list[str] = []
    done = threading.Event()

    def probe() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SET lock_timeout = '1s'")
            conn.execute(sql.SQL("SET search_path = {}").format(sql.Identifier(schema)))
            n = 0
            while not done.is_set():
                n += 1
                began = time.monotonic()
                try:
                    conn.execute("UPDATE tasks SET payload = %s WHERE id = 'probe'",
                                 (f'{{"n": {n}}}',))
                    conn.execute("INSERT INTO tasks (id, kind, payload, max_attempts, "
                                 "created_at) VALUES (%s, 'k', '{}', 3, now())", (f"p{n}",))
                except psycopg.Error as exc:
                    errors.append(str(exc).strip())
                waits.append(time.monotonic() - began)
                time.sleep(0.01)

    thread = threading.Thread(target=probe)
    thread.start()
    try:
        time.sleep(0.2)
        migrate()
    finally:
        done.set()
        thread.join(30)
    return waits, errors
