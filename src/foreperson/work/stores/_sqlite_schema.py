"""The SQLite schema of :class:`~foreperson.work.stores.sqlite.SqliteStore`, as data.

``MIGRATIONS[i]`` brings a database from version ``i`` to ``i + 1`` (``PRAGMA
user_version`` records the version); a new file runs them all in order, so a fresh
database and a migrated one are the same by construction (a test checks it on a
populated file). A released migration is never edited: a change is a new one.

Objects (the version that brought each):

``tasks`` (1)
    one row per :class:`~foreperson.work.task.Task`, same column names as its fields
    (times as epoch seconds, lists and objects as JSON text).
``task_deps``, ``task_locks``, ``held_locks``, ``effects`` (1)
    dependency edges, the locks each task needs, the locks held now, side effects.
``steps`` (2), ``runs`` (3)
    the step journal and the durable runs of ``foreperson.runtime``.
``workers`` (4)
    worker processes and their last heartbeat.
``task_counts``, ``task_history``, ``worker_counts``, ``clock`` (5)
    aggregates of the finished work, kept by triggers in the same transaction as each
    change, so that monitoring reads cost the size of what they show, never the size of
    the history: COMPLETED and DEAD tasks per kind (with the run time of the COMPLETED
    ones, for the learned estimates), the net change per second of the unfinished,
    COMPLETED and DEAD counts (the history chart: counts at an instant are today's
    counts minus what changed since), and what each worker completed and failed. The
    triggers fire once per task, when it finishes (or leaves DEAD, or is pruned); the
    unfinished are counted on the ``tasks_status`` index, a cost of the work at hand.
    The triggers read the second from ``clock``, a one-row table each store sets from
    its clock when a write transaction starts in a new second (no Python call inside a
    trigger: that would take the GIL in the middle of a write).
``pruned_tasks`` (5)
    one small tombstone per task removed by ``prune``, so that an id added again is
    refused instead of silently run a second time.
"""

from __future__ import annotations

import sqlite3

from ..metrics import HISTORY_KEPT_S

__all__ = ["MIGRATIONS", "statements"]

# Numbered migrations: index i brings a database from version i to i + 1.
MIGRATIONS: list[str] = [
    """
    CREATE TABLE tasks (
        seq          INTEGER PRIMARY KEY,
        id           TEXT NOT NULL UNIQUE,
        kind         TEXT NOT NULL,
        payload      TEXT NOT NULL,
        status       TEXT NOT NULL,
        assigned_to  TEXT,
        attempts     INTEGER NOT NULL DEFAULT 0,
        max_attempts INTEGER NOT NULL,
        result       TEXT,
        error        TEXT,
        heartbeat_at REAL,
        depends_on   TEXT NOT NULL DEFAULT '[]',
        locks        TEXT NOT NULL DEFAULT '[]',
        created_at   REAL NOT NULL,
        started_at   REAL,
        finished_at  REAL,
        not_before   REAL,
        estimate_s   REAL,
        errors       TEXT NOT NULL DEFAULT '[]',
        lease_token  TEXT
    );
    CREATE INDEX tasks_claimable ON tasks (kind, seq) WHERE status IN ('pending', 'failed');
    CREATE INDEX tasks_active ON tasks (heartbeat_at) WHERE status IN ('assigned', 'running');
    CREATE INDEX tasks_status ON tasks (status);
    CREATE TABLE task_deps (
        task_id TEXT NOT NULL,
        dep_id  TEXT NOT NULL,
        PRIMARY KEY (task_id, dep_id)
    ) WITHOUT ROWID;
    CREATE INDEX task_deps_dep ON task_deps (dep_id);
    CREATE TABLE task_locks (
        task_id TEXT NOT NULL,
        lock    TEXT NOT NULL,
        PRIMARY KEY (task_id, lock)
    ) WITHOUT ROWID;
    CREATE TABLE held_locks (
        lock    TEXT PRIMARY KEY,
        task_id TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE effects (
        key        TEXT PRIMARY KEY,
        task_id    TEXT NOT NULL,
        created_at REAL NOT NULL
    ) WITHOUT ROWID;
    """,
]

MIGRATIONS.append(
    # 1 -> 2: runs, reason codes, per-task leases, at-least-once effects, the step journal
    """
    ALTER TABLE tasks ADD COLUMN run_id TEXT;
    ALTER TABLE tasks ADD COLUMN parent_id TEXT;
    ALTER TABLE tasks ADD COLUMN reason TEXT;
    ALTER TABLE tasks ADD COLUMN stale_after REAL;
    ALTER TABLE tasks ADD COLUMN lease_s REAL;
    ALTER TABLE tasks ADD COLUMN lease_expires_at REAL;
    ALTER TABLE tasks ADD COLUMN awaited INTEGER NOT NULL DEFAULT 0;
    UPDATE tasks SET reason = 'dependency_dead' WHERE status = 'dead' AND error LIKE 'dependency %';
    UPDATE tasks SET lease_s = 90.0, lease_expires_at = heartbeat_at + 90.0
        WHERE status IN ('assigned', 'running');
    DROP INDEX tasks_active;
    CREATE INDEX tasks_active ON tasks (lease_expires_at) WHERE status IN ('assigned', 'running');
    CREATE INDEX tasks_run ON tasks (run_id, status) WHERE run_id IS NOT NULL;
    ALTER TABLE effects ADD COLUMN lease_token TEXT;
    ALTER TABLE effects ADD COLUMN state TEXT NOT NULL DEFAULT 'done';
    CREATE TABLE steps (
        seq        INTEGER PRIMARY KEY,
        run_id     TEXT NOT NULL,
        key        TEXT NOT NULL,
        kind       TEXT NOT NULL,
        version    INTEGER NOT NULL,
        digest     TEXT NOT NULL,
        result     TEXT NOT NULL,
        created_at REAL NOT NULL,
        UNIQUE (run_id, key)
    );
    """)

