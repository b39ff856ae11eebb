"""SQLite task store: the embedded default.

One file, WAL journal, one ``tasks`` table whose columns are the fields of
:class:`~foreperson.work.task.Task` (times as epoch seconds, lists and objects as JSON
text). A claim is one ``BEGIN IMMEDIATE`` transaction, so several processes may share
the file. Restarting on the same file finds every unfinished task.
"""

from __future__ import annotations

import contextlib
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
from ...journal import RunRecord, Step, check_version
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
from ..task import Clock, Status, SystemClock, Task, from_epoch
from . import _sqlite_queries as sql
from ._sqlite_prune import SqlitePruning
from ._sqlite_queries import row_to_run, row_to_step, row_to_task, run_row, step_row, task_row
from ._sqlite_schema import MIGRATIONS, statements

__all__ = ["MIGRATIONS", "SqliteStore"]


_SQLITE_FULL = 13


def _store_error(path: str, exc: sqlite3.Error, doing: str = "") -> StoreError:
    """A driver error as a StoreError; a locked or busy database may work next time, a
    full disk will not (it is named, with the file and what to do)."""
    if getattr(exc, "sqlite_errorcode", None) == _SQLITE_FULL:
        where = os.path.dirname(os.path.abspath(path)) or "."
        return StoreError(
            f"{path}: the disk is full: SQLite could not write the task database (on the "
            f"disk holding {where}); nothing of the failed write was kept: free some "
            "space and run the same command again")
    return StoreError(f"{path}: {doing}{exc}",
                      transient=isinstance(exc, sqlite3.OperationalError))


def _identity(path: str) -> tuple[int, int] | None:
    """The file's (device, inode), or None for an in-memory database or a missing file."""
    if path == ":memory:" or path.startswith("file:"):
        return None
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return (-1, -1)
    return info.st_dev, info.st_ino


def _starting(start: bool | int, count: int) -> int:
    """How many of ``count`` claims start at once (``start``: all, none, or a number)."""
    if isinstance(start, bool):
        return count if start else 0
    return max(0, min(int(start), count))


