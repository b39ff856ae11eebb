"""Retention on PostgreSQL: the primitives :func:`~foreperson.work.retention.prune_store`
drives. Old finished tasks are found on the ``tasks_finished`` index and removed a batch
per transaction; a finished row is never claimed, so removing it takes no lock a worker
waits for. Lock slots of plain locks that no kept task names go last, under a short
table lock so that a task being added with that lock keeps its slot."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path
from typing import Any

from ...journal import RunRecord
from ..retention import (
    PruneCandidate,
    PruneReport,
    PrunesByPrimitives,
    Retention,
    drop_ended_runs,
    task_record,
)
from ..task import Clock, Task, from_epoch

__all__ = ["PostgresPruning"]

_UNFINISHED = "('pending', 'assigned', 'running', 'failed')"
_TERMINAL_RUN = "('completed', 'failed')"


def _ts(epoch: float) -> datetime | str:
    """An epoch as a parameter for a ``timestamptz`` (minus infinity as PostgreSQL
    writes it)."""
    if epoch == float("-inf"):
        return "-infinity"
    when = from_epoch(epoch)
    assert when is not None
    return when


class PostgresPruning(PrunesByPrimitives):
    """The retention primitives of :class:`~foreperson.work.stores.postgres.PostgresStore`
    (a mixin: it uses the store's cursors and row decoders)."""

    prune_transaction_s = 0.05
    """Seconds one retention transaction may take: it locks finished rows only, which no
    claim waits for, so the limit is about the load it puts on the server."""

    clock: Clock
    _cursor: Callable[..., AbstractContextManager[Any]]
    _now: Callable[[], datetime | None]
    _task_columns: str
    _run_columns: str
    _row_to_task: Callable[[Any], Task]
    _row_to_run: Callable[[Any], RunRecord]
    _pruned_locks: set[str]

    def prune(self, retention: Retention, *, archive: str | Path | None = None,
              dry_run: bool = False, max_seconds: float | None = None) -> PruneReport:
        """See :meth:`foreperson.work.retention.Prunes.prune` (the aggregates' deltas are
        folded first)."""
        self._pruned_locks = set()
        with self._cursor(transaction=False) as cur:
            cur.execute("SELECT fold_task_deltas()")
        return super().prune(retention, archive=archive, dry_run=dry_run,
                             max_seconds=max_seconds)

    def _rows(self, sql: str, params: dict[str, Any], *,
              transaction: bool = False) -> list[tuple[Any, ...]]:
        with self._cursor(transaction=transaction) as cur:
            cur.execute(sql, params)
            result = cur.pgresult
            return cur.fetchall() if result is not None and result.nfields else []

    def _prune_candidates(self, cutoff: float, after: tuple[float, int], limit: int
                          ) -> list[PruneCandidate]:
        rows = self._rows(
            "SELECT extract(epoch FROM finished_at)::float8, seq, id, run_id, status "
            "FROM tasks WHERE status IN ('completed', 'dead') AND finished_at < %(cutoff)s "
            "AND (finished_at, seq) > (%(f)s::timestamptz, %(s)s) "
            "ORDER BY finished_at, seq LIMIT %(n)s",
            {"cutoff": _ts(cutoff), "f": _ts(after[0]), "s": after[1], "n": limit})
        return [PruneCandidate(*row) for row in rows]

    def _prune_runs_over(self, run_ids: list[str], cutoff: float) -> set[str]:
        rows = self._rows(f"""
            SELECT r.run_id FROM unnest(%(ids)s::text[]) AS r(run_id)
            WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE t.run_id = r.run_id
                              AND t.status IN {_UNFINISHED})
              AND (SELECT max(t.finished_at) FROM tasks t WHERE t.run_id = r.run_id)
                  < %(cutoff)s
              AND NOT EXISTS (SELECT 1 FROM runs x WHERE x.run_id = r.run_id
                              AND (x.status NOT IN {_TERMINAL_RUN}
                                   OR x.updated_at >= %(cutoff)s))
              AND NOT EXISTS (     -- a state machine's journal that began, not ended
                  SELECT 1 FROM steps s WHERE s.run_id = r.run_id AND s.key IN ('start', 'end')
                  GROUP BY s.run_id HAVING bool_and(s.key = 'start')
                     AND NOT EXISTS (SELECT 1 FROM runs x WHERE x.run_id = r.run_id))""",
                          {"ids": run_ids, "cutoff": _ts(cutoff)})
        return {r[0] for r in rows}

    def _prune_needed(self, ids: list[str]) -> set[str]:
        # the waiting and the held apart: each status set is a partial index of its own
        rows = self._rows(" UNION ".join(
            "SELECT d.dep_id FROM task_deps d JOIN tasks t ON t.id = d.task_id "
            f"WHERE d.dep_id = ANY (%(ids)s) AND t.status IN {which}"
            for which in ("('pending', 'failed')", "('assigned', 'running')")), {"ids": ids})
        return {r[0] for r in rows}

    def _prune_remove(self, ids: list[str], *, rows: bool
                      ) -> tuple[dict[str, int], list[dict[str, Any]]]:
        counts = {"tasks": 0, "edges": 0, "effects": 0, "runs": 0, "agent_runs": 0,
                  "steps": 0}
        records: list[dict[str, Any]] = []
        with self._cursor(transaction=True) as cur:
            cur.execute(f"DELETE FROM tasks WHERE id = ANY (%(ids)s) AND status IN "
                        f"('completed', 'dead') RETURNING {self._task_columns}", {"ids": ids})
            removed = cur.fetchall()
            gone = [row[0] for row in removed]
            if gone:         # each on its index (one statement with an OR of the two, or
                # joined to the removed rows, would be planned as a scan of the table)
                cur.execute("INSERT INTO pruned_tasks (id, run_id, pruned_at) "
                            "SELECT g.id, g.run_id, fp_now(%(now)s) FROM unnest(%(ids)s::text[], "
                            "%(runs)s::text[]) AS g(id, run_id) ON CONFLICT (id) DO UPDATE "
                            "SET pruned_at = excluded.pruned_at",
                            {"ids": gone, "runs": [row[19] for row in removed],
                             "now": self._now()})
                cur.execute("DELETE FROM task_deps WHERE task_id = ANY (%(ids)s)", {"ids": gone})
                edges = cur.rowcount
                cur.execute("DELETE FROM task_deps WHERE dep_id = ANY (%(ids)s)", {"ids": gone})
                edges += cur.rowcount
                cur.execute("DELETE FROM effects WHERE task_id = ANY (%(ids)s)", {"ids": gone})
                gone = [(edges, cur.rowcount, *row) for row in removed]
            if not gone:
                return counts, records
            counts["tasks"] = len(gone)
            counts["edges"], counts["effects"] = int(gone[0][0]), int(gone[0][1])
            tasks = [self._row_to_task(row[2:]) for row in gone]
            self._pruned_locks.update(lock for t in tasks for lock in t.locks)
            if rows:
                records = [task_record(t) for t in tasks]
            emptied = sorted({t.run_id for t in tasks if t.run_id is not None})
            if emptied:
                cur.execute("SELECT r FROM unnest(%(ids)s::text[]) AS r WHERE NOT EXISTS "
                            "(SELECT 1 FROM tasks t WHERE t.run_id = r)", {"ids": emptied})
                for (run_id,) in cur.fetchall():
                    counts["runs"] += 1
                    self._drop_run(cur, run_id, counts, records if rows else None)
        return counts, records

    def _drop_run(self, cur: Any, run_id: str, counts: dict[str, int],
                  records: list[dict[str, Any]] | None) -> None:
        """Remove a run's journal and, when it has one that ended, its run record."""
        cur.execute("DELETE FROM steps WHERE run_id = %(r)s RETURNING run_id, key, kind, "
                    "digest, result, version, created_at, seq, request", {"r": run_id})
        steps = cur.fetchall()
        counts["steps"] += len(steps)
        cur.execute(f"DELETE FROM runs WHERE run_id = %(r)s AND status IN {_TERMINAL_RUN} "
                    f"RETURNING {self._run_columns}", {"r": run_id})
        ended = cur.fetchall()
        counts["agent_runs"] += len(ended)
        if records is not None:
            records += [{"record": "run", **dataclasses.asdict(self._row_to_run(r))}
                        for r in ended]
            records += [{"record": "step", **dict(zip(
                ("run_id", "key", "kind", "digest", "result", "version", "created_at", "seq",
                 "request"), s, strict=True))} for s in steps]

    def _prune_ledger(self, cutoff: float, limit: int, *, rows: bool, dry_run: bool
                      ) -> tuple[dict[str, int], list[dict[str, Any]]]:
        counts = {"agent_runs": 0, "journals": 0, "steps": 0, "more": 0}
        records: list[dict[str, Any]] = []
        params = {"c": _ts(cutoff), "n": limit}
        durable = [r[0] for r in self._rows(
            f"SELECT run_id FROM runs WHERE created_at < %(c)s AND status IN {_TERMINAL_RUN} "
            "AND updated_at < %(c)s AND NOT EXISTS (SELECT 1 FROM tasks t "
            "WHERE t.run_id = runs.run_id) ORDER BY created_at, seq LIMIT %(n)s", params)]
        ended = [r[0] for r in self._rows(
            "SELECT s.run_id FROM steps s WHERE s.key = 'end' AND s.created_at < %(c)s "
            "AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.run_id = s.run_id) "
            "AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.run_id = s.run_id) "
            "ORDER BY s.created_at LIMIT %(n)s", params)]
        if dry_run:
            return {"agent_runs": len(durable), "journals": len(ended)}, records
        with self._cursor(transaction=True) as cur:
            drop_ended_runs(durable + ended, lambda run_id: self._drop_run(
                cur, run_id, counts, records if rows else None), counts)
        counts["more"] = int(len(durable) == limit or len(ended) == limit)
        return counts, records

    def _prune_aggregates(self, history_before: float, workers_before: float,
                          tombstones_before: float, *, dry_run: bool) -> dict[str, int]:
        counts = {"history": 0, "workers": 0, "tombstones": 0}
        if dry_run:
            return counts
        for name, sql, cut in (
                ("history", "DELETE FROM task_history WHERE (at, status) IN (SELECT at, "
                 "status FROM task_history WHERE at < %(cut)s LIMIT 2000)",
                 int(history_before)),
                ("tombstones", "DELETE FROM pruned_tasks WHERE id IN (SELECT id FROM "
                 "pruned_tasks WHERE pruned_at < %(cut)s LIMIT 2000)", _ts(tombstones_before))):
            for n in self._batches(sql, {"cut": cut}):
                counts[name] += n
        with self._cursor(transaction=True) as cur:
            cur.execute("DELETE FROM worker_counts w WHERE last_at < %(c)s AND NOT EXISTS "
                        "(SELECT 1 FROM workers x WHERE x.name = w.name)",
                        {"c": _ts(workers_before)})
            counts["workers"] += cur.rowcount
            cur.execute("DELETE FROM workers WHERE heartbeat_at < %(c)s",
                        {"c": _ts(workers_before)})
            counts["workers"] += cur.rowcount
        self._prune_lock_slots()
        return counts

    def _batches(self, sql: str, params: dict[str, Any]) -> Iterator[int]:
        """Run a ``DELETE ... LIMIT 2000`` statement until it removes less than that."""
        while True:
            with self._cursor(transaction=False) as cur:
                cur.execute(sql, params)
                n = cur.rowcount
            yield n
            if n < 2000:
                return

    def _prune_lock_slots(self) -> None:
        """Drop the free slots of plain locks (no ``limits`` row) that only removed tasks
        named. Under a lock of ``lock_slots`` that blocks writers (claims of locked tasks
        wait a moment): an add that names one of them either committed before (its task
        is seen here, the slot stays) or inserts the slot again after."""
        names = sorted(getattr(self, "_pruned_locks", set()))
        self._pruned_locks = set()
        if not names:
            return
        with self._cursor(transaction=True) as cur:
            cur.execute("LOCK TABLE lock_slots IN SHARE ROW EXCLUSIVE MODE")
            cur.execute("""
                WITH used AS (
                    SELECT unnest(locks) AS name FROM tasks
                    WHERE status IN ('pending', 'failed') AND locks && %(names)s::text[]
                    UNION SELECT unnest(locks) FROM tasks
                    WHERE status IN ('assigned', 'running') AND locks && %(names)s::text[]
                    UNION SELECT unnest(locks) FROM tasks
                    WHERE status IN ('failed', 'dead') AND locks && %(names)s::text[])
                DELETE FROM lock_slots s
                WHERE s.name = ANY (%(names)s) AND s.task_id IS NULL
                  AND NOT EXISTS (SELECT 1 FROM limits l WHERE l.name = s.name)
                  AND NOT EXISTS (SELECT 1 FROM used u WHERE u.name = s.name)""",
                        {"names": names})

    def _prune_space(self) -> int:
        """Vacuum what retention emptied (``VACUUM`` blocks no reader or writer): with
        autovacuum on it would come soon anyway; with it off (some servers run so) this
        is what keeps the tables and their indexes compact. Returns 0: the space goes to
        new rows, not back to the file system."""
        with self._cursor(transaction=False) as cur:
            for table in ("tasks", "task_deps", "effects", "steps", "runs", "pruned_tasks",
                          "task_history"):
                cur.execute(f"VACUUM (ANALYZE) {table}")
        return 0
