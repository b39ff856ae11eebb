"""What a run produces: its result, and the typed events ``Agent.stream`` yields.

Events are dataclasses with a ``kind`` literal, each tagged with the run id and the
agent's name; they serialise through one adapter, :data:`EVENTS_ADAPTER`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import Field, TypeAdapter

from ..models import Message, ModelResponse, ToolCall, ToolReturn, Usage

__all__ = [
    "EVENTS_ADAPTER",
    "AgentEvent",
    "FinalEvent",
    "ModelCallEvent",
    "RunResult",
    "StopReason",
    "TextDeltaEvent",
    "ToolCallEvent",
    "ToolResultEvent",
]

OutputT = TypeVar("OutputT")

StopReason = Literal[
    "completed",
    "max_turns",
    "max_tool_calls",
    "max_tokens",
    "input_guardrail",
    "output_guardrail",
]
"""Why a run ended: ``"completed"`` (the model gave its final answer) or the guard that
stopped it."""


@dataclass(frozen=True)
class RunResult(Generic[OutputT]):
    """The outcome of one run.

    Attributes:
        output: the final output: the validated ``output_type`` object, or the text of
            the final answer; None when the run did not complete (see ``stop_reason``).
        text: the last text the model wrote, whatever the stop reason (what was
            produced so far when a limit stopped the run), or None.
        messages: the whole conversation, system message first.
        usage: model calls, input and output tokens, and tool calls of the run.
        stop_reason: why the run ended.
        run_id: the run's id.
        agent: the agent's name.
        detail: a human-readable note on the stop (the guardrail's reason, the limit
            reached), or None when completed.
    """

    output: OutputT | None
    text: str | None
    messages: list[Message]
    usage: Usage
    stop_reason: StopReason
    run_id: str
    agent: str
    detail: str | None = None

    @property
    def completed(self) -> bool:
        """True when the model gave its final answer (no guard stopped the run)."""
        return self.stop_reason == "completed"


@dataclass(frozen=True)
class ModelCallEvent:
    """The model answered.

    Attributes:
        run_id: the run.
        agent: the agent's name.
        turn: the model call's number in the run, from 1.
        response: the reply (text, tool calls, usage).
    """

    run_id: str
    agent: str
    turn: int
    response: ModelResponse
    kind: Literal["model_call"] = "model_call"


@dataclass(frozen=True)
class TextDeltaEvent:
    """A piece of the model's text, as it streams in (``Agent.stream`` only).

    Attributes:
        run_id: the run.
        agent: the agent's name.
        turn: the model call it belongs to.
        text: the new text.
    """

    run_id: str
    agent: str
    turn: int
    text: str
    kind: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True)
class ToolCallEvent:
    """A tool call is about to run (emitted for every call of a turn before any runs).

    Attributes:
        run_id: the run.
        agent: the agent's name.
        turn: the model call that asked for it.
        call: the call as the model wrote it.
    """

    run_id: str
    agent: str
    turn: int
    call: ToolCall
    kind: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True)
class ToolResultEvent:
    """A tool call finished (emitted in call order once the turn's calls are done).

    Attributes:
        run_id: the run.
        agent: the agent's name.
        turn: the model call that asked for it.
        call: the call as it ran (after hooks and approval edits).
        result: what the model will read; ``is_error`` when it failed.
        duration_s: seconds from the call's start to its result.
    """

    run_id: str
    agent: str
    turn: int
    call: ToolCall
    result: ToolReturn
    duration_s: float
    kind: Literal["tool_result"] = "tool_result"


@dataclass(frozen=True)
class FinalEvent:
    """The run ended; always the last event.

    Attributes:
        run_id: the run.
        agent: the agent's name.
        result: the run's result.
    """

    run_id: str
    agent: str
    result: RunResult[Any]
    kind: Literal["final"] = "final"


AgentEvent = Annotated[
    ModelCallEvent | TextDeltaEvent | ToolCallEvent | ToolResultEvent | FinalEvent,
    Field(discriminator="kind"),
]
"""Any event of a run, told apart by its ``kind``."""

EVENTS_ADAPTER: TypeAdapter[AgentEvent] = TypeAdapter(AgentEvent)
"""Serialises events: ``EVENTS_ADAPTER.dump_python(event, mode="json")`` gives a dict
ready for JSON."""
