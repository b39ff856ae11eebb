"""The step seam that team shapes, durable runtimes and tests build on.

Each step of an agent's run (a model call, a tool call, an approval, a spawn, a
delegation) goes through a :class:`StepRunner`: :class:`InlineSteps` runs it (the
default), :class:`JournaledSteps` records it in a :class:`~foreperson.journal.Journal`
and replays it. An :class:`Architecture` decides what a run does with its steps
(:class:`ReAct`, or a team shape); a :class:`DurableRuntime` opens a
:class:`RunSession` per run (``foreperson.runtime`` implements it). A user of
:class:`~foreperson.agents.Agent` needs none of these names; someone writing a new team
shape, a runtime or a store-backed test does.
"""

from ._durable import DurableRuntime, RunSession
from ._events import EVENTS_ADAPTER, dump_run_result, load_run_result
from ._react import Architecture, ReAct
from ._run_parts import EventSink, SpawnRecord
from ._runner import (
    JSON_CODEC,
    InlineSteps,
    JournaledSteps,
    StepCodec,
    StepOutcome,
    StepRunner,
    StepSpec,
)
from ._state import AgentView, ParentRun, StepEngine, unfinished_usage
from ._steps import RunParked
from ._vocabulary import Vocabulary

__all__ = [
    "EVENTS_ADAPTER",
    "JSON_CODEC",
    "AgentView",
    "Architecture",
    "DurableRuntime",
    "EventSink",
    "InlineSteps",
    "JournaledSteps",
    "ParentRun",
    "ReAct",
    "RunParked",
    "RunSession",
    "SpawnRecord",
    "StepCodec",
    "StepOutcome",
    "StepRunner",
    "StepEngine",
    "StepSpec",
    "Vocabulary",
    "dump_run_result",
    "load_run_result",
    "unfinished_usage",
]
