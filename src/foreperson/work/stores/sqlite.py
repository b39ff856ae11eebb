"""SQLite task store: the embedded default.

One file, WAL journal, one ``tasks`` table whose columns are the fields of
:class:`~foreperson.work.task.Task` (times as epoch seconds, lists and objects as JSON
text). A claim is one ``BEGIN IMMEDIATE`` transaction, so several processes may share
the file. Restarting on the same file finds every unfinished task.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ...errors import ConfigurationError, StoreError
from ..store import StoreStats, validate_new_tasks
from ..task import Clock, Status, SystemClock, Task, from_epoch, to_epoch

__all__ = ["SqliteStore"]

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

_COLUMNS = ("id, kind, payload, status, assigned_to, attempts, max_attempts, result, error, "
            "heartbeat_at, depends_on, locks, created_at, started_at, finished_at, not_before, "
            "estimate_s, errors, lease_token")

_READY = """
    t.status IN ('pending', 'failed')
    AND (t.not_before IS NULL OR t.not_before <= :now)
    AND NOT EXISTS (SELECT 1 FROM task_deps d JOIN tasks p ON p.id = d.dep_id
                    WHERE d.task_id = t.id AND p.status != 'completed')
    AND NOT EXISTS (SELECT 1 FROM task_locks l JOIN held_locks h ON h.lock = l.lock
                    WHERE l.task_id = t.id)
