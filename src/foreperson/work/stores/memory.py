"""In-memory task store: the contract without durability (demos and unit tests)."""

from __future__ import annotations

import dataclasses
import json
import threading
import uuid
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from ...journal import RunRecord, Step, check_run_version, check_version
from ..leases import DEFAULT_LEASE_S
from ..metrics import (
    TimelinePoint,
    changes_of,
    default_until,
    history_points,
    history_window,
)
from ..policy import EFFECT_CLAIMED, EFFECT_DONE, Reason, dead_reason, lease_expired_error
from ..retention import PruneCandidate, PrunesByPrimitives, drop_ended_runs, task_record
from ..store import StoreStats, WorkerTotals, pruned_readd, validate_new_tasks
from ..task import Clock, Status, SystemClock, Task, from_epoch, to_epoch

__all__ = ["MemoryStore"]

_CLAIMABLE = (Status.PENDING, Status.FAILED)


def _json_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_copy(v) for v in value]
    return value


def _copy(task: Task) -> Task:
    """A copy sharing nothing mutable with ``task``: its JSON (payload, result) and
    lists copied, the rest (strings, numbers, datetimes, the status) immutable. About 7
    times cheaper than ``copy.deepcopy``, which a team's every delegation pays twice."""
    new = object.__new__(Task)
    new.__dict__.update(task.__dict__)
    new.payload = _json_copy(task.payload)
    new.result = _json_copy(task.result)
    new.depends_on = list(task.depends_on)
    new.locks = list(task.locks)
    new.errors = [dict(e) for e in task.errors]
    return new


