"""Lease renewal for the delegation tasks held in this process: one daemon thread renews
every held lease a third of its length before it would expire, so a delegation costs a
dict insert and removal on the event loop instead of a heartbeat task of its own.

A store's ``heartbeat`` is a blocking call (the work layer's run loop heartbeats from a
thread too); a lease the store says is gone is remembered, and the delegation reports
it when it settles.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from ..work import TaskStore

__all__ = ["LEASES", "LeaseKeeper"]

log = logging.getLogger("foreperson.teams")


@dataclass
class _Held:
    store: TaskStore
    task_id: str
    token: str
    lease_s: float
    renew_at: float = field(default=0.0)


class LeaseKeeper:
    """Renews the leases of held delegation tasks from one daemon thread."""

    def __init__(self) -> None:
        self._held: dict[tuple[int, str], _Held] = {}
        self._lost: set[tuple[int, str]] = set()
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._next = float("inf")     # when the thread wakes next (monotonic seconds)

    def hold(self, store: TaskStore, task_id: str, token: str, lease_s: float) -> None:
        """Keep renewing ``task_id``'s lease (``token``) until :meth:`release`."""
        held = _Held(store, task_id, token, lease_s, time.monotonic() + lease_s / 3)
        with self._lock:
            self._held[(id(store), task_id)] = held
            self._lost.discard((id(store), task_id))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="foreperson-leases",
                                                daemon=True)
                self._thread.start()
            elif held.renew_at < self._next:
                self._wake.notify()

    def release(self, store: TaskStore, task_id: str) -> bool:
        """Stop renewing; returns False when the store said the lease was gone."""
        key = (id(store), task_id)
        with self._lock:
            self._held.pop(key, None)
            if key in self._lost:
                self._lost.discard(key)
                return False
            return True

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._held:
                    self._next = time.monotonic() + 30.0
                    self._wake.wait(timeout=30.0)
                    if not self._held:
                        self._thread = None
                        self._next = float("inf")
                        return
                    continue
                now = time.monotonic()
                due = [h for h in self._held.values() if h.renew_at <= now]
                if not due:
                    self._next = min(h.renew_at for h in self._held.values())
                    self._wake.wait(timeout=max(0.01, self._next - now))
                    continue
                for held in due:
                    held.renew_at = now + held.lease_s / 3
            for held in due:
                try:
                    lost = held.store.heartbeat({held.task_id: held.token})
                except Exception as exc:  # noqa: BLE001 - a failed renewal is retried
                    log.warning("task %s: lease renewal failed: %s", held.task_id, exc)
                    continue
                if lost:
                    with self._lock:
                        self._lost.add((id(held.store), held.task_id))


LEASES = LeaseKeeper()
"""The process's lease keeper."""
