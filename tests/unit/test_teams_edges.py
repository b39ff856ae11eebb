"""Issue 20: the edges of every team shape. Caps end the same way in each shape (a router
goes to its finalize step at a cap, like seed 004 says, and the result names the cap),
and a team that produced nothing never reads as ``completed``."""

from __future__ import annotations

import json

import pytest
from _teams_support import LoggedFunction, answering, decisions

from foreperson.agents import Agent
from foreperson.errors import ModelError
from foreperson.models import ToolCall
from foreperson.teams import FINISH, Router, Team
from foreperson.testing import ScriptedModel


def delegate(worker: str, instructions: str) -> ToolCall:
    return ToolCall("delegate", {"worker": worker, "instructions": instructions})


def broken(name: str) -> Agent:
    """A worker whose model call fails (a 400: not retried)."""
    return Agent("Break.", model=ScriptedModel([ModelError("bad request", status_code=400)]),
                 name=name)


def joined(delegations) -> str:
    return " + ".join(d.answer for d in delegations if d.completed)


def larkspur_router(route: list[str], log: list[str], **options) -> Team:
    workers = {n: answering(n, f"{n} answered", log) for n in ("billing", "operations", "data")}
    return Team.router(workers=workers, model=ScriptedModel(decisions(*route)), **options)


def larkspur_supervisor(turns: list, log: list[str], **options) -> Team:
    workers = {n: answering(n, f"{n} answered", log) for n in ("billing", "operations", "data")}
    return Team.supervisor(workers=workers, instructions="Manage.",
                           model=ScriptedModel(turns), **options)


# --- caps end the same way in every shape ---------------------------------------------------


@pytest.mark.anyio
async def test_a_router_at_its_cap_runs_finalize_on_what_it_has():
    log: list[str] = []
    team = larkspur_router(["billing", "operations", "data"], log, max_specialist_calls=2,
                           finalize=joined)
    result = await team.run("outage credits")
    assert log == ["billing", "operations"]
    assert result.stop_reason == "cap" and result.cap == "max_specialist_calls"
    assert result.text == "billing answered + operations answered"     # finalize's answer
    last = result.route_log[-1]
    assert (last.decision, last.routed_to, last.overridden_by) == ("data", "finalize", "cap")


@pytest.mark.anyio
@pytest.mark.parametrize("cap", [2, 3])
async def test_a_finish_at_or_under_the_cap_completes_through_finalize(cap):
    log: list[str] = []
    team = larkspur_router(["billing", "operations", FINISH], log, max_specialist_calls=cap,
                           finalize=joined)
    result = await team.run("outage credits")
    assert result.stop_reason == "completed" and result.cap is None
    assert result.output == result.text == "billing answered + operations answered"
    assert result.route_log[-1].overridden_by is None


@pytest.mark.anyio
async def test_a_supervisor_and_a_router_that_stop_at_the_same_count_agree():
    router_log: list[str] = []
    supervisor_log: list[str] = []
    router = larkspur_router(["billing", "operations", FINISH], router_log,
                             max_specialist_calls=2)
    supervisor = larkspur_supervisor(
        [delegate("billing", "credits?"), delegate("operations", "what broke?"), "Both done."],
        supervisor_log, max_specialist_calls=2)
    finished = [await router.run("outage"), await supervisor.run("outage")]
    assert [r.stop_reason for r in finished] == ["completed", "completed"]
    assert [r.specialist_calls for r in finished] == [2, 2]

    router = larkspur_router(["billing", "operations", "data"], [], max_specialist_calls=2)
    supervisor = larkspur_supervisor(
        [delegate("billing", "credits?"), delegate("operations", "what broke?"),
         delegate("data", "lost?")], [], max_specialist_calls=2)
    capped = [await router.run("outage"), await supervisor.run("outage")]
    assert [(r.stop_reason, r.cap) for r in capped] == [("cap", "max_specialist_calls")] * 2
    assert [r.text for r in capped] == ["operations answered"] * 2


