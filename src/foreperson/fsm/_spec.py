"""The machine spec: what a YAML file declares, checked whole at load.

The format is seed 003's, read as written::

    fsm:
      name, version, initialState
      context:  FIELD: {type: string|enum|list|number|boolean|object, values: [...], of: T}
      agents:   NAME: {canTransition: [STATE, ...], instructions: TEXT}
      states:   NAME: {description, requires, exit, transitions, terminal}
      policy:   {maxIterations, maxExchangesPerStage, maxExchangesPerAgentPerStage,
                 checkpointEvery}

What the machine runs on are the frozen dataclasses below; what users write is validated
by the pydantic models after them (STYLE 4: pydantic at the edges), piece by piece, so
one broken state does not hide the problems of the others. The checker that does it,
collecting every problem at once, each at its line and column (STYLE 14), in a
:class:`~foreperson.errors.MachineSpecError`, is :mod:`foreperson.fsm._check`, with
:func:`~foreperson.fsm.load_spec`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ._cel import Expression
from ._fields import FieldSpec, Template

__all__ = [
    "Action",
    "AgentSpec",
    "Edge",
    "MachineSpec",
    "Policy",
    "Requirement",
    "StateSpec",
]


# --- what the machine runs on (dataclasses) --------------------------------------------

@dataclass(frozen=True)
class AgentSpec:
    """A declared agent.

    Attributes:
        name: the agent's name (a key of the ``agents=`` mapping given to a run).
        can_transition: the states it may act in (seed 003: ``canTransition``).
        instructions: its instructions for ``foreperson fsm run``, or None (a generic
            text is used).
    """

    name: str
    can_transition: tuple[str, ...]
    instructions: str | None = None


@dataclass(frozen=True)
class Requirement:
    """A field a state needs before it can be left (seed 003: ``requires``).

    Attributes:
        field: the context field.
        agent: the agent summoned to write it (``from: {agent: NAME}``, or the one agent
            whose ``canTransition`` has the state, for ``from: agent``).
        named: True when the YAML named the agent.
    """

    field: str
    agent: str
    named: bool


@dataclass(frozen=True)
class Action:
    """One write done by the machine itself: ``exit`` (before the edge) or
    ``onTransition`` (on the edge) (seed 003).

    Attributes:
        kind: ``"append"`` (list fields: the list grows) or ``"assign"``.
        field: the field written.
        value: the literal value (already coerced), when ``expression`` is None.
        expression: a ``${ CEL }`` value, evaluated on the context at that moment.
    """

    kind: Literal["append", "assign"]
    field: str
    value: Any = None
    expression: Expression | None = None

    def describe(self) -> str:
        """The action as text, for diagrams and errors.

        Returns:
            ``FIELD += VALUE`` for an append, ``FIELD = VALUE`` for an assign; a CEL
            value is shown as ``${ EXPRESSION }``, a literal as JSON.
        """
        shown = (f"${{ {self.expression.source} }}" if self.expression is not None
                 else json.dumps(self.value, ensure_ascii=False))
        return f"{self.field} {'+=' if self.kind == 'append' else '='} {shown}"


@dataclass(frozen=True)
class Edge:
    """A transition (seed 003: ``transitions``): taken when every guard holds; edges are
    tried in the order written, the first that holds is taken.

    Attributes:
        source: the state it leaves.
        target: the state it enters (``toState``).
        guards: CEL expressions that must all be true (none: always taken).
        on_transition: actions run on the edge, after the source's ``exit``.
        index: its position among the source's transitions, from 0.
    """

    source: str
    target: str
    guards: tuple[Expression, ...]
    on_transition: tuple[Action, ...]
    index: int

    @property
    def guard_text(self) -> str | None:
        """The guards joined with ``&&``, or None for an unguarded edge."""
        if not self.guards:
            return None
        if len(self.guards) == 1:
            return self.guards[0].source
        return " && ".join(f"({g.source})" for g in self.guards)


@dataclass(frozen=True)
class StateSpec:
    """A declared state.

    Attributes:
        name: its name.
        description: the objective as written (``{{ context.FIELD }}`` places).
        template: the parsed description.
        requires: the fields it needs, each with the agent summoned to write it.
        exit: actions run when it is left, before the edge's ``onTransition``.
        transitions: its edges, in the order written.
        terminal: reaching it ends the run (``stop_reason="completed"``).
        reads: the fields its guards and exit actions read; None means all of them.
    """

    name: str
    description: str
    template: Template
    requires: tuple[Requirement, ...]
    exit: tuple[Action, ...]
    transitions: tuple[Edge, ...]
    terminal: bool
    reads: frozenset[str] | None

    def fields_from(self, agent: str) -> list[str]:
        """The fields this state requires from ``agent``.

        Seed 003: an agent may write only the fields its current state
        requires from it.

        Args:
            agent: the agent's name.

        Returns:
            The fields, in the order of ``requires`` (empty: it may write nothing here).
        """
        return [r.field for r in self.requires if r.agent == agent]


@dataclass(frozen=True)
class Policy:
    """Caps and checkpoints (seed 003: ``policy``). Each cap ends the run with a result
    whose ``stop_reason`` names it.

    Attributes:
        max_iterations: transitions a run may take (default 50).
        max_exchanges_per_stage: exchanges within one visit of a state, every agent's
            together (default 30). One exchange is one model call of a summoned agent;
            a summons answered without a model call counts as one.
        max_exchanges_per_agent_per_stage: exchanges of one agent within one visit of a
            state (default 15). Each summons runs its agent with ``max_turns`` at most
            what is left of both caps (``Summons.max_model_calls``), so an agent that
            never writes what it is asked costs at most this many model calls a visit.
        checkpoint_every: transitions between two checkpoints written to the store
            (default 5).
    """

    max_iterations: int = 50
    max_exchanges_per_stage: int = 30
    max_exchanges_per_agent_per_stage: int = 15
    checkpoint_every: int = 5


@dataclass(frozen=True)
class MachineSpec:
    """A loaded, checked machine.

    Attributes:
        name: the machine's name.
        version: its version, as written.
        initial_state: where a run starts.
        fields: the context fields, in declaration order.
        agents: the agents, in declaration order.
        states: the states, in declaration order.
        policy: caps and checkpoints.
        source: the file it was read from (or the ``source`` name given for text).
        digest: SHA-256 of the spec's content; a run resumes only on the same digest.
    """

    name: str
    version: int | str
    initial_state: str
    fields: Mapping[str, FieldSpec]
    agents: Mapping[str, AgentSpec]
    states: Mapping[str, StateSpec]
    policy: Policy
    source: str
    digest: str

    @property
    def edges(self) -> list[Edge]:
        """Every transition of every state, in declaration order."""
        return [edge for state in self.states.values() for edge in state.transitions]

    def summary(self) -> str:
        """The machine in one line, as ``foreperson fsm check`` prints it.

        Returns:
            ``machine NAME vVERSION: N states (T terminal), A agents, F context fields,
            E edges``.
        """
        terminal = sum(1 for s in self.states.values() if s.terminal)
        return (f"machine {self.name} v{self.version}: {len(self.states)} states "
                f"({terminal} terminal), {len(self.agents)} agents, {len(self.fields)} "
                f"context fields, {len(self.edges)} edges")


# --- what users write (pydantic) --------------------------------------------------------

class _Edge(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class _Header(_Edge):
    name: str = Field(min_length=1)
    version: int | str = 1
    initial_state: str = Field(alias="initialState")


class _FieldModel(_Edge):
    type: Literal["string", "enum", "list", "number", "boolean", "object"]
    values: list[str] | None = None
    of: Literal["string", "number", "boolean", "object"] | None = None


class _AgentModel(_Edge):
    can_transition: list[str] = Field(default_factory=list, alias="canTransition")
    instructions: str | None = None


class _RequirementModel(_Edge):
    name: str
    from_: Any = Field(alias="from")        # `agent` or {agent: NAME}: checked by hand


class _GuardModel(_Edge):
    backend: Literal["cel"] = "cel"
    expression: str


class _ActionModel(_Edge):
    append: dict[str, Any] | None = None
    assign: dict[str, Any] | None = None


class _TransitionModel(_Edge):      # guards and actions are validated one by one
    to_state: str = Field(alias="toState")
    guards: list[Any] = Field(default_factory=list)
    on_transition: list[Any] = Field(default_factory=list, alias="onTransition")


class _StateModel(_Edge):           # each item is validated on its own, so one broken
    description: str = ""           # transition does not hide the state's other problems
    requires: list[Any] = Field(default_factory=list)
    exit: list[Any] = Field(default_factory=list)
    transitions: list[Any] = Field(default_factory=list)
    terminal: bool = False


class _PolicyModel(_Edge):
    max_iterations: int = Field(50, ge=1, alias="maxIterations")
    max_exchanges_per_stage: int = Field(30, ge=1, alias="maxExchangesPerStage")
    max_exchanges_per_agent_per_stage: int = Field(15, ge=1,
                                                   alias="maxExchangesPerAgentPerStage")
    checkpoint_every: int = Field(5, ge=1, alias="checkpointEvery")
