"""No run hangs and no non-answer counts as an answer (issue 8, agent side): the
wall-clock cap, per-tool timeouts, empty and cut-off replies, what a capped run still
carries, and the token budget passed to each model call."""

from __future__ import annotations

import math
import threading

import anyio
import pytest

from foreperson.agents import Agent, Guards, Limits, MemoryAuditLog, Tool, tool
from foreperson.errors import ConfigurationError
from foreperson.models import ModelResponse, ToolCall, ToolReturn, Usage, UserMessage
from foreperson.testing import FunctionModel, ScriptedModel


def tool_returns(messages) -> list[ToolReturn]:
    return [m for m in messages if isinstance(m, ToolReturn)]


# --- the wall-clock cap -----------------------------------------------------------------


@pytest.mark.anyio
async def test_max_duration_ends_a_run_whose_model_never_answers() -> None:
    never = anyio.Event()

    async def silent_server(messages, params):
        await never.wait()

    audit = MemoryAuditLog()
    agent = Agent("x", model=FunctionModel(silent_server),
                  guards=Guards(limits=Limits(max_duration_s=0.05), audit_log=audit))
    with anyio.fail_after(5):
        result = await agent.run("hello?")
    assert result.stop_reason == "max_duration"
    assert "max_duration_s=0.05" in result.detail
    assert result.output is None
    assert "abandoned at max_duration_s=0.05" in audit.of_kind("model_call")[0].data["error"]
    assert audit.entries[-1].data["stop_reason"] == "max_duration"


@pytest.mark.anyio
async def test_max_duration_abandons_a_blocked_sync_tool_and_keeps_what_was_done() -> None:
    release = threading.Event()

    def stuck(item: str) -> str:
        release.wait(10)              # a blocking client without a timeout
        return "never read"

    def quick(item: str) -> str:
        return f"{item} ok"

    model = ScriptedModel([[ToolCall("quick", {"item": "a"}), ToolCall("stuck", {"item": "b"})]])
    agent = Agent("x", model=model, tools=[stuck, quick],
                  guards=Guards(limits=Limits(max_duration_s=0.5)))   # "quick" has time
    try:
        with anyio.fail_after(5):
            result = await agent.run("go")
    finally:
        release.set()
    assert result.stop_reason == "max_duration"
    done, unfinished = tool_returns(result.messages)
    assert (done.content, done.is_error) == ("a ok", False)
    assert unfinished.is_error and "not finished" in unfinished.content
    assert "max_duration_s=0.5" in unfinished.content
    assert result.text == "a ok"                   # what was produced is still there


# --- per-tool timeouts --------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_tool_past_its_timeout_gives_the_model_an_error_naming_the_bound() -> None:
    release = threading.Event()

    @tool(timeout_s=0.05)
    def fetch(url: str) -> str:
        """Fetch a page (the server hangs)."""
        release.wait(10)
        return "page"

    model = ScriptedModel([ToolCall("fetch", {"url": "http://x"}), "the site is down"])
    try:
        with model, anyio.fail_after(5):
            result = await Agent("x", model=model, tools=[fetch]).run("read x")
    finally:
        release.set()
    [returned] = tool_returns(result.messages)
    assert returned.is_error
    assert "did not finish within its timeout_s=0.05 s" in returned.content
    assert result.completed and result.output == "the site is down"
    assert model.calls[1].messages[-1] == returned      # the model read the error


@pytest.mark.anyio
async def test_guards_give_every_tool_a_timeout_that_a_tool_can_override() -> None:
    never = anyio.Event()

    async def hangs() -> str:
        await never.wait()
        return "never"

    async def slow_but_fine() -> str:
        await anyio.sleep(0.1)        # longer than the guards' bound: its own bound is none
        return "finished"

    model = ScriptedModel([[ToolCall("hangs"), ToolCall("slow_but_fine")], "ok"])
    agent = Agent("x", model=model, guards=Guards(tool_timeout_s=0.02),
                  tools=[hangs, Tool.from_function(slow_but_fine, timeout_s=math.inf)])
    with model, anyio.fail_after(5):
        result = await agent.run("go")
    hung, fine = tool_returns(result.messages)
    assert hung.is_error and "timeout_s=0.02" in hung.content
    assert (fine.content, fine.is_error) == ("finished", False)


def test_timeouts_must_be_positive_seconds() -> None:
    with pytest.raises(ConfigurationError, match="tool_timeout_s must be a positive number"):
        Guards(tool_timeout_s=0)
    with pytest.raises(ConfigurationError, match="timeout_s must be a positive number"):
        tool(timeout_s=-1)(lambda: None)


