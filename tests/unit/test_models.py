"""The models layer without a network: model strings, the retry wrapper, the shipped
test models, and message serialisation."""

from __future__ import annotations

import random
import sys

import pytest
from pydantic import BaseModel

from foreperson.errors import ConfigurationError, MissingDependency, ModelError
from foreperson.models import (
    MESSAGES_ADAPTER,
    AnthropicModel,
    ModelRequestParameters,
    ModelResponse,
    OpenAIChatModel,
    RetryingModel,
    SystemMessage,
    TextDelta,
    ToolCall,
    ToolReturn,
    Usage,
    UserMessage,
    infer_model,
    infer_provider,
)
from foreperson.testing import FunctionModel, ScriptedModel, UnexpectedModelCall, UnusedReplies


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


PARAMS = ModelRequestParameters()
HELLO = [UserMessage("hello there")]


class Verdict(BaseModel):
    label: str
    score: float


# --- model strings ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("gpt-4o", ("openai", "gpt-4o")),
        ("gpt-4.1-mini", ("openai", "gpt-4.1-mini")),
        ("o3", ("openai", "o3")),
        ("o4-mini", ("openai", "o4-mini")),
        ("claude-opus-4-7", ("anthropic", "claude-opus-4-7")),
        ("claude-sonnet-4-5", ("anthropic", "claude-sonnet-4-5")),
        ("openai:llama3.1:8b", ("openai", "llama3.1:8b")),
        ("anthropic:my-proxy-model", ("anthropic", "my-proxy-model")),
    ],
)
def test_model_strings_name_their_provider(name: str, expected: tuple[str, str]) -> None:
    assert infer_provider(name) == expected


def test_an_unknown_name_is_refused_with_the_fix() -> None:
    with pytest.raises(ConfigurationError, match="openai:llama3"):
        infer_provider("llama3")
    with pytest.raises(ConfigurationError, match="empty"):
        infer_provider("openai:")


def test_an_unknown_name_with_a_base_url_is_an_openai_compatible_server() -> None:
    assert infer_provider("llama3.1:8b", base_url="http://127.0.0.1:11434/v1") == (
        "openai", "llama3.1:8b",
    )


def test_a_missing_openai_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigurationError, match="export OPENAI_API_KEY="):
        infer_model("gpt-4o")


def test_a_missing_anthropic_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="export ANTHROPIC_API_KEY="):
        infer_model("claude-sonnet-4-5")


@pytest.mark.anyio
async def test_infer_model_builds_retrying_adapters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    openai_model = infer_model("gpt-4o")
    anthropic_model = infer_model("claude-opus-4-7", max_attempts=1)
    try:
        assert isinstance(openai_model, RetryingModel)
        assert isinstance(openai_model.wrapped, OpenAIChatModel)
        assert openai_model.name == "openai:gpt-4o"
        assert openai_model.wrapped.provider.client.max_retries == 0
        assert isinstance(anthropic_model, AnthropicModel)
        assert anthropic_model.name == "anthropic:claude-opus-4-7"
        assert anthropic_model.provider.client.max_retries == 0
    finally:
        await openai_model.aclose()
        await anthropic_model.aclose()


@pytest.mark.anyio
async def test_a_local_server_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    model = infer_model("openai:qwen2.5")
    try:
        assert str(model.wrapped.provider.client.base_url).startswith("http://127.0.0.1:9/v1")
    finally:
        await model.aclose()


def test_a_model_instance_passes_through() -> None:
    model = ScriptedModel()
    assert infer_model(model) is model


# --- the retry wrapper -----------------------------------------------------------------


