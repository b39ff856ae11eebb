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
    with pytest.raises(ConfigurationError, match=r"max_attempts=0.*integer >= 1"):
        RetryingModel(ScriptedModel(), max_attempts=0)
    with pytest.raises(ConfigurationError, match=r"base_s=-1.*seconds >= 0"):
        RetryingModel(ScriptedModel(), base_s=-1)
    with pytest.raises(ConfigurationError, match=r"max_attempts=0"):
        infer_model("gpt-4o", api_key="sk-x", max_attempts=0)


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


# --- configuration errors say what to fix (issue 7 item 5) -------------------------------


def test_a_provider_without_a_client_or_factory_is_a_configuration_error() -> None:
    from foreperson.models import Provider

    with pytest.raises(ConfigurationError, match=r"client=\.\.\..*api_key="):
        Provider(None)


def test_a_conversation_holding_a_non_message_is_a_configuration_error() -> None:
    from foreperson.models._anthropic import _wire_messages
    from foreperson.models._openai import _wire_message

    with pytest.raises(ConfigurationError, match="not a message.*MESSAGES_ADAPTER"):
        _wire_message({"role": "user", "content": "hi"})  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="not a message"):
        _wire_messages([{"role": "user", "content": "hi"}])  # type: ignore[list-item]


def test_bad_arguments_stay_a_value_error_the_agent_reports_to_the_model() -> None:
    # the agent layer catches this ValueError and sends the model a correctable error
    with pytest.raises(ValueError, match="not valid JSON"):
        ToolCall("f", "{oops").arguments_dict()


# --- timeouts (issue 8 item 10) ---------------------------------------------------------


def test_requests_time_out_after_30_s_by_default_and_connecting_after_5() -> None:
    from foreperson.models import DEFAULT_TIMEOUT_S, AnthropicProvider, OpenAIProvider

    assert DEFAULT_TIMEOUT_S == 30.0
    for provider in (OpenAIProvider(api_key="sk-x"), AnthropicProvider(api_key="sk-x")):
        timeout = provider.client.timeout
        assert (timeout.read, timeout.connect) == (30.0, 5.0)


def test_a_hung_server_costs_one_call_at_most_120_s_by_default() -> None:
    # issue 21 item 9: 60 s x 4 attempts held a run 247 s; now every attempt's request
    # timeout, its profile detection and the backoff between attempts add up to <= 120 s
    from foreperson.models import DEFAULT_MAX_ATTEMPTS, DEFAULT_TIMEOUT_S
    from foreperson.models._profiles import DETECT_TIMEOUT_S

    retrying = RetryingModel(ScriptedModel())
    assert retrying.max_attempts == DEFAULT_MAX_ATTEMPTS == 3
    backoff = sum(min(retrying.cap_s, retrying.base_s * 2 ** k) * 1.25
                  for k in range(DEFAULT_MAX_ATTEMPTS - 1))
    worst = DEFAULT_MAX_ATTEMPTS * (DEFAULT_TIMEOUT_S + DETECT_TIMEOUT_S) + backoff
    assert worst == 108.75 <= 120
    model = infer_model("gpt-4o", api_key="sk-x")
    assert isinstance(model, RetryingModel) and model.max_attempts == 3


def test_infer_model_passes_timeout_s_to_the_provider() -> None:
    for name in ("gpt-4o", "claude-opus-4-7"):
        model = infer_model(name, api_key="sk-x", timeout_s=2.5, max_attempts=1)
        timeout = model.provider.client.timeout  # type: ignore[attr-defined]
        assert (timeout.read, timeout.connect) == (2.5, 2.5)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan")])
def test_a_timeout_that_is_not_a_positive_number_is_refused(bad: float) -> None:
    with pytest.raises(ConfigurationError, match="timeout_s must be a positive number"):
        infer_model("gpt-4o", api_key="sk-x", timeout_s=bad)


