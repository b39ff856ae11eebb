"""What foreperson adds to a protocol call (issue 22 item 6), measured in one run against
the official SDK's own client calling the same server, printed as JSON lines.

1. MCP, stdio and streamable HTTP: a server written with the ``mcp`` SDK (this file,
   ``--serve``) with an instant tool and a 20 ms tool. The baseline is the SDK's
   ``Client`` calling the tool ``--calls`` times, one after another: the very client
   foreperson's session holds, on the same server process and pipe, so that the
   difference is foreperson's and not two server processes' scheduling. Ours is a
   foreperson ``Agent`` whose toolset is that server (``MCPServer.stdio`` /
   ``MCPServer.http``) and whose model (a function, no network) asks for one call per
   turn, the same number of times: every call goes through the agent's loop, its
   guards, the step runner and the MCP session. Targets: on the 20 ms tool, ours / SDK
   at most 1.05; on the instant tool, at most 0.3 ms added per call. Printed beside
   them: the agent loop's own cost per turn (the same agent calling an instant Python
   tool: what any agent run pays, with no protocol) and what the MCP adapter adds on
   top of the SDK call (ours - SDK - loop).
2. A2A: an agent written with the ``a2a-sdk`` server API (this file, ``--serve-a2a``)
   answering at once. The baseline is the SDK's client sending ``--calls`` messages
   one after another (one client, created once); ours is ``a2a_agent(url)`` run that
   many times. Printed: ms per message each, the ratio and the ms added.

The medians of ``--repeats`` rounds (each side alternating) are compared; the instant
tool's target is judged on the median of paired chunks (each a run of 20 calls of the
SDK and 20 of ours, back to back, either side first in turn), which the round trip's
drift moves least. Beside it,
``ours_without_transport_ms_per_call``: the same agent when the SDK client answers from
memory, foreperson's own time per call with no pipe in it; and the floor: the SDK's calls
each followed by plain work (a JSON round trip of small objects) that takes as long
warm as ours without the transport, against the SDK alone (``floor_added_ms_per_call``,
``ours_over_floor``): what running code of that size right after each round trip costs
here. ``paired_error_ms_per_call`` is the standard error of the paired median. Run:
``python benchmarks/bench_mcp.py [--calls 200] [--repeats 5] [--transport stdio]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

import anyio

SLOW_S = 0.02


def serve_mcp(http: bool) -> None:
    """The MCP server: ``instant()`` and ``slow()`` (20 ms)."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bench")

    @server.tool()
    def instant(n: int) -> int:
        """Answers at once."""
        return n + 1

    @server.tool()
    async def slow(n: int) -> int:
        """Answers after 20 ms."""
        await anyio.sleep(SLOW_S)
        return n + 1

    if not http:
        server.run("stdio")
        return
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)       # listen before printing: an early client waits in the backlog
    print(f"listening {sock.getsockname()[1]}", flush=True)
    app = server.streamable_http_app()
    anyio.run(uvicorn.Server(uvicorn.Config(app, log_level="warning")).serve, [sock])


def serve_a2a() -> None:
    """An a2a-sdk agent that answers each message at once with one artifact."""
    import asyncio

    import uvicorn
    from a2a.helpers.proto_helpers import new_task_from_user_message, new_text_part
    from a2a.server.agent_execution import AgentExecutor
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
    from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
    from starlette.applications import Starlette

    class Answer(AgentExecutor):
        async def execute(self, context: Any, event_queue: Any) -> None:
            task = context.current_task or new_task_from_user_message(context.message)
            if context.current_task is None:
                await event_queue.enqueue_event(task)
            updater = TaskUpdater(event_queue, task.id, task.context_id)
            await updater.add_artifact([new_text_part("ok")])
            await updater.complete()

        async def cancel(self, context: Any, event_queue: Any) -> None:
            await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    card = AgentCard(name="bench", description="answers", version="1",
                     default_input_modes=["text/plain"], default_output_modes=["text/plain"],
                     capabilities=AgentCapabilities(streaming=True),
                     supported_interfaces=[AgentInterface(
                         protocol_binding="JSONRPC", url=f"http://127.0.0.1:{port}/",
                         protocol_version="1.0")],
                     skills=[AgentSkill(id="a", name="a", description="a", tags=["a"])])
    handler = DefaultRequestHandler(agent_executor=Answer(), task_store=InMemoryTaskStore(),
                                    agent_card=card)
    app = Starlette(routes=[*create_agent_card_routes(card),
                            *create_jsonrpc_routes(handler, "/")])
    print(f"listening {port}", flush=True)
    asyncio.run(uvicorn.Server(uvicorn.Config(app, log_level="warning")).serve([sock]))


