"""What ``foreperson.protocols.mcp.mcp_server`` offers besides an agent's entry point
(issue 22 item 3): a state machine's entry and resume tools, and the work layer's tools,
off unless kinds are named. Driven in-process by the SDK's client (its in-memory
transport); the served processes are tested in tests/integration/test_mcp_serve.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402

from foreperson.agents import Agent  # noqa: E402
from foreperson.errors import ConfigurationError  # noqa: E402
from foreperson.fsm import UPDATE_CONTEXT, Machine  # noqa: E402
from foreperson.models import ToolCall  # noqa: E402
from foreperson.protocols import progress_message  # noqa: E402
from foreperson.protocols.mcp import WorkTools, mcp_server  # noqa: E402
from foreperson.testing import ScriptedModel  # noqa: E402
from foreperson.work import MemoryStore  # noqa: E402

ROUTER = Path(__file__).resolve().parents[2] / "examples" / "support_router.yaml"


def write(field: str, value: Any) -> ToolCall:
    return ToolCall(UPDATE_CONTEXT, {"field": field, "value": value})


def router_agents() -> dict[str, Agent]:
    scripts = {
        "supervisor": [[write("request", "a double charge"), write("route", "billing")],
                       "routed", write("route", "synthesize"), "routed",
                       write("answer", "We refunded the second charge."), "done"],
        "billing_agent": [write("finding", "charged twice on 3 May"), "reported"],
        "tech_agent": [], "security_agent": [],
    }
    return {name: Agent(f"You are {name}.", model=ScriptedModel(script, name=name), name=name)
            for name, script in scripts.items()}


def call(server: Any, tool: str, arguments: dict[str, Any]) -> Any:
    async def body() -> Any:
        async with Client(server) as client:
            return await client.call_tool(tool, arguments)
    return anyio.run(body)


def tool_names(server: Any) -> set[str]:
    async def body() -> set[str]:
        async with Client(server) as client:
            return {t.name for t in (await client.list_tools()).tools}
    return anyio.run(body)


def test_a_served_machine_runs_to_its_terminal_state_and_answers_with_the_context():
    machine = Machine.from_file(ROUTER)
    store = MemoryStore()
    server = mcp_server(machine, agents=router_agents(), store=store)
    name = machine.spec.name
    assert tool_names(server) == {name, f"{name}_resume"}
    answer = call(server, name, {"request": "I was charged twice", "run_id": "m-1"})
    assert not answer.is_error
    got = answer.structured_content
    assert (got["run_id"], got["stop_reason"]) == ("m-1", "completed")
    assert got["output"]["answer"] == "We refunded the second charge."
    again = call(server, f"{name}_resume", {"run_id": "m-1"}).structured_content
    assert again["stop_reason"] == "completed"       # replayed from its checkpoints


def test_a_machine_needs_its_agents_and_an_agent_takes_none():
    with pytest.raises(ConfigurationError, match="needs its agents"):
        mcp_server(Machine.from_file(ROUTER))
    agent = Agent("x", model=ScriptedModel([]), name="x")
    with pytest.raises(ConfigurationError, match="agents= is for a machine"):
        mcp_server(agent, agents={})
    with pytest.raises(ConfigurationError, match="cannot serve a str"):
        mcp_server("agent")  # type: ignore[arg-type]


def test_work_tools_are_off_unless_kinds_are_named_and_submit_only_those_kinds():
    agent = Agent("x", model=ScriptedModel([]), name="clerk")
    assert tool_names(mcp_server(agent)) == {"clerk"}
    store = MemoryStore()
    server = mcp_server(agent, work=WorkTools(store, frozenset({"echo"})))
    assert tool_names(server) == {"clerk", "submit_task", "task_status"}

    submitted = call(server, "submit_task", {"kind": "echo", "payload": {"text": "hi"},
                                             "task_id": "t-1"}).structured_content
    assert (submitted["task_id"], submitted["status"]) == ("t-1", "PENDING")
    assert store.get("t-1").payload == {"text": "hi"}
    again = call(server, "submit_task", {"kind": "echo", "payload": {"text": "hi"},
                                         "task_id": "t-1"})
    assert not again.is_error and len(store.list_tasks()) == 1      # idempotent by id
    clash = call(server, "submit_task", {"kind": "echo", "payload": {"text": "other"},
                                         "task_id": "t-1"})
    assert clash.is_error and "already stored as another task" in clash.content[0].text

    refused = call(server, "submit_task", {"kind": "rm_rf", "payload": {}})
    assert refused.is_error and "may not be submitted here; allowed: echo" in (
        refused.content[0].text)
    assert len(store.list_tasks()) == 1

    [claimed] = store.claim("w", ["echo"], 1, start=True)
    assert store.complete(claimed.id, claimed.lease_token, {"echoed": "hi"})
    status = call(server, "task_status", {"task_id": "t-1"}).structured_content
    assert (status["status"], status["result"]) == ("COMPLETED", {"echoed": "hi"})
    missing = call(server, "task_status", {"task_id": "nope"})
    assert missing.is_error and "no task 'nope'" in missing.content[0].text


def test_work_tools_need_a_kind():
    with pytest.raises(ConfigurationError, match="at least one task kind"):
        WorkTools(MemoryStore(), frozenset())


def test_progress_lines_say_who_did_what_and_skip_text_deltas():
    from foreperson.agents import TextDeltaEvent

    assert progress_message(TextDeltaEvent("r", "a", 1, "hel")) is None
