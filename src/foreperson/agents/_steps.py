"""The steps a run is made of: a model call, a turn's tool calls (each a step, with its
approval a step of its own), a spawn, and the acceptance of a final answer.

Every step that produces something from outside the run's own code (a model reply, a
tool's return, a human's decision, a new worker's id) goes through the run's step runner
(``RunOptions.steps``) under a deterministic key, so a journaled runner can record it
and replay it:

==========================================  ===============  ============================
key (the step path)                          kind             result recorded
==========================================  ===============  ============================
``agent:NAME/turn:T/model``                  ``model_call``   the :class:`ModelResponse`
``agent:NAME/turn:T/tool:I``                 ``tool_call``    the :class:`ToolReturn`
``agent:NAME/turn:T/tool:I/approval``        ``approval``     the :class:`Approval`
``…/tool:I/approval/request``                ``approval_request``  what a parked call waits
                                                              on (:class:`PendingApproval`)
``<position>/spawn:ROLE``                    ``spawn``        the :class:`SpawnRecord`
``<position>/KIND:N``                        any              what ``ctx.step`` returns
==========================================  ===============  ============================

``T`` counts the run's model calls from 1, ``I`` the calls of one turn from 1, in the
order the model wrote them. A run nested in another prefixes its keys with the path of
the step it runs under (``agent:lead/turn:2/tool:1/agent:researcher/turn:1/model``) and
journals under the outermost run's id. The position of code running inside a tool call
is that call's path; inside ``ctx.step`` it is that step's key.

The rest of a run (hooks, permission checks, argument validation, guardrails) is plain
code that runs again on replay; it must be deterministic for a replay to match.

Parking: an approval handler that returns :meth:`Approval.pending` journals the request
(``…/approval/request``) and raises :class:`RunParked`; the other calls of the turn
finish (and are journaled) first, runs nested in it pass it up without recording the
step they run under, and the outermost run ends with stop reason
``"awaiting_approval"``. A decision recorded later under the approval's key is what a
resumed run replays.
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from pydantic import BaseModel, TypeAdapter, ValidationError

from .. import telemetry
from ..errors import (
    AccessDenied,
    ConfigurationError,
    ModelError,
    OutputValidationError,
    describe,
    first_error,
)
from ..journal import JournalDivergence, UnknownStepVersion, request_digest
from ..models import (
    Message,
    ModelRequestParameters,
    ModelResponse,
    ModelSettings,
    TextDelta,
    ToolCall,
    ToolReturn,
    Usage,
    UserMessage,
)
from ._events import (
    TRUNCATED_FINISH_REASONS,
    AgentEvent,
    ModelCallEvent,
    TextDeltaEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from ._guards import Approval, PendingApproval
from ._mcp import refresh_toolsets
from ._run_parts import AGENT_OUTPUT, ConversationDigest, SpawnRecord
from ._runner import InlineSteps, StepCodec, StepOutcome, StepSpec
from ._state import POSITION
from ._telemetry import (
    model_call_ended,
    model_call_span,
    next_turn,
    tool_span,
    tool_span_ended,
)
from ._tools import Tool, format_validation_error, result_text

if TYPE_CHECKING:
    from ._state import RunContext

__all__ = ["ENGINE", "RunParked"]

logger = logging.getLogger("foreperson.agents")

# Raised by a journal inside a tool (a nested run's replay) or by tenant pinning (a nested
# run of a pinned worker): never a tool result the model could "correct", always the
# run's error.
_JOURNAL_ERRORS = (JournalDivergence, UnknownStepVersion, AccessDenied)


class RunParked(BaseException):  # noqa: N818 - a signal, named for what happened
    """A step waits for a human decision (:meth:`Approval.pending`): the run stops here,
    journaled, and the outermost run ends with stop reason ``"awaiting_approval"``.

    A ``BaseException``, like a cancellation, so that a tool's ``except Exception``
    cannot swallow it and turn a parked worker into a failed one; the agent and teams
    layers pass it up (a delegation task is given back, not failed) and record no step
    it crossed. Users meet it only when they run an agent nested by hand and catch
    ``BaseException``.

    Attributes:
        pending: the calls waited on, in call order.
    """

    def __init__(self, pending: Sequence[PendingApproval]) -> None:
        super().__init__(f"waiting for a decision on {len(pending)} tool call(s)")
        self.pending = tuple(pending)


# --- codecs: step results as JSON and back ----------------------------------------------

_RESPONSE_ADAPTER: TypeAdapter[ModelResponse] = TypeAdapter(ModelResponse)
_TOOL_RETURN_ADAPTER: TypeAdapter[ToolReturn] = TypeAdapter(ToolReturn)
_APPROVAL_ADAPTER: TypeAdapter[Approval] = TypeAdapter(Approval)
_SPAWN_ADAPTER: TypeAdapter[SpawnRecord] = TypeAdapter(SpawnRecord)


def _dump(adapter: TypeAdapter[Any]) -> Callable[[Any], Any]:
    return lambda value: adapter.dump_python(value, mode="json")


@functools.lru_cache(maxsize=256)
def response_codec(output_type: type[BaseModel] | None) -> StepCodec[ModelResponse]:
    """A model reply as JSON and back; a structured output comes back validated."""

    def decode(data: Any) -> ModelResponse:
        response = _RESPONSE_ADAPTER.validate_python(data)
        if output_type is not None and isinstance(response.output, dict):
            response = replace(response, output=output_type.model_validate(response.output))
        return response

    return StepCodec(_dump(_RESPONSE_ADAPTER), decode)


TOOL_RETURN_CODEC: StepCodec[ToolReturn] = StepCodec(
    _dump(_TOOL_RETURN_ADAPTER), _TOOL_RETURN_ADAPTER.validate_python)
APPROVAL_CODEC: StepCodec[Approval] = StepCodec(
    _dump(_APPROVAL_ADAPTER), _APPROVAL_ADAPTER.validate_python)
SPAWN_CODEC: StepCodec[SpawnRecord] = StepCodec(
    _dump(_SPAWN_ADAPTER), _SPAWN_ADAPTER.validate_python)


@functools.lru_cache(maxsize=256)
def _schema_digest(output_type: type[BaseModel] | None) -> str | None:
    return None if output_type is None else request_digest(output_type.model_json_schema())


_SHORT = 24     # hex digits of the digests a model call's request summary keeps


def _model_request(
    conversation: ConversationDigest, messages: Sequence[Message], params: ModelRequestParameters
) -> Any:
    """What a model call asks, as JSON (digested by journaling runners, and recorded as
    the step's request summary): the conversation as its running digest, with the
    digest of the system message and of the messages added since the previous call and
    the number of messages (so a divergence can say which part changed), the tools
    (names and a digest of their definitions) and the output schema. A few hundred
    bytes whatever the length of the conversation. Sampling settings and the model's
    name are left out: changing them between a run and its replay is not a
    divergence."""
    chain = conversation.of(messages)
    system = conversation.of_system(messages)
    schema = _schema_digest(params.output_type)
    return {
        "conversation": chain[:_SHORT],
        "messages": len(messages),
        "latest": conversation.latest[:_SHORT],
        "system": None if system is None else system[:_SHORT],
        "tools": conversation.of_tools(params.tools)[:_SHORT],
        "tool_names": [t.name for t in params.tools],
        "output_schema": None if schema is None else schema[:_SHORT],
    }


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


def _strip_fences(text: str) -> str:
    """``text`` without a surrounding Markdown code fence (some local models add one)."""
    stripped = text.strip()
    if stripped.startswith("```") and stripped.endswith("```") and "\n" in stripped:
        return stripped[stripped.index("\n") + 1 : -3].strip()
    return stripped


# --- the model call -------------------------------------------------------------------


def call_settings(ctx: RunContext) -> ModelSettings:
    """The agent's settings, with ``max_tokens`` lowered to what is left of the token
    budget (one call must not overshoot a cap of 100 tokens by 8,000)."""
    settings = ctx.agent.settings
    budget = ctx.token_budget()
    if budget is not None and (settings.max_tokens is None or settings.max_tokens > budget):
        return replace(settings, max_tokens=max(1, budget))
    return settings




async def call_model(  # noqa: C901, PLR0915 - one model step: replay, budget, streaming, retries and each bad reply
    ctx: RunContext,
    messages: Sequence[Message] | None = None,
    output_type: type[BaseModel] | None = AGENT_OUTPUT,
    replay_messages: Sequence[Message] | None = None,
) -> AsyncIterator[AgentEvent]:
    """See :meth:`RunContext.call_model`."""
    ctx.turn += 1
    turn = ctx.turn
    next_turn(ctx)
    agent = ctx.agent
    if output_type is AGENT_OUTPUT:
        output_type = agent.output_type
    conversation = ctx.messages if messages is None else list(messages)
    digest = ctx.conversation if messages is None else ConversationDigest()
    await refresh_toolsets(ctx)     # an MCP server whose tool list changed: listed again
    params = ModelRequestParameters(
        tools=ctx.tool_definitions(), output_type=output_type, settings=call_settings(ctx))
    buffered: list[TextDeltaEvent] = []   # deltas, when nobody listens live

    async def execute() -> ModelResponse:
        if ctx.guards.rate_limiter is not None:
            await ctx.guards.rate_limiter.acquire()
        if not ctx.streaming:
            return await agent.model.request(conversation, params)
        response: ModelResponse | None = None
        stream = agent.model.request_stream(conversation, params)
        aclose = getattr(stream, "aclose", None)
        try:
            async for item in stream:
                if isinstance(item, TextDelta):
                    delta = TextDeltaEvent(ctx.run_id, ctx.agent_name, turn, item.text, **ctx.tags)
                    if ctx.events is not None:
                        await ctx.events(delta)
                    else:
                        buffered.append(delta)
                else:
                    response = item
        finally:
            if aclose is not None:
                await aclose()
        if response is None:
            raise ModelError(f"model {agent.model.name}: the stream ended without a reply",
                             model=agent.model.name)
        return response

    spec = StepSpec(ctx.journal_run_id, f"{ctx.turn_path(turn)}/model", "model_call",
                    lambda: _model_request(digest, conversation if replay_messages is None
                                           else replay_messages, params),
                    response_codec(output_type))
    started = time.perf_counter()
    outcome: StepOutcome[ModelResponse] | None = None
    span = model_call_span(ctx)
    try:
        with ctx.deadline_scope():
            outcome = await ctx.steps.run(spec, execute)
    except BaseException as exc:
        model_call_ended(ctx, span, None, False, exc if isinstance(exc, Exception) else None)
        if not isinstance(exc, Exception):
            raise
        ctx.audit("model_call", turn=turn, model=agent.model.name,
                  error=describe(exc),
                  duration_s=round(time.perf_counter() - started, 6))
        raise
    model_call_ended(ctx, span, outcome.value if outcome else None,
                     outcome.replayed if outcome else False)
    if outcome is None:  # the run's deadline passed during the call
        ctx.audit("model_call", turn=turn, model=agent.model.name,
                  error=f"abandoned at max_duration_s={ctx.guards.limits.max_duration_s}",
                  duration_s=round(time.perf_counter() - started, 6))
        ctx.end_by_deadline()
        return
    response = outcome.value
    if any(not call.id for call in response.tool_calls):
        response = replace(response, tool_calls=tuple(
            call if call.id else replace(call, id=f"call_{turn}_{i}")
            for i, call in enumerate(response.tool_calls)
        ))
    if messages is None:
        ctx.messages.append(response)
    ctx.last_response = response
    ctx.replayed = outcome.replayed
    ctx.spend(Usage(model_calls=1, input_tokens=response.usage.input_tokens,
                    output_tokens=response.usage.output_tokens))
    ctx.audit(
        "model_call",
        turn=turn,
        model=agent.model.name,
        input_tokens=response.usage.input_tokens,
        output_tokens=response.usage.output_tokens,
        tool_calls=[c.name for c in response.tool_calls],
        finish_reason=response.finish_reason,
        duration_s=round(time.perf_counter() - started, 6),
        **({"replayed": True} if outcome.replayed else {}),
    )
    for delta in buffered:
        yield delta
    yield ModelCallEvent(ctx.run_id, ctx.agent_name, turn, response,
                         replayed=outcome.replayed, **ctx.tags)


# --- tool calls -----------------------------------------------------------------------


@dataclass
class _Done:
    call: ToolCall
    result: ToolReturn
    duration_s: float
    replayed: bool = False


async def run_tool_calls(ctx: RunContext, calls: Sequence[ToolCall]) -> AsyncIterator[AgentEvent]:  # noqa: C901 - a turn's tool calls: replay, approvals, timeouts and errors per call
    """See :meth:`RunContext.run_tool_calls`."""
    calls = list(calls)
    ctx.reply_ok()
    limits = ctx.guards.limits
    allowed = len(calls)
    if limits.max_tool_calls is not None:
        allowed = max(0, min(allowed, limits.max_tool_calls - ctx.own_usage.tool_calls))
    for call in calls:
        yield ToolCallEvent(ctx.run_id, ctx.agent_name, ctx.turn, call, **ctx.tags)
    done: list[_Done | None] = [None] * len(calls)
    parked: list[tuple[int, RunParked]] = []

    async def run_one(index: int) -> None:
        try:
            done[index] = await _execute(ctx, index, calls[index])
        except RunParked as waiting:    # the turn's other calls finish (and journal) first
            parked.append((index, waiting))

    with ctx.deadline_scope() as scope:
        if allowed == 1:
            await run_one(0)
        elif allowed > 1:
            try:
                async with anyio.create_task_group() as group:
                    for index in range(allowed):
                        group.start_soon(run_one, index)
            except BaseExceptionGroup as errors:
                raise first_error(errors) from None
    if parked:
        raise RunParked([p for _, waiting in sorted(parked, key=lambda x: x[0])
                         for p in waiting.pending])
    for index, call in enumerate(calls):
        if done[index] is None:
            if index >= allowed:
                text = f"not run: this run reached max_tool_calls={limits.max_tool_calls}"
            else:
                text = (f"not finished: this run reached max_duration_s="
                        f"{limits.max_duration_s} s")
            done[index] = _Done(call, _error(call, text), 0.0)
    ctx.spend(Usage(tool_calls=allowed))
    for entry in done:
        assert entry is not None
        ctx.messages.append(entry.result)
        yield ToolResultEvent(ctx.run_id, ctx.agent_name, ctx.turn, entry.call, entry.result,
                              entry.duration_s, replayed=entry.replayed, **ctx.tags)
    if scope.cancelled_caught:
        ctx.end_by_deadline()
    elif allowed < len(calls):
        ctx.end("max_tool_calls", detail=f"reached max_tool_calls={limits.max_tool_calls}")


def _error(call: ToolCall, text: str) -> ToolReturn:
    return ToolReturn(call.id, call.name, f"error: {text}", is_error=True)


async def _execute(ctx: RunContext, index: int, call: ToolCall) -> _Done:
    started = time.perf_counter()
    guards = ctx.guards
    call_id = call.id
    path = f"{ctx.turn_path(ctx.turn)}/tool:{index + 1}"
    token = POSITION.set((ctx, path))
    span = tool_span(ctx, call)
    try:
        with telemetry.use_span(span):
            for hook in guards.before_tool:
                changed = await _maybe_await(hook(call, ctx))
                if changed is not None:
                    call = replace(changed, id=call_id)
            call, decision, outcome = await _checked_run(ctx, call, path)
            result = outcome.value
            for after in guards.after_tool:
                returned = await _maybe_await(after(call, result, ctx))
                if returned is not None:
                    result = replace(returned, call_id=call_id)
    except BaseException as exc:
        tool_span_ended(span, None, False, exc if isinstance(exc, Exception) else None)
        raise
    finally:
        POSITION.reset(token)
    tool_span_ended(span, result, outcome.replayed)
    duration = time.perf_counter() - started
    if result.is_error:
        logger.info("agent %s run %s: tool %s: %s", ctx.agent_name, ctx.run_id,
                    call.name, result.content)
    ctx.audit(
        "tool_call",
        turn=ctx.turn,
        tool=call.name,
        call_id=call_id,
        arguments=call.arguments,
        result=result.content,
        is_error=result.is_error,
        approval=decision.decision if decision is not None else None,
        duration_s=round(duration, 6),
        **({"replayed": True} if outcome.replayed else {}),
    )
    return _Done(call, result, duration, outcome.replayed)


async def _checked_run(
    ctx: RunContext, call: ToolCall, path: str
) -> tuple[ToolCall, Approval | None, StepOutcome[ToolReturn]]:
    """Look the tool up, check permission, validate, ask approval, run it."""
    guards = ctx.guards
    tool = ctx.tools.get(call.name)
    if tool is None or not guards.permits(call.name):
        offered = ", ".join(sorted(d.name for d in ctx.tool_definitions())) or "none"
        if tool is None:
            text = f"there is no tool named {call.name!r}; the tools are: {offered}"
        else:
            text = (f"tool {call.name!r} is not permitted for this agent; "
                    f"the tools it may use are: {offered}")
        return call, None, StepOutcome(_error(call, text))
    kwargs = _validated(tool, call)
    if isinstance(kwargs, str):
        return call, None, StepOutcome(_error(call, kwargs))
    decision: Approval | None = None
    if guards.needs_approval(call.name):
        decision = await _approval(ctx, call, path)
        if decision.decision == "deny":
            reason = decision.reason or "no reason given"
            return call, decision, StepOutcome(_error(
                call, f"the call to {call.name!r} was denied: {reason}"))
        if decision.decision == "edit":
            call = replace(call, arguments=dict(decision.arguments or {}))
            kwargs = _validated(tool, call)
            if isinstance(kwargs, str):
                return call, decision, StepOutcome(_error(call, kwargs))
    checked_call, checked_kwargs = call, kwargs

    async def execute() -> ToolReturn:
        return await _invoke(ctx, tool, checked_call, checked_kwargs)

    if not tool.journaled:
        return call, decision, StepOutcome(await execute())
    spec = StepSpec(ctx.journal_run_id, path, "tool_call",
                    lambda: {"tool": checked_call.name,
                             "arguments": checked_call.arguments_dict(),
                             **(tool.step_request or {})},
                    TOOL_RETURN_CODEC)
    return call, decision, await ctx.steps.run(spec, execute)


async def _invoke(
    ctx: RunContext, tool: Tool, call: ToolCall, kwargs: dict[str, Any]
) -> ToolReturn:
    """Run the tool within its timeout; what it raised becomes an error result."""
    timeout = tool.timeout_s if tool.timeout_s is not None else ctx.guards.tool_timeout_s
    value: Any = None
    try:
        if timeout is None or timeout == math.inf:
            value = await tool.call(kwargs, ctx)
        else:
            with anyio.move_on_after(timeout) as scope:
                value = await tool.call(kwargs, ctx)
            if scope.cancelled_caught:
                return _error(call, (
                    f"tool {call.name!r} did not finish within its timeout_s={timeout} s and "
                    "was abandoned; try again with a smaller request, or do without it"))
    except _JOURNAL_ERRORS:
        raise
    except Exception as exc:  # noqa: BLE001 - the model reads it and may correct itself
        return _error(call, f"tool {call.name!r} raised {describe(exc)}")
    if isinstance(value, ToolReturn):   # the tool chose its content and error flag itself
        return replace(value, call_id=call.id, name=call.name)
    return ToolReturn(call.id, call.name, result_text(value))


def _validated(tool: Tool, call: ToolCall) -> dict[str, Any] | str:
    """Validated keyword arguments, or the text of what is wrong with them."""
    try:
        return tool.validate(call.arguments_dict())
    except ValueError as exc:
        if isinstance(exc, ValidationError):
            return (f"invalid arguments for {call.name!r}: "
                    f"{format_validation_error(exc)}; fix them and call it again")
        return f"invalid arguments for {call.name!r}: {exc}; send a JSON object"


class _NoDecision(Exception):
    """The approval handler returned :meth:`Approval.pending` (never journaled)."""


async def _approval(ctx: RunContext, call: ToolCall, path: str) -> Approval:
    """The approval step: the human's decision, journaled under ``<path>/approval``; a
    pending one parks the run (:class:`RunParked`)."""
    request = {"tool": call.name, "arguments": call.arguments_dict()}
    spec = StepSpec(ctx.journal_run_id, f"{path}/approval", "approval", lambda: request,
                    APPROVAL_CODEC)

    async def ask() -> Approval:
        decision = await _ask_approval(ctx, call)
        if decision.decision == "pending":
            raise _NoDecision
        return decision

    try:
        outcome = await ctx.steps.run(spec, ask)
    except _NoDecision:
        raise RunParked([await _park(ctx, call, spec.key, request_digest(request))]) from None
    return outcome.value


_PENDING_ADAPTER: TypeAdapter[PendingApproval] = TypeAdapter(PendingApproval)
PENDING_CODEC: StepCodec[PendingApproval] = StepCodec(
    _dump(_PENDING_ADAPTER), _PENDING_ADAPTER.validate_python)


async def _park(ctx: RunContext, call: ToolCall, key: str, digest: str) -> PendingApproval:
    """Journal what a parked call waits on (``<key>/request``), so another process can
    find it and record the decision under ``key`` with the digest a replay checks."""
    if isinstance(ctx.steps, InlineSteps):
        raise ConfigurationError(
            f"agent {ctx.agent_name!r}: the approval handler said Approval.pending() for "
            f"{call.name!r}, which parks the run until a decision is recorded; that needs "
            "a journal: run it with runtime=SqliteRuntime(...) (or RunOptions(steps="
            "JournaledSteps(store)))")
    pending = PendingApproval(call.id, call.name, call.arguments_dict(), key, ctx.agent_name,
                              ctx.run_id, digest)

    async def record() -> PendingApproval:
        return pending

    spec = StepSpec(ctx.journal_run_id, f"{key}/request", "approval_request",
                    lambda: {"tool": call.name, "arguments": call.arguments_dict()},
                    PENDING_CODEC)
    outcome = await ctx.steps.run(spec, record)
    ctx.audit("tool_call", turn=ctx.turn, tool=call.name, call_id=call.id,
              arguments=call.arguments, result=None, is_error=False, approval="pending",
              duration_s=0.0)
    return outcome.value


async def _ask_approval(ctx: RunContext, call: ToolCall) -> Approval:
    guards = ctx.guards
    handler = guards.approval
    assert handler is not None
    decision: Any = None
    timeout = guards.approval_timeout_s
    with anyio.move_on_after(timeout if timeout is not None else math.inf):
        if inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
            getattr(handler, "__call__", None)  # noqa: B004
        ):
            decision = await _maybe_await(handler(call, ctx))
        else:
            # a sync handler may block (input()): keep the event loop free
            decision = await _maybe_await(await anyio.to_thread.run_sync(
                handler, call, ctx, abandon_on_cancel=True
            ))
    if decision is None:
        return Approval.deny(f"no decision within approval_timeout_s={timeout} s")
    if not isinstance(decision, Approval):
        raise ConfigurationError(
            f"the approval handler {getattr(handler, '__name__', handler)!r} returned "
            f"{decision!r}; make it return Approval.approve(), Approval.deny(reason) or "
            "Approval.edit(arguments)"
        )
    return decision


# --- spawn ------------------------------------------------------------------------------


async def spawn(
    ctx: RunContext, role: str, instructions: str, data: dict[str, Any] | None
) -> StepOutcome[SpawnRecord]:
    """See :meth:`RunContext.spawn`."""
    extra = dict(data or {})

    async def execute() -> SpawnRecord:
        return SpawnRecord(role, instructions, ctx.ids(), extra)

    outcome = await ctx.step("spawn", execute, name=role, codec=SPAWN_CODEC,
                             request={"role": role, "instructions": instructions,
                                      "data": extra})
    record = outcome.value
    ctx.audit("spawn", role=record.role, worker_id=record.worker_id,
              **({"replayed": True} if outcome.replayed else {}))
    return outcome


# --- guardrails and the final answer ----------------------------------------------------


async def check_guardrails(
    ctx: RunContext, guardrails: Sequence[Callable[..., Any]], value: Any
) -> str | None:
    """See :meth:`RunContext.check_guardrails`."""
    for guardrail in guardrails:
        reason = await _maybe_await(guardrail(value, ctx))
        if reason is None:
            continue
        if not isinstance(reason, str):
            raise ConfigurationError(
                f"guardrail {getattr(guardrail, '__name__', guardrail)!r} returned "
                f"{reason!r}; make it return the reason to block (a str) or None"
            )
        if reason:
            return reason
    return None


def _reply_problem(response: ModelResponse) -> tuple[str, str, str] | None:
    """``(stop_reason, detail, correction)`` for a final reply that is no answer: cut by
    the token limit, or empty."""
    if response.output is not None:
        return None
    if response.finish_reason in TRUNCATED_FINISH_REASONS:
        return ("truncated",
                f"the model's answer was cut by its token limit (finish_reason="
                f"{response.finish_reason!r}), again after it was asked once more",
                "Your answer was cut off by the token limit. Answer again, more briefly.")
    if not (response.text or "").strip():
        return ("empty_reply",
                "the model replied with nothing, again after it was asked once more",
                "Your reply was empty. Answer the request, or call one of the tools.")
    return None


async def accept_final(ctx: RunContext, response: ModelResponse) -> None:
    """See :meth:`RunContext.accept_final`."""
    problem = _reply_problem(response)
    if problem is not None:
        reason, detail, correction = problem
        reached = ctx.limit_reached()
        if reached is not None:
            ctx.end(reached[0], detail=f"{reached[1]}; the last reply was not an answer "
                                       f"({reason})")
        elif ctx.correcting:
            ctx.end(reason, detail=detail)
        else:
            ctx.correcting = True
            ctx.messages.append(UserMessage(correction))
        return
    ctx.reply_ok()
    output_type = ctx.agent.output_type
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
            limit = ctx.guards.limits.max_output_retries
            if ctx.output_retries < limit:
                ctx.output_retries += 1
                ctx.messages.append(UserMessage(
                    f"Your answer does not match the required JSON schema: {errors}. "
                    "Answer again with only a JSON object that matches the schema."
                ))
                return
            raise OutputValidationError(
                f"agent {ctx.agent_name}: the model's answer does not match "
                f"{output_type.__name__} after {limit} correction(s): {errors}",
                text=response.text,
                errors=errors,
            ) from None
    blocked: str | None = None
    with ctx.deadline_scope() as scope:
        blocked = await check_guardrails(ctx, ctx.guards.output_guardrails, output)
    if scope.cancelled_caught:
        ctx.end_by_deadline()
    elif blocked is not None:
        ctx.end("output_guardrail", detail=blocked)
    else:
        ctx.end("completed", output=output)


class _Engine:
    """These steps as a run's :class:`~foreperson.agents._state.StepEngine`."""

    def call_model(self, ctx: RunContext, messages: Sequence[Message] | None,
                   output_type: type[BaseModel] | None,
                   replay_messages: Sequence[Message] | None = None,
                   ) -> AsyncIterator[AgentEvent]:
        return call_model(ctx, messages, output_type, replay_messages)

    def run_tool_calls(self, ctx: RunContext, calls: Sequence[ToolCall]
                       ) -> AsyncIterator[AgentEvent]:
        return run_tool_calls(ctx, calls)

    async def check_guardrails(self, ctx: RunContext,
                               guardrails: Sequence[Callable[..., Any]], value: Any
                               ) -> str | None:
        return await check_guardrails(ctx, guardrails, value)

    async def accept_final(self, ctx: RunContext, response: ModelResponse) -> None:
        await accept_final(ctx, response)

    async def spawn(self, ctx: RunContext, role: str, instructions: str,
                    data: dict[str, Any] | None) -> StepOutcome[SpawnRecord]:
        return await spawn(ctx, role, instructions, data)


ENGINE = _Engine()
"""The step engine every :class:`~foreperson.agents.Agent` run is given."""
