"""MCP servers as toolsets: ``Agent(..., toolsets=[MCPServer.stdio(...)])`` offers the
tools of a Model Context Protocol server to the model, each as an ordinary
:class:`~foreperson.agents.Tool`, so the step runner journals, guards, bounds, counts and
traces its calls like any other tool's.

How a session lives (one per :class:`MCPServer` object): the official ``mcp`` SDK's
context managers (the transport, the client session, a ``subscriptions/listen`` stream)
must be entered and left in one task, so the session is owned by one long-lived task on
the event loop of the holder that opened it: the outermost run that uses the server (its
workers, nested runs and team members share the same session) or ``async with
server:``. Calls from that loop run on it directly, with nothing between the run and the
SDK; calls from runs on other loops (a run started in another thread) are handed to it
through thread-safe futures. The last holder to let go closes the session; when the
opener's own holders let go while runs of other loops still hold the session, its
release waits for them, since their calls run on its loop.

The tool list is fetched once per session and cached; the server's tools/list_changed
notification (or, on a 2026 protocol connection, the ``subscriptions/listen`` event)
marks it stale, and each run fetches the new one before its next model call.

A session whose connection breaks during a call (the server process died) is restarted
once: the call in flight becomes a tool error the model reads (it may or may not have
taken effect: it is not sent again), the next call goes to the new session. A second
break leaves the server down for the rest of the session: every later call is a tool
error at once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import fnmatch
import json
import logging
import re
import sys
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

import anyio
from pydantic import BaseModel, ConfigDict

from ..errors import ConfigurationError, MissingDependency, RunError
from ..journal import request_digest
from ..models import ToolReturn
from ._tools import Tool

if TYPE_CHECKING:
    from ._state import RunContext

__all__ = ["MCPServer", "MCPTool", "refresh_toolsets", "run_toolsets"]

logger = logging.getLogger("foreperson.agents")

T = TypeVar("T")

_NAME = re.compile(r"[^a-zA-Z0-9_-]")
_INSTALL = "MCP servers as toolsets need the mcp extra: pip install 'foreperson[mcp]'"


class _AnyArguments(BaseModel):
    """The arguments of an MCP tool: the server validates them against its own schema."""

    model_config = ConfigDict(extra="allow")


def _check_mcp() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError as exc:  # pragma: no cover - the extra is installed in CI
        raise MissingDependency(_INSTALL) from exc


@dataclass(frozen=True)
class MCPTool(Tool):
    """A tool of an MCP server, as the agent offers it (made by :class:`MCPServer`; not
    built by hand).

    Attributes:
        server: the server it calls.
        remote_name: its name on the server (``name`` is that with the server's
            ``prefix``).
        schema_digest: a digest of its input schema, recorded with each journaled call
            (``step_request``), so a resumed run whose server changed the schema of a
            recorded call stops with :class:`~foreperson.journal.JournalDivergence`.
    """

    server: MCPServer | None = field(default=None, repr=False, compare=False)
    remote_name: str = ""
    schema_digest: str = ""

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The model's arguments as they are (the server checks them against its schema).

        Args:
            arguments: the arguments as the model wrote them.

        Returns:
            A copy of them.

        Raises:
            ValueError: the arguments are not a JSON object.
        """
        if not isinstance(arguments, dict):
            raise ValueError(f"the arguments must be a JSON object, got {arguments!r}")
        return dict(arguments)

    async def call(self, kwargs: dict[str, Any], ctx: object | None = None) -> Any:
        """Call the tool on its server.

        Args:
            kwargs: the arguments (from :meth:`validate`).
            ctx: the run (unused).

        Returns:
            A :class:`~foreperson.models.ToolReturn`: the result's text (and structured
            content), with ``is_error`` set for an ``isError`` result, an error the server
            answered with, or a broken connection.
        """
        assert self.server is not None
        return await self.server.call_tool(self.remote_name, kwargs)


@dataclass
class _Listing:
    """The server's tools as last fetched, and how many times the list changed."""

    version: int = 0
    tools: tuple[MCPTool, ...] | None = None


class _Down(Exception):  # noqa: N818 - internal signal: the server cannot take calls
    """The session is down and is not restarted again (or could not start)."""


