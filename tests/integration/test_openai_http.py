"""The OpenAI adapter drives the real ``openai`` SDK over real HTTP against a scripted
chat-completions server on 127.0.0.1: tool calls, structured output, retries (429 with
Retry-After, 500, other 4xx), timeouts and SSE streaming."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from pydantic import BaseModel
from tests.fakes.openai_server import chat_completion, chat_error, chat_stream, function_call
from tests.fakes.server import FakeReply, FakeServer

from foreperson.agents import Agent, FinalEvent, TextDeltaEvent, ToolResultEvent
from foreperson.errors import ModelError
from foreperson.models import (
    ModelRequestParameters,
    ModelSettings,
    OpenAIChatModel,
    OpenAIProvider,
    RetryingModel,
    UserMessage,
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as fake:
        yield fake
    assert fake.unexpected == 0, "the client sent more requests than were scripted"


@pytest.fixture
async def model(server: FakeServer) -> AsyncIterator[OpenAIChatModel]:
    provider = OpenAIProvider(api_key="sk-test", base_url=f"{server.url}/v1")
    adapter = OpenAIChatModel("gpt-4o", provider=provider)
    yield adapter
    await adapter.aclose()


class Sleeps:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def weather(city: str) -> str:
    """Current weather.

    Args:
        city: the city's name.
    """
    return f"sunny in {city}"


class Ticket(BaseModel):
    category: str
    urgent: bool


@pytest.mark.anyio
async def test_a_text_reply_with_usage(server: FakeServer, model: OpenAIChatModel) -> None:
    server.add(chat_completion("Hello!", prompt_tokens=12, completion_tokens=3))
    response = await model.request([UserMessage("hi")], ModelRequestParameters())
    assert response.text == "Hello!"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 3)
    request = server.requests[0]
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.body["model"] == "gpt-4o"
    assert request.body["messages"] == [{"role": "user", "content": "hi"}]


@pytest.mark.anyio
async def test_an_agent_calls_tools_through_the_sdk(
    server: FakeServer, model: OpenAIChatModel
) -> None:
    server.add(
        chat_completion(tool_calls=[
            function_call("weather", {"city": "Oslo"}, "call_a"),
            function_call("weather", {"city": "Lima"}, "call_b"),
        ]),
        chat_completion("Oslo and Lima are sunny."),
    )
    agent = Agent("Answer with the tools.", model=model, tools=[weather])
    result = await agent.run("Weather in Oslo and Lima?")

    assert result.output == "Oslo and Lima are sunny."
    assert result.usage.model_calls == 2
    assert result.usage.tool_calls == 2
    assert (result.usage.input_tokens, result.usage.output_tokens) == (22, 14)
    first, second = (r.body for r in server.requests)
    assert first["tools"][0]["function"]["name"] == "weather"
    assert first["tools"][0]["function"]["parameters"]["properties"]["city"] == {
        "type": "string", "description": "the city's name.",
    }
    assert first["messages"][0] == {"role": "system", "content": "Answer with the tools."}
    assistant, tool_a, tool_b = second["messages"][2:]
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_a", "call_b"]
    assert tool_a == {"role": "tool", "tool_call_id": "call_a", "content": "sunny in Oslo"}
    assert tool_b == {"role": "tool", "tool_call_id": "call_b", "content": "sunny in Lima"}


@pytest.mark.anyio
async def test_structured_output_asks_for_a_json_schema(
    server: FakeServer, model: OpenAIChatModel
) -> None:
    server.add(chat_completion('{"category": "billing", "urgent": true}'))
    agent = Agent("Classify the ticket.", model=model, output_type=Ticket)
    result = await agent.run("I was charged twice!")
    assert result.output == Ticket(category="billing", urgent=True)
    response_format = server.requests[0].body["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["name"] == "Ticket"
    assert response_format["json_schema"]["schema"]["required"] == ["category", "urgent"]


@pytest.mark.anyio
async def test_invalid_structured_output_is_sent_back_for_correction(
    server: FakeServer, model: OpenAIChatModel
) -> None:
    server.add(
        chat_completion('{"category": "billing"}'),
        chat_completion('{"category": "billing", "urgent": false}'),
    )
    agent = Agent("Classify the ticket.", model=model, output_type=Ticket)
    result = await agent.run("Where is my invoice?")
    assert result.output == Ticket(category="billing", urgent=False)
    correction = server.requests[1].body["messages"][-1]
    assert correction["role"] == "user"
    assert "urgent: Field required" in correction["content"]


@pytest.mark.anyio
async def test_429_waits_for_retry_after_and_the_sdk_does_not_retry(
    server: FakeServer, model: OpenAIChatModel
) -> None:
    server.add(
        chat_error(429, "Rate limit reached", headers={"Retry-After": "3"}),
        chat_completion("ok"),
    )
    sleeps = Sleeps()
    response = await RetryingModel(model, sleep=sleeps).request(
        [UserMessage("hi")], ModelRequestParameters()
    )
    assert response.text == "ok"
    assert sleeps.waits == [3.0]
    assert len(server.requests) == 2  # one failure, one success: no hidden SDK retries


@pytest.mark.anyio
async def test_500_is_retried_with_backoff(server: FakeServer, model: OpenAIChatModel) -> None:
    server.add(chat_error(500, "boom"), chat_error(503, "busy"), chat_completion("recovered"))
    sleeps = Sleeps()
    response = await RetryingModel(model, base_s=0.5, sleep=sleeps).request(
        [UserMessage("hi")], ModelRequestParameters()
    )
    assert response.text == "recovered"
    assert len(sleeps.waits) == 2
    assert sleeps.waits[1] > sleeps.waits[0] * 1.1  # grows (jitter is +/-25 %)


@pytest.mark.anyio
async def test_other_4xx_are_not_retried(server: FakeServer, model: OpenAIChatModel) -> None:
    server.add(chat_error(400, "messages: too long"))
    sleeps = Sleeps()
    with pytest.raises(ModelError, match="HTTP 400") as info:
        await RetryingModel(model, sleep=sleeps).request(
            [UserMessage("hi")], ModelRequestParameters()
        )
    assert info.value.status_code == 400
    assert not info.value.retryable
    assert sleeps.waits == []
    assert len(server.requests) == 1


@pytest.mark.anyio
async def test_a_timeout_is_a_retryable_model_error(
    server: FakeServer, model: OpenAIChatModel
) -> None:
    server.add(FakeReply(body={}, hold_s=30))
    params = ModelRequestParameters(settings=ModelSettings(timeout_s=0.2))
    with pytest.raises(ModelError, match="timed out") as info:
        await model.request([UserMessage("hi")], params)
    assert info.value.retryable
    assert info.value.status_code is None


@pytest.mark.anyio
async def test_streaming_text_over_sse(server: FakeServer, model: OpenAIChatModel) -> None:
    server.add(chat_stream(["Hel", "lo, ", "world"], prompt_tokens=5, completion_tokens=4))
    agent = Agent("Greet.", model=model, name="greeter")
    events = [event async for event in agent.stream("hi", user_id="u-1")]

    deltas = [e.text for e in events if isinstance(e, TextDeltaEvent)]
    assert deltas == ["Hel", "lo, ", "world"]
    final = events[-1]
    assert isinstance(final, FinalEvent)
    assert final.result.output == "Hello, world"
    assert (final.result.usage.input_tokens, final.result.usage.output_tokens) == (5, 4)
    assert {(e.run_id, e.agent) for e in events} == {(final.run_id, "greeter")}
    body = server.requests[0].body
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


@pytest.mark.anyio
async def test_streamed_tool_calls_arrive_in_pieces(
    server: FakeServer, model: OpenAIChatModel
) -> None:
    server.add(
        chat_stream(tool_calls=[("call_x", "weather", ['{"ci', 'ty": "Ri', 'ga"}'])]),
        chat_stream(["Riga is sunny."]),
    )
    agent = Agent("Use tools.", model=model, tools=[weather])
    events = [event async for event in agent.stream("Riga?")]
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert [(r.call.id, r.result.content) for r in results] == [("call_x", "sunny in Riga")]
    assert events[-1].result.output == "Riga is sunny."


def test_run_sync_works_again_and_again_over_keep_alive(server: FakeServer) -> None:
    server.add(*(chat_completion(f"answer {i}") for i in range(3)))
    provider = OpenAIProvider(api_key="sk-test", base_url=f"{server.url}/v1")
    agent = Agent("Answer.", model=OpenAIChatModel("gpt-4o", provider=provider))
    assert [agent.run_sync(f"q{i}").output for i in range(3)] == [
        "answer 0", "answer 1", "answer 2",
    ]
    # issue 8 item 13: one client, one kept-alive connection, for every blocking call
    assert server.connections == 1


def test_run_sync_from_worker_threads_at_once(server: FakeServer) -> None:
    server.add(*(chat_completion("same answer") for _ in range(8)))
    provider = OpenAIProvider(api_key="sk-test", base_url=f"{server.url}/v1")
    agent = Agent("Answer.", model=OpenAIChatModel("gpt-4o", provider=provider))
    with ThreadPoolExecutor(max_workers=4) as pool:
        outputs = list(pool.map(lambda i: agent.run_sync(f"q{i}").output, range(8)))
    assert outputs == ["same answer"] * 8
    assert server.connections <= 4     # the pool's connections, reused across threads


# --- request timeouts (issue 8 item 10) -------------------------------------------------


@pytest.mark.anyio
async def test_the_provider_timeout_bounds_a_server_that_never_answers(
    server: FakeServer,
) -> None:
    server.add(FakeReply(body={}, hold_s=30))
    provider = OpenAIProvider(api_key="sk-test", base_url=f"{server.url}/v1", timeout_s=0.3)
    async with OpenAIChatModel("gpt-4o", provider=provider) as model:
        with pytest.raises(ModelError, match=r"timed out after 0\.3 s") as info:
            await model.request([UserMessage("hi")], ModelRequestParameters())
    assert info.value.retryable


# --- model profiles (issue 8 item 14) ---------------------------------------------------

LLAMA_CPP_PYTHON_MODELS = FakeReply(body={"object": "list", "data": [
    {"id": "smollm2", "object": "model", "owned_by": "me", "permissions": []}]})


def order_status(order_id: str) -> str:
    """Look up an order.

    Args:
        order_id: the order number.
    """
    return {"A-100": "shipped"}.get(order_id, "unknown")


@pytest.mark.anyio
async def test_openais_own_profile_sends_strict_schemas_and_max_completion_tokens(
    server: FakeServer,
) -> None:
    server.add(chat_completion('{"category": "billing", "urgent": true}'))
    provider = OpenAIProvider(api_key="sk-test", base_url=f"{server.url}/v1",
                              profile="openai")
    async with OpenAIChatModel("gpt-4o", provider=provider) as model:
        agent = Agent("Classify.", model=model, output_type=Ticket,
                      settings=ModelSettings(max_tokens=50))
        result = await agent.run("charged twice")
    assert result.output == Ticket(category="billing", urgent=True)
    body = server.requests[0].body
    spec = body["response_format"]["json_schema"]
    assert spec["strict"] is True and spec["schema"]["additionalProperties"] is False
    assert body["max_completion_tokens"] == 50 and "max_tokens" not in body
    assert server.gets == []           # a given profile needs no detection


@pytest.mark.anyio
async def test_llama_cpp_python_is_detected_once_and_spoken_to_as_it_accepts(
    server: FakeServer,
) -> None:
    server.get_replies["/v1/models"] = LLAMA_CPP_PYTHON_MODELS
    server.add(
        chat_completion('{"category": "billing", "urgent": false}'),
        chat_completion(tool_calls=[function_call("order_status", {"order_id": "A-100"},
                                                  "call_1")]),
        chat_completion("It has shipped."),
    )
    provider = OpenAIProvider(base_url=f"{server.url}/v1")     # no key: a local server
    async with OpenAIChatModel("smollm2", provider=provider) as model:
        classified = await Agent("Classify.", model=model, output_type=Ticket).run("x")
        answered = await Agent("Answer about orders.", model=model,
                               tools=[order_status]).run("Where is A-100?")
    assert classified.output == Ticket(category="billing", urgent=False)
    assert (answered.output, answered.usage.tool_calls) == ("It has shipped.", 1)
    assert [g.path for g in server.gets] == ["/v1/models"]    # detected once
    schema_request, tool_request, answer_request = (r.body for r in server.requests)
    assert schema_request["response_format"] == {
        "type": "json_object", "schema": Ticket.model_json_schema()}
    assert tool_request["tool_choice"] == "auto"
    # the tool's result comes back as a user message the chat template keeps, and the
    # model is asked to answer (the server's automatic choice cannot write text)
    roles = [m["role"] for m in answer_request["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert "shipped" in answer_request["messages"][-1]["content"]
    assert answer_request["tool_choice"] == "none"


@pytest.mark.anyio
async def test_an_unknown_server_gets_the_openai_compatible_profile(
    server: FakeServer, model: OpenAIChatModel
) -> None:
    server.add(
        chat_completion(tool_calls=[function_call("order_status", {"order_id": "A-100"},
                                                  "call_1")]),
        chat_completion("It has shipped."),
    )
    result = await Agent("Answer.", model=model, tools=[order_status]).run("A-100?")
    assert result.output == "It has shipped."
    assert [g.path for g in server.gets] == ["/v1/models"]     # 404 here: not one we know
    first, second = (r.body for r in server.requests)
    assert first["tool_choice"] == "auto"
    assert second["tool_choice"] == "auto"
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "call_1",
                                      "content": "shipped"}


@pytest.mark.anyio
async def test_text_requests_do_not_wait_for_detection(
    server: FakeServer, model: OpenAIChatModel
) -> None:
    server.add(chat_completion("hi"))
    await model.request([UserMessage("hi")], ModelRequestParameters())
    assert server.gets == []


@pytest.mark.anyio
async def test_an_unsupported_request_shape_is_not_retried(server: FakeServer) -> None:
    # what llama-cpp-python answers to response_format json_schema
    server.add(chat_error(500, "1 validation error:\n  {'type': 'literal_error', 'loc': "
                               "('body', 'response_format', 'type'), 'msg': \"Input should "
                               "be 'text' or 'json_object'\"}"))
    provider = OpenAIProvider(api_key="sk-test", base_url=f"{server.url}/v1",
                              profile="openai-compatible")
    sleeps = Sleeps()
    async with OpenAIChatModel("m", provider=provider) as adapter:
        with pytest.raises(ModelError, match="does not accept this request's shape") as info:
            await RetryingModel(adapter, sleep=sleeps).request(
                [UserMessage("hi")], ModelRequestParameters(output_type=Ticket))
    assert not info.value.retryable and info.value.attempts == 1
    assert sleeps.waits == [] and len(server.requests) == 1


@pytest.mark.anyio
async def test_extra_body_reaches_the_server_as_given(
    server: FakeServer, model: OpenAIChatModel
) -> None:
    server.add(chat_completion("ok"))
    settings = ModelSettings(temperature=0.0, extra_body={"top_k": 5, "seed": 7})
    await model.request([UserMessage("hi")], ModelRequestParameters(settings=settings))
    body = server.requests[0].body
    assert (body["top_k"], body["seed"], body["temperature"]) == (5, 7, 0.0)


# --- credentials never reach a message (issue 21 item 6) ---------------------------------

PLANTED = ("plain-secret-value", "url-Password", "sk-proj-Abc123Def456Ghi789Jkl012")


@pytest.mark.anyio
async def test_a_key_the_server_echoes_back_is_in_no_error_nor_its_cause(
    server: FakeServer,
) -> None:
    import traceback

    host = server.url.removeprefix("http://")
    key, password, other = PLANTED
    server.add(chat_error(401, f"Incorrect API key provided: {key}; also {other} from "
                               f"http://ada:{password}@{host}/v1"))
    provider = OpenAIProvider(api_key=key, base_url=f"http://ada:{password}@{host}/v1")
    assert password not in repr(provider)
    async with OpenAIChatModel("gpt-4o", provider=provider) as model:
        with pytest.raises(ModelError, match="HTTP 401") as info:
            await RetryingModel(model, sleep=Sleeps()).request(
                [UserMessage("hi")], ModelRequestParameters())
    # the SDK sends the URL's credentials as Basic auth (for a proxy), instead of the key
    assert server.requests[0].headers["authorization"].startswith("Basic ")
    shown = "".join(traceback.format_exception(info.value))   # the SDK's error included
    assert "Incorrect API key provided: ***" in shown
    for secret in PLANTED:
        assert secret not in shown
