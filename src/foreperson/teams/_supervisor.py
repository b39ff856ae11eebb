"""Seed 001's supervisor architecture (``TeamSupervisor``, built by ``Team.supervisor``):
a manager model with ``delegate``, ``forward_message`` and (``allow_spawn``)
``spawn_worker`` tools, on the ReAct loop, so several delegate calls of one turn run
concurrently.

Deciding is the model's; routing and capping are plain code that reads the counters
first (seed 004). Before a turn's tool calls run, the turn is planned in call order:
each delegate call is resolved against the roster and checked against the caps
(specialist calls per run, per worker, per turn) and the loop rule, so which calls run
never depends on timing; the refused ones come back as ``skipped: cap`` /
``skipped: loop`` results and the run then ends with ``stop_reason`` ``"cap"`` /
``"loop"``, keeping every worker output and a best-effort answer.
"""

from __future__ import annotations

import json
import keyword
import math
import re
import warnings
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, create_model

from ..agents import Agent, AgentEvent, RunContext, Tool
from ..errors import ConfigurationError
from ..models import Message, ModelResponse, SystemMessage, ToolCall, ToolReturn, UserMessage
from ..work import MemoryStore, TaskStore
from ..work.hold import store_call
from ..work.leases import DEFAULT_LEASE_S
from ._events import LoopDetectedEvent, WorkerSpawnedEvent
from ._records import Delegation, RouteRecord
from ._run import (
    TeamRun,
    TeamStore,
    check_roster,
    failure_report,
    is_running_above,
    resolve_worker,
    team_run_of,
)

__all__ = ["TeamSupervisor"]

_TOOL_INDEX = re.compile(r"/tool:(\d+)$")
_TEAM_TOOLS = ("delegate", "forward_message", "spawn_worker", "read_output")


def _args_model(name: str, *fields: str) -> type[BaseModel]:
    model: type[BaseModel] = create_model(  # type: ignore[call-overload]
        f"{name}_arguments", __config__=ConfigDict(extra="forbid"),
        **{f: (str, ...) for f in fields})
    return model


_DELEGATE_ARGS = _args_model("delegate", "worker", "instructions")
_WORKER_ARGS = _args_model("worker", "worker")
_SPAWN_ARGS = _args_model("spawn_worker", "role", "instructions")


def _positive(name: str, value: Any, *, allow_none: bool = True, minimum: int = 1) -> None:
    if value is None and allow_none:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigurationError(
            f"TeamSupervisor({name}={value!r}): give an integer >= {minimum}"
            + (" or None for no cap" if allow_none else ""))


def _seconds(name: str, value: Any, *, allow_none: bool = True) -> None:
    if value is None and allow_none:
        return
    if not isinstance(value, int | float) or isinstance(value, bool) or not value >= 0 \
            or value == math.inf:
        raise ConfigurationError(
            f"TeamSupervisor({name}={value!r}): give a number of seconds >= 0")


def _stale_after(shape: str, stale_after: float, lease_s: float | None) -> float:
    """The delegation lease of a team shape, seconds: ``stale_after``, or ``lease_s``,
    its deprecated name (a warning says so)."""
    if lease_s is not None:
        warnings.warn(f"{shape}(lease_s=) is now stale_after= (the work layer's name for "
                      "the same lease); lease_s will be removed", DeprecationWarning,
                      stacklevel=3)
        stale_after = lease_s
    _seconds("stale_after", stale_after, allow_none=False)
    return float(stale_after)


def _typed(output: Any, output_type: type[BaseModel] | None) -> Any:
    """A worker's recorded output (JSON) as its agent returned it: an instance of its
    ``output_type`` when it has one, else as recorded."""
    if output_type is not None and isinstance(output, dict):
        return output_type.model_validate(output)
    return output


def _describe(agent: Agent[Any]) -> str:
    first = " ".join(agent.instructions.split())
    return first if len(first) <= 160 else first[:157] + "..."


def _same_instructions(text: str) -> str:
    return " ".join(text.split())


def _capped(text: str | None, limit: int) -> str:
    if text is None:
        return ""
    return text if len(text) <= limit else text[:limit] + "..."


def _error(text: str) -> ToolReturn:
    return ToolReturn("", "", f"error: {text}", is_error=True)


@dataclass(frozen=True)
class _Go:
    worker: str
    instructions: str
    raw_worker: str


@dataclass(frozen=True)
class _Spawn:
    role: str
    instructions: str


