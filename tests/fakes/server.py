"""A scripted HTTP server on 127.0.0.1 (port 0) in a thread, for driving the real
provider SDKs over real HTTP in tests.

Each POST is recorded and answered with the next scripted :class:`FakeReply`: a JSON
body, an error status with headers (``Retry-After``), a stream of server-sent events, or
a reply that holds the connection open past the client's timeout. A GET is answered
from ``get_replies`` by path (default 404) and recorded in ``gets``, apart from the
POSTs. ``connections`` counts the TCP connections accepted (keep-alive reuse shows as
fewer connections than requests).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeReply", "FakeServer", "RecordedRequest", "SseEvent"]


@dataclass(frozen=True)
class SseEvent:
    """One server-sent event: an optional ``event:`` name and its ``data:`` (JSON unless
    a string)."""

    data: Any
    event: str | None = None

    def encode(self) -> bytes:
        data = self.data if isinstance(self.data, str) else json.dumps(self.data)
        head = f"event: {self.event}\n" if self.event else ""
        return f"{head}data: {data}\n\n".encode()


@dataclass(frozen=True)
class FakeReply:
    """What the server answers to one request.

    Attributes:
        status: the HTTP status.
        body: a JSON body (ignored when ``events`` is set).
        headers: extra response headers, e.g. ``{"Retry-After": "2"}``.
        events: server-sent events to stream instead of a body.
        hold_s: seconds to hold the request before answering (to make the client time
            out); released early when the server stops.
    """

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    events: list[SseEvent] | None = None
    hold_s: float = 0.0


@dataclass(frozen=True)
class RecordedRequest:
    """A request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


class FakeServer:
    """Answers requests from a queue of scripted replies; use as a context manager.

    Attributes:
        requests: every POST received, in order.
        gets: every GET received, in order.
        get_replies: the reply to a GET, by path (e.g. ``"/v1/models"``); others 404.
        connections: TCP connections accepted so far.
        url: ``http://127.0.0.1:<port>``.
    """

    def __init__(self, replies: list[FakeReply] | None = None) -> None:
        self.requests: list[RecordedRequest] = []
        self.gets: list[RecordedRequest] = []
        self.get_replies: dict[str, FakeReply] = {}
        self.connections = 0
        self._replies: deque[FakeReply] = deque(replies or [])
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.unexpected = 0

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def add(self, *replies: FakeReply) -> None:
        with self._lock:
            self._replies.extend(replies)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._replies)

    def _next(self, request: RecordedRequest) -> FakeReply:
        with self._lock:
            self.requests.append(request)
            if self._replies:
                return self._replies.popleft()
            self.unexpected += 1
        return FakeReply(status=599, body={"error": {"message": "fake server: no reply scripted"}})

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real servers
            # headers and body are two writes: without TCP_NODELAY the second waits for
            # the client's delayed ACK (~40 ms a reply), hiding what the client costs
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def setup(self) -> None:
                super().setup()
                with server._lock:
                    server.connections += 1

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                request = RecordedRequest(
                    "GET", self.path, {k.lower(): v for k, v in self.headers.items()}, None
                )
                with server._lock:
                    server.gets.append(request)
                    reply = server.get_replies.get(self.path.split("?")[0])
                if reply is None:
                    reply = FakeReply(status=404, body={"error": {"message": "not found"}})
                if reply.hold_s:
                    server._release.wait(reply.hold_s)
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self._answer(reply)

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except json.JSONDecodeError:
                    body = raw.decode(errors="replace")
                request = RecordedRequest(
                    "POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body
                )
                reply = server._next(request)
                if reply.hold_s:
                    server._release.wait(reply.hold_s)
                # the client may have given up already (a timeout test)
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self._answer(reply)

            def _answer(self, reply: FakeReply) -> None:
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                if reply.events is not None:
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Cache-Control", "no-cache")
                    self.send_header("Connection", "close")  # the stream ends with it
                    self.close_connection = True
                    self.end_headers()
                    for event in reply.events:
                        self.wfile.write(event.encode())
                        self.wfile.flush()
                    return
                payload = json.dumps(reply.body if reply.body is not None else {}).encode()
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        return Handler

    def start(self) -> FakeServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
