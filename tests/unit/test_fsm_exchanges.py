"""One exchange is one model call (issue 20, item 9): seed 003's
``maxExchangesPerAgentPerStage`` and ``maxExchangesPerStage`` bound the model calls of a
stage, not only its summons. A summons carries its turn budget
(``Summons.max_model_calls``: what is left of both caps); :class:`AgentSummoner` runs the
agent with ``max_turns`` lowered to it; the budget travels in a summons task's payload
and stays out of the journal digest.

The end-to-end tests need the interpreter to set the budget and charge each summons its
model calls (the patch described in the report of issue 20 item 9); until it does they
are expected to fail, and they run as plain tests as soon as it does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from foreperson.agents import Agent, Guards, Limits
from foreperson.fsm import (
    UPDATE_CONTEXT,
    AgentSummoner,
    FieldSpec,
    Machine,
    SummonResult,
    Summons,
)
from foreperson.models import ToolCall, ToolReturn
from foreperson.testing import FunctionModel
from foreperson.work import MemoryStore

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "tests" / "fixtures" / "fsm" / "support_router_seed.yaml"
AGENTS = ["supervisor", "billing_agent", "tech_agent", "security_agent"]


class BadRoute:
    """A model that always writes a route that does not exist (seed 003's supervisor
    gone wrong): every call is one more refused ``updateContext``."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, messages: Any, params: Any) -> ToolCall:
        self.calls += 1
        return ToolCall(UPDATE_CONTEXT, {"field": "route", "value": "refund"})


def route_summons(budget: int | None) -> Summons:
    route = FieldSpec("route", "enum", values=("billing", "technical", "security",
                                               "synthesize"))
    return Summons(run_id="r", key="summons/0/triage/supervisor/1", machine="m",
                   state="triage", agent="supervisor", objective="Route it.", context={},
                   request="help", writable=(route,), missing=("route",),
                   max_model_calls=budget)


def summon(agent: Agent, summons: Summons) -> SummonResult:
    async def go() -> SummonResult:
        return await AgentSummoner({"supervisor": agent}).summon(summons)

    return anyio.run(go)


# -- the summons' budget (this side of the seam) -----------------------------------------

def test_a_summons_budget_is_the_agent_runs_turn_budget():
    model = BadRoute()
    result = summon(Agent("Route.", model=FunctionModel(model)), route_summons(3))
    assert model.calls == 3 == result.usage.model_calls
    assert result.stop_reason == "max_turns" and result.writes == ()


def test_a_budget_never_raises_the_agents_own_cap_and_none_keeps_it():
    model = BadRoute()
    capped = Agent("Route.", model=FunctionModel(model),
                   guards=Guards(limits=Limits(max_turns=2)))
    assert summon(capped, route_summons(5)).usage.model_calls == 2
    model.calls = 0
    assert summon(capped, route_summons(None)).usage.model_calls == 2


def test_the_budget_travels_in_json_and_stays_out_of_the_digest():
    budgeted, plain = route_summons(4), route_summons(None)
    assert budgeted.to_json()["max_model_calls"] == 4
    assert Summons.from_json(budgeted.to_json()) == budgeted     # a task's payload
    assert "max_model_calls" not in plain.to_json()               # as before budgets
    assert budgeted.digest_json() == plain.digest_json() == plain.to_json()
    with pytest.raises(ValueError, match="max_model_calls must be >= 1"):
        route_summons(0)


# -- the machine ------------------------------------------------------------------------


def bad_supervisor(store: Any = None, text: str | None = None) -> tuple[Any, BadRoute]:
    model = BadRoute()
    agents = {name: Agent(f"You are {name}.", model=FunctionModel(model), name=name)
              for name in AGENTS}
    machine = Machine.from_text(text if text is not None else SEED.read_text())
    return machine.run_sync("I was charged twice", agents=agents, store=store), model


@pytest.mark.parametrize("store", [None, "journal"], ids=["in memory", "summons tasks"])
def test_a_supervisor_that_keeps_writing_a_bad_route_costs_at_most_the_cap(store):
    # seed 003's policy: maxExchangesPerAgentPerStage 15 (the issue measured 300 calls)
    result, model = bad_supervisor(MemoryStore() if store else None)
    assert model.calls <= 15
    assert result.usage.model_calls == model.calls
    assert result.stop_reason == "max_exchanges_per_agent_per_stage"
    assert "maxExchangesPerAgentPerStage (15) reached for 'supervisor'" in result.detail
    assert result.state == "triage" and result.trace == ()


def test_the_stage_cap_bounds_model_calls_too():
    text = SEED.read_text().replace("maxExchangesPerStage: 30", "maxExchangesPerStage: 4")
    result, model = bad_supervisor(text=text)
    assert model.calls <= 4
    assert result.stop_reason == "max_exchanges_per_stage"


class GivesUp:
    """A supervisor that writes a bad route twice, then answers without routing (three
    model calls a summons), and can be told to crash on one call."""

    def __init__(self, crash_on: int | None = None) -> None:
        self.calls = 0
        self.crash_on = crash_on

    def __call__(self, messages: Any, params: Any) -> Any:
        self.calls += 1
        if self.calls == self.crash_on:
            raise Crash(f"killed on call {self.calls}")
        if sum(isinstance(m, ToolReturn) for m in messages) < 2:
            return ToolCall(UPDATE_CONTEXT, {"field": "route", "value": "refund"})
        return "I cannot route this"


class Crash(Exception):
    pass


def summoner(model: GivesUp) -> AgentSummoner:
    return AgentSummoner({name: Agent(name, model=FunctionModel(model), name=name)
                          for name in AGENTS})


def test_a_resumed_run_counts_the_journaled_calls_of_the_stage():
    store = MemoryStore()
    machine = Machine.from_file(SEED)
    first = GivesUp(crash_on=7)             # two summons (6 calls) journaled, then killed
    with pytest.raises(Crash):
        machine.run_sync("help", summoner=summoner(first), store=store, run_id="r1")
    second = GivesUp()
    result = machine.resume_sync("r1", store=store, summoner=summoner(second))
    assert second.calls <= 15 - 6           # the journaled summons' calls are counted
    assert result.usage.model_calls <= 15
    assert result.stop_reason == "max_exchanges_per_agent_per_stage"
