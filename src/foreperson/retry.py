"""Backoff and error classification, shared by tasks and model calls.

Seed 000: retry transient failures (timeouts, connection errors, HTTP 429 and 5xx)
with exponential backoff and +/-25 % jitter; do not retry what fails identically every
time (schema violations, other 4xx): park it DEAD on the first try.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from .errors import (
    AccessDenied,
    ConfigurationError,
    GiveUp,
    Retry,
    TaskFailed,
    retryable_status,
)

__all__ = ["backoff_seconds", "is_retryable", "retry_after_seconds", "status_code_of"]

# The same code, on the same payload, raises them again: programming errors and a field
# the payload lacks. (ValueError is not here: a truncated JSON reply from a flaky upstream
# raises one, and so do many transient decoding failures; validation errors are caught by
# name, below.)
_NON_RETRYABLE = (TypeError, KeyError, LookupError, AttributeError, NameError,
                  NotImplementedError, AssertionError, ConfigurationError, AccessDenied,
                  TaskFailed)


def backoff_seconds(
    attempt: int,
    base: float = 2.0,
    cap: float = 60.0,
    *,
    rng: random.Random | None = None,
) -> float:
    """Delay before the next attempt, in seconds.

    ``min(cap, base * 2 ** (attempt - 1))`` times a uniform jitter in [0.75, 1.25]
    (seed 000): attempt 1 -> ~2 s, 2 -> ~4 s, 3 -> ~8 s. The jitter spreads out tasks
    that failed together, so they do not all retry at the same instant.

    Args:
        attempt: the attempt that just failed, counting from 1.
        base: delay after the first failure, seconds.
        cap: the largest delay before jitter, seconds.
        rng: source of randomness (a seeded ``random.Random`` makes it repeatable).

    Returns:
        Seconds to wait, >= 0.

    Raises:
        ConfigurationError: attempt < 1, or base / cap negative.
    """
    if attempt < 1:
        raise ConfigurationError(f"backoff_seconds: attempt counts from 1, got {attempt}")
    if base < 0 or cap < 0:
        raise ConfigurationError(
            f"backoff_seconds: base and cap must be >= 0 seconds, got base={base}, cap={cap}")
    delay = min(cap, base * 2.0 ** min(attempt - 1, 62))
    jitter = float((rng or random).uniform(0.75, 1.25))
    return delay * jitter


def status_code_of(exc: BaseException) -> int | None:
    """The HTTP status carried by ``exc`` (``status_code``, ``status`` or
    ``response.status_code``), or None when it carries none."""
    for holder in (exc, getattr(exc, "response", None)):
        if holder is None:
            continue
        for attr in ("status_code", "status"):
            code = getattr(holder, attr, None)
            if isinstance(code, int) and 100 <= code <= 599:
                return code
    return None


def is_retryable(exc: BaseException) -> bool:
    """Whether another attempt could succeed where this one failed.

    Rules, in order: :class:`~foreperson.errors.Retry` yes, :class:`~foreperson.errors.GiveUp`
    no; an HTTP status 408, 409, 425, 429 or 5xx yes, any other 4xx no; timeouts and
    connection errors (including httpx's, recognised by name) yes; validation errors
    (any ``…ValidationError``, such as pydantic's), programming errors (TypeError,
    AttributeError, NameError, NotImplementedError, AssertionError), a field the
    payload lacks (KeyError, LookupError), foreperson's ConfigurationError,
    AccessDenied (another user's run: it would be refused again) and TaskFailed (a
    child task is DEAD: retrying its parent cannot revive it) no;
    anything else yes, ValueError included (a truncated JSON reply from a flaky upstream
    is one), bounded by ``max_attempts``.

    Args:
        exc: the exception a task or a model call raised.

    Returns:
        True when the failure should be retried.
    """
    if isinstance(exc, Retry):
        return True
    if isinstance(exc, GiveUp):
        return False
    code = status_code_of(exc)
    if code is not None:
        return retryable_status(code)
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return True
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & {"TimeoutException", "ConnectError", "NetworkError", "APITimeoutError",
                "APIConnectionError", "RemoteProtocolError"}:
        return True
    if any(name.endswith("ValidationError") for name in names):
        return False
    return not isinstance(exc, _NON_RETRYABLE)


def retry_after_seconds(exc: BaseException, *, now: datetime | None = None) -> float | None:
    """Seconds the server asked us to wait (RFC 9110 section 10.2.3, ``Retry-After``).

    Reads ``exc.after_s`` for :class:`~foreperson.errors.Retry`, else the ``Retry-After``
    header of ``exc.response`` (delta-seconds or an HTTP date).

    Returns:
        Seconds (>= 0), or None when no wait was asked for or the header is unreadable.
    """
    if isinstance(exc, Retry):
        return exc.after_s
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    value = headers.get("retry-after") or headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    now = now or datetime.now(UTC)
    return max(0.0, (when - now).total_seconds())
