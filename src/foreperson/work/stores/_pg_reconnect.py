"""Riding out a PostgreSQL restart: a store call that fails because the server went away
is tried again, with a growing pause, until the server is back or a bound passes.

The pool drops the dead connections and opens new ones by itself; what was missing is
the call that happened to run in the outage. A call is retried only on a *transient*
failure (a lost or refused connection, an administrator's shutdown) and only outside a
``batch()``: a batch's transaction was rolled back whole, and its caller (the run loop)
settles it again. Retrying a single statement is safe because the work layer's writes are
fenced: a completion that did reach the database before the connection dropped finds the
task no longer held on the second try and changes nothing, a claim whose answer was lost
leaves tasks held until their lease lapses and they are reclaimed, never run twice at
once.

Each outage is logged twice per store, whatever the number of threads waiting: one line
when the database goes away, one when it is back (with how long it was away). It is back
when a call begun after the outage was noticed works; the pooled connections that died
meanwhile are dropped then, so that the next call to take one does not start a second
outage.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ...errors import StoreError

__all__ = ["DEFAULT_RECONNECT_S", "Outage", "quiet_pool_outages", "reconnecting"]

log = logging.getLogger("foreperson.store.postgres")

# what psycopg_pool logs, once per connection, while the server is away: the two lines
# of an Outage say it instead
_POOL_OUTAGE_MESSAGES = frozenset({
    "discarding closed connection: %s", "discarding broken connection: %s",
    "error connecting in %r: %s", "reconnection attempt in pool %r failed after %s sec",
    "rolling back returned connection: %s", "closing returned connection: %s",
    "error resetting connection: %s"})


class _PoolOutageFilter(logging.Filter):
    """Drops psycopg_pool's per-connection warnings of a lost server, unless the
    ``psycopg.pool`` logger is set to DEBUG (then every line is kept)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """False for an outage message of the pool's, at any level above DEBUG."""
        if record.msg not in _POOL_OUTAGE_MESSAGES:
            return True
        return logging.getLogger("psycopg.pool").isEnabledFor(logging.DEBUG)


_POOL_FILTER = _PoolOutageFilter()


def quiet_pool_outages() -> None:
    """Keep psycopg_pool's per-connection warnings out of the log while PostgreSQL is
    away or restarting (issue 21 item 3: one line when it goes, one when it is back);
    ``logging.getLogger("psycopg.pool").setLevel(logging.DEBUG)`` shows them again.
    Idempotent."""
    pool_log = logging.getLogger("psycopg.pool")
    if _POOL_FILTER not in pool_log.filters:
        pool_log.addFilter(_POOL_FILTER)

T = TypeVar("T")

DEFAULT_RECONNECT_S = 60.0
"""Seconds a store call keeps trying while PostgreSQL is away before it fails (a server
restart takes a few seconds; a person waits about a minute before calling it down)."""

_FIRST_PAUSE_S = 0.1
_LONGEST_PAUSE_S = 2.0


class Outage:
    """The outage state of one store: when the database went away (None: it is up).

    Args:
        where: the server, for the log lines (``host/database``).
        bound_s: seconds a call keeps trying (0: never retry).
        sleep: the pause function (tests pass their own, with ``clock``).
        clock: seconds, monotonic (default :func:`time.monotonic`).
        on_back: called once when the server is back, before the line saying so (the
            store drops the pooled connections that died while it was away, so that
            the first call to take one is not logged as a second outage); its errors
            are ignored. None: nothing.
    """

    def __init__(self, where: str, bound_s: float = DEFAULT_RECONNECT_S,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic,
                 on_back: Callable[[], object] | None = None) -> None:
        self.where = where
        self.bound_s = bound_s
        self._sleep = sleep
        self._clock = clock
        self._on_back = on_back
        self._lock = threading.Lock()
        self._since: float | None = None
        self._local = threading.local()

    def now(self) -> float:
        """The time by this outage's clock, seconds (for :meth:`came_back`)."""
        return self._clock()

    def went_away(self, error: BaseException) -> None:
        """Note a lost connection: log the outage's first line (once per outage)."""
        with self._lock:
            if self._since is not None:
                return
            self._since = self._clock()
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
        log.warning("PostgreSQL (%s) is unreachable: %s; retrying for up to %.0f s",
                    self.where, reason, self.bound_s)

    def came_back(self, began: float | None = None) -> None:
        """Note a call that worked: log the outage's last line (once).

        Args:
            began: when the call that worked began (:meth:`now`); None: now.
                A call that began before the outage was noticed proves nothing (its
                answer may have left the server just before it went away): the outage
                stays open until a call begun since then works, so that the dead
                connections found after it are not logged as a second outage.
        """
        if self._since is None:          # the common case: no lock
            return
        with self._lock:
            since = self._since
            if since is None or (began is not None and began < since):
                return
            self._since = None
        if self._on_back is not None:
            with contextlib.suppress(Exception):
                self._on_back()
        log.warning("PostgreSQL (%s) is back after %.1f s", self.where,
                    self._clock() - since)

    def call(self, function: Callable[[], T]) -> T:
        """Run ``function`` (one store call), trying again on a transient StoreError
        with a pause growing from 0.1 s to 2 s, for up to :attr:`bound_s` seconds.

        Returns:
            What ``function`` returned.

        Raises:
            StoreError: a failure that is not transient, or the bound passed (its message
                then says for how long the database was unreachable).
        """
        if getattr(self._local, "active", False):      # a store call inside another
            return function()
        self._local.active = True
        try:
            return self._retrying(function)
        finally:
            self._local.active = False

    def _retrying(self, function: Callable[[], T]) -> T:
        began = self._clock()
        pause = _FIRST_PAUSE_S
        while True:
            attempt = self._clock()
            try:
                value = function()
            except StoreError as exc:
                if not exc.transient:
                    raise
                self.went_away(exc)
                waited = self._clock() - began
                if waited + pause > self.bound_s:
                    raise StoreError(f"{exc} (the database was unreachable for "
                                     f"{waited:.0f} s, longer than the {self.bound_s:g} s "
                                     "a store call waits)", transient=True) from exc
                self._sleep(pause)
                pause = min(pause * 2, _LONGEST_PAUSE_S)
                continue
            self.came_back(attempt)
            return value


def reconnecting(method: Callable[..., T]) -> Callable[..., T]:
    """Wrap a store method so that it rides out an outage (see :class:`Outage`): the
    store keeps its :class:`Outage` as ``_outage`` and, inside a ``batch()``, its
    connection as ``_local.conn`` (a call in a batch is not retried on its own)."""
    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> T:
        if getattr(self._local, "conn", None) is not None:
            return method(self, *args, **kwargs)
        outage: Outage = self._outage
        return outage.call(lambda: method(self, *args, **kwargs))

    return call
