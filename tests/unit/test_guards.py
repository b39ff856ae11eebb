"""Guards end a run with a result or a clear error, never a hang: limits, permissions,
hooks, approval, guardrails, the rate limiter and the audit log."""

from __future__ import annotations

from dataclasses import replace

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from foreperson.agents import (
    Agent,
    Approval,
    Guards,
    JsonlAuditLog,
    Limits,
    MemoryAuditLog,
    RateLimiter,
    Tool,
)
from foreperson.errors import ConfigurationError
from foreperson.models import ModelResponse, ToolCall, ToolReturn, Usage
from foreperson.testing import FunctionModel, ScriptedModel


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Counter:
    """A tool that counts its calls."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def __call__(self, item: str, amount: int = 1) -> str:
        self.calls.append({"item": item, "amount": amount})
        return f"ordered {amount} x {item}"


def order_agent(model, counter: Counter, **guards) -> Agent:
    return Agent("Order things.", model=model,
                 tools=[Tool.from_function(counter, name="order")], guards=Guards(**guards))


def tool_returns(messages) -> list[ToolReturn]:
    return [m for m in messages if isinstance(m, ToolReturn)]


def always_orders(messages, params):
    return ToolCall("order", {"item": "pen"})


# --- limits ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_max_turns_ends_with_a_result_and_what_was_produced() -> None:
    def chatty(messages, params):
        turn = sum(isinstance(m, ModelResponse) for m in messages) + 1
        return ModelResponse(
            text=f"thinking {turn}", tool_calls=(ToolCall("order", {"item": "pen"}),)
        )

    counter = Counter()
    model = FunctionModel(chatty)
    result = await order_agent(model, counter, limits=Limits(max_turns=3)).run("go")
    assert result.stop_reason == "max_turns"
    assert not result.completed
    assert result.output is None
    assert result.text == "thinking 3"
    assert len(model.calls) == 3
    assert len(counter.calls) == 3  # the last allowed turn's tools still ran
    assert "max_turns=3" in result.detail


@pytest.mark.anyio
async def test_max_tool_calls_runs_what_fits_and_stops() -> None:
    counter = Counter()
    model = ScriptedModel([[ToolCall("order", {"item": i}) for i in ("a", "b", "c")]])
    with model:
        result = await order_agent(model, counter, limits=Limits(max_tool_calls=2)).run("go")
    assert result.stop_reason == "max_tool_calls"
    assert sorted(c["item"] for c in counter.calls) == ["a", "b"]  # the first two, in any order
    returns = tool_returns(result.messages)
    assert [r.is_error for r in returns] == [False, False, True]
    assert "max_tool_calls=2" in returns[2].content
    assert result.usage.tool_calls == 2


@pytest.mark.anyio
async def test_max_tokens_stops_before_the_next_model_call() -> None:
    counter = Counter()
    model = ScriptedModel([
        ModelResponse(tool_calls=(ToolCall("order", {"item": "pen"}),), usage=Usage(1, 700, 400)),
        "never asked",
    ])
    result = await order_agent(model, counter, limits=Limits(max_tokens=1000)).run("go")
    assert result.stop_reason == "max_tokens"
    assert result.usage.total_tokens == 1100
    assert model.remaining == ["never asked"]


def test_limits_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="max_turns must be >= 1"):
        Limits(max_turns=0)
    with pytest.raises(ConfigurationError, match="max_tokens must be >= 0.*None for no cap"):
        Limits(max_tokens=-1)
    with pytest.raises(ConfigurationError, match="max_duration_s must be a positive number"):
        Limits(max_duration_s=0)


# --- permissions and hooks -------------------------------------------------------------


@pytest.mark.anyio
async def test_a_tool_not_allowed_is_not_offered_and_not_run() -> None:
    counter = Counter()

    def lookup(item: str) -> str:
        return "in stock"

    model = ScriptedModel([ToolCall("order", {"item": "pen"}), "I may not order."])
    agent = Agent("x", model=model, tools=[lookup, Tool.from_function(counter, name="order")],
                  guards=Guards(allowed_tools={"lookup"}))
    with model:
        result = await agent.run("order a pen")
    assert model.calls[0].tool_names == ["lookup"]
    assert counter.calls == []
    [returned] = tool_returns(result.messages)
    assert returned.is_error
    assert "not permitted" in returned.content


@pytest.mark.anyio
async def test_hooks_see_and_may_change_calls_and_results() -> None:
    counter = Counter()
    seen: list[str] = []

    def cap_amount(call, ctx):
        seen.append(f"before {call.name} for {ctx.user_id}")
        args = call.arguments_dict()
        return replace(call, arguments={**args, "amount": min(args.get("amount", 1), 10)})

    async def redact(call, result, ctx):
        seen.append(f"after {call.name}")
        return replace(result, content=result.content.upper())

    model = ScriptedModel([ToolCall("order", {"item": "pen", "amount": 500}), "done"])
    with model:
        result = await order_agent(model, counter, before_tool=cap_amount,
                                   after_tool=[redact]).run("go", user_id="bob")
    assert counter.calls == [{"item": "pen", "amount": 10}]
    assert tool_returns(result.messages)[0].content == "ORDERED 10 X PEN"
    assert seen == ["before order for bob", "after order"]


@pytest.mark.anyio
async def test_a_failing_hook_ends_the_run_with_its_error() -> None:
    def broken(call, ctx):
        raise LookupError("policy service down")

    model = ScriptedModel([[ToolCall("order", {"item": "a"}), ToolCall("order", {"item": "b"})]])
    with pytest.raises(LookupError, match="policy service down"):
        await order_agent(model, Counter(), before_tool=broken).run("go")


# --- approval --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_approval_can_approve_deny_or_edit() -> None:
    counter = Counter()

    async def human(call, ctx):
        item = call.arguments_dict()["item"]
        if item == "pen":
            return Approval.approve()
        if item == "car":
            return Approval.deny("too expensive")
        return Approval.edit({"item": item, "amount": 1})

    model = ScriptedModel([
        [ToolCall("order", {"item": "pen"}), ToolCall("order", {"item": "car"}),
         ToolCall("order", {"item": "ink", "amount": 99})],
        "done",
    ])
    audit = MemoryAuditLog()
    with model:
        result = await order_agent(model, counter, approval=human, audit_log=audit).run("go")
    assert sorted(c["item"] for c in counter.calls) == ["ink", "pen"]
    assert {"item": "ink", "amount": 1} in counter.calls
    pen, car, ink = tool_returns(result.messages)
    assert not pen.is_error and not ink.is_error
    assert car.is_error and "too expensive" in car.content
    # audit entries come in completion order (the calls ran concurrently)
    decisions = {e.data["call_id"]: e.data["approval"] for e in audit.of_kind("tool_call")}
    assert [decisions[r.call_id] for r in (pen, car, ink)] == ["approve", "deny", "edit"]


@pytest.mark.anyio
async def test_only_listed_tools_wait_for_approval() -> None:
    asked: list[str] = []

    def human(call, ctx):  # a sync handler runs in a worker thread
        asked.append(call.name)
        return Approval.approve()

    def lookup(item: str) -> str:
        return "in stock"

    counter = Counter()
    model = ScriptedModel([
        [ToolCall("lookup", {"item": "pen"}), ToolCall("order", {"item": "pen"})],
        "done",
    ])
    agent = Agent("x", model=model, tools=[lookup, Tool.from_function(counter, name="order")],
                  guards=Guards(approval=human, approval_required={"order"}))
    with model:
        await agent.run("go")
    assert asked == ["order"]


@pytest.mark.anyio
async def test_an_approval_that_never_comes_is_a_denial_not_a_hang() -> None:
    never = anyio.Event()

    async def absent_human(call, ctx):
        await never.wait()

    counter = Counter()
    model = ScriptedModel([ToolCall("order", {"item": "pen"}), "nobody answered"])
    with model:
        result = await order_agent(model, counter, approval=absent_human,
                                   approval_timeout_s=0.05).run("go")
    [returned] = tool_returns(result.messages)
    assert returned.is_error and "no decision within" in returned.content
    assert counter.calls == []
    assert result.completed


@pytest.mark.anyio
async def test_an_approval_handler_must_return_an_approval() -> None:
    model = ScriptedModel([ToolCall("order", {"item": "pen"})])
    with pytest.raises(ConfigurationError, match="make it return Approval.approve"):
        await order_agent(model, Counter(), approval=lambda call, ctx: True).run("go")


# --- guardrails ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_an_input_guardrail_stops_before_any_model_call() -> None:
    def no_card_numbers(prompt, ctx):
        return "the prompt contains a card number" if "4111" in prompt else None

    model = ScriptedModel()  # any call would fail: none is scripted
    result = await order_agent(model, Counter(), input_guardrails=[no_card_numbers]).run(
        "charge 4111 1111 1111 1111"
    )
    assert result.stop_reason == "input_guardrail"
    assert result.detail == "the prompt contains a card number"
    assert result.output is None
    assert model.calls == []


@pytest.mark.anyio
async def test_an_output_guardrail_withholds_the_output() -> None:
    async def no_promises(output, ctx):
        return "promises a refund" if "refund" in output else None

    model = ScriptedModel(["You will get a full refund."])
    with model:
        result = await order_agent(model, Counter(), output_guardrails=no_promises).run("hi")
    assert result.stop_reason == "output_guardrail"
    assert result.output is None
    assert result.text == "You will get a full refund."


@pytest.mark.anyio
async def test_a_guardrail_must_return_a_reason_or_none() -> None:
    with pytest.raises(ConfigurationError, match="return the reason to block"):
        await order_agent(ScriptedModel(), Counter(),
                          input_guardrails=[lambda prompt, ctx: False]).run("hi")


# --- rate limiter ----------------------------------------------------------------------


def test_the_rate_limiter_spaces_requests() -> None:
    now = [100.0]
    limiter = RateLimiter(2.0, clock=lambda: now[0])
    assert [limiter.reserve() for _ in range(3)] == [0.0, 0.5, 1.0]
    now[0] += 10  # a quiet period: the next request goes at once
    assert limiter.reserve() == 0.0


def test_the_rate_limiter_allows_bursts() -> None:
    limiter = RateLimiter(4.0, burst=3, clock=lambda: 0.0)
    assert [limiter.reserve() for _ in range(5)] == [0.0, 0.0, 0.0, 0.25, 0.5]


@pytest.mark.anyio
async def test_the_rate_limiter_paces_an_agent_model_calls() -> None:
    waits: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        waits.append(seconds)

    limiter = RateLimiter(10.0, clock=lambda: 0.0, sleep=fake_sleep)
    model = ScriptedModel([
        ToolCall("order", {"item": "a"}), ToolCall("order", {"item": "b"}), "ok",
    ])
    with model:
        await order_agent(model, Counter(), rate_limiter=limiter).run("go")
    assert waits == pytest.approx([0.1, 0.2])


@pytest.mark.anyio
async def test_the_rate_limiter_really_waits() -> None:
    limiter = RateLimiter(50.0)
    started = anyio.current_time()
    for _ in range(5):
        await limiter.acquire()
    assert anyio.current_time() - started >= 4 / 50 - 0.005


def test_the_rate_limiter_refuses_nonsense() -> None:
    with pytest.raises(ConfigurationError, match="requests_per_s must be a positive number"):
        RateLimiter(0)
    with pytest.raises(ConfigurationError, match="requests_per_s"):
        RateLimiter(float("nan"))
    with pytest.raises(ConfigurationError, match="burst must be an integer >= 1"):
        RateLimiter(1, burst=0)


# --- audit log -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_audit_log_records_every_call(tmp_path) -> None:
    memory = MemoryAuditLog()
    model = ScriptedModel([
        ModelResponse(tool_calls=(ToolCall("order", {"item": "pen"}),), usage=Usage(1, 30, 5)),
        ModelResponse(text="ordered", usage=Usage(1, 40, 2)),
    ])
    with model:
        result = await order_agent(model, Counter(), audit_log=memory).run("go", user_id="carol")
    assert [e.kind for e in memory.entries] == [
        "run_start", "model_call", "tool_call", "model_call", "run_end",
    ]
    assert all(e.run_id == result.run_id and e.user_id == "carol" for e in memory.entries)
    assert all(e.at.tzinfo is not None for e in memory.entries)
    first_call = memory.entries[1].data
    assert (first_call["input_tokens"], first_call["output_tokens"]) == (30, 5)
    assert first_call["tool_calls"] == ["order"]
    tool = memory.entries[2].data
    assert (tool["tool"], tool["arguments"], tool["result"]) == (
        "order", {"item": "pen"}, "ordered 1 x pen",
    )
    assert memory.entries[-1].data["stop_reason"] == "completed"
    assert memory.entries[-1].data["usage"]["model_calls"] == 2

    jsonl = JsonlAuditLog(tmp_path / "audit.jsonl")
    for entry in memory.entries:
        jsonl.record(entry)
    lines = jsonl.read()
    assert [line["kind"] for line in lines] == [e.kind for e in memory.entries]
    assert lines[2]["data"]["arguments"] == {"item": "pen"}


def test_guards_accept_lists_and_single_callables() -> None:
    def hook(call, ctx):
        return None

    guards = Guards(before_tool=hook, after_tool=[hook], allowed_tools=["a", "b"],
                    approval_required="a")
    assert guards.before_tool == (hook,) and guards.after_tool == (hook,)
    assert guards.allowed_tools == frozenset({"a", "b"})
    assert guards.approval_required == frozenset({"a"})
    assert guards.replace(limits=Limits(max_turns=2)).limits.max_turns == 2


@given(
    rate=st.floats(min_value=0.5, max_value=100),
    burst=st.integers(min_value=1, max_value=5),
    gaps=st.lists(st.floats(min_value=0, max_value=2), min_size=1, max_size=40),
)
def test_the_rate_limiter_never_exceeds_its_rate(
    rate: float, burst: int, gaps: list[float]
) -> None:
    now = [0.0]
    limiter = RateLimiter(rate, burst=burst, clock=lambda: now[0])
    starts = []
    for gap in gaps:
        now[0] += gap
        starts.append(now[0] + limiter.reserve())
    assert starts == sorted(starts)  # callers keep their order
    # after a burst, the sustained rate holds: request i + n starts at least
    # (n - burst + 1) intervals after request i
    for i in range(len(starts)):
        for n in range(burst, len(starts) - i):
            assert starts[i + n] - starts[i] >= (n - burst + 1) / rate - 1e-9
