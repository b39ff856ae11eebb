"""What a team run records: the typed routing decision (seed 004's ``RouteDecision``),
the route log, one record per delegation, the team's result, and a conversation thread.

Decisions and counters are a team's own extensions: they stay in its result and never
cross into the run it is nested in (seed 004: "keys outside TeamState never cross the
boundary"). What crosses is the shared contract: the request in, a final answer and the
appended messages out (:class:`Delegation`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field, create_model

from ..agents import AUDIT_KINDS, STOP_REASONS, RunResult, Thread
from ..agents.steps import StepCodec
from ..models import MESSAGES_ADAPTER, Message, Usage

__all__ = [
    "FINISH",
    "Delegation",
    "RouteDecision",
    "RouteRecord",
    "TeamResult",
    "Thread",
]

OutputT = TypeVar("OutputT")

FINISH = "FINISH"
"""The router's choice that ends the run (seed 004: ``Literal[..., "FINISH"]``)."""

STOP_REASONS.register(
    "cap", "a team cap (specialist calls per run or per worker, fan-out per turn, turns "
           "of a supervisor) refused more work; the run ended with what it had")
STOP_REASONS.register(
    "loop", "a team asked a worker for what it had already answered, or two nested teams "
            "delegated back and forth; the run ended with what it had")
STOP_REASONS.register(
    "route", "a router's model gave no valid routing decision, even after being shown its "
             "mistake; the run ended with what it had, never with a guess")
STOP_REASONS.register(
    "worker_failed", "the team has no answer because its workers failed: a stage of a "
                     "fixed pipeline (or its merge) did not complete, or no worker run of "
                     "the team completed")
STOP_REASONS.register(
    "no_answer", "the team finished without any worker output to answer with (a router's "
                 "FINISH before any worker ran, sent back once first)")

AUDIT_KINDS.register(
    "route", "a team's routing decision: what was chosen, the counter read before the "
             "choice, where the run went and what overrode it")
AUDIT_KINDS.register(
    "delegation", "a worker run for a team ended: worker, task id, completed or not, stop "
                  "reason or error, duration")


class RouteDecision(BaseModel):
    """A router's choice of the next worker: the structured output its model returns.

    Seed 004: ``next`` is a closed set, the roster's names plus ``"FINISH"``, so a typed
    choice cannot name a worker that does not exist and nothing parses prose to find
    out where to go. :meth:`for_workers` makes the closed type for one roster; a name
    outside it fails validation and goes back to the model as a correctable error.

    Attributes:
        next: the worker to run next, or ``"FINISH"`` when the request is answered.
        reasoning: one line on why.
    """

    next: str = Field(description="the worker to run next, or FINISH when the request "
                                  "is fully answered")
    reasoning: str = Field(default="", description="one line: why this choice")

    @classmethod
    def for_workers(cls, names: Sequence[str]) -> type[RouteDecision]:
        """The decision type whose ``next`` is ``Literal[<names>, "FINISH"]``.

        Args:
            names: the roster, in order.

        Returns:
            A subclass of :class:`RouteDecision` (the same class for the same roster).
        """
        return _decision_type(tuple(names))


@functools.lru_cache(maxsize=128)
def _decision_type(names: tuple[str, ...]) -> type[RouteDecision]:
    choices = Literal[(*names, FINISH)]  # type: ignore[valid-type]
    return create_model(
        "RouteDecision",
        __base__=RouteDecision,
        next=(choices, Field(description="the worker to run next, or FINISH when the "
                                         "request is fully answered")),
    )


RouteKind = Literal["route", "delegate", "forward", "answer", "refused", "routing_failure"]


@dataclass(frozen=True)
class RouteRecord:
    """One line of a team's route log: a decision, the counter the routing read before
    it, and where the run went.

    Seed 004: "route_log holds every routing decision with its reason"; the log is what
    you read when a request went to the wrong specialist.

    Attributes:
        team: the team (agent name) that decided.
        turn: the team's model call that decided (0 for a rule or a fixed shape).
        kind: ``"route"`` (a router's decision), ``"delegate"`` (a supervisor's delegate
            call), ``"forward"`` (``forward_message``), ``"answer"`` (a supervisor's
            final answer), ``"refused"`` (an answer sent back by ``min_delegations``),
            ``"routing_failure"`` (no valid decision).
        decision: what the model (or rule) chose: a worker name, ``"FINISH"``, or the
            raw text of an invalid decision.
        reasoning: the decision's reasoning (a router's), or the supervisor's text that
            turn; ``""`` when none.
        specialist_calls: the team's specialist-call counter when the choice was routed
            (read before the choice, seed 004).
        routed_to: where the run went: a worker name, ``"FINISH"``, ``"finalize"`` (the
            run ended on a cap), ``"skipped"`` (the delegation did not run), or
            ``"model"`` (sent back to the model).
        overridden_by: what overrode the choice: ``"cap"``, ``"loop"``, ``"duplicate"``
            (the same delegation twice in one turn: it ran once),
            ``"min_delegations"``, ``"invalid"``; None when it was followed.
        detail: a note (which cap, what was invalid), or None.
    """

    team: str
    turn: int
    kind: RouteKind
    decision: str
    reasoning: str
    specialist_calls: int
    routed_to: str
    overridden_by: str | None = None
    detail: str | None = None


