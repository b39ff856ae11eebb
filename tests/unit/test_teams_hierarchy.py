"""Hierarchies (seed 004): pipeline and parallel shapes, teams nested in any combination,
one shared contract between levels, counters and logs that stay at their level (table 4,
the planted double count), a cap at every level, table 5 (the two-team hierarchy and
its follow-ups), ping-pong between nested teams, and mermaid()."""

from __future__ import annotations

import anyio
import pytest
from _teams_support import (
    FOLLOW_UP,
    OUTAGE,
    Barrier,
    answering,
    decisions,
    flat_router,
    prompt_of,
    two_team_hierarchy,
)

from foreperson.agents import Agent
from foreperson.models import ToolCall
from foreperson.teams import (
    FINISH,
    Parallel,
    Pipeline,
    Router,
    Team,
    TeamSupervisor,
    Thread,
    mermaid,
)
from foreperson.testing import FunctionModel, ScriptedModel

# --- the fixed shapes ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_pipeline_runs_each_stage_in_order_with_no_routing_calls():
    seen: list[str] = []

    def analyst(messages, params):
        seen.append(prompt_of(messages))
        return "revenue fell 4 %"

    def advisor(messages, params):
        seen.append(prompt_of(messages))
        return "cut costs"

    team = Team.pipeline([Agent("Analyse.", model=FunctionModel(analyst), name="analyst"),
                          Agent("Advise.", model=FunctionModel(advisor), name="advisor")],
                         name="analysis")
    result = await team.run("Q3 numbers?")
    assert result.completed and result.text == "cut costs"
    assert result.usage.model_calls == 2 and result.route_log == []
    assert seen[0] == "Q3 numbers?" and "[analyst] revenue fell 4 %" in seen[1]
    assert [d.index for d in result.delegations] == [1, 2]


@pytest.mark.anyio
async def test_a_pipeline_stops_at_a_stage_that_fails():
    broken = Agent("Break.", model=ScriptedModel([ValueError("no data")]), name="broken")
    log: list[str] = []
    team = Team.pipeline([answering("first", "one", log), broken, answering("last", log=log)])
    result = await team.run("go")
    assert result.stop_reason == "worker_failed" and log == ["first"]
    assert result.text == "one" and result.partial == ["broken"]


@pytest.mark.anyio
async def test_parallel_branches_run_at_once_and_the_merge_sees_every_output():
    barrier = Barrier(2)
    merged: list[str] = []

    def branch(answer: str) -> FunctionModel:
        async def reply(messages, params):
            await barrier.wait()
            return answer
        return FunctionModel(reply)

    def merge(messages, params):
        merged.append(prompt_of(messages))
        return "both said yes"

    team = Team.parallel([Agent("A.", model=branch("yes from a"), name="a"),
                          Agent("B.", model=branch("yes from b"), name="b")],
                         merge=Agent("Merge.", model=FunctionModel(merge), name="merge"))
    with anyio.fail_after(10):
        result = await team.run("agree?")
    assert result.text == "both said yes"
    assert "[a] yes from a" in merged[0] and "[b] yes from b" in merged[0]
    assert [d.worker for d in result.delegations] == ["a", "b", "merge"]


@pytest.mark.anyio
async def test_parallel_without_a_merge_answers_with_each_output_and_reports_failures():
    broken = Agent("Break.", model=ScriptedModel([ValueError("down")]), name="broken")
    result = await Team.parallel([answering("a", "fine"), broken]).run("go")
    assert result.text == "[a] fine\n\n[broken] (did not complete)"
    assert result.partial == ["broken"]


@pytest.mark.anyio
async def test_all_four_shapes_are_agents_and_nest_in_any_combination():
    pipeline = Team.pipeline([answering("p1", "p1 out"), answering("p2", "p2 out")],
                             name="pipe")
    router = Team.router(workers={"pipe": pipeline}, name="route",
                         model=ScriptedModel(decisions("pipe", FINISH)))
    fan = Team.parallel([router, answering("side", "side out")], name="fan",
                        merge=answering("merge", "merged"))
    top = Team.supervisor(workers={"fan": fan}, instructions="Manage.", name="top",
                          model=ScriptedModel([ToolCall("delegate", {"worker": "fan",
                                                                     "instructions": "go"}),
                                               "top answer"]))
    for team in (pipeline, router, fan, top):
        assert isinstance(team, Agent)
    result = await top.run("everything")
    assert result.completed and result.text == "top answer"
    assert result.delegations[0].output == "merged"
    assert result.usage.model_calls == 2 + 2 + 1 + 1 + 2     # p1 p2, route x2, side, merge, top x2


