"""Run ownership: who runs a durable run now, kept alive by the process's lease keeper
(:mod:`foreperson.work.leases`), and how a process tells that an owner on its own machine is gone.

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
import uuid
from typing import Any

from ..work.leases import LEASES
from ..work.process import process_gone

__all__ = ["drop_run", "forget_owner", "keep_run", "new_owner", "owner_is_dead"]

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
