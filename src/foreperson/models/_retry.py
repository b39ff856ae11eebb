"""Retries for model calls, as a model that wraps another (STYLE 10: retry wraps a model
rather than adding flags)."""

from __future__ import annotations

import logging
import math
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import anyio

from ..errors import ConfigurationError, ModelError, redact
from ..retry import backoff_seconds, is_retryable, retry_after_seconds
from ._base import Model, ModelBase
from ._messages import Message, ModelRequestParameters, ModelResponse, TextDelta

__all__ = ["DEFAULT_MAX_ATTEMPTS", "RetryingModel"]

logger = logging.getLogger("foreperson.models")

DEFAULT_MAX_ATTEMPTS = 3
"""Attempts per model call, the first included, of :class:`RetryingModel` and
:func:`~foreperson.models.infer_model`. With the default request timeout
(:data:`~foreperson.models.DEFAULT_TIMEOUT_S`, 30 s) a server that accepts connections
and never answers costs one call at most 3 x (30 s + 5 s of profile detection) + 1.25 s +
2.5 s of backoff = 108.75 s (issue 21 item 9: at most 120 s; 4 attempts of 60 s were
247 s); the endpoint's circuit breaker then fails the next calls at once."""


class RetryingModel(ModelBase):
    """Retry a model's failed calls: HTTP 429, 5xx, timeouts and connection errors, with
    exponential backoff and jitter, honouring the server's ``Retry-After``. Other 4xx
    fail at once (seed 000's classification, :func:`foreperson.retry.is_retryable`).

    The adapters turn their SDK's own retries off, so these are the only ones. A call
    refused by an open circuit breaker (:class:`~foreperson.models.EndpointUnavailable`)
    is not retried.

    Worst case against a server that accepts connections and never answers, with the
    defaults: 3 attempts x 30 s (:data:`~foreperson.models.DEFAULT_TIMEOUT_S`), plus 5 s
    of profile detection each when the request has tools or an output type, plus at most
    1.25 + 2.5 s of backoff: 108.75 s for one call, and the circuit breaker (3 failures
    in a row) makes the next calls fail at once for 30 s. In general:
    ``max_attempts x (timeout_s + 5) + sum of the backoffs``.

    Args:
        model: the model to call.
        max_attempts: attempts in all, including the first (>= 1; default 3,
            :data:`DEFAULT_MAX_ATTEMPTS`).
        base_s: backoff after the first failure, seconds (default 1.0; doubles each time,
            times a jitter in [0.75, 1.25]).
        cap_s: the longest backoff, seconds (default 30.0).
        max_retry_after_s: the longest ``Retry-After`` we wait, seconds (default 60.0);
            a server asking for more fails the call at once.
        sleep: how to wait, ``anyio.sleep`` by default (inject a fake in tests).
        rng: randomness for the jitter (a seeded ``random.Random`` makes it repeatable).

    Raises:
        ConfigurationError: ``max_attempts`` < 1, or a negative or non-finite delay.
    """

    def __init__(
        self,
        model: Model,
        *,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        base_s: float = 1.0,
        cap_s: float = 30.0,
        max_retry_after_s: float = 60.0,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.wrapped = model
        if not isinstance(max_attempts, int) or max_attempts < 1:
            raise ConfigurationError(
                f"RetryingModel(max_attempts={max_attempts!r}): it counts the first try, so "
                "give an integer >= 1 (1 = no retries)"
            )
        for label, value in (("base_s", base_s), ("cap_s", cap_s),
                             ("max_retry_after_s", max_retry_after_s)):
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise ConfigurationError(
                    f"RetryingModel({label}={value!r}): give a finite number of seconds >= 0"
                )
        self.max_attempts = max_attempts
        self.base_s = base_s
        self.cap_s = cap_s
        self.max_retry_after_s = max_retry_after_s
        self._sleep = sleep
        self._rng = rng

    @property
    def name(self) -> str:
        """The wrapped model's name."""
        return self.wrapped.name

    async def request(
        self, messages: Sequence[Message], params: ModelRequestParameters
    ) -> ModelResponse:
        """Call the wrapped model, retrying transient failures.

        Returns:
            The first successful reply.

        Raises:
            ModelError: a non-retryable failure, or the last failure once
                ``max_attempts`` are spent; ``attempts`` says how many were made.
        """
        attempt = 1
        while True:
            try:
                return await self.wrapped.request(messages, params)
            except Exception as exc:  # noqa: BLE001 - classified below
                await self._wait_or_raise(exc, attempt)
            attempt += 1

    async def request_stream(
        self, messages: Sequence[Message], params: ModelRequestParameters
    ) -> AsyncIterator[TextDelta | ModelResponse]:
        """Stream from the wrapped model; a failure is retried only before the first item
        arrived (what was already yielded cannot be taken back).

        Raises:
            ModelError: as :meth:`request`.
        """
        attempt = 1
        while True:
            started = False
            try:
                async for item in self.wrapped.request_stream(messages, params):
                    started = True
                    yield item
                return
            except Exception as exc:  # noqa: BLE001 - classified below
                if started:
                    raise
                await self._wait_or_raise(exc, attempt)
            attempt += 1

    async def aclose(self) -> None:
        """Close the wrapped model."""
        await self.wrapped.aclose()

    async def _wait_or_raise(self, exc: Exception, attempt: int) -> None:
        """Sleep before the next attempt, or raise ``exc`` (as a ModelError) if there is
        none to make."""
        if isinstance(exc, AssertionError):
            # a failed test expectation (e.g. a ScriptedModel out of replies): never retried
            raise exc
        retryable = exc.retryable if isinstance(exc, ModelError) else is_retryable(exc)
        if not retryable or attempt >= self.max_attempts:
            raise self._final(exc, attempt)
        asked: float | None
        if isinstance(exc, ModelError) and exc.retry_after_s is not None:
            asked = exc.retry_after_s
        else:
            asked = retry_after_seconds(exc)
        if asked is not None and asked > self.max_retry_after_s:
            raise self._final(exc, attempt, note=(
                f"; the server asked to wait {asked:.0f} s, more than max_retry_after_s="
                f"{self.max_retry_after_s:.0f} s"
            ))
        delay = asked if asked is not None else backoff_seconds(
            attempt, self.base_s, self.cap_s, rng=self._rng
        )
        logger.warning(
            "model %s: attempt %d/%d failed (%s); retrying in %.2f s",
            self.name, attempt, self.max_attempts, redact(str(exc)), delay,
        )
        await self._sleep(delay)

    def _final(self, exc: Exception, attempt: int, note: str = "") -> ModelError:
        if isinstance(exc, ModelError):
            exc.attempts = attempt
            if note:
                exc.args = (f"{exc.args[0] if exc.args else exc}{note}",)
            return exc
        error = ModelError(
            f"model {self.name}: {type(exc).__name__}: {exc}{note}",
            model=self.name,
            retryable=is_retryable(exc),
            attempts=attempt,
        )
        error.__cause__ = exc
        return error