@dataclass(frozen=True)
class Delegation:
    """One worker run for a team, as recorded: the shared contract between levels (the
    request in; a final answer and the appended messages out) plus its status.

    It is also the delegation's journaled step result and mirrors its work-layer
    :class:`~foreperson.work.Task` (``task_id``: kind = worker, payload = the
    instructions, result = the output, error = the failure).

    Attributes:
        worker: the worker's name in the roster.
        instructions: what it was asked (its prompt).
        delegation_id: the delegation's step path in the outermost run's journal; the
            worker's own events carry it as ``parent_path``.
        task_id: the work-layer task that records it.
        completed: True when the worker gave its final answer.
        output: the worker's output (text, or a dumped structured output) when
            completed, else None.
        text: what the worker produced, completed or not (its last text or tool
            result), or None.
        stop_reason: the worker run's stop reason, or None when it raised or timed out.
        error: why it did not complete (its stop reason and detail, or the exception),
            or None.
        worker_run_id: the worker's run id, or None when it raised before ending.
        attempts: worker runs made (retries included).
        usage: what the worker's runs used (model calls, tokens, tool calls).
        duration_s: seconds from the first start to the end.
        messages: the messages the worker appended after its prompt (its last run's).
        turn: the team's model call that asked for it (0 for routers' rules and fixed
            shapes).
        index: its position among the calls of that turn, from 1 (the stage, for a
            pipeline).
        worker_digest: the digest of the worker's instructions when it ran (compared
            on replay), or None in a record made before it was kept.
    """

    worker: str
    instructions: str
    delegation_id: str
    task_id: str
    completed: bool
    output: Any = None
    text: str | None = None
    stop_reason: str | None = None
    error: str | None = None
    worker_run_id: str | None = None
    attempts: int = 1
    usage: Usage = field(default_factory=Usage)
    duration_s: float = 0.0
    messages: list[Message] = field(default_factory=list)
    turn: int = 0
    index: int = 1
    worker_digest: str | None = None

    @property
    def answer(self) -> str | None:
        """The output as text when completed (a structured output as JSON), else None."""
        if not self.completed:
            return None
        if isinstance(self.output, str):
            return self.output
        return self.text


def _dump_delegation(value: Delegation) -> dict[str, Any]:
    data = {f.name: getattr(value, f.name) for f in fields(Delegation)}
    data["usage"] = asdict(value.usage)
    data["messages"] = MESSAGES_ADAPTER.dump_python(value.messages, mode="json")
    return data


def _load_delegation(data: dict[str, Any]) -> Delegation:
    values = dict(data)
    values["usage"] = Usage(**values.get("usage", {}))
    values["messages"] = MESSAGES_ADAPTER.validate_python(values.get("messages", []))
    return Delegation(**values)


DELEGATION_CODEC: StepCodec[Delegation] = StepCodec(_dump_delegation, _load_delegation)
"""A delegation as a journaled step's JSON result, and back."""


@dataclass(frozen=True)
class TeamResult(RunResult[OutputT]):
    """The result of a team run: a :class:`~foreperson.agents.RunResult` with the team's
    own records, which stay at its level (a team nested in another hands up only its
    final answer and messages).

    ``text`` is the final answer whatever the stop reason: the router's finalize step,
    the supervisor's answer or, when a cap or a loop ended the run, its last synthesis
    or else the last worker output (never an empty string that reads like an answer).
    ``output`` follows the agent layer: set when ``stop_reason == "completed"``.

    Attributes:
        route_log: every routing decision, in order (see :class:`RouteRecord`).
        delegations: every worker run, in the order they were asked for.
        partial: the workers the team asked for work whose output it lacks (they
            failed, or a cap or a loop skipped them), in order; empty when nothing is
            missing.
        specialist_calls: worker runs this team made itself (its counter; nested teams
            count their own).
        cap: the cap that ended the run when ``stop_reason == "cap"``: the option's name
            (``"max_specialist_calls"``, ``"max_turns"``, ``"max_calls_per_worker"`` or
            ``"max_fan_out"``); None otherwise.
    """

    route_log: list[RouteRecord] = field(default_factory=list)
    delegations: list[Delegation] = field(default_factory=list)
    partial: list[str] = field(default_factory=list)
    specialist_calls: int = 0
    cap: str | None = None

    @property
    def outputs(self) -> dict[str, str]:
        """Each worker's latest completed output, as text, by worker name."""
        latest: dict[str, str] = {}
        for delegation in self.delegations:
            answer = delegation.answer
            if answer is not None:
                latest[delegation.worker] = answer
        return latest

    @classmethod
    def from_run(cls, result: RunResult[Any], **team: Any) -> TeamResult[Any]:
        """A team result from an agent run's result and the team's records.

        Args:
            result: the run's result.
            **team: ``route_log``, ``delegations``, ``partial``, ``specialist_calls``,
                and any base field to replace (``text``).

        Returns:
            The team result.
        """
        base = {f.name: getattr(result, f.name) for f in fields(RunResult)}
        base.update(team)
        return cls(**base)
