"""The SQL of :class:`~foreperson.work.stores.sqlite.SqliteStore`, as named queries, and
the rows they read and write (a task, step or run to and from its columns).

Every statement the store runs is here (the schema and its migrations are in
:mod:`._sqlite_schema`). Parameters are named (``:now``, ``:id`` …) unless a statement
takes a list of variable length: those are built by the small functions below, which
write out placeholders (``?``, ``?N``, ``:kN``) for a given count, never values. A write
runs in the caller's transaction (``BEGIN IMMEDIATE``), so several processes may share
the file. Status transitions follow :mod:`foreperson.work.policy`.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from ...journal import RunRecord, Step, check_run_version
from ..task import Status, Task, from_epoch, to_epoch

# -- columns -------------------------------------------------------------------
TASK_COLUMNS = ("id, kind, payload, status, assigned_to, attempts, max_attempts, result, "
                "error, heartbeat_at, depends_on, locks, created_at, started_at, finished_at, "
                "not_before, estimate_s, errors, lease_token, run_id, parent_id, reason, "
                "stale_after, lease_expires_at, awaited, trace_context")
STEP_COLUMNS = "run_id, key, kind, digest, result, version, created_at, seq, request"
RUN_COLUMNS = ("run_id, agent, user_id, status, input, result, error, stop_reason, owner, "
               "lease_expires_at, version, created_at, updated_at")
# what ready_brief() reads of a ready task
READY_BRIEF_COLUMNS = "t.id, t.kind, t.estimate_s"


# -- rows: the columns above to and from a task, step or run -------------------------
def _list(text: str) -> list[Any]:
    return [] if text == "[]" else json.loads(text)


def row_to_task(row: sqlite3.Row | tuple[Any, ...]) -> Task:
    """A row of :data:`TASK_COLUMNS` as a :class:`Task`."""
    (id_, kind, payload, status, assigned_to, attempts, max_attempts, result, error,
     heartbeat_at, depends_on, locks, created_at, started_at, finished_at, not_before,
     estimate_s, errors, lease_token, run_id, parent_id, reason, stale_after,
     lease_expires_at, awaited, trace_context) = row
    return Task(
        kind=kind, payload=json.loads(payload), id=id_, status=Status(status),
        assigned_to=assigned_to, attempts=attempts, max_attempts=max_attempts,
        result=None if result is None else json.loads(result), error=error,
        heartbeat_at=from_epoch(heartbeat_at), depends_on=_list(depends_on),
        locks=_list(locks), created_at=from_epoch(created_at),
        started_at=from_epoch(started_at), finished_at=from_epoch(finished_at),
        not_before=from_epoch(not_before), estimate_s=estimate_s,
        errors=_list(errors), lease_token=lease_token, run_id=run_id, parent_id=parent_id,
        reason=reason, stale_after=stale_after, lease_expires_at=from_epoch(lease_expires_at),
        awaited=bool(awaited),
        trace_context=None if trace_context is None else json.loads(trace_context),
    )


def task_row(t: Task, now: float) -> dict[str, Any]:
    """The parameters of :data:`INSERT_TASK` for a new task added at ``now``."""
    return {"id": t.id, "kind": t.kind, "payload": json.dumps(t.payload),
            "max_attempts": t.max_attempts, "depends_on": json.dumps(t.depends_on),
            "locks": json.dumps(t.locks), "created_at": to_epoch(t.created_at) or now,
            "not_before": to_epoch(t.not_before), "estimate_s": t.estimate_s,
            "run_id": t.run_id, "parent_id": t.parent_id, "stale_after": t.stale_after,
            "awaited": int(t.awaited),
            "trace_context": None if t.trace_context is None
            else json.dumps(t.trace_context)}


def row_to_step(row: tuple[Any, ...]) -> Step:
    """A row of :data:`STEP_COLUMNS` as a :class:`Step` (format version not checked)."""
    run_id, key, kind, digest, result, version, created_at, seq, request = row
    return Step(run_id, key, kind, digest, json.loads(result), version, from_epoch(created_at),
                seq, None if request is None else json.loads(request))


def step_row(step: Step) -> dict[str, Any]:
    """The parameters of :data:`PUT_STEP` for ``step``, but ``:now``."""
    result = json.dumps(step.result, allow_nan=False)
    request = None if step.request is None else json.dumps(step.request, allow_nan=False)
    return {"run_id": step.run_id, "key": step.key, "kind": step.kind,
            "version": step.version, "digest": step.digest, "result": result,
            "request": request}


def row_to_run(row: tuple[Any, ...]) -> RunRecord:
    """A row of :data:`RUN_COLUMNS` as a :class:`RunRecord` (format version checked)."""
    (run_id, agent, user_id, status, input_, result, error, stop_reason, owner,
     lease_expires_at, version, created_at, updated_at) = row
    return check_run_version(RunRecord(
        run_id, agent, user_id, status, json.loads(input_),
        None if result is None else json.loads(result), error, stop_reason, owner,
        from_epoch(lease_expires_at), version, from_epoch(created_at),
        from_epoch(updated_at)))


def run_row(record: RunRecord) -> dict[str, Any]:
    """The parameters of :data:`CREATE_RUN` for ``record``, but ``:now``."""
    lease = record.lease_expires_at
    return {"run_id": record.run_id, "agent": record.agent, "user_id": record.user_id,
            "status": record.status, "input": json.dumps(record.input, allow_nan=False),
            "owner": record.owner, "lease_expires_at": None if lease is None
            else lease.timestamp(), "version": record.version}


# -- fragments -------------------------------------------------------------------
# a task ``t`` that may be claimed now: waiting, due, every dependency COMPLETED and none
# of its locks held
_READY = """
    t.status IN ('pending', 'failed')
    AND (t.not_before IS NULL OR t.not_before <= :now)
    AND NOT EXISTS (SELECT 1 FROM task_deps d JOIN tasks p ON p.id = d.dep_id
                    WHERE d.task_id = t.id AND p.status != 'completed')
    AND NOT EXISTS (SELECT 1 FROM task_locks l JOIN held_locks h ON h.lock = l.lock
                    WHERE l.task_id = t.id)