# --- empty and cut-off replies ----------------------------------------------------------


@pytest.mark.anyio
async def test_an_empty_reply_is_sent_back_once_for_correction() -> None:
    model = ScriptedModel(["", "It has shipped."])
    with model:
        result = await Agent("x", model=model).run("Where is my order?")
    assert result.completed and result.output == "It has shipped."
    correction = model.calls[1].messages[-1]
    assert isinstance(correction, UserMessage) and "empty" in correction.content


@pytest.mark.anyio
async def test_a_second_empty_reply_in_a_row_ends_the_run_with_its_own_stop_reason() -> None:
    model = ScriptedModel(["", "   "])
    with model:
        result = await Agent("x", model=model).run("Where is my order?")
    assert result.stop_reason == "empty_reply" and not result.completed
    assert result.output is None
    assert result.finish_reason == "stop"


@pytest.mark.anyio
async def test_a_reply_cut_by_the_token_limit_is_not_completed() -> None:
    cut = ModelResponse(text="The refund policy says that", finish_reason="length")
    model = ScriptedModel([cut, "Refunds take 5 days."])
    with model:
        fixed = await Agent("x", model=model).run("Refund policy?")
    assert fixed.completed and fixed.output == "Refunds take 5 days."
    assert "cut off" in model.calls[1].messages[-1].content

    model = ScriptedModel([cut, ModelResponse(text="The refund", finish_reason="max_tokens")])
    with model:
        result = await Agent("x", model=model).run("Refund policy?")
    assert result.stop_reason == "truncated"
    assert result.output is None
    assert result.text == "The refund"                # what was produced, still there
    assert result.finish_reason == "max_tokens"


@pytest.mark.anyio
async def test_a_good_reply_in_between_gives_a_later_bad_one_its_correction() -> None:
    model = ScriptedModel(["", ToolCall("ping"), "", "pong it is"])

    def ping() -> str:
        return "pong"

    with model:
        result = await Agent("x", model=model, tools=[ping]).run("ping?")
    assert result.completed and result.output == "pong it is"


# --- what a capped run carries ------------------------------------------------------------


@pytest.mark.anyio
async def test_max_turns_after_only_tool_calls_carries_the_last_tool_result() -> None:
    def search(query: str) -> str:
        return f"3 results for {query}"

    def keeps_searching(messages, params):
        turn = sum(isinstance(m, ModelResponse) for m in messages)
        return ToolCall("search", {"query": f"q{turn}"})

    agent = Agent("x", model=FunctionModel(keeps_searching), tools=[search],
                  guards=Guards(limits=Limits(max_turns=2)))
    result = await agent.run("find it")
    assert result.stop_reason == "max_turns"
    assert result.output is None
    assert result.text == "3 results for q1"
    assert result.finish_reason == "tool_calls"


# --- the token budget bounds spend ------------------------------------------------------


@pytest.mark.anyio
async def test_each_model_call_is_given_what_is_left_of_the_token_budget() -> None:
    def lookup() -> str:
        return "found"

    model = ScriptedModel([
        ModelResponse(tool_calls=(ToolCall("lookup"),), usage=Usage(1, 30, 10)),
        "done",
    ])
    with model:
        await Agent("x", model=model, tools=[lookup],
                    guards=Guards(limits=Limits(max_tokens=100))).run("go")
    assert [c.params.settings.max_tokens for c in model.calls] == [100, 60]


@pytest.mark.anyio
async def test_one_call_cannot_overshoot_a_cap_of_100_by_8000() -> None:
    essay = " ".join(["word"] * 8000)
    model = ScriptedModel([essay])
    with model:
        result = await Agent("x", model=model, guards=Guards(limits=Limits(max_tokens=100))).run(
            "write")
    reply = result.messages[-1]
    assert isinstance(reply, ModelResponse)
    assert reply.usage.output_tokens == 100          # the call was told the budget
    assert result.stop_reason == "max_tokens"
    assert "the last reply was not an answer (truncated)" in result.detail
    assert result.usage.total_tokens < 200


@pytest.mark.anyio
async def test_a_smaller_max_tokens_setting_is_kept() -> None:
    from foreperson.models import ModelSettings

    model = ScriptedModel(["short"])
    with model:
        await Agent("x", model=model, settings=ModelSettings(max_tokens=20),
                    guards=Guards(limits=Limits(max_tokens=100))).run("go")
    assert model.calls[0].params.settings.max_tokens == 20
