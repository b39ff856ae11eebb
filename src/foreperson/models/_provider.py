"""What every provider shares: one SDK client per event loop, request timeouts, and a
reachability check made before any work.

An async HTTP client's pooled connections belong to the event loop that opened them;
reused from another loop (worker threads each with a loop) they fail with "Event loop is
closed". So a provider keeps one client per running loop, and ``aclose()`` closes the
current loop's client (the next call opens a new one). Blocking callers share one
long-lived loop (:func:`~foreperson.models.run_blocking`), so they share its client. A
provider that is garbage-collected closes its clients on their loops, when those still
run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
import threading
import urllib.request
import weakref
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from ..errors import ConfigurationError, redact, redact_url, url_secrets
from ._circuit import BreakerPolicy, CircuitBreaker, shared_breaker

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_TIMEOUT_S",
    "EXTRA_BODY_ENV",
    "Provider",
    "check_reachable",
]

DEFAULT_TIMEOUT_S = 30.0
"""Seconds one model request may take by default (the SDKs' own default is 600 s: a
server that accepts the connection and never answers then held a run for 40 minutes over
4 attempts; 60 s x 4 attempts still held it 247 s). With the default 3 attempts of
:class:`~foreperson.models.RetryingModel`, one call against a hung server costs at most
3 x 30 s of requests + 3 x 5 s of profile detection (``DETECT_TIMEOUT_S``, when the
request needs it) + at most 1.25 + 2.5 s of backoff = 108.75 s, under 120 s; and the
endpoint's circuit breaker then fails the next calls at once. Override with
``timeout_s=`` on the provider or :func:`infer_model` (a slow local server writing long
replies may need more), or per request with ``ModelSettings(timeout_s=)``. The SDKs
apply it between bytes received, so a server that trickles its answer can take
longer."""

DEFAULT_CONNECT_TIMEOUT_S = 5.0
"""Seconds to open a TCP connection (the SDKs' default too); at most the request timeout."""

EXTRA_BODY_ENV = "FOREPERSON_MODEL_EXTRA_BODY"
"""Environment variable: a JSON object merged into every request body of a provider
built without ``extra_body=`` (e.g. ``{"temperature": 0, "max_tokens": 256}`` for the
ticket job on a local server, whose default is to write until its context is full)."""

_pending: set[asyncio.Future[Any]] = set()   # closes scheduled by collected providers


def _extra_body(given: Mapping[str, Any] | None) -> dict[str, Any]:
    if given is not None:
        return dict(given)
    raw = os.environ.get(EXTRA_BODY_ENV, "").strip()
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigurationError(f"${EXTRA_BODY_ENV} is not JSON ({exc}); give an object "
                                 'such as {"temperature": 0}') from None
    if not isinstance(value, dict):
        raise ConfigurationError(f"${EXTRA_BODY_ENV} must be a JSON object such as "
                                 f'{{"temperature": 0}}, got {type(value).__name__}')
    return value


def merge_extra_body(kwargs: dict[str, Any], provider_extra: Mapping[str, Any],
                     request_extra: Mapping[str, Any] | None) -> None:
    """Put the extra body fields into an SDK call's ``kwargs``: the provider's defaults
    yield to what the request sets (its arguments and ``ModelSettings.extra_body``)."""
    merged = {k: v for k, v in provider_extra.items() if k not in kwargs}
    merged.update(kwargs.get("extra_body") or {})
    merged.update(request_extra or {})
    if merged:
        kwargs["extra_body"] = merged


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _close_when_collected(
    by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any],
) -> None:
    """Finalizer of a provider: close each client on its loop, if that loop still runs
    (its transports would otherwise be collected open, with a ResourceWarning)."""
    for loop, client in list(by_loop.items()):
        if loop.is_closed() or not loop.is_running():
            continue

        def schedule(client: Any = client, loop: asyncio.AbstractEventLoop = loop) -> None:
            task = loop.create_task(client.close())
            _pending.add(task)
            task.add_done_callback(_pending.discard)

        with contextlib.suppress(RuntimeError):   # the loop closed meanwhile
            loop.call_soon_threadsafe(schedule)
    by_loop.clear()


