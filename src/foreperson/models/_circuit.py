"""Circuit breakers for model endpoints (issue 21 item 9: no run waits on a dead endpoint
over and over).

A server that accepts connections and never answers costs every call its whole timeout
(and every retry of it); a job of 3,000 tickets would pay that 3,000 times. So each
endpoint (provider, base URL and model name) has one :class:`CircuitBreaker`, shared by
every agent, worker thread and provider of the process that talks to it:

* **closed** (normal): calls go through; a timeout or a connection failure (refused,
  reset, no route, the connection dropped before an answer) counts one failure, any
  answer from the server (an HTTP error included) resets the count.
* **open**: after ``failures`` of them in a row (default 3), calls fail at once, without
  connecting, with :class:`EndpointUnavailable` (a :class:`~foreperson.errors.ModelError`
  that is not retryable, naming the endpoint, the failures seen and when it tries
  again), for ``cool_down_s`` seconds (default 30).
* **half-open**: the first call after the cool-down is a trial; the others fail fast
  while it runs. Its answer closes the breaker; its timeout or connection failure opens
  it for another cool-down. A trial that is cancelled decides nothing (the next call is
  the trial).

Configure it with :class:`BreakerPolicy` (``OpenAIProvider(breaker=...)``,
``AnthropicProvider(breaker=...)``, ``infer_model(breaker=...)``) or, for providers
built without one, with ``$FOREPERSON_MODEL_BREAKER_FAILURES`` (``0`` turns breakers off)
and ``$FOREPERSON_MODEL_BREAKER_COOL_DOWN_S``. Breakers are per process: separate
``foreperson worker`` processes each find out for themselves.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any, Literal

from ..errors import ConfigurationError, ModelError, redact_url

__all__ = [
    "BREAKER_COOL_DOWN_ENV",
    "BREAKER_FAILURES_ENV",
    "DEFAULT_BREAKER_COOL_DOWN_S",
    "DEFAULT_BREAKER_FAILURES",
    "BreakerPolicy",
    "CircuitBreaker",
    "EndpointUnavailable",
    "outage_reason",
    "reset_circuit_breakers",
    "shared_breaker",
]

logger = logging.getLogger("foreperson.models")

DEFAULT_BREAKER_FAILURES = 3
"""Timeouts or connection failures in a row that open an endpoint's breaker."""

DEFAULT_BREAKER_COOL_DOWN_S = 30.0
"""Seconds an open breaker fails calls fast before it lets one trial call through."""

BREAKER_FAILURES_ENV = "FOREPERSON_MODEL_BREAKER_FAILURES"
"""Environment variable: ``failures`` of the default :class:`BreakerPolicy` (an integer
>= 0; ``0`` turns circuit breakers off)."""

BREAKER_COOL_DOWN_ENV = "FOREPERSON_MODEL_BREAKER_COOL_DOWN_S"
"""Environment variable: ``cool_down_s`` of the default :class:`BreakerPolicy`
(seconds, > 0)."""

_REASONS_KEPT = 3   # the last failures an EndpointUnavailable message names

_State = Literal["closed", "open", "half_open"]