"""

_READY_AT_2 = _READY.replace(":now", "?2")   # the same test, with the time as parameter 2

_FIRST_DEAD_DEP = """(SELECT d.dep_id FROM task_deps d JOIN tasks p ON p.id = d.dep_id
                      WHERE d.task_id = tasks.id AND p.status = 'dead' LIMIT 1)"""


def _list(text: str) -> list[Any]:
    return [] if text == "[]" else json.loads(text)


def _row_to_task(row: sqlite3.Row | tuple) -> Task:
    (id_, kind, payload, status, assigned_to, attempts, max_attempts, result, error,
     heartbeat_at, depends_on, locks, created_at, started_at, finished_at, not_before,
     estimate_s, errors, lease_token) = row
    return Task(
        kind=kind, payload=json.loads(payload), id=id_, status=Status(status),
        assigned_to=assigned_to, attempts=attempts, max_attempts=max_attempts,
        result=None if result is None else json.loads(result), error=error,
        heartbeat_at=from_epoch(heartbeat_at), depends_on=_list(depends_on),
        locks=_list(locks), created_at=from_epoch(created_at),
        started_at=from_epoch(started_at), finished_at=from_epoch(finished_at),
        not_before=from_epoch(not_before), estimate_s=estimate_s,
        errors=_list(errors), lease_token=lease_token,
    )


class SqliteStore:
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
        try:
            self._conn = sqlite3.connect(self.path, isolation_level=None,
                                         check_same_thread=False,
                                         timeout=busy_timeout_s)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(f"PRAGMA synchronous={synchronous.upper()}")
            self._conn.execute("PRAGMA foreign_keys=OFF")
            self._migrate()
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
                for statement in MIGRATIONS[number].split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute(f"PRAGMA user_version = {number + 1}")

    @property
    def schema_version(self) -> int:
        """The database's migration number."""
        with self._lock:
            return self._conn.execute("PRAGMA user_version").fetchone()[0]

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
            try:
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

    def _read(self, sql: str, params: Mapping[str, Any] | Sequence[Any] = ()) -> list[tuple]:
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"{self.path}: {exc}",
                             transient=isinstance(exc, sqlite3.OperationalError)) from exc

    # -- contract --------------------------------------------------------------
    def add(self, tasks: Sequence[Task]) -> list[str]:
        """See :meth:`TaskStore.add`."""
        tasks = list(tasks)
        with self._tx() as db:
            def exists(ids: list[str]) -> set[str]:
                found: set[str] = set()
                for i in range(0, len(ids), 500):
                    chunk = ids[i:i + 500]
                    marks = ",".join("?" * len(chunk))
                    found.update(r[0] for r in db.execute(
                        f"SELECT id FROM tasks WHERE id IN ({marks})", chunk))
                return found

            validate_new_tasks(tasks, exists)
            already = exists([t.id for t in tasks])
            now = self.clock.now()
            fresh = [t for t in tasks if t.id not in already]
            db.executemany(
                f"INSERT INTO tasks ({_COLUMNS}) VALUES "
                "(?, ?, ?, 'pending', NULL, 0, ?, NULL, NULL, NULL, ?, ?, ?, NULL, NULL, ?, ?, "
                "'[]', NULL)",
                [(t.id, t.kind, json.dumps(t.payload), t.max_attempts,
                  json.dumps(t.depends_on), json.dumps(t.locks),
                  to_epoch(t.created_at) or now, to_epoch(t.not_before), t.estimate_s)
                 for t in fresh])
            db.executemany("INSERT INTO task_deps (task_id, dep_id) VALUES (?, ?)",
                           [(t.id, d) for t in fresh for d in dict.fromkeys(t.depends_on)])
            db.executemany("INSERT INTO task_locks (task_id, lock) VALUES (?, ?)",
                           [(t.id, lk) for t in fresh for lk in dict.fromkeys(t.locks)])
            return [t.id for t in fresh]

    def get(self, task_id: str) -> Task | None:
        """See :meth:`TaskStore.get`."""
        rows = self._read(f"SELECT {_COLUMNS} FROM tasks WHERE id = ?", (task_id,))
        return _row_to_task(rows[0]) if rows else None

    def list_tasks(self, status: Status | None = None, kind: str | None = None,
                   limit: int | None = None) -> list[Task]:
        """See :meth:`TaskStore.list_tasks`."""
        rows = self._read(
            f"SELECT {_COLUMNS} FROM tasks WHERE (:status IS NULL OR status = :status) "
            "AND (:kind IS NULL OR kind = :kind) ORDER BY seq LIMIT :limit",
            {"status": status.value if status else None, "kind": kind,
             "limit": -1 if limit is None else limit})
        return [_row_to_task(r) for r in rows]

    def _ready_rows(self, db: sqlite3.Connection, kinds: Collection[str], limit: int,
                    now: float) -> list[tuple]:
        kinds = list(kinds)
        if not kinds or limit <= 0:
            return []
        marks = ",".join(f":k{i}" for i in range(len(kinds)))
        params: dict[str, Any] = {f"k{i}": k for i, k in enumerate(kinds)}
        params.update(now=now, limit=limit)
        return db.execute(
            f"SELECT {_COLUMNS} FROM tasks t WHERE t.kind IN ({marks}) AND {_READY} "
            "ORDER BY t.seq LIMIT :limit", params).fetchall()

    def ready(self, kinds: Collection[str], limit: int) -> list[Task]:
        """See :meth:`TaskStore.ready`."""
        with self._lock:
            try:
                rows = self._ready_rows(self._conn, kinds, limit, self.clock.now())
            except sqlite3.Error as exc:
                raise StoreError(f"{self.path}: {exc}",
                             transient=isinstance(exc, sqlite3.OperationalError)) from exc
        return [_row_to_task(r) for r in rows]

    def _take(self, db: sqlite3.Connection, task_id: str, worker: str, now: float,
              start: bool) -> Task | None:
        status = "running" if start else "assigned"
        row = db.execute(
            f"UPDATE tasks AS t SET status = :status, assigned_to = :worker, "
            "attempts = attempts + 1, heartbeat_at = :now, lease_token = :token, "
            "started_at = CASE WHEN :status = 'running' THEN :now ELSE started_at END "
            f"WHERE t.id = :id AND {_READY} RETURNING {_COLUMNS}",
            {"status": status, "worker": worker, "now": now, "id": task_id,
             "token": uuid.uuid4().hex}).fetchone()
        if row is None:
            return None
        task = _row_to_task(row)
        if task.locks:
            db.executemany("INSERT INTO held_locks (lock, task_id) VALUES (?, ?)",
                           [(lk, task_id) for lk in dict.fromkeys(task.locks)])
        return task

    def assign(self, pairs: Sequence[tuple[str, str]], *, start: bool = False) -> list[Task]:
        """See :meth:`TaskStore.assign`. With ``start=True`` the tasks go straight to
        RUNNING (the worker begins at once, saving one write)."""
        if not pairs:
            return []
        with self._tx() as db:
            return self._take_many(db, pairs, self.clock.now(), start)

    def _take_many(self, db: sqlite3.Connection, pairs: Sequence[tuple[str, str]],
                   now: float, start: bool) -> list[Task]:
        """Claim many tasks: those without locks in one statement, the rest one by one
        (a lock must be held before the next task that shares it is checked)."""
        taken: dict[str, Task] = {}
        for i in range(0, len(pairs), 300):
            chunk = pairs[i:i + 300]
            values = ",".join(f"(?{3 * k + 3}, ?{3 * k + 4}, ?{3 * k + 5})"
                              for k in range(len(chunk)))
            params: list[Any] = ["running" if start else "assigned", now]
            for task_id, worker in chunk:
                params += [task_id, worker, uuid.uuid4().hex]
            for row in db.execute(
                    f"WITH claims(id, worker, token) AS (VALUES {values}) "
                    "UPDATE tasks AS t SET status = ?1, attempts = attempts + 1, "
                    "heartbeat_at = ?2, "
                    "assigned_to = (SELECT c.worker FROM claims c WHERE c.id = t.id), "
                    "lease_token = (SELECT c.token FROM claims c WHERE c.id = t.id), "
                    "started_at = CASE WHEN ?1 = 'running' THEN ?2 ELSE started_at END "
                    f"WHERE t.id IN (SELECT id FROM claims) AND t.locks = '[]' AND {_READY_AT_2} "
                    f"RETURNING {_COLUMNS}", params):
                taken[row[0]] = _row_to_task(row)
        out = []
        for task_id, worker in pairs:
            task = taken.get(task_id) or self._take(db, task_id, worker, now, start)
            if task is not None:
                out.append(task)
        return out

    def claim(self, worker: str, kinds: Collection[str], limit: int, *,
              start: bool = False) -> list[Task]:
        """See :meth:`TaskStore.claim`."""
        if limit <= 0:
            return []
        with self._tx() as db:
            now = self.clock.now()
            rows = self._ready_rows(db, kinds, limit, now)
            return self._take_many(db, [(row[0], worker) for row in rows], now, start)

    def start(self, task_id: str, token: str) -> bool:
        """See :meth:`TaskStore.start`."""
        with self._tx() as db:
            now = self.clock.now()
            cur = db.execute(
                "UPDATE tasks SET status = 'running', started_at = ?, heartbeat_at = ? "
                "WHERE id = ? AND lease_token = ?", (now, now, task_id, token))
            return cur.rowcount == 1

    def start_many(self, leases: Mapping[str, str]) -> set[str]:
        """Mark many held tasks RUNNING in one statement (``{task_id: token}``).

        Returns:
            ids whose lease is gone.
        """
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
                    "UPDATE tasks SET status = 'running', started_at = ?, heartbeat_at = ? "
                    "WHERE (id, lease_token) IN (SELECT id, token FROM l) RETURNING id",
                    [v for pair in chunk for v in pair] + [now, now]).fetchall()
                started.update(r[0] for r in rows)
            return set(leases) - started

    def complete_many(self, items: Sequence[tuple[str, str, Any]]) -> set[str]:
        """Complete many held tasks in one statement: ``[(task_id, token, result), …]``.

        Returns:
            ids whose result was stored (the others had lost their lease).

        Raises:
            TypeError: a result is not JSON-serialisable.
        """
        encoded = [(task_id, token, json.dumps(result)) for task_id, token, result in items]
        stored: set[str] = set()
        with self._tx() as db:
            now = self.clock.now()
            for i in range(0, len(encoded), 300):
                chunk = encoded[i:i + 300]
                values = ",".join("(?, ?, ?)" for _ in chunk)
                rows = db.execute(
                    f"WITH l(id, token, result) AS (VALUES {values}) "
                    "UPDATE tasks SET status = 'completed', error = NULL, finished_at = ?, "
                    "lease_token = NULL, result = (SELECT l.result FROM l WHERE l.id = tasks.id) "
                    "WHERE (id, lease_token) IN (SELECT id, token FROM l) RETURNING id, locks",
                    [v for triple in chunk for v in triple] + [now]).fetchall()
                for task_id, locks in rows:
                    stored.add(task_id)
                    if locks != "[]":
                        db.execute("DELETE FROM held_locks WHERE task_id = ?", (task_id,))
            return stored

    def heartbeat(self, leases: Mapping[str, str]) -> set[str]:
        """See :meth:`TaskStore.heartbeat`."""
        if not leases:
            return set()
        with self._tx() as db:
            now = self.clock.now()
            lost = set()
            for task_id, token in leases.items():
                cur = db.execute("UPDATE tasks SET heartbeat_at = ? WHERE id = ? "
                                 "AND lease_token = ?", (now, task_id, token))
                if cur.rowcount != 1:
                    lost.add(task_id)
            return lost

    def complete(self, task_id: str, token: str, result: Any) -> bool:
        """See :meth:`TaskStore.complete`."""
        encoded = json.dumps(result)
        with self._tx() as db:
            row = db.execute(
                "UPDATE tasks SET status = 'completed', result = ?, error = NULL, "
                "finished_at = ?, lease_token = NULL WHERE id = ? AND lease_token = ? "
                "RETURNING locks", (encoded, self.clock.now(), task_id, token)).fetchone()
            if row is None:
                return False
            if row[0] != "[]":
                db.execute("DELETE FROM held_locks WHERE task_id = ?", (task_id,))
            return True

    def fail(self, task_id: str, token: str, error: str, *,
             retry_at: float | None) -> Status | None:
        """See :meth:`TaskStore.fail`."""
        with self._tx() as db:
            now = self.clock.now()
            row = db.execute("SELECT attempts, errors FROM tasks WHERE id = ? "
                             "AND lease_token = ?", (task_id, token)).fetchone()
            if row is None:
                return None
            errors = json.loads(row[1])
            errors.append({"attempt": row[0], "error": error,
                           "at": from_epoch(now).isoformat()})
            status = Status.DEAD if retry_at is None else Status.FAILED
            db.execute(
                "UPDATE tasks SET status = ?, error = ?, errors = ?, not_before = ?, "
                "finished_at = ?, lease_token = NULL, assigned_to = NULL WHERE id = ?",
                (status.value, error, json.dumps(errors), retry_at,
                 now if status is Status.DEAD else None, task_id))
            db.execute("DELETE FROM held_locks WHERE task_id = ?", (task_id,))
            return status

    def release(self, task_id: str, token: str) -> bool:
        """See :meth:`TaskStore.release`."""
        with self._tx() as db:
            cur = db.execute(
                "UPDATE tasks SET status = 'pending', attempts = MAX(0, attempts - 1), "
                "lease_token = NULL, assigned_to = NULL WHERE id = ? AND lease_token = ?",
                (task_id, token))
            if cur.rowcount != 1:
                return False
            db.execute("DELETE FROM held_locks WHERE task_id = ?", (task_id,))
            return True

    def reclaim_stale(self, stale_after_s: float) -> list[str]:
        """See :meth:`TaskStore.reclaim_stale`."""
        with self._tx() as db:
            now = self.clock.now()
            rows = db.execute(
                "SELECT id, assigned_to, attempts, max_attempts, errors FROM tasks "
                "WHERE status IN ('assigned', 'running') AND heartbeat_at < ?",
                (now - stale_after_s,)).fetchall()
            for task_id, worker, attempts, max_attempts, errors_text in rows:
                error = (f"worker {worker} stopped heartbeating for more than "
                         f"{stale_after_s:g} s (attempt {attempts})")
                errors = json.loads(errors_text)
                errors.append({"attempt": attempts, "error": error,
                               "at": from_epoch(now).isoformat()})
                dead = attempts >= max_attempts
                db.execute(
                    "UPDATE tasks SET status = ?, error = ?, errors = ?, lease_token = NULL, "
                    "assigned_to = NULL, finished_at = ? WHERE id = ?",
                    ("dead" if dead else "pending", error, json.dumps(errors),
                     now if dead else None, task_id))
                db.execute("DELETE FROM held_locks WHERE task_id = ?", (task_id,))
            return [r[0] for r in rows]

    def park_blocked(self) -> list[str]:
        """See :meth:`TaskStore.park_blocked`."""
        parked: list[str] = []
        with self._tx() as db:
            now = self.clock.now()
            while True:
                rows = db.execute(
                    f"UPDATE tasks SET status = 'dead', finished_at = ?, "
                    f"error = 'dependency ' || {_FIRST_DEAD_DEP} || ' is dead' "
                    f"WHERE status IN ('pending', 'failed') AND {_FIRST_DEAD_DEP} IS NOT NULL "
                    "RETURNING id", (now,)).fetchall()
                if not rows:
                    return parked
                parked.extend(r[0] for r in rows)

    def retry_dead(self, ids: Sequence[str] | None = None) -> list[str]:
        """See :meth:`TaskStore.retry_dead`."""
        with self._tx() as db:
            if ids is None:
                revived = {r[0] for r in db.execute("SELECT id FROM tasks WHERE status = 'dead'")}
            else:
                revived = set()
                for task_id in ids:
                    row = db.execute("SELECT status FROM tasks WHERE id = ?",
                                     (task_id,)).fetchone()
                    if row and row[0] == "dead":
                        revived.add(task_id)
                frontier = set(revived)
                while frontier:       # dependents parked because of a revived task
                    nxt = set()
                    for dep in frontier:
                        for (child,) in db.execute(
                                "SELECT t.id FROM task_deps d JOIN tasks t ON t.id = d.task_id "
                                "WHERE d.dep_id = ? AND t.status = 'dead' "
                                "AND t.error LIKE 'dependency %'", (dep,)):
                            if child not in revived:
                                nxt.add(child)
                    revived |= nxt
                    frontier = nxt
            db.executemany(
                "UPDATE tasks SET status = 'pending', attempts = 0, not_before = NULL, "
                "finished_at = NULL WHERE id = ?", [(i,) for i in revived])
            order = db.execute("SELECT id FROM tasks WHERE status = 'pending' ORDER BY seq")
            return [r[0] for r in order if r[0] in revived]

    def claim_effect(self, key: str, task_id: str, token: str) -> bool:
        """See :meth:`TaskStore.claim_effect`."""
        with self._tx() as db:
            held = db.execute("SELECT 1 FROM tasks WHERE id = ? AND lease_token = ?",
                              (task_id, token)).fetchone()
            if held is None:
                return False
            cur = db.execute("INSERT OR IGNORE INTO effects (key, task_id, created_at) "
                             "VALUES (?, ?, ?)", (key, task_id, self.clock.now()))
            return cur.rowcount == 1

    def mean_durations(self) -> dict[str, float]:
        """See :meth:`TaskStore.mean_durations`."""
        rows = self._read("SELECT kind, AVG(finished_at - started_at) FROM tasks "
                          "WHERE status = 'completed' AND started_at IS NOT NULL "
                          "GROUP BY kind")
        return {kind: mean for kind, mean in rows if mean is not None}

    def stats(self) -> StoreStats:
        """See :meth:`TaskStore.stats`."""
        with self._lock:
            now = self.clock.now()
            counts = {s: 0 for s in Status}
            for status, n in self._read("SELECT status, COUNT(*) FROM tasks GROUP BY status"):
                counts[Status(status)] = n
            active = dict(self._read(
                "SELECT assigned_to, COUNT(*) FROM tasks WHERE status IN ('assigned', 'running') "
                "AND assigned_to IS NOT NULL GROUP BY assigned_to"))
            oldest = self._read("SELECT MIN(created_at) FROM tasks "
                                "WHERE status NOT IN ('completed', 'dead')")[0][0]
        return StoreStats(counts, active, from_epoch(oldest), from_epoch(now))

    def close(self) -> None:
        """Close the connection. Idempotent."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