class Provider:
    """Base of providers: owns the SDK clients (one per event loop), base URL and key.

    Args:
        factory: builds a new SDK client (called at most once per event loop).
        client: a client to use as is, in every loop (the caller keeps it on one loop).
        extra_body: fields merged into every request's JSON body, below what a request
            sets itself; default ``$FOREPERSON_MODEL_EXTRA_BODY`` (a JSON object), else
            none.
        breaker: when the endpoint's circuit breaker opens and for how long (see
            :class:`~foreperson.models.BreakerPolicy`); default
            :meth:`BreakerPolicy.from_env() <foreperson.models.BreakerPolicy.from_env>`
            (3 timeouts or connection failures in a row, 30 s).
        api_key: the key, only to be removed from error messages (never shown).

    Raises:
        ConfigurationError: neither ``factory`` nor ``client`` was given, or
            ``$FOREPERSON_MODEL_EXTRA_BODY`` is not a JSON object, or a breaker variable
            (``$FOREPERSON_MODEL_BREAKER_FAILURES`` / ``_COOL_DOWN_S``) is not valid.
    """

    name = "provider"

    def __init__(self, factory: Callable[[], Any] | None, client: Any = None, *,
                 extra_body: Mapping[str, Any] | None = None,
                 breaker: BreakerPolicy | None = None, api_key: str | None = None) -> None:
        if factory is None and client is None:
            raise ConfigurationError(
                f"{type(self).__name__}: give it an SDK client (client=...) or let it build "
                "one from api_key= / base_url="
            )
        self.extra_body: dict[str, Any] = _extra_body(extra_body)
        self.breaker_policy = breaker if breaker is not None else BreakerPolicy.from_env()
        given_key = api_key if api_key is not None else getattr(client, "api_key", None)
        self._api_key: str | None = given_key if isinstance(given_key, str) else None
        self._factory = factory
        self._fixed = client
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            weakref.WeakKeyDictionary()
        )
        self._outside: Any = None  # the client used outside any event loop
        self._lock = threading.Lock()
        finalizer = weakref.finalize(self, _close_when_collected, self._by_loop)
        finalizer.atexit = False    # at exit, shutdown_blocking_loop() closes what is left

    @property
    def client(self) -> Any:
        """The SDK client for the running event loop (created on first use)."""
        if self._fixed is not None:
            return self._fixed
        assert self._factory is not None
        loop = _running_loop()
        with self._lock:
            if loop is None:
                if self._outside is None:
                    self._outside = self._factory()
                return self._outside
            client = self._by_loop.get(loop)
            if client is None:
                client = self._by_loop[loop] = self._factory()
            return client

    @property
    def endpoint(self) -> str | None:
        """The URL requests go to (``base_url``, or the SDK's default), or None when
        unknown (a client given as is without a ``base_url``)."""
        return getattr(self, "base_url", None)

    @property
    def secrets(self) -> tuple[str, ...]:
        """What must never appear in a message: the API key and the base URL's
        credentials, as written and percent-decoded, as the server receives them
        (:func:`~foreperson.errors.url_secrets`; pass them to
        :func:`~foreperson.errors.redact`)."""
        found = (self._api_key, *url_secrets(self.endpoint))
        return tuple(dict.fromkeys(s for s in found if s))

    def redact(self, text: str) -> str:
        """``text`` without this provider's secrets, nor anything that looks like a key
        or a URL password (:func:`~foreperson.errors.redact`).

        Args:
            text: a message, a log line.

        Returns:
            The cleaned text.
        """
        return redact(text, self.secrets)

    def breaker_for(self, model_name: str) -> CircuitBreaker | None:
        """The circuit breaker of this provider's endpoint for ``model_name``, shared by
        every provider of the process with the same kind, endpoint and policy.

        Args:
            model_name: the model, as the server knows it.

        Returns:
            The breaker, or None when the policy turns breakers off or the endpoint is
            unknown.
        """
        if self.endpoint is None:
            return None
        return shared_breaker(self.name, self.endpoint, model_name, self.breaker_policy)

    def guarded(self, model_name: str) -> contextlib.AbstractContextManager[None]:
        """A context manager around one call to the server for ``model_name``: it fails
        fast while the endpoint's breaker is open and records the call's outcome.

        Args:
            model_name: the model, as the server knows it.

        Returns:
            ``breaker.attempt(...)``, or a context that does nothing when there is no
            breaker.

        Raises:
            EndpointUnavailable: on entering, while the endpoint's breaker is open.
        """
        breaker = self.breaker_for(model_name)
        if breaker is None:
            return contextlib.nullcontext()
        return breaker.attempt(f"{self.name}:{model_name}")

    async def aclose(self) -> None:
        """Close the running loop's client (and one made outside any loop); the next
        request opens a new one. A client given to the constructor is closed for good."""
        if self._fixed is not None:
            await self._fixed.close()
            return
        loop = _running_loop()
        with self._lock:
            clients = [self._by_loop.pop(loop, None) if loop is not None else None,
                       self._outside]
            self._outside = None
        for client in clients:
            if client is not None:
                await client.close()


def _provider_of(model: Any) -> Any:
    """The provider under ``model``, looking through wrappers (``.wrapped``)."""
    seen = 0
    while model is not None and seen < 16:
        provider = getattr(model, "provider", None)
        if isinstance(provider, Provider):
            return provider
        model = getattr(model, "wrapped", None)
        seen += 1
    return None


