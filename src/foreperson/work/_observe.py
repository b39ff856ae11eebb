"""What the work layer reports to :mod:`foreperson.telemetry`: a span per task attempt
and the metric events of a run (claim-to-start wait, run time, retries, DEAD, reclaims).

Kept apart from the run loop so that, with no sink and no tracing installed, a task
pays two falsy checks and nothing else.
"""

from __future__ import annotations

from typing import Any

from .. import telemetry
from ..errors import RateLimited
from ..retry import is_retryable
from .task import Task

__all__ = ["attempt_outcome", "attempt_span", "attempt_ended", "attempt_began"]


def attempt_outcome(task: Task, ok: bool, value: Any) -> str:
    """How an attempt ended, as the span and the run-time histogram label it:
    ``completed``, ``rate_limited``, ``retrying`` (a retry will be scheduled) or
    ``dead`` (the supervisor will give up), judged as
    :meth:`~foreperson.work.supervisor.Supervisor.on_fail` will judge it."""
    if ok:
        return "completed"
    if isinstance(value, RateLimited):
        return "rate_limited"
    attempts = max(task.attempts, 1)
    retryable = not isinstance(value, BaseException) or is_retryable(value)
    return "retrying" if retryable and attempts < task.max_attempts else "dead"


def attempt_span(worker: str, task: Task) -> Any:
    """Start the span of one attempt of ``task`` by ``worker`` (its parent: the context
    the task was created under), or None when tracing is not installed."""
    if telemetry.tracer() is None:
        return None
    return telemetry.start_span(
        f"task {task.kind}",
        {"foreperson.task.id": task.id, "foreperson.task.kind": task.kind,
         "foreperson.task.attempt": task.attempts, "foreperson.worker": worker,
         "foreperson.run_id": task.run_id},
        parent=telemetry.span_context(task.trace_context), kind="CONSUMER")


def attempt_began(task: Task, waited_s: float) -> None:
    """Report that an attempt began ``waited_s`` seconds after its claim."""
    for sink in telemetry.SINKS:
        sink.task_started(task.kind, waited_s)


def attempt_ended(span: Any, task: Task, ok: bool, value: Any, run_s: float) -> None:
    """Report how an attempt ended (``value``: its result or exception) after ``run_s``
    seconds, and end its span."""
    if span is None and not telemetry.SINKS:
        return
    outcome = attempt_outcome(task, ok, value)
    for sink in telemetry.SINKS:
        sink.task_finished(task.kind, outcome, run_s)
    if span is not None:
        error = value if not ok and isinstance(value, BaseException) else None
        telemetry.end_span(span, error, {"foreperson.task.outcome": outcome})