"""
_UNFINISHED_STATUSES = ("pending", "assigned", "running", "failed")
_UNFINISHED = "status IN ('pending', 'assigned', 'running', 'failed')"


def _marks(count: int) -> str:
    """``count`` positional placeholders: ``?,?,?``."""
    return ",".join("?" * count)


def where_equal(**equal: Any) -> tuple[str, dict[str, Any]]:
    """A ``WHERE`` clause of the equalities whose value is not None, and its parameters.
    Written out, not as ``(:x IS NULL OR x = :x)``, which no index can serve. The
    keywords are column names (the caller's code), the values only parameters."""
    given = {column: value for column, value in equal.items() if value is not None}
    if not given:
        return "", {}
    return " WHERE " + " AND ".join(f"{c} = :{c}" for c in given), given


# -- connection and schema version -------------------------------------------------
GET_USER_VERSION = "PRAGMA user_version"
# any object at all: a file with none is new (its pragmas may still be chosen)
HAS_ANY_OBJECT = "SELECT 1 FROM sqlite_master LIMIT 1"
# the tables of the file, to tell foreperson's database from another application's
LIST_TABLES = "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
# space freed by prune() can be given back in small steps (new files only)
SET_AUTO_VACUUM_INCREMENTAL = "PRAGMA auto_vacuum = INCREMENTAL"
SET_JOURNAL_WAL = "PRAGMA journal_mode=WAL"
# a pragma takes no parameters: one statement per mode the store accepts
SET_SYNCHRONOUS = {mode: f"PRAGMA synchronous={mode}"
                   for mode in ("FULL", "NORMAL", "EXTRA", "OFF")}
SET_FOREIGN_KEYS_OFF = "PRAGMA foreign_keys=OFF"


def set_user_version(version: int) -> str:
    """The statement that records schema ``version`` (a pragma takes no parameters:
    the number is an int the migrations count, written as one)."""
    return f"PRAGMA user_version = {int(version)}"


# -- transactions ------------------------------------------------------------------
BEGIN_IMMEDIATE = "BEGIN IMMEDIATE"
COMMIT = "COMMIT"
ROLLBACK = "ROLLBACK"
SAVEPOINT = "SAVEPOINT op"
ROLLBACK_TO_SAVEPOINT = "ROLLBACK TO op"
RELEASE_SAVEPOINT = "RELEASE op"
# the second the aggregates' triggers file this transaction's changes under
SET_CLOCK = "UPDATE clock SET at = ?"

# -- adding tasks ------------------------------------------------------------------
INSERT_TASK = f"""
        INSERT INTO tasks ({TASK_COLUMNS}) VALUES
        (:id, :kind, :payload, 'pending', NULL, 0, :max_attempts, NULL, NULL, NULL, :depends_on,
         :locks, :created_at, NULL, NULL, :not_before, :estimate_s, '[]', NULL, :run_id,
         :parent_id, NULL, :stale_after, NULL, :awaited, :trace_context)"""
INSERT_TASK_DEP = "INSERT INTO task_deps (task_id, dep_id) VALUES (?, ?)"
INSERT_TASK_LOCK = "INSERT INTO task_locks (task_id, lock) VALUES (?, ?)"
# the history's count of unfinished grows by the tasks added (one row per batch)
COUNT_ADDED = ("INSERT INTO task_history (at, status, n) VALUES "
               "((SELECT at FROM clock), 'unfinished', ?) ON CONFLICT (at, status) "
               "DO UPDATE SET n = n + excluded.n")


def stored_or_pruned(count: int) -> str:
    """The stored tasks among ``count`` ids (rows ``0, <task columns>``) and the
    tombstones among them (rows ``1, id, pruned_at, NULL…``): the ids are bound twice."""
    marks = _marks(count)
    return (f"SELECT 0, {TASK_COLUMNS} FROM tasks WHERE id IN ({marks}) UNION ALL "
            f"SELECT 1, id, pruned_at, {', '.join(['NULL'] * 24)} "
            f"FROM pruned_tasks WHERE id IN ({marks})")


# -- reading tasks -----------------------------------------------------------------
GET_TASK = f"SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?"


def list_tasks(where: str, newest_first: bool) -> str:
    """Tasks matching ``where`` (from :func:`where_equal`) in insertion order, or
    newest first; parameters ``:limit`` (-1: all) and ``:offset``."""
    order = "DESC" if newest_first else ""
    return (f"SELECT {TASK_COLUMNS} FROM tasks{where} ORDER BY seq {order} "
            "LIMIT :limit OFFSET :offset")


def ready_tasks(kinds: int, columns: str = TASK_COLUMNS) -> str:
    """The first ``:limit`` ready tasks of ``kinds`` kinds (parameters ``:k0`` …,
    ``:now``, ``:limit``) in insertion order."""
    marks = ",".join(f":k{i}" for i in range(kinds))
    return (f"SELECT {columns} FROM tasks t WHERE t.kind IN ({marks}) AND {_READY} "
            "ORDER BY t.seq LIMIT :limit")


def finished_among(count: int) -> str:
    """The COMPLETED and DEAD tasks among ``count`` ids."""
    return (f"SELECT {TASK_COLUMNS} FROM tasks WHERE id IN ({_marks(count)}) "
            "AND status IN ('completed', 'dead')")


DEPENDENTS = ("SELECT t.id FROM task_deps d JOIN tasks t ON t.id = d.task_id "
              "WHERE d.dep_id = ? ORDER BY t.seq")

# -- leases ------------------------------------------------------------------------
# A lease runs out on the host's boot clock (:boot, :mono: see SystemClock.lease_time),
# kept beside the wall-clock deadline that status and the page show. A lease taken in
# this boot is judged by the boot clock only, so a process whose wall clock is wrong
# cannot take a live lease; one from another boot (or a store whose clock has no boot
# clock: :boot is NULL) by the wall clock, as before.


def expired(table: str = "") -> str:
    """The SQL condition "this lease has run out", for ``table`` (``"t."`` or ``""``);
    parameters ``:now``, ``:boot`` and ``:mono``."""
    return (f"(CASE WHEN :boot IS NOT NULL AND {table}lease_boot = :boot "
            f"THEN {table}lease_mono < :mono ELSE {table}lease_expires_at < :now END)")


# one ready task, claimed for :worker (RUNNING when :status says so, else ASSIGNED)
TAKE_ONE = f"""
        UPDATE tasks AS t SET status = :status, assigned_to = :worker,
            attempts = attempts + (:status = 'running'), heartbeat_at = :now,
            lease_token = :token,
            lease_s = coalesce(t.stale_after, :lease), lease_expires_at =
                :now + coalesce(t.stale_after, :lease),
            lease_boot = :boot, lease_mono = :mono + coalesce(t.stale_after, :lease),
            started_at = CASE WHEN :status = 'running' THEN :now ELSE started_at END
        WHERE t.id = :id AND {_READY} RETURNING {TASK_COLUMNS}"""
HOLD_LOCK = "INSERT INTO held_locks (lock, task_id) VALUES (?, ?)"
_READY_AT_1 = _READY.replace(":now", "?1")


def take_many(count: int) -> str:
    """Claim ``count`` ready tasks that need no lock, in one statement. Parameters:
    ``?1`` now, ``?2`` the lease, ``?3`` the boot id and ``?4`` the boot clock, then per
    claim its id, worker, token and whether it starts RUNNING (1) or ASSIGNED (0)."""
    values = ",".join(f"(?{4 * k + 5}, ?{4 * k + 6}, ?{4 * k + 7}, ?{4 * k + 8})"
                      for k in range(count))
    return (f"WITH claims(id, worker, token, start) AS (VALUES {values}) "
            "UPDATE tasks AS t SET "
            "status = CASE WHEN c.start THEN 'running' ELSE 'assigned' END, "
            "attempts = t.attempts + c.start, heartbeat_at = ?1, "
            "lease_s = coalesce(t.stale_after, ?2), "
            "lease_expires_at = ?1 + coalesce(t.stale_after, ?2), "
            "lease_boot = ?3, lease_mono = ?4 + coalesce(t.stale_after, ?2), "
            "assigned_to = c.worker, lease_token = c.token, "
            "started_at = CASE WHEN c.start THEN ?1 ELSE t.started_at END "
            f"FROM claims c WHERE t.id = c.id AND t.locks = '[]' AND {_READY_AT_1} "
            f"RETURNING {TASK_COLUMNS}")


START = """
        UPDATE tasks SET status = 'running', started_at = :now, heartbeat_at = :now,
            attempts = attempts + (status = 'assigned'), lease_expires_at = :now + lease_s,
            lease_boot = :boot, lease_mono = :mono + lease_s
        WHERE id = :id AND lease_token = :token"""


def start_many(count: int) -> str:
    """Start ``count`` leases: parameters the (id, token) pairs, then now three times,
    the boot id and the boot clock."""
    values = ",".join("(?, ?)" for _ in range(count))
    return (f"WITH l(id, token) AS (VALUES {values}) "
            "UPDATE tasks SET status = 'running', started_at = ?, heartbeat_at = ?, "
            "attempts = attempts + (status = 'assigned'), "
            "lease_expires_at = ? + lease_s, lease_boot = ?, lease_mono = ? + lease_s "
            "WHERE (id, lease_token) IN (SELECT id, token FROM l) RETURNING id")


HEARTBEAT = """
        UPDATE tasks SET heartbeat_at = :now, lease_expires_at = :now + lease_s,
            lease_boot = :boot, lease_mono = :mono + lease_s
        WHERE id = :id AND lease_token = :token"""
# one lease's completion (complete() goes through complete_many() instead)
COMPLETE = """
        UPDATE tasks SET status = 'completed', result = :result, error = NULL, reason = NULL,
            finished_at = :now, lease_token = NULL, lease_expires_at = NULL,
            attempts = attempts + (status = 'assigned')
        WHERE id = :id AND lease_token = :token RETURNING locks"""


def complete_many(count: int) -> str:
    """Complete ``count`` leases: parameters the (id, token, result JSON) triples, then
    now; returns the id and locks of each completed."""
    values = ",".join("(?, ?, ?)" for _ in range(count))
    return (f"WITH l(id, token, result) AS (VALUES {values}) "
            "UPDATE tasks SET status = 'completed', error = NULL, reason = NULL, "
            "finished_at = ?, lease_token = NULL, lease_expires_at = NULL, "
            "attempts = attempts + (status = 'assigned'), "
            "result = (SELECT l.result FROM l WHERE l.id = tasks.id) "
            "WHERE (id, lease_token) IN (SELECT id, token FROM l) RETURNING id, locks")


# a failed attempt: FAILED until :retry_at, or DEAD when there is none (the reason says
# why); the error is appended to the task's ``errors`` with the worker that hit it
FAIL = """
        UPDATE tasks SET
            attempts = attempts + (status = 'assigned'),
            status = CASE WHEN :retry_at IS NULL THEN 'dead' ELSE 'failed' END,
            reason = CASE WHEN :retry_at IS NOT NULL THEN 'retrying'
                          WHEN attempts + (status = 'assigned') >= max_attempts
                          THEN 'retries_exhausted' ELSE 'not_retryable' END,
            error = :error,
            errors = json_insert(errors, '$[#]', json_object(
                'attempt', attempts + (status = 'assigned'), 'error', :error, 'at', :at,
                'worker', assigned_to)),
            not_before = :retry_at,
            finished_at = CASE WHEN :retry_at IS NULL THEN :now END,
            lease_token = NULL, assigned_to = NULL, lease_expires_at = NULL
        WHERE id = :id AND lease_token = :token RETURNING status"""
# a lease given back unused: PENDING again, a RUNNING attempt not counted
RELEASE = """
        UPDATE tasks SET status = 'pending', reason = :reason,
            attempts = MAX(0, attempts - (status = 'running')),
            lease_token = NULL, assigned_to = NULL, lease_expires_at = NULL
        WHERE id = :id AND lease_token = :token"""
FREE_LOCKS = "DELETE FROM held_locks WHERE task_id = :id"
# every lease expired (or held by a worker named :prefix…): PENDING again, or DEAD when a
# RUNNING attempt was the last; a RUNNING one records why it stopped
RECLAIM_STALE = f"""
        UPDATE tasks SET
            errors = CASE WHEN status = 'running' THEN json_insert(errors, '$[#]', json_object(
                'attempt', attempts, 'error', 'worker ' || coalesce(assigned_to, '?') ||
                ' stopped heartbeating: its lease of ' || printf('%g', lease_s) ||
                ' s expired during attempt ' || attempts, 'at', :at,
                'worker', assigned_to)) ELSE errors END,
            error = CASE WHEN status = 'running' THEN 'worker ' || coalesce(assigned_to, '?') ||
                ' stopped heartbeating: its lease of ' || printf('%g', lease_s) ||
                ' s expired during attempt ' || attempts ELSE error END,
            finished_at = CASE WHEN status = 'running' AND attempts >= max_attempts
                               THEN :now END,
            reason = CASE WHEN status = 'running' AND attempts >= max_attempts
                          THEN 'retries_exhausted' ELSE 'lease_expired' END,
            status = CASE WHEN status = 'running' AND attempts >= max_attempts
                          THEN 'dead' ELSE 'pending' END,
            lease_token = NULL, assigned_to = NULL, lease_expires_at = NULL
        WHERE status IN ('assigned', 'running')
          AND ({expired()}
               OR (:prefix IS NOT NULL AND substr(assigned_to, 1, length(:prefix)) = :prefix))
        RETURNING id, seq"""

# -- dead tasks --------------------------------------------------------------------
# every waiting task with a dependency that is DEAD (the waiting are the tasks_status
# index's PENDING and FAILED entries: the work at hand, never the history)
PARK_BLOCKED = """
        UPDATE tasks SET status = 'dead', finished_at = :now, reason = 'dependency_dead',
            error = 'dependency ' || (SELECT d.dep_id FROM task_deps d JOIN tasks p
                                      ON p.id = d.dep_id WHERE d.task_id = tasks.id
                                      AND p.status = 'dead' ORDER BY d.dep_id LIMIT 1)
                    || ' is dead'
        WHERE status IN ('pending', 'failed') AND depends_on != '[]' AND EXISTS (
            SELECT 1 FROM task_deps d JOIN tasks p ON p.id = d.dep_id
            WHERE d.task_id = tasks.id AND p.status = 'dead')
        RETURNING id"""
# the waiting direct dependents of one DEAD task
PARK_DEPENDENTS = """
        UPDATE tasks SET status = 'dead', finished_at = :now, reason = 'dependency_dead',
            error = 'dependency ' || :id || ' is dead'
        WHERE status IN ('pending', 'failed')
          AND id IN (SELECT task_id FROM task_deps WHERE dep_id = :id)
          AND EXISTS (SELECT 1 FROM tasks p WHERE p.id = :id AND p.status = 'dead')
        RETURNING id"""
# the direct dependents of :id parked because it was DEAD
PARKED_DEPENDENTS = """
        SELECT t.id FROM task_deps d JOIN tasks t ON t.id = d.task_id
        WHERE d.dep_id = :id AND t.status = 'dead' AND t.reason = 'dependency_dead'"""
REVIVE = """
        UPDATE tasks SET status = 'pending', reason = 'revived', attempts = 0,
            not_before = NULL, finished_at = NULL WHERE id = :id AND status = 'dead'"""
DEAD_IDS = "SELECT id FROM tasks WHERE status = 'dead' ORDER BY seq"
PENDING_IDS = "SELECT id FROM tasks WHERE status = 'pending' ORDER BY seq"

# -- side effects ------------------------------------------------------------------
HOLDS_LEASE = "SELECT 1 FROM tasks WHERE id = :id AND lease_token = :token"
GET_EFFECT = "SELECT lease_token, state FROM effects WHERE key = :key"
# claim or settle an effect: the latest lease's word replaces an earlier one
PUT_EFFECT = """
        INSERT INTO effects (key, task_id, created_at, lease_token, state)
        VALUES (:key, :id, :now, :token, :state)
        ON CONFLICT (key) DO UPDATE SET lease_token = excluded.lease_token,
            state = excluded.state, created_at = excluded.created_at"""

# -- counts (from the aggregates where finished, on indexes where not) ---------------
# mean run time per kind of the COMPLETED tasks that have one
MEAN_DURATIONS = ("SELECT kind, run_s / run_n FROM task_counts "
                  "WHERE status = 'completed' AND run_n > 0")
FINISHED_BY_STATUS = "SELECT status, sum(n) FROM task_counts GROUP BY status"
UNFINISHED_BY_STATUS = (f"SELECT status, count(*) FROM tasks WHERE {_UNFINISHED} "
                        "GROUP BY status")
RUN_BY_STATUS = ("SELECT status, count(*) FROM tasks WHERE run_id = ? "
                 "GROUP BY status")
_ACTIVE = ("SELECT assigned_to, count(*) FROM tasks WHERE status IN ('assigned', 'running') "
           "AND assigned_to IS NOT NULL{scope} GROUP BY assigned_to")
ACTIVE_BY_WORKER = _ACTIVE.format(scope="")
ACTIVE_BY_WORKER_IN_RUN = _ACTIVE.format(scope=" AND run_id = :run")
# the oldest unfinished: the first added of each unfinished status (an index step each:
# the tasks_status index is ordered by insertion within a status)
_OLDEST = " UNION ALL ".join(
    f"SELECT * FROM (SELECT created_at FROM tasks WHERE status = '{s}'{{scope}} "
    "ORDER BY seq LIMIT 1)" for s in _UNFINISHED_STATUSES)
OLDEST_UNFINISHED = _OLDEST.format(scope="")
OLDEST_UNFINISHED_IN_RUN = _OLDEST.format(scope=" AND run_id = :run")
FINISHED_BY_KIND = "SELECT kind, status, n FROM task_counts WHERE n != 0"
UNFINISHED_BY_KIND = (f"SELECT kind, status, count(*) FROM tasks WHERE {_UNFINISHED} "
                      "GROUP BY kind, status")
RUN_BY_KIND = ("SELECT kind, status, count(*) FROM tasks WHERE run_id = ? "
               "GROUP BY kind, status")

# -- history -----------------------------------------------------------------------
LAST_CHANGE_AT = "SELECT max(at) FROM task_history"
CHANGES_SINCE = "SELECT at, status, n FROM task_history WHERE at >= ? AND n != 0"
RUN_TASK_TIMES = "SELECT status, created_at, finished_at FROM tasks WHERE run_id = ?"

# -- workers -----------------------------------------------------------------------
WORKER_SEEN = """
        INSERT INTO workers (name, kinds, concurrency, host, pid, started_at, heartbeat_at)
        VALUES (:name, :kinds, :concurrency, :host, :pid, :now, :now)
        ON CONFLICT (name) DO UPDATE SET heartbeat_at = excluded.heartbeat_at,
            kinds = excluded.kinds, concurrency = excluded.concurrency,
            host = excluded.host, pid = excluded.pid"""
WORKER_GONE = "DELETE FROM workers WHERE name = :name"
WORKER_HEARTBEATS = "SELECT name, heartbeat_at FROM workers"
LIST_WORKERS = ("SELECT name, kinds, concurrency, host, pid, started_at, heartbeat_at "
                "FROM workers ORDER BY name")
WORKER_TOTALS = "SELECT name, completed, failed, last_at FROM worker_counts"
WORKER_TOTALS_SINCE = f"{WORKER_TOTALS} WHERE last_at >= ?"


def worker_totals_of(count: int) -> str:
    """The totals of ``count`` named workers."""
    return f"{WORKER_TOTALS} WHERE name IN ({_marks(count)})"


# -- the step journal ----------------------------------------------------------------
GET_STEP = """
        SELECT run_id, key, kind, digest, result, version, created_at, seq, request FROM steps
        WHERE run_id = :run_id AND key = :key"""
# first write wins: nothing returned when the step was there already
PUT_STEP = """
        INSERT INTO steps (run_id, key, kind, version, digest, result, created_at, request)
        VALUES (:run_id, :key, :kind, :version, :digest, :result, :now, :request)
        ON CONFLICT (run_id, key) DO NOTHING
        RETURNING run_id, key, kind, digest, result, version, created_at, seq, request"""
HAS_STEPS = "SELECT 1 FROM steps WHERE run_id = :run_id LIMIT 1"

LIST_STEPS = """
        SELECT run_id, key, kind, digest, result, version, created_at, seq, request FROM steps
        WHERE run_id = :run_id ORDER BY seq"""

# -- durable runs --------------------------------------------------------------------
CREATE_RUN = """
        INSERT INTO runs (run_id, agent, user_id, status, input, result, error, stop_reason,
                          owner, lease_expires_at, lease_boot, lease_mono, version,
                          created_at, updated_at)
        VALUES (:run_id, :agent, :user_id, :status, :input, NULL, NULL, NULL, :owner,
                :lease_expires_at, :boot, :mono + (:lease_expires_at - :now), :version,
                :now, :now)
        ON CONFLICT (run_id) DO NOTHING"""
GET_RUN = f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = :run_id"


def list_runs(where: str) -> str:
    """Runs matching ``where`` (from :func:`where_equal`), newest first, ``:limit``."""
    return (f"SELECT {RUN_COLUMNS} FROM runs{where} ORDER BY created_at DESC, rowid DESC "
            "LIMIT :limit")


# the run for :owner when free, already its, held by :take_from, or its lease expired
CLAIM_RUN = f"""
        UPDATE runs SET owner = :owner, status = 'running', updated_at = :now,
            lease_expires_at = :now + :lease, lease_boot = :boot, lease_mono = :mono + :lease
        WHERE run_id = :run_id AND (owner IS NULL OR owner = :owner OR owner = :take_from
                                    OR lease_expires_at IS NULL OR {expired()})
        RETURNING {RUN_COLUMNS}"""
RENEW_RUN = """
        UPDATE runs SET lease_expires_at = :now + :lease, lease_boot = :boot,
            lease_mono = :mono + :lease
        WHERE run_id = :run_id AND owner = :owner"""
END_RUN = """
        UPDATE runs SET status = :status, result = :result, error = :error,
            stop_reason = :stop_reason, owner = NULL, lease_expires_at = NULL,
            updated_at = :now
        WHERE run_id = :run_id AND owner = :owner"""
