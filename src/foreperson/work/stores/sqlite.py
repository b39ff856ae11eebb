"""SQLite task store: the embedded default.

One file, WAL journal, one ``tasks`` table whose columns are the fields of
:class:`~foreperson.work.task.Task` (times as epoch seconds, lists and objects as JSON
text). A claim is one ``BEGIN IMMEDIATE`` transaction, so several processes may share
the file. Restarting on the same file finds every unfinished task.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import uuid
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ...errors import ConfigurationError, StoreError
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
from ..policy import EFFECT_CLAIMED, EFFECT_DONE, Reason
from ..store import (
    ReadyTask,
    StoreStats,
    WorkerRecord,
    WorkerTotals,
    pruned_readd,
    validate_new_tasks,
)
from ..task import Clock, Status, SystemClock, Task, from_epoch, to_epoch
from ._sqlite_prune import SqlitePruning
from ._sqlite_schema import MIGRATIONS, statements

__all__ = ["MIGRATIONS", "SqliteStore"]

_COLUMNS = ("id, kind, payload, status, assigned_to, attempts, max_attempts, result, error, "
            "heartbeat_at, depends_on, locks, created_at, started_at, finished_at, not_before, "
            "estimate_s, errors, lease_token, run_id, parent_id, reason, stale_after, "
            "lease_expires_at, awaited, trace_context")

_RUN_COLUMNS = ("run_id, agent, user_id, status, input, result, error, stop_reason, owner, "
                "lease_expires_at, version, created_at, updated_at")

_READY = """
    t.status IN ('pending', 'failed')
    AND (t.not_before IS NULL OR t.not_before <= :now)
    AND NOT EXISTS (SELECT 1 FROM task_deps d JOIN tasks p ON p.id = d.dep_id
                    WHERE d.task_id = t.id AND p.status != 'completed')
    AND NOT EXISTS (SELECT 1 FROM task_locks l JOIN held_locks h ON h.lock = l.lock
                    WHERE l.task_id = t.id)
