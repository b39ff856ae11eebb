"""``Agent``: instructions, a model, tools, an architecture and guards (seed 001)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable, Iterable, Sequence
from contextlib import aclosing
from dataclasses import replace
from typing import Any, Generic, cast

import anyio
from pydantic import BaseModel
from typing_extensions import TypeVar

from ..errors import AccessDenied, ConfigurationError, describe, first_error
from ..models import Message, Model, ModelSettings, SystemMessage, UserMessage, infer_model
from ._durable import DurableRuntime
from ._events import AgentEvent, FinalEvent, RunResult
from ._guards import Guards
from ._mcp import MCPServer, run_toolsets
from ._react import Architecture, ReAct
from ._state import (
    DEFAULT_OPTIONS,
    RunContext,
    RunOptions,
    nested_run_id,
    record_unfinished,
)
from ._steps import ENGINE as STEP_ENGINE
from ._steps import RunParked
from ._telemetry import end_run, run_span
from ._thread import Thread, continued
from ._tools import Tool, as_tool

__all__ = ["Agent"]

OutputT = TypeVar("OutputT")
ResultT = TypeVar("ResultT", bound=RunResult[Any], default=RunResult[OutputT], covariant=True)
"""What the entry points return: :class:`RunResult`, or a subclass an agent kind narrows
it to (a :class:`~foreperson.teams.Team` returns a ``TeamResult``)."""

class Agent(Generic[OutputT, ResultT]):
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
        pinned_user: the only user whose runs may run this agent (seed 001, tenant
            pinning: a spawned worker is pinned to the user of the run that spawned
            it); a run of another user, or an anonymous one, that reaches it raises
            :class:`~foreperson.errors.AccessDenied`. None (default): any user's.
        toolsets: sources of more tools, listed when a run starts
            (:class:`~foreperson.agents.MCPServer`: an MCP server's tools); each
            becomes an ordinary tool of the run. A run that cannot start or list one
            raises :class:`~foreperson.errors.RunError`; an MCP tool with the name of
            another tool raises ConfigurationError when the run starts.

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
        pinned_user: str | None = None,
        toolsets: Iterable[MCPServer] = (),
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
        self.output_type: type[BaseModel] | None = output_type
        self.name = name
        self.guards = guards if guards is not None else Guards()
        self.settings = settings if settings is not None else ModelSettings()
        self.pinned_user = pinned_user
        self.toolsets: tuple[MCPServer, ...] = tuple(toolsets)
        for toolset in self.toolsets:
            if not isinstance(toolset, MCPServer):
                raise ConfigurationError(
                    f"agent {name!r}: toolsets= takes MCPServer objects, got {toolset!r}")

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
            ConfigurationError: an unknown argument name.
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
            "pinned_user": self.pinned_user,
            "toolsets": self.toolsets,
        }
        unknown = set(changes) - set(arguments)
        if unknown:
            raise ConfigurationError(
                f"agent {self.name!r}: Agent.clone() got unknown arguments {sorted(unknown)}; "
                f"it takes {sorted(arguments)}")
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
        options: RunOptions | None = None,
    ) -> RunContext:
        """The state a run starts from: the system message (unless the history already
        has one), the history, then the prompt.

        Args:
            prompt: the user's message.
            user_id: the user the run serves (tenant pinning); a nested run defaults to
                its parent's user.
            run_id: the run's id (default one from ``options.ids``; for a nested run one
                derived from its parent and step path; a journal replays a run given
                the recorded id).
            message_history: an earlier conversation to continue.
            streaming: stream model replies (a nested run also streams when its
                outermost run streams to an event sink).
            options: step runner, clock, ids, parent, event sink (default
                :class:`RunOptions`).

        Returns:
            A fresh :class:`RunContext`.

        Raises:
            ConfigurationError: a nested run started from another thread than its
                parent's (use ``await agent.run(...)`` in an async tool).
            AccessDenied: the agent is pinned to another user than the run's, or a
                nested run names another user than its parent's (seed 001: tenant
                isolation holds across a run and every run nested in it).
        """
        options = options if options is not None else DEFAULT_OPTIONS
        parent = options.parent
        if parent is not None:
            if parent.context is not None:
                parent.context.check_thread()
            if user_id is None:
                user_id = parent.user_id
            elif user_id != parent.user_id:
                raise AccessDenied(f"run {parent.root_run_id} (which agent {self.name!r} "
                                   "would run nested in)", user_id=user_id,
                                   owner=parent.user_id, action="run a nested agent in")
            streaming = streaming or (parent.streaming and options.events is not None)
            run_id = run_id or nested_run_id(parent, self.name)
        if self.pinned_user is not None and user_id != self.pinned_user:
            raise AccessDenied(f"agent {self.name!r}", user_id=user_id, owner=self.pinned_user,
                               action="run")
        history = list(message_history or ())
        messages: list[Message] = []
        if not history or not isinstance(history[0], SystemMessage):
            messages.append(SystemMessage(self.instructions))
        messages.extend(history)
        messages.append(UserMessage(prompt))
        return RunContext(
            agent=self,
            run_id=run_id or options.ids(),
            user_id=user_id,
            messages=messages,
            tools=dict(self.tools),
            streaming=streaming,
            options=options,
            engine=STEP_ENGINE,
        )

    async def run(
        self,
        prompt: str,
        *,
        thread: Thread | None = None,
        user_id: str | None = None,
        run_id: str | None = None,
        message_history: Sequence[Message] | None = None,
        options: RunOptions | None = None,
        runtime: DurableRuntime | None = None,
    ) -> ResultT:
        """Run the agent on one prompt until it answers or a guard stops it.

        Args:
            prompt: the user's message.
            thread: a conversation to continue (:class:`Thread`); the run's messages
                are left in it (``thread`` or ``message_history``, not both).
            user_id: the user the run serves; tools see it through ``RunContext``.
            run_id: the run's id (default a new one from ``options.ids``). With a
                journaled step runner, running again with the same id replays the
                recorded steps.
            message_history: an earlier conversation to continue (e.g.
                ``previous.messages``).
            options: the run's seams (:class:`RunOptions`): the step runner (e.g.
                ``JournaledSteps(store)`` to record and replay every model call, tool
                call and approval), the clock, the id source, the parent run (from
                ``ctx.nested()`` inside a tool) and an event sink. Default: steps run
                inline, system clock, random ids.
            runtime: a durable runtime (``foreperson.runtime``: ``InMemoryRuntime()``,
                ``SqliteRuntime(path)``, ``PostgresRuntime(dsn)``): the run is recorded
                under ``run_id`` for ``user_id``, every model call, tool call, approval,
                spawn and delegation is journaled in the runtime's store, and workers,
                nested teams and spawned workers inherit it. Running again with the same
                ``run_id`` (or :meth:`resume`) returns each finished step's result
                without executing it again and runs only the unfinished ones. With a
                runtime, ``options`` gives only the clock, ids and event sink.

        Returns:
            The result: ``output`` (text or the validated ``output_type`` object),
            ``text``, ``messages``, ``usage``, ``stop_reason`` and ``finish_reason``. A
            limit or guardrail ends the run with a result, never an exception; so does a
            journaled run whose tool call waits for a human (``"awaiting_approval"``,
            ``pending``).

        Raises:
            AccessDenied: the ``run_id`` belongs to another user, or a pinned worker was
                reached from another user's (or an anonymous) run.
            RunBusy: another live process runs ``run_id`` now (with a runtime).
            ModelError: a model call failed for good.
            OutputValidationError: the answer never matched ``output_type``.
            JournalDivergence: a journaled replay asked something the journal did not
                record under that step (the code or the prompt changed).
            ConfigurationError: a guardrail or approval handler returned the wrong
                type, or an unregistered stop reason or audit kind was used.
            Exception: what a hook, guardrail or approval handler raised.
        """
        history = continued(thread, message_history)
        if runtime is not None:
            result = await self._durable(runtime, prompt, user_id=user_id, run_id=run_id,
                                         message_history=history, options=options)
        else:
            result = await self._run_here(prompt, user_id=user_id, run_id=run_id,
                                          message_history=history, options=options)
        return self._finished(result, thread)

    async def _run_here(self, prompt: str, *, user_id: str | None, run_id: str | None,
                        message_history: Sequence[Message] | None,
                        options: RunOptions | None) -> RunResult[Any]:
        """The run in this process, with the seams of ``options``."""
        ctx = self.new_context(prompt, user_id=user_id, run_id=run_id,
                               message_history=message_history,
                               options=options if options is not None else DEFAULT_OPTIONS)
        result: RunResult[Any] | None = None
        events = self._events(ctx, prompt)
        async with aclosing(events):
            async for event in events:
                if isinstance(event, FinalEvent):
                    result = event.result
        assert result is not None
        return result

    def _finished(self, result: RunResult[Any], thread: Thread | None) -> ResultT:
        """``result`` as this kind of agent returns it (:meth:`shape_result`), recorded
        in ``thread``."""
        if thread is not None:
            thread.record(result)
        return cast(ResultT, self.shape_result(result))

    def shape_result(self, result: RunResult[Any]) -> RunResult[Any]:
        """The result an entry point returns, from a run's: itself here; a kind of
        agent that returns a richer result (a :class:`~foreperson.teams.Team`'s
        ``TeamResult``) overrides it, so its ``run``, ``run_sync``, ``resume``,
        ``resume_sync`` and ``stream`` need no override of their own.

        Args:
            result: what the run returned.

        Returns:
            The result to return.
        """
        return result

    async def _durable(
        self,
        runtime: DurableRuntime,
        prompt: str | None,
        *,
        user_id: str | None,
        run_id: str | None,
        message_history: Sequence[Message] | None,
        options: RunOptions | None,
    ) -> RunResult[Any]:
        """The run inside a runtime's session."""
        async with runtime.open_run(self, prompt=prompt, run_id=run_id, user_id=user_id,
                                    message_history=message_history,
                                    options=options) as session:
            result = await self._run_here(session.prompt, user_id=session.user_id,
                                          run_id=session.run_id,
                                          message_history=session.message_history,
                                          options=session.options)
            session.result = result
        return result

    async def resume(
        self,
        run_id: str,
        *,
        runtime: DurableRuntime,
        user_id: str | None = None,
        options: RunOptions | None = None,
    ) -> ResultT:
        """Continue a durable run from its journal: every finished step (model call,
        tool call, approval, spawn, delegation, at every level of nesting) returns its
        recorded result without being executed again, and only the unfinished ones run
        (seed 001: completed worker runs return cached results; only the un-completed
        work re-executes). A run that ended already replays to the same result.

        Args:
            run_id: the run.
            runtime: the runtime whose store holds it.
            user_id: the user resuming it: must be the one it belongs to.
            options: the clock, ids and event sink (as :meth:`run` with a runtime).

        Returns:
            As :meth:`run`.

        Raises:
            AccessDenied: the run belongs to another user (or to a user, and
                ``user_id`` is None).
            RunBusy: another live process runs it now.
            ConfigurationError: no such run in this runtime, or it is another agent's.
            JournalDivergence: the code or the inputs changed a step that was recorded:
                the error names the step and what differs.
            UnknownStepVersion: the journal was written in a format this foreperson
                cannot read.
            ModelError, OutputValidationError: as :meth:`run`.
        """
        return self._finished(await self._durable(runtime, None, user_id=user_id,
                                                  run_id=run_id, message_history=None,
                                                  options=options), None)

    def resume_sync(
        self,
        run_id: str,
        *,
        runtime: DurableRuntime,
        user_id: str | None = None,
        options: RunOptions | None = None,
    ) -> ResultT:
        """:meth:`resume` for code without an event loop (see :meth:`run_sync`).

        Raises:
            RuntimeError: called from inside a running event loop.
            AccessDenied, RunBusy, ConfigurationError, JournalDivergence: as
                :meth:`resume`.
        """
        self._refuse_running_loop("resume_sync")
        from ..models import run_blocking

        async def run() -> ResultT:
            return await self.resume(run_id, runtime=runtime, user_id=user_id,
                                     options=options)

        return run_blocking(run, close_at_exit=self.model)

    def _refuse_running_loop(self, name: str) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        raise RuntimeError(
            f"agent {self.name!r}: {name}() cannot be called from a running event loop; "
            f"use `await agent.{name.removesuffix('_sync')}(...)` instead")

    def run_sync(
        self,
        prompt: str,
        *,
        thread: Thread | None = None,
        user_id: str | None = None,
        run_id: str | None = None,
        message_history: Sequence[Message] | None = None,
        options: RunOptions | None = None,
        runtime: DurableRuntime | None = None,
    ) -> ResultT:
        """:meth:`run` for code without an event loop (scripts, the CLI, worker threads).

        The run goes to one long-lived event loop in a background thread, shared by every
        blocking call of the process (:func:`foreperson.models.run_blocking`), so the
        model's client and its pooled connections are made once and reused by later
        calls, from any thread. They are closed at interpreter exit (or by
        :func:`foreperson.models.shutdown_blocking_loop`). Context variables of the
        calling thread are visible to the run; an interrupted wait (Ctrl-C) cancels it.

        Args:
            prompt: as :meth:`run`.
            thread: as :meth:`run`.
            user_id: as :meth:`run`.
            run_id: as :meth:`run`.
            message_history: as :meth:`run`.
            options: as :meth:`run`.
            runtime: as :meth:`run`.

        Returns:
            As :meth:`run`.

        Raises:
            RuntimeError: called from inside a running event loop (use
                ``await agent.run(...)`` there).
            ModelError, OutputValidationError: as :meth:`run`.
        """
        from ..models import run_blocking

        self._refuse_running_loop("run_sync")

        async def run() -> ResultT:
            return await self.run(prompt, thread=thread, user_id=user_id, run_id=run_id,
                                  message_history=message_history, options=options,
                                  runtime=runtime)

        return run_blocking(run, close_at_exit=self.model)

    async def stream(
        self,
        prompt: str,
        *,
        thread: Thread | None = None,
        user_id: str | None = None,
        run_id: str | None = None,
        message_history: Sequence[Message] | None = None,
        options: RunOptions | None = None,
        runtime: DurableRuntime | None = None,
    ) -> AsyncGenerator[AgentEvent | Any, None]:
        """Run the agent and yield its events as they happen; model text is streamed.

        The events of runs nested in this one (a worker run from inside a tool, started
        with ``options=ctx.nested()``) come through too, while they run, tagged with
        their own run id and agent, their ``parent_run_id``, ``parent_path`` and
        ``level`` (>= 1); this run's own events have level 0 and its
        :class:`FinalEvent` comes last. The run goes on in a task of its own; leaving
        the iteration early cancels it. Wrap it in ``contextlib.aclosing`` if you may
        stop iterating early.

        Args:
            prompt: as :meth:`run`.
            thread: as :meth:`run` (the run's messages are left in it at its
                :class:`FinalEvent`).
            user_id: as :meth:`run`.
            run_id: as :meth:`run`.
            message_history: as :meth:`run`.
            options: as :meth:`run`. With ``options.events`` set (a nested stream, or
                a sink of your own), this run's events are yielded and also sent to
                that sink, and nested runs' events go only to the sink.
            runtime: as :meth:`run`; replayed steps' events come through marked
                ``replayed``.

        Yields:
            :class:`TextDeltaEvent`, :class:`ModelCallEvent`, :class:`ToolCallEvent`,
            :class:`ToolResultEvent`, and last a :class:`FinalEvent` with the result;
            each tagged with the run id and the agent's name.

        Raises:
            As :meth:`run`.
        """
        last: Any = None
        events = self._stream(prompt, user_id=user_id, run_id=run_id,
                              message_history=continued(thread, message_history),
                              options=options, runtime=runtime)
        async with aclosing(events):
            async for event in events:
                last = event
                yield event
        if thread is not None and isinstance(last, FinalEvent):
            thread.record(last.result)

    async def _stream(  # noqa: C901 - one branch per way a streamed run ends (left early, parked, failed)
        self, prompt: str, *, user_id: str | None, run_id: str | None,
        message_history: Sequence[Message] | None, options: RunOptions | None,
        runtime: DurableRuntime | None,
    ) -> AsyncGenerator[AgentEvent, None]:
        """:meth:`stream` without the thread."""
        if runtime is not None:
            async with runtime.open_run(self, prompt=prompt, run_id=run_id, user_id=user_id,
                                        message_history=message_history,
                                        options=options) as session:
                events = self._stream(session.prompt, user_id=session.user_id,
                                      run_id=session.run_id,
                                      message_history=session.message_history,
                                      options=session.options, runtime=None)
                async with aclosing(events):
                    async for event in events:
                        if isinstance(event, FinalEvent) and event.level == 0:
                            session.result = event.result
                        yield event
            return
        options = options if options is not None else DEFAULT_OPTIONS
        if options.events is not None:
            ctx = self.new_context(prompt, user_id=user_id, run_id=run_id,
                                   message_history=message_history, streaming=True,
                                   options=options)
            events = self._events(ctx, prompt)
            async with aclosing(events):
                async for event in events:
                    yield event
            return
        # the run (and every run nested in it) sends its events into a channel that this
        # generator drains, so nested runs' events arrive while they run
        send, receive = anyio.create_memory_object_stream[Any](0)
        ctx = self.new_context(prompt, user_id=user_id, run_id=run_id,
                               message_history=message_history, streaming=True,
                               options=replace(options, events=send.send))
        failure: list[Exception] = []

        async def produce() -> None:
            async with send:
                try:
                    produced = self._events(ctx, prompt)
                    async with aclosing(produced):
                        async for _ in produced:
                            pass
                except Exception as exc:  # noqa: BLE001 - handed to the consumer below
                    failure.append(exc)

        left_early = False
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(produce)
                try:
                    async with receive:
                        async for event in receive:
                            yield event
                except GeneratorExit:  # the consumer stopped iterating: cancel the run
                    left_early = True
                finally:
                    group.cancel_scope.cancel()
        except BaseExceptionGroup as errors:
            raise first_error(errors) from None
        if failure and not left_early:
            raise failure[0]

    async def _events(self, ctx: RunContext, prompt: str) -> AsyncGenerator[AgentEvent, None]:
        """The run's own events, with its toolsets' tools (held open by the outermost
        run until it ends)."""
        async with run_toolsets(ctx, self.toolsets):
            events = self._run_events(ctx, prompt)
            async with aclosing(events):
                async for event in events:
                    yield event

    async def _run_events(self, ctx: RunContext, prompt: str) -> AsyncGenerator[AgentEvent, None]:  # noqa: C901 - the run's start, guardrails, architecture and every way it ends, in order
        """The run's own events, each also published to the run's event sink."""
        started = time.perf_counter()
        limits = self.guards.limits
        if limits.max_duration_s is not None:
            ctx.deadline = anyio.current_time() + limits.max_duration_s
        parent = ctx.parent
        nesting = {} if parent is None else {
            "parent_run_id": parent.run_id, "parent_path": parent.path, "level": parent.level}
        ctx.audit("run_start", model=self.model.name, prompt=prompt, tools=list(ctx.tools),
                  **nesting)
        run_span(ctx, prompt)
        try:
            reason: str | None = None
            with ctx.deadline_scope() as scope:
                reason = await ctx.check_guardrails(self.guards.input_guardrails, prompt)
            if scope.cancelled_caught:
                ctx.end_by_deadline()
            elif reason is not None:
                ctx.end("input_guardrail", detail=reason)
            else:
                async for event in self.architecture.run(ctx):
                    if ctx.events is not None:
                        await ctx.events(event)
                    yield event
                if not ctx.stopped:
                    raise RuntimeError(
                        f"architecture {type(self.architecture).__name__} returned without "
                        "ending the run (ctx.end(...))"
                    )
        except RunParked as parked:
            if ctx.parent is not None:      # the outermost run ends it, with a result
                ctx.audit("run_end", stop_reason="awaiting_approval", usage=_usage(ctx),
                          duration_s=round(time.perf_counter() - started, 6))
                end_run(ctx)
                raise
            ctx.park(parked.pending)
        except BaseException as exc:
            record_unfinished(ctx)
            ctx.audit("run_end", error=_describe(exc), usage=_usage(ctx),
                      duration_s=round(time.perf_counter() - started, 6))
            end_run(ctx, exc if isinstance(exc, Exception) else None)
            raise
        end_run(ctx)
        result = ctx.to_result()
        ctx.audit("run_end", stop_reason=ctx.stop_reason, detail=ctx.detail, usage=_usage(ctx),
                  duration_s=round(time.perf_counter() - started, 6))
        final = FinalEvent(ctx.run_id, self.name, result, **ctx.tags)
        if ctx.events is not None:
            await ctx.events(final)
        yield final


def _describe(exc: BaseException) -> str:
    """An exception as the audit log's ``error``."""
    if isinstance(exc, anyio.get_cancelled_exc_class()):
        return ("Cancelled: the run was cancelled (by its caller, or its stream's consumer "
                "stopped iterating)")
    return describe(exc)


def _usage(ctx: RunContext) -> dict[str, int]:
    usage = ctx.usage
    return {
        "model_calls": usage.model_calls,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "tool_calls": usage.tool_calls,
    }
