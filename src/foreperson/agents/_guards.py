"""Guards: everything that bounds or watches an agent's run, in one object.

Seed 001: a spawned worker inherits its template's guards, "its permissions, hooks,
approval handler, guardrails, rate limiter, audit log and limits"; keeping them in one
frozen :class:`Guards` value lets a template hand them on whole (``agent.clone()``).
Each guard ends a run with a result or a clear error, never a hang.
"""

from __future__ import annotations

import fnmatch
import json
import math
import threading
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import anyio

from ..errors import ConfigurationError
from ..models import ToolCall, ToolReturn
from ._vocabulary import Vocabulary

__all__ = [
    "AUDIT_KINDS",
    "AfterToolHook",
    "Approval",
    "PendingApproval",
    "ask_later",
    "ApprovalHandler",
    "AuditEntry",
    "AuditLog",
    "BeforeToolHook",
    "Guardrail",
    "Guards",
    "JsonlAuditLog",
    "Limits",
    "MemoryAuditLog",
    "RateLimiter",
]


@dataclass(frozen=True)
class Limits:
    """Caps on one run. Reaching one ends the run with a result whose ``stop_reason`` is
    the cap's name and which keeps what was produced so far (every cap ends a run
    with a result, not an exception). Caps are checked before each model call, so
    the tools of the last allowed turn still run.

    Each run has its own caps: a run nested in another (a worker run from inside a tool
    of its supervisor) counts its own turns and tool calls against its own limits, and
    its tokens against its own ``max_tokens`` and every enclosing run's.

    Attributes:
        max_turns: model calls per run (default 20; None: no cap). Stop reason
            ``"max_turns"``.
        max_tool_calls: tool calls per run (default None). The calls of a turn that fit
            run; the rest get an error result and the run stops with
            ``"max_tool_calls"``.
        max_tokens: input plus output tokens per run, including the runs nested in it
            (default None). Stop reason ``"max_tokens"``. What is left of it is each
            model call's ``max_tokens`` setting, so one reply cannot overshoot the cap
            by more than its own prompt.
        max_output_retries: times an answer that does not match ``output_type`` is sent
            back to the model with its validation errors before
            :class:`~foreperson.errors.OutputValidationError` is raised (default 1).
        max_duration_s: wall-clock seconds per run (default None: no cap). A model
            call, tool call or approval still running at the deadline is abandoned (an
            unfinished tool call gets an error result) and the run ends with stop
            reason ``"max_duration"``.

    Raises:
        ConfigurationError: a negative cap, ``max_turns`` of 0, or a ``max_duration_s``
            that is not a positive number of seconds.
    """

    max_turns: int | None = 20
    max_tool_calls: int | None = None
    max_tokens: int | None = None
    max_output_retries: int = 1
    max_duration_s: float | None = None

    def __post_init__(self) -> None:
        for name in ("max_turns", "max_tool_calls", "max_tokens", "max_output_retries"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ConfigurationError(
                    f"Limits.{name} must be >= 0, got {value}; use None for no cap")
        if self.max_turns == 0:
            raise ConfigurationError(
                "Limits.max_turns must be >= 1 (a run needs one model call); use None for "
                "no cap")
        duration = self.max_duration_s
        if duration is not None and not (isinstance(duration, int | float) and duration > 0):
            raise ConfigurationError(
                f"Limits.max_duration_s must be a positive number of seconds, got "
                f"{duration!r}; use None for no cap")


@dataclass(frozen=True)
class Approval:
    """A human's decision on one tool call (see ``Guards.approval``).

    Build one with :meth:`approve`, :meth:`deny` or :meth:`edit`; :meth:`pending` says
    there is no decision yet (a durable run then parks until one is recorded).

    Attributes:
        decision: ``"approve"``, ``"deny"``, ``"edit"``, or ``"pending"`` (never
            recorded: the run waits).
        arguments: the replacement arguments, for ``"edit"``.
        reason: why, for ``"deny"``; the model reads it.
    """

    decision: Literal["approve", "deny", "edit", "pending"]
    arguments: dict[str, Any] | None = None
    reason: str | None = None

    @classmethod
    def approve(cls) -> Approval:
        """Run the call as the model wrote it."""
        return cls("approve")

    @classmethod
    def deny(cls, reason: str = "a human declined this call") -> Approval:
        """Do not run the call; the model gets ``reason`` as an error result."""
        return cls("deny", reason=reason)

    @classmethod
    def edit(cls, arguments: dict[str, Any]) -> Approval:
        """Run the call with these arguments instead (validated again)."""
        return cls("edit", arguments=dict(arguments))

    @classmethod
    def pending(cls) -> Approval:
        """No decision yet: the request is journaled and the run parks (it ends with
        stop reason ``"awaiting_approval"``, and its process may exit) until a decision
        is recorded (``runtime.approve`` / ``runtime.deny``, ``foreperson runs approve``);
        resuming it then continues from this call, replaying every step before it.
        Needs a journaled run (a runtime, or ``JournaledSteps``)."""
        return cls("pending")


@dataclass(frozen=True)
class PendingApproval:
    """A tool call a parked run waits on (``RunResult.pending``,
    ``runtime.pending(run_id)``).

    Attributes:
        call_id: the tool call's id (what ``runtime.approve(run_id, call_id)`` takes).
        tool: the tool's name.
        arguments: the arguments the model wrote.
        key: the approval's step key in the run's journal
            (``agent:NAME/turn:T/tool:I/approval``): unique in the run, where a call id
            may not be (two workers' first calls).
        agent: the agent that made the call (a worker, in a team).
        run_id: the run the call belongs to (a nested run's own id for a worker).
        digest: the approval step's request digest (a recorded decision must carry it).
    """

    call_id: str
    tool: str
    arguments: dict[str, Any]
    key: str
    agent: str
    run_id: str
    digest: str


# The hooks below are given the run's RunContext as ``ctx``; it is typed Any here, since
# the run's state (which holds these guards) sits above this module, so a hook annotated
# ``ctx: RunContext`` fits each alias.

ApprovalHandler = Callable[[ToolCall, Any], "Approval | Awaitable[Approval]"]
"""``(call, ctx) -> Approval``, sync or async (``ctx``: the run's
:class:`~foreperson.agents.RunContext`): asks a human about one tool call. Its
decision is a journaled step (``.../tool:N/approval``): a replayed run does not ask
again. Returning :meth:`Approval.pending` parks a durable run until the decision comes
from elsewhere (see :func:`ask_later`)."""


async def ask_later(call: ToolCall, ctx: object) -> Approval:
    """The approval handler of durable runs: it never decides on the spot.

    ``Guards(approval=ask_later, approval_required={"refund"})``: a call to ``refund``
    journals its request and parks the run (stop reason ``"awaiting_approval"``,
    ``result.pending``); the process may exit. A human decides later, from any process
    (``runtime.approve(run_id, call_id)`` / ``runtime.deny(...)``, or ``foreperson runs
    approve RUN_ID CALL_ID``), and ``agent.resume(run_id, runtime=...)`` continues from
    that call, re-executing nothing before it.

    Args:
        call: the tool call.
        ctx: its run (a :class:`~foreperson.agents.RunContext`).

    Returns:
        :meth:`Approval.pending`, always.
    """
    return Approval.pending()

BeforeToolHook = Callable[[ToolCall, Any], "ToolCall | None | Awaitable[ToolCall | None]"]
"""``(call, ctx) -> ToolCall | None``: runs before each tool call (before approval);
returning a ToolCall replaces the call, None keeps it. An exception ends the run."""

AfterToolHook = Callable[
    [ToolCall, ToolReturn, Any], "ToolReturn | None | Awaitable[ToolReturn | None]"
]
"""``(call, result, ctx) -> ToolReturn | None``: runs after each tool call (also failed
ones); returning a ToolReturn replaces the result the model sees."""

Guardrail = Callable[[Any, Any], "str | None | Awaitable[str | None]"]
"""``(value, ctx) -> str | None``: checks the prompt (input guardrail) or the final
output (output guardrail). Return the reason to block, or None to let it through. A
block ends the run with stop reason ``"input_guardrail"`` / ``"output_guardrail"``."""


AUDIT_KINDS = Vocabulary("audit kind", {
    "run_start": "a run started: its model, prompt and tools (and its parent, if nested)",
    "model_call": "a model call ended: turn, model, tokens, tool names, finish reason, "
                  "duration, or the error",
    "tool_call": "a tool call ended: name, arguments, result, error flag, approval "
                 "decision, duration",
    "spawn": "a worker was spawned in the run: role, worker id",
    "run_end": "a run ended: stop reason, detail and usage, or the error",
})
"""The registry of audit entry kinds; ``AUDIT_KINDS.register(name, meaning)`` adds one
(the teams layer: ``"route"`` …). ``RunContext.audit`` refuses an unregistered kind."""


@dataclass(frozen=True)
class AuditEntry:
    """One line of the audit log.

    Attributes:
        kind: one of :data:`AUDIT_KINDS`: ``"run_start"``, ``"model_call"``,
            ``"tool_call"``, ``"spawn"``, ``"run_end"``, or one the layers above
            registered.
        run_id: the run.
        agent: the agent's name.
        user_id: the user the run serves, or None.
        at: when, timezone-aware UTC (from the run's clock, ``RunOptions.clock``).
        data: what happened: for a model call the turn, model, usage, tool names and
            duration (seconds) or the error; for a tool call the name, arguments,
            result, error flag, approval decision and duration (seconds); for the end of
            a run its stop reason and usage, or its error.
    """

    kind: str
    run_id: str
    agent: str
    user_id: str | None
    at: datetime
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        """The entry as one line of JSON (``at`` in ISO 8601)."""
        record = asdict(self)
        record["at"] = self.at.isoformat()
        return json.dumps(record, default=str, separators=(",", ":"))


@runtime_checkable
class AuditLog(Protocol):
    """Where audit entries go. ``record`` is called on the event loop: keep it quick."""

    def record(self, entry: AuditEntry) -> None:
        """Store one entry."""
        ...


class MemoryAuditLog:
    """Keeps entries in a list (``entries``); thread-safe."""

    def __init__(self) -> None:
        self.entries: list[AuditEntry] = []
        self._lock = threading.Lock()

    def record(self, entry: AuditEntry) -> None:
        """Append one entry."""
        with self._lock:
            self.entries.append(entry)

    def of_kind(self, kind: str) -> list[AuditEntry]:
        """The entries of one kind, in order."""
        with self._lock:
            return [e for e in self.entries if e.kind == kind]


class JsonlAuditLog:
    """Appends each entry as one JSON line to a file, flushed at once, so a crash loses
    at most the entry being written.

    Args:
        path: the file; created if missing, appended to otherwise.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def record(self, entry: AuditEntry) -> None:
        """Append one line."""
        line = entry.to_json() + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as handle:
            handle.write(line)

    def read(self) -> list[dict[str, Any]]:
        """Every entry written so far, as dicts."""
        if not self.path.exists():
            return []
        with self.path.open(encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]


class RateLimiter:
    """Spaces requests to a model: at most ``requests_per_s`` on average, with bursts of
    up to ``burst`` back to back (a generic cell-rate algorithm: each caller reserves
    the next free slot and sleeps until it comes, so waiting callers keep their order).

    One limiter may be shared by many agents (a template and its clones, every worker
    of a team) to bound their combined rate.

    Args:
        requests_per_s: the sustained rate, requests per second (> 0).
        burst: requests allowed back to back after a quiet period (>= 1, default 1).
        clock: current time in seconds (default ``anyio.current_time``).
        sleep: how to wait (default ``anyio.sleep``).

    Raises:
        ConfigurationError: ``requests_per_s`` is not a positive finite number, or
            ``burst`` is not an integer >= 1.
    """

    def __init__(
        self,
        requests_per_s: float,
        *,
        burst: int = 1,
        clock: Callable[[], float] | None = None,
        sleep: Callable[[float], Awaitable[None]] | None = None,
    ) -> None:
        if not (isinstance(requests_per_s, int | float) and 0 < requests_per_s < math.inf):
            raise ConfigurationError(
                f"RateLimiter: requests_per_s must be a positive number of requests per "
                f"second, got {requests_per_s!r}; for no limit, leave Guards.rate_limiter None")
        if not isinstance(burst, int) or burst < 1:
            raise ConfigurationError(
                f"RateLimiter: burst must be an integer >= 1 (requests allowed back to "
                f"back), got {burst!r}")
        self.requests_per_s = requests_per_s
        self.burst = burst
        self._interval = 1.0 / requests_per_s
        self._clock = clock or anyio.current_time
        self._sleep = sleep or anyio.sleep
        self._next: float | None = None  # theoretical arrival time of the next request
        self._lock = threading.Lock()

    def reserve(self) -> float:
        """Take the next slot without waiting.

        Returns:
            Seconds to wait before using it (0 when it is free now).
        """
        with self._lock:
            now = self._clock()
            arrival = now if self._next is None else max(self._next, now)
            wait = arrival - (self.burst - 1) * self._interval - now
            self._next = arrival + self._interval
            return max(0.0, wait)

    async def acquire(self) -> float:
        """Wait for a slot.

        Returns:
            The seconds waited.
        """
        wait = self.reserve()
        if wait > 0:
            await self._sleep(wait)
        return wait


def _tuple(value: Any) -> tuple[Any, ...]:
    if value is None:
        return ()
    if callable(value):
        return (value,)
    return tuple(value)


@dataclass(frozen=True)
class Guards:
    """Every guard of an agent, in one value that clones whole (seed 001: spawned workers
    inherit the template's permissions, hooks, approval handler, guardrails, rate
    limiter, audit log and limits).

    Attributes:
        limits: caps on turns, tool calls and tokens (default :class:`Limits`).
        allowed_tools: names of the tools the agent may call (None: all). Others are
            not offered to the model, and a call to one gets an error result.
        before_tool: hooks run before each tool call (see :data:`BeforeToolHook`).
        after_tool: hooks run after each tool call (see :data:`AfterToolHook`).
        approval: asks a human about tool calls (see :data:`ApprovalHandler`); None
            runs every call without asking.
        approval_required: the tools that need approval, by name or ``fnmatch`` pattern
            (``"crm_*"``); None: all of them, when an approval handler is set.
        approval_timeout_s: seconds to wait for a decision; past it the call is denied
            (None: wait as long as it takes).
        tool_timeout_s: seconds a tool call may run (default None: no bound); a tool's
            own ``timeout_s`` (``@tool(timeout_s=...)``) overrides it. Past it the model
            gets an error result naming the bound, and a sync tool's thread is abandoned
            (it cannot be stopped; it finishes in the background).
        input_guardrails: checks on the prompt, before any model call.
        output_guardrails: checks on the final output.
        rate_limiter: spaces the model calls (shared when the guards are cloned).
        audit_log: receives an entry for every run start and end, model call and tool
            call (shared when the guards are cloned).

    Raises:
        ConfigurationError: ``tool_timeout_s`` is not a positive number of seconds.
    """

    limits: Limits = field(default_factory=Limits)
    allowed_tools: frozenset[str] | None = None
    before_tool: tuple[BeforeToolHook, ...] = ()
    after_tool: tuple[AfterToolHook, ...] = ()
    approval: ApprovalHandler | None = None
    approval_required: frozenset[str] | None = None
    approval_timeout_s: float | None = None
    tool_timeout_s: float | None = None
    input_guardrails: tuple[Guardrail, ...] = ()
    output_guardrails: tuple[Guardrail, ...] = ()
    rate_limiter: RateLimiter | None = None
    audit_log: AuditLog | None = None

    def __post_init__(self) -> None:
        # accept lists, sets and single callables; store tuples and frozensets
        for name in ("before_tool", "after_tool", "input_guardrails", "output_guardrails"):
            object.__setattr__(self, name, _tuple(getattr(self, name)))
        for name in ("allowed_tools", "approval_required"):
            value = getattr(self, name)
            if value is not None:
                if isinstance(value, str):
                    value = (value,)
                object.__setattr__(self, name, frozenset(value))
        timeout = self.tool_timeout_s
        if timeout is not None and not (isinstance(timeout, int | float) and timeout > 0):
            raise ConfigurationError(
                f"Guards.tool_timeout_s must be a positive number of seconds, got "
                f"{timeout!r}; use None for no bound")

    def permits(self, tool_name: str) -> bool:
        """Whether the agent may call ``tool_name``."""
        return self.allowed_tools is None or tool_name in self.allowed_tools

    def needs_approval(self, tool_name: str) -> bool:
        """Whether a call to ``tool_name`` waits for the approval handler: every call when
        ``approval_required`` is None, else those it names, an entry holding ``*``, ``?``
        or ``[`` read as an ``fnmatch`` pattern (``{"crm_write_*"}``: every tool of an MCP
        server's whose names start so)."""
        if self.approval is None:
            return False
        required = self.approval_required
        return required is None or tool_name in required or any(
            fnmatch.fnmatchcase(tool_name, pattern) for pattern in required
            if any(c in pattern for c in "*?["))

    def replace(self, **changes: Any) -> Guards:
        """A copy with some fields changed (``guards.replace(limits=Limits(max_turns=3))``)."""
        return replace(self, **changes)


def utc_now() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)