class MCPServer:
    """A Model Context Protocol server whose tools an :class:`~foreperson.agents.Agent`
    offers to its model (``Agent(..., toolsets=[server])``).

    Build one with :meth:`stdio` (a command started as a subprocess, spoken to over its
    stdin and stdout) or :meth:`http` (a streamable HTTP endpoint). Nothing starts until a
    run uses it: the outermost run that uses it opens one session, which every worker and
    nested run that uses the same object shares, and closes it when it ends; ``async with
    server:`` holds the session open across runs instead.

    Each tool the server lists (those ``allow`` and ``deny`` let through) becomes a
    :class:`MCPTool` named ``prefix + name``, with the server's description and JSON input
    schema. Its calls are ordinary tool calls: journaled under their step key (a resumed
    run returns the recorded result without calling the server), checked by the guards
    (``allowed_tools``, approval, ``ask_later``), bounded by ``timeout`` or
    ``Guards.tool_timeout_s``, counted in ``max_tool_calls``, traced and audited.

    Runs must be on asyncio (anyio's default backend). The session lives on the loop of
    the run (or ``async with``) that opened it; runs on other loops reach it through
    thread-safe futures, and the opener's release waits until they let go.

    Args:
        connect: makes the SDK transport (an async context manager that yields the read
            and write streams), once per session start; :meth:`stdio` and :meth:`http`
            build it.
        name: what errors, logs and the audit call the server.
        allow: tool names (``fnmatch`` patterns: ``"read_*"``) to offer; None: all.
        deny: tool names or patterns never offered (they win over ``allow``).
        prefix: prepended to every offered tool's name (``"fs_"``: ``read`` is offered as
            ``fs_read``), to keep two servers' tools apart.
        timeout: seconds one call may take (each tool's ``timeout_s``); None (default):
            ``Guards.tool_timeout_s`` bounds it. Past it the model reads an error naming the
            bound, and the server is told the request was cancelled.
        connect_timeout: seconds to start the session and list the tools (default 30).

    Raises:
        ConfigurationError: a timeout that is not a positive number of seconds.
        MissingDependency: the ``mcp`` extra is not installed.
    """

    def __init__(
        self,
        connect: Callable[[], Any],
        *,
        name: str,
        allow: Iterable[str] | None = None,
        deny: Iterable[str] = (),
        prefix: str = "",
        timeout: float | None = None,
        connect_timeout: float = 30.0,
    ) -> None:
        _check_mcp()
        for label, value in (("timeout", timeout), ("connect_timeout", connect_timeout)):
            if value is not None and not (isinstance(value, int | float) and value > 0):
                raise ConfigurationError(
                    f"MCP server {name!r}: {label} must be a positive number of seconds, "
                    f"got {value!r}")
        if isinstance(allow, str) or isinstance(deny, str):
            raise ConfigurationError(
                f"MCP server {name!r}: allow= and deny= take a list of names or patterns, "
                "not one string")
        self.name = name
        self.allow = None if allow is None else tuple(allow)
        self.deny = tuple(deny)
        self.prefix = prefix
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._connect = connect
        self._lifecycle = threading.Lock()
        self._holders = 0
        self._host: _Host | None = None

    # --- constructors ---------------------------------------------------------------

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        errlog: TextIO | None = None,
        name: str | None = None,
        allow: Iterable[str] | None = None,
        deny: Iterable[str] = (),
        prefix: str = "",
        timeout: float | None = None,
        connect_timeout: float = 30.0,
    ) -> MCPServer:
        """A server started as a subprocess and spoken to over its stdin and stdout.

        Args:
            command: the executable (``"npx"``, ``sys.executable``, ``"uvx"``).
            args: its arguments.
            env: environment variables for it, over the SDK's safe default environment
                (``PATH``, ``HOME``, ...; not the whole of this process's).
            cwd: its working directory (default this process's).
            errlog: where its stderr goes (default ``sys.stderr`` when it starts).
            name: what errors and logs call it (default the command's file name).
            allow: see :class:`MCPServer`.
            deny: see :class:`MCPServer`.
            prefix: see :class:`MCPServer`.
            timeout: see :class:`MCPServer` (seconds).
            connect_timeout: see :class:`MCPServer` (seconds).

        Returns:
            The server (not started).

        Raises:
            ConfigurationError: an empty command, or a bad timeout.
            MissingDependency: the ``mcp`` extra is not installed.
        """
        if not command:
            raise ConfigurationError("MCPServer.stdio: command must not be empty")
        arguments = list(args)
        environment = None if env is None else dict(env)

        def connect() -> Any:
            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            params = StdioServerParameters(command=command, args=arguments, env=environment,
                                           cwd=cwd)
            return stdio_client(params, errlog=errlog if errlog is not None else sys.stderr)

        return cls(connect, name=name or Path(command).name, allow=allow, deny=deny,
                   prefix=prefix, timeout=timeout, connect_timeout=connect_timeout)

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
        allow: Iterable[str] | None = None,
        deny: Iterable[str] = (),
        prefix: str = "",
        timeout: float | None = None,
        connect_timeout: float = 30.0,
    ) -> MCPServer:
        """A server at a streamable HTTP endpoint.

        Args:
            url: the endpoint (``"http://127.0.0.1:8000/mcp"``).
            headers: sent with every request (``{"Authorization": "Bearer ..."}``).
            name: what errors and logs call it (default the URL).
            allow: see :class:`MCPServer`.
            deny: see :class:`MCPServer`.
            prefix: see :class:`MCPServer`.
            timeout: see :class:`MCPServer` (seconds).
            connect_timeout: see :class:`MCPServer` (seconds).

        Returns:
            The server (not connected).

        Raises:
            ConfigurationError: a URL that is not ``http://`` or ``https://``, or a bad
                timeout.
            MissingDependency: the ``mcp`` extra is not installed.
        """
        if not url.startswith(("http://", "https://")):
            raise ConfigurationError(
                f"MCPServer.http: {url!r} is not an http:// or https:// URL")
        sent = dict(headers or {})

        @asynccontextmanager
        async def connect() -> AsyncIterator[Any]:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            async with create_mcp_http_client(headers=sent) as client, \
                    streamable_http_client(url, http_client=client) as streams:
                yield streams

        return cls(connect, name=name or url, allow=allow, deny=deny, prefix=prefix,
                   timeout=timeout, connect_timeout=connect_timeout)

    def __repr__(self) -> str:
        return f"MCPServer(name={self.name!r}, prefix={self.prefix!r})"

    # --- holding it open --------------------------------------------------------------

    async def __aenter__(self) -> MCPServer:
        """Hold the session open until the ``async with`` block ends (runs inside it
        share it; it is opened at the first use)."""
        await self.acquire()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Let go of the session (closed when no run holds it either)."""
        await self.release()

    async def acquire(self) -> None:
        """Hold the session open (one holder more); the first holder's event loop hosts
        it, and the session itself starts at the first listing or call. Pair with
        :meth:`release`, on the same loop."""
        loop = asyncio.get_running_loop()
        with self._lifecycle:
            host = self._host
            if host is None:
                host = self._host = _Host(loop, _Session(self))
                host.task = loop.create_task(host.serve(), name=f"foreperson-mcp-{self.name}")
            self._holders += 1
            if loop is not host.loop:
                host.foreign += 1
            elif host.drained is not None:
                host.drained.set()      # a releasing opener waits no more: we close it
        await _wait(host.ready)

    async def release(self) -> None:
        """One holder less; the last one closes the session. On the loop that hosts it,
        waits first for holders on other loops. Not cancellable once started."""
        with anyio.CancelScope(shield=True):
            loop = asyncio.get_running_loop()
            while True:
                with self._lifecycle:
                    host = self._host
                    if host is None:
                        return
                    if loop is not host.loop:           # a guest: the host closes it
                        self._holders -= 1
                        host.foreign -= 1
                        if host.foreign == 0 and host.drained is not None:
                            host.loop.call_soon_threadsafe(host.drained.set)
                        return
                    if host.drained is None:            # this holder's first pass
                        self._holders -= 1
                    if self._holders > host.foreign:     # another holder on this loop
                        host.drained = None
                        return
                    if host.foreign == 0:
                        self._host = None
                        break
                    host.drained = drained = asyncio.Event()
                await drained.wait()                # guests' calls run on this loop
            await host.close()

    # --- tools ------------------------------------------------------------------------

    def offers(self, remote_name: str) -> bool:
        """Whether ``allow`` and ``deny`` let a tool of the server through.

        Args:
            remote_name: the tool's name on the server.
        """
        if any(fnmatch.fnmatchcase(remote_name, p) for p in self.deny):
            return False
        return self.allow is None or any(fnmatch.fnmatchcase(remote_name, p)
                                         for p in self.allow)

    @property
    def version(self) -> int:
        """How many times the tool list changed in this session (0 before it opens)."""
        host = self._host
        return host.session.listing.version if host is not None else 0

    async def list_tools(self) -> list[MCPTool]:
        """The tools offered to the model: those ``allow`` / ``deny`` let through, named
        with the prefix (fetched once per session; again after the server says the list
        changed). Opens the session for the call when nothing holds it.

        Returns:
            The tools, in the server's order.

        Raises:
            RunError: the server could not be started or listed within
                ``connect_timeout``; the cause is kept as ``__cause__``.
        """
        return list((await self.current_tools())[1])

    async def current_tools(self) -> tuple[int, tuple[MCPTool, ...]]:
        """:meth:`list_tools` with the list's :attr:`version`.

        Returns:
            ``(version, tools)``.

        Raises:
            RunError: as :meth:`list_tools`.
        """
        if self._host is not None:     # held (by a run, or `async with`)
            return await self._on_host(lambda session: session.tools())
        await self.acquire()
        try:
            return await self._on_host(lambda session: session.tools())
        finally:
            await self.release()

    async def call_tool(self, remote_name: str, arguments: dict[str, Any]) -> ToolReturn:
        """Call one tool of the server (what an :class:`MCPTool` does).

        Args:
            remote_name: the tool's name on the server.
            arguments: its arguments (a JSON object).

        Returns:
            The result as the model reads it (``call_id`` and ``name`` are filled in by
            the run): its text (and structured content); ``is_error`` for an ``isError``
            result, an error the server answered with, or a broken connection (after
            which the session is restarted once).

        Raises:
            RunError: nothing holds the session (call it from a run, or inside
                ``async with server:``).
        """
        if self._host is None:
            raise RunError(f"MCP server {self.name!r}: no run holds its session; call its "
                           "tools from a run of an agent that has it in toolsets=, or "
                           "inside `async with server:`")
        text, is_error = await self._on_host(
            lambda session: session.call(remote_name, arguments))
        return ToolReturn("", self.prefix + remote_name, text, is_error)

    async def _on_host(self, work: Callable[[_Session], Awaitable[T]]) -> T:
        """``work(session)`` on the session's loop: awaited right here when this is it,
        else handed over (cancelling the wait cancels it there)."""
        host = self._host
        if host is None:
            raise RunError(f"MCP server {self.name!r} is closed")
        if asyncio.get_running_loop() is host.loop:
            return await work(host.session)

        async def run() -> T:
            return await work(host.session)

        return await _wait(asyncio.run_coroutine_threadsafe(run(), host.loop))

    def _make_tools(self, listed: Sequence[Any]) -> tuple[MCPTool, ...]:
        made: dict[str, MCPTool] = {}
        for item in listed:
            remote = str(item.name)
            if not self.offers(remote):
                continue
            name = _NAME.sub("_", self.prefix + remote)[:64]
            if name in made:
                logger.warning("MCP server %s: tool %r is offered as %r, like another one; "
                               "left out", self.name, remote, name)
                continue
            schema = dict(item.input_schema or {"type": "object"})
            schema.pop("title", None)
            made[name] = MCPTool(
                function=_unbound, name=name,
                description=item.description or item.title or remote,
                parameters=schema, args_model=_AnyArguments, is_async=True,
                timeout_s=self.timeout, server=self, remote_name=remote,
                schema_digest=request_digest(schema)[:24],
                step_request={"schema": request_digest(schema)[:24]},
            )
        return tuple(made.values())


async def _unbound(**kwargs: Any) -> Any:
    """The ``function`` of an :class:`MCPTool` (its :meth:`MCPTool.call` is what runs)."""
    raise RuntimeError("call an MCP tool through its server")


async def _wait(future: concurrent.futures.Future[T]) -> T:
    """Await a thread-safe future (of the session's loop) from this event loop;
    cancelling the wait cancels what it waits for."""
    try:
        return await asyncio.wrap_future(future)
    except asyncio.CancelledError:
        future.cancel()
        raise


class _Host:
    """Where a session lives: the event loop of the holder that opened it, the task that
    holds the session's task group there, and how many holders are on other loops."""

    def __init__(self, loop: asyncio.AbstractEventLoop, session: _Session) -> None:
        self.loop = loop
        self.session = session
        self.ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self.task: asyncio.Task[None] | None = None
        self.foreign = 0
        self.drained: asyncio.Event | None = None   # set when the last guest lets go

    async def serve(self) -> None:
        """The session's task group, on this loop, until the session is closed."""
        try:
            await self.session.hold(ready=self.ready)
        except BaseException as exc:
            if not self.ready.done():
                self.ready.set_exception(exc)
            raise

    async def close(self) -> None:
        """Close the session (its owner task, transport and task group), on this loop."""
        try:
            await self.session.close()
            if self.task is not None:
                await self.task
        except Exception:  # noqa: BLE001 - closing must not fail the run that ends
            logger.warning("MCP server %s: closing its session failed",
                           self.session.server.name, exc_info=True)


class _Session:
    """The session, on its host's event loop: one owner task enters the transport and
    the client session (and a listen stream) and leaves them; calls run beside it."""

    def __init__(self, server: MCPServer) -> None:
        self.server = server
        self.listing = _Listing()
        self._group: Any = None
        self._closing = anyio.Event()
        self._lock = anyio.Lock()
        self._client: Any = None
        self._stop: anyio.Event | None = None
        self._owner_done: anyio.Event | None = None
        self._restarts = 1
        self._down: str | None = None
        self._fetch_lock = anyio.Lock()

    async def hold(self, *, ready: concurrent.futures.Future[None]) -> None:
        """The task that owns the task group of the owner tasks, until :meth:`close`;
        ``ready`` is set once calls can be made."""
        async with anyio.create_task_group() as group:
            self._group = group
            ready.set_result(None)
            await self._closing.wait()
            group.cancel_scope.cancel()

    async def close(self) -> None:
        """Stop the owner task (leaving the session and the transport), then :meth:`hold`."""
        await self._stop_owner()
        self._closing.set()

    # --- the owner --------------------------------------------------------------------

    def _changed(self) -> None:
        """The server said its tool list changed: list it again when next asked."""
        self.listing.version += 1
        self.listing.tools = None

    async def _on_message(self, message: Any) -> None:
        from mcp_types import ToolListChangedNotification

        if isinstance(message, ToolListChangedNotification):   # a handshake-era server
            self._changed()

    async def _listen(self, client: Any, *, task_status: Any) -> None:
        """A 2026 protocol server tells list changes on a ``subscriptions/listen`` stream."""
        from mcp.client.subscriptions import ToolsListChanged

        try:
            async with client.listen(tools_list_changed=True) as subscription:
                task_status.started()
                async for event in subscription:
                    if isinstance(event, ToolsListChanged):
                        self._changed()
        except Exception:  # noqa: BLE001 - the connection went (SubscriptionLost, ...)
            logger.debug("MCP server %s: its listen stream ended", self.server.name)

    async def _own(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """The owner task: enters the transport, the client session and the listen
        stream, and leaves them, in this one task."""
        from mcp import Client
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        stop, done = anyio.Event(), anyio.Event()
        started = False
        try:
            async with AsyncExitStack() as stack:
                client = await stack.enter_async_context(Client(
                    self.server._connect(), mode="auto", cache=None,
                    message_handler=self._on_message))
                group = await stack.enter_async_context(anyio.create_task_group())
                if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                    await group.start(self._listen, client)
                self._client, self._stop, self._owner_done = client, stop, done
                started = True
                task_status.started()
                await stop.wait()
                group.cancel_scope.cancel()
        except Exception:
            if not started:
                raise
            logger.debug("MCP server %s: its session ended with an error", self.server.name,
                         exc_info=True)
        finally:
            done.set()

    async def _start_owner(self) -> None:
        with anyio.fail_after(self.server.connect_timeout):
            await self._group.start(self._own)

    async def _stop_owner(self) -> None:
        stop, done = self._stop, self._owner_done
        self._client = self._stop = self._owner_done = None
        if stop is not None and done is not None:
            stop.set()
            with anyio.move_on_after(10):
                await done.wait()

    async def _ensure(self) -> Any:
        """The live client: started at the first use, restarted once after a break."""
        client = self._client
        if client is not None:      # the common case, without the lock's checkpoint
            return client
        async with self._lock:
            if self._client is not None:
                return self._client
            if self._down is not None:
                raise _Down(self._down)
            try:
                await self._start_owner()
            except Exception as exc:  # noqa: BLE001 - said to the caller
                raise _Down(f"it could not be started: {_describe(exc)}") from exc
            return self._client

    # --- what runs ask ----------------------------------------------------------------

    async def tools(self) -> tuple[int, tuple[MCPTool, ...]]:
        listing = self.listing
        if listing.tools is not None:   # cached: no lock, no checkpoint (every turn asks)
            return listing.version, listing.tools
        async with self._fetch_lock:
            listing = self.listing
            while listing.tools is None:
                version = listing.version
                try:
                    client = await self._ensure()
                    listed = await self._list_all(client)
                except _Down as down:
                    raise RunError(f"MCP server {self.server.name!r}: cannot list its tools: "
                                   f"{down}") from down.__cause__
                except Exception as exc:
                    raise RunError(f"MCP server {self.server.name!r}: listing its tools "
                                   f"failed: {_describe(exc)}") from exc
                if listing.version == version:  # no change arrived while listing
                    listing.tools = self.server._make_tools(listed)
            return listing.version, listing.tools

    async def _list_all(self, client: Any) -> list[Any]:
        listed: list[Any] = []
        cursor: str | None = None
        with anyio.fail_after(self.server.connect_timeout):
            for _ in range(1000):
                page = await client.list_tools(cursor=cursor)
                listed.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
        return listed

    async def call(self, remote_name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED

        name = self.server.name
        try:
            client = await self._ensure()
        except _Down as down:
            return f"MCP server {name!r} is unavailable: {down}", True
        try:
            result = await client.call_tool(remote_name, arguments)
        except MCPError as exc:
            if exc.error.code != CONNECTION_CLOSED:
                return (f"MCP server {name!r} answered the call to {remote_name!r} with an "
                        f"error: {exc.error.message}"), True
            return await self._broken(client, remote_name, exc), True
        except (RuntimeError, ValueError) as exc:
            return (f"MCP server {name!r}: the call to {remote_name!r} failed: "
                    f"{_describe(exc)}"), True
        except Exception as exc:  # noqa: BLE001 - a transport failure: the connection broke
            return await self._broken(client, remote_name, exc), True
        return _render(result), bool(result.is_error)

    async def _broken(self, client: Any, remote_name: str, exc: Exception) -> str:
        """The connection broke during a call: restart the session once."""
        name = self.server.name
        said = (f"MCP server {name!r} broke off during the call to {remote_name!r} "
                f"({_describe(exc)}); the call may or may not have taken effect")
        async with self._lock:
            if self._client is client:
                await self._stop_owner()
                if self._restarts <= 0:     # its tools stay offered; their calls fail
                    self._down = "it broke off twice and is not restarted again"
                    logger.warning("MCP server %s broke off again; not restarted", name)
                    return f"{said}; it broke off twice and is not restarted again"
                self._restarts -= 1
                logger.warning("MCP server %s broke off; restarting it", name)
                try:
                    await self._start_owner()
                except Exception as again:  # noqa: BLE001 - said to the model
                    self._down = f"its restart failed: {_describe(again)}"
                    return f"{said}; restarting it failed: {_describe(again)}"
                self._changed()             # the new process lists its tools again
                return f"{said}; it was restarted, you may call its tools again"
            if self._down is not None:
                return f"{said}; {self._down}"
            return f"{said}; it was restarted, you may call its tools again"


def _describe(exc: BaseException) -> str:
    """``"Type: message"`` of an exception (of the first one, for a group)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _render(result: Any) -> str:
    """A ``CallToolResult`` as the text the model reads: its text blocks (other blocks
    described), and its structured content as JSON unless the text already is it."""
    parts: list[str] = []
    for block in result.content or ():
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind}: {block.mime_type}, {len(block.data)} base64 characters]")
        elif kind == "resource_link":
            parts.append(f"[resource: {block.uri}]")
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(text if text is not None else f"[resource: {resource.uri}]")
        else:
            parts.append(f"[{kind} content]")
    text = "\n".join(parts)
    structured = result.structured_content
    if structured is not None:
        try:
            parsed: Any = json.loads(text)
        except ValueError:
            parsed = text
        # the text already says it (as JSON, or as the one value an SDK wraps in "result")
        same = parsed == structured or structured == {"result": parsed}
        if not same:
            rendered = json.dumps(structured, ensure_ascii=False, sort_keys=True)
            text = f"{text}\nstructured content: {rendered}" if text else rendered
    return text or "(no content)"


# --- a run's toolsets ---------------------------------------------------------------


@dataclass(eq=False)
class _Held:
    """The servers an outermost run holds open for itself and every run nested in it."""

    servers: list[MCPServer] = field(default_factory=list)
    lock: anyio.Lock = field(default_factory=anyio.Lock)


@dataclass(eq=False)
class _RunTools:
    """Which tools each server gave one run, at which list version."""

    seen: dict[MCPServer, tuple[int, tuple[str, ...]]] = field(default_factory=dict)


_HELD: weakref.WeakKeyDictionary[Any, _Held] = weakref.WeakKeyDictionary()
_RUNS: weakref.WeakKeyDictionary[Any, _RunTools] = weakref.WeakKeyDictionary()


def _root(ctx: RunContext) -> RunContext:
    """The outermost run in this process that ``ctx`` is nested in (or ``ctx``)."""
    run = ctx
    while run.parent is not None and run.parent.context is not None:
        run = run.parent.context
    return run


@asynccontextmanager
async def run_toolsets(ctx: RunContext, toolsets: Sequence[MCPServer]) -> AsyncIterator[None]:
    """Give a run the tools of its agent's toolsets for as long as it runs.

    The outermost run (in this process) holds every server that it, or a run nested in
    it, uses, and lets go of them when it ends; a nested run adds its servers to its
    outermost run's. The tools join ``ctx.tools`` (see :func:`refresh_toolsets`).

    Args:
        ctx: the run.
        toolsets: the agent's toolsets.

    Raises:
        ConfigurationError: an MCP tool would have the name of another tool of the run.
        RunError: a server could not be started or listed.
    """
    root = _root(ctx)
    try:
        if toolsets:
            held = _HELD.setdefault(root, _Held())
            async with held.lock:
                for server in toolsets:
                    if server not in held.servers:
                        await server.acquire()
                        held.servers.append(server)
            tools = _RUNS.setdefault(ctx, _RunTools())
            for server in toolsets:
                tools.seen.setdefault(server, (-1, ()))
            await refresh_toolsets(ctx)
        yield
    finally:
        if root is ctx:
            held_now = _HELD.pop(ctx, None)
            if held_now is not None:
                with anyio.CancelScope(shield=True):
                    for server in reversed(held_now.servers):
                        await server.release()


async def refresh_toolsets(ctx: RunContext) -> None:
    """Bring the run's MCP tools up to date with its servers' lists (before each model
    call: a server that said its list changed is listed again).

    Args:
        ctx: the run.

    Raises:
        ConfigurationError: an MCP tool would have the name of another tool of the run.
        RunError: a server could not be listed.
    """
    tools = _RUNS.get(ctx)
    if tools is None:
        return
    for server, (version, names) in list(tools.seen.items()):
        if version == server.version:
            continue
        now, offered = await server.current_tools()
        for name in names:
            ctx.tools.pop(name, None)
        for made in offered:
            other = ctx.tools.get(made.name)
            if other is not None:
                where = (f"MCP server {other.server.name!r}" if isinstance(other, MCPTool)
                         and other.server is not None else "a tool of the agent")
                raise ConfigurationError(
                    f"agent {ctx.agent_name!r}: MCP server {server.name!r} offers a tool "
                    f"named {made.name!r}, like {where}; give the server a prefix= (or "
                    "deny= the tool)")
            ctx.tools[made.name] = made
        tools.seen[server] = (now, tuple(m.name for m in offered))