class Sleeps:
    """Records the waits instead of waiting."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.mark.anyio
async def test_429_and_5xx_are_retried_with_growing_backoff() -> None:
    inner = ScriptedModel([
        ModelError("busy", status_code=503),
        ModelError("busy", status_code=500),
        "done",
    ])
    sleeps = Sleeps()
    model = RetryingModel(inner, base_s=1.0, sleep=sleeps, rng=random.Random(1))
    with inner:
        response = await model.request(HELLO, PARAMS)
    assert response.text == "done"
    assert len(sleeps.waits) == 2
    assert 0.75 <= sleeps.waits[0] <= 1.25
    assert 1.5 <= sleeps.waits[1] <= 2.5


@pytest.mark.anyio
async def test_retry_after_is_honoured() -> None:
    inner = ScriptedModel([ModelError("slow down", status_code=429, retry_after_s=7.0), "ok"])
    sleeps = Sleeps()
    with inner:
        response = await RetryingModel(inner, sleep=sleeps).request(HELLO, PARAMS)
    assert response.text == "ok"
    assert sleeps.waits == [7.0]


@pytest.mark.anyio
async def test_a_retry_after_longer_than_allowed_fails_at_once() -> None:
    inner = ScriptedModel([ModelError("come back tomorrow", status_code=429, retry_after_s=86400)])
    sleeps = Sleeps()
    with pytest.raises(ModelError, match="max_retry_after_s"):
        await RetryingModel(inner, sleep=sleeps).request(HELLO, PARAMS)
    assert sleeps.waits == []


@pytest.mark.anyio
async def test_other_4xx_fail_on_the_first_attempt() -> None:
    inner = ScriptedModel([ModelError("bad request", status_code=400), "never"])
    sleeps = Sleeps()
    with pytest.raises(ModelError) as info:
        await RetryingModel(inner, sleep=sleeps).request(HELLO, PARAMS)
    assert info.value.status_code == 400
    assert info.value.attempts == 1
    assert sleeps.waits == []
    assert inner.remaining == ["never"]


@pytest.mark.anyio
async def test_attempts_run_out_with_the_last_error() -> None:
    inner = ScriptedModel([TimeoutError("slow")] * 3)
    sleeps = Sleeps()
    with inner, pytest.raises(ModelError) as info:
        await RetryingModel(inner, max_attempts=3, sleep=sleeps).request(HELLO, PARAMS)
    assert info.value.attempts == 3
    assert isinstance(info.value.__cause__, TimeoutError)
    assert len(sleeps.waits) == 2


@pytest.mark.anyio
async def test_a_stream_is_retried_before_its_first_item() -> None:
    inner = ScriptedModel([ModelError("busy", status_code=502), "two words"])
    sleeps = Sleeps()
    with inner:
        items = [i async for i in RetryingModel(inner, sleep=sleeps).request_stream(HELLO, PARAMS)]
    assert [i.text for i in items if isinstance(i, TextDelta)] == ["two ", "words"]
    assert isinstance(items[-1], ModelResponse)
    assert len(sleeps.waits) == 1


def test_max_attempts_must_count_the_first_try() -> None:
    with pytest.raises(ValueError):
        RetryingModel(ScriptedModel(), max_attempts=0)


# --- test models ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_scripted_model_replies_in_order_and_records_calls() -> None:
    model = ScriptedModel([ToolCall("lookup", {"q": "x"}), "answer"])
    first = await model.request(HELLO, PARAMS)
    second = await model.request([*HELLO, first], PARAMS)
    assert first.tool_calls[0].name == "lookup"
    assert first.tool_calls[0].id  # ids are assigned
    assert second.text == "answer"
    assert [len(c.messages) for c in model.calls] == [1, 2]
    model.assert_all_used()


@pytest.mark.anyio
async def test_scripted_model_fails_on_an_unexpected_call() -> None:
    model = ScriptedModel(["only one"])
    await model.request(HELLO, PARAMS)
    with pytest.raises(UnexpectedModelCall, match="call 2 was not scripted"):
        await model.request(HELLO, PARAMS)


def test_scripted_model_fails_on_unused_replies() -> None:
    with pytest.raises(UnusedReplies, match="never used"), ScriptedModel(["a", "b"]):
        pass


@pytest.mark.anyio
async def test_scripted_model_gives_structured_output() -> None:
    model = ScriptedModel([Verdict(label="spam", score=0.9)])
    response = await model.request(HELLO, ModelRequestParameters(output_type=Verdict))
    assert response.output == Verdict(label="spam", score=0.9)
    assert Verdict.model_validate_json(response.text) == response.output


@pytest.mark.anyio
async def test_test_models_count_tokens_by_words() -> None:
    model = ScriptedModel(["one two three"])
    response = await model.request([UserMessage("a b c d")], PARAMS)
    assert response.usage == Usage(model_calls=1, input_tokens=4, output_tokens=3)


@pytest.mark.anyio
async def test_function_model_answers_from_the_conversation() -> None:
    async def reply(messages, params):
        last = messages[-1]
        if isinstance(last, ToolReturn):
            return f"result: {last.content}"
        return ToolCall("double", {"x": 21})

    model = FunctionModel(reply)
    first = await model.request(HELLO, PARAMS)
    tool_return = ToolReturn(first.tool_calls[0].id, "double", "42")
    second = await model.request([*HELLO, first, tool_return], PARAMS)
    assert second.text == "result: 42"
    assert model.name == "test:reply"
    assert len(model.calls) == 2


# --- messages -------------------------------------------------------------------------


def test_a_conversation_round_trips_through_json() -> None:
    conversation = [
        SystemMessage("be brief"),
        UserMessage("hi"),
        ModelResponse(tool_calls=(ToolCall("f", {"a": [1, 2]}, "c1"),), finish_reason="tool_calls"),
        ToolReturn("c1", "f", "3", is_error=True),
        ModelResponse(text="done", usage=Usage(1, 10, 2)),
    ]
    assert MESSAGES_ADAPTER.validate_json(MESSAGES_ADAPTER.dump_json(conversation)) == conversation


def test_tool_call_arguments_parse_from_json_text() -> None:
    assert ToolCall("f", '{"a": 1}').arguments_dict() == {"a": 1}
    assert ToolCall("f", "").arguments_dict() == {}
    with pytest.raises(ValueError, match="not valid JSON"):
        ToolCall("f", "{oops").arguments_dict()
    with pytest.raises(ValueError, match="JSON object"):
        ToolCall("f", "[1]").arguments_dict()


@pytest.mark.parametrize(
    ("module", "name", "extra"),
    [("openai", "gpt-4o", "openai"), ("anthropic", "claude-opus-4-7", "anthropic")],
)
def test_a_missing_sdk_names_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, module: str, name: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # `import module` now fails
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    with pytest.raises(MissingDependency, match=rf"pip install 'foreperson\[{extra}\]'"):
        infer_model(name)
