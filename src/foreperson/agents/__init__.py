"""Agents: ``Agent(instructions, model=, tools=, architecture=)`` (seed 001), tools from
plain functions, the ReAct loop with parallel tool dispatch, run results with usage,
the event stream, and guards (limits, permissions, hooks, approval, guardrails, rate
limiter, audit log).

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
from ._context import RunContext
from ._events import (
    EVENTS_ADAPTER,
    AgentEvent,
    FinalEvent,
    ModelCallEvent,
    RunResult,
    StopReason,
    TextDeltaEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from ._guards import (
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
    RateLimiter,
)
from ._react import Architecture, ReAct
from ._tools import Tool, tool

__all__ = [
    "EVENTS_ADAPTER",
    "AfterToolHook",
    "Agent",
    "AgentEvent",
    "Approval",
    "ApprovalHandler",
    "Architecture",
    "AuditEntry",
    "AuditLog",
    "BeforeToolHook",
    "FinalEvent",
    "Guardrail",
    "Guards",
    "JsonlAuditLog",
    "Limits",
    "MemoryAuditLog",
    "ModelCallEvent",
    "RateLimiter",
    "ReAct",
    "RunContext",
    "RunResult",
    "StopReason",
    "TextDeltaEvent",
    "Tool",
    "ToolCallEvent",
    "ToolResultEvent",
    "tool",
]