def check_reachable(target: Any, *, timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S) -> None:
    """Fail before any work when a model's server cannot be reached at all.

    Opens (and closes) one TCP connection to the server's host and port, or to the HTTP
    proxy the environment names for it (``HTTPS_PROXY`` / ``HTTP_PROXY``, minus
    ``NO_PROXY``), as the SDK would. Nothing is sent: no key, no tokens. Test models,
    and models whose provider has no known URL, pass without a check.

    Args:
        target: a model (wrappers such as :class:`RetryingModel` are looked through), a
            provider, or a URL (``http(s)://host[:port]/path``).
        timeout_s: seconds to wait for the connection (default 5).

    Raises:
        ConfigurationError: the URL is malformed, the host name does not resolve (no
            network, or a typo), or the connection is refused or times out; the message
            names the URL and what to check.
    """
    if isinstance(target, str):
        url: str | None = target
    else:
        provider = target if isinstance(target, Provider) else _provider_of(target)
        url = provider.endpoint if provider is not None else None
    if url is None:
        return
    what = f"model server {redact_url(url)}"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(f"{what}: expected http(s)://host[:port]/path")
    host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    via = ""
    proxy = _proxy_for(parts.scheme, host)
    if proxy is not None:
        proxy_parts = urlsplit(proxy)
        if proxy_parts.hostname:
            host = proxy_parts.hostname
            port = proxy_parts.port or (443 if proxy_parts.scheme == "https" else 80)
            via = f" through the proxy {host}:{port}"  # no userinfo: it is not printed
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except socket.gaierror as exc:
        raise ConfigurationError(
            f"{what} is not reachable: cannot resolve {host!r}{via} "
            f"({exc.strerror or exc}); is this machine online, and is the host name right?"
        ) from None
    except TimeoutError:
        raise ConfigurationError(
            f"{what} is not reachable: no answer from {host}:{port}{via} within "
            f"{timeout_s:g} s; is the network (or a firewall) letting it through?"
        ) from None
    except OSError as exc:
        raise ConfigurationError(
            f"{what} is not reachable: cannot connect to {host}:{port}{via} "
            f"({exc.strerror or exc}); is the server running?"
        ) from None


def _proxy_for(scheme: str, host: str) -> str | None:
    """The proxy URL the environment sets for ``scheme://host``, or None."""
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(scheme) or proxies.get("all")
    if not proxy:
        return None
    no_proxy = os.environ.get("no_proxy") or os.environ.get("NO_PROXY") or ""
    bypass = getattr(urllib.request, "proxy_bypass_environment")  # noqa: B009 - not in stubs
    if no_proxy and bypass(host, {"no": no_proxy}):
        return None
    return proxy


def timeout_for(openai_or_anthropic: Any, timeout_s: float) -> Any:
    """The SDK's ``Timeout`` for a request timeout of ``timeout_s`` seconds: connecting
    gets at most :data:`DEFAULT_CONNECT_TIMEOUT_S` of it."""
    if not timeout_s > 0:
        raise ConfigurationError(f"timeout_s must be a positive number of seconds, got "
                                 f"{timeout_s!r}")
    return openai_or_anthropic.Timeout(timeout_s, connect=min(timeout_s,
                                                              DEFAULT_CONNECT_TIMEOUT_S))


_UNSUPPORTED = re.compile(
    r"not supported|unsupported|not implemented|notimplemented|does not support|"
    r"not available for this model|unrecognized request argument|unknown parameter|"
    r"extra (fields|inputs) not permitted|validation error|input should be",
    re.IGNORECASE,
)
"""Words of an error that says the request's shape is not accepted: sending it again
cannot succeed, whatever the status."""


def unsupported_request(status: int | None, message: str) -> bool:
    """Whether an HTTP error says the request's shape is not supported (HTTP 501, or a
    4xx/5xx whose message says so), so retrying it would fail the same way.

    Args:
        status: the HTTP status, or None (no response).
        message: the error's message.

    Returns:
        True for 501, and for a status >= 400 whose message matches ``_UNSUPPORTED``.
    """
    if status is None or status < 400:
        return False
    return status == 501 or bool(_UNSUPPORTED.search(message))


def redact_sdk_error(exc: BaseException, secrets: tuple[str, ...] = ()) -> None:
    """Clean an SDK exception in place (its ``args`` and ``message``) with
    :func:`~foreperson.errors.redact`, so that a traceback showing it as the ``__cause__``
    of a :class:`~foreperson.errors.ModelError` shows no key a server echoed back.

    Args:
        exc: the SDK's exception.
        secrets: exact strings to remove as well (the provider's key).
    """
    exc.args = tuple(redact(a, secrets) if isinstance(a, str) else a for a in exc.args)
    message = getattr(exc, "message", None)
    if isinstance(message, str):
        with contextlib.suppress(AttributeError):
            exc.message = redact(message, secrets)  # type: ignore[attr-defined]


def timeout_note(exc: Exception) -> str:
    """`` after N s`` when the request's timeout can be read from the error."""
    request = getattr(exc, "request", None)
    timeout = getattr(request, "extensions", {}).get("timeout") if request else None
    read = timeout.get("read") if isinstance(timeout, dict) else None
    return f" after {read:g} s (timeout_s)" if isinstance(read, int | float) else ""
