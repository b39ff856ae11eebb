"""A remote A2A agent as a worker: this file starts ``foreperson a2a serve`` of its
``billing`` team (another process, as another team's service would be), then a local
team routes a request to it through ``a2a_agent(url)``, with the remote run's updates
streamed as the worker's events, and seed 003's support router summons the same remote
agent for its billing state (the summons goes as an A2A message; the answer's writes
keep the machine's typed rules).

Runs offline (function models; needs the a2a extra: ``pip install 'foreperson[a2a]'``)::

    python examples/a2a_worker.py
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import anyio

from foreperson.agents import A2AUpdateEvent, Agent, a2a_agent, tool
from foreperson.fsm import UPDATE_CONTEXT, Machine
from foreperson.models import ToolCall, ToolReturn
from foreperson.teams import FINISH, Team
from foreperson.testing import FunctionModel, ScriptedModel

ROUTER = Path(__file__).with_name("support_router.yaml")


# --- the remote side: what `foreperson a2a serve examples/a2a_worker.py:billing` serves


@tool
def invoice(number: str) -> str:
    """An invoice's amount and status."""
    return f"invoice {number}: 42.00 EUR, paid twice on 3 May"


def billing_model(messages, params):
    """Look the invoice up; write the finding when summoned by a machine; answer."""
    last = messages[-1]
    if not any(isinstance(m, ToolReturn) for m in messages):
        return ToolCall("invoice", {"number": "INV-7"})
    summoned = any(t.name == UPDATE_CONTEXT for t in params.tools)
    if summoned and last.name == "invoice":
        return ToolCall(UPDATE_CONTEXT, {"field": "finding",
                                         "value": "INV-7 was paid twice on 3 May"})
    return f"Checked: {[m for m in messages if isinstance(m, ToolReturn)][0].content}."


billing = Agent("Check invoices and payments.", model=FunctionModel(billing_model),
                tools=[invoice], name="billing")


# --- the local side


def supervisor() -> Agent:
    """The router machine's hub: send the request to billing, then answer."""
    def write(field: str, value: str) -> ToolCall:
        return ToolCall(UPDATE_CONTEXT, {"field": field, "value": value})

    return Agent("You route.", name="supervisor", model=ScriptedModel([
        [write("request", "a double charge"), write("route", "billing")], "routed",
        write("route", "synthesize"), "routed",
        write("answer", "We refund the second payment of INV-7."), "done"]))


async def main(url: str) -> None:
    remote = a2a_agent(url, name="billing", description="Invoices and payments.")
    team = Team.router(workers={"billing": remote}, name="front",
                       decide=lambda state: "billing" if not state.delegations else FINISH)
    print(f"== a local team, its worker at {url}")
    async for event in team.stream("Was INV-7 paid twice?"):
        if isinstance(event, A2AUpdateEvent) and event.text:
            print(f"   {event.agent} ({event.state}): {event.text}")
        elif event.kind == "final" and event.level == 0:
            print(f"== {event.result.stop_reason}: {event.result.text}")

    idle = Agent("x", model=ScriptedModel([]))
    machine = Machine.from_file(ROUTER)
    result = await machine.run("I was charged twice for INV-7", agents={
        "supervisor": supervisor(), "billing_agent": a2a_agent(url, name="billing_agent"),
        "tech_agent": idle, "security_agent": idle})
    print(f"== the support router: {result.stop_reason} in {result.state}")
    print(f"   notes: {result.context['notes']}")
    print(f"   answer: {result.context['answer']}")


if __name__ == "__main__":
    server = subprocess.Popen(
        [sys.executable, "-m", "foreperson.cli.main", "a2a", "serve", f"{__file__}:billing",
         "--port", "0"], stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None
        line = server.stderr.readline()
        found = re.search(r"serving (http://\S+/) ", line)
        if found is None:
            sys.exit(f"the A2A server did not start: {line}")
        anyio.run(main, found.group(1))
    finally:
        server.terminate()
        server.wait(timeout=30)
