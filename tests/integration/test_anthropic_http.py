"""The Anthropic adapter drives the real ``anthropic`` SDK over real HTTP against a
scripted messages server on 127.0.0.1: tool use, structured output, retries (429 with
Retry-After, 529, other 4xx) and SSE streaming."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from pydantic import BaseModel
from tests.fakes.anthropic_server import message, message_error, message_stream, tool_use
from tests.fakes.server import FakeServer

from foreperson.agents import Agent, FinalEvent, TextDeltaEvent, ToolResultEvent
from foreperson.errors import ModelError
from foreperson.models import (
    AnthropicModel,
    AnthropicProvider,
    ModelRequestParameters,
    ModelSettings,
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
async def model(server: FakeServer) -> AsyncIterator[AnthropicModel]:
    provider = AnthropicProvider(api_key="sk-ant-test", base_url=server.url)
    adapter = AnthropicModel("claude-opus-4-7", provider=provider)
    yield adapter
    await adapter.aclose()


class Sleeps:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


async def stock(sku: str) -> int:
    """Units in stock.

    Args:
        sku: the product code.
    """
    return {"A-1": 4, "B-2": 0}[sku]


class Reply(BaseModel):
    answer: str
    confidence: float


@pytest.mark.anyio
async def test_a_text_reply_with_usage(server: FakeServer, model: AnthropicModel) -> None:
    server.add(message("Hi there.", input_tokens=21, output_tokens=4))
    response = await model.request([UserMessage("hello")], ModelRequestParameters(
        settings=ModelSettings(max_tokens=256, temperature=0.0),
    ))
    assert response.text == "Hi there."
    assert (response.usage.input_tokens, response.usage.output_tokens) == (21, 4)
    assert response.finish_reason == "end_turn"
    request = server.requests[0]
    assert request.path == "/v1/messages"
    sent_key = request.headers.get("x-api-key") or request.headers.get("authorization", "")
    assert sent_key.endswith("sk-ant-test")
    assert request.body["max_tokens"] == 256
    assert request.body["temperature"] == 0.0  # sent in the body, as the SDK lost the argument
    assert request.body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hello"}]}
    ]


@pytest.mark.anyio
async def test_an_agent_uses_tools_through_the_sdk(
    server: FakeServer, model: AnthropicModel
) -> None:
    server.add(
        message("Checking both.", tool_uses=[
            tool_use("stock", {"sku": "A-1"}, "toolu_1"),
            tool_use("stock", {"sku": "Z-9"}, "toolu_2"),
        ]),
        message("A-1 has 4 units; Z-9 is unknown."),
    )
    agent = Agent("Answer stock questions.", model=model, tools=[stock])
    result = await agent.run("Stock of A-1 and Z-9?")

    assert result.output == "A-1 has 4 units; Z-9 is unknown."
    assert result.usage.model_calls == 2
    assert result.usage.tool_calls == 2
    first, second = (r.body for r in server.requests)
    assert first["system"] == "Answer stock questions."
    assert first["tools"] == [{
        "name": "stock",
        "description": "Units in stock.",
        "input_schema": agent.tools["stock"].parameters,
    }]
    assistant, results = second["messages"][1:]
    assert assistant["role"] == "assistant"
    assert [b["type"] for b in assistant["content"]] == ["text", "tool_use", "tool_use"]
    assert results["role"] == "user"
    ok, failed = results["content"]
    assert ok == {"type": "tool_result", "tool_use_id": "toolu_1", "content": "4",
                  "is_error": False}
    assert failed["tool_use_id"] == "toolu_2"
    assert failed["is_error"] is True
    assert "KeyError" in failed["content"]


@pytest.mark.anyio
async def test_structured_output_sends_a_json_schema(
    server: FakeServer, model: AnthropicModel
) -> None:
    server.add(message('{"answer": "yes", "confidence": 0.8}'))
    agent = Agent("Answer.", model=model, output_type=Reply)
    result = await agent.run("Is it in stock?")
    assert result.output == Reply(answer="yes", confidence=0.8)
    output_format = server.requests[0].body["output_config"]["format"]
    assert output_format["type"] == "json_schema"
    assert output_format["schema"]["additionalProperties"] is False
    assert set(output_format["schema"]["required"]) == {"answer", "confidence"}


@pytest.mark.anyio
async def test_429_waits_for_retry_after(server: FakeServer, model: AnthropicModel) -> None:
    server.add(
        message_error(429, "rate limited", headers={"retry-after": "2"}),
        message_error(529, "overloaded"),
        message("finally"),
    )
    sleeps = Sleeps()
    response = await RetryingModel(model, base_s=0.25, sleep=sleeps).request(
        [UserMessage("hi")], ModelRequestParameters()
    )
    assert response.text == "finally"
    assert sleeps.waits[0] == 2.0
    assert 0.375 <= sleeps.waits[1] <= 0.625  # backoff after the 2nd failure: 0.5 s +/-25 %
    assert len(server.requests) == 3


@pytest.mark.anyio
async def test_other_4xx_are_not_retried(server: FakeServer, model: AnthropicModel) -> None:
    server.add(message_error(401, "invalid x-api-key"))
    sleeps = Sleeps()
    with pytest.raises(ModelError, match="ANTHROPIC_API_KEY") as info:
        await RetryingModel(model, sleep=sleeps).request(
            [UserMessage("hi")], ModelRequestParameters()
        )
    assert info.value.status_code == 401
    assert sleeps.waits == []
    assert len(server.requests) == 1


@pytest.mark.anyio
async def test_streaming_text_and_tool_input_over_sse(
    server: FakeServer, model: AnthropicModel
) -> None:
    server.add(
        message_stream(
            ["Let me ", "check."],
            tool_uses=[("toolu_9", "stock", ['{"sku"', ': "B-2"}'])],
            input_tokens=30,
            output_tokens=12,
        ),
        message_stream(["B-2 is ", "sold out."], input_tokens=50, output_tokens=6),
    )
    agent = Agent("Answer stock questions.", model=model, tools=[stock], name="clerk")
    events = [event async for event in agent.stream("B-2?")]

    deltas = [e.text for e in events if isinstance(e, TextDeltaEvent)]
    assert deltas == ["Let me ", "check.", "B-2 is ", "sold out."]
    [tool_result] = [e for e in events if isinstance(e, ToolResultEvent)]
    assert (tool_result.call.id, tool_result.call.arguments) == ("toolu_9", {"sku": "B-2"})
    assert tool_result.result.content == "0"
    final = events[-1]
    assert isinstance(final, FinalEvent)
    assert final.result.output == "B-2 is sold out."
    assert (final.result.usage.input_tokens, final.result.usage.output_tokens) == (80, 18)
    assert all(e.agent == "clerk" and e.run_id == final.run_id for e in events)
    assert server.requests[0].body["stream"] is True


def test_run_sync_works_again_and_again_over_keep_alive(server: FakeServer) -> None:
    server.add(message("one"), message("two"))
    provider = AnthropicProvider(api_key="sk-ant-test", base_url=server.url)
    agent = Agent("Answer.", model=AnthropicModel("claude-opus-4-7", provider=provider))
    assert [agent.run_sync("q").output for _ in range(2)] == ["one", "two"]
    # issue 8 item 13: the blocking calls share one client and its connection
    assert server.connections == 1


@pytest.mark.anyio
async def test_extra_body_reaches_the_server_beside_temperature(
    server: FakeServer, model: AnthropicModel
) -> None:
    server.add(message("ok"))
    settings = ModelSettings(temperature=0.2, extra_body={"top_k": 3})
    await model.request([UserMessage("hi")], ModelRequestParameters(settings=settings))
    body = server.requests[0].body
    assert (body["temperature"], body["top_k"]) == (0.2, 3)


@pytest.mark.anyio
async def test_a_server_that_never_answers_times_out_at_the_providers_bound(
    server: FakeServer,
) -> None:
    from tests.fakes.server import FakeReply

    server.add(FakeReply(body={}, hold_s=30))
    provider = AnthropicProvider(api_key="sk-ant-test", base_url=server.url, timeout_s=0.3)
    async with AnthropicModel("claude-opus-4-7", provider=provider) as adapter:
        with pytest.raises(ModelError, match=r"timed out after 0\.3 s"):
            await adapter.request([UserMessage("hi")], ModelRequestParameters())


# --- credentials never reach a message (issue 21 item 6) ---------------------------------


@pytest.mark.anyio
async def test_a_key_the_server_echoes_back_is_in_no_error_nor_its_cause(
    server: FakeServer,
) -> None:
    import traceback

    host = server.url.removeprefix("http://")
    key, password = "plain-secret-value", "url-Password"
    other = "sk-ant-api03-Abc123Def456Ghi789Jkl012-XYZ"
    server.add(message_error(401, f"invalid x-api-key {key}; also {other} from "
                                  f"http://ada:{password}@{host}"))
    provider = AnthropicProvider(api_key=key, base_url=f"http://ada:{password}@{host}")
    assert password not in repr(provider)
    async with AnthropicModel("claude-opus-4-7", provider=provider) as adapter:
        with pytest.raises(ModelError, match="HTTP 401") as info:
            await adapter.request([UserMessage("hi")], ModelRequestParameters())
    # the SDK sends the URL's credentials as Basic auth (for a proxy), instead of the key
    assert server.requests[0].headers["authorization"].startswith("Basic ")
    shown = "".join(traceback.format_exception(info.value))   # the SDK's error included
    assert "invalid x-api-key ***" in shown
    for secret in (key, password, other):
        assert secret not in shown
