"""Architectures: how an agent turns model calls and tool calls into an answer.
``ReAct`` is the default; seed 001's ``Supervisor`` builds on it (its delegate tools
are ordinary tool calls, so they run in parallel for free)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ._events import AgentEvent
from ._state import RunContext

__all__ = ["Architecture", "ReAct"]


@runtime_checkable
class Architecture(Protocol):
    """Runs one agent run, step by step, through a :class:`RunContext`.

    An architecture must end the run (``ctx.end(...)``) before it returns; the agent
    turns the context into a :class:`~foreperson.agents.RunResult` and emits the final
    event. It builds the run from the context's steps (``ctx.call_model()``,
    ``ctx.run_tool_calls(...)``, ``ctx.accept_final(...)``, ``ctx.step(...)``,
    ``ctx.spawn(...)``, ``ctx.run_agent(...)``), which go through the run's step runner,
    so a journal can record and replay them; its own code between steps runs again on
    replay and must be deterministic.
    """

    def run(self, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        """Drive the run.

        Args:
            ctx: the run: conversation, tools, guards, usage.

        Yields:
            The run's events, except the final one.
        """
        ...


@dataclass(frozen=True)
class ReAct:
    """Reason and act: call the model; if it asks for tools, run them all (concurrently)
    and call it again with the results; stop at its first answer without tool calls.

    Seed 001: the tool dispatch of one turn is one anyio task group over all its calls.
    The agent's :class:`~foreperson.agents.Limits` are checked before every model call;
    a step cut short by the run's deadline ends the run (``"max_duration"``).
    """

    async def run(self, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        """See :meth:`Architecture.run`.

        Raises:
            ModelError: a model call failed.
            OutputValidationError: the answer never matched ``output_type``.
        """
        while not ctx.stopped:
            reached = ctx.limit_reached()
            if reached is not None:
                ctx.end(reached[0], detail=reached[1])
                return
            async for event in ctx.call_model():
                yield event
            if ctx.stopped:
                return
            response = ctx.last_response
            assert response is not None
            if response.tool_calls:
                async for event in ctx.run_tool_calls(response.tool_calls):
                    yield event
            else:
                await ctx.accept_final(response)
