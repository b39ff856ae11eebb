"""Time and ids, from an object you can fake (STYLE 6: replay is deterministic).

Stores, supervisors and agent runs take their time from a :class:`Clock` and their ids
from an :data:`IdSource` instead of calling ``time.time()`` or ``uuid.uuid4()``
themselves, so a test (or a replay) can fix both: :class:`foreperson.testing.ManualClock`
moves only when told to. This module is the ground floor: it imports nothing of
foreperson.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Protocol

__all__ = ["Clock", "IdSource", "SystemClock", "new_id"]


class Clock(Protocol):
    """Source of time; fake it in tests."""

    def now(self) -> float:
        """Current time, seconds since the Unix epoch (UTC)."""
        ...


class SystemClock:
    """The real clock: ``time.time()`` for timestamps, the kernel's boot clock for leases."""

    def now(self) -> float:
        """Seconds since the Unix epoch."""
        return time.time()

    def lease_time(self) -> tuple[str, float] | None:
        """The host's lease clock: ``(boot id, seconds since boot)``, or ``None`` where
        the platform has none (then leases are judged by :meth:`now`).

        On Linux this is ``CLOCK_BOOTTIME`` with the kernel's boot id
        (``/proc/sys/kernel/random/boot_id``): one clock for every process on the host,
        never stepped when the wall clock is set by hand, by NTP or by a faked time, so
        a process whose wall clock is wrong cannot judge a live lease expired. A store
        keeps the boot id with each lease; a lease from another boot (the machine
        restarted) is judged by the wall clock again.
        """
        boot = _boot_id()
        if boot is None:
            return None
        return boot, time.clock_gettime(time.CLOCK_BOOTTIME)


_BOOT_ID: list[str | None] = []


def _boot_id() -> str | None:
    """The kernel's boot id (read once), or ``None`` off Linux."""
    if not _BOOT_ID:
        try:
            with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
                boot: str | None = f.read().strip() or None
        except OSError:
            boot = None
        _BOOT_ID.append(boot if hasattr(time, "CLOCK_BOOTTIME") else None)
    return _BOOT_ID[0]


IdSource = Callable[[], str]
"""``() -> str``: a new unique id each call (default :func:`new_id`)."""


def new_id() -> str:
    """A random id: 32 hex digits (a UUID4 without dashes)."""
    return uuid.uuid4().hex