"""

# Named queries. Parameters are named (:now, :id …) unless a query builds a VALUES list.
Q = {
    "insert": f"""
        INSERT INTO tasks ({_COLUMNS}) VALUES
        (:id, :kind, :payload, 'pending', NULL, 0, :max_attempts, NULL, NULL, NULL, :depends_on,
         :locks, :created_at, NULL, NULL, :not_before, :estimate_s, '[]', NULL, :run_id,
         :parent_id, NULL, :stale_after, NULL, :awaited, :trace_context)""",
    "take_one": f"""
        UPDATE tasks AS t SET status = :status, assigned_to = :worker,
            attempts = attempts + (:status = 'running'), heartbeat_at = :now,
            lease_token = :token,
            lease_s = coalesce(t.stale_after, :lease), lease_expires_at =
                :now + coalesce(t.stale_after, :lease),
            started_at = CASE WHEN :status = 'running' THEN :now ELSE started_at END
        WHERE t.id = :id AND {_READY} RETURNING {_COLUMNS}""",
    "start": """
        UPDATE tasks SET status = 'running', started_at = :now, heartbeat_at = :now,
            attempts = attempts + (status = 'assigned'), lease_expires_at = :now + lease_s
        WHERE id = :id AND lease_token = :token""",
    "heartbeat": """
        UPDATE tasks SET heartbeat_at = :now, lease_expires_at = :now + lease_s
        WHERE id = :id AND lease_token = :token""",
    "complete": """
        UPDATE tasks SET status = 'completed', result = :result, error = NULL, reason = NULL,
            finished_at = :now, lease_token = NULL, lease_expires_at = NULL,
            attempts = attempts + (status = 'assigned')
        WHERE id = :id AND lease_token = :token RETURNING locks""",
    "fail": """
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
        WHERE id = :id AND lease_token = :token RETURNING status""",
    "release": """
        UPDATE tasks SET status = 'pending', reason = :reason,
            attempts = MAX(0, attempts - (status = 'running')),
            lease_token = NULL, assigned_to = NULL, lease_expires_at = NULL
        WHERE id = :id AND lease_token = :token""",
    "free_locks": "DELETE FROM held_locks WHERE task_id = :id",
    "reclaim": """
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
          AND (lease_expires_at < :now
               OR (:prefix IS NOT NULL AND substr(assigned_to, 1, length(:prefix)) = :prefix))
        RETURNING id, seq""",
    # every waiting task with a dependency that is DEAD (the waiting are the tasks_status
    # index's PENDING and FAILED entries: the work at hand, never the history)
    "park": """
        UPDATE tasks SET status = 'dead', finished_at = :now, reason = 'dependency_dead',
            error = 'dependency ' || (SELECT d.dep_id FROM task_deps d JOIN tasks p
                                      ON p.id = d.dep_id WHERE d.task_id = tasks.id
                                      AND p.status = 'dead' ORDER BY d.dep_id LIMIT 1)
                    || ' is dead'
        WHERE status IN ('pending', 'failed') AND depends_on != '[]' AND EXISTS (
            SELECT 1 FROM task_deps d JOIN tasks p ON p.id = d.dep_id
            WHERE d.task_id = tasks.id AND p.status = 'dead')
        RETURNING id""",
    # the waiting direct dependents of one DEAD task
    "park_after": """
        UPDATE tasks SET status = 'dead', finished_at = :now, reason = 'dependency_dead',
            error = 'dependency ' || :id || ' is dead'
        WHERE status IN ('pending', 'failed')
          AND id IN (SELECT task_id FROM task_deps WHERE dep_id = :id)
          AND EXISTS (SELECT 1 FROM tasks p WHERE p.id = :id AND p.status = 'dead')
        RETURNING id""",
    "parked_dependents": """
        SELECT t.id FROM task_deps d JOIN tasks t ON t.id = d.task_id
        WHERE d.dep_id = :id AND t.status = 'dead' AND t.reason = 'dependency_dead'""",
    "revive": """
        UPDATE tasks SET status = 'pending', reason = 'revived', attempts = 0,
            not_before = NULL, finished_at = NULL WHERE id = :id AND status = 'dead'""",
    "holds": "SELECT 1 FROM tasks WHERE id = :id AND lease_token = :token",
    "effect": "SELECT lease_token, state FROM effects WHERE key = :key",
    "effect_claim": """
        INSERT INTO effects (key, task_id, created_at, lease_token, state)
        VALUES (:key, :id, :now, :token, :state)
        ON CONFLICT (key) DO UPDATE SET lease_token = excluded.lease_token,
            state = excluded.state, created_at = excluded.created_at""",
    "step_get": """
        SELECT run_id, key, kind, digest, result, version, created_at, seq, request FROM steps
        WHERE run_id = :run_id AND key = :key""",
    "step_put": """
        INSERT INTO steps (run_id, key, kind, version, digest, result, created_at, request)
        VALUES (:run_id, :key, :kind, :version, :digest, :result, :now, :request)
        ON CONFLICT (run_id, key) DO NOTHING
        RETURNING run_id, key, kind, digest, result, version, created_at, seq, request""",
    "step_list": """
        SELECT run_id, key, kind, digest, result, version, created_at, seq, request FROM steps
        WHERE run_id = :run_id ORDER BY seq""",
    "run_create": """
        INSERT INTO runs (run_id, agent, user_id, status, input, result, error, stop_reason,
                          owner, lease_expires_at, version, created_at, updated_at)
        VALUES (:run_id, :agent, :user_id, :status, :input, NULL, NULL, NULL, :owner,
                :lease_expires_at, :version, :now, :now)
        ON CONFLICT (run_id) DO NOTHING""",
    "worker_seen": """
        INSERT INTO workers (name, kinds, concurrency, host, pid, started_at, heartbeat_at)
        VALUES (:name, :kinds, :concurrency, :host, :pid, :now, :now)
        ON CONFLICT (name) DO UPDATE SET heartbeat_at = excluded.heartbeat_at,
            kinds = excluded.kinds, concurrency = excluded.concurrency,
            host = excluded.host, pid = excluded.pid""",
    "worker_gone": "DELETE FROM workers WHERE name = :name",
    "run_get": f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id = :run_id",
    "run_claim": f"""
        UPDATE runs SET owner = :owner, status = 'running', updated_at = :now,
            lease_expires_at = :now + :lease
        WHERE run_id = :run_id AND (owner IS NULL OR owner = :owner OR owner = :take_from
                                    OR lease_expires_at IS NULL OR lease_expires_at < :now)
        RETURNING {_RUN_COLUMNS}""",
    "run_renew": """
        UPDATE runs SET lease_expires_at = :now + :lease
        WHERE run_id = :run_id AND owner = :owner""",
    "run_end": """
        UPDATE runs SET status = :status, result = :result, error = :error,
            stop_reason = :stop_reason, owner = NULL, lease_expires_at = NULL,
            updated_at = :now
        WHERE run_id = :run_id AND owner = :owner""",
}


_UNFINISHED_STATUSES = ("pending", "assigned", "running", "failed")
_UNFINISHED = "status IN ('pending', 'assigned', 'running', 'failed')"


def _filters(**equal: Any) -> tuple[str, dict[str, Any]]:
    """A ``WHERE`` clause of the equalities whose value is not None, and its parameters.
    Written out, not as ``(:x IS NULL OR x = :x)``, which no index can serve."""
    given = {column: value for column, value in equal.items() if value is not None}
    if not given:
        return "", {}
    return " WHERE " + " AND ".join(f"{c} = :{c}" for c in given), given


def _store_error(path: str, exc: sqlite3.Error) -> StoreError:
    """A driver error as a StoreError; a locked or busy database may work next time."""
    return StoreError(f"{path}: {exc}", transient=isinstance(exc, sqlite3.OperationalError))


def _starting(start: bool | int, count: int) -> int:
    """How many of ``count`` claims start at once (``start``: all, none, or a number)."""
    if isinstance(start, bool):
        return count if start else 0
    return max(0, min(int(start), count))


def _iso(epoch: float) -> str:
    when = from_epoch(epoch)
    assert when is not None
    return when.isoformat()


def _list(text: str) -> list[Any]:
    return [] if text == "[]" else json.loads(text)


def _row_to_task(row: sqlite3.Row | tuple[Any, ...]) -> Task:
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


def _row_to_step(row: tuple[Any, ...]) -> Step:
    """A step row as a :class:`Step` (format version not checked)."""
    run_id, key, kind, digest, result, version, created_at, seq, request = row
    return Step(run_id, key, kind, digest, json.loads(result), version, from_epoch(created_at),
                seq, None if request is None else json.loads(request))


def _row_to_run(row: tuple[Any, ...]) -> RunRecord:
    (run_id, agent, user_id, status, input_, result, error, stop_reason, owner,
     lease_expires_at, version, created_at, updated_at) = row
    return check_run_version(RunRecord(
        run_id, agent, user_id, status, json.loads(input_),
        None if result is None else json.loads(result), error, stop_reason, owner,
        from_epoch(lease_expires_at), version, from_epoch(created_at),
        from_epoch(updated_at)))


class SqliteStore(SqlitePruning):
    """A :class:`~foreperson.work.store.TaskStore` in one SQLite file.

    Args:
        path: the database file (created with its schema when missing), or
            ``":memory:"``.
        clock: source of time; the system clock by default.
        synchronous: SQLite's ``synchronous`` pragma: ``"FULL"`` (default: every commit
            is on disk, survives power loss) or ``"NORMAL"`` (survives a killed process,
            not a power cut; faster).
        busy_timeout_s: how long to wait for another process's write lock, seconds.

    Raises:
        StoreError: the file cannot be opened or has a newer schema than this version
            of foreperson knows.
    """

    _task_columns = _COLUMNS
    _step_columns = "run_id, key, kind, digest, result, version, created_at, seq, request"
    _run_columns = _RUN_COLUMNS
    _row_to_task = staticmethod(_row_to_task)
    _row_to_step = staticmethod(_row_to_step)
    _row_to_run = staticmethod(_row_to_run)

    def __init__(self, path: str | Path, *, clock: Clock | None = None,
                 synchronous: str = "FULL", busy_timeout_s: float = 30.0) -> None:
        if synchronous.upper() not in ("FULL", "NORMAL", "EXTRA", "OFF"):
            raise ConfigurationError(
                f"SqliteStore(synchronous={synchronous!r}): choose 'FULL' (every commit on "
                "disk, the default) or 'NORMAL' (survives a killed process, not a power cut)")
        self.path = str(path)
        self.clock = clock or SystemClock()
        self._lock = threading.RLock()
        self._batch_owner: int | None = None
        self._second: int | None = None        # None until the schema has a clock
        try:
            self._conn = sqlite3.connect(self.path, isolation_level=None,
                                         check_same_thread=False,
                                         timeout=busy_timeout_s)
            # the store's clock, for the migrations that backfill the aggregates
            self._conn.create_function("foreperson_now", 0, self.clock.now)
            if self._conn.execute("PRAGMA user_version").fetchone()[0] == 0 and \
                    not self._conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone():
                # a new file: space freed by prune() can be given back in small steps
                self._conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(f"PRAGMA synchronous={synchronous.upper()}")
            self._conn.execute("PRAGMA foreign_keys=OFF")
            self._migrate()
            self._second = -1
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open task database {self.path}: {exc}") from exc
        self._closed = False

    # -- plumbing --------------------------------------------------------------
    def _migrate(self) -> None:
        with self._tx() as db:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > len(MIGRATIONS):
                raise StoreError(
                    f"{self.path} has schema version {version}, newer than this foreperson "
                    f"({len(MIGRATIONS)}): upgrade foreperson")
            for number in range(version, len(MIGRATIONS)):
                for statement in statements(MIGRATIONS[number]):
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {number + 1}")

    @property
    def schema_version(self) -> int:
        """The database's migration number."""
        with self._lock:
            return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Run the store calls made inside (on this thread) in one transaction with one
        commit: group commit, so a supervisor settling many tasks pays one fsync. A call
        that fails inside is rolled back alone (a savepoint); the others still commit."""
        with self._lock:
            if self._batch_owner == threading.get_ident():
                yield
                return
            with self._tx():
                self._batch_owner = threading.get_ident()
                try:
                    yield
                finally:
                    self._batch_owner = None

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        if self._batch_owner == threading.get_ident():
            with self._savepoint() as db:
                yield db
            return
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreError(f"{self.path}: cannot start a transaction: {exc}",
                                 transient=isinstance(exc, sqlite3.OperationalError)) from exc
            second = int(self.clock.now())
            try:
                if second != self._second and self._second is not None:
                    # the second the aggregates' triggers file this transaction's changes
                    # under (written once a second, not once a transaction)
                    self._conn.execute("UPDATE clock SET at = ?", (second,))
                yield self._conn
            except sqlite3.Error as exc:
                self._conn.execute("ROLLBACK")
                raise StoreError(f"{self.path}: {exc}",
                             transient=isinstance(exc, sqlite3.OperationalError)) from exc
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            else:
                try:
                    self._conn.execute("COMMIT")
                except sqlite3.Error as exc:
                    self._conn.execute("ROLLBACK")
                    raise StoreError(f"{self.path}: commit failed: {exc}",
                                     transient=isinstance(exc, sqlite3.OperationalError)) from exc
                if self._second is not None:
                    self._second = second

    @contextmanager
    def _savepoint(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("SAVEPOINT op")
            try:
                yield self._conn
            except sqlite3.Error as exc:
                self._conn.execute("ROLLBACK TO op")
                self._conn.execute("RELEASE op")
                raise StoreError(f"{self.path}: {exc}",
                             transient=isinstance(exc, sqlite3.OperationalError)) from exc
            except BaseException:
                self._conn.execute("ROLLBACK TO op")
                self._conn.execute("RELEASE op")
                raise
            else:
                self._conn.execute("RELEASE op")

    def _read(self, sql: str,
              params: Mapping[str, Any] | Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"{self.path}: {exc}",
                             transient=isinstance(exc, sqlite3.OperationalError)) from exc

    def _write(self, name: str, params: Mapping[str, Any]) -> sqlite3.Cursor:
        """Run the named query ``name`` in a transaction of its own (or the batch's)."""
        with self._tx() as db:
            return db.execute(Q[name], params)

    # -- contract --------------------------------------------------------------
    def add(self, tasks: Sequence[Task]) -> list[str]:
        """See :meth:`TaskStore.add`."""
        tasks = list(tasks)
        with self._tx() as db:
            pruned: dict[str, float] = {}

            def stored(ids: list[str]) -> dict[str, Task]:
                """The stored tasks among ``ids`` (and, in the same statement, their
                tombstones into ``pruned``)."""
                found: dict[str, Task] = {}
                for i in range(0, len(ids), 250):
                    chunk = ids[i:i + 250]
                    marks = ",".join("?" * len(chunk))
                    for row in db.execute(
                            f"SELECT 0, {_COLUMNS} FROM tasks WHERE id IN ({marks}) UNION ALL "
                            f"SELECT 1, id, pruned_at, {', '.join(['NULL'] * 24)} "
                            f"FROM pruned_tasks WHERE id IN ({marks})", chunk * 2):
                        if row[0]:
                            pruned[row[1]] = row[2]
                        else:
                            found[row[1]] = _row_to_task(row[1:])
                return found

            already = stored([t.id for t in tasks])
            gone = [t.id for t in tasks if t.id in pruned and t.id not in already]
            if gone:
                raise pruned_readd(gone[0], pruned[gone[0]])
            validate_new_tasks(tasks, lambda ids: set(stored(ids)), already)
            now = self.clock.now()
            fresh = [t for t in tasks if t.id not in already]
            db.executemany(Q["insert"], [
                {"id": t.id, "kind": t.kind, "payload": json.dumps(t.payload),
                 "max_attempts": t.max_attempts, "depends_on": json.dumps(t.depends_on),
                 "locks": json.dumps(t.locks), "created_at": to_epoch(t.created_at) or now,
                 "not_before": to_epoch(t.not_before), "estimate_s": t.estimate_s,
                 "run_id": t.run_id, "parent_id": t.parent_id, "stale_after": t.stale_after,
                 "awaited": int(t.awaited),
                 "trace_context": None if t.trace_context is None
                 else json.dumps(t.trace_context)} for t in fresh])
            db.executemany("INSERT INTO task_deps (task_id, dep_id) VALUES (?, ?)",
                           [(t.id, d) for t in fresh for d in dict.fromkeys(t.depends_on)])
            db.executemany("INSERT INTO task_locks (task_id, lock) VALUES (?, ?)",
                           [(t.id, lk) for t in fresh for lk in dict.fromkeys(t.locks)])
            if fresh:           # the history's count of unfinished (one row per batch)
                db.execute("INSERT INTO task_history (at, status, n) VALUES "
                           "((SELECT at FROM clock), 'unfinished', ?) ON CONFLICT (at, status) "
                           "DO UPDATE SET n = n + excluded.n", (len(fresh),))
            return [t.id for t in fresh]

    def get(self, task_id: str) -> Task | None:
        """See :meth:`TaskStore.get`."""
        rows = self._read(f"SELECT {_COLUMNS} FROM tasks WHERE id = ?", (task_id,))
        return _row_to_task(rows[0]) if rows else None

    def list_tasks(self, status: Status | None = None, kind: str | None = None,
                   limit: int | None = None, *, run_id: str | None = None,
                   newest_first: bool = False, offset: int = 0) -> list[Task]:
        """See :meth:`TaskStore.list_tasks`."""
        where, params = _filters(status=status and status.value, kind=kind, run_id=run_id)
        order = "DESC" if newest_first else ""
        rows = self._read(f"SELECT {_COLUMNS} FROM tasks{where} ORDER BY seq {order} "
                          "LIMIT :limit OFFSET :offset",
                          {**params, "limit": -1 if limit is None else max(0, limit),
                           "offset": max(0, offset)})
        return [_row_to_task(r) for r in rows]

    def _ready_rows(self, db: sqlite3.Connection, kinds: Collection[str], limit: int,
                    now: float, columns: str = _COLUMNS) -> list[tuple[Any, ...]]:
        kinds = list(kinds)
        if not kinds or limit <= 0:
            return []
        marks = ",".join(f":k{i}" for i in range(len(kinds)))
        params: dict[str, Any] = {f"k{i}": k for i, k in enumerate(kinds)}
        params.update(now=now, limit=limit)
        return db.execute(
            f"SELECT {columns} FROM tasks t WHERE t.kind IN ({marks}) AND {_READY} "
            "ORDER BY t.seq LIMIT :limit", params).fetchall()

    def ready(self, kinds: Collection[str], limit: int) -> list[Task]:
        """See :meth:`TaskStore.ready`."""
        with self._lock:
            try:
                rows = self._ready_rows(self._conn, kinds, limit, self.clock.now())
            except sqlite3.Error as exc:
                raise _store_error(self.path, exc) from exc
        return [_row_to_task(r) for r in rows]

    def ready_brief(self, kinds: Collection[str], limit: int) -> list[ReadyTask]:
        """See :meth:`~foreperson.work.store.ListsReadyBriefly.ready_brief`."""
        with self._lock:
            try:
                rows = self._ready_rows(self._conn, kinds, limit, self.clock.now(),
                                        columns="t.id, t.kind, t.estimate_s")
            except sqlite3.Error as exc:
                raise _store_error(self.path, exc) from exc
        return [ReadyTask(*row) for row in rows]

    def _take(self, db: sqlite3.Connection, task_id: str, worker: str, now: float,
              start: bool, lease_s: float) -> Task | None:
        row = db.execute(Q["take_one"], {
            "status": "running" if start else "assigned", "worker": worker, "now": now,
            "id": task_id, "token": uuid.uuid4().hex, "lease": lease_s}).fetchone()
        if row is None:
            return None
        task = _row_to_task(row)
        if task.locks:
            db.executemany("INSERT INTO held_locks (lock, task_id) VALUES (?, ?)",
                           [(lk, task_id) for lk in dict.fromkeys(task.locks)])
        return task

    def assign(self, pairs: Sequence[tuple[str, str]], *, start: bool | int = False,
               lease_s: float = DEFAULT_LEASE_S) -> list[Task]:
        """See :meth:`TaskStore.assign`."""
        if not pairs:
            return []
        with self._tx() as db:
            return self._take_many(db, pairs, self.clock.now(), _starting(start, len(pairs)),
                                   lease_s)

    def _take_many(self, db: sqlite3.Connection, pairs: Sequence[tuple[str, str]],
                   now: float, starting: int, lease_s: float) -> list[Task]:
        """Claim many tasks, the first ``starting`` of ``pairs`` RUNNING: those without
        locks in one statement, the rest one by one (a lock must be held before the next
        task that shares it is checked)."""
        taken: dict[str, Task] = {}
        ready = _READY.replace(":now", "?1")
        for i in range(0, len(pairs), 250):
            chunk = pairs[i:i + 250]
            values = ",".join(f"(?{4 * k + 3}, ?{4 * k + 4}, ?{4 * k + 5}, ?{4 * k + 6})"
                              for k in range(len(chunk)))
            params: list[Any] = [now, lease_s]
            for n, (task_id, worker) in enumerate(chunk, start=i):
                params += [task_id, worker, uuid.uuid4().hex, int(n < starting)]
            for row in db.execute(
                    f"WITH claims(id, worker, token, start) AS (VALUES {values}) "
                    "UPDATE tasks AS t SET "
                    "status = CASE WHEN c.start THEN 'running' ELSE 'assigned' END, "
                    "attempts = t.attempts + c.start, heartbeat_at = ?1, "
                    "lease_s = coalesce(t.stale_after, ?2), "
                    "lease_expires_at = ?1 + coalesce(t.stale_after, ?2), "
                    "assigned_to = c.worker, lease_token = c.token, "
                    "started_at = CASE WHEN c.start THEN ?1 ELSE t.started_at END "
                    f"FROM claims c WHERE t.id = c.id AND t.locks = '[]' AND {ready} "
                    f"RETURNING {_COLUMNS}",
                    params):
                taken[row[0]] = _row_to_task(row)
        out = []
        for n, (task_id, worker) in enumerate(pairs):
            task = taken.get(task_id) or self._take(db, task_id, worker, now, n < starting,
                                                    lease_s)
            if task is not None:
                out.append(task)
        return out

    def claim(self, worker: str, kinds: Collection[str], limit: int, *,
              start: bool | int = False, lease_s: float = DEFAULT_LEASE_S) -> list[Task]:
        """See :meth:`TaskStore.claim`."""
        if limit <= 0:
            return []
        with self._tx() as db:
            now = self.clock.now()
            rows = self._ready_rows(db, kinds, limit, now)
            return self._take_many(db, [(row[0], worker) for row in rows], now,
                                   _starting(start, len(rows)), lease_s)

    def start(self, task_id: str, token: str) -> bool:
        """See :meth:`TaskStore.start`."""
        cur = self._write("start", {"now": self.clock.now(), "id": task_id, "token": token})
        return cur.rowcount == 1

    def start_many(self, leases: Mapping[str, str]) -> set[str]:
        """See :meth:`TaskStore.start_many`. One statement per 400 leases."""
        if not leases:
            return set()
        with self._tx() as db:
            now = self.clock.now()
            started: set[str] = set()
            items = list(leases.items())
            for i in range(0, len(items), 400):
                chunk = items[i:i + 400]
                values = ",".join("(?, ?)" for _ in chunk)
                rows = db.execute(
                    f"WITH l(id, token) AS (VALUES {values}) "
                    "UPDATE tasks SET status = 'running', started_at = ?, heartbeat_at = ?, "
                    "attempts = attempts + (status = 'assigned'), "
                    "lease_expires_at = ? + lease_s "
                    "WHERE (id, lease_token) IN (SELECT id, token FROM l) RETURNING id",
                    [v for pair in chunk for v in pair] + [now, now, now]).fetchall()
                started.update(r[0] for r in rows)
            return set(leases) - started

    def complete_many(self, items: Sequence[tuple[str, str, Any]]) -> set[str]:
        """See :meth:`TaskStore.complete_many`. One statement per 300 results."""
        encoded = [(task_id, token, json.dumps(result)) for task_id, token, result in items]
        stored: set[str] = set()
        with self._tx() as db:
            now = self.clock.now()
            for i in range(0, len(encoded), 300):
                chunk = encoded[i:i + 300]
                values = ",".join("(?, ?, ?)" for _ in chunk)
                rows = db.execute(
                    f"WITH l(id, token, result) AS (VALUES {values}) "
                    "UPDATE tasks SET status = 'completed', error = NULL, reason = NULL, "
                    "finished_at = ?, lease_token = NULL, lease_expires_at = NULL, "
                    "attempts = attempts + (status = 'assigned'), "
                    "result = (SELECT l.result FROM l WHERE l.id = tasks.id) "
                    "WHERE (id, lease_token) IN (SELECT id, token FROM l) RETURNING id, locks",
                    [v for triple in chunk for v in triple] + [now]).fetchall()
                for task_id, locks in rows:
                    stored.add(task_id)
                    if locks != "[]":
                        db.execute(Q["free_locks"], {"id": task_id})
            return stored

    def heartbeat(self, leases: Mapping[str, str]) -> set[str]:
        """See :meth:`TaskStore.heartbeat`."""
        if not leases:
            return set()
        with self._tx() as db:
            now = self.clock.now()
            return {task_id for task_id, token in leases.items()
                    if db.execute(Q["heartbeat"], {"now": now, "id": task_id,
                                                   "token": token}).rowcount != 1}

    def complete(self, task_id: str, token: str, result: Any) -> bool:
        """See :meth:`TaskStore.complete`."""
        return bool(self.complete_many([(task_id, token, result)]))

    def fail(self, task_id: str, token: str, error: str, *,
             retry_at: float | None) -> Status | None:
        """See :meth:`TaskStore.fail`."""
        with self._tx() as db:
            now = self.clock.now()
            row = db.execute(Q["fail"], {"retry_at": retry_at, "error": error, "now": now,
                                         "at": _iso(now), "id": task_id,
                                         "token": token}).fetchone()
            if row is None:
                return None
            db.execute(Q["free_locks"], {"id": task_id})
            return Status(row[0])

    def release(self, task_id: str, token: str) -> bool:
        """See :meth:`TaskStore.release`."""
        with self._tx() as db:
            cur = db.execute(Q["release"], {"reason": Reason.RELEASED.value, "id": task_id,
                                            "token": token})
            if cur.rowcount != 1:
                return False
            db.execute(Q["free_locks"], {"id": task_id})
            return True

    def reclaim_stale(self, *, holder_prefix: str | None = None) -> list[str]:
        """See :meth:`TaskStore.reclaim_stale`."""
        with self._tx() as db:
            now = self.clock.now()
            rows = db.execute(Q["reclaim"], {"now": now, "at": _iso(now),
                                             "prefix": holder_prefix}).fetchall()
            for task_id, _ in rows:
                db.execute(Q["free_locks"], {"id": task_id})
            return [task_id for task_id, _ in sorted(rows, key=lambda r: r[1])]

    def park_blocked(self, after: Collection[str] | None = None) -> list[str]:
        """See :meth:`TaskStore.park_blocked`."""
        parked: list[str] = []
        with self._tx() as db:
            now = self.clock.now()
            if after is not None:
                frontier = list(after)
                while frontier:
                    found = [r[0] for dead in frontier for r in db.execute(
                        Q["park_after"], {"now": now, "id": dead})]
                    parked.extend(found)
                    frontier = found
                return parked
            while True:
                rows = db.execute(Q["park"], {"now": now}).fetchall()
                if not rows:
                    return parked
                parked.extend(r[0] for r in rows)

    def retry_dead(self, ids: Sequence[str] | None = None) -> list[str]:
        """See :meth:`TaskStore.retry_dead`."""
        with self._tx() as db:
            if ids is None:
                chosen = [r[0] for r in db.execute(
                    "SELECT id FROM tasks WHERE status = 'dead' ORDER BY seq")]
            else:
                chosen = list(dict.fromkeys(ids))
            revived = {i for i in chosen
                       if db.execute(Q["revive"], {"id": i}).rowcount == 1}
            frontier = set(revived)
            while frontier:       # dependents parked because of a revived task
                frontier = {r[0] for dep in frontier
                            for r in db.execute(Q["parked_dependents"], {"id": dep})
                            if r[0] not in revived}
                for child in frontier:
                    db.execute(Q["revive"], {"id": child})
                revived |= frontier
            order = db.execute("SELECT id FROM tasks WHERE status = 'pending' ORDER BY seq")
            return [r[0] for r in order if r[0] in revived]

    def claim_effect(self, key: str, task_id: str, token: str) -> bool:
        """See :meth:`TaskStore.claim_effect`."""
        with self._tx() as db:
            if db.execute(Q["holds"], {"id": task_id, "token": token}).fetchone() is None:
                return False
            earlier = db.execute(Q["effect"], {"key": key}).fetchone()
            if earlier is not None and (earlier[1] == EFFECT_DONE or earlier[0] == token):
                return False
            db.execute(Q["effect_claim"], {"key": key, "id": task_id, "now": self.clock.now(),
                                           "token": token, "state": EFFECT_CLAIMED})
            return True

    def effect_done(self, key: str, task_id: str, token: str) -> bool:
        """See :meth:`TaskStore.effect_done`."""
        with self._tx() as db:
            if db.execute(Q["holds"], {"id": task_id, "token": token}).fetchone() is None:
                return False
            db.execute(Q["effect_claim"], {"key": key, "id": task_id, "now": self.clock.now(),
                                           "token": token, "state": EFFECT_DONE})
            return True

    def finished_among(self, ids: Collection[str]) -> dict[str, Task]:
        """See :meth:`TaskStore.finished_among`."""
        ids = list(ids)
        out: dict[str, Task] = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            marks = ",".join("?" * len(chunk))
            for row in self._read(f"SELECT {_COLUMNS} FROM tasks WHERE id IN ({marks}) "
                                  "AND status IN ('completed', 'dead')", chunk):
                out[row[0]] = _row_to_task(row)
        return out

    def mean_durations(self) -> dict[str, float]:
        """See :meth:`TaskStore.mean_durations`: from the aggregates (``task_counts``)."""
        return dict(self._read("SELECT kind, run_s / run_n FROM task_counts "
                               "WHERE status = 'completed' AND run_n > 0"))

    def stats(self, *, run_id: str | None = None) -> StoreStats:
        """See :meth:`TaskStore.stats`. The whole store's counts come from the aggregates,
        one run's from the ``(run_id, status)`` index; the rest reads unfinished tasks
        only (indexes on the held and the unfinished), never the history."""
        with self._lock:
            now = self.clock.now()
            counts = {s: 0 for s in Status}
            if run_id is None:      # the finished from the aggregates, the rest on an index
                rows = self._read("SELECT status, sum(n) FROM task_counts GROUP BY status")
                rows += self._read(f"SELECT status, count(*) FROM tasks WHERE {_UNFINISHED} "
                                   "GROUP BY status")
            else:
                rows = self._read("SELECT status, count(*) FROM tasks WHERE run_id = ? "
                                  "GROUP BY status", (run_id,))
            for status, n in rows:
                counts[Status(status)] = int(n)
            scope = "" if run_id is None else " AND run_id = :run"
            active = dict(self._read(
                "SELECT assigned_to, count(*) FROM tasks WHERE status IN ('assigned', 'running') "
                f"AND assigned_to IS NOT NULL{scope} GROUP BY assigned_to", {"run": run_id}))
            # the oldest unfinished: the first added of each unfinished status (an index
            # step each: the tasks_status index is ordered by insertion within a status)
            oldest = min((r[0] for r in self._read(" UNION ALL ".join(
                f"SELECT * FROM (SELECT created_at FROM tasks WHERE status = '{s}'{scope} "
                "ORDER BY seq LIMIT 1)" for s in _UNFINISHED_STATUSES), {"run": run_id})),
                default=None)
            workers = {name: from_epoch(seen) for name, seen in
                       self._read("SELECT name, heartbeat_at FROM workers")}
        return StoreStats(counts, active, from_epoch(oldest),
                          from_epoch(now), workers)  # type: ignore[arg-type]

    # -- workers (TracksWorkers) -------------------------------------------------
    def worker_seen(self, name: str, kinds: Collection[str] = (), concurrency: int = 1) -> None:
        """See :meth:`TracksWorkers.worker_seen`."""
        self._write("worker_seen", {"name": name, "kinds": json.dumps(sorted(kinds)),
                                    "concurrency": concurrency, "host": socket.gethostname(),
                                    "pid": os.getpid(), "now": self.clock.now()})

    def worker_gone(self, name: str) -> None:
        """See :meth:`TracksWorkers.worker_gone`."""
        self._write("worker_gone", {"name": name})

    def list_workers(self) -> list[WorkerRecord]:
        """See :meth:`TracksWorkers.list_workers`."""
        return [WorkerRecord(name, tuple(json.loads(kinds)), concurrency, host, pid,
                             from_epoch(started), from_epoch(seen))  # type: ignore[arg-type]
                for name, kinds, concurrency, host, pid, started, seen in self._read(
                    "SELECT name, kinds, concurrency, host, pid, started_at, heartbeat_at "
                    "FROM workers ORDER BY name")]

    # -- observation (ReportsWork) ------------------------------------------------
    def counts_by_kind(self, *, run_id: str | None = None) -> dict[str, dict[Status, int]]:
        """See :meth:`ReportsWork.counts_by_kind`."""
        out: dict[str, dict[Status, int]] = {}
        rows = (self._read("SELECT kind, status, n FROM task_counts WHERE n != 0")
                + self._read(f"SELECT kind, status, count(*) FROM tasks WHERE {_UNFINISHED} "
                             "GROUP BY kind, status")
                if run_id is None else
                self._read("SELECT kind, status, count(*) FROM tasks WHERE run_id = ? "
                           "GROUP BY kind, status", (run_id,)))
        for kind, status, n in rows:
            out.setdefault(kind, dict.fromkeys(Status, 0))[Status(status)] = int(n)
        return out

    def worker_totals(self, names: Collection[str] | None = None, *,
                      since: float | None = None) -> dict[str, WorkerTotals]:
        """See :meth:`ReportsWork.worker_totals`: from the aggregates (``worker_counts``)."""
        columns = "SELECT name, completed, failed, last_at FROM worker_counts"
        if names is not None:
            wanted = sorted(set(names))
            rows = [r for i in range(0, len(wanted), 500) for r in self._read(
                f"{columns} WHERE name IN ({','.join('?' * len(wanted[i:i + 500]))})",
                wanted[i:i + 500])]
        elif since is not None:
            rows = self._read(f"{columns} WHERE last_at >= ?", (since,))
        else:
            rows = self._read(columns)
        return {name: WorkerTotals(int(done), int(failed), from_epoch(at))
                for name, done, failed, at in rows}

    def history(self, *, run_id: str | None = None, points: int = 60,
                since: float | None = None, until: float | None = None) -> list[TimelinePoint]:
        """See :meth:`ReportsWork.history`. The whole store's from ``task_history`` (the
        changes since the window's start only), one run's from its records' timestamps."""
        now = self.clock.now()
        if run_id is not None:
            return self._run_history(run_id, points, since, until, now)
        last = self._read("SELECT max(at) FROM task_history")[0][0]
        end = until if until is not None else default_until(now, last)
        low = max(since if since is not None else end - HISTORY_WINDOW_S, now - HISTORY_KEPT_S)
        changes = [(at, status, n) for at, status, n in self._read(
            "SELECT at, status, n FROM task_history WHERE at >= ? AND n != 0", (int(low),))]
        start, end = history_window(changes, since, end)
        return history_points(self.stats().counts, (c for c in changes if c[0] > start),
                              start, end, points)

    def _run_history(self, run_id: str, points: int, since: float | None,
                     until: float | None, now: float) -> list[TimelinePoint]:
        rows = [(Status(st), from_epoch(c), from_epoch(f)) for st, c, f in self._read(
            "SELECT status, created_at, finished_at FROM tasks WHERE run_id = ?", (run_id,))]
        if not rows:
            return []
        changes = changes_of(rows)
        counts = {s: 0 for s in Status}
        for row in rows:
            counts[row[0]] += 1
        start = since if since is not None else float(min(c[0] for c in changes))
        unfinished = any(not status.finished for status, _, _ in rows)
        end = until if until is not None else (
            now if unfinished else float(max(c[0] for c in changes)))
        return history_points(counts, (c for c in changes if c[0] > start), start,
                              max(start, end), points)

    def dependents(self, task_id: str) -> list[str]:
        """See :meth:`ReportsWork.dependents`."""
        return [r[0] for r in self._read(
            "SELECT t.id FROM task_deps d JOIN tasks t ON t.id = d.task_id "
            "WHERE d.dep_id = ? ORDER BY t.seq", (task_id,))]

    # -- journal ---------------------------------------------------------------
    def get_step(self, run_id: str, key: str) -> Step | None:
        """See :meth:`foreperson.journal.Journal.get_step`."""
        rows = self._read(Q["step_get"], {"run_id": run_id, "key": key})
        return check_version(_row_to_step(rows[0])) if rows else None

    def put_step(self, step: Step) -> Step:
        """See :meth:`foreperson.journal.Journal.put_step`. One transaction; first write
        wins across every process sharing the file."""
        result = json.dumps(step.result, allow_nan=False)
        request = None if step.request is None else json.dumps(step.request, allow_nan=False)
        with self._tx() as db:
            row = db.execute(Q["step_put"], {
                "run_id": step.run_id, "key": step.key, "kind": step.kind,
                "version": step.version, "digest": step.digest, "result": result,
                "now": self.clock.now(), "request": request}).fetchone()
            if row is not None:     # ours: its version is the caller's to know
                return _row_to_step(row)
            row = db.execute(Q["step_get"], {"run_id": step.run_id, "key": step.key}).fetchone()
        return check_version(_row_to_step(row))

    def list_steps(self, run_id: str) -> list[Step]:
        """See :meth:`foreperson.journal.Journal.list_steps`."""
        return [check_version(_row_to_step(r))
                for r in self._read(Q["step_list"], {"run_id": run_id})]

    # -- runs (foreperson.journal.RunLedger) ------------------------------------
    def create_run(self, record: RunRecord) -> RunRecord:
        """See :meth:`foreperson.journal.RunLedger.create_run`."""
        data = json.dumps(record.input, allow_nan=False)
        with self._tx() as db:
            db.execute(Q["run_create"], {
                "run_id": record.run_id, "agent": record.agent, "user_id": record.user_id,
                "status": record.status, "input": data, "owner": record.owner,
                "lease_expires_at": None if record.lease_expires_at is None
                else record.lease_expires_at.timestamp(),
                "version": record.version, "now": self.clock.now()})
            row = db.execute(Q["run_get"], {"run_id": record.run_id}).fetchone()
        return _row_to_run(row)

    def get_run(self, run_id: str) -> RunRecord | None:
        """See :meth:`foreperson.journal.RunLedger.get_run`."""
        rows = self._read(Q["run_get"], {"run_id": run_id})
        return _row_to_run(rows[0]) if rows else None

    def list_runs(self, *, user_id: str | None = None, status: str | None = None,
                  limit: int = 100) -> list[RunRecord]:
        """See :meth:`foreperson.journal.RunLedger.list_runs`."""
        where, params = _filters(user_id=user_id, status=status)
        return [_row_to_run(r) for r in self._read(
            f"SELECT {_RUN_COLUMNS} FROM runs{where} ORDER BY created_at DESC, rowid DESC "
            "LIMIT :limit", {**params, "limit": max(0, limit)})]

    def claim_run(self, run_id: str, owner: str, lease_s: float, *,
                  take_from: str | None = None) -> RunRecord | None:
        """See :meth:`foreperson.journal.RunLedger.claim_run`."""
        with self._tx() as db:
            row = db.execute(Q["run_claim"], {
                "run_id": run_id, "owner": owner, "take_from": take_from,
                "lease": float(lease_s), "now": self.clock.now()}).fetchone()
        return None if row is None else _row_to_run(row)

    def renew_run(self, run_id: str, owner: str, lease_s: float) -> bool:
        """See :meth:`foreperson.journal.RunLedger.renew_run`."""
        return self._write("run_renew", {"run_id": run_id, "owner": owner,
                                         "lease": float(lease_s),
                                         "now": self.clock.now()}).rowcount == 1

    def end_run(self, run_id: str, owner: str, status: str, *, result: Any = None,
                error: str | None = None, stop_reason: str | None = None) -> bool:
        """See :meth:`foreperson.journal.RunLedger.end_run`."""
        data = None if result is None else json.dumps(result, allow_nan=False)
        return self._write("run_end", {
            "run_id": run_id, "owner": owner, "status": status, "result": data,
            "error": error, "stop_reason": stop_reason,
            "now": self.clock.now()}).rowcount == 1

    def close(self) -> None:
        """Close the connection. Idempotent."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()

    def __repr__(self) -> str:
        return f"SqliteStore({self.path!r})"

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
