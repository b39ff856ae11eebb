"""An agent whose tools come from an MCP server: the server (a small stock-room server
written with the ``mcp`` SDK, in this file) is started as a stdio subprocess, its tools
are offered to the model under a prefix (one of them denied), a call to its
``reserve`` tool waits for a human's approval (required by pattern), and a journaled run
replayed with the same run id returns the recorded results without calling the server
again.

Runs offline with a scripted model (needs the mcp extra: ``pip install 'foreperson[mcp]'``)::

    python examples/mcp_tools.py            # the agent (it starts the server itself)
    python examples/mcp_tools.py --serve    # the MCP server alone, on stdio
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import anyio

from foreperson.agents import Agent, Approval, Guards, MCPServer, RunContext, RunOptions
from foreperson.agents.steps import JournaledSteps
from foreperson.models import ToolCall
from foreperson.testing import ScriptedModel
from foreperson.work import MemoryStore

STOCK = {"bolt": 120, "nut": 4}


def serve(log: str | None) -> None:
    """The MCP server: ``stock(item)``, ``reserve(item, quantity)``, ``wipe()``."""
    from mcp.server.mcpserver import MCPServer as Server
    from mcp.server.mcpserver.exceptions import ToolError

    server = Server("stockroom")

    @server.tool()
    def stock(item: str) -> dict[str, object]:
        """How many of an item are in stock."""
        return {"item": item, "count": STOCK.get(item, 0)}

    @server.tool()
    def reserve(item: str, quantity: int) -> str:
        """Reserve items for an order."""
        if log:
            with open(log, "a") as out:
                out.write(f"reserve {item} {quantity}\n")
        if STOCK.get(item, 0) < quantity:
            raise ToolError(f"only {STOCK.get(item, 0)} {item} in stock")
        return f"reserved {quantity} {item}"

    @server.tool()
    def wipe() -> str:
        """Delete the whole stock list (denied to the agent)."""
        STOCK.clear()
        return "wiped"

    server.run("stdio")


def approve_reservations(call: ToolCall, ctx: RunContext) -> Approval:
    """A human in the loop: here, one who approves every reservation."""
    print(f"   approve {call.name}({call.arguments_dict()})? yes")
    return Approval.approve()


async def main() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="mcp-example-"))
    calls = workdir / "calls.txt"
    with (workdir / "server.log").open("w") as errlog:
        server = MCPServer.stdio(sys.executable, [__file__, "--serve", "--log", str(calls)],
                                 errlog=errlog, name="stockroom", prefix="stock_",
                                 deny=["wipe"])
        print("== offered:", [t.name for t in await server.list_tools()])

        def script() -> ScriptedModel:
            return ScriptedModel([
                [ToolCall("stock_stock", {"item": "bolt"}),
                 ToolCall("stock_stock", {"item": "nut"})],
                [ToolCall("stock_reserve", {"item": "bolt", "quantity": 10}),
                 ToolCall("stock_reserve", {"item": "nut", "quantity": 10})],
                "Reserved 10 bolts; only 4 nuts are in stock.",
            ])

        guards = Guards(approval=approve_reservations, approval_required={"stock_res*"},
                        tool_timeout_s=10)
        options = RunOptions(steps=JournaledSteps(MemoryStore()))
        agent = Agent("Reserve parts for orders.", model=script(), toolsets=[server],
                      guards=guards, name="clerk")
        result = await agent.run("Reserve 10 bolts and 10 nuts.", run_id="order-1",
                                 options=options)
        for message in result.messages:
            if getattr(message, "kind", None) == "tool_return":
                flag = " (error)" if message.is_error else ""
                print(f"   {message.name}{flag}: {' '.join(message.content.split())}")
        print(f"== {result.stop_reason}: {result.output}")
        print(f"   {result.usage.tool_calls} tool calls; the server saw "
              f"{len(calls.read_text().splitlines())} reservations")

        again = Agent("Reserve parts for orders.", model=ScriptedModel([]), name="clerk",
                      toolsets=[server], guards=guards)
        replayed = await again.run("Reserve 10 bolts and 10 nuts.", run_id="order-1",
                                   options=options)
        print(f"== replayed: {replayed.output}")
        print(f"   the server saw {len(calls.read_text().splitlines())} reservations")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", action="store_true", help="be the MCP server (stdio)")
    parser.add_argument("--log", default=None, help="the server's file of reservations")
    args = parser.parse_args()
    if args.serve:
        serve(args.log)
    else:
        anyio.run(main)
