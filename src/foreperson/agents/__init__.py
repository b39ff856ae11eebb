"""Agents: ``Agent(instructions, model=, tools=, architecture=)`` (seed 001), tools from
plain functions, the ReAct loop with parallel tool dispatch, run results with usage,
the event stream, and guards (limits, permissions, hooks, approval, guardrails, rate
limiter, audit log).

Each step of a run (model call, tool call, approval, spawn, delegation) goes through an
injected step runner: :class:`InlineSteps` by default, :class:`JournaledSteps` over a
:class:`~foreperson.journal.Journal` to record and replay them; the clock, the id source,
the parent run and the event sink come in the same :class:`RunOptions`. The agent layer
never imports the work layer: durability is injected.

Example::

    from foreperson.agents import Agent

    def add(a: int, b: int) -> int:
        \"\"\"Add two integers.\"\"\"
        return a + b

    agent = Agent("Do arithmetic with the tools.", model="gpt-4o", tools=[add])
    result = agent.run_sync("What is 2 + 3?")
    print(result.output, result.usage)
"""

from ._agent import Agent
from ._durable import DurableRuntime, RunSession
from ._events import (
    EVENTS_ADAPTER,
    STOP_REASONS,
    AgentEvent,
    FinalEvent,
    ModelCallEvent,
    RunResult,
    StopReason,
    TextDeltaEvent,
    ToolCallEvent,
    ToolResultEvent,
    dump_run_result,
    load_run_result,
)
from ._guards import (
    AUDIT_KINDS,
    AfterToolHook,
    Approval,
    ApprovalHandler,
    AuditEntry,
    AuditLog,
    BeforeToolHook,
    Guardrail,
    Guards,
    JsonlAuditLog,
    Limits,
    MemoryAuditLog,
    PendingApproval,
    RateLimiter,
    ask_later,
)
from ._react import Architecture, ReAct
from ._runner import (
    JSON_CODEC,
    InlineSteps,
    JournaledSteps,
    StepCodec,
    StepOutcome,
    StepRunner,
    StepSpec,
)
from ._state import EventSink, ParentRun, RunContext, RunOptions, unfinished_usage
from ._steps import RunParked, SpawnRecord
from ._tools import Tool, tool
from ._vocabulary import Vocabulary

__all__ = [
    "AUDIT_KINDS",
    "EVENTS_ADAPTER",
    "JSON_CODEC",
    "STOP_REASONS",
    "AfterToolHook",
    "Agent",
    "AgentEvent",
    "Approval",
    "ApprovalHandler",
    "Architecture",
    "AuditEntry",
    "AuditLog",
    "BeforeToolHook",
    "DurableRuntime",
    "EventSink",
    "FinalEvent",
    "Guardrail",
    "Guards",
    "InlineSteps",
    "JournaledSteps",
    "JsonlAuditLog",
    "Limits",
    "MemoryAuditLog",
    "ModelCallEvent",
    "ParentRun",
    "PendingApproval",
    "RateLimiter",
    "ReAct",
    "RunContext",
    "RunOptions",
    "RunParked",
    "RunResult",
    "RunSession",
    "SpawnRecord",
    "StepCodec",
    "StepOutcome",
    "StepRunner",
    "StepSpec",
    "StopReason",
    "TextDeltaEvent",
    "Tool",
    "ToolCallEvent",
    "ToolResultEvent",
    "Vocabulary",
    "ask_later",
    "dump_run_result",
    "load_run_result",
    "tool",
    "unfinished_usage",
]
