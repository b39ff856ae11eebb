"""One run's state and the steps an architecture is built from: call the model, run a
turn's tool calls (concurrently, results in call order), accept a final answer."""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import aclosing, nullcontext
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from pydantic import ValidationError

from ..errors import ModelError, OutputValidationError
from ..models import (
    Message,
    ModelRequestParameters,
    ModelResponse,
    TextDelta,
    ToolCall,
    ToolDefinition,
    ToolReturn,
    Usage,
    UserMessage,
)
from ._events import (
    AgentEvent,
    ModelCallEvent,
    StopReason,
    TextDeltaEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from ._guards import Approval, AuditEntry, Guards, utc_now
from ._tools import Tool, format_validation_error, result_text

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ["RunContext"]

logger = logging.getLogger("foreperson.agents")

async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


def _first_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first real exception of a task group's group (cancellations last)."""
    leaves: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                walk(inner)
        else:
            leaves.append(exc)

    walk(group)
    cancelled = anyio.get_cancelled_exc_class()
    for exc in leaves:
        if not isinstance(exc, cancelled):
            return exc
    return leaves[0] if leaves else group


def _strip_fences(text: str) -> str:
    """``text`` without a surrounding Markdown code fence (some local models add one)."""
    stripped = text.strip()
    if stripped.startswith("```") and stripped.endswith("```") and "\n" in stripped:
        return stripped[stripped.index("\n") + 1 : -3].strip()
    return stripped


@dataclass(eq=False)
class RunContext:
    """The state of one run, and the steps architectures are built from.

    A tool that declares a parameter annotated ``RunContext`` receives it (for the run
    id, the user id, or to end the run early with :meth:`end`).

    Attributes:
        agent: the agent being run.
        run_id: the run's id.
        user_id: the user the run serves (tenant pinning), or None.
        messages: the conversation so far; architectures append to it.
        tools: the tools of this run by name; an architecture may add some.
        streaming: whether model replies are streamed (``Agent.stream``).
        usage: what the run has used so far.
        turn: model calls made so far.
        stop_reason: set by :meth:`end`; None while the run goes on.
        detail: a note on the stop, or None.
        output: the final output, once completed.
        last_response: the model's latest reply.
        output_retries: answers sent back for not matching ``output_type`` so far.
    """

    agent: Agent[Any]
    run_id: str
    user_id: str | None
    messages: list[Message]
    tools: dict[str, Tool]
    streaming: bool = False
    usage: Usage = field(default_factory=Usage)
    turn: int = 0
    stop_reason: StopReason | None = None
    detail: str | None = None
    output: Any = None
    last_response: ModelResponse | None = None
    output_retries: int = 0

    @property
    def guards(self) -> Guards:
        """The agent's guards."""
        return self.agent.guards

    @property
    def agent_name(self) -> str:
        """The agent's name."""
        return self.agent.name

    @property
    def stopped(self) -> bool:
        """True once :meth:`end` was called."""
        return self.stop_reason is not None

    def end(
        self, stop_reason: StopReason, *, output: Any = None, detail: str | None = None
    ) -> None:
        """End the run after the current step.

        Args:
            stop_reason: why.
            output: the final output (for ``"completed"``).
            detail: a note for the result, e.g. which limit.
        """
        if self.stop_reason is None:
            self.stop_reason = stop_reason
            self.output = output
            self.detail = detail

    def audit(self, kind: Any, **data: Any) -> None:
        """Write an entry to the audit log, if there is one."""
        log = self.guards.audit_log
        if log is not None:
            entry = AuditEntry(kind, self.run_id, self.agent_name, self.user_id, utc_now(), data)
            log.record(entry)

    def limit_reached(self) -> tuple[StopReason, str] | None:
        """The cap that forbids another model call, if any (checked before each call).

        Returns:
            ``(stop_reason, detail)``, or None when the run may go on.
        """
        limits = self.guards.limits
        if limits.max_turns is not None and self.turn >= limits.max_turns:
            return "max_turns", f"reached max_turns={limits.max_turns} model calls"
        if limits.max_tokens is not None and self.usage.total_tokens >= limits.max_tokens:
            return "max_tokens", (
                f"used {self.usage.total_tokens} tokens, max_tokens={limits.max_tokens}"
            )
        return None

    def tool_definitions(self) -> list[ToolDefinition]:
        """The tools offered to the model: this run's tools that the guards permit."""
        return [t.definition for t in self.tools.values() if self.guards.permits(t.name)]

    # --- model ---------------------------------------------------------------------

    async def call_model(self) -> AsyncIterator[AgentEvent]:
        """Ask the model for its next reply and append it to the conversation.

        Waits for the rate limiter first; streams text when ``streaming``. Tool calls
        without an id get ``call_<turn>_<index>``.

        Yields:
            :class:`TextDeltaEvent` (streaming only), then one :class:`ModelCallEvent`.
            Afterwards ``last_response`` holds the reply.

        Raises:
            ModelError: the model call failed (after the model's own retries).
        """
        self.turn += 1
        turn = self.turn
        agent = self.agent
        params = ModelRequestParameters(
            tools=self.tool_definitions(), output_type=agent.output_type, settings=agent.settings
        )
        if self.guards.rate_limiter is not None:
            await self.guards.rate_limiter.acquire()
        started = time.perf_counter()
        response: ModelResponse | None = None
        try:
            if self.streaming:
                stream = agent.model.request_stream(self.messages, params)
                closing = aclosing(stream) if hasattr(stream, "aclose") else nullcontext()
                async with closing:  # type: ignore[attr-defined]
                    async for item in stream:
                        if isinstance(item, TextDelta):
                            yield TextDeltaEvent(self.run_id, self.agent_name, turn, item.text)
                        else:
                            response = item
                if response is None:
                    raise ModelError(
                        f"model {agent.model.name}: the stream ended without a reply",
                        model=agent.model.name,
                    )
            else:
                response = await agent.model.request(self.messages, params)
        except Exception as exc:
            self.audit(
                "model_call",
                turn=turn,
                model=agent.model.name,
                error=f"{type(exc).__name__}: {exc}",
                duration_s=round(time.perf_counter() - started, 6),
            )
            raise
        if any(not call.id for call in response.tool_calls):
            response = replace(response, tool_calls=tuple(
                call if call.id else replace(call, id=f"call_{turn}_{i}")
                for i, call in enumerate(response.tool_calls)
            ))
        self.messages.append(response)
        self.last_response = response
        self.usage = self.usage + Usage(
            model_calls=1,
            input_tokens=response.usage.input_tokens,
            output_tokens=response.usage.output_tokens,
        )
        self.audit(
            "model_call",
            turn=turn,
            model=agent.model.name,
            input_tokens=response.usage.input_tokens,
            output_tokens=response.usage.output_tokens,
            tool_calls=[c.name for c in response.tool_calls],
            finish_reason=response.finish_reason,
            duration_s=round(time.perf_counter() - started, 6),
        )
        yield ModelCallEvent(self.run_id, self.agent_name, turn, response)

    # --- tools ---------------------------------------------------------------------

    async def run_tool_calls(self, calls: Sequence[ToolCall]) -> AsyncIterator[AgentEvent]:
        """Run one turn's tool calls concurrently and append their results in call order.

        Seed 001: tool dispatch is parallel (one anyio task group over all the calls of
        a turn), so two delegate calls run at the same time. Sync tools run in worker
        threads. A failure of a tool (unknown, not permitted, invalid arguments,
        denied, raised) becomes an error result the model can correct. With
        ``max_tool_calls``, the calls that fit run; the others get an error result and
        the run ends with ``"max_tool_calls"``.

        Yields:
            A :class:`ToolCallEvent` per call, then a :class:`ToolResultEvent` per call,
            in call order.

        Raises:
            Exception: what a hook, a guardrail or the approval handler raised.
        """
        calls = list(calls)
        limits = self.guards.limits
        allowed = len(calls)
        if limits.max_tool_calls is not None:
            allowed = max(0, min(allowed, limits.max_tool_calls - self.usage.tool_calls))
        for call in calls:
            yield ToolCallEvent(self.run_id, self.agent_name, self.turn, call)
        results: list[tuple[ToolCall, ToolReturn, float] | None] = [None] * len(calls)

        async def run_one(index: int, call: ToolCall) -> None:
            results[index] = await self._execute(call)

        if allowed == 1:
            await run_one(0, calls[0])
        elif allowed > 1:
            try:
                async with anyio.create_task_group() as group:
                    for index in range(allowed):
                        group.start_soon(run_one, index, calls[index])
            except BaseExceptionGroup as errors:
                raise _first_error(errors) from None
        for index in range(allowed, len(calls)):
            call = calls[index]
            results[index] = (call, ToolReturn(
                call.id, call.name,
                f"error: not run: this run reached max_tool_calls={limits.max_tool_calls}",
                is_error=True,
            ), 0.0)
        self.usage = self.usage + Usage(tool_calls=allowed)
        for entry in results:
            assert entry is not None
            call, result, duration = entry
            self.messages.append(result)
            yield ToolResultEvent(self.run_id, self.agent_name, self.turn, call, result, duration)
        if allowed < len(calls):
            self.end("max_tool_calls", detail=f"reached max_tool_calls={limits.max_tool_calls}")

    async def _execute(self, call: ToolCall) -> tuple[ToolCall, ToolReturn, float]:
        started = time.perf_counter()
        guards = self.guards
        call_id = call.id
        for hook in guards.before_tool:
            changed = await _maybe_await(hook(call, self))
            if changed is not None:
                call = replace(changed, id=call_id)
        call, decision, result = await self._checked_run(call)
        for hook in guards.after_tool:
            changed = await _maybe_await(hook(call, result, self))
            if changed is not None:
                result = replace(changed, call_id=call_id)
        duration = time.perf_counter() - started
        if result.is_error:
            logger.info("agent %s run %s: tool %s: %s", self.agent_name, self.run_id,
                        call.name, result.content)
        self.audit(
            "tool_call",
            turn=self.turn,
            tool=call.name,
            call_id=call_id,
            arguments=call.arguments,
            result=result.content,
            is_error=result.is_error,
            approval=decision.decision if decision is not None else None,
            duration_s=round(duration, 6),
        )
        return call, result, duration

    async def _checked_run(
        self, call: ToolCall
    ) -> tuple[ToolCall, Approval | None, ToolReturn]:
        """Look the tool up, check permission, validate, ask approval, run it."""
        guards = self.guards

        def error(text: str) -> ToolReturn:
            return ToolReturn(call.id, call.name, f"error: {text}", is_error=True)

        tool = self.tools.get(call.name)
        if tool is None or not guards.permits(call.name):
            offered = ", ".join(sorted(d.name for d in self.tool_definitions())) or "none"
            if tool is None:
                text = f"there is no tool named {call.name!r}; the tools are: {offered}"
            else:
                text = (f"tool {call.name!r} is not permitted for this agent; "
                        f"the tools it may use are: {offered}")
            return call, None, error(text)
        kwargs = self._validated(tool, call)
        if isinstance(kwargs, str):
            return call, None, error(kwargs)
        decision: Approval | None = None
        if guards.needs_approval(call.name):
            decision = await self._ask_approval(call)
            if decision.decision == "deny":
                return call, decision, error(
                    f"the call to {call.name!r} was denied: {decision.reason or 'no reason given'}"
                )
            if decision.decision == "edit":
                call = replace(call, arguments=dict(decision.arguments or {}))
                kwargs = self._validated(tool, call)
                if isinstance(kwargs, str):
                    return call, decision, error(kwargs)
        try:
            value = await tool.call(kwargs, self)
        except Exception as exc:  # noqa: BLE001 - the model reads it and may correct itself
            return call, decision, error(f"tool {call.name!r} raised {type(exc).__name__}: {exc}")
        return call, decision, ToolReturn(call.id, call.name, result_text(value))

    @staticmethod
    def _validated(tool: Tool, call: ToolCall) -> dict[str, Any] | str:
        """Validated keyword arguments, or the text of what is wrong with them."""
        try:
            return tool.validate(call.arguments_dict())
        except ValueError as exc:
            if isinstance(exc, ValidationError):
                return (f"invalid arguments for {call.name!r}: "
                        f"{format_validation_error(exc)}; fix them and call it again")
            return f"invalid arguments for {call.name!r}: {exc}; send a JSON object"

    async def _ask_approval(self, call: ToolCall) -> Approval:
        guards = self.guards
        handler = guards.approval
        assert handler is not None
        decision: Any = None
        timeout = guards.approval_timeout_s
        with anyio.move_on_after(timeout if timeout is not None else float("inf")):
            if inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
                getattr(handler, "__call__", None)  # noqa: B004
            ):
                decision = await handler(call, self)
            else:
                # a sync handler may block (input()): keep the event loop free
                decision = await _maybe_await(await anyio.to_thread.run_sync(
                    handler, call, self, abandon_on_cancel=True
                ))
        if decision is None:
            return Approval.deny(f"no decision within approval_timeout_s={timeout} s")
        if not isinstance(decision, Approval):
            raise TypeError(
                f"the approval handler returned {decision!r}; return Approval.approve(), "
                "Approval.deny(reason) or Approval.edit(arguments)"
            )
        return decision

    # --- guardrails and the final answer ---------------------------------------------

    async def check_guardrails(
        self, guardrails: Sequence[Callable[..., Any]], value: Any
    ) -> str | None:
        """Run guardrails in order on ``value``.

        Returns:
            The first reason to block, or None when all let it through.

        Raises:
            TypeError: a guardrail returned something other than a string or None.
        """
        for guardrail in guardrails:
            reason = await _maybe_await(guardrail(value, self))
            if reason is None:
                continue
            if not isinstance(reason, str):
                raise TypeError(
                    f"guardrail {getattr(guardrail, '__name__', guardrail)!r} returned "
                    f"{reason!r}; return the reason to block (a str) or None"
                )
            if reason:
                return reason
        return None

    async def accept_final(self, response: ModelResponse) -> None:
        """Take a reply without tool calls as the final answer.

        With an ``output_type``, an answer that does not validate is sent back to the
        model with its errors (``Limits.max_output_retries`` times) and the run goes on.
        Output guardrails then check the output. On success the run ends
        ``"completed"``.

        Raises:
            OutputValidationError: the answer still does not validate.
        """
        output_type = self.agent.output_type
        output: Any
        if output_type is None:
            output = response.text or ""
        elif isinstance(response.output, output_type):
            output = response.output
        else:
            try:
                output = output_type.model_validate_json(_strip_fences(response.text or ""))
            except ValidationError as exc:
                errors = format_validation_error(exc)
                limit = self.guards.limits.max_output_retries
                if self.output_retries < limit:
                    self.output_retries += 1
                    self.messages.append(UserMessage(
                        f"Your answer does not match the required JSON schema: {errors}. "
                        "Answer again with only a JSON object that matches the schema."
                    ))
                    return
                raise OutputValidationError(
                    f"agent {self.agent_name}: the model's answer does not match "
                    f"{output_type.__name__} after {limit} correction(s): {errors}",
                    text=response.text,
                    errors=errors,
                ) from None
        reason = await self.check_guardrails(self.guards.output_guardrails, output)
        if reason is not None:
            self.end("output_guardrail", detail=reason)
            return
        self.end("completed", output=output)

    def last_text(self) -> str | None:
        """The last non-empty text the model wrote in this conversation."""
        for message in reversed(self.messages):
            if isinstance(message, ModelResponse) and message.text:
                return message.text
        return None
