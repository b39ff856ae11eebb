"""Agent teams (layer 4): a supervisor that decides who works next, workers that do the
work, and code that routes and caps (seeds 001 and 004).

Four shapes, each an :class:`~foreperson.agents.Agent` architecture, so a team is an
agent: it runs with ``run`` / ``run_sync`` / ``stream`` and is a worker of another team
in any combination.

* :class:`TeamSupervisor` (``Team.supervisor``; named apart from the work layer's
  :class:`~foreperson.work.Supervisor`): a model delegating through ``delegate``,
  ``forward_message`` and ``spawn_worker`` tools; delegate calls of one turn run
  concurrently.
* :class:`Router` (``Team.router``): a model returning a typed :class:`RouteDecision`;
  :func:`route` reads the specialist-call counter before the choice.
* :class:`Pipeline` (``Team.pipeline``) and :class:`Parallel` (``Team.parallel``): fixed
  shapes, no routing calls.

A worker is an agent, or a plain function with no model (:func:`function_worker`; a
roster may name the function itself), so a rule-routed team of functions makes no model
call at all.

Deciding (a model, or a rule) is separate from routing and capping (plain code that
reads counters first); every cap ends a run with a result and ``stop_reason == "cap"``,
``recursion_limit`` is the backstop that raises. Every decision goes to the route log
(:class:`RouteRecord`), every worker run is a journaled step and a work-layer
:class:`~foreperson.work.Task` (:class:`Delegation`), and each level keeps its counters
and log to itself (:class:`TeamResult`).

Example::

    from foreperson import Agent, Team

    billing = Agent("Answer billing questions.", model="gpt-4o", name="billing")
    operations = Agent("Explain outages.", model="gpt-4o", name="operations")
    team = Team.router(workers={"billing": billing, "operations": operations},
                       model="gpt-4o")
    result = team.run_sync("My server went down last night. Do I get service credits?")
    for record in result.route_log:
        print(record.decision, record.specialist_calls, record.routed_to)
"""

import warnings
from typing import Any

from ._decompose import decompose, decompose_sync, validate_plan
from ._events import (
    TEAM_EVENTS_ADAPTER,
    CapReachedEvent,
    DelegationFinishedEvent,
    DelegationStartedEvent,
    LoopDetectedEvent,
    RouteDecisionEvent,
    TeamEvent,
    WorkerSpawnedEvent,
)
from ._function import function_worker
from ._mermaid import mermaid
from ._records import FINISH, Delegation, RouteDecision, RouteRecord, TeamResult, Thread
from ._router import Decide, Finalize, Router, RouteState, route
from ._run import DelegationHost
from ._shapes import Parallel, Pipeline
from ._supervisor import TeamSupervisor
from ._team import Team

__all__ = [
    "FINISH",
    "TEAM_EVENTS_ADAPTER",
    "CapReachedEvent",
    "Decide",
    "Delegation",
    "DelegationFinishedEvent",
    "DelegationHost",
    "DelegationStartedEvent",
    "Finalize",
    "LoopDetectedEvent",
    "Parallel",
    "Pipeline",
    "RouteDecision",
    "RouteDecisionEvent",
    "RouteRecord",
    "RouteState",
    "Router",
    "TeamSupervisor",
    "Team",
    "TeamEvent",
    "TeamResult",
    "Thread",
    "WorkerSpawnedEvent",
    "decompose",
    "decompose_sync",
    "function_worker",
    "mermaid",
    "route",
    "validate_plan",
]


def __getattr__(name: str) -> Any:
    """``Supervisor``, the name :class:`TeamSupervisor` had before, kept as a deprecated
    alias (it read as the work layer's :class:`~foreperson.work.Supervisor`)."""
    if name == "Supervisor":
        warnings.warn("foreperson.teams.Supervisor is now foreperson.teams.TeamSupervisor "
                      "(or build it with Team.supervisor); the old name will be removed",
                      DeprecationWarning, stacklevel=2)
        return TeamSupervisor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
