"""Telemetry hooks: metric events and OpenTelemetry spans, free when nobody listens.

The library reports what happens through this module and never depends on a telemetry
package: metric events go to the sinks added with :func:`add_sink` (none by default;
:mod:`foreperson.observe.metrics` adds a Prometheus one), and spans go to the
OpenTelemetry **API** when ``opentelemetry-api`` is installed (a no-op until the
application installs the SDK and a tracer provider; STYLE 15). This module is the ground
floor: it imports nothing of foreperson.

Span names and attributes (OpenTelemetry GenAI semantic conventions for agents, model
calls and tool calls):

* ``task <kind>`` (CONSUMER): one attempt of a task; ``foreperson.task.id``,
  ``foreperson.task.kind``, ``foreperson.task.attempt``, ``foreperson.worker``,
  ``foreperson.task.outcome`` (``completed``, ``retrying``, ``dead``, ``rate_limited``,
  ``cancelled``), ``foreperson.run_id``. Its parent is the span that was current when
  the task was created, carried by the task record (:attr:`Task.trace_context`), so a
  task run by a worker process on another machine joins the trace that made it.
* ``invoke_agent <agent>``: an agent run; ``gen_ai.operation.name = invoke_agent``,
  ``gen_ai.agent.name``, ``foreperson.run_id``, ``foreperson.stop_reason``.
* ``turn <n>``: one turn of an agent (its model call and the tool calls it asked for);
  ``foreperson.turn``.
* ``chat <model>`` (CLIENT): a model call; ``gen_ai.operation.name = chat``,
  ``gen_ai.system`` and ``gen_ai.provider.name`` (the ``provider`` of
  ``provider:model``), ``gen_ai.request.model``, ``gen_ai.response.model``,
  ``gen_ai.usage.input_tokens``, ``gen_ai.usage.output_tokens``,
  ``gen_ai.response.finish_reasons``, ``foreperson.replayed``.
* ``execute_tool <tool>``: a tool call; ``gen_ai.operation.name = execute_tool``,
  ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.type``. A delegation is
  a tool call of its supervisor's turn: the worker's run (or, in a worker process, the
  delegation's task) is its child.

Prompts, messages, tool arguments and tool results are **not** recorded unless
:func:`set_capture_content` (or ``FOREPERSON_TRACE_CONTENT=1``) turns them on; then
``gen_ai.input.messages`` (the prompt), ``gen_ai.output.messages`` (the model's text),
``gen_ai.tool.call.arguments`` and ``gen_ai.tool.call.result`` are added.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from .errors import describe, redact

__all__ = ["MetricsSink", "add_sink", "capture_content", "current_carrier", "end_span",
           "remove_sink", "set_capture_content", "span_context", "start_span", "tracer",
           "use_span"]


class MetricsSink(Protocol):
    """Receives the library's metric events (all durations in seconds)."""

    def task_started(self, kind: str, waited_s: float) -> None:
        """A task attempt began ``waited_s`` seconds after this process claimed it."""
        ...

    def task_finished(self, kind: str, outcome: str, run_s: float) -> None:
        """A task attempt ended after ``run_s`` seconds with ``outcome``."""
        ...

    def task_retried(self, kind: str) -> None:
        """A failed attempt was scheduled again (FAILED)."""
        ...

    def task_dead(self, kind: str) -> None:
        """A task went DEAD in this process (retries exhausted or not retryable)."""
        ...

    def tasks_reclaimed(self, count: int) -> None:
        """``count`` tasks whose holder's lease expired were taken back."""
        ...

    def model_call(self, model: str, input_tokens: int, output_tokens: int) -> None:
        """A model was called (``provider:model``), spending these tokens."""
        ...


SINKS: list[MetricsSink] = []
"""The installed sinks; the library checks ``if SINKS:`` before doing any work."""


def add_sink(sink: MetricsSink) -> None:
    """Send the library's metric events to ``sink`` too (idempotent)."""
    if sink not in SINKS:
        SINKS.append(sink)


def remove_sink(sink: MetricsSink) -> None:
    """Stop sending metric events to ``sink`` (no error when it was not added)."""
    if sink in SINKS:
        SINKS.remove(sink)


# -- tracing ----------------------------------------------------------------------------

