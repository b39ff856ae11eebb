"""A foreperson team served over MCP and called by the MCP SDK's own client: the client
starts ``foreperson mcp serve examples/serve_team_mcp.py:team --db FILE`` as a stdio
subprocess, lists its tools, calls the team with progress notifications, gets a run
parked on a refund approval, approves it (as ``foreperson runs approve`` would, from
another process) and finishes it with the ``support_resume`` tool.

Runs offline (a rule-routed team, a scripted-by-function model; needs the mcp extra:
``pip install 'foreperson[mcp]'``)::

    python examples/serve_team_mcp.py

Any MCP client can use the same server: e.g. in Claude Desktop's configuration,
``{"command": "foreperson", "args": ["mcp", "serve", "/path/serve_team_mcp.py:team",
"--db", "/path/runs.db"]}``.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import anyio

from foreperson.agents import Agent, Guards, ask_later, tool
from foreperson.models import ToolCall, ToolReturn
from foreperson.teams import FINISH, Team
from foreperson.testing import FunctionModel


@tool
def invoice(number: str) -> str:
    """An invoice's amount and status."""
    return f"invoice {number}: 42.00 EUR, paid twice on 3 May"


@tool
def refund(number: str, amount_eur: float) -> str:
    """Refund part of an invoice (a human approves it first)."""
    return f"refunded {amount_eur:.2f} EUR on {number}"


def billing_model(messages, params):
    """Look the invoice up, refund the double charge, then answer."""
    returns = [m for m in messages if isinstance(m, ToolReturn)]
    if not returns:
        return ToolCall("invoice", {"number": "INV-7"})
    if len(returns) == 1:
        return ToolCall("refund", {"number": "INV-7", "amount_eur": 42.0})
    return f"You were charged twice; {returns[-1].content}."


billing = Agent("Answer billing questions with the invoice tools.",
                model=FunctionModel(billing_model), tools=[invoice, refund], name="billing",
                guards=Guards(approval=ask_later, approval_required={"refund"}))
team = Team.router(workers={"billing": billing}, name="support",
                   decide=lambda state: "billing" if not state.delegations else FINISH)


async def main() -> None:
    from mcp import Client, StdioServerParameters

    db = Path(tempfile.mkdtemp(prefix="mcp-serve-example-")) / "runs.db"
    server = StdioServerParameters(command=sys.executable, args=[
        "-m", "foreperson.cli.main", "mcp", "serve", f"{__file__}:team", "--db", str(db)])

    async def shown(done: float, total: float | None, message: str | None) -> None:
        print(f"   progress: {message}")

    async with Client(server) as client:
        print("== tools:", sorted(t.name for t in (await client.list_tools()).tools))
        parked = await client.call_tool("support", {"prompt": "I was charged twice for INV-7"},
                                        progress_callback=shown)
        answer = parked.structured_content
        print(f"== {answer['stop_reason']} (run {answer['run_id']})")
        for call in answer["pending"]:
            print(f"   waiting for: {call['tool']}({call['arguments']}) by {call['agent']}")

    # a human approves, from another process
    approved = subprocess.run(
        [sys.executable, "-m", "foreperson.cli.main", "runs", "approve", answer["run_id"],
         answer["pending"][0]["call_id"], "--db", str(db)],
        capture_output=True, text=True, check=True)
    print("==", approved.stdout.strip())

    async with Client(server) as client:        # a new server process: the journal has it
        done = await client.call_tool("support_resume", {"run_id": answer["run_id"]},
                                      progress_callback=shown)
        print(f"== {done.structured_content['stop_reason']}: {done.structured_content['text']}")


if __name__ == "__main__":
    anyio.run(main)
