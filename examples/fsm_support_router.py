"""A support desk run by a YAML state machine (seed 003), offline.

The supervisor never calls a specialist: it writes the typed `route` field, and the
guards of examples/support_router.yaml send the ticket on. Each agent here is a real
`Agent` on a `FunctionModel` that decides from its prompt, so the example needs no
network and prints the same every time.

    python3 examples/fsm_support_router.py
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from foreperson import Agent, Machine
from foreperson.fsm import UPDATE_CONTEXT
from foreperson.models import Message, ModelRequestParameters, ToolCall, ToolReturn
from foreperson.testing import FunctionModel
from foreperson.work import MemoryStore

MACHINE = Path(__file__).with_name("support_router.yaml")

KEYWORDS = {
    "billing": ("charged", "invoice", "refund"),
    "security": ("hacked", "log in", "password"),
    "technical": ("crash", "error", "slow"),
}
FINDINGS = {
    "billing_agent": "order 1182 was charged twice; the second charge is refundable",
    "security_agent": "two logins from an unknown device; password reset forced",
    "tech_agent": "the app crashes when the image cache is full",
}


def _section(prompt: str, name: str) -> str:
    found = re.search(rf"^{name}:\n(.*?)(?:\n\n|\Z)", prompt, re.S | re.M)
    return found.group(1) if found else ""


def _update(field: str, value: str) -> ToolCall:
    return ToolCall(UPDATE_CONTEXT, {"field": field, "value": value})


def supervisor_reply(messages: Sequence[Message], params: ModelRequestParameters):
    """Route by keywords of the request, to each specialist it needs, then synthesize."""
    if isinstance(messages[-1], ToolReturn):
        return "staged"
    prompt = messages[1].content
    state = re.search(r'in state "(\w+)"', prompt).group(1)
    request = _section(prompt, "REQUEST").lower()
    notes = _section(prompt, "CONTEXT")
    needed = [route for route, words in KEYWORDS.items() if any(w in request for w in words)]
    if state == "synthesize":
        objective = _section(prompt, "OBJECTIVE")        # the notes, in full, as JSON
        reports = json.loads(objective[objective.index("["):])
        return _update("answer", "We checked: " + "; ".join(reports) + ".")
    todo = [route for route in needed if f"{route}: " not in notes]
    route = todo[0] if todo else "synthesize"
    if state == "triage":
        return [_update("request", request.split(".")[0]), _update("route", route)]
    return _update("route", route)


def specialist_reply(name: str):
    def reply(messages: Sequence[Message], params: ModelRequestParameters):
        if isinstance(messages[-1], ToolReturn):
            return "reported"
        return _update("finding", FINDINGS[name])
    return reply


def main() -> None:
    machine = Machine.from_file(MACHINE)          # checked here: every problem at once
    print(machine.spec.summary())
    agents = {"supervisor": Agent("You route support tickets.", name="supervisor",
                                  model=FunctionModel(supervisor_reply))}
    for name in FINDINGS:
        agents[name] = Agent(f"You are the {name}.", name=name,
                             model=FunctionModel(specialist_reply(name)))
    store = MemoryStore()                           # checkpoints every 2 transitions
    result = machine.run_sync(
        "I was charged twice for order 1182. And now I cannot log in - was I hacked?",
        agents=agents, store=store, run_id="ticket-1182")
    for t in result.trace:
        wrote = ", ".join(f"{w.field} by {w.by}" for w in t.writes) or "-"
        print(f"{t.index}. {t.from_state} -> {t.to_state} [{t.guard or 'always'}] {wrote}")
    print("notes:", result.context["notes"])
    print(f"{result.stop_reason}: {result.context['answer']}")
    checkpoints = [s.key for s in store.list_steps(result.run_id) if s.kind == "fsm.checkpoint"]
    print("checkpoints:", ", ".join(checkpoints))


if __name__ == "__main__":
    main()