_capture = os.environ.get("FOREPERSON_TRACE_CONTENT", "").lower() in ("1", "true", "yes")
_api: Any = None          # the opentelemetry.trace module, or False when not installed
_tracer: Any = None
_NO_SDK: tuple[type, ...] = ()   # the API's own providers: no SDK installed


def set_capture_content(enabled: bool) -> None:
    """Record prompts, model text, tool arguments and results in spans (off by default:
    they may hold personal data)."""
    global _capture
    _capture = bool(enabled)


def capture_content() -> bool:
    """Whether spans record prompt and tool contents (see :func:`set_capture_content`)."""
    return _capture


def _trace() -> Any:
    """The ``opentelemetry.trace`` module, imported once; None when not installed."""
    global _api, _tracer
    if _api is None:
        try:
            from opentelemetry import trace
        except ImportError:
            _api = False
        else:
            _api = trace
            _tracer = trace.get_tracer("foreperson")
            global _NO_SDK
            _NO_SDK = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
    return _api or None


def tracer() -> Any:
    """foreperson's OpenTelemetry tracer, or None when ``opentelemetry-api`` is not
    installed. Without an SDK it makes non-recording spans, which cost next to nothing."""
    return _tracer if _trace() is not None else None


def current_carrier() -> dict[str, str] | None:
    """The current span's context as a W3C ``traceparent`` carrier, to store with a
    record that another process will pick up (None when no span is active)."""
    trace = _trace()
    if trace is None or not trace.get_current_span().get_span_context().is_valid:
        return None
    from opentelemetry import propagate

    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier or None


def span_context(carrier: dict[str, str] | None) -> Any:
    """An OpenTelemetry context whose parent is the span ``carrier`` names (from
    :func:`current_carrier`), or None (use the current context)."""
    if not carrier or _trace() is None:
        return None
    from opentelemetry import propagate

    return propagate.extract(carrier)


def start_span(name: str, attributes: dict[str, Any] | None = None, *, parent: Any = None,
               kind: str = "INTERNAL") -> Any:
    """Start a span (not made current: see :func:`use_span`).

    Args:
        name: the span's name.
        attributes: its first attributes (None values are left out).
        parent: a parent span, an OpenTelemetry context (:func:`span_context`), or None
            for the current context.
        kind: ``INTERNAL``, ``CLIENT``, ``SERVER``, ``PRODUCER`` or ``CONSUMER``.

    Returns:
        the span, or None when tracing is not installed, or when no SDK is (the
        application set no tracer provider) and there is no parent to carry on: such a
        span would record nothing and link nothing, and skipping it keeps an agent step
        or a task free of tracing costs.
    """
    trace = _trace()
    if trace is None:
        return None
    if (parent is None and isinstance(trace.get_tracer_provider(), _NO_SDK)
            and not trace.get_current_span().get_span_context().is_valid):
        return None
    context = parent
    if parent is not None and isinstance(parent, trace.Span):
        context = trace.set_span_in_context(parent)
    attrs = {k: v for k, v in (attributes or {}).items() if v is not None}
    return _tracer.start_span(name, context=context, kind=getattr(trace.SpanKind, kind),
                              attributes=attrs)


@contextmanager
def use_span(span: Any) -> Iterator[None]:
    """Make ``span`` current inside the block (not ended on exit). ``None`` does nothing."""
    if span is None:
        yield
        return
    from opentelemetry import context

    token = context.attach(_api.set_span_in_context(span))
    try:
        yield
    finally:
        context.detach(token)


def end_span(span: Any, error: BaseException | None = None,
             attributes: dict[str, Any] | None = None) -> None:
    """Set ``attributes`` (None values left out), record ``error`` (status ERROR) and end
    ``span``. ``None`` does nothing."""
    if span is None:
        return
    for key, value in (attributes or {}).items():
        if value is not None:
            span.set_attribute(key, value)
    if error is not None:
        from opentelemetry.trace import Status, StatusCode

        described = describe(error)            # no key echoed in a message reaches a span
        span.record_exception(error, attributes={
            "exception.message": described.partition(": ")[2],
            "exception.stacktrace": redact("".join(traceback.format_exception(error)))})
        span.set_status(Status(StatusCode.ERROR, described))
    span.end()
