"""Run ownership: who runs a durable run (an agent's, a team's, a state machine's) now,
kept alive by the process's lease keeper (:mod:`foreperson.work.leases`), and how a
process tells that an owner on its own machine is gone.

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
from typing import Any

from ..errors import RunBusy
from ..journal import RunLedger, RunRecord
from .leases import LEASES
from .process import process_gone

__all__ = ["drop_run", "forget_owner", "keep_run", "new_owner", "owner_is_dead", "take_run"]

log = logging.getLogger("foreperson.work")

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


def keep_run(ledger: Any, run_id: str, owner: str, lease_s: float) -> None:
    """Renew ``owner``'s lease on ``run_id`` from the process's lease keeper
    (:data:`~foreperson.work.leases.LEASES`) until :func:`drop_run`.

    Args:
        ledger: the :class:`~foreperson.journal.RunLedger` (a store).
        run_id: the run.
        owner: its owner.
        lease_s: the lease, seconds.
    """
    def renew() -> bool:
        if ledger.renew_run(run_id, owner, lease_s):
            return True
        log.warning("run %s: %s no longer owns it (taken over after its lease lapsed)",
                    run_id, owner)
        return False

    LEASES.keep(("run", id(ledger), run_id, owner), renew, lease_s)


def drop_run(ledger: Any, run_id: str, owner: str) -> None:
    """Stop renewing ``owner``'s lease on ``run_id``."""
    LEASES.drop(("run", id(ledger), run_id, owner))


def take_run(ledger: RunLedger, record: RunRecord, owner: str, lease_s: float) -> RunRecord:
    """Become the owner of the recorded run ``record``: when nobody holds it, its
    owner's lease lapsed, or its owner is certainly dead (:func:`owner_is_dead`: taken
    over at once, without waiting for the lease).

    Args:
        ledger: where the run is recorded.
        record: the run as last read.
        owner: the new owner (:func:`new_owner`).
        lease_s: the lease, seconds.

    Returns:
        The record now owned by ``owner``.

    Raises:
        RunBusy: another live process owns it (how long its lease has left, when known).
    """
    run_id = record.run_id
    dead = record.owner if owner_is_dead(record.owner) else None
    claimed = ledger.claim_run(run_id, owner, lease_s, take_from=dead)
    if claimed is None:
        current = ledger.get_run(run_id)
        holder = current.owner if current is not None and current.owner else "?"
        left = None
        if current is not None and current.lease_expires_at is not None:
            clock = getattr(ledger, "clock", None)
            now = clock.now() if clock is not None else time.time()
            left = max(0.0, current.lease_expires_at.timestamp() - now)
        raise RunBusy(run_id, holder, left)
    if record.owner is not None and record.owner != owner:
        log.info("run %s: taken over from %s", run_id, record.owner)
    return claimed
