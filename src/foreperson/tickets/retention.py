"""The ticket job's earlier nights: one task database (or PostgreSQL schema) per input,
so a nightly job leaves one behind every night. ``foreperson tickets ...
--prune-older-than 30d`` deletes those whose every task finished that long ago.

Only stores that are plainly the ticket job's are touched: a SQLite file named
``*.tasks.db`` in the folder of this run's task database, or a schema of the same
database, holding foreperson's tables with nothing but the job's three kinds of task,
none unfinished. The results files stay (they are the job's output).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import StoreError
from .tasks import CLASSIFY, DRAFT, TRIAGE

__all__ = ["EarlierRun", "prune_earlier_runs"]

_UNFINISHED = "('pending', 'assigned', 'running', 'failed')"
_FOREIGN = (f"kind NOT LIKE '{CLASSIFY}%' AND kind NOT LIKE '{DRAFT}%' "
            f"AND kind NOT LIKE '{TRIAGE}%'")


@dataclass(frozen=True)
class EarlierRun:
    """A store of an earlier run that was (or, with a dry run, would be) deleted.

    Attributes:
        where: the SQLite file, or ``schema NAME``.
        tasks: tasks it held.
        last_s: seconds since its last task finished.
    """

    where: str
    tasks: int
    last_s: float


def prune_earlier_runs(*, older_than_s: float, now: float, db: str | None = None,
                       dsn: str | None = None, schema: str | None = None,
                       dry_run: bool = False) -> list[EarlierRun]:
    """Delete the ticket job's stores whose last task finished more than
    ``older_than_s`` seconds ago (not this run's: ``db`` or ``schema``).

    Args:
        older_than_s: age, seconds.
        now: the time, epoch seconds.
        db: this run's SQLite file (its folder is searched).
        dsn: the PostgreSQL database (its schemas are searched), instead.
        schema: this run's schema (with ``dsn``).
        dry_run: only say what would go.

    Returns:
        what was deleted (or would be).

    Raises:
        StoreError: the database failed.
    """
    if dsn:
        return _prune_schemas(dsn, schema, older_than_s, now, dry_run)
    assert db is not None
    keep = Path(db).resolve()
    gone = []
    for path in sorted(keep.parent.glob("*.tasks.db")):
        if path.resolve() == keep:
            continue
        found = _sqlite_run(path)
        if found is None or now - found[1] <= older_than_s:
            continue
        gone.append(EarlierRun(str(path), found[0], now - found[1]))
        if not dry_run:
            for part in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
                part.unlink(missing_ok=True)
    return gone


def _sqlite_run(path: Path) -> tuple[int, float] | None:
    """(tasks, last finished) of a finished ticket-job file, or None when it is not one
    (another application's database, an unfinished job, no tasks)."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        if not {"tasks", "task_deps", "effects"} <= tables:
            return None
        ((n, busy, foreign, last),) = conn.execute(
            f"SELECT count(*), count(*) FILTER (WHERE status IN {_UNFINISHED}), "
            f"count(*) FILTER (WHERE {_FOREIGN}), max(coalesce(finished_at, created_at)) "
            "FROM tasks").fetchall()
    except sqlite3.Error:
        return None
    finally:
        conn.close()
    if not n or busy or foreign or last is None:
        return None
    return int(n), float(last)


def _prune_schemas(dsn: str, keep: str | None, older_than_s: float, now: float,
                   dry_run: bool) -> list[EarlierRun]:
    import os

    try:
        import psycopg
        from psycopg import sql
    except ImportError:             # pragma: no cover - the postgres extra is needed for --dsn
        return []
    from ..work.stores.postgres import DEFAULT_SCHEMA

    keep = keep or os.environ.get("FOREPERSON_PG_SCHEMA") or DEFAULT_SCHEMA
    gone = []
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            schemas = [r[0] for r in conn.execute(
                "SELECT table_schema FROM information_schema.tables "
                "WHERE table_name = 'schema_migrations' AND table_schema IN (SELECT "
                "table_schema FROM information_schema.tables WHERE table_name = 'tasks') "
                "ORDER BY 1")]
            for name in schemas:
                if name == keep:
                    continue
                found = _schema_run(conn, sql.Identifier(name))
                if found is None or now - found[1] <= older_than_s:
                    continue
                gone.append(EarlierRun(f"schema {name}", found[0], now - found[1]))
                if not dry_run:
                    conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))
    except psycopg.Error as exc:
        raise StoreError(f"cannot look for earlier runs' schemas: {exc}") from exc
    return gone


def _schema_run(conn: Any, name: Any) -> tuple[int, float] | None:
    from psycopg import sql

    row = conn.execute(sql.SQL(
        f"SELECT count(*), count(*) FILTER (WHERE status IN {_UNFINISHED}), "
        f"count(*) FILTER (WHERE {_FOREIGN}), "
        "extract(epoch FROM max(coalesce(finished_at, created_at))) FROM {}.tasks"
    ).format(name)).fetchone()
    n, busy, foreign, last = row
    if not n or busy or foreign or last is None:
        return None
    return int(n), float(last)
