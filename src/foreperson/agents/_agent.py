"""``Agent``: instructions, a model, tools, an architecture and guards (seed 001)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import aclosing
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from ..errors import ConfigurationError
from ..models import Message, Model, ModelSettings, SystemMessage, UserMessage, infer_model
from ._context import RunContext
from ._events import AgentEvent, FinalEvent, RunResult
from ._guards import Guards
from ._react import Architecture, ReAct
from ._tools import Tool, as_tool

__all__ = ["Agent"]

OutputT = TypeVar("OutputT")


class Agent(Generic[OutputT]):
    """An LLM that follows instructions, calls tools, and answers: text, or a validated
    pydantic object when ``output_type`` is given.

    Seed 001: ``Agent("instructions", model="claude-opus-4-7", tools=[search])``; the
    architecture decides how model calls and tool calls combine (default
    :class:`ReAct`); guards (limits, permissions, hooks, approval, guardrails, rate
    limiter, audit log) live in one :class:`Guards` value so a template agent can hand
    them to its clones.

    An agent holds no per-run state: one agent may serve many concurrent runs.

    Args:
        instructions: the system message: all the model knows about its job.
        model: a :class:`~foreperson.models.Model`, or a model string
            (``"gpt-4o"``, ``"claude-opus-4-7"``, ``"openai:llama3.1"``; see
            :func:`~foreperson.models.infer_model`).
        tools: functions (sync or async) or :class:`Tool` objects the model may call.
        architecture: default :class:`ReAct`.
        output_type: a pydantic model the final answer must match; ``result.output``
            is then a validated instance. None: the answer is text.
        name: the agent's name, in events, results and the audit log (default
            ``"agent"``).
        guards: default ``Guards()`` (20 model calls per run, nothing else).
        settings: sampling settings for every model call.

    Raises:
        ConfigurationError: a bad model string, a missing API key, two tools with one
            name, or an ``output_type`` that is not a pydantic model.
        MissingDependency: the model's SDK is not installed.
    """

    def __init__(
        self,
        instructions: str,
        *,
        model: Model | str,
        tools: Iterable[Tool | Callable[..., Any]] = (),
        architecture: Architecture | None = None,
        output_type: type[OutputT] | None = None,
        name: str = "agent",
        guards: Guards | None = None,
        settings: ModelSettings | None = None,
    ) -> None:
        if not isinstance(instructions, str):
            raise ConfigurationError(
                f"agent {name!r}: instructions must be a string, got {type(instructions).__name__}"
            )
        if output_type is not None and not (
            isinstance(output_type, type) and issubclass(output_type, BaseModel)
        ):
            raise ConfigurationError(
                f"agent {name!r}: output_type must be a pydantic BaseModel subclass, "
                f"got {output_type!r}"
            )
        self.instructions = instructions
        self.model: Model = infer_model(model)
        self.tools: dict[str, Tool] = {}
        for item in tools:
            made = as_tool(item)
            if made.name in self.tools:
                raise ConfigurationError(
                    f"agent {name!r}: two tools are named {made.name!r}; rename one with "
                    "@tool(name=...)"
                )
            self.tools[made.name] = made
        self.architecture: Architecture = architecture if architecture is not None else ReAct()
        self.output_type: type[BaseModel] | None = output_type  # type: ignore[assignment]
        self.name = name
        self.guards = guards if guards is not None else Guards()
        self.settings = settings if settings is not None else ModelSettings()

    def __repr__(self) -> str:
        return (f"Agent(name={self.name!r}, model={self.model.name!r}, "
                f"tools={list(self.tools)!r})")

    def clone(self, **changes: Any) -> Agent[Any]:
        """A new agent with this one's model, tools, architecture, output type, guards
        and settings, some replaced.

        Seed 001: a spawned worker clones its template's model, tools and guards; the
        rate limiter and audit log objects are shared, so the limit and the log cover
        the template and all its clones.

        Args:
            **changes: constructor arguments to replace (``instructions=``, ``name=``,
                ``tools=``, ``guards=``, ...).

        Returns:
            The new agent.

        Raises:
            TypeError: an unknown argument name.
        """
        arguments: dict[str, Any] = {
            "instructions": self.instructions,
            "model": self.model,
            "tools": list(self.tools.values()),
            "architecture": self.architecture,
            "output_type": self.output_type,
            "name": self.name,
            "guards": self.guards,
            "settings": self.settings,
        }
        unknown = set(changes) - set(arguments)
        if unknown:
            raise TypeError(f"Agent.clone() got unknown arguments: {sorted(unknown)}")
        arguments.update(changes)
        instructions = arguments.pop("instructions")
        return Agent(instructions, **arguments)

    def new_context(
        self,
        prompt: str,
        *,
        user_id: str | None = None,
        run_id: str | None = None,
        message_history: Sequence[Message] | None = None,
        streaming: bool = False,
    ) -> RunContext:
        """The state a run starts from: the system message (unless the history already
        has one), the history, then the prompt.

        Args:
            prompt: the user's message.
            user_id: the user the run serves (tenant pinning), or None.
            run_id: the run's id (default a new random one; a journal replays with the
                recorded one).
            message_history: an earlier conversation to continue.
            streaming: stream model replies.

        Returns:
            A fresh :class:`RunContext`.
        """
        history = list(message_history or ())
        messages: list[Message] = []
        if not history or not isinstance(history[0], SystemMessage):
            messages.append(SystemMessage(self.instructions))
        messages.extend(history)
        messages.append(UserMessage(prompt))
        return RunContext(
            agent=self,
            run_id=run_id or uuid.uuid4().hex,
            user_id=user_id,
            messages=messages,
            tools=dict(self.tools),
            streaming=streaming,
        )

    async def run(
        self,
        prompt: str,
        *,
        user_id: str | None = None,
        run_id: str | None = None,
        message_history: Sequence[Message] | None = None,
    ) -> RunResult[OutputT]:
        """Run the agent on one prompt until it answers or a guard stops it.

        Args:
            prompt: the user's message.
            user_id: the user the run serves; tools see it through ``RunContext``.
            run_id: the run's id (default a new random one).
            message_history: an earlier conversation to continue (e.g.
                ``previous.messages``).

        Returns:
            The result: ``output`` (text or the validated ``output_type`` object),
            ``messages``, ``usage`` and ``stop_reason``. A limit or guardrail ends the
            run with a result, never an exception.

        Raises:
            ModelError: a model call failed for good.
            OutputValidationError: the answer never matched ``output_type``.
            Exception: what a hook, guardrail or approval handler raised.
        """
        result: RunResult[Any] | None = None
        events = self._events(prompt, user_id, run_id, message_history, streaming=False)
        async with aclosing(events):
            async for event in events:
                if isinstance(event, FinalEvent):
                    result = event.result
        assert result is not None
        return result

    def run_sync(
        self,
        prompt: str,
        *,
        user_id: str | None = None,
        run_id: str | None = None,
        message_history: Sequence[Message] | None = None,
    ) -> RunResult[OutputT]:
        """:meth:`run` for code without an event loop (scripts, the CLI, worker threads).

        The run goes to one long-lived event loop in a background thread, shared by every
        blocking call of the process (:func:`foreperson.models.run_blocking`), so the
        model's client and its pooled connections are made once and reused by later
        calls, from any thread. They are closed at interpreter exit (or by
        :func:`foreperson.models.shutdown_blocking_loop`). Context variables of the
        calling thread are visible to the run; an interrupted wait (Ctrl-C) cancels it.

        Args:
            prompt, user_id, run_id, message_history: as :meth:`run`.

        Returns:
            As :meth:`run`.

        Raises:
            RuntimeError: called from inside a running event loop (use
                ``await agent.run(...)`` there).
            ModelError, OutputValidationError: as :meth:`run`.
        """
        from ..models import run_blocking

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError(
                f"agent {self.name!r}: run_sync() cannot be called from a running event loop; "
                "use `await agent.run(...)` instead"
            )

        async def run() -> RunResult[OutputT]:
            return await self.run(
                prompt, user_id=user_id, run_id=run_id, message_history=message_history
            )

        return run_blocking(run, close_at_exit=self.model)

    async def stream(
        self,
        prompt: str,
        *,
        user_id: str | None = None,
        run_id: str | None = None,
        message_history: Sequence[Message] | None = None,
    ) -> AsyncIterator[AgentEvent]:
        """Run the agent and yield its events as they happen; model text is streamed.

        Wrap it in ``contextlib.aclosing`` if you may stop iterating early.

        Args:
            prompt, user_id, run_id, message_history: as :meth:`run`.

        Yields:
            :class:`TextDeltaEvent`, :class:`ModelCallEvent`, :class:`ToolCallEvent`,
            :class:`ToolResultEvent`, and last a :class:`FinalEvent` with the result;
            each tagged with the run id and the agent's name.

        Raises:
            As :meth:`run`.
        """
        events = self._events(prompt, user_id, run_id, message_history, streaming=True)
        async with aclosing(events):
            async for event in events:
                yield event

    async def _events(
        self,
        prompt: str,
        user_id: str | None,
        run_id: str | None,
        message_history: Sequence[Message] | None,
        *,
        streaming: bool,
    ) -> AsyncIterator[AgentEvent]:
        ctx = self.new_context(
            prompt, user_id=user_id, run_id=run_id, message_history=message_history,
            streaming=streaming,
        )
        started = time.perf_counter()
        ctx.audit("run_start", model=self.model.name, prompt=prompt, tools=list(ctx.tools))
        try:
            reason = await ctx.check_guardrails(self.guards.input_guardrails, prompt)
            if reason is not None:
                ctx.end("input_guardrail", detail=reason)
            else:
                async for event in self.architecture.run(ctx):
                    yield event
                if not ctx.stopped:
                    raise RuntimeError(
                        f"architecture {type(self.architecture).__name__} returned without "
                        "ending the run (ctx.end(...))"
                    )
        except BaseException as exc:
            ctx.audit("run_end", error=f"{type(exc).__name__}: {exc}", usage=_usage(ctx),
                      duration_s=round(time.perf_counter() - started, 6))
            raise
        assert ctx.stop_reason is not None
        result: RunResult[Any] = RunResult(
            output=ctx.output if ctx.stop_reason == "completed" else None,
            text=ctx.last_text(),
            messages=ctx.messages,
            usage=ctx.usage,
            stop_reason=ctx.stop_reason,
            run_id=ctx.run_id,
            agent=self.name,
            detail=ctx.detail,
        )
        ctx.audit("run_end", stop_reason=ctx.stop_reason, detail=ctx.detail, usage=_usage(ctx),
                  duration_s=round(time.perf_counter() - started, 6))
        yield FinalEvent(ctx.run_id, self.name, result)


def _usage(ctx: RunContext) -> dict[str, int]:
    usage = ctx.usage
    return {
        "model_calls": usage.model_calls,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "tool_calls": usage.tool_calls,
    }