class _SupervisorRun(TeamRun):
    """The state of one supervisor run."""

    def __init__(self, ctx: RunContext, arch: TeamSupervisor, store: TaskStore) -> None:
        super().__init__(ctx, arch, store)
        self.arch = arch
        self.spawned: dict[str, Agent[Any]] = {}
        self.spawn_ids: dict[str, str] = {}
        self.plan: dict[int, _Go | _Spawn | ToolReturn] = {}
        self.forwards: dict[int, str] = {}
        self.before_turn: dict[str, Delegation] = {}
        self.answered: dict[tuple[str, str], int] = {}
        self.end_after_turn: tuple[str, str] | None = None
        self.refused = False
        self.synthesis: str | None = None
        self.prompt_index = len(ctx.messages) - 1

    def roster_names(self) -> list[str]:
        return [*self.arch.roster, *self.spawned]

    def agent_for(self, name: str) -> Agent[Any]:
        return self.arch.roster[name] if name in self.arch.roster else self.spawned[name]

    def latest(self) -> dict[str, Delegation]:
        """Each worker's latest completed delegation."""
        latest: dict[str, Delegation] = {}
        for delegation in self.delegations:
            if delegation.completed:
                latest[delegation.worker] = delegation
        return latest

    def best_effort(self, result: Any) -> str | None:
        """Seed 004's "best effort" for a supervisor: its last synthesis (text it wrote
        after worker outputs came back), else the last worker output."""
        if self.synthesis is not None:
            return self.synthesis
        return super().best_effort(result)


