"""Seed 004's supervisor graph: a model (or a rule) decides the next specialist as a
typed :class:`RouteDecision`; a pure routing function reads the specialist-call counter
first and only then follows the choice.

Three pieces, as in the seed's table of who does what: the decision (one model call
per decision, kept out of the transcript, logged in the route log), the specialist (its
output appended to the transcript; the team's counter adds 1), and :func:`route` (no
model, no writes: it reads the counter and the decision and names the next node).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from ..agents import Agent, AgentEvent, RunContext
from ..errors import ConfigurationError
from ..models import Message, ModelResponse, SystemMessage, UserMessage
from ..work import MemoryStore, TaskStore
from ..work.leases import DEFAULT_LEASE_S
from ._events import LoopDetectedEvent
from ._records import FINISH, Delegation, RouteDecision, RouteRecord
from ._run import (
    TeamRun,
    TeamStore,
    check_roster,
    failure_message,
    is_running_above,
    output_message,
    resolve_worker,
    work_prompt,
)
from ._supervisor import _positive, _seconds, _stale_after

__all__ = ["RouteState", "Router", "route"]

FINALIZE = "finalize"
"""Where :func:`route` sends a run whose counter reached the cap."""


def route(specialist_calls: int, max_specialist_calls: int | None,
          decision: RouteDecision) -> str:
    """Seed 004's routing function: the counter first, then the choice.

    Pure: it calls no model and writes nothing. Once ``specialist_calls`` reaches
    ``max_specialist_calls`` the run goes to finalize whatever the model chose; only
    then is ``FINISH`` followed, else the chosen worker.

    Args:
        specialist_calls: worker runs the team made so far (its own counter).
        max_specialist_calls: the cap (None: no cap).
        decision: the model's (or rule's) choice.

    Returns:
        ``"finalize"``, ``"FINISH"`` or the worker's name.
    """
    if max_specialist_calls is not None and specialist_calls >= max_specialist_calls:
        return FINALIZE
    if decision.next == FINISH:
        return FINISH
    return decision.next


@dataclass(frozen=True)
class RouteState:
    """What a routing rule (``Router(decide=...)``) reads to decide.

    Attributes:
        request: the request of this run.
        messages: the team's transcript (system message first, then requests and
            worker outputs; ``model_name`` of an output names its worker).
        delegations: this run's worker runs so far.
        specialist_calls: the team's counter.
        workers: the roster's names.
    """

    request: str
    messages: list[Message]
    delegations: list[Delegation]
    specialist_calls: int
    workers: list[str]


Decide = Callable[[RouteState], "RouteDecision | str | Awaitable[RouteDecision | str]"]
"""``(state) -> RouteDecision | str``: a routing rule; a str is the worker's name (or
``"FINISH"``). It runs again on replay, so it must be deterministic."""

Finalize = Callable[[list[Delegation]], Any]
"""``(delegations) -> answer``: the router's finalize step on ``FINISH``; default: the
last completed worker output (seed 004's finalize returns the last message)."""

_DEFAULT_INSTRUCTIONS = (
    "You route a request to specialist workers, one at a time, until every part of it "
    "is answered. After each worker's output, decide again: the next worker, or FINISH "
    "when nothing is left to answer.")


class _RouterRun(TeamRun):
    def __init__(self, ctx: RunContext, arch: Router, store: TaskStore) -> None:
        super().__init__(ctx, arch, store)
        self.decisions = 0
        self.refused = False
        self.note: str | None = None
        self.request = next((m.content for m in reversed(ctx.messages)
                             if isinstance(m, UserMessage)), "")
        self.answered: set[tuple[str, str]] = set()
        self.finalized: Any = None

    def best_effort(self, result: Any) -> str | None:
        """The finalize step's answer (a cap goes to finalize too), as text; else the
        shared best effort."""
        answer = self.finalized
        if answer is None:
            return super().best_effort(result)
        if isinstance(answer, str):
            return answer
        if isinstance(answer, BaseModel):
            return answer.model_dump_json()
        return json.dumps(answer, ensure_ascii=False, default=str)


class Router(TeamStore):
    """Seed 004's typed router: the agent's model returns a :class:`RouteDecision`
    (``next`` a closed set: the roster plus ``"FINISH"``) after each worker's output;
    :func:`route` reads the specialist-call counter first, so ``max_specialist_calls``
    holds whatever the model chooses.

    ``Team.router(workers=..., model=...)`` builds ``Agent(instructions, model=...,
    architecture=Router(workers=...))``. Decisions never enter the transcript (its
    messages are the requests and the workers' outputs, each attributed by
    ``model_name``); each one goes to the route log with its reasoning, the counter it
    was routed on and whether the cap overrode it. An invalid decision is sent back to
    the model with what is wrong (``Limits.max_output_retries`` times, default once);
    if it stays invalid the run ends with ``stop_reason == "route"`` and a
    ``routing_failure`` record, never a guess. Each worker gets the conversation so far
    (the request and the labelled outputs) as its prompt.

    A cap ends the run with ``stop_reason == "cap"``, ``result.cap`` naming it, and the
    finalize step's answer as its text: seed 004's never-finishing supervisor (always
    "writer") makes 7 decisions, 6 specialist calls and answers with draft 6. A
    ``FINISH`` at the cap goes to finalize too and ends ``"completed"``, as a supervisor
    that answers after using exactly its cap does. ``FINISH`` before any worker ran is
    sent back once; a run with nothing to answer with ends ``"no_answer"``, one whose
    worker runs all failed ``"worker_failed"``, never ``"completed"``.
    ``recursion_limit`` stays the backstop that raises.

    Args:
        workers: the roster: name -> agent (a team is an agent).
        max_specialist_calls: worker runs per run (default 6).
        max_turns: decisions per run, a team cap ending with ``"cap"`` (default None;
            seed 004's ``MAX_CEO_TURNS``).
        min_delegations: worker runs required before ``FINISH`` is followed (default
            0); an earlier ``FINISH`` is sent back once, and the route log says so.
        decide: a routing rule instead of the model (see :data:`Decide`); the agent's
            model is then never called.
        finalize: the answer on ``FINISH`` (see :data:`Finalize`).
        store: where delegations are recorded (see ``TeamSupervisor``).
        max_attempts: as ``TeamSupervisor``.
        retry_backoff_s: as ``TeamSupervisor``.
        worker_timeout_s: as ``TeamSupervisor``.
        stale_after: as ``TeamSupervisor``.
        lease_s: the deprecated name of ``stale_after``.
        recursion_limit: decisions plus worker runs per run (default 25, seed 004).

    Raises:
        ConfigurationError: a bad roster or option.
    """

    def __init__(
        self,
        workers: Mapping[str, Agent[Any]],
        *,
        max_specialist_calls: int | None = 6,
        max_turns: int | None = None,
        min_delegations: int = 0,
        decide: Decide | None = None,
        finalize: Finalize | None = None,
        store: TaskStore | None = None,
        max_attempts: int = 1,
        retry_backoff_s: float = 2.0,
        worker_timeout_s: float | None = None,
        stale_after: float = DEFAULT_LEASE_S,
        recursion_limit: int = 25,
        lease_s: float | None = None,
    ) -> None:
        if not isinstance(workers, Mapping) or not workers:
            raise ConfigurationError(
                "Router(workers=...) takes a non-empty mapping of name -> Agent")
        self._roster = check_roster("router", workers)
        _positive("max_specialist_calls", max_specialist_calls)
        _positive("max_turns", max_turns)
        _positive("min_delegations", min_delegations, allow_none=False, minimum=0)
        _positive("max_attempts", max_attempts, allow_none=False)
        _positive("recursion_limit", recursion_limit, allow_none=False)
        _seconds("retry_backoff_s", retry_backoff_s, allow_none=False)
        _seconds("worker_timeout_s", worker_timeout_s)
        self.stale_after = _stale_after("Router", stale_after, lease_s)
        for name, value in (("decide", decide), ("finalize", finalize)):
            if value is not None and not callable(value):
                raise ConfigurationError(f"Router({name}=...) must be a function")
        self.max_specialist_calls = max_specialist_calls
        self.max_turns = max_turns
        self.min_delegations = min_delegations
        self.decide = decide
        self.finalize = finalize
        self.max_attempts = max_attempts
        self.retry_backoff_s = float(retry_backoff_s)
        self.worker_timeout_s = worker_timeout_s
        self.recursion_limit = recursion_limit
        self._store = store
        self._default_store: MemoryStore | None = None
        self.decision_type = RouteDecision.for_workers(list(self._roster))
        self._systems: dict[str, tuple[SystemMessage, SystemMessage]] = {}

    def __repr__(self) -> str:
        return f"Router(workers={list(self._roster)!r})"

    @property
    def roster(self) -> Mapping[str, Agent[Any]]:
        """The workers, by name."""
        return dict(self._roster)

    def add_worker(self, name: str, agent: Agent[Any]) -> None:
        """Add a worker to the roster (between runs).

        Raises:
            ConfigurationError: a bad or taken name, or not an agent.
        """
        if name in self._roster:
            raise ConfigurationError(f"Router.add_worker: {name!r} is in the roster already")
        self._roster.update(check_roster("router", {name: agent}))
        self.decision_type = RouteDecision.for_workers(list(self._roster))
        self._systems.clear()

    # --- the loop -----------------------------------------------------------------------

    async def run(self, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        """See :meth:`~foreperson.agents.steps.Architecture.run`: decide, route (counter
        first), run the worker, until ``FINISH``, a cap or a routing failure.

        Raises:
            ModelError: a decision's model call failed.
            RecursionLimitExceeded: the backstop.
        """
        run = _RouterRun(ctx, self, self.store_for(ctx))
        ctx.tools.clear()     # a decision is a structured output, not a tool call
        names = list(self._roster)
        while not ctx.stopped:
            if self.max_turns is not None and run.decisions >= self.max_turns:
                detail = f"reached max_turns={self.max_turns} routing decisions"
                await run.hit_cap("max_turns", self.max_turns, detail)
                self._finish(run, "cap", detail)
                return
            decision: RouteDecision | str | None = None
            async for item in self._decide(ctx, run, names):
                if isinstance(item, RouteDecision | str):
                    decision = item
                else:
                    yield item
            if ctx.stopped:
                return
            if not isinstance(decision, RouteDecision):
                await run.record(RouteRecord(
                    run.team, ctx.turn, "routing_failure", _short(decision), "",
                    run.specialist_calls, FINALIZE, overridden_by="invalid",
                    detail="no valid routing decision"))
                ctx.end("route", detail=f"no valid routing decision: {decision}")
                return
            await run.route_step(str(run.decisions), {"next": decision.next})
            await self._follow(ctx, run, decision)

    async def _decide(self, ctx: RunContext, run: _RouterRun, names: list[str]
                      ) -> AsyncIterator[AgentEvent | RouteDecision | str]:
        """Yields the model's events, then the decision (or the text of why none)."""
        run.decisions += 1
        if self.decide is not None:
            run.count_step("routing decision")
            state = RouteState(run.request, list(ctx.messages), list(run.delegations),
                               run.specialist_calls, names)
            chosen = self.decide(state)
            if inspect.isawaitable(chosen):
                chosen = await chosen
            parsed = self._parse_rule(chosen, names)
            yield parsed
            return
        messages, replay = self._decision_messages(ctx, run, names)
        retries = 0
        while True:
            reached = ctx.limit_reached()
            if reached is not None:
                ctx.end(reached[0], detail=reached[1])
                return
            run.count_step("routing decision")
            streaming, ctx.streaming = ctx.streaming, False   # a decision is no text to show
            try:
                async for event in ctx.call_model(messages=messages, replay_messages=replay,
                                                  output_type=self.decision_type):
                    yield event
            finally:
                ctx.streaming = streaming
            if ctx.stopped:
                return
            response = ctx.last_response
            assert response is not None
            parsed = self._parse(response, names)
            if isinstance(parsed, RouteDecision):
                yield parsed
                return
            if retries >= ctx.guards.limits.max_output_retries:
                yield f"{parsed} (the model wrote {_short(response.text)!r})"
                return
            retries += 1
            correction = UserMessage(
                f"That is not a valid routing decision: {parsed}. Answer again with only a "
                f"JSON object {{\"next\": one of {[*names, FINISH]}, \"reasoning\": "
                "\"one line\"}.")
            messages = [*messages, response, correction]
            replay = [*replay, response, correction]

    def _parse(self, response: ModelResponse, names: list[str]) -> RouteDecision | str:
        output = response.output
        if isinstance(output, self.decision_type):
            return output
        text = (response.text or "").strip()
        if text.startswith("```") and text.endswith("```") and "\n" in text:
            text = text[text.index("\n") + 1:-3].strip()
        if response.tool_calls and not text:
            return "the decision must be a JSON object, not a tool call"
        try:
            return self.decision_type.model_validate_json(text)
        except ValidationError:
            pass        # read it loosely: a near-miss name may still resolve
        try:
            loose = RouteDecision.model_validate_json(text)
        except ValidationError as exc:
            return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'decision'}: {e['msg']}"
                             for e in exc.errors(include_url=False))
        return self._resolved(loose, names)

    def _resolved(self, loose: RouteDecision, names: list[str]) -> RouteDecision | str:
        chosen, problem = resolve_worker(loose.next, [*names, FINISH])
        if chosen is None:
            return f"next: {problem} (or FINISH)"
        return self.decision_type(next=chosen, reasoning=loose.reasoning)

    def _parse_rule(self, chosen: Any, names: list[str]) -> RouteDecision | str:
        if isinstance(chosen, str):
            chosen = RouteDecision(next=chosen, reasoning="rule")
        if not isinstance(chosen, RouteDecision):
            return f"the routing rule returned {chosen!r}, not a RouteDecision or a name"
        return self._resolved(chosen, names)

    def _decision_messages(self, ctx: RunContext, run: _RouterRun, names: list[str]
                           ) -> tuple[list[Message], list[Message]]:
        """The decision call's conversation: the instructions with the roster, the
        transcript with each output labelled by its worker, and the question; and the
        same with the roster's names only, which is what a replay compares (each
        worker's instructions are compared by its own delegations)."""
        first = ctx.messages[0]
        instructions = first.content if isinstance(first, SystemMessage) else ""
        systems = self._systems.get(instructions)
        if systems is None:
            systems = (self._system(instructions, names, described=True),
                       self._system(instructions, names, described=False))
            if len(self._systems) < 64:
                self._systems[instructions] = systems
        messages: list[Message] = [systems[0]]
        for message in ctx.messages:
            if isinstance(message, UserMessage):
                messages.append(message)
            elif isinstance(message, ModelResponse) and message.text:
                messages.append(ModelResponse(text=f"[{message.model_name}] {message.text}",
                                              usage=message.usage))
        cap = self.max_specialist_calls
        question = (f"Worker runs so far in this request: {run.specialist_calls}"
                    + (f" of at most {cap}" if cap is not None else "")
                    + ". Who is next, or FINISH?")
        if run.note is not None:
            question = f"{run.note}\n{question}"
        messages.append(UserMessage(question))
        return messages, [systems[1], *messages[1:]]

    def _system(self, instructions: str, names: list[str], *, described: bool
                ) -> SystemMessage:
        """The decision call's system message: the router's instructions, the roster
        (each worker with the start of its instructions, or, for what a replay compares,
        its name alone) and the decision format."""
        roster = "\n".join(
            f"- {n}: {' '.join(a.instructions.split())[:160]}" if described else f"- {n}"
            for n, a in self._roster.items())
        return SystemMessage(
            f"{instructions or _DEFAULT_INSTRUCTIONS}\n\nWorkers:\n{roster}\n\nReply "
            f"with only a JSON object {{\"next\": one of {[*names, FINISH]}, "
            "\"reasoning\": \"one line\"}. Choose FINISH when the last request is fully "
            "answered.")

    async def _refuse_finish(self, run: _RouterRun, decision: RouteDecision, counter: int,
                             turn: int) -> bool:
        """Send an early ``FINISH`` back once: below ``min_delegations``, or before any
        worker ran (nothing to finish with). Returns whether it was sent back."""
        if run.refused:
            return False
        if counter < self.min_delegations:
            why, overridden_by = (f"this team requires at least {self.min_delegations} "
                                  "worker run(s) before it finishes"), "min_delegations"
            detail = f"min_delegations={self.min_delegations}"
        elif counter == 0:
            why, overridden_by = ("no worker has run yet, so there is no answer to finish "
                                  "with; route the request to the worker who can answer "
                                  "it"), "no_work"
            detail = "FINISH before any worker ran"
        else:
            return False
        run.refused = True
        run.note = f"FINISH is refused: {why}."
        await run.record(RouteRecord(run.team, turn, "refused", FINISH, decision.reasoning,
                                     counter, "model", overridden_by=overridden_by,
                                     detail=detail))
        return True

    def _finish(self, run: _RouterRun, reason: str, detail: str | None = None) -> None:
        """End the run through the finalize step (seed 004: a cap goes to finalize, like
        FINISH): its answer is the output when the run completes, the text either way. A
        team with nothing to answer with ends ``worker_failed`` (its workers all failed)
        or ``no_answer`` (none ran, or finalize returned None), never ``completed``; a cap
        over workers that only stopped keeps ``"cap"`` and their best effort."""
        ctx = run.ctx
        if run.completed_workers():
            answer = (self.finalize(list(run.delegations)) if self.finalize is not None
                      else run.last_output())
            run.finalized = answer
            if answer is not None:
                ctx.end(reason, output=answer if reason == "completed" else None,
                        detail=detail)
                return
        elif reason == "cap" and run.has_work():
            ctx.end("cap", detail=detail)     # the stopped workers' best effort is the text
            return
        failure, why = run.nothing_to_answer()
        ctx.end(failure, detail=why if detail is None else f"{detail}; {why}")

    async def _follow(self, ctx: RunContext, run: _RouterRun, decision: RouteDecision) -> None:
        """Route the decision (counter first) and do what it says."""
        counter = run.specialist_calls
        turn = ctx.turn
        target = route(counter, self.max_specialist_calls, decision)

        def record(routed_to: str, overridden_by: str | None = None,
                   detail: str | None = None) -> RouteRecord:
            return RouteRecord(run.team, turn, "route", decision.next, decision.reasoning,
                               counter, routed_to, overridden_by, detail)

        if target == FINALIZE and decision.next != FINISH:
            detail = f"max_specialist_calls={self.max_specialist_calls} worker runs reached"
            await run.record(record(FINALIZE, "cap", detail))
            await run.hit_cap("max_specialist_calls", self.max_specialist_calls, detail)
            self._finish(run, "cap", detail)
            return
        if target in (FINISH, FINALIZE):
            if await self._refuse_finish(run, decision, counter, turn):
                return
            run.note = None
            await run.record(record(target))
            self._finish(run, "completed")
            return
        worker = target
        agent = self._roster[worker]
        prompt = work_prompt(ctx.messages)
        if (worker, prompt) in run.answered or is_running_above(ctx, agent):
            detail = (f"{worker!r} is a team already running above this one"
                      if is_running_above(ctx, agent) else
                      f"{worker!r} already answered this exact request")
            await run.record(record("skipped", "loop", detail))
            await run.publish(LoopDetectedEvent, worker=worker, detail=detail)
            ctx.end("loop", detail=detail)
            return
        await run.record(record(worker))
        run.count_step(f"worker run of {worker}")
        run.count_call(worker)
        delegation = await run.delegate(worker, agent, prompt, name=worker, turn=turn, index=1)
        if delegation.completed:
            run.answered.add((worker, prompt))
            ctx.messages.append(output_message(delegation))
        else:
            ctx.messages.append(failure_message(delegation))
            if delegation.stop_reason == "loop":
                ctx.end("loop", detail=f"{worker!r} ended in a loop: {delegation.error}")


def _short(text: object, limit: int = 200) -> str:
    value = "" if text is None else str(text)
    return value if len(value) <= limit else value[:limit] + "..."