@dataclass(frozen=True)
class BreakerPolicy:
    """When an endpoint's circuit breaker opens and for how long.

    Providers with equal policies share the breaker of an endpoint; a policy with its
    own ``clock`` (a test's) gets breakers of its own.

    Attributes:
        failures: timeouts or connection failures in a row that open the breaker
            (default 3); 0 turns the breaker off.
        cool_down_s: seconds the open breaker fails calls fast before one trial call
            (default 30.0).
        clock: monotonic seconds, ``time.monotonic`` by default (inject a fake in tests;
            ``ManualClock().now`` will do).

    Raises:
        ConfigurationError: ``failures`` is not an integer >= 0, or ``cool_down_s`` is
            not a finite number > 0.
    """

    failures: int = DEFAULT_BREAKER_FAILURES
    cool_down_s: float = DEFAULT_BREAKER_COOL_DOWN_S
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.failures, bool) or not isinstance(self.failures, int) or (
                self.failures < 0):
            raise ConfigurationError(
                f"BreakerPolicy(failures={self.failures!r}): give the number of timeouts or "
                "connection failures in a row that open the breaker, an integer >= 1 "
                "(0 turns it off)")
        if not (isinstance(self.cool_down_s, int | float) and math.isfinite(self.cool_down_s)
                and self.cool_down_s > 0):
            raise ConfigurationError(
                f"BreakerPolicy(cool_down_s={self.cool_down_s!r}): give a finite number of "
                "seconds > 0")

    @property
    def enabled(self) -> bool:
        """Whether breakers of this policy ever open (``failures`` > 0)."""
        return self.failures > 0

    @classmethod
    def from_env(cls) -> BreakerPolicy:
        """The default policy, with ``$FOREPERSON_MODEL_BREAKER_FAILURES`` and
        ``$FOREPERSON_MODEL_BREAKER_COOL_DOWN_S`` applied when set.

        Returns:
            The policy.

        Raises:
            ConfigurationError: a variable is set to something that is not a valid value
                (the message names the variable).
        """
        failures: int = DEFAULT_BREAKER_FAILURES
        cool_down_s = DEFAULT_BREAKER_COOL_DOWN_S
        raw = os.environ.get(BREAKER_FAILURES_ENV, "").strip()
        if raw:
            try:
                failures = int(raw)
            except ValueError:
                raise ConfigurationError(
                    f"${BREAKER_FAILURES_ENV}={raw!r}: give an integer >= 0 (0 turns model "
                    "circuit breakers off)") from None
        raw = os.environ.get(BREAKER_COOL_DOWN_ENV, "").strip()
        if raw:
            try:
                cool_down_s = float(raw)
            except ValueError:
                raise ConfigurationError(
                    f"${BREAKER_COOL_DOWN_ENV}={raw!r}: give a number of seconds > 0"
                ) from None
        try:
            return cls(failures=failures, cool_down_s=cool_down_s)
        except ConfigurationError as exc:
            raise ConfigurationError(
                f"${BREAKER_FAILURES_ENV} / ${BREAKER_COOL_DOWN_ENV}: {exc}") from None


class EndpointUnavailable(ModelError):
    """A model endpoint's circuit breaker is open: the call failed at once, without
    connecting, because the server timed out or refused the last calls. Not retryable
    (the wait is the breaker's, not the caller's).

    Attributes:
        endpoint: the server's URL (credentials redacted).
        failures: timeouts or connection failures in a row seen so far.
        reasons: the last of them, as text, oldest first (at most 3).
        retry_in_s: seconds until a trial call is let through, or None while a trial
            call is running now.
        retry_at: when that is (timezone-aware UTC), or None while a trial runs.
    """

    def __init__(self, *, model: str, endpoint: str, failures: int,
                 reasons: tuple[str, ...], retry_in_s: float | None) -> None:
        retry_at = (None if retry_in_s is None
                    else datetime.now(UTC) + timedelta(seconds=retry_in_s))
        seen = "; ".join(_counted(reasons)) or "no detail"
        when = ("a trial call is being made now; the next calls wait for its outcome"
                if retry_in_s is None or retry_at is None else
                f"calls to it fail fast for another {retry_in_s:.1f} s (until "
                f"{retry_at:%H:%M:%S} UTC), then one trial call decides")
        super().__init__(
            f"model {model}: the endpoint {endpoint} is not answering: {failures} timeouts "
            f"or connection failures in a row (last: {seen}); {when}. Not retried: check "
            f"the server (BreakerPolicy(failures=, cool_down_s=), or "
            f"${BREAKER_FAILURES_ENV} (0: off) and ${BREAKER_COOL_DOWN_ENV}, tune this)",
            model=model, retryable=False)
        self.endpoint = endpoint
        self.failures = failures
        self.reasons = reasons
        self.retry_in_s = retry_in_s
        self.retry_at = retry_at

    def __reduce__(self) -> tuple[Any, ...]:
        # keyword-only arguments: rebuilt from the message and the fields (pickle, copy)
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))


def _rebuild(cls: type[EndpointUnavailable], args: tuple[Any, ...],
             state: dict[str, Any]) -> EndpointUnavailable:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


