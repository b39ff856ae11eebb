"""Bodies of the Anthropic messages protocol, for :class:`FakeServer` replies."""

from __future__ import annotations

from typing import Any

from .server import FakeReply, SseEvent

__all__ = ["message", "message_error", "message_stream", "tool_use"]


def tool_use(name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    """One ``tool_use`` content block."""
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def message(
    text: str | None = None,
    *,
    tool_uses: list[dict[str, Any]] | None = None,
    model: str = "claude-opus-4-7-20260101",
    input_tokens: int = 13,
    output_tokens: int = 9,
    stop_reason: str | None = None,
) -> FakeReply:
    """A whole (non-streamed) message."""
    content: list[dict[str, Any]] = []
    if text is not None:
        content.append({"type": "text", "text": text})
    content += tool_uses or []
    return FakeReply(body={
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason or ("tool_use" if tool_uses else "end_turn"),
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    })


def message_stream(
    text_pieces: list[str] = (),  # type: ignore[assignment]
    *,
    tool_uses: list[tuple[str, str, list[str]]] = (),  # type: ignore[assignment]
    input_tokens: int = 13,
    output_tokens: int = 9,
) -> FakeReply:
    """A streamed message (server-sent events with ``event:`` names).

    Args:
        text_pieces: the text, in the pieces it arrives in.
        tool_uses: ``(call_id, name, json_pieces)`` per call.
    """
    def ev(name: str, data: dict[str, Any]) -> SseEvent:
        return SseEvent({"type": name, **data}, event=name)

    events = [ev("message_start", {"message": {
        "id": "msg_fake", "type": "message", "role": "assistant",
        "model": "claude-opus-4-7-20260101", "content": [], "stop_reason": None,
        "stop_sequence": None, "usage": {"input_tokens": input_tokens, "output_tokens": 1},
    }})]
    index = 0
    if text_pieces:
        events.append(ev("content_block_start", {
            "index": index, "content_block": {"type": "text", "text": ""},
        }))
        events += [
            ev("content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": p}})
            for p in text_pieces
        ]
        events.append(ev("content_block_stop", {"index": index}))
        index += 1
    for call_id, name, pieces in tool_uses:
        events.append(ev("content_block_start", {
            "index": index,
            "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}},
        }))
        events += [
            ev("content_block_delta", {
                "index": index, "delta": {"type": "input_json_delta", "partial_json": p},
            })
            for p in pieces
        ]
        events.append(ev("content_block_stop", {"index": index}))
        index += 1
    events.append(ev("message_delta", {
        "delta": {"stop_reason": "tool_use" if tool_uses else "end_turn", "stop_sequence": None},
        "usage": {"output_tokens": output_tokens},
    }))
    events.append(ev("message_stop", {}))
    return FakeReply(events=events)


def message_error(status: int, message: str, *, headers: dict[str, str] | None = None) -> FakeReply:
    """An error reply in Anthropic's shape."""
    kind = {429: "rate_limit_error", 400: "invalid_request_error", 529: "overloaded_error"}.get(
        status, "api_error"
    )
    return FakeReply(
        status=status,
        body={"type": "error", "error": {"type": kind, "message": message}},
        headers=headers or {},
    )
