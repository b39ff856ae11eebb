"""In-memory task store: the contract without durability (demos and unit tests)."""

from __future__ import annotations

import copy
import json
import threading
import uuid
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from ...journal import Step, check_version
from ..store import StoreStats, validate_new_tasks
from ..task import Clock, Status, SystemClock, Task, from_epoch

__all__ = ["MemoryStore"]

_CLAIMABLE = (Status.PENDING, Status.FAILED)


class MemoryStore:
    """A :class:`~foreperson.work.store.TaskStore` held in a dict, guarded by a lock.

    Safe for many threads of one process; everything is lost when the process exits.

    Args:
        clock: source of time (a :class:`~foreperson.testing.ManualClock` in tests).
    """

    def __init__(self, *, clock: Clock | None = None) -> None:
        self.clock = clock or SystemClock()
        self._tasks: dict[str, Task] = {}
        self._held: dict[str, str] = {}       # lock name -> task id
        self._effects: set[str] = set()
        self._steps: dict[str, dict[str, Step]] = {}     # run id -> key -> step
        self._step_seq = 0
        self._lock = threading.RLock()

    # -- helpers ---------------------------------------------------------------
    def _now(self):
        return from_epoch(self.clock.now())

    def _holds(self, task_id: str, token: str) -> Task | None:
        task = self._tasks.get(task_id)
        if task is None or task.lease_token is None or task.lease_token != token:
            return None
        return task

    def _is_ready(self, task: Task, now) -> bool:
        if task.status not in _CLAIMABLE:
            return False
        if task.not_before is not None and task.not_before > now:
            return False
        if any(self._tasks[d].status is not Status.COMPLETED for d in task.depends_on):
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

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Hold the store's lock across the calls made inside (see :meth:`TaskStore.batch`)."""
        with self._lock:
            yield

    # -- contract --------------------------------------------------------------
    def add(self, tasks: Sequence[Task]) -> list[str]:
        """See :meth:`TaskStore.add`."""
        with self._lock:
            validate_new_tasks(tasks, lambda ids: {i for i in ids if i in self._tasks})
            now = self._now()
            added = []
            for task in tasks:
                if task.id in self._tasks:
                    continue
                stored = copy.deepcopy(task)
                stored.status = Status.PENDING
                stored.created_at = stored.created_at or now
                self._tasks[stored.id] = stored
                added.append(stored.id)
            return added

    def get(self, task_id: str) -> Task | None:
        """See :meth:`TaskStore.get`."""
        with self._lock:
            task = self._tasks.get(task_id)
            return copy.deepcopy(task) if task else None

    def list_tasks(self, status: Status | None = None, kind: str | None = None,
                   limit: int | None = None) -> list[Task]:
        """See :meth:`TaskStore.list_tasks`."""
        with self._lock:
            out = [copy.deepcopy(t) for t in self._tasks.values()
                   if (status is None or t.status is status) and (kind is None or t.kind == kind)]
            return out if limit is None else out[:limit]

    def ready(self, kinds: Collection[str], limit: int) -> list[Task]:
        """See :meth:`TaskStore.ready`."""
        with self._lock:
            now = self._now()
            out = []
            for task in self._tasks.values():
                if len(out) >= limit:
                    break
                if task.kind in kinds and self._is_ready(task, now):
                    out.append(copy.deepcopy(task))
            return out

    def assign(self, pairs: Sequence[tuple[str, str]], *, start: bool = False) -> list[Task]:
        """See :meth:`TaskStore.assign`."""
        with self._lock:
            now = self._now()
            out = []
            for task_id, worker in pairs:
                task = self._tasks.get(task_id)
                if task is None or not self._is_ready(task, now):
                    continue
                for lock in task.locks:
                    self._held[lock] = task.id
                task.status = Status.RUNNING if start else Status.ASSIGNED
                if start:
                    task.started_at = now
                task.assigned_to = worker
                task.attempts += 1
                task.heartbeat_at = now
                task.lease_token = uuid.uuid4().hex
                out.append(copy.deepcopy(task))
            return out

    def claim(self, worker: str, kinds: Collection[str], limit: int, *,
              start: bool = False) -> list[Task]:
        """See :meth:`TaskStore.claim`."""
        with self._lock:
            return self.assign([(t.id, worker) for t in self.ready(kinds, limit)], start=start)

    def start(self, task_id: str, token: str) -> bool:
        """See :meth:`TaskStore.start`."""
        with self._lock:
            task = self._holds(task_id, token)
            if task is None:
                return False
            task.status = Status.RUNNING
            task.started_at = task.heartbeat_at = self._now()
            return True

    def start_many(self, leases: Mapping[str, str]) -> set[str]:
        """Mark many held tasks RUNNING; returns the ids whose lease is gone."""
        with self._lock:
            return {task_id for task_id, token in leases.items()
                    if not self.start(task_id, token)}

    def complete_many(self, items: Sequence[tuple[str, str, Any]]) -> set[str]:
        """Complete many held tasks; returns the ids whose result was stored.

        Raises:
            TypeError: a result is not JSON-serialisable (nothing is stored).
        """
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
            return lost

    def complete(self, task_id: str, token: str, result: Any) -> bool:
        """See :meth:`TaskStore.complete`."""
        with self._lock:
            task = self._holds(task_id, token)
            if task is None:
                return False
            encoded = json.dumps(result)      # TypeError for non-JSON, as every store
            task.status = Status.COMPLETED
            task.result = json.loads(encoded)
            task.error = None
            task.finished_at = self._now()
            self._release_locks(task)
            task.lease_token = None
            return True

    def fail(self, task_id: str, token: str, error: str, *,
             retry_at: float | None) -> Status | None:
        """See :meth:`TaskStore.fail`."""
        with self._lock:
            task = self._holds(task_id, token)
            if task is None:
                return None
            now = self._now()
            task.error = error
            task.errors.append({"attempt": task.attempts, "error": error,
                                "at": now.isoformat()})
            if retry_at is None:
                task.status = Status.DEAD
                task.finished_at = now
            else:
                task.status = Status.FAILED
                task.not_before = from_epoch(retry_at)
            self._drop_lease(task)
            return task.status

    def release(self, task_id: str, token: str) -> bool:
        """See :meth:`TaskStore.release`."""
        with self._lock:
            task = self._holds(task_id, token)
            if task is None:
                return False
            task.status = Status.PENDING
            task.attempts = max(0, task.attempts - 1)
            self._drop_lease(task)
            return True

    def reclaim_stale(self, stale_after_s: float) -> list[str]:
        """See :meth:`TaskStore.reclaim_stale`."""
        with self._lock:
            now = self._now()
            out = []
            for task in self._tasks.values():
                if not task.status.active or task.heartbeat_at is None:
                    continue
                if (now - task.heartbeat_at).total_seconds() <= stale_after_s:
                    continue
                error = (f"worker {task.assigned_to} stopped heartbeating for more than "
                         f"{stale_after_s:g} s (attempt {task.attempts})")
                task.errors.append({"attempt": task.attempts, "error": error,
                                    "at": now.isoformat()})
                task.error = error
                if task.attempts >= task.max_attempts:
                    task.status = Status.DEAD
                    task.finished_at = now
                else:
                    task.status = Status.PENDING
                self._drop_lease(task)
                out.append(task.id)
            return out

    def park_blocked(self) -> list[str]:
        """See :meth:`TaskStore.park_blocked`."""
        with self._lock:
            now = self._now()
            parked: list[str] = []
            changed = True
            while changed:
                changed = False
                for task in self._tasks.values():
                    if task.status.finished or task.status.active:
                        continue
                    dead = [d for d in task.depends_on if self._tasks[d].status is Status.DEAD]
                    if dead:
                        task.status = Status.DEAD
                        task.error = f"dependency {dead[0]} is dead"
                        task.finished_at = now
                        parked.append(task.id)
                        changed = True
            return parked

    def retry_dead(self, ids: Sequence[str] | None = None) -> list[str]:
        """See :meth:`TaskStore.retry_dead`."""
        with self._lock:
            if ids is None:
                chosen = [t for t in self._tasks.values() if t.status is Status.DEAD]
            else:
                chosen = [self._tasks[i] for i in ids
                          if i in self._tasks and self._tasks[i].status is Status.DEAD]
            revived = {t.id for t in chosen}
            changed = True
            while changed:     # dependents parked because of a revived task come back too
                changed = False
                for task in self._tasks.values():
                    if (task.id not in revived and task.status is Status.DEAD
                            and (task.error or "").startswith("dependency ")
                            and revived & set(task.depends_on)):
                        revived.add(task.id)
                        changed = True
            for task_id in revived:
                task = self._tasks[task_id]
                task.status = Status.PENDING
                task.attempts = 0
                task.not_before = None
                task.finished_at = None
            return [t for t in self._tasks if t in revived]

    def claim_effect(self, key: str, task_id: str, token: str) -> bool:
        """See :meth:`TaskStore.claim_effect`."""
        with self._lock:
            if self._holds(task_id, token) is None or key in self._effects:
                return False
            self._effects.add(key)
            return True

    def mean_durations(self) -> dict[str, float]:
        """See :meth:`TaskStore.mean_durations`."""
        with self._lock:
            sums: dict[str, list[float]] = {}
            for t in self._tasks.values():
                if t.status is Status.COMPLETED and t.started_at and t.finished_at:
                    acc = sums.setdefault(t.kind, [0.0, 0])
                    acc[0] += (t.finished_at - t.started_at).total_seconds()
                    acc[1] += 1
            return {k: s / n for k, (s, n) in sums.items()}

    def stats(self) -> StoreStats:
        """See :meth:`TaskStore.stats`."""
        with self._lock:
            counts = {s: 0 for s in Status}
            active: dict[str, int] = {}
            oldest = None
            for t in self._tasks.values():
                counts[t.status] += 1
                if t.status.active and t.assigned_to:
                    active[t.assigned_to] = active.get(t.assigned_to, 0) + 1
                if not t.status.finished and (oldest is None or t.created_at < oldest):
                    oldest = t.created_at
            return StoreStats(counts, active, oldest, self._now())

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
                          self._now(), self._step_seq)
            steps[step.key] = stored
            return stored

    def list_steps(self, run_id: str) -> list[Step]:
        """See :meth:`foreperson.journal.Journal.list_steps`."""
        with self._lock:
            steps = sorted(self._steps.get(run_id, {}).values(), key=lambda s: s.seq or 0)
        return [check_version(s) for s in steps]

    def close(self) -> None:
        """Nothing to release."""