class TeamSupervisor(TeamStore):
    """Seed 001's supervisor architecture: the agent's model manages a team of worker
    agents through tools, on the ReAct loop.

    ``Agent(instructions, model=..., architecture=TeamSupervisor(workers=...))`` is exactly
    what ``Team.supervisor(workers=..., instructions=..., model=...)`` builds. The model
    gets these tools besides the agent's own:

    * ``delegate(worker, instructions)``: the worker (its name is an enum in the
      schema) runs to completion on the instructions, in a conversation of its own; its
      final answer is the tool result. Several delegate calls of one turn run
      concurrently (seed 001: parallel delegation for free), several to one worker
      included. A worker that raises, stops on its own limit or times out comes back
      as ``{"completed": false, "worker", "reason", "produced"}`` (an error result),
      never as an empty answer.
    * ``forward_message(worker)``: that worker's latest output (from an earlier turn)
      becomes the final answer verbatim; no further model call.
    * ``spawn_worker(role, instructions)`` (``allow_spawn``): a new worker for this run
      only, delegable from the next turn.
    * ``read_output(worker)`` (``context="capped"``): a worker's whole latest output.

    Correctable mistakes (an unknown or ambiguous worker, empty instructions, a worker
    with no output to forward, a bad role, a spawn over the cap) come back as error
    results the model can correct; case and surrounding whitespace in a worker name are
    forgiven only when exactly one name matches.

    Caps end the run with a result (``stop_reason == "cap"``), never an exception, and
    are checked in call order before a turn's calls run (seed 004: the counter is read
    before the model's choice): with ``max_fan_out=3`` and 8 delegate calls in one turn,
    exactly 3 run and 5 come back as ``skipped: cap``. A delegation identical to one
    already answered (same worker, same instructions) or to a team running above this
    one (ping-pong) ends the run with ``"loop"``; the same delegation asked twice in one
    turn runs once (the second call's result says it is the first's, and counts no
    specialist call). ``recursion_limit`` is the backstop that raises.

    Every delegation is a journaled step (``.../turn:T/tool:I/delegation:WORKER``) and a
    work-layer task in ``store`` (see :class:`~foreperson.teams.Delegation`).

    Args:
        workers: the fixed roster: name -> agent (a team is an agent). An agent whose
            name differs is used under its roster name.
        allow_spawn: offer ``spawn_worker`` (seed 001; default False).
        max_spawned: spawned workers per run (default 5).
        spawn_template: the agent spawned workers clone: its model, tools and guards
            (permissions, hooks, approval handler, guardrails, rate limiter, audit log,
            limits). None: the supervisor's model, no tools, default guards.
        max_specialist_calls: worker runs per run (default 6, seed 004's
            ``MAX_SPECIALIST_CALLS``).
        max_calls_per_worker: worker runs per worker per run (default None: no cap).
        max_fan_out: delegate calls run per model turn (default None: no cap).
        max_turns: the supervisor's own model calls per run, a team cap ending with
            ``"cap"`` (default None; the agent's ``Limits.max_turns`` still applies and
            ends with ``"max_turns"``).
        min_delegations: worker runs required before an answer is accepted (default 0);
            an answer before that is sent back to the model once, and the route log
            says so.
        context: ``"transcript"`` (default: the model reads its whole conversation,
            worker outputs included) or ``"capped"`` (seed 003: it reads its request, a
            context block with each worker's latest output capped at ``context_chars``
            characters, and only its latest exchange; ``read_output`` gives a whole
            output from the store), so its prompt stays flat in the number of
            delegations.
        context_chars: the cap per value of the capped context block (default 300).
        store: where delegations are recorded as tasks (any
            :class:`~foreperson.work.TaskStore`). None: the store of the team this one
            is nested in, else the durable runtime's of a run with ``runtime=`` (its
            journal's database), else a :class:`~foreperson.work.MemoryStore` of this
            supervisor's own (:attr:`store`), which keeps every run's delegations.
        max_attempts: worker runs per delegation; a worker that raises a retryable
            error is run again, after the work layer's backoff, while attempts remain
            (default 1: the model providers' adapters already retry their calls; a
            worker in a worker process that dies counts an attempt too, so give teams
            with ``remote_workers`` 2 or more).
        retry_backoff_s: first retry delay, seconds (default 2; doubles per attempt,
            with jitter).
        worker_timeout_s: seconds a delegation may run before the worker is cancelled
            and the delegation fails (default None: the worker's own limits bound it).
        stale_after: the lease of a delegation's task, seconds, renewed every third of
            it while the worker runs (default 90); a process that stops renewing (it
            died) loses the task after it.
        lease_s: the deprecated name of ``stale_after``.
        recursion_limit: the backstop: supervisor model calls plus worker runs per run
            (default 25, seed 004); past it :class:`~foreperson.errors.RecursionLimitExceeded`
            is raised.

    Raises:
        ConfigurationError: a bad roster or option.
    """

    def __init__(
        self,
        workers: Mapping[str, Agent[Any]],
        *,
        allow_spawn: bool = False,
        max_spawned: int = 5,
        spawn_template: Agent[Any] | None = None,
        max_specialist_calls: int | None = 6,
        max_calls_per_worker: int | None = None,
        max_fan_out: int | None = None,
        max_turns: int | None = None,
        min_delegations: int = 0,
        context: Literal["transcript", "capped"] = "transcript",
        context_chars: int = 300,
        store: TaskStore | None = None,
        max_attempts: int = 1,
        retry_backoff_s: float = 2.0,
        worker_timeout_s: float | None = None,
        stale_after: float = DEFAULT_LEASE_S,
        recursion_limit: int = 25,
        lease_s: float | None = None,
    ) -> None:
        if not isinstance(workers, Mapping):
            raise ConfigurationError(
                f"TeamSupervisor(workers=...) takes a mapping of name -> Agent, got "
                f"{type(workers).__name__}")
        self._roster = check_roster("supervisor", workers)
        caps = {"max_specialist_calls": max_specialist_calls,
                "max_calls_per_worker": max_calls_per_worker, "max_fan_out": max_fan_out,
                "max_turns": max_turns}
        for name, value in caps.items():
            _positive(name, value)
        _positive("max_spawned", max_spawned, allow_none=False, minimum=0)
        _positive("min_delegations", min_delegations, allow_none=False, minimum=0)
        _positive("context_chars", context_chars, allow_none=False, minimum=20)
        _positive("max_attempts", max_attempts, allow_none=False)
        _positive("recursion_limit", recursion_limit, allow_none=False)
        _seconds("retry_backoff_s", retry_backoff_s, allow_none=False)
        _seconds("worker_timeout_s", worker_timeout_s)
        self.stale_after = _stale_after("TeamSupervisor", stale_after, lease_s)
        if context not in ("transcript", "capped"):
            raise ConfigurationError(
                f"TeamSupervisor(context={context!r}): use 'transcript' or 'capped'")
        if spawn_template is not None and not isinstance(spawn_template, Agent):
            raise ConfigurationError(
                f"TeamSupervisor(spawn_template=...) must be an Agent, got "
                f"{type(spawn_template).__name__}")
        if not self._roster and not allow_spawn:
            raise ConfigurationError(
                "TeamSupervisor(workers={}) has nobody to delegate to; give it workers or "
                "allow_spawn=True")
        self.allow_spawn = allow_spawn
        self.max_spawned = max_spawned
        self.spawn_template = spawn_template
        self.max_specialist_calls = max_specialist_calls
        self.max_calls_per_worker = max_calls_per_worker
        self.max_fan_out = max_fan_out
        self.max_turns = max_turns
        self.min_delegations = min_delegations
        self.context = context
        self.context_chars = context_chars
        self.max_attempts = max_attempts
        self.retry_backoff_s = float(retry_backoff_s)
        self.worker_timeout_s = worker_timeout_s
        self.recursion_limit = recursion_limit
        self._store = store
        self._default_store: MemoryStore | None = None
        self._tool_sets: dict[tuple[tuple[str, str], ...], dict[str, Tool]] = {}

    def __repr__(self) -> str:
        return f"TeamSupervisor(workers={list(self._roster)!r})"

    # --- roster and store -------------------------------------------------------------

    @property
    def roster(self) -> Mapping[str, Agent[Any]]:
        """The fixed workers, by name (spawned workers live in their run only)."""
        return dict(self._roster)

    def add_worker(self, name: str, agent: Agent[Any]) -> None:
        """Add a worker to the fixed roster (between runs): e.g. to wire two teams that
        delegate to each other.

        Args:
            name: its name in the roster.
            agent: the worker.

        Raises:
            ConfigurationError: a bad or taken name, or not an agent.
        """
        if name in self._roster:
            raise ConfigurationError(
                f"TeamSupervisor.add_worker: {name!r} is in the roster already")
        self._roster.update(check_roster("supervisor", {name: agent}))
        self._tool_sets.clear()

    # --- tools --------------------------------------------------------------------------

    def _tools(self, run: _SupervisorRun) -> dict[str, Tool]:
        described = tuple((n, _describe(run.agent_for(n))) for n in run.roster_names())
        tools = self._tool_sets.get(described)
        if tools is None:
            tools = self._build_tools(described)
            if len(self._tool_sets) < 256:
                self._tool_sets[described] = tools
        return tools

    def _build_tools(self, described: tuple[tuple[str, str], ...]) -> dict[str, Tool]:
        names = [n for n, _ in described]
        roster = "\n".join(f"- {n}: {d}" for n, d in described) or "- (nobody yet)"
        worker = {"type": "string", "enum": names,
                  "description": "the worker's name, one of the roster"}

        def make(name: str, function: Any, description: str, properties: dict[str, Any],
                 args: type[BaseModel], journaled: bool, replay: str | None = None) -> Tool:
            schema = {"type": "object", "properties": properties,
                      "required": list(properties), "additionalProperties": False}
            return Tool(function=function, name=name, description=description,
                        parameters=schema, args_model=args, context_parameter="ctx",
                        is_async=True, timeout_s=math.inf, journaled=journaled,
                        replay_description=replay)

        delegate = ("Give one worker a piece of the job. It runs to completion on your "
                    "instructions (all it knows about the job) and its final answer comes "
                    "back. Several delegate calls in one turn run at the same time.\n"
                    "Workers:\n")
        tools = {
            # a replay compares the roster's names only: each worker's instructions are
            # compared by its own delegations, so editing one worker blocks only the
            # parked runs that used it
            "delegate": make(
                "delegate", self._delegate, delegate + roster,
                {"worker": worker,
                 "instructions": {"type": "string",
                                  "description": "everything the worker needs to do its part"}},
                _DELEGATE_ARGS, journaled=False, replay=delegate + ", ".join(names)),
            "forward_message": make(
                "forward_message", self._forward,
                "Give the user a worker's latest output verbatim as the final answer, "
                "without writing one yourself; your turn ends. The worker must have "
                "answered in an earlier turn.",
                {"worker": worker}, _WORKER_ARGS, journaled=False),
        }
        if self.allow_spawn:
            tools["spawn_worker"] = make(
                "spawn_worker", self._spawn,
                "Create a new specialist worker for this run. Its instructions are its "
                "system prompt, all it knows about its job. It can be delegated to from "
                f"your next turn. At most {self.max_spawned} per run.",
                {"role": {"type": "string",
                          "description": "the new worker's name: a Python identifier not "
                                         "in the roster"},
                 "instructions": {"type": "string",
                                  "description": "the new worker's system prompt"}},
                _SPAWN_ARGS, journaled=False)
        if self.context == "capped":
            tools["read_output"] = make(
                "read_output", self._read_output,
                "Read a worker's whole latest output (the team context shows only the "
                f"first {self.context_chars} characters).",
                {"worker": worker}, _WORKER_ARGS, journaled=True)
        return tools

    # --- the loop -----------------------------------------------------------------------

    async def run(self, ctx: RunContext) -> AsyncIterator[AgentEvent]:  # noqa: C901 - one supervisor turn: decide, plan the calls, run them, end or go on
        """See :meth:`~foreperson.agents.steps.Architecture.run`: the ReAct loop with the team
        tools, the turn planned before its calls run, and the caps read first.

        Raises:
            ModelError: a model call failed.
            OutputValidationError: the answer never matched ``output_type``.
            RecursionLimitExceeded: the backstop.
            ConfigurationError: the agent has its own tool named like a team tool.
        """
        clash = [t for t in _TEAM_TOOLS if t in ctx.tools]
        if clash:
            raise ConfigurationError(
                f"team {ctx.agent_name!r}: the agent has its own tool(s) {clash}, names the "
                "supervisor's tools use; rename them with @tool(name=...)")
        run = _SupervisorRun(ctx, self, self.store_for(ctx))
        ctx.tools.update(self._tools(run))
        while not ctx.stopped:
            if self.max_turns is not None and ctx.turn >= self.max_turns:
                await run.hit_cap("max_turns", self.max_turns,
                                  f"the supervisor made max_turns={self.max_turns} model calls")
                ctx.end("cap", detail=f"reached max_turns={self.max_turns} supervisor turns")
                return
            reached = ctx.limit_reached()
            if reached is not None:
                ctx.end(reached[0], detail=reached[1])
                return
            run.count_step("supervisor model call")
            view = self._view(ctx, run) if self.context == "capped" else None
            async for event in ctx.call_model(messages=view):
                yield event
            if ctx.stopped:
                return
            response = ctx.last_response
            assert response is not None
            if view is not None:
                ctx.messages.append(response)
            if response.text and run.delegations:
                run.synthesis = response.text
            if response.tool_calls:
                await self._plan_turn(run, response)
                async for event in ctx.run_tool_calls(response.tool_calls):
                    yield event
                await self._after_turn(run)
            else:
                await self._answer(run, response)

    async def _answer(self, run: _SupervisorRun, response: ModelResponse) -> None:
        ctx = run.ctx
        record = RouteRecord(run.team, ctx.turn, "answer", "answer", "",
                             run.specialist_calls, "FINISH")
        if run.specialist_calls < self.min_delegations:
            if not run.refused:
                run.refused = True
                names = ", ".join(run.roster_names())
                await run.record(RouteRecord(
                    run.team, ctx.turn, "refused", "answer", response.text or "",
                    run.specialist_calls, "model", overridden_by="min_delegations",
                    detail=f"min_delegations={self.min_delegations}; "
                           f"{run.specialist_calls} delegation(s) so far"))
                ctx.messages.append(UserMessage(
                    f"Do not answer yet: this team requires at least {self.min_delegations} "
                    f"delegation(s) before an answer. Delegate to the workers ({names}) "
                    "and answer from their outputs."))
                return
            record = RouteRecord(
                run.team, ctx.turn, "answer", "answer", "", run.specialist_calls, "FINISH",
                detail=f"accepted after one refusal, below min_delegations="
                       f"{self.min_delegations}")
        if run.delegations and not run.has_work():
            reason, detail = run.nothing_to_answer()
            await run.record(replace(record, overridden_by=reason,
                                     detail=detail))
            ctx.end(reason, detail=detail)
            return
        await ctx.accept_final(response)
        if ctx.stop_reason == "completed":
            await run.record(record)

    # --- planning a turn ----------------------------------------------------------------

    async def _plan_turn(self, run: _SupervisorRun, response: ModelResponse) -> None:
        """Decide, in call order and before anything runs, what each team-tool call of
        the turn does."""
        run.plan = {}
        run.forwards = {}
        run.before_turn = run.latest()
        names = run.roster_names()
        fan_out = 0
        reserved: set[str] = set()
        caps_hit: dict[str, tuple[int, str]] = {}
        planned: dict[tuple[str, str], int] = {}    # (worker, instructions) -> its call
        for index, call in enumerate(response.tool_calls, 1):
            arguments = _arguments(call)
            if arguments is None:
                continue    # the agent layer reports the invalid arguments
            if call.name == "delegate":
                worker, instructions = arguments.get("worker"), arguments.get("instructions")
                if not isinstance(worker, str) or not isinstance(instructions, str):
                    continue
                decision = await self._plan_delegation(
                    run, response, worker, instructions, names, fan_out, caps_hit, planned)
                run.plan[index] = decision
                if isinstance(decision, _Go):
                    fan_out += 1
                    planned[(decision.worker, _same_instructions(instructions))] = index
            elif call.name == "spawn_worker" and self.allow_spawn:
                role, instructions = arguments.get("role"), arguments.get("instructions")
                if isinstance(role, str) and isinstance(instructions, str):
                    run.plan[index] = self._plan_spawn(run, role, instructions, reserved)
        for cap, (limit, detail) in caps_hit.items():
            await run.hit_cap(cap, limit, detail)

    async def _plan_delegation(
        self, run: _SupervisorRun, response: ModelResponse, raw: str, instructions: str,
        names: list[str], fan_out: int, caps_hit: dict[str, tuple[int, str]],
        planned: dict[tuple[str, str], int],
    ) -> _Go | ToolReturn:
        ctx = run.ctx
        counter = run.specialist_calls

        async def log(routed_to: str, overridden_by: str | None = None,
                      detail: str | None = None, decision: str | None = None) -> None:
            await run.record(RouteRecord(
                run.team, ctx.turn, "delegate", decision or raw, response.text or "",
                counter, routed_to, overridden_by, detail))

        worker, problem = resolve_worker(raw, names)
        if worker is None:
            await log("model", "invalid", problem)
            return _error(problem + "; call delegate again with one of them")
        if not instructions.strip():
            problem = (f"delegate to {worker!r} has empty instructions; write what the "
                       "worker must do (they are all it knows about the job)")
            await log("model", "invalid", problem, worker)
            return _error(problem)
        agent = run.agent_for(worker)
        same = (worker, _same_instructions(instructions))
        if same in planned:         # the model asked twice in one turn: it runs once
            detail = (f"the same delegation as call {planned[same]} of this turn (same "
                      f"worker {worker!r}, same instructions): it runs once, and its answer "
                      "is that call's")
            await log("skipped", "duplicate", detail, worker)
            return ToolReturn("", "", f"skipped: {detail}")
        if same in run.answered:
            detail = (f"{worker!r} already answered these exact instructions in turn "
                      f"{run.answered[same]}; its answer is above")
            return await self._loop(run, worker, detail, log)
        if is_running_above(ctx, agent):
            detail = (f"{worker!r} is a team already running above this one (it delegated "
                      "here); delegating back would ping-pong between the two teams")
            return await self._loop(run, worker, detail, log)
        cap = self._cap_refusing(run, worker, fan_out)
        if cap is not None:
            name, limit, detail = cap
            caps_hit.setdefault(name, (limit, detail))
            run.ask(worker)
            if run.end_after_turn is None or run.end_after_turn[0] != "loop":
                run.end_after_turn = ("cap", detail)
            await log("skipped", "cap", detail, worker)
            return ToolReturn("", "", f"skipped: cap: {detail}; the run ends after this turn",
                              is_error=True)
        run.count_step(f"delegation to {worker}")
        run.count_call(worker)
        await log(worker, decision=worker)
        return _Go(worker, instructions, raw)

    def _cap_refusing(self, run: _SupervisorRun, worker: str, fan_out: int
                      ) -> tuple[str, int, str] | None:
        total = self.max_specialist_calls
        if total is not None and run.specialist_calls >= total:
            return ("max_specialist_calls", total,
                    f"max_specialist_calls={total} worker runs per run reached")
        per_worker = self.max_calls_per_worker
        if per_worker is not None and run.calls_by_worker.get(worker, 0) >= per_worker:
            return ("max_calls_per_worker", per_worker,
                    f"max_calls_per_worker={per_worker} runs of {worker!r} reached")
        if self.max_fan_out is not None and fan_out >= self.max_fan_out:
            return ("max_fan_out", self.max_fan_out,
                    f"max_fan_out={self.max_fan_out} delegations per turn reached")
        return None

    async def _loop(self, run: _SupervisorRun, worker: str, detail: str, log: Any
                    ) -> ToolReturn:
        run.ask(worker)
        run.end_after_turn = ("loop", detail)
        await log("skipped", "loop", detail, worker)
        await run.publish(LoopDetectedEvent, worker=worker, detail=detail)
        return ToolReturn("", "", f"skipped: loop: {detail}; the run ends after this turn",
                          is_error=True)

    def _plan_spawn(self, run: _SupervisorRun, role: str, instructions: str,
                    reserved: set[str]) -> _Spawn | ToolReturn:
        if not role.isidentifier() or keyword.iskeyword(role):
            return _error(f"role {role!r} is not a valid Python identifier (letters, digits "
                          "and '_', not starting with a digit, not a keyword); pick another")
        if role in run.roster_names() or role in reserved or role == "FINISH":
            return _error(f"role {role!r} is already in the roster "
                          f"({', '.join(run.roster_names())}); pick a new role or delegate "
                          "to that worker")
        if not instructions.strip():
            return _error(f"spawn_worker({role!r}) has empty instructions; write the new "
                          "worker's system prompt (all it will know about its job)")
        if len(run.spawned) + len(reserved) >= self.max_spawned:
            return _error(f"max_spawned={self.max_spawned} workers per run reached; "
                          "delegate to the workers you have")
        reserved.add(role)
        return _Spawn(role, instructions)

    async def _after_turn(self, run: _SupervisorRun) -> None:
        ctx = run.ctx
        turn = ctx.turn
        for delegation in run.delegations:
            if delegation.completed and delegation.turn == turn:
                run.answered.setdefault(
                    (delegation.worker, _same_instructions(delegation.instructions)), turn)
        if run.forwards:
            index = min(run.forwards)
            worker = run.forwards[index]
            delegation = run.before_turn[worker]
            await run.record(RouteRecord(run.team, turn, "forward", worker, "",
                                         run.specialist_calls, "FINISH"))
            ctx.end("completed", output=_typed(delegation.output,
                                               run.agent_for(worker).output_type))
        elif run.end_after_turn is not None:
            reason, detail = run.end_after_turn
            ctx.end(reason, detail=detail)

    # --- the tools' bodies --------------------------------------------------------------

    def _run_of(self, ctx: RunContext) -> _SupervisorRun:
        run = team_run_of(ctx)
        if not isinstance(run, _SupervisorRun):
            raise ConfigurationError(
                "the supervisor's tools run only inside its own run (Agent(architecture="
                "TeamSupervisor(...)))")
        return run

    async def _delegate(self, ctx: RunContext, worker: str, instructions: str) -> ToolReturn | str:
        run = self._run_of(ctx)
        index = _index(ctx)
        planned = run.plan.get(index)
        if not (isinstance(planned, ToolReturn)
                or (isinstance(planned, _Go) and planned.raw_worker == worker
                    and planned.instructions == instructions)):
            # a before_tool hook changed the call after the turn was planned
            response = ctx.last_response
            assert response is not None
            planned = await self._plan_delegation(run, response, worker, instructions,
                                                  run.roster_names(), 0, {}, {})
        if isinstance(planned, ToolReturn):
            return planned
        assert isinstance(planned, _Go)
        delegation = await run.delegate(
            planned.worker, run.agent_for(planned.worker), planned.instructions,
            name=planned.worker, turn=ctx.turn, index=index)
        if delegation.stop_reason == "loop":    # a team below went round in circles
            run.end_after_turn = ("loop", f"{delegation.worker!r} ended in a loop: "
                                          f"{delegation.error}")
            await run.publish(LoopDetectedEvent, worker=delegation.worker,
                              detail=run.end_after_turn[1])
        if delegation.completed:
            answer = delegation.answer or ""
            if self.context == "capped":
                return (f"{delegation.worker} answered ({len(answer)} characters); the team "
                        f"context shows the first {self.context_chars}, read_output("
                        f"{delegation.worker!r}) returns all of it")
            return answer
        return ToolReturn("", "", failure_report(delegation), is_error=True)

    async def _forward(self, ctx: RunContext, worker: str) -> ToolReturn | str:
        run = self._run_of(ctx)
        name, problem = resolve_worker(worker, run.roster_names())
        if name is None:
            return _error(problem + "; call forward_message again with one of them")
        if name not in run.before_turn:
            return _error(
                f"worker {name!r} has no output yet: delegate to it first (an output of a "
                "delegation in this same turn can be forwarded from the next turn)")
        run.forwards[_index(ctx)] = name
        return f"{name}'s latest output goes to the user verbatim; this run ends"

    async def _spawn(self, ctx: RunContext, role: str, instructions: str) -> ToolReturn | str:
        run = self._run_of(ctx)
        planned = run.plan.get(_index(ctx))
        if planned is None or (isinstance(planned, _Spawn) and
                               (planned.role, planned.instructions) != (role, instructions)):
            planned = self._plan_spawn(run, role, instructions, set())
        if isinstance(planned, ToolReturn):
            return planned
        assert isinstance(planned, _Spawn)
        outcome = await ctx.spawn_step(planned.role, planned.instructions,
                                       data={"user_id": ctx.user_id})
        record = outcome.value
        # seed 001: pinned to the spawning run's user from birth (as recorded: a resumed
        # run rebuilds it pinned to the same user)
        pinned = record.data.get("user_id")
        template = self.spawn_template
        if template is not None:
            agent = template.clone(instructions=record.instructions, name=record.role,
                                   pinned_user=pinned)
        else:
            agent = Agent(record.instructions, model=ctx.agent.model, name=record.role,
                          pinned_user=pinned)
        run.spawned[record.role] = agent
        run.spawn_ids[record.role] = record.worker_id
        ctx.tools.update(self._tools(run))
        await run.publish(WorkerSpawnedEvent, role=record.role, worker_id=record.worker_id,
                          running=len(run.spawned), replayed=outcome.replayed)
        return (f"spawned worker {record.role!r} (id {record.worker_id}); delegate to it from "
                "your next turn")

    async def _read_output(self, ctx: RunContext, worker: str) -> ToolReturn | str:
        run = self._run_of(ctx)
        name, problem = resolve_worker(worker, run.roster_names())
        if name is None:
            return _error(problem)
        latest = run.latest().get(name)
        if latest is None:
            return _error(f"worker {name!r} has no output yet: delegate to it first")
        store = run.store
        task = await store_call(store, lambda: store.get(latest.task_id))
        if task is not None and task.result is not None:
            return task.result if isinstance(task.result, str) else json.dumps(task.result)
        return latest.answer or ""

    # --- the capped view ----------------------------------------------------------------

    def _view(self, ctx: RunContext, run: _SupervisorRun) -> list[Message]:
        """What the model reads in ``context="capped"``: its instructions with the team
        context block, earlier exchanges of the thread (requests and answers only), the
        request, and its latest exchange."""
        messages = ctx.messages
        first = messages[0]
        system = first.content if isinstance(first, SystemMessage) else ""
        view: list[Message] = [SystemMessage(f"{system}\n\n{self._context_block(run)}")]
        start = 1 if isinstance(first, SystemMessage) else 0
        for message in messages[start:run.prompt_index]:
            if isinstance(message, UserMessage) or (
                    isinstance(message, ModelResponse) and not message.tool_calls
                    and message.text):
                view.append(message)
        view.append(messages[run.prompt_index])
        last = None
        for i in range(len(messages) - 1, run.prompt_index, -1):
            if isinstance(messages[i], ModelResponse):
                last = i
                break
        if last is not None:
            view.extend(messages[last:])
        return view

    def _context_block(self, run: _SupervisorRun) -> str:
        cap = self.context_chars
        limit = self.max_specialist_calls
        lines = [
            f"Team context (each value shows at most {cap} characters; read_output(worker) "
            "returns a worker's whole latest output):",
            f"worker runs so far: {run.specialist_calls}"
            + (f" of at most {limit}" if limit is not None else ""),
        ]
        last: dict[str, Delegation] = {}
        for delegation in run.delegations:
            last[delegation.worker] = delegation
        for name in run.roster_names():
            calls = run.calls_by_worker.get(name, 0)
            latest = last.get(name)
            if latest is None:
                lines.append(f"- {name}: no output yet")
            elif latest.completed:
                answer = latest.answer or ""
                lines.append(f"- {name} ({calls} run(s)): latest output ({len(answer)} chars): "
                             f"{_capped(answer, cap)}")
            else:
                lines.append(f"- {name} ({calls} run(s)): latest run did not complete: "
                             f"{_capped(latest.error, cap)}")
        return "\n".join(lines)


def _index(ctx: RunContext) -> int:
    match = _TOOL_INDEX.search(ctx.position())
    return int(match.group(1)) if match else 0


def _arguments(call: ToolCall) -> dict[str, Any] | None:
    try:
        return call.arguments_dict()
    except ValueError:
        return None