# --- table 4: counters stay at their level --------------------------------------------------


@pytest.mark.anyio
async def test_table_4_a_counter_crossing_a_team_boundary_is_counted_once():
    """Seed 004's planted test: a parent step adds 1, a team step adds 1; the parent
    must read 2, not 3 (the team hands up its answer, never its counter)."""
    team = Team.router(workers={"b": answering("b", "b done")}, name="team",
                       model=ScriptedModel(decisions("b", FINISH)))
    parent = Team.router(workers={"a": answering("a", "a done"), "team": team}, name="parent",
                         model=ScriptedModel(decisions("a", "team", FINISH)))
    result = await parent.run("go")
    assert result.route_log[1].specialist_calls == 1       # after the parent's own step
    assert result.route_log[2].specialist_calls == 2       # after the team's step: 2, not 3
    assert result.specialist_calls == 2
    inner = result.delegations[1]
    assert (inner.worker, inner.output) == ("team", "b done")
    assert not hasattr(inner, "route_log") and not hasattr(inner, "specialist_calls")
    assert [r.team for r in result.route_log] == ["parent"] * 3   # no inner decision leaks
    assert result.usage.model_calls == 3 + 2 + 2                  # each call counted once


@pytest.mark.anyio
async def test_each_level_has_its_own_cap():
    inner = Team.router(workers={"b": answering("b", "b out")}, name="inner",
                        decide=lambda s: "b", max_specialist_calls=2)
    outer = Team.router(workers={"inner": inner}, name="outer", max_specialist_calls=1,
                        decide=lambda s: "inner")
    result = await outer.run("go")
    assert result.stop_reason == "cap" and result.specialist_calls == 1
    delegation = result.delegations[0]
    assert delegation.completed is False and delegation.stop_reason == "cap"
    assert delegation.text == "b out"                # the inner cap's best-effort answer
    assert result.text == "b out"


# --- table 5: the two-team hierarchy -------------------------------------------------------


@pytest.mark.anyio
async def test_table_5_the_two_team_hierarchy_costs_7_calls_5_routing_and_5_per_follow_up():
    log: list[str] = []
    team = two_team_hierarchy(log, ceo=["platform", "accounts", FINISH,
                                        "accounts", FINISH],
                              lead=["billing", FINISH, "billing", FINISH])
    thread = Thread()
    result = await team.run(OUTAGE, thread=thread)
    assert log == ["ceo", "operations", "ceo", "accounts_lead", "billing", "accounts_lead",
                   "ceo"]
    routing = [n for n in log if n in ("ceo", "accounts_lead")]
    assert result.usage.model_calls == 7 and len(routing) == 5
    assert result.completed and result.text == result.outputs["accounts"]
    assert [r.routed_to for r in result.route_log] == ["platform", "accounts", FINISH]

    log.clear()
    follow = await team.run(FOLLOW_UP, thread=thread)
    assert log == ["ceo", "accounts_lead", "billing", "accounts_lead", "ceo"]
    assert follow.usage.model_calls == 5

    flat_log: list[str] = []
    flat = flat_router(flat_log, "operations", "billing", FINISH, "billing", FINISH)
    flat_thread = Thread()
    first = await flat.run(OUTAGE, thread=flat_thread)
    flat_log.clear()
    again = await flat.run(FOLLOW_UP, thread=flat_thread)
    assert (first.usage.model_calls, again.usage.model_calls) == (5, 3)


