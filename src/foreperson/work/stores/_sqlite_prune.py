"""Retention on SQLite: the primitives :func:`~foreperson.work.retention.prune_store`
drives (old finished tasks found on the ``tasks_finished`` index, removed a batch per
``BEGIN IMMEDIATE`` transaction, space given back by incremental vacuum)."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from ...journal import RunRecord, Step
from ..retention import PruneCandidate, PrunesByPrimitives, drop_ended_runs, task_record
from ..task import Clock, Task

__all__ = ["SqlitePruning"]

_UNFINISHED = "status IN ('pending', 'assigned', 'running', 'failed')"
_TERMINAL_RUN = "('completed', 'failed')"


def _marks(ids: list[str]) -> str:
    return ",".join("?" * len(ids))


class SqlitePruning(PrunesByPrimitives):
    """The retention primitives of :class:`~foreperson.work.stores.sqlite.SqliteStore`
    (a mixin: it uses the store's transactions, reads and row decoders)."""

    prune_transaction_s = 0.005
    """Seconds one retention transaction may hold the write lock (claims wait for it)."""

    clock: Clock
    _tx: Callable[[], AbstractContextManager[sqlite3.Connection]]
    _read: Callable[..., list[tuple[Any, ...]]]
    _row_to_task: Callable[[tuple[Any, ...]], Task]
    _row_to_step: Callable[[tuple[Any, ...]], Step]
    _task_columns: str
    _step_columns: str
    _run_columns: str
    _row_to_run: Callable[[tuple[Any, ...]], RunRecord]

    def _prune_candidates(self, cutoff: float, after: tuple[float, int], limit: int
                          ) -> list[PruneCandidate]:
        rows = self._read(
            "SELECT finished_at, seq, id, run_id, status FROM tasks "
            "WHERE status IN ('completed', 'dead') AND finished_at < :cutoff "
            "AND (finished_at > :f OR (finished_at = :f AND seq > :s)) "
            "ORDER BY finished_at, seq LIMIT :n",
            {"cutoff": cutoff, "f": after[0], "s": after[1], "n": limit})
        return [PruneCandidate(*row) for row in rows]

    def _prune_runs_over(self, run_ids: list[str], cutoff: float) -> set[str]:
        over = set()
        for run_id in run_ids:
            ((busy, last, began, ended, status, updated),) = self._read(
                f"SELECT EXISTS (SELECT 1 FROM tasks WHERE run_id = :r AND {_UNFINISHED}), "
                "(SELECT max(finished_at) FROM tasks WHERE run_id = :r), "
                "EXISTS (SELECT 1 FROM steps WHERE run_id = :r AND key = 'start'), "
                "EXISTS (SELECT 1 FROM steps WHERE run_id = :r AND key = 'end'), "
                "(SELECT status FROM runs WHERE run_id = :r), "
                "(SELECT updated_at FROM runs WHERE run_id = :r)", {"r": run_id})
            if busy or last is None or last >= cutoff:
                continue
            if status is not None and (status not in ("completed", "failed")
                                       or updated >= cutoff):
                continue            # a durable run that may still be resumed
            if status is None and began and not ended:
                continue            # a state machine's journal that has not ended
            over.add(run_id)
        return over

    def _prune_needed(self, ids: list[str]) -> set[str]:
        """Those of ``ids`` that an unfinished task depends on."""
        needed: set[str] = set()
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            needed.update(r[0] for r in self._read(
                f"SELECT DISTINCT d.dep_id FROM task_deps d JOIN tasks t ON t.id = d.task_id "
                f"WHERE d.dep_id IN ({_marks(chunk)}) AND t.{_UNFINISHED}", chunk))
        return needed

    def _prune_remove(self, ids: list[str], *, rows: bool
                      ) -> tuple[dict[str, int], list[dict[str, Any]]]:
        counts = {"tasks": 0, "edges": 0, "effects": 0, "runs": 0, "agent_runs": 0,
                  "steps": 0}
        records: list[dict[str, Any]] = []
        marks = _marks(ids)
        with self._tx() as db:
            if rows:
                records = [task_record(self._row_to_task(r)) for r in db.execute(
                    f"SELECT {self._task_columns} FROM tasks WHERE id IN ({marks}) "
                    "AND status IN ('completed', 'dead')", ids)]
            gone = db.execute(f"DELETE FROM tasks WHERE id IN ({marks}) "
                              "AND status IN ('completed', 'dead') RETURNING id, run_id",
                              ids).fetchall()
            if not gone:
                return counts, records
            now = self.clock.now()
            db.executemany("INSERT OR REPLACE INTO pruned_tasks (id, run_id, pruned_at) "
                           "VALUES (?, ?, ?)", [(i, r, now) for i, r in gone])
            removed = [i for i, _ in gone]
            marks = _marks(removed)
            counts["tasks"] = len(removed)
            counts["edges"] = db.execute(f"DELETE FROM task_deps WHERE task_id IN ({marks}) "
                                         f"OR dep_id IN ({marks})", removed * 2).rowcount
            db.execute(f"DELETE FROM task_locks WHERE task_id IN ({marks})", removed)
            counts["effects"] = db.execute(f"DELETE FROM effects WHERE task_id IN ({marks})",
                                           removed).rowcount
            for run_id in sorted({r for _, r in gone if r is not None}):
                if db.execute("SELECT 1 FROM tasks WHERE run_id = ? LIMIT 1",
                              (run_id,)).fetchone() is None:
                    counts["runs"] += 1
                    self._drop_run(db, run_id, counts, records if rows else None)
        return counts, records

    def _drop_run(self, db: sqlite3.Connection, run_id: str, counts: dict[str, int],
                  records: list[dict[str, Any]] | None) -> None:
        """Remove a run's journal and, when it has one that ended, its run record."""
        if records is not None:
            records += self._journal_records(db, run_id)
        counts["steps"] += db.execute("DELETE FROM steps WHERE run_id = ?", (run_id,)).rowcount
        counts["agent_runs"] += db.execute(
            f"DELETE FROM runs WHERE run_id = ? AND status IN {_TERMINAL_RUN}",
            (run_id,)).rowcount

    def _journal_records(self, db: sqlite3.Connection, run_id: str) -> list[dict[str, Any]]:
        out = [{"record": "run", **dataclasses.asdict(self._row_to_run(r))} for r in db.execute(
            f"SELECT {self._run_columns} FROM runs WHERE run_id = ?", (run_id,))]
        for row in db.execute(f"SELECT {self._step_columns} FROM steps WHERE run_id = ? "
                              "ORDER BY seq", (run_id,)):
            step = self._row_to_step(row)
            out.append({"record": "step", "run_id": step.run_id, "key": step.key,
                        "kind": step.kind, "digest": step.digest, "result": step.result,
                        "version": step.version, "created_at": step.created_at,
                        "request": step.request})
        return out

    def _prune_ledger(self, cutoff: float, limit: int, *, rows: bool, dry_run: bool
                      ) -> tuple[dict[str, int], list[dict[str, Any]]]:
        counts = {"agent_runs": 0, "journals": 0, "steps": 0, "more": 0}
        records: list[dict[str, Any]] = []
        durable = [r[0] for r in self._read(
            f"SELECT run_id FROM runs WHERE created_at < :c AND status IN {_TERMINAL_RUN} "
            "AND updated_at < :c AND NOT EXISTS (SELECT 1 FROM tasks t "
            "WHERE t.run_id = runs.run_id) ORDER BY created_at LIMIT :n",
            {"c": cutoff, "n": limit})]
        ended = [r[0] for r in self._read(
            "SELECT s.run_id FROM steps s WHERE s.key = 'end' AND s.created_at < :c "
            "AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.run_id = s.run_id) "
            "AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.run_id = s.run_id) "
            "ORDER BY s.created_at LIMIT :n", {"c": cutoff, "n": limit})]
        if dry_run:
            return {"agent_runs": len(durable), "journals": len(ended)}, records
        with self._tx() as db:
            drop_ended_runs(durable + ended, lambda run_id: self._drop_run(
                db, run_id, counts, records if rows else None), counts)
        counts["more"] = int(len(durable) == limit or len(ended) == limit)
        return counts, records

    def _prune_aggregates(self, history_before: float, workers_before: float,
                          tombstones_before: float, *, dry_run: bool) -> dict[str, int]:
        counts = {"history": 0, "workers": 0, "tombstones": 0}
        if dry_run:
            return counts
        while True:              # a bounded batch per transaction
            with self._tx() as db:
                n = db.execute("DELETE FROM task_history WHERE (at, status) IN (SELECT at, "
                               "status FROM task_history WHERE at < ? LIMIT 2000)",
                               (int(history_before),)).rowcount
            counts["history"] += n
            if n < 2000:
                break
        while True:              # tombstones are in insertion order, which is time order
            with self._tx() as db:
                n = db.execute("DELETE FROM pruned_tasks WHERE rowid IN (SELECT rowid FROM "
                               "pruned_tasks WHERE pruned_at < ? ORDER BY rowid LIMIT 2000)",
                               (tombstones_before,)).rowcount
            counts["tombstones"] += n
            if n < 2000:
                break
        with self._tx() as db:
            counts["workers"] += db.execute(
                "DELETE FROM worker_counts WHERE last_at < ? AND name NOT IN "
                "(SELECT name FROM workers)", (workers_before,)).rowcount
            counts["workers"] += db.execute("DELETE FROM workers WHERE heartbeat_at < ?",
                                            (workers_before,)).rowcount
        return counts

    def _prune_space(self) -> int:
        """Give freed pages back to the file system, 1 MB per transaction (a file made
        with ``auto_vacuum = INCREMENTAL``; older files reuse them instead)."""
        if self._read("PRAGMA auto_vacuum")[0][0] != 2:
            return 0
        page = int(self._read("PRAGMA page_size")[0][0])
        freed = 0
        while True:
            before = int(self._read("PRAGMA freelist_count")[0][0])
            if before == 0:
                return freed
            with self._tx() as db:
                db.execute("PRAGMA incremental_vacuum(256)").fetchall()
            after = int(self._read("PRAGMA freelist_count")[0][0])
            freed += (before - after) * page
            if after >= before:
                return freed
