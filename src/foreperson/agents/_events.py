"""What a run produces: its result, and the typed events ``Agent.stream`` yields.

Events are dataclasses with a ``kind`` literal, each tagged with the run id and the
agent's name, and, for a run nested in another (a worker run from inside a tool of its
supervisor), with the parent's run id, the step path it runs under and its level; they
serialise through one adapter, :data:`EVENTS_ADAPTER`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Annotated, Any, Generic, Literal, TypeAlias, TypeVar

from pydantic import BaseModel, Field, TypeAdapter

from ..models import MESSAGES_ADAPTER, Message, ModelResponse, ToolCall, ToolReturn, Usage
from ._guards import PendingApproval
from ._vocabulary import Vocabulary

__all__ = [
    "EVENTS_ADAPTER",
    "AgentEvent",
    "FinalEvent",
    "ModelCallEvent",
    "RunResult",
    "STOP_REASONS",
    "StopReason",
    "TextDeltaEvent",
    "ToolCallEvent",
    "ToolResultEvent",
]

OutputT = TypeVar("OutputT")

StopReason: TypeAlias = str
"""Why a run ended: one of the names registered in :data:`STOP_REASONS`.

The agent layer's own: ``"completed"`` (the model gave its final answer), the limits
``"max_turns"``, ``"max_tool_calls"``, ``"max_tokens"``, ``"max_duration"``, the guardrails
``"input_guardrail"``, ``"output_guardrail"``, and the model's own failures to answer
``"empty_reply"``, ``"truncated"``. The layers above register theirs (the teams layer:
``"cap"``, ``"loop"``, ``"route"``); ``RunContext.end`` refuses a name nobody registered.
"""

STOP_REASONS = Vocabulary("stop reason", {
    "completed": "the model gave its final answer",
    "max_turns": "Limits.max_turns model calls were made",
    "max_tool_calls": "Limits.max_tool_calls tool calls were made",
    "max_tokens": "Limits.max_tokens input plus output tokens were used",
    "max_duration": "the run took Limits.max_duration_s seconds of wall-clock time",
    "input_guardrail": "an input guardrail blocked the prompt",
    "output_guardrail": "an output guardrail withheld the final output",
    "empty_reply": "the model replied with nothing, again after being asked once more",
    "truncated": "the model's answer was cut by its token limit, again after being asked "
                 "once more",
    "awaiting_approval": "a tool call waits for a human decision (Approval.pending()); the "
                         "run is parked in its journal until one is recorded, then resumed",
})
"""The registry of stop reasons (see :data:`StopReason`);
``STOP_REASONS.register(name, meaning)`` adds one."""

TRUNCATED_FINISH_REASONS = frozenset({"length", "max_tokens"})
"""Finish reasons that mean "cut by the token limit" (OpenAI-compatible servers say
``"length"``, Anthropic ``"max_tokens"``)."""


@dataclass(frozen=True)
class RunResult(Generic[OutputT]):
    """The outcome of one run.

    Attributes:
        output: the final output: the validated ``output_type`` object, or the text of
            the final answer; None when the run did not complete (see ``stop_reason``).
        text: what the run produced, whatever the stop reason: the last text the model
            wrote or, when it wrote none (a cap stopped it after only tool calls), the
            content of the last tool result (the last successful one when there is
            one); None only when nothing was produced at all.
        messages: the whole conversation, system message first.
        usage: model calls, input and output tokens, and tool calls of the run,
            including those of the runs nested in it (each counted once).
        stop_reason: why the run ended (see :data:`StopReason`).
        run_id: the run's id.
        agent: the agent's name.
        detail: a human-readable note on the stop (the guardrail's reason, the limit
            reached), or None when completed.
        finish_reason: why the model stopped its last reply, in the provider's words
            (``"stop"``, ``"tool_calls"``, ``"length"``...), or None (no model call, or
            the provider did not say).
        pending: the tool calls a parked run waits on (stop reason
            ``"awaiting_approval"``), in call order; empty otherwise.
    """

    output: OutputT | None
    text: str | None
    messages: list[Message]
    usage: Usage
    stop_reason: StopReason
    run_id: str
    agent: str
    detail: str | None = None
    finish_reason: str | None = None
    pending: tuple[PendingApproval, ...] = ()

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
        parent_run_id: the run this one is nested in, or None for a top-level run.
        parent_path: the step path, in the outermost run's journal, that this
            nested run runs under (e.g. the delegation's tool call), or None.
        level: 0 for a top-level run, 1 for a run nested in it, and so on.
        replayed: True when the step's result came from a journal (recorded by an
            earlier run under the same step key) instead of being produced again.
    """

    run_id: str
    agent: str
    turn: int
    response: ModelResponse
    parent_run_id: str | None = None
    parent_path: str | None = None
    level: int = 0
    replayed: bool = False
    kind: Literal["model_call"] = "model_call"