@pytest.mark.anyio
async def test_every_level_records_its_delegations_in_one_store_with_parent_links():
    log: list[str] = []
    team = two_team_hierarchy(log, ceo=["platform", "accounts", FINISH],
                              lead=["billing", FINISH])
    result = await team.run(OUTAGE)
    store = team.architecture.store
    tasks = {t.kind: t for t in store.list_tasks(run_id=result.run_id)}
    assert sorted(tasks) == ["accounts", "billing", "operations", "platform"]
    assert tasks["billing"].parent_id == tasks["accounts"].id
    assert tasks["operations"].parent_id == tasks["platform"].id
    assert tasks["accounts"].parent_id is None
    assert store.stats(run_id=result.run_id).counts[tasks["billing"].status] == 4


# --- loops between nested teams ------------------------------------------------------------


@pytest.mark.anyio
async def test_ping_pong_between_two_nested_supervisors_ends_as_a_loop():
    def bouncing(to: str):
        def reply(messages, params):
            return ToolCall("delegate", {"worker": to, "instructions": prompt_of(messages)})
        return FunctionModel(reply)

    a = TeamSupervisor(workers={"helper": answering("helper")})
    team_a = Agent("A.", model=bouncing("team_b"), name="team_a", architecture=a)
    team_b = Team.supervisor(workers={"team_a": team_a}, instructions="B.",
                             model=bouncing("team_a"), name="team_b")
    a.add_worker("team_b", team_b)
    with anyio.fail_after(10):
        result = await team_a.run("ping")
    assert result.stop_reason == "loop"
    inner = result.delegations[0]
    assert inner.worker == "team_b" and inner.stop_reason == "loop"
    assert result.usage.model_calls == 2         # A and B each decided once


@pytest.mark.anyio
async def test_ping_pong_through_routers_ends_as_a_loop():
    b = Router(workers={"x": answering("x")}, decide=lambda s: "a")
    team_b = Agent("", model=ScriptedModel(), name="b", architecture=b)
    a = Team.router(workers={"b": team_b}, decide=lambda s: "b", name="a")
    b.add_worker("a", a)
    result = await a.run("ping")
    assert result.stop_reason == "loop"
    assert result.delegations[0].stop_reason == "loop"


# --- mermaid -------------------------------------------------------------------------------


def test_mermaid_draws_the_roster_and_nesting_of_every_shape():
    team = two_team_hierarchy([], ceo=[], lead=[])
    text = team.mermaid()
    assert text == mermaid(team)
    assert text.splitlines() == [
        "flowchart TD",
        '    n0{{"ceo (router)"}}',
        '    n1{{"accounts (router)"}}',
        '    n2["billing"]',
        "    n1 -->|route| n2",
        '    n3["data"]',
        "    n1 -->|route| n3",
        "    n0 -->|route| n1",
        '    n4{{"platform (pipeline)"}}',
        '    n5["operations"]',
        "    n4 -->|1| n5",
        "    n0 -->|route| n4",
    ]
    fan = Team.parallel([answering("a"), answering("b")], merge=answering("m"))
    assert "n1 --> n3" in fan.mermaid() and "n0 -->|fan out| n2" in fan.mermaid()
    spawning = Team.supervisor(workers={"w": answering("w")}, instructions="x",
                               model=ScriptedModel(), allow_spawn=True, max_spawned=2)
    assert "spawned workers (at most 2)" in spawning.mermaid()
    assert mermaid(answering("solo")) == 'flowchart TD\n    n0["solo"]\n'


def test_mermaid_draws_a_cycle_once():
    a = TeamSupervisor(workers={"w": answering("w")})
    team_a = Agent("A.", model=ScriptedModel(), name="team_a", architecture=a)
    team_b = Team.supervisor(workers={"team_a": team_a}, instructions="B.",
                             model=ScriptedModel(), name="team_b")
    a.add_worker("team_b", team_b)
    lines = mermaid(team_a).splitlines()
    assert "    n2 -->|delegate| n0" in lines      # team_b points back at team_a's node
    assert sum("team_a" in line for line in lines) == 1


def test_the_shapes_refuse_duplicate_names():
    from foreperson.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="two agents are named"):
        Pipeline([answering("a"), answering("a")])
    with pytest.raises(ConfigurationError, match="non-empty list"):
        Parallel([])
    with pytest.raises(ConfigurationError, match="model .* or a routing rule"):
        Team.router(workers={"a": answering("a")})
