"""State machines declared in YAML, in seed 003's format: typed context fields, CEL
guards, ``requires``, ``exit`` / ``onTransition`` actions, policy caps, checkpoints.
The supervisor's only lever is a typed write into the context; the routing table is
the guards, readable (and checked) before the run.

Example::

    from foreperson.fsm import Machine

    machine = Machine.from_file("support_router.yaml")   # every problem at once,
                                                          # as file:line:column
    print(machine.render())                               # Mermaid, guards on edges
    result = machine.run_sync("I was charged twice", agents={
        "supervisor": supervisor, "billing_agent": billing,
        "tech_agent": tech, "security_agent": security})
    print(result.stop_reason, result.context["answer"])
    for t in result.trace:
        print(t.from_state, "->", t.to_state, t.guard)

With a task store (``store=SqliteStore(...)``, a ``PostgresStore``), every summons is a
work-layer task of kind ``<machine>:<agent>``: durable, retried, shown by
``foreperson status``, and answerable by ``foreperson worker`` processes running
:func:`summons_app` on other machines.
"""

from ..errors import GuardError, MachineSpecError, SpecProblem
from ._check import load_spec
from ._fields import CONTEXT_VALUE_CAP, FieldSpec
from ._machine import Machine
from ._render import render_dot, render_mermaid
from ._result import MACHINE_STOP_REASONS, MachineResult, StopReason, Transition, Write
from ._spec import Action, AgentSpec, Edge, MachineSpec, Policy, Requirement, StateSpec
from ._summon import UPDATE_CONTEXT, AgentSummoner, ContextWriter, Summoner, SummonResult, Summons
from ._tasks import SUMMONS_LEASE_S, TaskSummoner, summons_app, summons_kind

__all__ = [
    "MACHINE_STOP_REASONS",
    "CONTEXT_VALUE_CAP",
    "SUMMONS_LEASE_S",
    "UPDATE_CONTEXT",
    "Action",
    "AgentSpec",
    "AgentSummoner",
    "ContextWriter",
    "Edge",
    "FieldSpec",
    "GuardError",
    "Machine",
    "MachineResult",
    "MachineSpec",
    "MachineSpecError",
    "Policy",
    "Requirement",
    "SpecProblem",
    "StateSpec",
    "StopReason",
    "SummonResult",
    "TaskSummoner",
    "Summoner",
    "Summons",
    "Transition",
    "Write",
    "load_spec",
    "render_dot",
    "render_mermaid",
    "summons_app",
    "summons_kind",
]