def start(flag: str) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([sys.executable, __file__, flag], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    found = re.search(r"listening (\d+)", proc.stdout.readline())
    assert found, "the server did not start"
    return proc, int(found.group(1))


# --- MCP -----------------------------------------------------------------------------


async def sdk_mcp(client: Any, tool: str, calls: int) -> float:
    """Seconds for ``calls`` calls through the SDK's ``Client`` (connected already)."""
    await client.call_tool(tool, {"n": 0})
    began = time.perf_counter()
    for i in range(calls):
        await client.call_tool(tool, {"n": i})
    return time.perf_counter() - began


PER_RUN = 20
"""Tool calls per agent run (runs of a few turns, as agents make them)."""


def _caller(tool: str, calls: int) -> Any:
    """A model (no network, no bookkeeping) that asks for ``tool`` once per turn,
    ``calls`` times, then answers."""
    from foreperson.models import ModelBase, ModelResponse, ToolCall, Usage

    class Caller(ModelBase):
        name = "caller"

        def __init__(self) -> None:
            self.turn = 0

        async def request(self, messages: Any, params: Any) -> ModelResponse:
            self.turn += 1
            if self.turn > calls:
                return ModelResponse(text="done", usage=Usage(model_calls=1))
            return ModelResponse(tool_calls=(ToolCall(tool, {"n": self.turn},
                                                      id=f"c{self.turn}"),),
                                 usage=Usage(model_calls=1))

    return Caller()


async def ours_mcp(server: Any, tool: str, calls: int, local: Any = None) -> float:
    """Seconds for ``calls`` tool calls made by foreperson agents, one per turn, in runs
    of :data:`PER_RUN`: calls to ``server``'s MCP tool, or (``local``) to a Python tool
    doing the same (the agent loop's own cost, for the control)."""
    from foreperson.agents import Agent, Guards, Limits

    guards = Guards(limits=Limits(max_turns=PER_RUN + 2, max_tool_calls=PER_RUN + 1))
    elapsed = 0.0
    for start in range(0, calls, PER_RUN):
        n = min(PER_RUN, calls - start)
        agent = (Agent("Call the tool.", model=_caller(tool, n), toolsets=[server],
                       guards=guards) if local is None else
                 Agent("Call the tool.", model=_caller(tool, n), tools=[local], guards=guards))
        began = time.perf_counter()
        result = await agent.run("go")
        elapsed += time.perf_counter() - began
        assert result.usage.tool_calls == n, result.stop_reason
    return elapsed


class Paired(NamedTuple):
    """Seconds, medians over the rounds: each side's; and of the chunks' paired
    differences (ours - the SDK's), with that median's standard error."""

    ours: float
    sdk: float
    paired: float
    paired_error: float


async def alternate(rounds: int, ours: Callable[[], Awaitable[float]],
                    sdk: Callable[[], Awaitable[float]], *, chunks: int = 1) -> Paired:
    """Each side ``rounds`` times; with ``chunks`` > 1 each round is that many turns of
    either side (each doing its share of the calls), back to back, either side first in
    turn, so that the machine's drift (a stdio round trip varies by a third from one
    second to the next here) and what the first of two runs pays (the server woken, a
    cache refilled) fall on both halves of a pair alike."""
    mine, theirs, pairs = [], [], []
    for _ in range(rounds):
        ours_s = sdk_s = 0.0
        for chunk in range(max(chunks, 1)):
            if chunk % 2:
                ours_chunk = await ours()
                sdk_chunk = await sdk()
            else:
                sdk_chunk = await sdk()
                ours_chunk = await ours()
            pairs.append(ours_chunk - sdk_chunk)
            sdk_s += sdk_chunk
            ours_s += ours_chunk
        theirs.append(sdk_s)
        mine.append(ours_s)
    error = statistics.stdev(pairs) * 1.2533 / len(pairs) ** 0.5 if len(pairs) > 1 else 0.0
    return Paired(statistics.median(mine), statistics.median(theirs), statistics.median(pairs),
                  error)


def _work(units: int) -> None:
    """A fixed amount of the kind of work an agent turn does (small objects made, read
    and dropped; a JSON round trip), ``units`` times."""
    for i in range(units):
        record = {"turn": i, "name": "instant", "args": {"n": i}, "tags": ("a", "b")}
        json.loads(json.dumps(record))


def _units_for(seconds: float) -> int:
    """How many :func:`_work` units take ``seconds`` run warm (back to back)."""
    _work(2000)
    began = time.perf_counter()
    _work(20000)
    per_unit = (time.perf_counter() - began) / 20000
    return max(1, round(seconds / per_unit))


async def sdk_then_work(client: Any, tool: str, calls: int, units: int) -> float:
    """:func:`sdk_mcp`, with :func:`_work` (``units``) after each call: the floor, what
    any code of our warm cost pays when it runs right after each round trip."""
    await client.call_tool(tool, {"n": 0})
    began = time.perf_counter()
    for i in range(calls):
        await client.call_tool(tool, {"n": i})
        _work(units)
    return time.perf_counter() - began


async def without_transport(server: Any, tool: str, calls: int, rounds: int) -> float:
    """Median seconds for ``calls`` calls of ``tool`` made by foreperson agents when the
    session's SDK client answers at once with a result it got from the server before:
    foreperson's own time (agent loop, guards, step runner, MCP adapter) with no
    transport in it, free of the round trip's noise."""
    client = server._host.session._client
    canned = await client.call_tool(tool, {"n": 0})

    async def answer(*args: Any, **kwargs: Any) -> Any:
        return canned

    client.call_tool = answer               # this instance only; put back below
    try:
        return statistics.median([await ours_mcp(server, tool, calls)
                                  for _ in range(rounds)])
    finally:
        del client.call_tool


class Measured(NamedTuple):
    """Seconds for the ``n`` calls (see :func:`measure`)."""

    vs_sdk: Paired
    alone: float
    loop: float
    floor: Paired


async def measure(toolset: Callable[[], Any], tool: str, n: int, rounds: int,
                  local: Any) -> Measured:
    """Ours against the SDK (:func:`alternate`); ours without the transport
    (:func:`without_transport`); the agent loop's (the same agent calling ``local``, an
    instant Python tool: what any agent run costs per turn, with no protocol); and the
    floor: the SDK's calls each followed by plain work that takes as long as ours
    without the transport when run warm (:func:`sdk_then_work`), against the SDK's
    alone: what the machine charges any code of that size for running right after a
    round trip."""
    server = toolset()
    async with server:
        await server.list_tools()              # the session open, as the SDK side's
        # the baseline is the SDK's own Client inside that session: the same server
        # process and pipe (a stdio server has one client), so that the difference is
        # what foreperson adds, not two processes' scheduling on two cores
        client = server._host.session._client
        chunks = max(n // PER_RUN, 1)
        share = n // chunks
        vs_sdk = await alternate(rounds, lambda: ours_mcp(server, tool, share),
                                 lambda: sdk_mcp(client, tool, share), chunks=chunks)
        alone = await without_transport(server, tool, n, rounds)
        units = _units_for(alone / n)
        floor = await alternate(rounds, lambda: sdk_then_work(client, tool, share, units),
                                lambda: sdk_mcp(client, tool, share), chunks=chunks)
    loop = statistics.median([await ours_mcp(None, "instant", n, local=local)
                              for _ in range(rounds)])
    scale = chunks     # the paired medians are per chunk; the rows divide by n
    return Measured(vs_sdk._replace(paired=vs_sdk.paired * scale,
                                    paired_error=vs_sdk.paired_error * scale),
                    alone, loop, floor._replace(paired=floor.paired * scale,
                                                paired_error=floor.paired_error * scale))


def mcp_rows(calls: int, rounds: int, only: str | None = None) -> list[dict[str, Any]]:
    from foreperson.agents import MCPServer
    from foreperson.agents import tool as as_tool

    @as_tool(name="instant")
    async def instant(n: int) -> int:
        """Answers at once (the control: the same call, in this process; async, as an
        MCP tool is, so that no worker thread is timed)."""
        return n + 1

    rows = []
    proc, port = start("--serve-http")
    url = f"http://127.0.0.1:{port}/mcp"
    quiet = open(os.devnull, "w")  # noqa: SIM115 - the stdio server's stderr, closed below
    try:
        transports = {
            "stdio": lambda: MCPServer.stdio(sys.executable, [__file__, "--serve"],
                                             name="bench", errlog=quiet),
            "http": lambda: MCPServer.http(url, name="bench"),
        }
        for transport, toolset in transports.items():
            if only is not None and transport != only:
                continue
            for tool, n in (("instant", calls), ("slow", max(calls // 4, 20))):
                got = anyio.run(measure, toolset, tool, n, rounds, instant)
                mine, theirs = got.vs_sdk.ours, got.vs_sdk.sdk
                floor_added = got.floor.paired / n * 1000
                added = got.vs_sdk.paired / n * 1000
                row: dict[str, Any] = {
                    "benchmark": "mcp", "transport": transport, "tool": tool, "calls": n,
                    "ours_ms_per_call": round(mine / n * 1000, 3),
                    "sdk_ms_per_call": round(theirs / n * 1000, 3),
                    "ratio": round(mine / theirs, 3),
                    "added_ms_per_call": round((mine - theirs) / n * 1000, 3),
                    "added_ms_per_call_paired": round(added, 3),
                    # the standard error of that median: what the round trip's own noise
                    # lets this run resolve (more --calls narrow it)
                    "paired_error_ms_per_call": round(got.vs_sdk.paired_error / n * 1000, 3),
                    "ours_without_transport_ms_per_call": round(got.alone / n * 1000, 3),
                    "agent_loop_ms_per_call": round(got.loop / n * 1000, 3),
                    # the floor: plain work of our warm size run after each SDK call
                    "floor_added_ms_per_call": round(floor_added, 3),
                    "ours_over_floor": round(added / floor_added, 2) if floor_added > 0 else None,
                    "mcp_adapter_added_ms_per_call": round((mine - theirs - got.loop) / n * 1000,
                                                           3)}
                if tool == "slow":
                    row["target"] = "ratio <= 1.05"
                    row["meets"] = row["ratio"] <= 1.05
                else:
                    row["target"] = "added_ms_per_call_paired <= 0.3"
                    row["meets"] = row["added_ms_per_call_paired"] <= 0.3
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        quiet.close()
        proc.terminate()
        proc.wait(timeout=30)
    return rows


# --- A2A -----------------------------------------------------------------------------


async def sdk_a2a(url: str, calls: int) -> float:
    import httpx
    from a2a.client import ClientConfig, create_client
    from a2a.types import Message, Part, Role, SendMessageRequest

    async with httpx.AsyncClient(timeout=30) as http:
        client = await create_client(url, client_config=ClientConfig(httpx_client=http,
                                                                     streaming=True))
        began = time.perf_counter()
        for i in range(calls):
            request = SendMessageRequest(message=Message(
                message_id=f"m{i}", role=Role.ROLE_USER, parts=[Part(text="hello")]))
            async for _ in client.send_message(request):
                pass
        elapsed = time.perf_counter() - began
        await client.close()
        return elapsed


async def ours_a2a(agent: Any, calls: int) -> float:
    began = time.perf_counter()
    for _ in range(calls):
        result = await agent.run("hello")
        assert result.text == "ok"
    return time.perf_counter() - began


def a2a_row(calls: int, rounds: int) -> dict[str, Any]:
    from foreperson.agents import a2a_agent

    proc, port = start("--serve-a2a")
    url = f"http://127.0.0.1:{port}/"
    try:
        agent = a2a_agent(url, name="bench")

        async def body() -> Paired:
            await ours_a2a(agent, 1)              # the card read once, as the SDK's
            return await alternate(rounds, lambda: ours_a2a(agent, calls),
                                   lambda: sdk_a2a(url, calls))

        got = anyio.run(body)
        mine, theirs = got.ours, got.sdk
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    row = {"benchmark": "a2a", "calls": calls,
           "ours_ms_per_message": round(mine / calls * 1000, 3),
           "sdk_ms_per_message": round(theirs / calls * 1000, 3),
           "ratio": round(mine / theirs, 3),
           "added_ms_per_message": round((mine - theirs) / calls * 1000, 3)}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per round")
    parser.add_argument("--repeats", type=int, default=5, help="rounds per side")
    parser.add_argument("--transport", choices=("stdio", "http"),
                        help="measure MCP over this transport only (and skip A2A)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-http", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-a2a", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve or args.serve_http:
        serve_mcp(http=args.serve_http)
        return
    if args.serve_a2a:
        serve_a2a()
        return
    rows = mcp_rows(args.calls, args.repeats, args.transport)
    if args.transport is None:
        rows.append(a2a_row(max(args.calls // 4, 20), args.repeats))
    print(json.dumps({"benchmark": "summary",
                      "mcp_meets": all(r["meets"] for r in rows if "meets" in r)}))


if __name__ == "__main__":
    main()
