"""Bodies of the OpenAI chat-completions protocol, for :class:`FakeServer` replies."""

from __future__ import annotations

import json
from typing import Any

from .server import FakeReply, SseEvent

__all__ = ["chat_completion", "chat_error", "chat_stream", "function_call"]


def function_call(name: str, arguments: dict[str, Any] | str, call_id: str) -> dict[str, Any]:
    """One entry of ``message.tool_calls``."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def chat_completion(
    text: str | None = None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    model: str = "gpt-4o-2024-08-06",
    prompt_tokens: int = 11,
    completion_tokens: int = 7,
    finish_reason: str | None = None,
) -> FakeReply:
    """A whole (non-streamed) chat completion."""
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return FakeReply(body={
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": None,
            "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
        }],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    })


def _chunk(delta: dict[str, Any], finish_reason: str | None = None, model: str = "gpt-4o") -> dict:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
    }


def chat_stream(
    text_pieces: list[str] = (),  # type: ignore[assignment]
    *,
    tool_calls: list[tuple[str, str, list[str]]] = (),  # type: ignore[assignment]
    prompt_tokens: int = 11,
    completion_tokens: int = 7,
) -> FakeReply:
    """A streamed chat completion (server-sent events, ``stream_options.include_usage``).

    Args:
        text_pieces: the text, in the pieces it arrives in.
        tool_calls: ``(call_id, name, argument_pieces)`` per call; the arguments' JSON
            arrives in pieces, as real servers send it.
    """
    events = [SseEvent(_chunk({"role": "assistant", "content": ""}))]
    events += [SseEvent(_chunk({"content": piece})) for piece in text_pieces]
    for index, (call_id, name, pieces) in enumerate(tool_calls):
        events.append(SseEvent(_chunk({"tool_calls": [{
            "index": index, "id": call_id, "type": "function",
            "function": {"name": name, "arguments": ""},
        }]})))
        events += [
            SseEvent(_chunk({"tool_calls": [{"index": index, "function": {"arguments": p}}]}))
            for p in pieces
        ]
    events.append(SseEvent(_chunk({}, finish_reason="tool_calls" if tool_calls else "stop")))
    events.append(SseEvent({
        "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1_700_000_000,
        "model": "gpt-4o", "choices": [],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }))
    events.append(SseEvent("[DONE]"))
    return FakeReply(events=events)


def chat_error(status: int, message: str, *, headers: dict[str, str] | None = None) -> FakeReply:
    """An error reply in OpenAI's shape."""
    kind = {429: "rate_limit_error", 400: "invalid_request_error"}.get(status, "server_error")
    return FakeReply(
        status=status,
        body={"error": {"message": message, "type": kind, "param": None, "code": None}},
        headers=headers or {},
    )