@pytest.mark.anyio
async def test_the_result_names_the_turn_cap():
    team = Team.router(workers={"writer": answering("writer", "w")}, decide=lambda s: "writer",
                       max_turns=2, max_specialist_calls=None)
    result = await team.run("go")
    assert (result.stop_reason, result.cap) == ("cap", "max_turns")
    assert "max_turns=2" in result.detail


# --- failure never reads as an answer -------------------------------------------------------


@pytest.mark.anyio
async def test_a_router_whose_only_worker_failed_ends_worker_failed_not_completed():
    team = Team.router(workers={"billing": broken("billing")},
                       model=ScriptedModel(decisions("billing", FINISH)))
    result = await team.run("credits?")
    assert result.stop_reason == "worker_failed" and not result.completed
    assert result.partial == ["billing"] and result.output is None
    assert result.text is None                        # never the failure JSON as an answer
    assert "no worker run completed" in result.detail and "bad request" in result.detail


@pytest.mark.anyio
async def test_a_first_turn_finish_is_sent_back_once_then_ends_with_no_answer():
    model = ScriptedModel(decisions(FINISH, FINISH))
    team = Team.router(workers={"billing": answering("billing")}, model=model)
    result = await team.run("credits?")
    assert result.stop_reason == "no_answer" and result.text is None
    assert [r.kind for r in result.route_log] == ["refused", "route"]
    assert result.route_log[0].overridden_by == "no_work"
    assert "no worker has run yet" in model.calls[1].messages[-1].content


@pytest.mark.anyio
async def test_a_corrected_first_turn_finish_goes_on_to_the_worker():
    log: list[str] = []
    model = ScriptedModel(decisions(FINISH, "billing", FINISH))
    team = Team.router(workers={"billing": answering("billing", "credited", log)}, model=model)
    result = await team.run("credits?")
    assert log == ["billing"] and result.completed and result.output == "credited"


@pytest.mark.anyio
async def test_a_finalize_that_returns_nothing_is_no_answer():
    router = Router(workers={"billing": answering("billing")},
                    decide=lambda s: "billing" if s.specialist_calls == 0 else FINISH,
                    finalize=lambda delegations: None)
    result = await Agent("", model=ScriptedModel(), architecture=router).run("credits?")
    assert result.stop_reason == "no_answer" and "finalize step returned no answer" in (
        result.detail)


@pytest.mark.anyio
async def test_a_supervisor_whose_workers_all_failed_does_not_complete():
    turns = [[delegate("billing", "credits?"), delegate("data", "lost?")],
             "I could not find out anything."]
    supervisor = Team.supervisor(workers={"billing": broken("billing"), "data": broken("data")},
                                 instructions="Manage.", model=ScriptedModel(turns))
    result = await supervisor.run("outage")
    assert result.stop_reason == "worker_failed" and result.partial == ["billing", "data"]
    assert result.text == "I could not find out anything."       # its words, not an answer
    assert result.route_log[-1].overridden_by == "worker_failed"


@pytest.mark.anyio
async def test_a_supervisor_with_one_failure_and_one_answer_still_completes():
    turns = [[delegate("billing", "credits?"), delegate("data", "lost?")], "No data was lost."]
    supervisor = Team.supervisor(
        workers={"billing": broken("billing"), "data": answering("data", "nothing lost")},
        instructions="Manage.", model=ScriptedModel(turns))
    result = await supervisor.run("outage")
    assert result.completed and result.partial == ["billing"]


@pytest.mark.anyio
async def test_a_parallel_whose_branches_all_failed_never_runs_its_merge():
    merged: list[str] = []
    merge = Agent("Merge.", model=LoggedFunction("merge", lambda m, p: "merged", merged),
                  name="merge")
    team = Team.parallel([broken("a"), broken("b")], merge=merge)
    result = await team.run("go")
    assert result.stop_reason == "worker_failed" and merged == []
    assert result.partial == ["a", "b"]
    reasons = [json.loads(m.text)["completed"] for m in result.messages[2:]]
    assert reasons == [False, False]
