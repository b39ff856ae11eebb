"""The dispatcher: who may take how much, and what is in flight (seed 000, "the supervisor
decides who does what").

It owns the one book of in-flight work: every task a worker of this process holds,
keyed by ``(task id, lease token)``, so a task that was reclaimed while its stale attempt
still runs here and was claimed again here is two entries, and the old one's slot is
freed when the old attempt returns (issue: a reclaimed-but-alive attempt never leaks a
worker slot). It also owns the slots (capacity, held work and its estimated seconds),
the duration estimates learned per kind, and placement: pick a worker per task with a
strategy (:mod:`~foreperson.work.strategies`), or let workers pull into their free slots.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .store import ListsReadyBriefly, ReadyTask, TaskStore
from .strategies import WorkerSlot, pick_worker
from .task import Task
from .worker import Worker

__all__ = ["DEFAULT_ESTIMATE_S", "LOOK_AHEAD_S", "Dispatcher", "Flight"]

DEFAULT_ESTIMATE_S = 1.0
"""Seconds assumed for a kind that has never run (its estimate is learned as it runs)."""

LOOK_AHEAD_S = 0.1
"""Beyond one waiting task per consumer, a worker is prefetched only as many tasks as its
consumers finish in this many seconds (measured from its own calls): short tasks are
claimed many per round trip, long ones never wait in one process while another is idle."""


@dataclass
class Flight:
    """One attempt this process holds.

    Attributes:
        worker: the holder's name.
        kind: the task's kind.
        estimate_s: its estimated seconds (counted as the worker's load).
        lease_s: its lease in seconds (how often it must be heartbeaten).
        began: ``time.monotonic()`` when it was claimed.
        suspended: True while the attempt waits on child tasks and lends its slot.
    """

    worker: str
    kind: str
    estimate_s: float
    lease_s: float
    began: float
    suspended: bool = False


class Dispatcher:
    """Slots, the in-flight book, estimates and placement, behind one lock (seed 000's
    loop calls in from worker threads).

    Args:
        strategy: a name from :data:`~foreperson.work.strategies.STRATEGIES`.
        lease_s: the lease of a task that has no ``stale_after`` of its own, seconds.
        pull: workers claim for themselves into their free slots instead of being
            chosen per task (worker processes: placement emerges from free room).
        claim_batch: most tasks claimed in one store transaction; None (default):
            16, or half of all slots when there are more (64 workers are fed in two
            transactions, not eight).
    """

    def __init__(self, strategy: str, *, lease_s: float, pull: bool = False,
                 claim_batch: int | None = None) -> None:
        self.strategy = strategy
        self.lease_s = lease_s
        self.pull = pull
        self._auto_batch = claim_batch is None
        self.claim_batch = 16 if claim_batch is None else claim_batch
        self.workers: dict[str, Worker] = {}
        self._slots: dict[str, WorkerSlot] = {}
        self._flights: dict[tuple[str, str], Flight] = {}
        self._rr: dict[str, int] = {}
        self._estimates: dict[str, float] | None = None
        self._no_prefetch: set[str] = set()
        self._call_s: dict[str, float] = {}
        self.lock = threading.RLock()

    # -- roster ----------------------------------------------------------------
    def add(self, worker: Worker) -> None:
        """Give ``worker`` its slots."""
        with self.lock:
            self.workers[worker.name] = worker
            self._slots[worker.name] = WorkerSlot(worker.name, worker.can_do,
                                                  dict(worker.skill),
                                                  capacity=worker.slots)
            if self._auto_batch:
                total = sum(w.slots for w in self.workers.values())
                self.claim_batch = max(16, total // 2)

    def kinds(self) -> set[str]:
        """Kinds some worker of this dispatcher can do."""
        with self.lock:
            return set().union(*(w.can_do for w in self.workers.values()))

    # -- estimates -------------------------------------------------------------
    def estimate_s(self, task: Task | ReadyTask, store: TaskStore) -> float:
        """Expected seconds for ``task``: its ``estimate_s``, else the mean learned for
        its kind (read from the store once, then updated as attempts finish), else
        :data:`DEFAULT_ESTIMATE_S`."""
        if task.estimate_s is not None:
            return task.estimate_s
        if self._estimates is None:
            self._estimates = dict(store.mean_durations())
        return self._estimates.get(task.kind, DEFAULT_ESTIMATE_S)

    def learn(self, kind: str, seconds: float) -> None:
        """Fold one finished attempt's duration into its kind's estimate (EWMA, 0.2)."""
        with self.lock:
            estimates = self._estimates if self._estimates is not None else {}
            old = estimates.get(kind)
            estimates[kind] = seconds if old is None else 0.8 * old + 0.2 * seconds
            self._estimates = estimates

    def ran(self, worker: str, seconds: float) -> None:
        """Fold one call of ``worker``'s function (a task, or a batch), ``seconds`` long
        without any time spent waiting for a slot, into its mean (EWMA, 0.2), which sizes
        its look-ahead (:data:`LOOK_AHEAD_S`)."""
        with self.lock:
            old = self._call_s.get(worker)
            self._call_s[worker] = seconds if old is None else 0.8 * old + 0.2 * seconds

    def _look_ahead(self, worker: Worker, extra: int) -> int:
        """Calls ``worker`` may hold waiting (tasks, or batches for a batch worker):
        ``extra``, but more than one per consumer only as many as its consumers finish
        in :data:`LOOK_AHEAD_S` (one per consumer until a call has been timed)."""
        if extra <= worker.concurrency:
            return extra
        call_s = self._call_s.get(worker.name)
        if call_s is None:
            return worker.concurrency
        fits = int(LOOK_AHEAD_S * worker.concurrency / max(call_s, 1e-6))
        return max(worker.concurrency, min(extra, fits))

    # -- the in-flight book ----------------------------------------------------
    def hold(self, task: Task, store: TaskStore) -> None:
        """Book a claimed task against its worker's slot."""
        with self.lock:
            estimate = self.estimate_s(task, store)
            slot = self._slots[task.assigned_to or ""]
            slot.active += 1
            slot.load_s += estimate
            self._flights[(task.id, task.lease_token or "")] = Flight(
                slot.name, task.kind, estimate, task.stale_after or self.lease_s,
                time.monotonic())

    def let_go(self, task_id: str, token: str) -> Flight | None:
        """Take an attempt out of the book and free its slot (it settled, was released,
        or its lease was lost). Returns its flight, or None when it was not booked."""
        with self.lock:
            flight = self._flights.pop((task_id, token), None)
            if flight is None:
                return None
            slot = self._slots.get(flight.worker)
            if slot is not None:
                if not flight.suspended:
                    slot.active -= 1
                slot.load_s = max(0.0, slot.load_s - flight.estimate_s)
            self._no_prefetch.discard(flight.worker)
            return flight

    def holds(self, task_id: str, token: str) -> bool:
        """Whether this attempt is still booked here."""
        with self.lock:
            return (task_id, token) in self._flights

    def token_of(self, task_id: str) -> str:
        """The lease token of the newest booked attempt of ``task_id`` ("" when none)."""
        with self.lock:
            tokens = [token for (tid, token) in self._flights if tid == task_id]
            return tokens[-1] if tokens else ""

    def held(self) -> list[tuple[str, str]]:
        """Every booked attempt, ``(task id, token)``."""
        with self.lock:
            return list(self._flights)

    def leases(self, hung_after: float | None = None) -> tuple[dict[str, str], list[str]]:
        """What to heartbeat: ``{task id: token}`` of the booked attempts (the newest
        token when a task is booked twice: the older lease is gone anyway), leaving out
        attempts that have run longer than ``hung_after`` times their lease.

        Returns:
            ``(leases, hung)``: the leases to renew, and the ids left out as hung.
        """
        now = time.monotonic()
        with self.lock:
            leases: dict[str, str] = {}
            hung: list[str] = []
            for (task_id, token), flight in self._flights.items():
                if hung_after is not None and now - flight.began > hung_after * flight.lease_s:
                    hung.append(task_id)
                else:
                    leases[task_id] = token
            return leases, hung

    def shortest_lease_s(self) -> float:
        """The shortest lease held, seconds (the default lease when nothing is held)."""
        with self.lock:
            return min((f.lease_s for f in self._flights.values()), default=self.lease_s)

    def busy(self) -> bool:
        """Whether anything is in flight."""
        with self.lock:
            return bool(self._flights)

    def suspend(self, task_id: str, token: str) -> Flight | None:
        """The attempt waits on child tasks: lend its slot to other work."""
        with self.lock:
            flight = self._flights.get((task_id, token))
            if flight is None or flight.suspended:
                return None
            flight.suspended = True
            self._slots[flight.worker].active -= 1
            return flight

    def resume(self, task_id: str, token: str) -> None:
        """The attempt's children finished: it takes a slot again (possibly beyond the
        worker's capacity for a moment; no new work is claimed until it is back)."""
        with self.lock:
            flight = self._flights.get((task_id, token))
            if flight is not None and flight.suspended:
                flight.suspended = False
                self._slots[flight.worker].active += 1

    def no_prefetch(self, worker: str) -> None:
        """Stop prefetching for ``worker`` until one of its attempts ends (its
        prefetched task waited too long behind a long one)."""
        with self.lock:
            self._no_prefetch.add(worker)

    # -- placement -------------------------------------------------------------
    def claim(self, store: TaskStore, *, start: bool, extra: int,
              stopping: bool = False) -> list[tuple[Worker, Task]]:
        """Claim ready tasks into free slots (each worker may hold ``slots + extra``,
        ``extra`` counted in batches for a batch worker) and book them.

        With ``start``, a task that goes to a free consumer slot is claimed RUNNING (its
        attempt counted in the claim's own transaction, before its function can begin,
        so a task that kills its worker every time still ends DEAD), and the
        ``extra`` prefetched ones ASSIGNED (counted only when they start: a process
        killed while holding them burns none of their attempts).

        Pull mode: each worker with room claims its kinds itself. Otherwise the ready
        tasks are looked at twice the free room ahead, the longest first under
        ``balanced``, and each is given a worker by the strategy.

        Returns:
            ``(worker, task)`` pairs, the tasks carrying their lease tokens.

        Raises:
            StoreError: the store failed (nothing stays booked).
        """
        with self.lock:
            if stopping:
                return []
            free = self._free_slots(extra)
            if not free:
                return []
            claimed = (self._pull(store, free, start) if self.pull
                       else self._place(store, free, start))
            for task in claimed:
                self.hold(task, store)
            return [(self.workers[t.assigned_to or ""], t) for t in claimed]

    def _free_slots(self, extra: int) -> list[WorkerSlot]:
        for slot in self._slots.values():
            worker = self.workers[slot.name]
            slot.capacity = worker.slots + (0 if slot.name in self._no_prefetch else
                                            self._look_ahead(worker, extra)
                                            * (worker.batch_size or 1))
        return [s for s in self._slots.values() if s.free()]

    def has_room(self, extra: int) -> bool:
        """Whether some worker could take another task now (a free slot, or room for
        ``extra`` prefetched tasks): if not, a claim would find nothing to fill."""
        with self.lock:
            return bool(self._free_slots(extra))

    def _idle_consumers(self, slot: WorkerSlot) -> int:
        return max(0, self.workers[slot.name].slots - slot.active)

    def _batch_of(self, slot: WorkerSlot) -> int:
        """Most tasks claimed for ``slot`` in one transaction: a whole batch at least."""
        return max(self.claim_batch, self.workers[slot.name].batch_size or 1)

    def pull_plan(self, extra: int, stopping: bool = False) -> tuple[Worker, int, int]:
        """For a process with one pulling worker: ``(worker, room, start now)``, the
        tasks it may claim into its free slots and how many of them start at once (see
        :meth:`claim`). Room is 0 while stopping."""
        with self.lock:
            (slot,) = self._slots.values()
            self._free_slots(extra)
            room = 0 if stopping else min(max(0, slot.capacity - slot.active),
                                          self.claim_batch)
            return self.workers[slot.name], room, min(self._idle_consumers(slot), room)

    def _pull(self, store: TaskStore, free: list[WorkerSlot], start: bool) -> list[Task]:
        claimed: list[Task] = []
        for slot in free:
            room = min(slot.capacity - slot.active, self._batch_of(slot))
            now = min(self._idle_consumers(slot), room) if start else 0
            claimed += store.claim(slot.name, slot.can_do, room, start=now,
                                   lease_s=self.lease_s)
        return claimed

    def _place(self, store: TaskStore, free: list[WorkerSlot], start: bool) -> list[Task]:
        kinds = set().union(*(s.can_do for s in free))
        room = min(sum(s.capacity - s.active for s in free),
                   max(self._batch_of(s) for s in free))
        ready: Sequence[Task | ReadyTask] = (   # look ahead: longest first
            store.ready_brief(kinds, room * 2) if isinstance(store, ListsReadyBriefly)
            else store.ready(kinds, room * 2))
        if self.strategy == "balanced":
            ready = sorted(ready, key=lambda t: self.estimate_s(t, store), reverse=True)
        idle = {s.name: self._idle_consumers(s) if start else 0 for s in free}
        now: list[tuple[str, str]] = []
        later: list[tuple[str, str]] = []
        for task_id, name, _ in self._pick(store, ready, room):
            (now if idle.get(name, 0) > 0 else later).append((task_id, name))
            idle[name] = idle.get(name, 0) - 1
        return store.assign(now + later, start=len(now), lease_s=self.lease_s)

    def _pick(self, store: TaskStore, ready: Iterable[Task | ReadyTask],
              room: int) -> list[tuple[str, str, float]]:
        """Choose a worker per task; the load is counted only while choosing."""
        pairs: list[tuple[str, str, float]] = []
        slots = list(self._slots.values())
        try:
            for task in ready:
                if len(pairs) >= room:
                    break
                slot = pick_worker(self.strategy, task.kind, slots, self._rr)
                if slot is None:
                    continue
                estimate = self.estimate_s(task, store)
                slot.active += 1            # tentative, so the next pick sees it
                slot.load_s += estimate
                pairs.append((task.id, slot.name, estimate))
        finally:
            for _, name, estimate in pairs:
                self._slots[name].active -= 1
                self._slots[name].load_s -= estimate
        return pairs
