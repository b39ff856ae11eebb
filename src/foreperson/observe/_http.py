"""The HTTP edge of ``foreperson serve`` and of ``--metrics-port``: Starlette on uvicorn
(``pip install 'foreperson[observe]'``), run on an event loop of its own thread or of the
calling thread, with the bounds an exposed page needs (issue 21, item 1):

* at most :data:`MAX_CONNECTIONS` connections (uvicorn's ``limit_concurrency``); when
  full, the connection idle the longest is closed to make room, so idle or half-open
  connections cannot lock a normal client out (the cap also stays under the process's
  open-file limit);
* a request's head must arrive within :data:`HEAD_TIMEOUT_S` of the connection opening
  (or of the previous answer), its body within :data:`BODY_TIMEOUT_S`; keep-alive
  connections close after :data:`KEEP_ALIVE_S` idle; heads are at most
  :data:`MAX_HEAD_BYTES`, bodies :data:`MAX_BODY_BYTES`;
* a listen backlog of :data:`BACKLOG` (a burst of 200 clients connecting at once);
* a malformed request (``Content-Length: -1``, a header over the limit) is a 400 from
  h11 before the application sees it.

:class:`Guard` is the ASGI middleware that checks every request first: its ``Host`` is
one of the accepted names (DNS rebinding is refused with 421, whatever the bind
address), a request sent by another site's script is refused (403), and, when the page
has a token or users, the caller is authenticated (``Authorization: Bearer TOKEN``, or
HTTP basic auth with the token as password: a browser asks for it) for reads as well
as writes. Every answer carries the page's security headers (CSP, nosniff, no
framing, no referrer, no caching).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import ipaddress
import logging
import resource
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import MissingDependency

__all__ = ["BACKLOG", "BODY_TIMEOUT_S", "HEAD_TIMEOUT_S", "KEEP_ALIVE_S", "MAX_BODY_BYTES",
           "MAX_CONNECTIONS", "MAX_HEAD_BYTES", "Access", "AsgiServer", "Guard", "Identity",
           "default_allowed_hosts", "host_name", "is_loopback", "raise_open_file_limit"]

log = logging.getLogger("foreperson.observe")

MAX_CONNECTIONS = 1000
"""Connections served at once (more: the one idle the longest is closed)."""
BACKLOG = 2048
"""Connections the kernel queues before the server accepts them."""
HEAD_TIMEOUT_S = 10.0
"""Seconds a connection has to send a whole request head (headers included)."""
BODY_TIMEOUT_S = 10.0
"""Seconds a request has to send its whole body."""
KEEP_ALIVE_S = 5
"""Seconds an idle keep-alive connection is kept open."""
MAX_HEAD_BYTES = 16 * 1024
"""Bytes of a request head (line and headers); more is a 400."""
MAX_BODY_BYTES = 1 << 20
"""Bytes of a request body; more is a 413."""
_FILES_KEPT = 128
"""Open files left to the rest of the process (the store, logs) under the file limit."""

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
"""The Content-Security-Policy of every answer: only this server's own script runs."""

SECURITY_HEADERS = [(b"cache-control", b"no-store"), (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"), (b"x-frame-options", b"DENY"),
                    (b"content-security-policy", CSP.encode())]
"""Headers added to every answer (a route may set its own ``cache-control``)."""

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "localhost.localdomain",
                            "ip6-localhost", "ip6-loopback"})


def _uvicorn() -> Any:
    try:
        import starlette  # noqa: F401
        import uvicorn
    except ImportError as exc:
        raise MissingDependency("foreperson serve needs starlette and uvicorn: "
                                "pip install 'foreperson[observe]'") from exc
    return uvicorn


# -- who may ask -----------------------------------------------------------------------

def is_loopback(host: str) -> bool:
    """Whether binding ``host`` serves this machine only (127.0.0.0/8, ::1, localhost, or a
    name whose every address is one of those)."""
    name = host.strip("[]").lower()
    if name in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(str(i[4][0]).split("%")[0]).is_loopback
                               for i in infos)


def _interface_addresses() -> set[str]:
    """This machine's interface addresses (Linux: ioctl per IPv4 interface and
    /proc/net/if_inet6; elsewhere what the host name resolves to)."""
    found: set[str] = set()
    try:
        import fcntl
        import struct

        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            for _, name in socket.if_nameindex():
                try:
                    packed = fcntl.ioctl(probe.fileno(), 0x8915,  # SIOCGIFADDR
                                         struct.pack("256s", name.encode()[:15]))
                    found.add(socket.inet_ntoa(packed[20:24]))
                except OSError:
                    continue
    except (ImportError, OSError, AttributeError):
        pass
    try:
        with open("/proc/net/if_inet6", encoding="ascii") as lines:
            for line in lines:
                raw = line.split()[0]
                found.add(str(ipaddress.IPv6Address(int(raw, 16))))
    except (OSError, ValueError, IndexError):
        pass
    return found


