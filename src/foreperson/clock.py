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
    """The real clock: ``time.time()``."""

    def now(self) -> float:
        """Seconds since the Unix epoch."""
        return time.time()


IdSource = Callable[[], str]
"""``() -> str``: a new unique id each call (default :func:`new_id`)."""


def new_id() -> str:
    """A random id: 32 hex digits (a UUID4 without dashes)."""
    return uuid.uuid4().hex
