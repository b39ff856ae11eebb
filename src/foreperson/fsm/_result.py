"""What a state-machine run returns: :class:`MachineResult`, with its stop reason (one of
:data:`MACHINE_STOP_REASONS`, in the one vocabulary every run uses) and its trace, one
:class:`Transition` per transition taken, each with the :class:`Write` values made in
the state it left. Each converts to and from JSON (the journal's checkpoints and ``end``
step, ``fsm run --json``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from ..agents import STOP_REASONS, StopReason
from ..models import Usage
from ._summon import usage_json

__all__ = ["MACHINE_STOP_REASONS", "MachineResult", "StopReason", "Transition", "Write"]

# one vocabulary of stop reasons for every kind of run (agents, teams, state machines):
# the machine's own are registered beside the agent layer's and the teams layer's
for _name, _meaning in (
        ("max_iterations", "a state machine took maxIterations transitions (seed 003)"),
        ("max_exchanges_per_stage", "a state machine's stage used maxExchangesPerStage "
                                    "exchanges (model calls, seed 003)"),
        ("max_exchanges_per_agent_per_stage", "one agent of a state machine used "
                                              "maxExchangesPerAgentPerStage exchanges "
                                              "(model calls) in one stage (seed 003)"),
        ("no_transition", "a state machine had every requirement met but no transition's "
                          "guards held"),
        ("guard_error", "a state machine's CEL guard or action failed on the run's data, or "
                        "would have exceeded its evaluation budget")):
    STOP_REASONS.register(_name, _meaning)

MACHINE_STOP_REASONS = ("completed", "max_iterations", "max_exchanges_per_stage",
                        "max_exchanges_per_agent_per_stage", "no_transition", "guard_error")
"""The stop reasons a state-machine run ends with (:data:`StopReason` values, in
:data:`~foreperson.agents.STOP_REASONS`): ``"completed"`` (a terminal state was
reached), a policy cap (seed 003's ``maxIterations``, ``maxExchangesPerStage``,
``maxExchangesPerAgentPerStage``), ``"no_transition"`` (every requirement was met but
no transition's guards held), or ``"guard_error"`` (a CEL guard or action failed on the
run's data, or would have exceeded :data:`~foreperson.fsm._cel.MAX_EVALUATION_STEPS`;
the detail is the :class:`~foreperson.errors.GuardError`'s message, and a journaled run
can be resumed once the machine file is fixed)."""


@dataclass(frozen=True, slots=True)
class Write:
    """One value written into the context.

    Attributes:
        field: the field.
        value: the value assigned, or the item appended.
        by: who wrote it: the agent's name, ``"exit"`` or ``"onTransition"``.
        op: ``"assign"`` or ``"append"``.
    """

    field: str
    value: Any
    by: str
    op: Literal["assign", "append"] = "assign"


@dataclass(frozen=True, slots=True)
class Transition:
    """One transition of a run, with what happened in the state it left.

    Attributes:
        index: 1 for the run's first transition.
        from_state: the state left.
        to_state: the state entered.
        guard: the guard that fired (its CEL text), or None for an unguarded edge.
        writes: every write made while in ``from_state``: the agents', then ``exit``'s,
            then the edge's ``onTransition``.
        summoned: the agents summoned in ``from_state``, in order (one entry per
            summons).
        entered_at: when ``from_state`` was entered (UTC).
        duration_s: seconds spent in ``from_state`` (summons included).
        replayed: True when the summons results came from the journal (a resumed run).
    """

    index: int
    from_state: str
    to_state: str
    guard: str | None
    writes: tuple[Write, ...]
    summoned: tuple[str, ...]
    entered_at: datetime
    duration_s: float
    replayed: bool = False

    def to_json(self) -> dict[str, Any]:
        """The transition as JSON (checkpoints, ``fsm run --json``).

        Returns:
            Every attribute; ``entered_at`` in ISO 8601.
        """
        return {"index": self.index, "from_state": self.from_state,
                "to_state": self.to_state, "guard": self.guard,
                "writes": [{"field": w.field, "value": w.value, "by": w.by, "op": w.op}
                           for w in self.writes],
                "summoned": list(self.summoned), "entered_at": self.entered_at.isoformat(),
                "duration_s": self.duration_s, "replayed": self.replayed}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Transition:
        """Read a transition written by :meth:`to_json`.

        Args:
            data: the JSON object.

        Returns:
            The transition.
        """
        values = dict(data)
        values["writes"] = tuple(Write(**w) for w in values["writes"])
        values["summoned"] = tuple(values["summoned"])
        values["entered_at"] = datetime.fromisoformat(values["entered_at"])
        return cls(**values)


@dataclass(frozen=True)
class MachineResult:
    """The outcome of a run.

    Attributes:
        run_id: the run (give it to :meth:`Machine.resume`).
        machine: the machine's name.
        request: the request the run was started with.
        context: the final context, every declared field.
        state: the state the run ended in (the terminal state when completed).
        stop_reason: why it ended.
        detail: a note on the stop (which cap, which guards did not hold), or None.
        trace: every transition, in order.
        usage: model calls, tokens and tool calls of every summons.
    """

    run_id: str
    machine: str
    request: str
    context: dict[str, Any]
    state: str
    stop_reason: StopReason
    detail: str | None
    trace: tuple[Transition, ...]
    usage: Usage = field(default_factory=Usage)

    @property
    def completed(self) -> bool:
        """True when a terminal state was reached."""
        return self.stop_reason == "completed"

    @property
    def path(self) -> list[str]:
        """The states visited, in order: the initial state, then each target."""
        if not self.trace:
            return [self.state]
        return [self.trace[0].from_state, *(t.to_state for t in self.trace)]

    def to_json(self) -> dict[str, Any]:
        """The result as JSON (the journal's ``end`` step, ``fsm run --json``).

        Returns:
            Every attribute; the trace as :meth:`Transition.to_json` objects.
        """
        return {"run_id": self.run_id, "machine": self.machine, "request": self.request,
                "context": self.context, "state": self.state,
                "stop_reason": self.stop_reason, "detail": self.detail,
                "trace": [t.to_json() for t in self.trace], "usage": usage_json(self.usage)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MachineResult:
        """Read a result written by :meth:`to_json`.

        Args:
            data: the JSON object.

        Returns:
            The result.
        """
        return cls(data["run_id"], data["machine"], data["request"], dict(data["context"]),
                   data["state"], data["stop_reason"], data["detail"],
                   tuple(Transition.from_json(t) for t in data["trace"]),
                   Usage(**data["usage"]))
