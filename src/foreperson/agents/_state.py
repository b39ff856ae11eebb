"""One run's state (:class:`RunContext`), what a run is given from outside
(:class:`RunOptions`: the step runner, the clock, the id source, the parent run and the
event sink), and the link between a nested run and its parent (:class:`ParentRun`).

The steps themselves (model call, tool calls, approval, spawn) live in ``_steps``, handed
to each run as its :class:`StepEngine` (so this module never imports them);
``RunContext`` exposes them as methods so architectures read as one object.
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

import anyio
from pydantic import BaseModel

from ..clock import Clock, IdSource, SystemClock, new_id
from ..errors import ConfigurationError
from ..models import (
    Message,
    Model,
    ModelResponse,
    ModelSettings,
    ToolCall,
    ToolDefinition,
    ToolReturn,
    Usage,
)
from ._events import (
    STOP_REASONS,
    AgentEvent,
    RunResult,
    StopReason,
    dump_run_result,
    load_run_result,
)
from ._guards import AUDIT_KINDS, AuditEntry, Guards, PendingApproval
from ._run_parts import (
    AGENT_OUTPUT,
    NO_DEADLINE,
    ConversationDigest,
    DeadlineScope,
    EventSink,
    SpawnRecord,
)
from ._runner import JSON_CODEC, InlineSteps, StepCodec, StepOutcome, StepRunner, StepSpec
from ._tools import Tool

__all__ = ["AgentView", "EventSink", "ParentRun", "RunContext", "RunOptions", "StepEngine",
           "unfinished_usage"]

T = TypeVar("T")

POSITION: ContextVar[tuple[RunContext, str] | None] = ContextVar(
    "foreperson_step_position", default=None)
"""(run, step path) of the tool call or step whose code is running in this task."""



class AgentView(Protocol):
    """What a run reads of the agent it runs (an :class:`~foreperson.agents.Agent`;
    named by what it offers, since the agent sits above its runs' state)."""

    @property
    def name(self) -> str:
        """The agent's name."""
        ...

    @property
    def model(self) -> Model:
        """Its model."""
        ...

    @property
    def guards(self) -> Guards:
        """Its guards."""
        ...

    @property
    def settings(self) -> ModelSettings:
        """Its sampling settings."""
        ...

    @property
    def output_type(self) -> type[BaseModel] | None:
        """The pydantic model its answer must match, or None (text)."""
        ...

    @property
    def architecture(self) -> Any:
        """Its :class:`~foreperson.agents.steps.Architecture`."""
        ...

    async def run(self, prompt: str, *, message_history: Sequence[Message] | None = None,
                  options: RunOptions | None = None) -> RunResult[Any]:
        """Run it (see :meth:`Agent.run <foreperson.agents.Agent.run>`)."""
        ...


class StepEngine(Protocol):
    """The steps a run is made of, as :class:`RunContext` calls them (the agent layer's
    ``_steps`` module; :meth:`Agent.new_context <foreperson.agents.Agent.new_context>`
    hands it to each run)."""

    def call_model(self, ctx: RunContext, messages: Sequence[Message] | None,
                   output_type: type[BaseModel] | None,
                   replay_messages: Sequence[Message] | None = None,
                   ) -> AsyncIterator[AgentEvent]:
        """See :meth:`RunContext.call_model`."""
        ...

    def run_tool_calls(self, ctx: RunContext, calls: Sequence[ToolCall]
                       ) -> AsyncIterator[AgentEvent]:
        """See :meth:`RunContext.run_tool_calls`."""
        ...

    async def check_guardrails(self, ctx: RunContext,
                               guardrails: Sequence[Callable[..., Any]], value: Any
                               ) -> str | None:
        """See :meth:`RunContext.check_guardrails`."""
        ...

    async def accept_final(self, ctx: RunContext, response: ModelResponse) -> None:
        """See :meth:`RunContext.accept_final`."""
        ...

    async def spawn(self, ctx: RunContext, role: str, instructions: str,
                    data: dict[str, Any] | None) -> StepOutcome[SpawnRecord]:
        """See :meth:`RunContext.spawn_step`."""
        ...


class _NoEngine:
    """The engine of a context built by hand (not by ``Agent.new_context``): it can end
    and audit, not run steps."""

    def __getattr__(self, name: str) -> Any:
        raise ConfigurationError(f"this RunContext was not built by Agent.new_context, so "
                                 f"it cannot run steps ({name})")


_NO_ENGINE: Any = _NoEngine()


@dataclass(frozen=True)
class ParentRun:
    """Where a nested run sits: a run started from inside a step of another run (a
    worker run from a supervisor's ``delegate`` tool). Build it with
    :meth:`RunContext.nested`.

    Attributes:
        run_id: the run this one is nested in.
        path: the step path, in the outermost run's journal, of the step this run runs
            under (``"agent:lead/turn:2/tool:1"``); the nested run's own keys extend it.
        level: this run's level: 1 for a run nested in a top-level run, 2 below that...
        root_run_id: the outermost run, whose journal holds every nested step.
        user_id: the user the parent serves; the nested run serves the same one unless
            it is given another.
        streaming: whether the outermost consumer streams (the nested run then streams
            its model text to the event sink).
        context: the parent's live :class:`RunContext` when it runs in this process and
            on this event loop: usage flows up to it as it is spent (counted once, at
            every level) and its token budget also bounds the nested run. None for a
            parent in another process (add the nested result's usage with
            :meth:`RunContext.add_usage` then).
    """

    run_id: str
    path: str
    level: int
    root_run_id: str
    user_id: str | None = None
    streaming: bool = False
    context: RunContext | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class RunOptions:
    """What a run takes from outside: the seams through which the durable runtime and the
    teams layer (or a test) see and steer its steps. ``Agent.run`` / ``run_sync`` /
    ``stream`` accept one as ``options=``.

    Example::

        from foreperson.agents import JournaledSteps, RunOptions
        from foreperson.testing import ManualClock
        from foreperson.work import MemoryStore

        ids = iter(["run-1", "run-2"])
        options = RunOptions(steps=JournaledSteps(MemoryStore()), clock=ManualClock(),
                             ids=lambda: next(ids))
        result = await agent.run("hello", options=options)   # result.run_id == "run-1"

    Attributes:
        steps: runs each step (default :class:`InlineSteps`: inline, nothing recorded;
            :class:`JournaledSteps` records and replays them).
        clock: the time of audit entries (default the system clock; a
            :class:`~foreperson.testing.ManualClock` fixes it). Durations and the
            ``max_duration_s`` deadline use the event loop's monotonic clock.
        ids: new ids: the run's id when none is given, spawned workers' ids (default
            random 32-hex ids). A nested run's default id is derived from its parent's
            id and its step path instead, so a replay gives it the same one.
        parent: set for a nested run (see :meth:`RunContext.nested`); None for a
            top-level run.
        events: where the run's events also go as they happen (see :data:`EventSink`);
            the outermost ``stream()`` sets it for itself and the runs nested in it.
        runtime: the durable run this run belongs to, set by a runtime
            (``agent.run(..., runtime=SqliteRuntime(...))``) and handed to every run
            nested in it. Opaque to the agent layer; the layers above read their services
            from it (the teams layer: the task store of delegations, workers that run in
            other processes). None: no runtime.
    """

    steps: StepRunner = field(default_factory=InlineSteps)
    clock: Clock = field(default_factory=SystemClock)
    ids: IdSource = new_id
    parent: ParentRun | None = None
    events: EventSink | None = None
    runtime: Any = None


DEFAULT_OPTIONS = RunOptions()

_UNFINISHED: weakref.WeakKeyDictionary[ParentRun, Usage] = weakref.WeakKeyDictionary()


def record_unfinished(ctx: RunContext) -> None:
    """Keep the usage of a nested run that ended without a result (it raised, or was
    cancelled) for :func:`unfinished_usage`."""
    parent = ctx.options.parent
    if parent is not None:
        _UNFINISHED[parent] = ctx.usage


def unfinished_usage(options: RunOptions) -> Usage | None:
    """What a run nested with ``options`` (from :meth:`RunContext.nested`) had used when
    it ended without a result (it raised, or its caller cancelled it): its usage flowed
    up as it was spent, but no result says how much it was, so the layers above read it
    here (the teams layer records it in the failed delegation).

    Args:
        options: the options the nested run was started with.

    Returns:
        The usage (its own and its nested runs'), or None when no such run ended without
        a result.
    """
    if options.parent is None:
        return None
    return _UNFINISHED.pop(options.parent, None)


def nested_run_id(parent: ParentRun, agent_name: str) -> str:
    """The default id of a nested run: derived from the outermost run and the step
    path, so the same on every replay (32 hex digits)."""
    seed = f"{parent.root_run_id}/{parent.path}/agent:{agent_name}"
    return hashlib.sha256(seed.encode()).hexdigest()[:32]


@dataclass(eq=False)
class RunContext:
    """The state of one run, and the steps architectures are built from.

    A tool that declares a parameter annotated ``RunContext`` receives it (for the run
    id, the user id, to end the run early with :meth:`end`, or to run steps and nested
    runs of its own with :meth:`step`, :meth:`spawn`, :meth:`run_agent`).

    Attributes:
        agent: the agent being run.
        run_id: the run's id.
        user_id: the user the run serves (tenant pinning), or None.
        messages: the conversation so far; architectures append to it.
        tools: the tools of this run by name; an architecture may add some.
        streaming: whether model replies are streamed (``Agent.stream``).
        usage: what the run has used so far, including the runs nested in it (each
            counted once) and replayed steps (as recorded).
        turn: model calls made so far (this run's own).
        stop_reason: set by :meth:`end`; None while the run goes on.
        detail: a note on the stop, or None.
        output: the final output, once completed.
        last_response: the model's latest reply.
        output_retries: answers sent back for not matching ``output_type`` so far.
        options: the step runner, clock, id source, parent and event sink.
        own_usage: what this run used itself, without nested runs: its caps
            (``max_turns``, ``max_tool_calls``) count this.
        deadline: when the run must end (``anyio.current_time()`` seconds), from
            ``Limits.max_duration_s``; None: no deadline.
        correcting: True when the last reply was sent back for correction (empty or
            cut off); a second such reply in a row ends the run.
        result_hook: set by an architecture whose runs have more to say than a
            :class:`RunResult` (the teams layer's route log): :meth:`to_result` passes
            the result through it (it may return a subclass). None: the plain result.
        tags: what every event of the run carries besides run id and agent: for a
            nested run its parent's run id, its step path and its level.
        journal_run_id: the run id its steps journal under: its own, or for a nested
            run the outermost run's.
        conversation: the running digest of ``messages`` that journaled model calls
            record.
        replayed: whether the latest model call's reply came from the journal.
        span: the run's OpenTelemetry span (None without tracing).
        turn_span: the current turn's span (None without tracing or before a turn).
        engine: the steps the run is made of (:class:`StepEngine`).
    """

    agent: AgentView
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
    options: RunOptions = DEFAULT_OPTIONS
    own_usage: Usage = field(default_factory=Usage)
    deadline: float | None = None
    correcting: bool = False
    result_hook: Callable[[RunResult[Any]], RunResult[Any]] | None = None
    replayed: bool = False
    pending: tuple[PendingApproval, ...] = ()
    span: Any = field(default=None, repr=False, compare=False)
    turn_span: Any = field(default=None, repr=False, compare=False)
    engine: StepEngine = field(default_factory=lambda: _NO_ENGINE, repr=False,
                               compare=False)
    tags: dict[str, Any] = field(init=False, repr=False)
    journal_run_id: str = field(init=False)
    _base: str = field(init=False, repr=False)
    _thread: int = field(init=False, repr=False)
    conversation: ConversationDigest = field(init=False, repr=False)
    _step_counts: dict[tuple[str, str], int] = field(init=False, repr=False)
    _nested_counts: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        parent = self.options.parent
        self._thread = threading.get_ident()
        self.conversation = ConversationDigest()
        self._step_counts = {}
        self._nested_counts = {}
        if parent is None:
            self.tags = {}
            self.journal_run_id = self.run_id
            self._base = ""
        else:
            self.tags = {"parent_run_id": parent.run_id, "parent_path": parent.path,
                         "level": parent.level}
            self.journal_run_id = parent.root_run_id
            self._base = parent.path + "/"

    # --- who and where --------------------------------------------------------------

    @property
    def guards(self) -> Guards:
        """The agent's guards."""
        return self.agent.guards

    @property
    def agent_name(self) -> str:
        """The agent's name."""
        return self.agent.name

    @property
    def parent(self) -> ParentRun | None:
        """Where this run is nested, or None for a top-level run."""
        return self.options.parent

    @property
    def level(self) -> int:
        """0 for a top-level run, 1 for a run nested in one, and so on."""
        parent = self.options.parent
        return 0 if parent is None else parent.level

    @property
    def steps(self) -> StepRunner:
        """The step runner."""
        return self.options.steps

    @property
    def clock(self) -> Clock:
        """The clock of audit timestamps."""
        return self.options.clock

    @property
    def ids(self) -> IdSource:
        """The id source."""
        return self.options.ids

    @property
    def events(self) -> EventSink | None:
        """Where events go as they happen, or None."""
        return self.options.events

    @property
    def stopped(self) -> bool:
        """True once :meth:`end` was called."""
        return self.stop_reason is not None

    def turn_path(self, turn: int | None = None) -> str:
        """The step path of a turn: ``agent:NAME/turn:T`` (prefixed, in a nested run,
        by the path it runs under).

        Args:
            turn: the turn (default the current one; 0 before the first model call).
        """
        return f"{self._base}agent:{self.agent_name}/turn:{self.turn if turn is None else turn}"

    def position(self) -> str:
        """The step path of the code running now: inside a tool call, that call's path
        (``.../turn:2/tool:1``); inside :meth:`step`, that step's key; else the turn's
        path."""
        current = POSITION.get()
        if current is not None and current[0] is self:
            return current[1]
        return self.turn_path()

    # --- ending, auditing, counting ---------------------------------------------------

    def end(
        self, stop_reason: StopReason, *, output: Any = None, detail: str | None = None
    ) -> None:
        """End the run after the current step (the first call wins).

        Args:
            stop_reason: why: a name in :data:`~foreperson.agents.STOP_REASONS`.
            output: the final output (for ``"completed"``).
            detail: a note for the result, e.g. which limit.

        Raises:
            ConfigurationError: ``stop_reason`` is not registered.
        """
        STOP_REASONS.check(stop_reason)
        if self.stop_reason is None:
            self.stop_reason = stop_reason
            self.output = output
            self.detail = detail

    def park(self, pending: Sequence[PendingApproval]) -> None:
        """End the run, whatever it was doing, with ``"awaiting_approval"``: a step of
        it (or of a run nested in it) waits for a human decision (see
        :class:`~foreperson.agents.RunParked`). The outermost run calls this.

        Args:
            pending: the calls waited on.
        """
        self.pending = tuple(pending)
        calls = ", ".join(f"{p.tool} (call {p.call_id}, step {p.key})" for p in pending)
        self.stop_reason = "awaiting_approval"
        self.output = None
        self.detail = (f"waiting for a human decision on {calls}: record it with "
                       "runtime.approve(run_id, call_id) or runtime.deny(...), or "
                       "`foreperson runs approve RUN_ID CALL_ID`, then resume the run")

    def end_by_deadline(self) -> None:
        """End the run with ``"max_duration"`` (its deadline passed)."""
        self.end("max_duration",
                 detail=f"reached max_duration_s={self.guards.limits.max_duration_s} s")

    def audit(self, kind: str, **data: Any) -> None:
        """Write an entry to the audit log, if there is one, stamped by the run's clock.

        Args:
            kind: a name in :data:`~foreperson.agents.AUDIT_KINDS`.
            **data: what happened (JSON values).

        Raises:
            ConfigurationError: ``kind`` is not registered.
        """
        AUDIT_KINDS.check(kind)
        log = self.guards.audit_log
        if log is not None:
            at = datetime.fromtimestamp(self.clock.now(), UTC)
            log.record(AuditEntry(kind, self.run_id, self.agent_name, self.user_id, at, data))

    def spend(self, usage: Usage) -> None:
        """Count usage this run spent itself (its model and tool calls), here and in
        every run it is nested in.

        Args:
            usage: what one step used (model calls, tokens, tool calls).
        """
        self.own_usage = self.own_usage + usage
        self.add_usage(usage)

    def add_usage(self, usage: Usage) -> None:
        """Count usage of work done outside this run's own steps, here and in every run
        it is nested in: a nested run whose result was replayed from the journal, or a
        worker that ran in another process.

        Never add the result of a nested run started here with :meth:`nested`: its
        usage already flowed up as it was spent (seed 004: a parent step adds 1, a
        nested step adds 1, the parent reads 2, not 3).

        Args:
            usage: what that work used.
        """
        self.usage = self.usage + usage
        parent = self.options.parent
        if parent is not None and parent.context is not None:
            parent.context.add_usage(usage)

    def _budget_chain(self) -> list[RunContext]:
        if self.options.parent is None:
            return [self]
        chain: list[RunContext] = []
        run: RunContext | None = self
        while run is not None:
            chain.append(run)
            parent = run.options.parent
            run = parent.context if parent is not None else None
        return chain

    def token_budget(self) -> int | None:
        """Tokens left before ``Limits.max_tokens`` of this run or of any run it is
        nested in, or None when none has a cap."""
        left: int | None = None
        for run in self._budget_chain():
            cap = run.guards.limits.max_tokens
            if cap is not None:
                remaining = cap - run.usage.total_tokens
                left = remaining if left is None else min(left, remaining)
        return left

    def limit_reached(self) -> tuple[StopReason, str] | None:
        """The cap that forbids another model call, if any (checked before each call).

        Returns:
            ``(stop_reason, detail)``, or None when the run may go on.
        """
        limits = self.guards.limits
        if limits.max_turns is not None and self.turn >= limits.max_turns:
            return "max_turns", f"reached max_turns={limits.max_turns} model calls"
        if self.deadline is not None and anyio.current_time() >= self.deadline:
            return "max_duration", f"reached max_duration_s={limits.max_duration_s} s"
        for run in self._budget_chain():
            cap = run.guards.limits.max_tokens
            if cap is not None and run.usage.total_tokens >= cap:
                if run is self:
                    return "max_tokens", f"used {run.usage.total_tokens} tokens, max_tokens={cap}"
                return "max_tokens", (
                    f"the run it is nested in (agent {run.agent_name!r}, run {run.run_id}) "
                    f"used {run.usage.total_tokens} tokens, its max_tokens={cap}")
        return None

    def deadline_scope(self) -> DeadlineScope:
        """A cancel scope that ends at the run's deadline; wrap one step's wait in it,
        never a ``yield``. Without a deadline, a scope that never cancels (and costs
        nothing)."""
        if self.deadline is None:
            return NO_DEADLINE
        return anyio.CancelScope(deadline=self.deadline)

    def reply_ok(self) -> None:
        """The model's reply was usable: a later empty or cut-off reply gets a
        correction again."""
        self.correcting = False

    def tool_definitions(self) -> list[ToolDefinition]:
        """The tools offered to the model: this run's tools that the guards permit."""
        return [t.definition for t in self.tools.values() if self.guards.permits(t.name)]

    async def publish(self, event: Any) -> None:
        """Send an event to the run's event sink, if it has one (see :data:`EventSink`).

        Args:
            event: any event (the layers above publish their own kinds too).
        """
        sink = self.options.events
        if sink is not None:
            await sink(event)

    # --- steps ------------------------------------------------------------------------

    def call_model(
        self,
        *,
        messages: Sequence[Message] | None = None,
        output_type: type[BaseModel] | None = AGENT_OUTPUT,
        replay_messages: Sequence[Message] | None = None,
    ) -> AsyncIterator[AgentEvent]:
        """Ask the model for its next reply and append it to the conversation: a step
        (``.../turn:T/model``) through the run's step runner.

        An architecture that keeps some of its model calls out of the transcript (the
        teams layer's routing decisions, a supervisor that sees a capped view of its
        workers' outputs) passes ``messages``: the call sends those instead of
        ``messages`` of the run and the reply is not appended (it is in
        ``last_response``). ``output_type`` asks this one call for a structured output
        other than the agent's (a ``RouteDecision``).

        Waits for the rate limiter first; streams text when ``streaming`` (the deltas
        go to the event sink as they arrive). ``max_tokens`` of the call is lowered to
        what is left of the token budget. Tool calls without an id get
        ``call_<turn>_<index>``. When the run's deadline passes during the call, the
        run ends with ``"max_duration"`` and nothing is appended.

        Args:
            messages: the conversation to send instead of the run's (default: the run's,
                and the reply is appended to it).
            output_type: a pydantic model the reply must match, for this call only
                (default: the agent's ``output_type``; None: text).
            replay_messages: with ``messages``, what a journal compares on replay in
                place of them (default: the messages sent): a router's decision
                compares its roster's names, not each worker's instructions.

        Yields:
            :class:`TextDeltaEvent` (streaming without an event sink only), then one
            :class:`ModelCallEvent` (``replayed`` when it came from the journal; a
            replayed reply streams no text deltas). Afterwards ``last_response`` holds
            the reply.

        Raises:
            ModelError: the model call failed (after the model's own retries).
            JournalDivergence: a journaled replay asked the model something else.
        """
        return self.engine.call_model(self, messages, output_type, replay_messages)

    def run_tool_calls(self, calls: Sequence[ToolCall]) -> AsyncIterator[AgentEvent]:
        """Run one turn's tool calls concurrently and append their results in call order.

        Seed 001: tool dispatch is parallel (one anyio task group over all the calls of
        a turn), so two delegate calls run at the same time. Sync tools run in worker
        threads. Each call is a step (``.../turn:T/tool:I``), its approval another. A
        failure of a tool (unknown, not permitted, invalid arguments, denied, raised,
        past its timeout) becomes an error result the model can correct. With
        ``max_tool_calls``, the calls that fit run; the others get an error result and
        the run ends with ``"max_tool_calls"``; at the run's deadline the unfinished
        calls get an error result and the run ends with ``"max_duration"``.

        Yields:
            A :class:`ToolCallEvent` per call, then a :class:`ToolResultEvent` per call,
            in call order.

        Raises:
            Exception: what a hook, a guardrail or the approval handler raised.
            ConfigurationError: the approval handler returned something else than an
                :class:`Approval`.
            JournalDivergence: a journaled replay diverged.
        """
        return self.engine.run_tool_calls(self, calls)

    async def check_guardrails(
        self, guardrails: Sequence[Callable[..., Any]], value: Any
    ) -> str | None:
        """Run guardrails in order on ``value``.

        Returns:
            The first reason to block, or None when all let it through.

        Raises:
            ConfigurationError: a guardrail returned something other than a string or
                None.
        """
        return await self.engine.check_guardrails(self, guardrails, value)

    async def accept_final(self, response: ModelResponse) -> None:
        """Take a reply without tool calls as the final answer.

        A reply that is empty or cut by the token limit (``finish_reason`` ``"length"``
        / ``"max_tokens"``) is sent back once for correction; a second one in a row
        ends the run with ``"empty_reply"`` / ``"truncated"``. With an
        ``output_type``, an answer that does not validate is sent back to the model
        with its errors (``Limits.max_output_retries`` times) and the run goes on.
        Output guardrails then check the output. On success the run ends
        ``"completed"``.

        Raises:
            OutputValidationError: the answer still does not validate.
        """
        await self.engine.accept_final(self, response)

    async def step(
        self,
        kind: str,
        execute: Callable[[], Awaitable[T]],
        *,
        name: str | None = None,
        request: Any = None,
        codec: StepCodec[T] = JSON_CODEC,
    ) -> StepOutcome[T]:
        """Run a step of your own through the run's step runner (journaled with a
        journal): a delegation, a routing decision, anything whose result must not be
        produced twice.

        The key is ``<position>/<kind>:<name>`` (see :meth:`position`). While
        ``execute`` runs, the position is that key, so nested runs and steps started
        inside it nest under it.

        Args:
            kind: what it is (``"delegation"``, ``"route"``...), recorded with it.
            execute: produces the result.
            name: the key's last part; default the count of ``kind`` steps at this
                position (``1``, ``2``...). Name steps that run concurrently at one
                position, so their keys do not depend on timing.
            request: JSON of what the step asks; a replay asking something else
                raises :class:`~foreperson.journal.JournalDivergence`.
            codec: turns the result into JSON and back (default: it already is JSON).

        Returns:
            The result, and whether it was replayed from the journal.

        Raises:
            JournalDivergence: the recorded step under this key asked something else.
            Exception: what ``execute`` raised (nothing is recorded then).
        """
        position = self.position()
        if name is None:
            count = self._step_counts.get((position, kind), 0) + 1
            self._step_counts[(position, kind)] = count
            name = str(count)
        key = f"{position}/{kind}:{name}"

        async def execute_here() -> T:
            token = POSITION.set((self, key))
            try:
                return await execute()
            finally:
                POSITION.reset(token)

        spec = StepSpec(self.journal_run_id, key, kind, lambda: request, codec)
        return await self.steps.run(spec, execute_here)

    async def spawn(
        self, role: str, instructions: str, *, data: dict[str, Any] | None = None
    ) -> SpawnRecord:
        """Record the spawn of a worker (seed 001's ``spawn_worker``): a step
        (``<position>/spawn:ROLE``) whose result is the worker's role, instructions and
        a new id from the run's id source. On replay the recorded record comes back (the
        same id), so the caller rebuilds the worker as it was; call it from a tool
        declared ``journaled=False`` so that rebuilding happens on replay too.

        Args:
            role: the worker's role; unique in the run (the caller checks it).
            instructions: its system prompt.
            data: anything else to get back on replay (JSON values).

        Returns:
            The record.

        Raises:
            JournalDivergence: the recorded spawn had another role, instructions or data.
        """
        return (await self.engine.spawn(self, role, instructions, data)).value

    async def spawn_step(
        self, role: str, instructions: str, *, data: dict[str, Any] | None = None
    ) -> StepOutcome[SpawnRecord]:
        """:meth:`spawn`, also saying whether the record was replayed from the journal
        (for events that mark replayed steps).

        Args:
            role: as :meth:`spawn`.
            instructions: as :meth:`spawn`.
            data: as :meth:`spawn`.

        Returns:
            The record and whether it was replayed.

        Raises:
            JournalDivergence: as :meth:`spawn`.
        """
        return await self.engine.spawn(self, role, instructions, data)

    def nested(self, name: str | None = None) -> RunOptions:
        """Options for a run nested in this one at the current position (from inside a
        tool or a step): same step runner (its steps journal under this run), clock, id
        source and event sink; usage flows up to this run as it is spent.

        Example (a tool that consults another agent)::

            async def consult(ctx: RunContext, question: str) -> str:
                result = await expert.run(question, options=ctx.nested())
                return result.text or ""

        Args:
            name: an extra path part, to tell apart nested runs of one agent at one
                position (default: a second nested run there gets ``run:2``, and so on).

        Returns:
            The options to pass as ``options=`` to ``Agent.run`` (or ``stream``), which
            must be awaited on this run's event loop.
        """
        path = self.position() if name is None else f"{self.position()}/{name}"
        count = self._nested_counts.get(path, 0) + 1
        self._nested_counts[path] = count
        if count > 1:
            path = f"{path}/run:{count}"
        parent = ParentRun(self.run_id, path, self.level + 1, self.journal_run_id,
                           self.user_id, self.streaming, context=self)
        options = self.options
        return RunOptions(steps=options.steps, clock=options.clock, ids=options.ids,
                          parent=parent, events=options.events, runtime=options.runtime)

    async def run_agent(
        self,
        agent: AgentView,
        prompt: str,
        *,
        kind: str = "delegation",
        name: str | None = None,
        message_history: Sequence[Message] | None = None,
    ) -> RunResult[Any]:
        """Run another agent nested in this run, as one step whose result is its run
        result (the teams layer's delegation).

        With a journal: a finished nested run is replayed whole (its model is not called
        again) and its recorded usage is counted here; an unfinished one runs again and
        its own finished steps replay (they journal under this run). Either way this
        run's usage counts the nested run once.

        Args:
            agent: the agent to run.
            prompt: its prompt.
            kind: the step's kind (default ``"delegation"``).
            name: the step key's last part (default a count at this position).
            message_history: an earlier conversation of that agent to continue.

        Returns:
            The nested run's result (its ``usage`` is its own).

        Raises:
            JournalDivergence: the recorded step asked another agent or prompt.
            ModelError, OutputValidationError: as ``Agent.run``.
        """
        output_type = agent.output_type
        codec: StepCodec[RunResult[Any]] = StepCodec(
            dump_run_result, lambda data: load_run_result(data, output_type))

        async def execute() -> RunResult[Any]:
            return await agent.run(prompt, options=self.nested(),
                                   message_history=message_history)

        outcome = await self.step(kind, execute, name=name, codec=codec,
                                  request={"agent": agent.name, "prompt": prompt})
        if outcome.replayed:
            self.add_usage(outcome.value.usage)
        return outcome.value

    # --- the result -------------------------------------------------------------------

    def last_text(self) -> str | None:
        """The last non-empty text the model wrote in this conversation."""
        for message in reversed(self.messages):
            if isinstance(message, ModelResponse) and message.text:
                return message.text
        return None

    def produced_text(self) -> str | None:
        """What the run produced: the model's last text or, when it wrote none, the
        last successful tool result (else the last tool result); None when nothing."""
        text = self.last_text()
        if text is not None:
            return text
        last_error: str | None = None
        for message in reversed(self.messages):
            if isinstance(message, ToolReturn):
                if not message.is_error:
                    return message.content
                if last_error is None:
                    last_error = message.content
        return last_error

    def to_result(self) -> RunResult[Any]:
        """The run's result (call once it has ended).

        Raises:
            RuntimeError: the run has not ended.
        """
        if self.stop_reason is None:
            raise RuntimeError(f"run {self.run_id} has not ended (ctx.end(...))")
        last = self.last_response
        result: RunResult[Any] = RunResult(
            output=self.output if self.stop_reason == "completed" else None,
            text=self.produced_text(),
            messages=self.messages,
            usage=self.usage,
            stop_reason=self.stop_reason,
            run_id=self.run_id,
            agent=self.agent_name,
            detail=self.detail,
            finish_reason=last.finish_reason if last is not None else None,
            pending=self.pending,
        )
        if self.result_hook is not None:
            result = self.result_hook(result)
        return result

    def check_thread(self) -> None:
        """Refuse to host a nested run from another thread (its usage and events would
        race with this run's).

        Raises:
            ConfigurationError: called from another thread than the run's.
        """
        if threading.get_ident() != self._thread:
            raise ConfigurationError(
                f"agent {self.agent_name!r} run {self.run_id}: a nested run must run on its "
                "parent's event loop; make the tool async and `await agent.run(..., "
                "options=ctx.nested())` (not run_sync from a sync tool)")