def default_allowed_hosts(bind: str) -> frozenset[str]:
    """The ``Host`` names accepted when none are given: the loopback names for a loopback
    bind; else also the machine's host name, its fully qualified name and its addresses
    (every interface's for a wildcard bind such as 0.0.0.0, else the bound one)."""
    bound = bind.strip("[]").lower()
    names = set(LOOPBACK_NAMES) | {bound}
    if is_loopback(bound):
        return frozenset(names)
    hostname = socket.gethostname().lower()
    names |= {hostname, socket.getfqdn().lower()}
    for name in (hostname, socket.getfqdn()):
        try:
            names |= {str(i[4][0]).split("%")[0].lower()
                      for i in socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)}
        except OSError:
            continue
    if bound in ("", "0.0.0.0", "::"):
        names |= _interface_addresses()
    names.discard("")
    return frozenset(n.rstrip(".") for n in names)


def host_name(header: str) -> str | None:
    """The name of a ``Host`` header (lower case, no port, no brackets, no final dot), or
    None when it is not a well-formed host."""
    value = header.strip().lower()
    if not value or any(c in value for c in " /\\@?#\x00") or len(value) > 300:
        return None
    if value.startswith("["):
        end = value.find("]")
        if end < 0 or (value[end + 1:] and not value[end + 1:].startswith(":")):
            return None
        name, port = value[1:end], value[end + 2:]
    elif value.count(":") == 1:
        name, port = value.split(":")
    elif ":" in value:
        return None
    else:
        name, port = value, ""
    if port and not port.isdigit():
        return None
    return name.rstrip(".") or None


@dataclass(frozen=True)
class Identity:
    """Who asks. ``user``: the user of a users-file token or login; None: the page's
    shared token, or nobody when the page has no token. ``authenticated``: a token was
    checked."""

    user: str | None = None
    authenticated: bool = False


@dataclass(frozen=True)
class Access:
    """Who may ask what.

    Attributes:
        allowed_hosts: the accepted ``Host`` names (see :func:`default_allowed_hosts`).
        token: the page's shared token: needed for every request when set (None: none).
        users: user name -> that user's token (they see their own durable runs); when
            not empty, every request needs a token too.
        show_runs_of_all_users: show every user's durable runs to every caller.
    """

    allowed_hosts: frozenset[str]
    token: str | None = None
    users: Mapping[str, str] = field(default_factory=dict)
    show_runs_of_all_users: bool = False

    @property
    def needs_auth(self) -> bool:
        """Whether every request must be authenticated."""
        return bool(self.token) or bool(self.users)

    def host_ok(self, header: str | None) -> bool:
        """Whether a request with this ``Host`` header is addressed to this server."""
        name = host_name(header or "")
        return name is not None and name in self.allowed_hosts

    def identify(self, authorization: str | None) -> Identity | None:
        """The caller of a request with this ``Authorization`` header, or None when it must
        authenticate and did not (or gave a wrong token)."""
        if not self.needs_auth:
            return Identity()
        scheme, _, value = (authorization or "").strip().partition(" ")
        user: str | None = None
        if scheme.lower() == "bearer":
            secret = value.strip()
        elif scheme.lower() == "basic":
            try:
                decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError, ValueError):
                return None
            user, _, secret = decoded.partition(":")
        else:
            return None
        if not secret:
            return None
        found: Identity | None = None
        given = secret.encode()
        for name, expected in self.users.items():       # compare them all: no early exit
            if hmac.compare_digest(given, expected.encode()) and user in (None, "", name):
                found = Identity(name, True)
        if found is None and self.token and hmac.compare_digest(given, self.token.encode()):
            found = Identity(None, True)
        return found


