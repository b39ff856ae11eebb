"""Spans and metric events of agent runs (see :mod:`foreperson.telemetry` for the names).

A run's span and its current turn's span live on the run's context and are never made
current across a ``yield`` (the run is an async generator); children name them as
their parent explicitly. A tool call's span is made current while the tool runs, so
what the tool starts (a delegation's task record, a worker's run) is its child.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .. import telemetry

if TYPE_CHECKING:
    from ..models import ModelResponse, ToolCall, ToolReturn
    from ._state import RunContext

__all__ = ["end_run", "model_call_ended", "model_call_span", "next_turn", "run_span",
           "tool_span", "tool_span_ended"]


def _provider(model: str) -> str:
    return model.partition(":")[0] if ":" in model else model


def run_span(ctx: RunContext, prompt: str) -> None:
    """Start the run's ``invoke_agent`` span (child of the current span)."""
    if telemetry.tracer() is None:
        return
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": ctx.agent_name,
        "gen_ai.request.model": ctx.agent.model.name, "foreperson.run_id": ctx.run_id}
    if telemetry.capture_content():
        attributes["gen_ai.input.messages"] = json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": prompt}]}])
    ctx.span = telemetry.start_span(f"invoke_agent {ctx.agent_name}", attributes)


def next_turn(ctx: RunContext) -> None:
    """End the previous turn's span and start turn ``ctx.turn``'s (child of the run's)."""
    if ctx.span is None:
        return
    telemetry.end_span(ctx.turn_span)
    ctx.turn_span = telemetry.start_span(
        f"turn {ctx.turn}", {"foreperson.turn": ctx.turn, "gen_ai.agent.name": ctx.agent_name,
                             "foreperson.run_id": ctx.run_id}, parent=ctx.span)


def end_run(ctx: RunContext, error: BaseException | None = None) -> None:
    """End the run's open turn span and its span, with its stop reason or error."""
    if ctx.span is None:
        return
    telemetry.end_span(ctx.turn_span)
    ctx.turn_span = None
    usage = ctx.usage
    telemetry.end_span(ctx.span, error, {
        "foreperson.stop_reason": ctx.stop_reason,
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens})
    ctx.span = None


def model_call_span(ctx: RunContext) -> Any:
    """Start a ``chat <model>`` span in the current turn (None without tracing)."""
    if ctx.turn_span is None:
        return None
    model = ctx.agent.model.name
    provider = _provider(model)
    return telemetry.start_span(f"chat {model}", {
        "gen_ai.operation.name": "chat", "gen_ai.system": provider,
        "gen_ai.provider.name": provider, "gen_ai.request.model": model,
        "gen_ai.agent.name": ctx.agent_name}, parent=ctx.turn_span, kind="CLIENT")


def model_call_ended(ctx: RunContext, span: Any, response: ModelResponse | None,
                     replayed: bool, error: BaseException | None = None) -> None:
    """End a model call's span and report its tokens (a replayed call spent none)."""
    model = ctx.agent.model.name
    if response is not None and not replayed and telemetry.SINKS:
        for sink in telemetry.SINKS:
            sink.model_call(model, response.usage.input_tokens, response.usage.output_tokens)
    if span is None:
        return
    attributes: dict[str, Any] = {"foreperson.replayed": replayed}
    if response is not None:
        attributes.update({
            "gen_ai.response.model": response.model_name or model,
            "gen_ai.usage.input_tokens": response.usage.input_tokens,
            "gen_ai.usage.output_tokens": response.usage.output_tokens,
            "gen_ai.response.finish_reasons": [response.finish_reason or "unknown"]})
        if telemetry.capture_content() and response.text:
            attributes["gen_ai.output.messages"] = json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": response.text}]}])
    telemetry.end_span(span, error, attributes)


def tool_span(ctx: RunContext, call: ToolCall) -> Any:
    """Start an ``execute_tool <name>`` span in the current turn (None without tracing);
    the caller makes it current while the tool runs."""
    if ctx.turn_span is None:
        return None
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.id, "gen_ai.tool.type": "function",
        "gen_ai.agent.name": ctx.agent_name}
    if telemetry.capture_content():
        attributes["gen_ai.tool.call.arguments"] = json.dumps(call.arguments_dict(),
                                                              default=str)
    return telemetry.start_span(f"execute_tool {call.name}", attributes, parent=ctx.turn_span)


def tool_span_ended(span: Any, result: ToolReturn | None, replayed: bool,
                    error: BaseException | None = None) -> None:
    """End a tool call's span."""
    if span is None:
        return
    attributes: dict[str, Any] = {"foreperson.replayed": replayed}
    if result is not None:
        attributes["foreperson.tool.is_error"] = result.is_error
        if telemetry.capture_content():
            attributes["gen_ai.tool.call.result"] = str(result.content)
    telemetry.end_span(span, error, attributes)
