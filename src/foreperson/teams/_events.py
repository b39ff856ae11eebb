"""The events a team run adds to the agent layer's: delegations started and finished, a
routing decision, a spawn, a cap reached, a loop detected.

They reach ``stream()`` live, beside the workers' own model, tool and text-delta events
(which the agent layer relays while each worker runs, tagged with the worker's name and
run id, and with ``parent_path`` = the :attr:`~Delegation.delegation_id` they run
under). Each carries only what is new, never the history again. All serialise through
:data:`TEAM_EVENTS_ADAPTER`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field, TypeAdapter

from ..agents import FinalEvent, ModelCallEvent, TextDeltaEvent, ToolCallEvent, ToolResultEvent
from ._records import RouteRecord

__all__ = [
    "TEAM_EVENTS_ADAPTER",
    "CapReachedEvent",
    "DelegationFinishedEvent",
    "DelegationStartedEvent",
    "LoopDetectedEvent",
    "RouteDecisionEvent",
    "TeamEvent",
    "WorkerSpawnedEvent",
]


@dataclass(frozen=True)
class DelegationStartedEvent:
    """A worker run starts for a team.

    Attributes:
        run_id: the team's run.
        agent: the team's name.
        worker: the worker's name in the roster.
        delegation_id: the delegation's step path; the worker's events carry it as
            ``parent_path``.
        task_id: the work-layer task recording it.
        instructions: what the worker is asked.
        attempt: 1, or more for a retry.
        parent_run_id, parent_path, level: where the team's run is nested (see
            :class:`~foreperson.agents.ModelCallEvent`).
        replayed: True when the delegation's result came from the journal (a resumed
            or re-run durable run): the worker does not run; a
            :class:`DelegationFinishedEvent` marked replayed follows at once.
    """

    run_id: str
    agent: str
    worker: str
    delegation_id: str
    task_id: str
    instructions: str
    attempt: int = 1
    parent_run_id: str | None = None
    parent_path: str | None = None
    level: int = 0
    replayed: bool = False
    kind: Literal["delegation_started"] = "delegation_started"


@dataclass(frozen=True)
class DelegationFinishedEvent:
    """A worker run for a team ended (or raised, or timed out).

    Attributes:
        run_id: the team's run.
        agent: the team's name.
        worker: the worker's name.
        delegation_id: as in :class:`DelegationStartedEvent`.
        task_id: the work-layer task.
        completed: True when the worker gave its final answer.
        text: what it produced (its answer, or what it had when it stopped), or None.
        stop_reason: its run's stop reason, or None when it raised or timed out.
        error: why it did not complete, or None.
        worker_run_id: the worker's run id, or None when it raised.
        duration_s: seconds the delegation took (as recorded, when replayed).
        parent_run_id, parent_path, level: where the team's run is nested.
        replayed: True when it came from the journal instead of a worker run.
    """

    run_id: str
    agent: str
    worker: str
    delegation_id: str
    task_id: str
    completed: bool
    text: str | None
    stop_reason: str | None
    error: str | None
    worker_run_id: str | None
    duration_s: float
    parent_run_id: str | None = None
    parent_path: str | None = None
    level: int = 0
    replayed: bool = False
    kind: Literal["delegation_finished"] = "delegation_finished"


@dataclass(frozen=True)
class RouteDecisionEvent:
    """A team recorded a routing decision (one :class:`RouteRecord`).

    Attributes:
        run_id: the team's run.
        agent: the team's name.
        record: the route log entry.
        parent_run_id, parent_path, level: where the team's run is nested.
        replayed: True when the decision was read from a model reply that came from
            the journal (a resumed durable run).
    """

    run_id: str
    agent: str
    record: RouteRecord
    parent_run_id: str | None = None
    parent_path: str | None = None
    level: int = 0
    replayed: bool = False
    kind: Literal["route_decision"] = "route_decision"


@dataclass(frozen=True)
class WorkerSpawnedEvent:
    """A supervisor spawned a worker (seed 001's ``supervisor.worker_spawned``).

    Attributes:
        run_id: the team's run.
        agent: the team's name.
        role: the new worker's role (its name in the roster).
        worker_id: its id.
        running: workers spawned in this run so far, this one included.
        parent_run_id, parent_path, level: where the team's run is nested.
        replayed: True when the spawn came from the journal: the worker is rebuilt
            under the same role and id.
    """

    run_id: str
    agent: str
    role: str
    worker_id: str
    running: int
    parent_run_id: str | None = None
    parent_path: str | None = None
    level: int = 0
    replayed: bool = False
    kind: Literal["supervisor.worker_spawned"] = "supervisor.worker_spawned"


@dataclass(frozen=True)
class CapReachedEvent:
    """A team cap refused work; the run ends after the current step with
    ``stop_reason == "cap"``.

    Attributes:
        run_id: the team's run.
        agent: the team's name.
        cap: which: ``"max_specialist_calls"``, ``"max_calls_per_worker"``,
            ``"max_fan_out"``, ``"max_turns"``.
        limit: its value.
        detail: what was refused.
        parent_run_id, parent_path, level: where the team's run is nested.
    """

    run_id: str
    agent: str
    cap: str
    limit: int
    detail: str
    parent_run_id: str | None = None
    parent_path: str | None = None
    level: int = 0
    kind: Literal["cap_reached"] = "cap_reached"


@dataclass(frozen=True)
class LoopDetectedEvent:
    """A team asked a worker for what it had already answered, or delegated to a team
    that is already running above it; the run ends with ``stop_reason == "loop"``.

    Attributes:
        run_id: the team's run.
        agent: the team's name.
        worker: the worker asked.
        detail: what repeated.
        parent_run_id, parent_path, level: where the team's run is nested.
    """

    run_id: str
    agent: str
    worker: str
    detail: str
    parent_run_id: str | None = None
    parent_path: str | None = None
    level: int = 0
    kind: Literal["loop_detected"] = "loop_detected"


TeamEvent = Annotated[
    DelegationStartedEvent | DelegationFinishedEvent | RouteDecisionEvent
    | WorkerSpawnedEvent | CapReachedEvent | LoopDetectedEvent
    | ModelCallEvent | TextDeltaEvent | ToolCallEvent | ToolResultEvent | FinalEvent,
    Field(discriminator="kind"),
]
"""Any event of a team's stream: the team events above and the agent layer's, told
apart by ``kind``."""

TEAM_EVENTS_ADAPTER: TypeAdapter[TeamEvent] = TypeAdapter(TeamEvent)
"""Serialises any event of a team's stream:
``TEAM_EVENTS_ADAPTER.dump_python(event, mode="json")``."""