def _header(scope: Mapping[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


class Guard:
    """ASGI middleware: the Host, cross-site and authentication checks before ``app``,
    and the security headers on every answer.

    Args:
        app: the application guarded.
        access: who may ask.
        realm: the basic-auth realm a browser shows when it asks for the token.
    """

    def __init__(self, app: Callable[..., Awaitable[None]], access: Access,
                 realm: str = "foreperson") -> None:
        self.app = app
        self.access = access
        self.realm = realm

    async def __call__(self, scope: dict[str, Any], receive: Callable[..., Awaitable[Any]],
                       send: Callable[..., Awaitable[None]]) -> None:
        """Check the request; answer it with an error, or pass it on."""
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await self.app(scope, receive, send)
            return
        refused, identity = self._check(scope)
        if refused is not None:
            status, message, extra = refused
            await _send_json(send, status, {"error": message}, extra)
            return
        scope.setdefault("state", {})["identity"] = identity

        started = False

        async def secured(message: dict[str, Any]) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                have = {k.lower() for k, _ in message.get("headers", [])}
                message["headers"] = [*message.get("headers", []),
                                      *(h for h in SECURITY_HEADERS if h[0] not in have)]
            await send(message)

        try:
            await self.app(scope, receive, secured)
        except Exception:  # the app's bug: one log entry, a 500, never a dropped socket
            log.exception("%s %s failed", scope.get("method"), scope.get("path"))
            if not started:
                await _send_json(send, 500, {"error": "internal error (see the server's log)"})

    def _check(self, scope: dict[str, Any]
               ) -> tuple[tuple[int, str, list[tuple[bytes, bytes]]] | None, Identity]:
        """(why the request is refused: status, message, headers; or None) and who asks."""
        nobody = Identity()
        if sum(len(k) + len(v) + 4 for k, v in scope.get("headers", ())) > MAX_HEAD_BYTES:
            return (431, f"the headers are over {MAX_HEAD_BYTES} bytes", []), nobody
        host = _header(scope, b"host")
        if not self.access.host_ok(host):
            return (421, "unknown Host (give --allowed-host to accept this name)", []), nobody
        origin = _header(scope, b"origin")
        if origin is not None and origin.rstrip("/").lower() not in (
                f"http://{host}".lower(), f"https://{host}".lower()):
            return (403, "cross-origin request refused", []), nobody
        site = _header(scope, b"sec-fetch-site")
        if site == "cross-site" and _header(scope, b"sec-fetch-mode") != "navigate":
            return (403, "cross-site request refused", []), nobody
        identity = self.access.identify(_header(scope, b"authorization"))
        if identity is None:
            realm = self.realm.replace('"', "")
            return (401, "this page needs a token: the password (and, with a users file, "
                    "your user name)", [
                (b"www-authenticate", f'Basic realm="{realm}", charset="UTF-8"'.encode())]
                    ), nobody
        return None, identity


async def _send_json(send: Callable[..., Awaitable[None]], status: int, value: Any,
                     extra: Iterable[tuple[bytes, bytes]] = ()) -> None:
    import json

    body = json.dumps(value).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()),
                            *extra, *SECURITY_HEADERS]})
    await send({"type": "http.response.body", "body": body})


# -- the server ------------------------------------------------------------------------

def raise_open_file_limit(wanted: int = 65536) -> int:
    """Raise this process's soft open-file limit towards ``wanted`` (never above the hard
    limit, never lower it); returns the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (OSError, ValueError):
            pass
    return soft


def connection_cap(wanted: int) -> int:
    """``wanted`` connections, or fewer so the open-file limit leaves room for the rest."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(16, min(wanted, soft - _FILES_KEPT))


class _Deadlines:
    """Mixed into uvicorn's h11 protocol (one connection): a deadline for each request
    head, and the longest-idle connection closed when ``cap`` connections are open."""

    cap: int = MAX_CONNECTIONS
    head_timeout_s: float = HEAD_TIMEOUT_S
    connections: set[Any]
    cycle: Any
    loop: Any
    transport: Any

    def connection_made(self, transport: Any) -> None:
        """Arm the head deadline; make room when full."""
        super().connection_made(transport)  # type: ignore[misc]
        self._fp_idle_since = time.monotonic()
        self._fp_seen: Any = None
        self._fp_deadline: Any = None
        self._fp_arm()
        if len(self.connections) >= self.cap:
            self._fp_shed()

    def _fp_arm(self) -> None:
        self._fp_disarm()
        self._fp_deadline = self.loop.call_later(self.head_timeout_s, self._fp_too_slow)

    def _fp_disarm(self) -> None:
        if self._fp_deadline is not None:
            self._fp_deadline.cancel()
            self._fp_deadline = None

    def _fp_too_slow(self) -> None:
        self._fp_deadline = None
        if self.cycle is self._fp_seen and not self.transport.is_closing():
            self.transport.close()             # no whole head in time: slow or idle

    def _fp_busy(self) -> bool:
        return self.cycle is not None and not self.cycle.response_complete

    def _fp_shed(self) -> None:
        idle = [c for c in self.connections
                if c is not self and not c.transport.is_closing()
                and not getattr(c, "_fp_busy", lambda: True)()]
        if idle:
            min(idle, key=lambda c: c._fp_idle_since).transport.close()

    def _fp_check(self) -> None:
        if self.cycle is not self._fp_seen:    # a new request head arrived
            self._fp_seen = self.cycle
            self._fp_disarm()

    def data_received(self, data: bytes) -> None:
        """Parse; a complete head disarms the deadline."""
        super().data_received(data)  # type: ignore[misc]
        self._fp_check()

    def on_response_complete(self) -> None:
        """Answered: wait for the next head under a new deadline."""
        before = self.cycle
        super().on_response_complete()  # type: ignore[misc]
        self._fp_idle_since = time.monotonic()
        if self.cycle is before and not self.transport.is_closing():
            self._fp_arm()
        else:
            self._fp_check()

    def connection_lost(self, exc: Exception | None) -> None:
        """Closed: no deadline left behind."""
        self._fp_disarm()
        super().connection_lost(exc)  # type: ignore[misc]