def _counted(reasons: tuple[str, ...]) -> list[str]:
    """``reasons`` with runs of the same text folded: ``"timed out (3 times)"``."""
    folded: list[tuple[str, int]] = []
    for reason in reasons:
        if folded and folded[-1][0] == reason:
            folded[-1] = (reason, folded[-1][1] + 1)
        else:
            folded.append((reason, 1))
    return [text if count == 1 else f"{text} ({count} times)" for text, count in folded]


_TIMEOUT_NAMES = frozenset({"APITimeoutError", "TimeoutException", "ReadTimeout",
                            "ConnectTimeout", "WriteTimeout", "PoolTimeout"})
_CONNECTION_NAMES = frozenset({"APIConnectionError", "ConnectError", "NetworkError",
                               "RemoteProtocolError", "ReadError", "WriteError"})


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes (``__cause__``, else ``__context__``), outermost first."""
    found: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(found) < 8 and current not in found:
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


def outage_reason(exc: BaseException) -> str | None:
    """Why ``exc`` says the server is not answering, or None when it does not.

    A timeout or a connection failure (the SDKs', httpx's, or the built-in
    ``TimeoutError`` / ``ConnectionError``), looked for in ``exc`` and its causes,
    counts; an HTTP status (the server answered) or any other error does not.

    Args:
        exc: what a model call raised.

    Returns:
        A short text (``"timed out after 30 s"``, ``"cannot connect: [Errno 111]
        Connection refused"``), or None.
    """
    chain = _chain(exc)
    if any(getattr(e, "status_code", None) is not None for e in chain):
        return None
    names = [{cls.__name__ for cls in type(e).__mro__} for e in chain]
    if any(n & _TIMEOUT_NAMES for n in names) or any(isinstance(e, TimeoutError) for e in chain):
        timeout = None
        for e in chain:
            request = getattr(e, "request", None)
            extensions = getattr(request, "extensions", None) if request is not None else None
            if isinstance(extensions, dict) and isinstance(extensions.get("timeout"), dict):
                timeout = extensions["timeout"].get("read")
                break
        return (f"timed out after {timeout:g} s" if isinstance(timeout, int | float)
                else "timed out")
    if any(n & _CONNECTION_NAMES for n in names) or any(
            isinstance(e, ConnectionError) for e in chain):
        detail = str(chain[-1]).strip() if len(chain) > 1 else ""
        return f"cannot connect: {detail}" if detail else "cannot connect"
    return None


class CircuitBreaker:
    """The breaker of one endpoint; thread-safe (worker threads and event loops share
    it). Normally reached through a provider (``provider.breaker_for(model_name)``),
    which takes it from the process-wide registry.

    Args:
        endpoint: the endpoint's URL, as shown in messages (credentials are redacted).
        policy: when it opens and for how long (default :class:`BreakerPolicy`).
    """

    def __init__(self, endpoint: str, policy: BreakerPolicy | None = None) -> None:
        self.endpoint = redact_url(endpoint)
        self.policy = policy if policy is not None else BreakerPolicy()
        self._lock = threading.Lock()
        self._state: _State = "closed"
        self._failures = 0
        self._reasons: deque[str] = deque(maxlen=_REASONS_KEPT)
        self._open_until = 0.0
        self._trial_running = False

    @property
    def state(self) -> _State:
        """``"closed"``, ``"open"`` or ``"half_open"`` (an open breaker whose cool-down
        is over reads ``"open"`` until a call tries it)."""
        with self._lock:
            return self._state

    @property
    def failures(self) -> int:
        """Timeouts or connection failures in a row, so far."""
        with self._lock:
            return self._failures

    def attempt(self, model: str) -> _Attempt:
        """A context manager around one call to the endpoint: entering it lets the call
        through or raises; leaving it records what the call's outcome says about the
        server (an outage, an answer, or nothing: a cancelled or locally failed call).

        Args:
            model: the calling model's name, for the error message.

        Returns:
            The context manager (``with breaker.attempt(name): await call()``).

        Raises:
            EndpointUnavailable: on entering, while the breaker is open or a trial call
                is running.
        """
        return _Attempt(self, model)

    def reset(self) -> None:
        """Close the breaker and forget its failures."""
        with self._lock:
            self._close()

    # --- transitions, each under the lock ---------------------------------------------

    def _admit(self, model: str) -> bool:
        """Let a call through (True when it is the half-open trial), or raise."""
        with self._lock:
            if self._state == "closed":
                return False
            now = self.policy.clock()
            if self._state == "open" and now >= self._open_until:
                self._state = "half_open"
            if self._state == "half_open" and not self._trial_running:
                self._trial_running = True
                logger.info("model endpoint %s: cool-down over, one trial call goes through",
                            self.endpoint)
                return True
            retry_in = None if self._state == "half_open" else self._open_until - now
            error = EndpointUnavailable(model=model, endpoint=self.endpoint,
                                        failures=self._failures,
                                        reasons=tuple(self._reasons), retry_in_s=retry_in)
        raise error

    def _failed(self, trial: bool, reason: str) -> None:
        with self._lock:
            self._failures += 1
            self._reasons.append(reason)
            if trial and self._state == "half_open":
                self._trial_running = False
                self._open(f"the trial call failed ({reason})")
            elif self._state == "closed" and self._failures >= self.policy.failures:
                self._open(f"{self._failures} timeouts or connection failures in a row "
                           f"(last: {reason})")

    def _answered(self, trial: bool) -> None:
        with self._lock:
            if self._state != "closed":
                logger.warning("model endpoint %s answers again: calls go through",
                               self.endpoint)
            self._close()

    def _undecided(self, trial: bool) -> None:
        with self._lock:
            if trial and self._state == "half_open":
                self._trial_running = False

    def _open(self, why: str) -> None:
        self._state = "open"
        self._open_until = self.policy.clock() + self.policy.cool_down_s
        logger.warning("model endpoint %s is not answering: %s; calls fail fast for %g s",
                       self.endpoint, why, self.policy.cool_down_s)

    def _close(self) -> None:
        self._state = "closed"
        self._failures = 0
        self._reasons.clear()
        self._trial_running = False

    def __repr__(self) -> str:
        return f"<CircuitBreaker {self.endpoint} {self.state} failures={self.failures}>"


class _Attempt:
    """One call through a breaker (see :meth:`CircuitBreaker.attempt`)."""

    def __init__(self, breaker: CircuitBreaker, model: str) -> None:
        self._breaker = breaker
        self._model = model
        self._trial = False

    def __enter__(self) -> None:
        self._trial = self._breaker._admit(self._model)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> Literal[False]:
        if exc is None:
            self._breaker._answered(self._trial)
        elif isinstance(exc, Exception) and not isinstance(exc, EndpointUnavailable):
            reason = outage_reason(exc)
            if reason is not None:
                self._breaker._failed(self._trial, reason)
            elif isinstance(exc, ModelError) and exc.status_code is not None:
                self._breaker._answered(self._trial)       # an HTTP error is an answer
            else:
                self._breaker._undecided(self._trial)
        else:                                               # cancelled, GeneratorExit
            self._breaker._undecided(self._trial)
        return False


_registry_lock = threading.Lock()
_registry: dict[tuple[object, ...], CircuitBreaker] = {}


def shared_breaker(kind: str, endpoint: str, model_name: str,
                   policy: BreakerPolicy) -> CircuitBreaker | None:
    """The process's breaker of one endpoint, made on first use.

    Args:
        kind: the provider (``"openai"``, ``"anthropic"``).
        endpoint: the base URL requests go to.
        model_name: the model, as the server knows it.
        policy: the breaker's policy; providers with equal policies share a breaker.

    Returns:
        The breaker, or None when the policy turns breakers off.
    """
    if not policy.enabled:
        return None
    key = (kind, endpoint, model_name, policy)
    with _registry_lock:
        breaker = _registry.get(key)
        if breaker is None:
            breaker = _registry[key] = CircuitBreaker(endpoint, policy)
        return breaker


def reset_circuit_breakers() -> None:
    """Forget every endpoint's breaker (the next call starts closed), e.g. between tests
    or after fixing a server without waiting for the cool-down."""
    with _registry_lock:
        _registry.clear()


def _forget_after_fork() -> None:
    global _registry_lock
    _registry_lock = threading.Lock()   # it may have been held by a thread that is gone
    _registry.clear()                   # and a breaker's own lock with it


os.register_at_fork(after_in_child=_forget_after_fork)