MIGRATIONS.append(
    # 2 -> 3: durable runs (foreperson.runtime): who a run belongs to, who runs it now, how
    # it ended; a step's request summary, to say how a divergent replay differs
    """
    CREATE TABLE runs (
        run_id           TEXT PRIMARY KEY,
        agent            TEXT NOT NULL,
        user_id          TEXT,
        status           TEXT NOT NULL,
        input            TEXT NOT NULL,
        result           TEXT,
        error            TEXT,
        stop_reason      TEXT,
        owner            TEXT,
        lease_expires_at REAL,
        version          INTEGER NOT NULL,
        created_at       REAL NOT NULL,
        updated_at       REAL NOT NULL
    );
    CREATE INDEX runs_created ON runs (created_at);
    CREATE INDEX runs_user ON runs (user_id, created_at);
    ALTER TABLE steps ADD COLUMN request TEXT;
    """)

MIGRATIONS.append(
    # 3 -> 4: observability: the trace context a task was created under (a W3C carrier,
    # JSON), and workers with the process that runs each (as PostgreSQL's)
    """
    ALTER TABLE tasks ADD COLUMN trace_context TEXT;
    CREATE TABLE workers (
        name         TEXT PRIMARY KEY,
        kinds        TEXT NOT NULL DEFAULT '[]',
        concurrency  INTEGER NOT NULL DEFAULT 1,
        host         TEXT,
        pid          INTEGER,
        started_at   REAL NOT NULL,
        heartbeat_at REAL NOT NULL
    );
    """)

_FINISHED = "('completed', 'dead')"
_RUN_S = ("CASE WHEN {t}.status = 'completed' AND {t}.started_at IS NOT NULL "
          "AND {t}.finished_at IS NOT NULL THEN {t}.finished_at - {t}.started_at ELSE 0 END")
_RUN_N = ("({t}.status = 'completed' AND {t}.started_at IS NOT NULL "
          "AND {t}.finished_at IS NOT NULL)")
# what the history calls a status: COMPLETED, DEAD, or unfinished (any other)
_CHART = "CASE WHEN {t}.status IN ('completed', 'dead') THEN {t}.status ELSE 'unfinished' END"