class MemoryStore(PrunesByPrimitives):
    """A :class:`~foreperson.work.store.TaskStore` (and
    :class:`~foreperson.journal.Journal`) held in dicts, guarded by a lock.

    Safe for many threads of one process; everything is lost when the process exits.
    Status transitions follow :mod:`foreperson.work.policy`.

    Args:
        clock: source of time (a :class:`~foreperson.testing.ManualClock` in tests).
    """

    blocking = False
    """Its calls never wait on I/O: a caller on an event loop makes them directly
    (:func:`~foreperson.work.hold.store_call`)."""

    def __init__(self, *, clock: Clock | None = None) -> None:
        self.clock = clock or SystemClock()
        self._tasks: dict[str, Task] = {}
        self._lease_s: dict[str, float] = {}    # task id -> seconds of its current lease
        self._dependents: dict[str, list[str]] = {}
        self._held: dict[str, str] = {}       # lock name -> task id
        self._effects: dict[str, tuple[str, str, str]] = {}   # key -> (task, token, state)
        self._steps: dict[str, dict[str, Step]] = {}     # run id -> key -> step
        self._step_seq = 0
        self._runs: dict[str, RunRecord] = {}
        self._lock = threading.RLock()
        # what the SQL stores keep in indexes and aggregates, so that nothing on the path
        # of a run reads every task
        self._seq: dict[str, int] = {}                    # task id -> insertion number
        self._next_seq = 0
        self._waiting: dict[str, None] = {}               # PENDING/FAILED ids, by _seq
        self._waiting_sorted = True
        self._active: dict[str, None] = {}                # ASSIGNED/RUNNING ids
        self._by_run: dict[str, dict[str, None]] = {}     # run id -> its task ids
        self._counts: dict[tuple[str, Status], int] = {}  # (kind, status) -> tasks
        self._run_time: dict[str, list[float]] = {}       # kind -> [seconds, completed]
        self._totals: dict[str, WorkerTotals] = {}
        self._totals_at: dict[str, float] = {}            # worker -> last counted, epoch s
        self._pruned: dict[str, float] = {}               # tombstones: id -> when

    def __repr__(self) -> str:
        return f"MemoryStore({len(self._tasks)} tasks)"

    # -- helpers ---------------------------------------------------------------
    def _now(self) -> datetime:
        now = from_epoch(self.clock.now())
        assert now is not None
        return now

    def _holds(self, task_id: str, token: str) -> Task | None:
        task = self._tasks.get(task_id)
        if task is None or task.lease_token is None or task.lease_token != token:
            return None
        return task

    def _move(self, task: Task, status: Status) -> None:
        """Set ``task.status``, keeping the counts and the lists of waiting and held."""
        old = task.status
        task.status = status
        if old is status:
            return
        self._counts[(task.kind, old)] = self._counts.get((task.kind, old), 0) - 1
        self._counts[(task.kind, status)] = self._counts.get((task.kind, status), 0) + 1
        self._file(task, old, present=False)
        self._file(task, status, present=True)

    def _file(self, task: Task, status: Status, *, present: bool) -> None:
        """Add ``task`` to (or take it from) the list its ``status`` belongs to."""
        if status in _CLAIMABLE:
            if not present:
                self._waiting.pop(task.id, None)
            elif task.id not in self._waiting:
                if self._waiting and self._seq[next(reversed(self._waiting))] > \
                        self._seq[task.id]:
                    self._waiting_sorted = False      # it goes back to its place in line
                self._waiting[task.id] = None
        elif status.active:
            if present:
                self._active[task.id] = None
            else:
                self._active.pop(task.id, None)

    def _waiting_ids(self) -> list[str]:
        if not self._waiting_sorted:
            self._waiting = dict.fromkeys(sorted(self._waiting, key=self._seq.__getitem__))
            self._waiting_sorted = True
        return list(self._waiting)

    def _is_ready(self, task: Task, now: datetime) -> bool:
        if task.status not in _CLAIMABLE:
            return False
        if task.not_before is not None and task.not_before > now:
            return False
        if any(d in self._tasks and self._tasks[d].status is not Status.COMPLETED
               for d in task.depends_on):     # a pruned dependency had finished
            return False
        return not any(lock in self._held for lock in task.locks)

    def _release_locks(self, task: Task) -> None:
        for lock in task.locks:
            if self._held.get(lock) == task.id:
                del self._held[lock]

    def _drop_lease(self, task: Task) -> None:
        self._release_locks(task)
        task.lease_token = None
        task.assigned_to = None
        task.lease_expires_at = None

    def _record_error(self, task: Task, error: str, now: datetime) -> None:
        task.error = error
        task.errors.append({"attempt": task.attempts, "error": error, "at": now.isoformat(),
                            "worker": task.assigned_to})
        if task.assigned_to:
            self._totals.setdefault(task.assigned_to, WorkerTotals()).failed += 1
            self._totals_at[task.assigned_to] = self.clock.now()

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Hold the store's lock across the calls made inside (see :meth:`TaskStore.batch`)."""
        with self._lock:
            yield

    # -- contract --------------------------------------------------------------
    def add(self, tasks: Sequence[Task]) -> list[str]:
        """See :meth:`TaskStore.add`."""
        with self._lock:
            validate_new_tasks(tasks, lambda ids: {i for i in ids if i in self._tasks},
                               self._tasks)
            for task in tasks:
                if task.id in self._pruned and task.id not in self._tasks:
                    raise pruned_readd(task.id, self._pruned[task.id])
            now = self._now()
            added = []
            for task in tasks:
                if task.id in self._tasks:
                    continue
                stored = _copy(task)
                stored.status = Status.PENDING
                stored.created_at = stored.created_at or now
                stored.assigned_to = stored.lease_token = stored.reason = None
                stored.attempts = 0
                self._tasks[stored.id] = stored
                self._seq[stored.id] = self._next_seq = self._next_seq + 1
                key = (stored.kind, Status.PENDING)
                self._counts[key] = self._counts.get(key, 0) + 1
                self._file(stored, Status.PENDING, present=True)
                if stored.run_id is not None:
                    self._by_run.setdefault(stored.run_id, {})[stored.id] = None
                for dep in dict.fromkeys(stored.depends_on):
                    self._dependents.setdefault(dep, []).append(stored.id)
                added.append(stored.id)
            return added

    def get(self, task_id: str) -> Task | None:
        """See :meth:`TaskStore.get`."""
        with self._lock:
            task = self._tasks.get(task_id)
            return _copy(task) if task else None

    def list_tasks(self, status: Status | None = None, kind: str | None = None,
                   limit: int | None = None, *, run_id: str | None = None,
                   newest_first: bool = False, offset: int = 0) -> list[Task]:
        """See :meth:`TaskStore.list_tasks`."""
        with self._lock:
            if run_id is not None:
                ids: Iterable[str] = self._by_run.get(run_id, {})
            elif status in _CLAIMABLE:
                ids = self._waiting_ids()
            elif status is not None and status.active:
                ids = sorted(self._active, key=self._seq.__getitem__)
            else:
                ids = self._tasks
            chosen = [t for t in map(self._tasks.__getitem__, ids)
                      if (status is None or t.status is status)
                      and (kind is None or t.kind == kind)]
            if newest_first:
                chosen.reverse()
            end = None if limit is None else max(0, offset) + max(0, limit)
            return [_copy(t) for t in chosen[max(0, offset):end]]

    def ready(self, kinds: Collection[str], limit: int) -> list[Task]:
        """See :meth:`TaskStore.ready`."""
        with self._lock:
            now = self._now()
            out: list[Task] = []
            for task_id in self._waiting_ids():
                if len(out) >= limit:
                    break
                task = self._tasks[task_id]
                if task.kind in kinds and self._is_ready(task, now):
                    out.append(_copy(task))
            return out

    def assign(self, pairs: Sequence[tuple[str, str]], *, start: bool | int = False,
               lease_s: float = DEFAULT_LEASE_S) -> list[Task]:
        """See :meth:`TaskStore.assign`."""
        starting = start if not isinstance(start, bool) else (len(pairs) if start else 0)
        with self._lock:
            now = self._now()
            out = []
            for n, (task_id, worker) in enumerate(pairs):
                task = self._tasks.get(task_id)
                if task is None or not self._is_ready(task, now):
                    continue
                start = n < starting
                for lock in task.locks:
                    self._held[lock] = task.id
                lease = task.stale_after or lease_s
                self._lease_s[task.id] = lease
                self._move(task, Status.RUNNING if start else Status.ASSIGNED)
                if start:
                    task.started_at = now
                    task.attempts += 1
                task.assigned_to = worker
                task.heartbeat_at = now
                task.lease_expires_at = now + timedelta(seconds=lease)
                task.lease_token = uuid.uuid4().hex
                out.append(_copy(task))
            return out

    def claim(self, worker: str, kinds: Collection[str], limit: int, *,
              start: bool | int = False, lease_s: float = DEFAULT_LEASE_S) -> list[Task]:
        """See :meth:`TaskStore.claim`."""
        with self._lock:
            ready = self.ready(kinds, limit)
            starting = start if not isinstance(start, bool) else (len(ready) if start else 0)
            return self.assign([(t.id, worker) for t in ready], start=starting,
                               lease_s=lease_s)

    def start(self, task_id: str, token: str) -> bool:
        """See :meth:`TaskStore.start`."""
        with self._lock:
            task = self._holds(task_id, token)
            if task is None:
                return False
            if task.status is Status.ASSIGNED:
                task.attempts += 1
            self._move(task, Status.RUNNING)
            task.started_at = task.heartbeat_at = now = self._now()
            task.lease_expires_at = now + timedelta(seconds=self._lease_s[task.id])
            return True

    def start_many(self, leases: Mapping[str, str]) -> set[str]:
        """See :meth:`TaskStore.start_many`."""
        with self._lock:
            return {task_id for task_id, token in leases.items()
                    if not self.start(task_id, token)}

    def complete_many(self, items: Sequence[tuple[str, str, Any]]) -> set[str]:
        """See :meth:`TaskStore.complete_many`."""
        with self._lock:
            for _, _, result in items:
                json.dumps(result)
            return {task_id for task_id, token, result in items
                    if self.complete(task_id, token, result)}

    def heartbeat(self, leases: Mapping[str, str]) -> set[str]:
        """See :meth:`TaskStore.heartbeat`."""
        with self._lock:
            now = self._now()
            lost = set()
            for task_id, token in leases.items():
                task = self._holds(task_id, token)
                if task is None:
                    lost.add(task_id)
                else:
                    task.heartbeat_at = now
                    task.lease_expires_at = now + timedelta(seconds=self._lease_s[task_id])
            return lost

    def complete(self, task_id: str, token: str, result: Any) -> bool:
        """See :meth:`TaskStore.complete`."""
        with self._lock:
            task = self._holds(task_id, token)
            if task is None:
                return False
            encoded = json.dumps(result)      # TypeError for non-JSON, as every store
            if task.status is Status.ASSIGNED:   # it ran without being marked started
                task.attempts += 1
            task.result = json.loads(encoded)
            task.error = task.reason = None
            task.finished_at = self._now()
            self._move(task, Status.COMPLETED)
            if task.started_at is not None:
                spent = self._run_time.setdefault(task.kind, [0.0, 0])
                spent[0] += (task.finished_at - task.started_at).total_seconds()
                spent[1] += 1
            if task.assigned_to:
                self._totals.setdefault(task.assigned_to, WorkerTotals()).completed += 1
                self._totals_at[task.assigned_to] = self.clock.now()
            self._release_locks(task)
            task.lease_token = None
            task.lease_expires_at = None
            return True

    def fail(self, task_id: str, token: str, error: str, *,
             retry_at: float | None) -> Status | None:
        """See :meth:`TaskStore.fail`."""
        with self._lock:
            task = self._holds(task_id, token)
            if task is None:
                return None
            now = self._now()
            if task.status is Status.ASSIGNED:   # it ran without being marked started
                task.attempts += 1
            self._record_error(task, error, now)
            if retry_at is None:
                self._move(task, Status.DEAD)
                task.reason = dead_reason(task.attempts, task.max_attempts).value
                task.finished_at = now
            else:
                self._move(task, Status.FAILED)
                task.reason = Reason.RETRYING.value
                task.not_before = from_epoch(retry_at)
            self._drop_lease(task)
            return task.status

    def release(self, task_id: str, token: str) -> bool:
        """See :meth:`TaskStore.release`."""
        with self._lock:
            task = self._holds(task_id, token)
            if task is None:
                return False
            self._give_back(task, Reason.RELEASED)
            return True

    def _give_back(self, task: Task, reason: Reason) -> None:
        if task.status is Status.RUNNING:
            task.attempts = max(0, task.attempts - 1)
        self._move(task, Status.PENDING)
        task.reason = reason.value
        self._drop_lease(task)

    def reclaim_stale(self, *, holder_prefix: str | None = None) -> list[str]:
        """See :meth:`TaskStore.reclaim_stale`."""
        with self._lock:
            now = self._now()
            out = []
            for task in [self._tasks[i] for i in self._active]:
                expired = task.lease_expires_at is not None and task.lease_expires_at < now
                known_dead = (holder_prefix is not None and task.assigned_to is not None
                              and task.assigned_to.startswith(holder_prefix))
                if not (expired or known_dead):
                    continue
                self._reclaim(task, now)
                out.append(task.id)
            return out

    def _reclaim(self, task: Task, now: datetime) -> None:
        if task.status is Status.RUNNING:
            self._record_error(task, lease_expired_error(
                task.assigned_to, self._lease_s.get(task.id, 0.0), task.attempts), now)
            if task.attempts >= task.max_attempts:
                self._move(task, Status.DEAD)
                task.reason = Reason.RETRIES_EXHAUSTED.value
                task.finished_at = now
                self._drop_lease(task)
                return
        self._move(task, Status.PENDING)
        task.reason = Reason.LEASE_EXPIRED.value
        self._drop_lease(task)

    def park_blocked(self, after: Collection[str] | None = None) -> list[str]:
        """See :meth:`TaskStore.park_blocked`."""
        with self._lock:
            now = self._now()
            parked: list[str] = []
            if after is None:
                dead = {d for i in self._waiting for d in self._tasks[i].depends_on
                        if d in self._tasks and self._tasks[d].status is Status.DEAD}
                frontier = sorted(dead, key=self._seq.__getitem__)
            else:
                frontier = [i for i in after if i in self._tasks
                            and self._tasks[i].status is Status.DEAD]
            while frontier:
                nxt = []
                for dead_id in frontier:
                    for child_id in self._dependents.get(dead_id, ()):
                        child = self._tasks[child_id]
                        if child.status not in _CLAIMABLE:
                            continue
                        self._move(child, Status.DEAD)
                        child.reason = Reason.DEPENDENCY_DEAD.value
                        child.error = f"dependency {dead_id} is dead"
                        child.finished_at = now
                        parked.append(child_id)
                        nxt.append(child_id)
                frontier = nxt
            return parked

    def retry_dead(self, ids: Sequence[str] | None = None) -> list[str]:
        """See :meth:`TaskStore.retry_dead`."""
        with self._lock:
            if ids is None:
                revived = {t.id for t in self._tasks.values() if t.status is Status.DEAD}
            else:
                revived = {i for i in ids
                           if i in self._tasks and self._tasks[i].status is Status.DEAD}
            frontier = set(revived)
            while frontier:     # dependents parked because of a revived task come back too
                frontier = {c for d in frontier for c in self._dependents.get(d, ())
                            if c not in revived and self._tasks[c].status is Status.DEAD
                            and self._tasks[c].reason == Reason.DEPENDENCY_DEAD.value}
                revived |= frontier
            for task_id in revived:
                task = self._tasks[task_id]
                self._move(task, Status.PENDING)
                task.reason = Reason.REVIVED.value
                task.attempts = 0
                task.not_before = None
                task.finished_at = None
            return [t for t in self._tasks if t in revived]

    def claim_effect(self, key: str, task_id: str, token: str) -> bool:
        """See :meth:`TaskStore.claim_effect`."""
        with self._lock:
            if self._holds(task_id, token) is None:
                return False
            earlier = self._effects.get(key)
            if earlier is not None and (earlier[2] == EFFECT_DONE or earlier[1] == token):
                return False
            self._effects[key] = (task_id, token, EFFECT_CLAIMED)
            return True

    def effect_done(self, key: str, task_id: str, token: str) -> bool:
        """See :meth:`TaskStore.effect_done`."""
        with self._lock:
            if self._holds(task_id, token) is None:
                return False
            self._effects[key] = (task_id, token, EFFECT_DONE)
            return True

    def finished_among(self, ids: Collection[str]) -> dict[str, Task]:
        """See :meth:`TaskStore.finished_among`."""
        with self._lock:
            return {i: _copy(t) for i in ids
                    if (t := self._tasks.get(i)) is not None and t.status.finished}

    def mean_durations(self) -> dict[str, float]:
        """See :meth:`TaskStore.mean_durations`."""
        with self._lock:
            return {kind: total / n for kind, (total, n) in self._run_time.items() if n}

    def stats(self, *, run_id: str | None = None) -> StoreStats:
        """See :meth:`TaskStore.stats`."""
        with self._lock:
            counts = {s: 0 for s in Status}
            if run_id is None:
                for (_, status), n in self._counts.items():
                    counts[status] += n
                unfinished: Iterable[str] = [*self._waiting, *self._active]
            else:
                ids = self._by_run.get(run_id, {})
                for task_id in ids:
                    counts[self._tasks[task_id].status] += 1
                unfinished = [i for i in ids if not self._tasks[i].status.finished]
            active: dict[str, int] = {}
            oldest: datetime | None = None
            for task_id in unfinished:
                t = self._tasks[task_id]
                if t.status.active and t.assigned_to:
                    active[t.assigned_to] = active.get(t.assigned_to, 0) + 1
                if t.created_at is not None and (oldest is None or t.created_at < oldest):
                    oldest = t.created_at
            return StoreStats(counts, active, oldest, self._now())

    # -- observation (ReportsWork) ------------------------------------------------
    def counts_by_kind(self, *, run_id: str | None = None) -> dict[str, dict[Status, int]]:
        """See :meth:`ReportsWork.counts_by_kind`."""
        out: dict[str, dict[Status, int]] = {}
        with self._lock:
            if run_id is None:
                for (kind, status), n in self._counts.items():
                    if n:
                        out.setdefault(kind, dict.fromkeys(Status, 0))[status] = n
                return out
            for task_id in self._by_run.get(run_id, {}):
                t = self._tasks[task_id]
                out.setdefault(t.kind, dict.fromkeys(Status, 0))[t.status] += 1
        return out

    def worker_totals(self, names: Collection[str] | None = None, *,
                      since: float | None = None) -> dict[str, WorkerTotals]:
        """See :meth:`ReportsWork.worker_totals`."""
        with self._lock:
            return {name: replace(totals, last_at=from_epoch(self._totals_at.get(name)))
                    for name, totals in self._totals.items()
                    if (names is not None and name in names)
                    or (names is None and (since is None
                                           or self._totals_at.get(name, 0.0) >= since))}

    def history(self, *, run_id: str | None = None, points: int = 60,
                since: float | None = None, until: float | None = None) -> list[TimelinePoint]:
        """See :meth:`ReportsWork.history` (rebuilt from the records: this store keeps
        everything in memory anyway)."""
        with self._lock:
            ids: Iterable[str] = self._by_run.get(run_id, {}) if run_id is not None \
                else self._tasks
            tasks = [self._tasks[i] for i in ids]
            counts = {s: 0 for s in Status}
            for task in tasks:
                counts[task.status] += 1
            now = self.clock.now()
        if not tasks:
            return []
        changes = changes_of((t.status, t.created_at, t.finished_at) for t in tasks)
        last = max(c[0] for c in changes) if changes else None
        end = until if until is not None else default_until(now, last)
        start, end = history_window(changes, since, end)
        return history_points(counts, (c for c in changes if c[0] > start), start, end, points)

    def dependents(self, task_id: str) -> list[str]:
        """See :meth:`ReportsWork.dependents`."""
        with self._lock:
            return list(self._dependents.get(task_id, []))

    # -- journal ---------------------------------------------------------------
    def get_step(self, run_id: str, key: str) -> Step | None:
        """See :meth:`foreperson.journal.Journal.get_step`."""
        with self._lock:
            step = self._steps.get(run_id, {}).get(key)
        return None if step is None else check_version(step)

    def put_step(self, step: Step) -> Step:
        """See :meth:`foreperson.journal.Journal.put_step`."""
        result = json.loads(json.dumps(step.result, allow_nan=False))   # TypeError: not JSON
        with self._lock:
            steps = self._steps.setdefault(step.run_id, {})
            earlier = steps.get(step.key)
            if earlier is not None:
                return check_version(earlier)
            self._step_seq += 1
            stored = Step(step.run_id, step.key, step.kind, step.digest, result, step.version,
                          self._now(), self._step_seq, _json_copy(step.request))
            steps[step.key] = stored
            return stored

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
        with self._lock:
            return bool(self._steps.get(run_id))

    def list_steps(self, run_id: str) -> list[Step]:
        """See :meth:`foreperson.journal.Journal.list_steps`."""
        with self._lock:
            steps = sorted(self._steps.get(run_id, {}).values(), key=lambda s: s.seq or 0)
        return [check_version(s) for s in steps]

    # -- runs (foreperson.journal.RunLedger) ------------------------------------
    def create_run(self, record: RunRecord) -> RunRecord:
        """See :meth:`foreperson.journal.RunLedger.create_run`."""
        data = json.loads(json.dumps(record.input, allow_nan=False))   # TypeError: not JSON
        with self._lock:
            earlier = self._runs.get(record.run_id)
            if earlier is not None:
                return check_run_version(earlier)
            now = self._now()
            stored = replace(record, input=data, created_at=now, updated_at=now)
            self._runs[record.run_id] = stored
            return stored

    def get_run(self, run_id: str) -> RunRecord | None:
        """See :meth:`foreperson.journal.RunLedger.get_run`."""
        with self._lock:
            record = self._runs.get(run_id)
        return None if record is None else check_run_version(record)

    def list_runs(self, *, user_id: str | None = None, status: str | None = None,
                  limit: int = 100) -> list[RunRecord]:
        """See :meth:`foreperson.journal.RunLedger.list_runs`."""
        with self._lock:
            records = [r for r in reversed(self._runs.values())
                       if (user_id is None or r.user_id == user_id)
                       and (status is None or r.status == status)]
        records.sort(key=lambda r: r.created_at or self._now(), reverse=True)
        return records[:max(0, limit)]

    def claim_run(self, run_id: str, owner: str, lease_s: float, *,
                  take_from: str | None = None) -> RunRecord | None:
        """See :meth:`foreperson.journal.RunLedger.claim_run`."""
        with self._lock:
            record = self._runs.get(run_id)
            if record is None:
                return None
            now = self._now()
            free = (record.owner is None or record.owner in (owner, take_from)
                    or record.lease_expires_at is None or record.lease_expires_at < now)
            if not free:
                return None
            record = replace(record, owner=owner, status="running", updated_at=now,
                             lease_expires_at=now + timedelta(seconds=lease_s))
            self._runs[run_id] = record
            return record

    def renew_run(self, run_id: str, owner: str, lease_s: float) -> bool:
        """See :meth:`foreperson.journal.RunLedger.renew_run`."""
        with self._lock:
            record = self._runs.get(run_id)
            if record is None or record.owner != owner:
                return False
            self._runs[run_id] = replace(
                record, lease_expires_at=self._now() + timedelta(seconds=lease_s))
            return True

    def end_run(self, run_id: str, owner: str, status: str, *, result: Any = None,
                error: str | None = None, stop_reason: str | None = None) -> bool:
        """See :meth:`foreperson.journal.RunLedger.end_run`."""
        data = json.loads(json.dumps(result, allow_nan=False))   # TypeError: not JSON
        with self._lock:
            record = self._runs.get(run_id)
            if record is None or record.owner != owner:
                return False
            self._runs[run_id] = replace(
                record, status=status, result=data, error=error, stop_reason=stop_reason,
                owner=None, lease_expires_at=None, updated_at=self._now())
            return True

    # -- retention (foreperson.work.retention.Prunes) -----------------------------
    prune_transaction_s = 0.005
    """Seconds one retention step may hold the store's lock."""

    def _prune_candidates(self, cutoff: float, after: tuple[float, int], limit: int
                          ) -> list[PruneCandidate]:
        with self._lock:
            found = []
            for task in self._tasks.values():
                done = to_epoch(task.finished_at)
                if task.status.finished and done is not None and done < cutoff:
                    key = (done, self._seq[task.id])
                    if key > after:
                        found.append(PruneCandidate(*key, task.id, task.run_id,
                                                    task.status.value))
            return sorted(found)[:limit]

    def _prune_runs_over(self, run_ids: list[str], cutoff: float) -> set[str]:
        with self._lock:
            over = set()
            for run_id in run_ids:
                tasks = [self._tasks[i] for i in self._by_run.get(run_id, {})]
                if not tasks or any(not t.status.finished for t in tasks):
                    continue
                if max(to_epoch(t.finished_at) or 0.0 for t in tasks) >= cutoff:
                    continue
                record = self._runs.get(run_id)
                steps = self._steps.get(run_id, {})
                if record is not None and (record.status not in ("completed", "failed")
                                           or (to_epoch(record.updated_at) or 0) >= cutoff):
                    continue
                if record is None and "start" in steps and "end" not in steps:
                    continue
                over.add(run_id)
            return over

    def _prune_needed(self, ids: list[str]) -> set[str]:
        with self._lock:
            return {i for i in ids if any(not self._tasks[c].status.finished
                                          for c in self._dependents.get(i, ()))}

    def _prune_remove(self, ids: list[str], *, rows: bool
                      ) -> tuple[dict[str, int], list[dict[str, Any]]]:
        counts = {"tasks": 0, "edges": 0, "effects": 0, "runs": 0, "agent_runs": 0,
                  "steps": 0}
        records: list[dict[str, Any]] = []
        with self._lock:
            gone = [self._tasks[i] for i in ids if i in self._tasks
                    and self._tasks[i].status.finished]
            now = self.clock.now()
            for task in gone:
                if rows:
                    records.append(task_record(_copy(task)))
                del self._tasks[task.id]
                del self._seq[task.id]
                self._pruned[task.id] = now
                self._counts[(task.kind, task.status)] -= 1
                if task.status is Status.COMPLETED and task.started_at and task.finished_at:
                    spent = self._run_time[task.kind]
                    spent[0] -= (task.finished_at - task.started_at).total_seconds()
                    spent[1] -= 1
                counts["tasks"] += 1
                counts["edges"] += len(set(task.depends_on)) + len(
                    self._dependents.pop(task.id, []))
                for dep in set(task.depends_on):
                    if task.id in self._dependents.get(dep, []):
                        self._dependents[dep].remove(task.id)
                for key in [k for k, v in self._effects.items() if v[0] == task.id]:
                    del self._effects[key]
                    counts["effects"] += 1
                if task.run_id is not None:
                    members = self._by_run.get(task.run_id, {})
                    members.pop(task.id, None)
                    if not members:
                        self._by_run.pop(task.run_id, None)
                        counts["runs"] += 1
                        self._drop_run(task.run_id, counts, records if rows else None)
        return counts, records

    def _drop_run(self, run_id: str, counts: dict[str, int],
                  records: list[dict[str, Any]] | None) -> None:
        record = self._runs.get(run_id)
        steps = self._steps.pop(run_id, {})
        if records is not None:
            if record is not None and record.status in ("completed", "failed"):
                records.append({"record": "run", **dataclasses.asdict(record)})
            records += [{"record": "step", **dataclasses.asdict(s)} for s in steps.values()]
        counts["steps"] += len(steps)
        if record is not None and record.status in ("completed", "failed"):
            del self._runs[run_id]
            counts["agent_runs"] += 1

    def _prune_ledger(self, cutoff: float, limit: int, *, rows: bool, dry_run: bool
                      ) -> tuple[dict[str, int], list[dict[str, Any]]]:
        counts = {"agent_runs": 0, "journals": 0, "steps": 0, "more": 0}
        records: list[dict[str, Any]] = []
        with self._lock:
            durable = [r.run_id for r in self._runs.values()
                       if r.status in ("completed", "failed")
                       and (to_epoch(r.updated_at) or 0) < cutoff
                       and r.run_id not in self._by_run][:limit]
            ended = [run_id for run_id, steps in self._steps.items()
                     if "end" in steps and (to_epoch(steps["end"].created_at) or 0) < cutoff
                     and run_id not in self._runs and run_id not in self._by_run][:limit]
            if dry_run:
                return {"agent_runs": len(durable), "journals": len(ended)}, records
            drop_ended_runs(durable + ended, lambda run_id: self._drop_run(
                run_id, counts, records if rows else None), counts)
        return counts, records

    def _prune_aggregates(self, history_before: float, workers_before: float,
                          tombstones_before: float, *, dry_run: bool) -> dict[str, int]:
        if dry_run:
            return {}
        with self._lock:
            old = [i for i, at in self._pruned.items() if at < tombstones_before]
            for task_id in old:
                del self._pruned[task_id]
            gone = [w for w, at in self._totals_at.items() if at < workers_before]
            for name in gone:
                del self._totals[name], self._totals_at[name]
            return {"tombstones": len(old), "workers": len(gone)}

    def _prune_space(self) -> int:
        return 0

    def close(self) -> None:
        """Nothing to release."""
