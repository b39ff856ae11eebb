"""Run ownership: who runs a durable run now, kept alive by one renewal thread per
process, and how a process tells that an owner on its own machine is gone.

An owner is ``host:pid:nonce``. A run's owner renews its lease every third of it; a
process that dies (even ``kill -9``) stops renewing, so its lease lapses and any process
may take the run over. On the same machine there is no need to wait for that: an owner
whose process no longer exists (or is a zombie) is dead now.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from ..work.process import process_gone

__all__ = ["RUN_LEASES", "RunLeaseKeeper", "new_owner", "owner_is_dead"]

log = logging.getLogger("foreperson.runtime")

_LIVE: set[str] = set()
_LIVE_LOCK = threading.Lock()


def new_owner() -> str:
    """A fresh owner name for one incarnation of a run in this process:
    ``host:pid:nonce``."""
    owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    with _LIVE_LOCK:
        _LIVE.add(owner)
    return owner


def forget_owner(owner: str) -> None:
    """This process's incarnation ``owner`` ended."""
    with _LIVE_LOCK:
        _LIVE.discard(owner)


def _process_gone(pid: int) -> bool:
    return process_gone(pid)


def owner_is_dead(owner: str | None) -> bool:
    """Whether ``owner`` (``host:pid:nonce``) is certainly gone: an incarnation in this
    process that ended, or a process of this machine that no longer runs. An owner on
    another machine is never known dead here (its lease must lapse)."""
    if not owner:
        return False
    parts = owner.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return False
    host, pid_text, _ = parts
    if host != socket.gethostname():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        with _LIVE_LOCK:
            return owner not in _LIVE
    return _process_gone(pid)


@dataclass
class _Held:
    ledger: Any
    run_id: str
    owner: str
    lease_s: float
    renew_at: float = field(default=0.0)


class RunLeaseKeeper:
    """Renews the leases of the durable runs this process owns, from one daemon thread
    (a run costs a dict insert and removal, no task of its own)."""

    def __init__(self) -> None:
        self._held: dict[tuple[int, str, str], _Held] = {}
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None

    def hold(self, ledger: Any, run_id: str, owner: str, lease_s: float) -> None:
        """Keep renewing ``owner``'s lease on ``run_id`` until :meth:`release`.

        Args:
            ledger: the :class:`~foreperson.journal.RunLedger` (a store).
            run_id: the run.
            owner: its owner.
            lease_s: the lease, seconds; renewed every third of it.
        """
        held = _Held(ledger, run_id, owner, lease_s, time.monotonic() + lease_s / 3)
        with self._lock:
            self._held[(id(ledger), run_id, owner)] = held
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="foreperson-runs",
                                                daemon=True)
                self._thread.start()
            else:
                self._wake.notify()

    def release(self, ledger: Any, run_id: str, owner: str) -> None:
        """Stop renewing."""
        with self._lock:
            self._held.pop((id(ledger), run_id, owner), None)

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._held:
                    self._wake.wait(timeout=30.0)
                    if not self._held:
                        self._thread = None
                        return
                    continue
                now = time.monotonic()
                due = [h for h in self._held.values() if h.renew_at <= now]
                if not due:
                    wait = min(h.renew_at for h in self._held.values()) - now
                    self._wake.wait(timeout=max(0.01, wait))
                    continue
                for held in due:
                    held.renew_at = now + held.lease_s / 3
            for held in due:
                try:
                    if not held.ledger.renew_run(held.run_id, held.owner, held.lease_s):
                        log.warning("run %s: %s no longer owns it (taken over after its "
                                    "lease lapsed)", held.run_id, held.owner)
                except Exception as exc:  # noqa: BLE001 - retried at the next renewal
                    log.warning("run %s: lease renewal failed: %s", held.run_id, exc)


RUN_LEASES = RunLeaseKeeper()
"""The process's run lease keeper."""