def _iso(epoch: float) -> str:
    when = from_epoch(epoch)
    assert when is not None
    return when.isoformat()


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
        create: make the schema in a file that has none (default True); False for a
            reader (``foreperson status``, ``serve``): a file without foreperson's
            tables is refused and nothing is written to it.

    A file that holds another application's tables is refused before anything is
    written to it (its journal mode included).

    Raises:
        StoreError: the file cannot be opened or has a newer schema than this version
            of foreperson knows.
        ConfigurationError: the file is another application's database, or (with
            ``create=False``) holds no foreperson tasks.
    """

    _task_columns = sql.TASK_COLUMNS
    _step_columns = sql.STEP_COLUMNS
    _run_columns = sql.RUN_COLUMNS
    _row_to_task = staticmethod(row_to_task)
    _row_to_step = staticmethod(row_to_step)
    _row_to_run = staticmethod(row_to_run)

    def __init__(self, path: str | Path, *, clock: Clock | None = None,
                 synchronous: str = "FULL", busy_timeout_s: float = 30.0,
                 create: bool = True) -> None:
        if synchronous.upper() not in sql.SET_SYNCHRONOUS:
            raise ConfigurationError(
                f"SqliteStore(synchronous={synchronous!r}): choose 'FULL' (every commit on "
                "disk, the default) or 'NORMAL' (survives a killed process, not a power cut)")
        self.path = str(path)
        self.clock = clock or SystemClock()
        self._lease_time = getattr(self.clock, "lease_time", None)
        self._lock = threading.RLock()
        self._batch_owner: int | None = None
        self._second: int | None = None        # None until the schema has a clock
        try:
            self._conn = sqlite3.connect(self.path, isolation_level=None,
                                         check_same_thread=False,
                                         timeout=busy_timeout_s)
            # the store's clock, for the migrations that backfill the aggregates
            self._conn.create_function("foreperson_now", 0, self.clock.now)
            if self._check_owner(create):
                # a new file: space freed by prune() can be given back in small steps
                self._conn.execute(sql.SET_AUTO_VACUUM_INCREMENTAL)
            self._conn.execute(sql.SET_JOURNAL_WAL)
            self._conn.execute(sql.SET_SYNCHRONOUS[synchronous.upper()])
            self._conn.execute(sql.SET_FOREIGN_KEYS_OFF)
            self._migrate()
            self._second = -1
            self._identity = _identity(self.path)
            # the write-ahead log this connection keeps open (it stays while we are
            # connected): told apart from a new one if the database is replaced
            wal = None if self._identity is None else _identity(self.path + "-wal")
            self._wal_identity = None if wal == (-1, -1) else wal
        except sqlite3.Error as exc:
            self._close_quietly()
            raise StoreError(f"cannot open task database {self.path}: {exc}") from exc
        except ConfigurationError:
            self._close_quietly()
            raise
        self._closed = False

    def _close_quietly(self) -> None:
        conn = getattr(self, "_conn", None)
        if conn is not None:
            with contextlib.suppress(sqlite3.Error):
                conn.close()

    def _check_owner(self, create: bool) -> bool:
        """Whether the file is new (no object at all), after refusing, before any
        write, a file that is not a foreperson task database.

        Raises:
            ConfigurationError: another application's tables, or none with ``create``
                False.
        """
        version = self._conn.execute(sql.GET_USER_VERSION).fetchone()[0]
        tables = [r[0] for r in self._conn.execute(sql.LIST_TABLES)]
        if version == 0 and not tables and not self._conn.execute(
                sql.HAS_ANY_OBJECT).fetchone():
            if not create:
                raise ConfigurationError(
                    f"{self.path} holds no foreperson tasks (it is empty): check the path; "
                    "a job or a worker creates the database")
            return True
        if version == 0 or "tasks" not in tables:
            shown = ", ".join(tables[:6]) + (", ..." if len(tables) > 6 else "")
            raise ConfigurationError(
                f"{self.path} is not a foreperson task database (it holds other tables: "
                f"{shown or 'none'}; user_version {version}): foreperson writes nothing "
                "to it; give --db a new file")
        return False

    # -- plumbing --------------------------------------------------------------
    def _migrate(self) -> None:
        with self._tx() as db:
            version = db.execute(sql.GET_USER_VERSION).fetchone()[0]
            if version > len(MIGRATIONS):
                raise StoreError(
                    f"{self.path} has schema version {version}, newer than this foreperson "
                    f"({len(MIGRATIONS)}): upgrade foreperson")
            for number in range(version, len(MIGRATIONS)):
                for statement in statements(MIGRATIONS[number]):
                    db.execute(statement)
                db.execute(sql.set_user_version(number + 1))

    @property
    def schema_version(self) -> int:
        """The database's migration number."""
        with self._lock:
            return int(self._conn.execute(sql.GET_USER_VERSION).fetchone()[0])

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
                self._conn.execute(sql.BEGIN_IMMEDIATE)
            except sqlite3.Error as exc:
                raise _store_error(self.path, exc, "cannot start a transaction: ") from exc
            second = int(self.clock.now())
            try:
                if self._second is not None:
                    self._check_file()          # every write (one stat, a few µs)
                    if second != self._second:
                        # the second the aggregates' triggers file this transaction's
                        # changes under (written once a second, not once a transaction)
                        self._conn.execute(sql.SET_CLOCK, (second,))
                yield self._conn
            except sqlite3.Error as exc:
                self._rollback()
                raise _store_error(self.path, exc) from exc
            except BaseException:
                self._rollback()
                raise
            else:
                try:
                    self._conn.execute(sql.COMMIT)
                except sqlite3.Error as exc:
                    self._rollback()
                    raise _store_error(self.path, exc, "commit failed: ") from exc
                if self._second is not None:
                    self._second = second

    def _check_file(self) -> None:
        """Refuse to go on writing to a file that was deleted or replaced under this
        store (its writes would go to a file nobody can open any more). Checked before
        every write transaction, so the first write after the change fails.

        A database moved over the path (``mv``) leaves this store's ``-wal`` beside it,
        and SQLite would apply that log's pages to the new file when it is next opened;
        the message says so, and what to delete.

        Raises:
            StoreError: the path is gone, or is another file now.
        """
        if self._identity is None:
            return
        now = _identity(self.path)
        if now == self._identity:
            return
        stale = ""
        wal = self.path + "-wal"
        if now != (-1, -1) and self._wal_identity is not None and (
                _identity(wal) == self._wal_identity):
            stale = (f"; {wal} beside the new file is the old database's write-ahead log, "
                     "which SQLite would apply to the new file: once every process using "
                     f"it has stopped, delete it and {self.path}-shm before anything opens "
                     "the new file")
        raise StoreError(
            f"{self.path} was deleted or replaced while this process had it open: what was "
            "written since went to the old file; stop the job, put the database back (or "
            f"start again with a new --db) and run it again{stale}")

    def _rollback(self) -> None:
        """Roll the transaction back, if SQLite has not already (it does by itself on
        some errors, a full disk among them)."""
        if self._conn.in_transaction:
            self._conn.execute(sql.ROLLBACK)

    @contextmanager
    def _savepoint(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute(sql.SAVEPOINT)
            try:
                yield self._conn
            except sqlite3.Error as exc:
                if self._conn.in_transaction:     # not rolled back whole by SQLite
                    self._conn.execute(sql.ROLLBACK_TO_SAVEPOINT)
                    self._conn.execute(sql.RELEASE_SAVEPOINT)
                raise _store_error(self.path, exc) from exc
            except BaseException:
                self._conn.execute(sql.ROLLBACK_TO_SAVEPOINT)
                self._conn.execute(sql.RELEASE_SAVEPOINT)
                raise
            else:
                self._conn.execute(sql.RELEASE_SAVEPOINT)

    def _read(self, statement: str,
              params: Mapping[str, Any] | Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return self._conn.execute(statement, params).fetchall()
            except sqlite3.Error as exc:
                raise _store_error(self.path, exc) from exc

    def _write(self, statement: str, params: Mapping[str, Any]) -> sqlite3.Cursor:
        """Run ``statement`` in a transaction of its own (or the batch's)."""
        with self._tx() as db:
            return db.execute(statement, params)

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
                    for row in db.execute(sql.stored_or_pruned(len(chunk)), chunk * 2):
                        if row[0]:
                            pruned[row[1]] = row[2]
                        else:
                            found[row[1]] = row_to_task(row[1:])
                return found

            already = stored([t.id for t in tasks])
            gone = [t.id for t in tasks if t.id in pruned and t.id not in already]
            if gone:
                raise pruned_readd(gone[0], pruned[gone[0]])
            validate_new_tasks(tasks, lambda ids: set(stored(ids)), already)
            now = self.clock.now()
            fresh = [t for t in tasks if t.id not in already]
            db.executemany(sql.INSERT_TASK, [task_row(t, now) for t in fresh])
            db.executemany(sql.INSERT_TASK_DEP,
                           [(t.id, d) for t in fresh for d in dict.fromkeys(t.depends_on)])
            db.executemany(sql.INSERT_TASK_LOCK,
                           [(t.id, lk) for t in fresh for lk in dict.fromkeys(t.locks)])
            if fresh:           # the history's count of unfinished (one row per batch)
                db.execute(sql.COUNT_ADDED, (len(fresh),))
            return [t.id for t in fresh]

    def get(self, task_id: str) -> Task | None:
        """See :meth:`TaskStore.get`."""
        rows = self._read(sql.GET_TASK, (task_id,))
        return row_to_task(rows[0]) if rows else None

    def list_tasks(self, status: Status | None = None, kind: str | None = None,
                   limit: int | None = None, *, run_id: str | None = None,
                   newest_first: bool = False, offset: int = 0) -> list[Task]:
        """See :meth:`TaskStore.list_tasks`."""
        where, params = sql.where_equal(status=status and status.value, kind=kind, run_id=run_id)
        rows = self._read(sql.list_tasks(where, newest_first),
                          {**params, "limit": -1 if limit is None else max(0, limit),
                           "offset": max(0, offset)})
        return [row_to_task(r) for r in rows]

    def _ready_rows(self, db: sqlite3.Connection, kinds: Collection[str], limit: int,
                    now: float, columns: str = sql.TASK_COLUMNS) -> list[tuple[Any, ...]]:
        kinds = list(kinds)
        if not kinds or limit <= 0:
            return []
        params: dict[str, Any] = {f"k{i}": k for i, k in enumerate(kinds)}
        params.update(now=now, limit=limit)
        return db.execute(sql.ready_tasks(len(kinds), columns), params).fetchall()

    def ready(self, kinds: Collection[str], limit: int) -> list[Task]:
        """See :meth:`TaskStore.ready`."""
        with self._lock:
            try:
                rows = self._ready_rows(self._conn, kinds, limit, self.clock.now())
            except sqlite3.Error as exc:
                raise _store_error(self.path, exc) from exc
        return [row_to_task(r) for r in rows]

    def ready_brief(self, kinds: Collection[str], limit: int) -> list[ReadyTask]:
        """See :meth:`~foreperson.work.store.ListsReadyBriefly.ready_brief`."""
        with self._lock:
            try:
                rows = self._ready_rows(self._conn, kinds, limit, self.clock.now(),
                                        columns=sql.READY_BRIEF_COLUMNS)
            except sqlite3.Error as exc:
                raise _store_error(self.path, exc) from exc
        return [ReadyTask(*row) for row in rows]

    def _lease_clock(self) -> dict[str, Any]:
        """``{"boot": id, "mono": seconds}`` of the clock's boot clock, both ``None`` when
        it has none (leases then run out on the wall clock alone)."""
        found = self._lease_time() if self._lease_time is not None else None
        return {"boot": None, "mono": None} if found is None else {
            "boot": found[0], "mono": found[1]}

    def _take(self, db: sqlite3.Connection, task_id: str, worker: str, now: float,
              start: bool, lease_s: float) -> Task | None:
        row = db.execute(sql.TAKE_ONE, {
            "status": "running" if start else "assigned", "worker": worker, "now": now,
            "id": task_id, "token": uuid.uuid4().hex, "lease": lease_s,
            **self._lease_clock()}).fetchone()
        if row is None:
            return None
        task = row_to_task(row)
        if task.locks:
            db.executemany(sql.HOLD_LOCK, [(lk, task_id) for lk in dict.fromkeys(task.locks)])
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
        for i in range(0, len(pairs), 250):
            chunk = pairs[i:i + 250]
            lease = self._lease_clock()
            params: list[Any] = [now, lease_s, lease["boot"], lease["mono"]]
            for n, (task_id, worker) in enumerate(chunk, start=i):
                params += [task_id, worker, uuid.uuid4().hex, int(n < starting)]
            for row in db.execute(sql.take_many(len(chunk)), params):
                taken[row[0]] = row_to_task(row)
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
        cur = self._write(sql.START, {"now": self.clock.now(), "id": task_id, "token": token,
                                      **self._lease_clock()})
        return cur.rowcount == 1

    def start_many(self, leases: Mapping[str, str]) -> set[str]:
        """See :meth:`TaskStore.start_many`. One statement per 400 leases."""
        if not leases:
            return set()
        with self._tx() as db:
            now = self.clock.now()
            lease = self._lease_clock()
            started: set[str] = set()
            items = list(leases.items())
            for i in range(0, len(items), 400):
                chunk = items[i:i + 400]
                rows = db.execute(sql.start_many(len(chunk)),
                                  [v for pair in chunk for v in pair]
                                  + [now, now, now, lease["boot"], lease["mono"]]).fetchall()
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
                rows = db.execute(sql.complete_many(len(chunk)),
                                  [v for triple in chunk for v in triple] + [now]).fetchall()
                for task_id, locks in rows:
                    stored.add(task_id)
                    if locks != "[]":
                        db.execute(sql.FREE_LOCKS, {"id": task_id})
            return stored

    def heartbeat(self, leases: Mapping[str, str]) -> set[str]:
        """See :meth:`TaskStore.heartbeat`."""
        if not leases:
            return set()
        with self._tx() as db:
            times = {"now": self.clock.now(), **self._lease_clock()}
            return {task_id for task_id, token in leases.items()
                    if db.execute(sql.HEARTBEAT, {**times, "id": task_id,
                                                  "token": token}).rowcount != 1}

    def complete(self, task_id: str, token: str, result: Any) -> bool:
        """See :meth:`TaskStore.complete`."""
        return bool(self.complete_many([(task_id, token, result)]))

    def fail(self, task_id: str, token: str, error: str, *,
             retry_at: float | None) -> Status | None:
        """See :meth:`TaskStore.fail`."""
        with self._tx() as db:
            now = self.clock.now()
            row = db.execute(sql.FAIL, {"retry_at": retry_at, "error": error, "now": now,
                                        "at": _iso(now), "id": task_id, "token": token}).fetchone()
            if row is None:
                return None
            db.execute(sql.FREE_LOCKS, {"id": task_id})
            return Status(row[0])

    def release(self, task_id: str, token: str) -> bool:
        """See :meth:`TaskStore.release`."""
        with self._tx() as db:
            cur = db.execute(sql.RELEASE, {"reason": Reason.RELEASED.value, "id": task_id,
                                           "token": token})
            if cur.rowcount != 1:
                return False
            db.execute(sql.FREE_LOCKS, {"id": task_id})
            return True

    def reclaim_stale(self, *, holder_prefix: str | None = None) -> list[str]:
        """See :meth:`TaskStore.reclaim_stale`."""
        with self._tx() as db:
            now = self.clock.now()
            rows = db.execute(sql.RECLAIM_STALE, {"now": now, "at": _iso(now),
                                                  "prefix": holder_prefix,
                                                  **self._lease_clock()}).fetchall()
            for task_id, _ in rows:
                db.execute(sql.FREE_LOCKS, {"id": task_id})
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
                        sql.PARK_DEPENDENTS, {"now": now, "id": dead})]
                    parked.extend(found)
                    frontier = found
                return parked
            while True:
                rows = db.execute(sql.PARK_BLOCKED, {"now": now}).fetchall()
                if not rows:
                    return parked
                parked.extend(r[0] for r in rows)

    def retry_dead(self, ids: Sequence[str] | None = None) -> list[str]:
        """See :meth:`TaskStore.retry_dead`."""
        with self._tx() as db:
            if ids is None:
                chosen = [r[0] for r in db.execute(sql.DEAD_IDS)]
            else:
                chosen = list(dict.fromkeys(ids))
            revived = {i for i in chosen
                       if db.execute(sql.REVIVE, {"id": i}).rowcount == 1}
            frontier = set(revived)
            while frontier:       # dependents parked because of a revived task
                frontier = {r[0] for dep in frontier
                            for r in db.execute(sql.PARKED_DEPENDENTS, {"id": dep})
                            if r[0] not in revived}
                for child in frontier:
                    db.execute(sql.REVIVE, {"id": child})
                revived |= frontier
            order = db.execute(sql.PENDING_IDS)
            return [r[0] for r in order if r[0] in revived]

    def claim_effect(self, key: str, task_id: str, token: str) -> bool:
        """See :meth:`TaskStore.claim_effect`."""
        with self._tx() as db:
            if db.execute(sql.HOLDS_LEASE, {"id": task_id, "token": token}).fetchone() is None:
                return False
            earlier = db.execute(sql.GET_EFFECT, {"key": key}).fetchone()
            if earlier is not None and (earlier[1] == EFFECT_DONE or earlier[0] == token):
                return False
            db.execute(sql.PUT_EFFECT, {"key": key, "id": task_id, "now": self.clock.now(),
                                        "token": token, "state": EFFECT_CLAIMED})
            return True

    def effect_done(self, key: str, task_id: str, token: str) -> bool:
        """See :meth:`TaskStore.effect_done`."""
        with self._tx() as db:
            if db.execute(sql.HOLDS_LEASE, {"id": task_id, "token": token}).fetchone() is None:
                return False
            db.execute(sql.PUT_EFFECT, {"key": key, "id": task_id, "now": self.clock.now(),
                                        "token": token, "state": EFFECT_DONE})
            return True

    def finished_among(self, ids: Collection[str]) -> dict[str, Task]:
        """See :meth:`TaskStore.finished_among`."""
        ids = list(ids)
        out: dict[str, Task] = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            for row in self._read(sql.finished_among(len(chunk)), chunk):
                out[row[0]] = row_to_task(row)
        return out

    def mean_durations(self) -> dict[str, float]:
        """See :meth:`TaskStore.mean_durations`: from the aggregates (``task_counts``)."""
        return dict(self._read(sql.MEAN_DURATIONS))

    def stats(self, *, run_id: str | None = None) -> StoreStats:
        """See :meth:`TaskStore.stats`. The whole store's counts come from the aggregates,
        one run's from the ``(run_id, status)`` index; the rest reads unfinished tasks
        only (indexes on the held and the unfinished), never the history."""
        with self._lock:
            now = self.clock.now()
            counts = {s: 0 for s in Status}
            if run_id is None:      # the finished from the aggregates, the rest on an index
                rows = self._read(sql.FINISHED_BY_STATUS)
                rows += self._read(sql.UNFINISHED_BY_STATUS)
            else:
                rows = self._read(sql.RUN_BY_STATUS, (run_id,))
            for status, n in rows:
                counts[Status(status)] = int(n)
            active = dict(self._read(sql.ACTIVE_BY_WORKER if run_id is None
                                     else sql.ACTIVE_BY_WORKER_IN_RUN, {"run": run_id}))
            oldest = min((r[0] for r in self._read(
                sql.OLDEST_UNFINISHED if run_id is None else sql.OLDEST_UNFINISHED_IN_RUN,
                {"run": run_id})), default=None)
            workers = {name: from_epoch(seen) for name, seen in self._read(sql.WORKER_HEARTBEATS)}
        return StoreStats(counts, active, from_epoch(oldest),
                          from_epoch(now), workers)  # type: ignore[arg-type]

    # -- workers (TracksWorkers) -------------------------------------------------
    def worker_seen(self, name: str, kinds: Collection[str] = (), concurrency: int = 1) -> None:
        """See :meth:`TracksWorkers.worker_seen`."""
        self._write(sql.WORKER_SEEN, {"name": name, "kinds": json.dumps(sorted(kinds)),
                                      "concurrency": concurrency, "host": socket.gethostname(),
                                      "pid": os.getpid(), "now": self.clock.now()})

    def worker_gone(self, name: str) -> None:
        """See :meth:`TracksWorkers.worker_gone`."""
        self._write(sql.WORKER_GONE, {"name": name})

    def list_workers(self) -> list[WorkerRecord]:
        """See :meth:`TracksWorkers.list_workers`."""
        return [WorkerRecord(name, tuple(json.loads(kinds)), concurrency, host, pid,
                             from_epoch(started), from_epoch(seen))  # type: ignore[arg-type]
                for name, kinds, concurrency, host, pid, started, seen in self._read(
                    sql.LIST_WORKERS)]

    # -- observation (ReportsWork) ------------------------------------------------
    def counts_by_kind(self, *, run_id: str | None = None) -> dict[str, dict[Status, int]]:
        """See :meth:`ReportsWork.counts_by_kind`."""
        out: dict[str, dict[Status, int]] = {}
        rows = (self._read(sql.FINISHED_BY_KIND) + self._read(sql.UNFINISHED_BY_KIND)
                if run_id is None else self._read(sql.RUN_BY_KIND, (run_id,)))
        for kind, status, n in rows:
            out.setdefault(kind, dict.fromkeys(Status, 0))[Status(status)] = int(n)
        return out

    def worker_totals(self, names: Collection[str] | None = None, *,
                      since: float | None = None) -> dict[str, WorkerTotals]:
        """See :meth:`ReportsWork.worker_totals`: from the aggregates (``worker_counts``)."""
        if names is not None:
            wanted = sorted(set(names))
            rows = [r for i in range(0, len(wanted), 500) for r in self._read(
                sql.worker_totals_of(len(wanted[i:i + 500])), wanted[i:i + 500])]
        elif since is not None:
            rows = self._read(sql.WORKER_TOTALS_SINCE, (since,))
        else:
            rows = self._read(sql.WORKER_TOTALS)
        return {name: WorkerTotals(int(done), int(failed), from_epoch(at))
                for name, done, failed, at in rows}

    def history(self, *, run_id: str | None = None, points: int = 60,
                since: float | None = None, until: float | None = None) -> list[TimelinePoint]:
        """See :meth:`ReportsWork.history`. The whole store's from ``task_history`` (the
        changes since the window's start only), one run's from its records' timestamps."""
        now = self.clock.now()
        if run_id is not None:
            return self._run_history(run_id, points, since, until, now)
        last = self._read(sql.LAST_CHANGE_AT)[0][0]
        end = until if until is not None else default_until(now, last)
        low = max(since if since is not None else end - HISTORY_WINDOW_S, now - HISTORY_KEPT_S)
        changes = [(at, status, n) for at, status, n in self._read(sql.CHANGES_SINCE, (int(low),))]
        start, end = history_window(changes, since, end)
        return history_points(self.stats().counts, (c for c in changes if c[0] > start),
                              start, end, points)

    def _run_history(self, run_id: str, points: int, since: float | None,
                     until: float | None, now: float) -> list[TimelinePoint]:
        rows = [(Status(st), from_epoch(c), from_epoch(f)) for st, c, f in self._read(
            sql.RUN_TASK_TIMES, (run_id,))]
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
        return [r[0] for r in self._read(sql.DEPENDENTS, (task_id,))]

    # -- journal ---------------------------------------------------------------
    def get_step(self, run_id: str, key: str) -> Step | None:
        """See :meth:`foreperson.journal.Journal.get_step`."""
        rows = self._read(sql.GET_STEP, {"run_id": run_id, "key": key})
        return check_version(row_to_step(rows[0])) if rows else None

    def put_step(self, step: Step) -> Step:
        """See :meth:`foreperson.journal.Journal.put_step`. One transaction; first write
        wins across every process sharing the file."""
        params = step_row(step)
        with self._tx() as db:
            row = db.execute(sql.PUT_STEP, {**params, "now": self.clock.now()}).fetchone()
            if row is not None:     # ours: its version is the caller's to know
                return row_to_step(row)
            row = db.execute(sql.GET_STEP, {"run_id": step.run_id, "key": step.key}).fetchone()
        return check_version(row_to_step(row))

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
        return bool(self._read(sql.HAS_STEPS, {"run_id": run_id}))

    def list_steps(self, run_id: str) -> list[Step]:
        """See :meth:`foreperson.journal.Journal.list_steps`."""
        return [check_version(row_to_step(r))
                for r in self._read(sql.LIST_STEPS, {"run_id": run_id})]

    # -- runs (foreperson.journal.RunLedger) ------------------------------------
    def create_run(self, record: RunRecord) -> RunRecord:
        """See :meth:`foreperson.journal.RunLedger.create_run`."""
        params = run_row(record)
        with self._tx() as db:
            db.execute(sql.CREATE_RUN, {**params, "now": self.clock.now(),
                                        **self._lease_clock()})
            row = db.execute(sql.GET_RUN, {"run_id": record.run_id}).fetchone()
        return row_to_run(row)

    def get_run(self, run_id: str) -> RunRecord | None:
        """See :meth:`foreperson.journal.RunLedger.get_run`."""
        rows = self._read(sql.GET_RUN, {"run_id": run_id})
        return row_to_run(rows[0]) if rows else None

    def list_runs(self, *, user_id: str | None = None, status: str | None = None,
                  limit: int = 100) -> list[RunRecord]:
        """See :meth:`foreperson.journal.RunLedger.list_runs`."""
        where, params = sql.where_equal(user_id=user_id, status=status)
        return [row_to_run(r) for r in self._read(
            sql.list_runs(where), {**params, "limit": max(0, limit)})]

    def claim_run(self, run_id: str, owner: str, lease_s: float, *,
                  take_from: str | None = None) -> RunRecord | None:
        """See :meth:`foreperson.journal.RunLedger.claim_run`."""
        with self._tx() as db:
            row = db.execute(sql.CLAIM_RUN, {
                "run_id": run_id, "owner": owner, "take_from": take_from,
                "lease": float(lease_s), "now": self.clock.now(),
                **self._lease_clock()}).fetchone()
        return None if row is None else row_to_run(row)

    def renew_run(self, run_id: str, owner: str, lease_s: float) -> bool:
        """See :meth:`foreperson.journal.RunLedger.renew_run`."""
        return self._write(sql.RENEW_RUN, {"run_id": run_id, "owner": owner,
                                           "lease": float(lease_s),
                                           "now": self.clock.now(),
                                           **self._lease_clock()}).rowcount == 1

    def end_run(self, run_id: str, owner: str, status: str, *, result: Any = None,
                error: str | None = None, stop_reason: str | None = None) -> bool:
        """See :meth:`foreperson.journal.RunLedger.end_run`."""
        data = None if result is None else json.dumps(result, allow_nan=False)
        return self._write(sql.END_RUN, {
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