# --- the reachability check before any work (issue 8 item 10) ---------------------------


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_base_url_fails_with_what_to_check() -> None:
    from foreperson.models import check_reachable

    url = f"http://127.0.0.1:{_closed_port()}/v1"
    with pytest.raises(ConfigurationError, match=r"cannot connect to 127\.0\.0\.1.*running"):
        check_reachable(url)
    model = infer_model("openai:llama", url)
    with pytest.raises(ConfigurationError, match=rf"{url} is not reachable: cannot connect"):
        check_reachable(model)         # through the RetryingModel to its provider


def test_a_listening_server_passes_and_a_malformed_url_does_not() -> None:
    import socket

    from foreperson.models import check_reachable

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        check_reachable(f"http://127.0.0.1:{listener.getsockname()[1]}/v1")
    with pytest.raises(ConfigurationError, match="expected http"):
        check_reachable("localhost:8000")


def test_the_default_endpoints_are_checked_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """An API key but no network: the SDK's own host is checked (never reached here:
    the connection is refused by a stand-in that records where it would go)."""
    import socket

    from foreperson.models import check_reachable

    tried: list[tuple[str, int]] = []

    def offline(address: tuple[str, int], timeout: float) -> None:
        tried.append(address)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "create_connection", offline)
    for var in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "ANTHROPIC_BASE_URL",
                "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ConfigurationError, match=r"cannot resolve 'api\.openai\.com'.*online"):
        check_reachable(infer_model("gpt-4o", api_key="sk-x"))
    with pytest.raises(ConfigurationError, match="api.anthropic.com"):
        check_reachable(infer_model("claude-opus-4-7", api_key="sk-x"))
    assert tried == [("api.openai.com", 443), ("api.anthropic.com", 443)]


def test_through_a_proxy_the_proxy_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    from foreperson.models import check_reachable

    with socket.socket() as proxy:
        proxy.bind(("127.0.0.1", 0))
        proxy.listen()
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.getsockname()[1]}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        check_reachable("https://api.openai.com/v1")   # the proxy answers: fine


def test_test_models_need_no_check() -> None:
    from foreperson.models import check_reachable

    check_reachable(ScriptedModel())


# --- model profiles (issue 8 item 14) ---------------------------------------------------


class Strictly(BaseModel):
    category: str
    urgent: bool


class Loosely(BaseModel):
    category: str
    note: str = ""


def test_the_openai_profile_closes_and_marks_strict_a_schema_that_allows_it() -> None:
    from foreperson.models import get_profile
    from foreperson.models._openai import _response_format

    fmt = _response_format(Strictly, get_profile("openai"))
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"]["additionalProperties"] is False
    loose = _response_format(Loosely, get_profile("openai"))["json_schema"]
    assert "strict" not in loose      # an optional field: strict mode would refuse it
    assert "strict" not in _response_format(Strictly, get_profile("openai-compatible"))[
        "json_schema"]


def test_llama_cpp_python_gets_a_json_object_with_the_schema() -> None:
    from foreperson.models import get_profile
    from foreperson.models._openai import _response_format

    fmt = _response_format(Strictly, get_profile("llama-cpp-python"))
    assert fmt == {"type": "json_object", "schema": Strictly.model_json_schema()}


def test_unknown_profiles_and_fields_say_what_is_known() -> None:
    from foreperson.models import OpenAIProvider, get_profile

    with pytest.raises(ConfigurationError, match="known: llama-cpp-python, openai"):
        OpenAIProvider(api_key="sk-x", profile="ollamma")
    with pytest.raises(ConfigurationError, match="no field"):
        get_profile("openai").with_changes(tool_choise=False)
    with pytest.raises(ConfigurationError, match="Anthropic models take none"):
        infer_model("claude-opus-4-7", api_key="sk-x", profile="openai")


def test_openai_itself_needs_no_detection_and_a_given_profile_wins() -> None:
    from foreperson.models import OpenAIProvider

    assert OpenAIProvider(api_key="sk-x").profile.name == "openai"
    assert OpenAIProvider(base_url="http://127.0.0.1:9/v1").profile is None  # detect
    given = OpenAIProvider(base_url="http://127.0.0.1:9/v1", profile="llama-cpp-python")
    assert given.profile.name == "llama-cpp-python"