MIGRATIONS.append(
    # 4 -> 5: steady at any age: aggregates of the finished tasks kept by a trigger that
    # fires once per task (when it finishes); indexes for retention (finished tasks by
    # age, effects by task, ended journal runs); tombstones of pruned tasks
    f"""
    CREATE TABLE task_counts (
        kind   TEXT NOT NULL,
        status TEXT NOT NULL,
        n      INTEGER NOT NULL DEFAULT 0,
        run_s  REAL NOT NULL DEFAULT 0,
        run_n  INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (kind, status)
    ) WITHOUT ROWID;
    CREATE TABLE task_history (
        at     INTEGER NOT NULL,
        status TEXT NOT NULL,
        n      INTEGER NOT NULL,
        PRIMARY KEY (at, status)
    ) WITHOUT ROWID;
    CREATE TABLE worker_counts (
        name      TEXT PRIMARY KEY,
        completed INTEGER NOT NULL DEFAULT 0,
        failed    INTEGER NOT NULL DEFAULT 0,
        last_at   REAL NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX worker_counts_last ON worker_counts (last_at);
    CREATE TABLE clock (at INTEGER NOT NULL);
    INSERT INTO clock (at) VALUES (CAST(foreperson_now() AS INTEGER));
    CREATE TABLE pruned_tasks (
        id        TEXT NOT NULL UNIQUE,
        run_id    TEXT,
        pruned_at REAL NOT NULL
    );
    CREATE INDEX tasks_finished ON tasks (finished_at) WHERE status IN {_FINISHED};
    CREATE INDEX effects_task ON effects (task_id);
    CREATE INDEX steps_ended ON steps (created_at) WHERE key = 'end';
    INSERT INTO task_counts (kind, status, n, run_s, run_n)
        SELECT t.kind, t.status, count(*), total({_RUN_S.format(t="t")}),
               total({_RUN_N.format(t="t")})
        FROM tasks t WHERE t.status IN {_FINISHED} GROUP BY t.kind, t.status;
    INSERT INTO worker_counts (name, completed, failed, last_at)
        SELECT name, total(done), total(failed), max(at) FROM (
            SELECT assigned_to AS name, 1 AS done, 0 AS failed, finished_at AS at FROM tasks
            WHERE status = 'completed' AND assigned_to IS NOT NULL
            UNION ALL
            SELECT json_extract(e.value, '$.worker'), 0, 1, tasks.created_at
            FROM tasks, json_each(tasks.errors) AS e
            WHERE tasks.errors != '[]' AND json_extract(e.value, '$.worker') IS NOT NULL)
        WHERE name IS NOT NULL GROUP BY name;
    INSERT INTO task_history (at, status, n)
        SELECT at, status, sum(n) FROM (
            SELECT CAST(created_at AS INTEGER) AS at, 'unfinished' AS status, 1 AS n
            FROM tasks
            UNION ALL
            SELECT CAST(coalesce(finished_at, created_at) AS INTEGER), 'unfinished', -1
            FROM tasks WHERE status IN {_FINISHED}
            UNION ALL
            SELECT CAST(coalesce(finished_at, created_at) AS INTEGER), status, 1
            FROM tasks WHERE status IN {_FINISHED})
        WHERE at >= foreperson_now() - {int(HISTORY_KEPT_S)}
        GROUP BY at, status HAVING sum(n) != 0;
    CREATE TRIGGER tasks_counted AFTER UPDATE OF status ON tasks
    WHEN OLD.status IS NOT NEW.status
         AND (NEW.status IN {_FINISHED} OR OLD.status IN {_FINISHED}) BEGIN
        INSERT INTO task_counts (kind, status, n, run_s, run_n)
            SELECT NEW.kind, NEW.status, 1, {_RUN_S.format(t="NEW")}, {_RUN_N.format(t="NEW")}
            WHERE NEW.status IN {_FINISHED}
            UNION ALL
            SELECT OLD.kind, OLD.status, -1, -{_RUN_S.format(t="OLD")},
                   -{_RUN_N.format(t="OLD")}
            WHERE OLD.status IN {_FINISHED}
            ON CONFLICT (kind, status) DO UPDATE SET n = n + excluded.n,
                run_s = run_s + excluded.run_s, run_n = run_n + excluded.run_n;
        INSERT INTO task_history (at, status, n)
            SELECT at, {_CHART.format(t="NEW")}, 1 FROM clock WHERE true
            UNION ALL
            SELECT at, {_CHART.format(t="OLD")}, -1 FROM clock WHERE true
            ON CONFLICT (at, status) DO UPDATE SET n = n + excluded.n;
        INSERT INTO worker_counts (name, completed, failed, last_at)
            SELECT NEW.assigned_to, 1, 0, NEW.finished_at
            WHERE NEW.status = 'completed' AND NEW.assigned_to IS NOT NULL
            ON CONFLICT (name) DO UPDATE SET completed = completed + 1,
                last_at = excluded.last_at;
    END;
    CREATE TRIGGER tasks_counted_failure AFTER UPDATE OF errors ON tasks
    WHEN NEW.errors IS NOT OLD.errors BEGIN
        INSERT INTO worker_counts (name, completed, failed, last_at)
            SELECT json_extract(NEW.errors, '$[#-1].worker'), 0, 1, at FROM clock
            WHERE json_extract(NEW.errors, '$[#-1].worker') IS NOT NULL
            ON CONFLICT (name) DO UPDATE SET failed = failed + 1, last_at = excluded.last_at;
    END;
    CREATE TRIGGER tasks_counted_removal AFTER DELETE ON tasks
    WHEN OLD.status IN {_FINISHED} BEGIN
        INSERT INTO task_counts (kind, status, n, run_s, run_n)
            VALUES (OLD.kind, OLD.status, -1, -{_RUN_S.format(t="OLD")},
                    -{_RUN_N.format(t="OLD")})
            ON CONFLICT (kind, status) DO UPDATE SET n = n + excluded.n,
                run_s = run_s + excluded.run_s, run_n = run_n + excluded.run_n;
        INSERT INTO task_history (at, status, n)
            SELECT at, OLD.status, -1 FROM clock WHERE true
            ON CONFLICT (at, status) DO UPDATE SET n = n + excluded.n;
    END;
    """)

MIGRATIONS.append(
    # 5 -> 6: leases on the host's boot clock beside the wall-clock deadline, so a
    # process whose wall clock is wrong cannot take a live lease (SystemClock.lease_time);
    # the leases held when the file is upgraded keep the wall clock until renewed
    """
    ALTER TABLE tasks ADD COLUMN lease_boot TEXT;
    ALTER TABLE tasks ADD COLUMN lease_mono REAL;
    ALTER TABLE runs ADD COLUMN lease_boot TEXT;
    ALTER TABLE runs ADD COLUMN lease_mono REAL;
    """)


def statements(script: str) -> list[str]:
    """The statements of ``script`` in order (a trigger's ``BEGIN ... END`` body kept
    whole), for running one migration inside the caller's transaction
    (``executescript`` would commit it)."""
    out: list[str] = []
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if pending.strip() and sqlite3.complete_statement(pending):
            out.append(pending.strip())
            pending = ""
    if pending.strip():
        out.append(pending.strip())
    return out
