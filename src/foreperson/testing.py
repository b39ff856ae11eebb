"""Test doubles that ship with foreperson: a manual clock (and, with the agents layer,
scripted and function-driven models). Use them in your own tests."""

from __future__ import annotations

import threading

__all__ = ["ManualClock"]


class ManualClock:
    """A clock that moves only when told to; thread-safe.

    Args:
        start: initial time, seconds since the Unix epoch (default 1,700,000,000).
    """

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        """Current fake time, epoch seconds."""
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> float:
        """Move time forward by ``seconds`` (>= 0) and return the new time.

        Raises:
            ValueError: ``seconds`` is negative.
        """
        if seconds < 0:
            raise ValueError("a clock does not go backwards")
        with self._lock:
            self._now += seconds
            return self._now
