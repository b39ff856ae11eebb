"""Leases held by code that does the work itself (a team's delegation, a durable run's
ownership), renewed by one daemon thread per process.

A lease is renewed :data:`RENEW_FRACTION` of its length after the last renewal, so a
holder that stops (even ``kill -9``) loses it within one lease, while a live one misses
two renewals before it expires. Holding costs a dict insert and removal on the caller's
side, never a task or a thread of its own. Renewals are blocking store calls (the
store's ``heartbeat`` or the ledger's ``renew_run``), made from the thread; a renewal
that reports the lease gone is remembered and :meth:`LeaseKeeper.drop` says so, and one
that raises is logged and tried again at the next renewal.

The run loop of a :class:`~foreperson.work.Supervisor` renews the leases of the tasks it
dispatches itself, in one statement per round, at the same fraction.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

__all__ = ["DEFAULT_LEASE_S", "LEASES", "RENEW_FRACTION", "LeaseKeeper"]

log = logging.getLogger("foreperson.work")

DEFAULT_LEASE_S = 90.0
"""The default lease, seconds: how long a task (or a durable run) stays with a holder
that stopped renewing before another may take it. Three to five times the longest
attempt is a good value; ``stale_after`` at the public edge."""

RENEW_FRACTION = 1 / 3
"""A lease is renewed this fraction of its length after the last renewal."""

_IDLE_S = 30.0      # how long the thread outlives its last lease (seconds)


@dataclass
class _Held:
    renew: Callable[[], bool]
    every_s: float
    due: float      # monotonic seconds


class LeaseKeeper:
    """Renews held leases from one daemon thread, started on first use and ended
    :data:`_IDLE_S` seconds after the last lease is dropped.

    Thread-safe: :meth:`keep` and :meth:`drop` may be called from any thread or event
    loop.
    """

    def __init__(self) -> None:
        self._held: dict[Hashable, _Held] = {}
        self._lost: set[Hashable] = set()
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._next = float("inf")       # when the thread wakes next (monotonic seconds)

    def keep(self, key: Hashable, renew: Callable[[], bool], lease_s: float) -> None:
        """Renew a lease until :meth:`drop`.

        Args:
            key: names the lease (unique per store and task, or per ledger, run and
                owner); keeping a key again replaces its renewal.
            renew: renews the lease once (a blocking call); returns False when the
                lease is gone (taken over), which stops its renewal.
            lease_s: the lease's length, seconds; renewed every ``lease_s *
                RENEW_FRACTION``.
        """
        every = lease_s * RENEW_FRACTION
        held = _Held(renew, every, time.monotonic() + every)
        with self._lock:
            self._held[key] = held
            self._lost.discard(key)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="foreperson-leases",
                                                daemon=True)
                self._thread.start()
            elif held.due < self._next:
                self._wake.notify()

    def drop(self, key: Hashable) -> bool:
        """Stop renewing ``key``'s lease.

        Returns:
            False when a renewal found the lease gone, else True (also for a key that
            was never kept).
        """
        with self._lock:
            self._held.pop(key, None)
            if key in self._lost:
                self._lost.discard(key)
                return False
            return True

    def _due(self) -> list[tuple[Hashable, _Held]] | None:
        """The leases to renew now, waiting until one is due; None when the thread
        should end (nothing held for :data:`_IDLE_S`)."""
        with self._lock:
            while True:
                if not self._held:
                    self._next = time.monotonic() + _IDLE_S
                    self._wake.wait(timeout=_IDLE_S)
                    if not self._held:
                        self._thread = None
                        self._next = float("inf")
                        return None
                    continue
                now = time.monotonic()
                due = [(k, h) for k, h in self._held.items() if h.due <= now]
                if due:
                    for _, held in due:
                        held.due = now + held.every_s
                    return due
                self._next = min(h.due for h in self._held.values())
                self._wake.wait(timeout=max(0.01, self._next - now))

    def _run(self) -> None:
        while (due := self._due()) is not None:
            for key, held in due:
                try:
                    alive = held.renew()
                except Exception as exc:  # noqa: BLE001 - a failed renewal is retried
                    log.warning("lease %s: renewal failed: %s", key, exc)
                    continue
                if not alive:
                    with self._lock:
                        if self._held.get(key) is held:
                            del self._held[key]
                            self._lost.add(key)


LEASES = LeaseKeeper()
"""The process's lease keeper."""