@dataclass(frozen=True)
class TextDeltaEvent:
    """A piece of the model's text, as it streams in (``Agent.stream`` only).

    Attributes:
        run_id: the run.
        agent: the agent's name.
        turn: the model call it belongs to.
        text: the new text.
        parent_run_id: the run this one is nested in, or None for a top-level run.
        parent_path: the step path, in the outermost run's journal, that this
            nested run runs under (e.g. the delegation's tool call), or None.
        level: 0 for a top-level run, 1 for a run nested in it, and so on.
    """

    run_id: str
    agent: str
    turn: int
    text: str
    parent_run_id: str | None = None
    parent_path: str | None = None
    level: int = 0
    kind: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True)
class ToolCallEvent:
    """A tool call is about to run (emitted for every call of a turn before any runs).

    Attributes:
        run_id: the run.
        agent: the agent's name.
        turn: the model call that asked for it.
        call: the call as the model wrote it.
        parent_run_id: the run this one is nested in, or None for a top-level run.
        parent_path: the step path, in the outermost run's journal, that this
            nested run runs under (e.g. the delegation's tool call), or None.
        level: 0 for a top-level run, 1 for a run nested in it, and so on.
    """

    run_id: str
    agent: str
    turn: int
    call: ToolCall
    parent_run_id: str | None = None
    parent_path: str | None = None
    level: int = 0
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
        parent_run_id: the run this one is nested in, or None for a top-level run.
        parent_path: the step path, in the outermost run's journal, that this
            nested run runs under (e.g. the delegation's tool call), or None.
        level: 0 for a top-level run, 1 for a run nested in it, and so on.
        replayed: True when the step's result came from a journal (recorded by an
            earlier run under the same step key) instead of being produced again.
    """

    run_id: str
    agent: str
    turn: int
    call: ToolCall
    result: ToolReturn
    duration_s: float
    parent_run_id: str | None = None
    parent_path: str | None = None
    level: int = 0
    replayed: bool = False
    kind: Literal["tool_result"] = "tool_result"


@dataclass(frozen=True)
class FinalEvent:
    """The run ended; always the last event.

    Attributes:
        run_id: the run.
        agent: the agent's name.
        result: the run's result.
        parent_run_id: the run this one is nested in, or None for a top-level run.
        parent_path: the step path, in the outermost run's journal, that this
            nested run runs under (e.g. the delegation's tool call), or None.
        level: 0 for a top-level run, 1 for a run nested in it, and so on.
    """

    run_id: str
    agent: str
    result: RunResult[Any]
    parent_run_id: str | None = None
    parent_path: str | None = None
    level: int = 0
    kind: Literal["final"] = "final"


AgentEvent = Annotated[
    ModelCallEvent | TextDeltaEvent | ToolCallEvent | ToolResultEvent | FinalEvent,
    Field(discriminator="kind"),
]
"""Any event of a run, told apart by its ``kind``."""

EVENTS_ADAPTER: TypeAdapter[AgentEvent] = TypeAdapter(AgentEvent)
"""Serialises events: ``EVENTS_ADAPTER.dump_python(event, mode="json")`` gives a dict
ready for JSON."""


def dump_run_result(result: RunResult[Any]) -> dict[str, Any]:
    """A run's result as JSON (for a journal: a delegation's step result is the worker's
    run result).

    Args:
        result: the result; a pydantic ``output`` is dumped to a dict.

    Returns:
        A dict of JSON values; :func:`load_run_result` reads it back.
    """
    output = result.output
    if isinstance(output, BaseModel):
        output = output.model_dump(mode="json")
    return {
        "output": output,
        "text": result.text,
        "messages": MESSAGES_ADAPTER.dump_python(result.messages, mode="json"),
        "usage": asdict(result.usage),
        "stop_reason": result.stop_reason,
        "run_id": result.run_id,
        "agent": result.agent,
        "detail": result.detail,
        "finish_reason": result.finish_reason,
    }


def load_run_result(
    data: dict[str, Any], output_type: type[BaseModel] | None = None
) -> RunResult[Any]:
    """The result :func:`dump_run_result` wrote.

    Args:
        data: the dict.
        output_type: the agent's ``output_type``: a dict ``output`` is validated into it.

    Returns:
        The result.

    Raises:
        pydantic.ValidationError: ``data`` is not a dumped run result.
    """
    output = data.get("output")
    if output_type is not None and isinstance(output, dict):
        output = output_type.model_validate(output)
    return RunResult(
        output=output,
        text=data.get("text"),
        messages=MESSAGES_ADAPTER.validate_python(data.get("messages", [])),
        usage=Usage(**data.get("usage", {})),
        stop_reason=data["stop_reason"],
        run_id=data["run_id"],
        agent=data["agent"],
        detail=data.get("detail"),
        finish_reason=data.get("finish_reason"),
    )
