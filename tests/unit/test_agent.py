"""Agent runs with test models: results, structured output, run_sync, the event stream,
conversations continued, clones, and what reaches the model."""

from __future__ import annotations

import json
from contextlib import aclosing

import pytest
from pydantic import BaseModel

from foreperson.agents import (
    Agent,
    FinalEvent,
    Guards,
    Limits,
    MemoryAuditLog,
    ModelCallEvent,
    RateLimiter,
    RunContext,
    TextDeltaEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from foreperson.agents.steps import EVENTS_ADAPTER
from foreperson.errors import ConfigurationError, ModelError, OutputValidationError
from foreperson.models import (
    ModelResponse,
    SystemMessage,
    ToolCall,
    ToolReturn,
    Usage,
    UserMessage,
)
from foreperson.testing import FunctionModel, ScriptedModel


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class Triage(BaseModel):
    category: str
    priority: int


@pytest.mark.anyio
async def test_a_run_returns_output_messages_usage_and_stop_reason() -> None:
    model = ScriptedModel([
        ModelResponse(tool_calls=(ToolCall("add", {"a": 2, "b": 3}),), usage=Usage(1, 40, 8)),
        ModelResponse(text="2 + 3 = 5", usage=Usage(1, 60, 6)),
    ])
    agent = Agent("Do sums with the tool.", model=model, tools=[add], name="calc")
    with model:
        result = await agent.run("2 + 3?")

    assert result.output == "2 + 3 = 5"
    assert result.text == "2 + 3 = 5"
    assert result.completed and result.stop_reason == "completed"
    assert result.usage == Usage(model_calls=2, input_tokens=100, output_tokens=14, tool_calls=1)
    assert result.agent == "calc"
    kinds = [m.kind for m in result.messages]
    assert kinds == ["system", "user", "response", "tool_return", "response"]
    assert result.messages[0] == SystemMessage("Do sums with the tool.")
    assert result.messages[3].content == "5"
    # the model saw the tool and, on its second call, the result
    assert model.calls[0].tool_names == ["add"]
    assert model.calls[1].messages[-1] == result.messages[3]


@pytest.mark.anyio
async def test_structured_output_is_a_validated_object() -> None:
    model = ScriptedModel([Triage(category="billing", priority=2)])
    agent = Agent("Triage the ticket.", model=model, output_type=Triage)
    with model:
        result = await agent.run("I was charged twice")
    assert result.output == Triage(category="billing", priority=2)
    assert model.calls[0].params.output_type is Triage


@pytest.mark.anyio
async def test_a_fenced_json_answer_is_accepted() -> None:
    model = ScriptedModel(['```json\n{"category": "bug", "priority": 1}\n```'])
    with model:
        result = await Agent("x", model=model, output_type=Triage).run("crash")
    assert result.output == Triage(category="bug", priority=1)


@pytest.mark.anyio
async def test_an_invalid_answer_is_sent_back_with_its_errors() -> None:
    model = ScriptedModel(['{"category": "bug", "priority": "high"}',
                           '{"category": "bug", "priority": 1}'])
    with model:
        result = await Agent("x", model=model, output_type=Triage).run("crash")
    assert result.output == Triage(category="bug", priority=1)
    correction = model.calls[1].messages[-1]
    assert isinstance(correction, UserMessage)
    assert "priority: Input should be a valid integer" in correction.content


@pytest.mark.anyio
async def test_an_answer_that_never_validates_is_a_clear_error() -> None:
    model = ScriptedModel(["not json", "still not json"])
    agent = Agent("x", model=model, output_type=Triage, guards=Guards(limits=Limits(
        max_output_retries=1)))
    with model, pytest.raises(OutputValidationError, match="does not match Triage") as info:
        await agent.run("crash")
    assert info.value.text == "still not json"


def test_run_sync_runs_without_an_event_loop() -> None:
    model = ScriptedModel(["hello"])
    with model:
        result = Agent("Greet.", model=model).run_sync("hi", user_id="u1")
    assert result.output == "hello"


@pytest.mark.anyio
async def test_run_sync_refuses_to_run_inside_an_event_loop() -> None:
    agent = Agent("Greet.", model=ScriptedModel())
    with pytest.raises(RuntimeError, match=r"await agent\.run"):
        agent.run_sync("hi")


@pytest.mark.anyio
async def test_the_stream_yields_typed_events_tagged_with_run_and_agent() -> None:
    model = ScriptedModel([
        [ToolCall("add", {"a": 1, "b": 1}), ToolCall("add", {"a": 2, "b": 2})],
        "two and four",
    ])
    agent = Agent("Sum.", model=model, tools=[add], name="summer")
    with model:
        events = [e async for e in agent.stream("sums", run_id="run-42")]

    assert [e.kind for e in events] == [
        "model_call", "tool_call", "tool_call", "tool_result", "tool_result",
        "text_delta", "text_delta", "text_delta", "model_call", "final",
    ]
    assert {(e.run_id, e.agent) for e in events} == {("run-42", "summer")}
    assert isinstance(events[0], ModelCallEvent) and events[0].turn == 1
    assert isinstance(events[1], ToolCallEvent) and events[1].call.arguments == {"a": 1, "b": 1}
    assert isinstance(events[3], ToolResultEvent) and events[3].result.content == "2"
    assert events[3].duration_s >= 0
    assert "".join(e.text for e in events if isinstance(e, TextDeltaEvent)) == "two and four"
    final = events[-1]
    assert isinstance(final, FinalEvent)
    assert final.result.output == "two and four"
    assert final.result.run_id == "run-42"
    # every event serialises through the one adapter
    for event in events:
        dumped = EVENTS_ADAPTER.dump_python(event, mode="json")
        assert dumped["kind"] == event.kind
        json.dumps(dumped)


@pytest.mark.anyio
async def test_leaving_a_stream_early_ends_the_run() -> None:
    audit = MemoryAuditLog()
    model = ScriptedModel([ToolCall("add", {"a": 1, "b": 1}), "never reached"])
    agent = Agent("Sum.", model=model, tools=[add], guards=Guards(audit_log=audit))
    async with aclosing(agent.stream("sum")) as events:
        async for event in events:
            if event.kind == "model_call":
                break
    assert model.remaining == ["never reached"]
    assert audit.entries[-1].kind == "run_end"
    # the run goes on in a task of its own (so nested runs' events can stream live):
    # leaving the stream cancels it
    assert audit.entries[-1].data["error"].startswith("Cancelled")


@pytest.mark.anyio
async def test_tools_see_the_user_and_run_ids() -> None:
    seen: list[tuple[str | None, str]] = []

    def whoami(ctx: RunContext) -> str:
        seen.append((ctx.user_id, ctx.run_id))
        return ctx.user_id or "anonymous"

    model = ScriptedModel([ToolCall("whoami"), "done"])
    with model:
        result = await Agent("x", model=model, tools=[whoami]).run("who?", user_id="alice")
    assert seen == [("alice", result.run_id)]


@pytest.mark.anyio
async def test_a_conversation_continues_from_earlier_messages() -> None:
    model = ScriptedModel(["Nice to meet you, Ada.", "Your name is Ada."])
    agent = Agent("Be friendly.", model=model)
    with model:
        first = await agent.run("I am Ada.")
        second = await agent.run("What is my name?", message_history=first.messages)
    sent = model.calls[1].messages
    assert [m.kind for m in sent] == ["system", "user", "response", "user"]
    assert sum(isinstance(m, SystemMessage) for m in sent) == 1
    assert second.output == "Your name is Ada."


@pytest.mark.anyio
async def test_a_model_error_reaches_the_caller() -> None:
    model = ScriptedModel([ModelError("bad request", status_code=400)])
    audit = MemoryAuditLog()
    with pytest.raises(ModelError, match="bad request"):
        await Agent("x", model=model, guards=Guards(audit_log=audit)).run("hi")
    assert [e.kind for e in audit.entries] == ["run_start", "model_call", "run_end"]
    assert "ModelError" in audit.entries[1].data["error"]


@pytest.mark.anyio
async def test_a_function_model_gives_the_same_answers_on_replay() -> None:
    def reply(messages, params):
        last = messages[-1]
        if isinstance(last, ToolReturn):
            return f"the answer is {last.content}"
        return ToolCall("add", {"a": 20, "b": 22})

    agent = Agent("Sum.", model=FunctionModel(reply), tools=[add])
    first = await agent.run("sum", run_id="r")
    again = await agent.run("sum", run_id="r")
    assert first.output == again.output == "the answer is 42"
    assert first.messages == again.messages


@pytest.mark.anyio
async def test_a_tool_can_end_the_run_with_its_own_output() -> None:
    def hand_over(ctx: RunContext, text: str) -> str:
        ctx.end("completed", output=text)
        return "handed over"

    model = ScriptedModel([ToolCall("hand_over", {"text": "verbatim answer"})])
    with model:
        result = await Agent("x", model=model, tools=[hand_over]).run("go")
    assert result.output == "verbatim answer"
    assert result.usage.model_calls == 1


def test_output_type_must_be_a_pydantic_model() -> None:
    with pytest.raises(ConfigurationError, match="output_type must be a pydantic"):
        Agent("x", model=ScriptedModel(), output_type=dict)


def test_a_clone_keeps_model_tools_and_guards() -> None:
    audit = MemoryAuditLog()
    limiter = RateLimiter(5)
    template = Agent(
        "Template.", model=ScriptedModel(), tools=[add], output_type=Triage,
        guards=Guards(limits=Limits(max_turns=3), audit_log=audit, rate_limiter=limiter),
    )
    worker = template.clone(instructions="You review drafts.", name="reviewer")
    assert worker.instructions == "You review drafts."
    assert worker.name == "reviewer"
    assert worker.model is template.model
    assert list(worker.tools) == ["add"]
    assert worker.output_type is Triage
    assert worker.guards == template.guards
    assert worker.guards.audit_log is audit and worker.guards.rate_limiter is limiter
    with pytest.raises(ConfigurationError, match=r"unknown arguments \['color'\]; it takes"):
        template.clone(color="red")