def _protocol_class(cap: int, head_timeout_s: float) -> type:
    """uvicorn's h11 protocol with :class:`_Deadlines` and these bounds."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    return type("Protocol", (_Deadlines, H11Protocol),
                {"cap": cap, "head_timeout_s": head_timeout_s})


def bind(host: str, port: int, backlog: int = BACKLOG) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: any free one).

    Raises:
        OSError: the address cannot be bound.
    """
    name = host.strip("[]")
    try:
        infos = socket.getaddrinfo(name or None, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise OSError(f"cannot resolve {host!r}: {exc}") from exc
    infos.sort(key=lambda i: i[0] != socket.AF_INET)    # "localhost": 127.0.0.1 first
    family, _, _, _, address = infos[0]
    # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on sockets that say they are TCP
    # (without it a response's second write waits out the client's delayed ACK, 40 ms)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    return sock


class AsgiServer:
    """An ASGI application served by uvicorn on a socket bound at construction.

    Args:
        app: the ASGI application.
        host: the address to bind.
        port: the TCP port (0: any free one; see :attr:`port`).
        max_connections: connections at once (uvicorn's ``limit_concurrency``; lowered
            to fit the open-file limit).
        head_timeout_s: seconds to send a request head.
        lifespan: run the application's lifespan (startup and shutdown), as an
            application that starts a task manager there needs (the MCP SDK's).

    Raises:
        OSError: the address cannot be bound.
        MissingDependency: uvicorn or starlette is not installed.
    """

    def __init__(self, app: Any, *, host: str, port: int,
                 max_connections: int = MAX_CONNECTIONS,
                 head_timeout_s: float = HEAD_TIMEOUT_S, lifespan: bool = False) -> None:
        uvicorn = _uvicorn()
        self._sock = bind(host, port)
        address = self._sock.getsockname()
        self.host, self.port = str(address[0]), int(address[1])
        self.max_connections = connection_cap(max_connections)
        config = uvicorn.Config(
            app, http=_protocol_class(self.max_connections, head_timeout_s), ws="none",
            lifespan="on" if lifespan else "off", log_config=None, log_level="warning",
            access_log=False,
            server_header=False, proxy_headers=False, backlog=BACKLOG,
            limit_concurrency=self.max_connections + 1, timeout_keep_alive=KEEP_ALIVE_S,
            timeout_graceful_shutdown=3, h11_max_incomplete_event_size=MAX_HEAD_BYTES)
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None
        self._closed = False

    def serve_forever(self) -> None:
        """Serve in this thread until :meth:`shutdown` (or Ctrl-C in the main thread,
        raised as KeyboardInterrupt once the server has stopped)."""
        try:
            asyncio.run(self._server.serve(sockets=[self._sock]))
        finally:
            self._sock.close()

    def start(self) -> AsgiServer:
        """Serve from a daemon thread; returns self (the socket listens already)."""
        self._thread = threading.Thread(target=self.serve_forever, daemon=True,
                                        name=f"foreperson-http-{self.port}")
        self._thread.start()
        return self

    def shutdown(self) -> None:
        """Stop serving (answers in progress get a few seconds) and close the socket."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._thread is None or not self._thread.is_alive():
            self._sock.close()

    def server_close(self) -> None:
        """Close the socket (done by :meth:`shutdown`; for the stdlib servers' callers)."""
        self._sock.close()