def test_servers_are_recognised_by_their_models_list() -> None:
    from foreperson.models._profiles import profile_from_models_list

    llama_cpp_python = {"object": "list", "data": [
        {"id": "smollm2", "object": "model", "owned_by": "me", "permissions": []}]}
    vllm = {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "vllm"}]}
    assert profile_from_models_list(llama_cpp_python).name == "llama-cpp-python"
    assert profile_from_models_list(vllm).name == "openai-compatible"
    assert profile_from_models_list("not json at all").name == "openai-compatible"


@pytest.mark.parametrize(("status", "message", "unsupported"), [
    (500, "1 validation error: Input should be 'text' or 'json_object'", True),
    (501, "Not Implemented", True),
    (400, "response_format json_schema is not supported by this model", True),
    (500, "The server had an error while processing your request", False),
    (503, "busy", False),
    (None, "not supported", False),
])
def test_errors_that_say_the_request_shape_is_unsupported(
    status: int | None, message: str, unsupported: bool
) -> None:
    from foreperson.models._provider import unsupported_request

    assert unsupported_request(status, message) is unsupported


def test_tool_results_as_user_messages_name_the_call() -> None:
    from foreperson.models import get_profile
    from foreperson.models._openai import _wire_messages

    call = ToolCall("order_status", {"order_id": "A-100"}, id="c1")
    messages = [
        UserMessage("Where is A-100?"),
        ModelResponse(tool_calls=(call, ToolCall("order_status", {"order_id": "B"}, id="c2"))),
        ToolReturn("c1", "order_status", "shipped"),
        ToolReturn("c2", "order_status", "no such order", is_error=True),
    ]
    wire = _wire_messages(messages, get_profile("llama-cpp-python"))
    assert [m["role"] for m in wire] == ["user", "assistant", "user"]
    assert wire[1]["content"] == ""       # not None: some templates print "None"
    assert wire[1]["tool_calls"][0]["function"]["name"] == "order_status"
    text = wire[2]["content"]
    assert 'order_status({"order_id":"A-100"}) [id c1] returned:\nshipped' in text
    assert '[id c2] failed:\nno such order' in text
    tool_role = _wire_messages(messages, get_profile("openai-compatible"))
    assert [m["role"] for m in tool_role] == ["user", "assistant", "tool", "tool"]


# --- the settings passthrough (issue 8 item 14) -----------------------------------------


def test_provider_extra_body_yields_to_what_the_request_sets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from foreperson.models import ModelSettings, OpenAIProvider, get_profile

    monkeypatch.setenv("FOREPERSON_MODEL_EXTRA_BODY", '{"temperature": 0, "top_k": 5}')
    model = OpenAIChatModel("m", provider=OpenAIProvider(base_url="http://127.0.0.1:9/v1"))
    params = ModelRequestParameters(settings=ModelSettings(temperature=0.7,
                                                           extra_body={"seed": 3}))
    kwargs = model._request_kwargs(HELLO, params, get_profile("openai-compatible"))
    assert kwargs["temperature"] == 0.7
    assert kwargs["extra_body"] == {"top_k": 5, "seed": 3}
    given = OpenAIProvider(base_url="http://127.0.0.1:9/v1", extra_body={"min_p": 0.1})
    assert given.extra_body == {"min_p": 0.1}       # given wins over the environment


@pytest.mark.parametrize("raw", ["{temperature: 0}", "[1, 2]"])
def test_a_bad_extra_body_variable_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    monkeypatch.setenv("FOREPERSON_MODEL_EXTRA_BODY", raw)
    with pytest.raises(ConfigurationError, match="FOREPERSON_MODEL_EXTRA_BODY"):
        infer_model("openai:m", "http://127.0.0.1:9/v1")
