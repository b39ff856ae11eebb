"""Agents: ``Agent(instructions, model=, tools=, architecture=)`` (seed 001), tools from
plain functions, the ReAct loop with parallel tool dispatch, run results with usage,
the event stream, and guards (limits, permissions, hooks, approval, guardrails, rate
limiter, audit log), MCP servers as toolsets (:class:`MCPServer`), and remote A2A agents
as agents (:func:`a2a_agent`).

Each step of a run (model call, tool call, approval, spawn, delegation) goes through an
injected step runner (:mod:`foreperson.agents.steps`: inline by default, journaled over a
:class:`~foreperson.journal.Journal` to record and replay them); the clock, the id source,
the parent run and the event sink come in the same :class:`RunOptions`. The agent layer
never imports the work layer: durability is injected. This package exports what a user of
:class:`Agent` needs; the step seam that team shapes and runtimes build on is
:mod:`foreperson.agents.steps`.

Example::

    from foreperson.agents import Agent

    def add(a: int, b: int) -> int:
        \"\"\"Add two integers.\"\"\"
        return a + b

    agent = Agent("Do arithmetic with the tools.", model="gpt-4o", tools=[add])
    result = agent.run_sync("What is 2 + 3?")
    print(result.output, result.usage)
"""

import importlib
from typing import Any

from ._a2a import A2A_SUMMONS_KEY, A2AReply, A2AUpdateEvent, RemoteA2A, a2a_agent
from ._agent import Agent
from ._events import (
    STOP_REASONS,
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
from ._mcp import MCPServer, MCPTool
from ._state import RunContext, RunOptions
from ._thread import Thread
from ._tools import Tool, tool

__all__ = [
    "A2A_SUMMONS_KEY",
    "A2AReply",
    "A2AUpdateEvent",
    "AUDIT_KINDS",
    "STOP_REASONS",
    "AfterToolHook",
    "Agent",
    "AgentEvent",
    "Approval",
    "ApprovalHandler",
    "AuditEntry",
    "AuditLog",
    "BeforeToolHook",
    "FinalEvent",
    "Guardrail",
    "Guards",
    "JsonlAuditLog",
    "Limits",
    "MCPServer",
    "MCPTool",
    "MemoryAuditLog",
    "ModelCallEvent",
    "PendingApproval",
    "RateLimiter",
    "RemoteA2A",
    "RunContext",
    "RunOptions",
    "RunResult",
    "StopReason",
    "TextDeltaEvent",
    "Thread",
    "Tool",
    "ToolCallEvent",
    "ToolResultEvent",
    "a2a_agent",
    "ask_later",
    "tool",
]


def __getattr__(name: str) -> Any:
    """The step seam's names, once exported here, from their home
    :mod:`foreperson.agents.steps` (kept importable from here; not re-exported)."""
    steps = importlib.import_module(f"{__name__}.steps")
    if name in steps.__all__:
        return getattr(steps, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
