"""Seed 004's typed router: RouteDecision, counter-first routing, the route log, invalid
decisions, the backstop, and the seed's tables 2 and 3 (with their follow-ups)."""

from __future__ import annotations

import re
import typing

import pytest
from _teams_support import (
    FOLLOW_UP,
    OUTAGE,
    Logged,
    LoggedFunction,
    answering,
    decisions,
    flat_router,
    prompt_of,
)

from foreperson.agents import Agent
from foreperson.errors import RecursionLimitExceeded
from foreperson.models import ModelResponse, SystemMessage, UserMessage
from foreperson.teams import (
    FINISH,
    RouteDecision,
    Router,
    RouteState,
    Team,
    Thread,
    route,
)
from foreperson.testing import FunctionModel, ScriptedModel

TASK = "Write a short post about tidepools."


def numbered_writer(log: list[str]) -> Agent:
    """Seed 004's stub writer: returns numbered drafts (draft N for its N-th call)."""

    def reply(messages, params):
        earlier = re.findall(r"^\[writer\]", prompt_of(messages), re.M)
        return f"draft {len(earlier) + 1}"

    return Agent("Write drafts.", model=LoggedFunction("writer", reply, log), name="writer")


def always_writer(messages, params):
    return RouteDecision(next="writer", reasoning="the critic has not approved yet")


def transcript(result) -> list[str]:
    return [getattr(m, "content", None) or m.text for m in result.messages
            if not isinstance(m, SystemMessage)]


# --- table 2: the supervisor that never finishes -------------------------------------------


def function_writer(log: list[str]):
    """The stub writer as the seed's cell has it: a plain function, no model."""

    def writer(instructions: str) -> str:
        log.append("writer")
        earlier = re.findall(r"^\[writer\]", instructions, re.M)
        return f"draft {len(earlier) + 1}"

    return writer


@pytest.mark.anyio
@pytest.mark.parametrize("decider", ["model", "rule", "rule and functions"])
async def test_table_2_the_never_finishing_supervisor_is_stopped_by_the_counter(decider):
    log: list[str] = []
    workers = {"researcher": answering("researcher", log=log), "writer": numbered_writer(log),
               "critic": answering("critic", "not approved", log=log)}
    if decider == "rule and functions":       # the notebook's stub cell, as written
        workers = {"researcher": lambda text: "notes", "writer": function_writer(log),
                   "critic": lambda text: "not approved"}
        team = Team.router(workers=workers, decide=lambda state: "writer")
    elif decider == "model":
        team = Team.router(workers=workers, model=LoggedFunction("supervisor", always_writer, log))
    else:
        team = Team.router(workers=workers, decide=lambda state: "writer")
    result = await team.run(TASK)

    assert len(result.route_log) == 7                              # decisions
    assert {r.decision for r in result.route_log} == {"writer"}    # every one "writer"
    assert result.specialist_calls == 6                            # the cap
    assert transcript(result) == [TASK] + [f"draft {i}" for i in range(1, 7)]
    assert result.text == "draft 6"                                # the final response
    assert result.stop_reason == "cap"
    seventh = result.route_log[-1]
    assert (seventh.specialist_calls, seventh.routed_to, seventh.overridden_by) == (
        6, "finalize", "cap")
    assert [r.overridden_by for r in result.route_log[:6]] == [None] * 6
    assert log.count("writer") == 6
    # routing model calls: 7 with a model; 0 with a rule (the seed's stub cell)
    assert log.count("supervisor") == (7 if decider == "model" else 0)
    # every model call of the run: the stub cell's "Model calls 0" needs function workers
    assert result.usage.model_calls == {"model": 13, "rule": 6, "rule and functions": 0}[
        decider]


def test_the_routing_function_reads_the_counter_before_the_choice():
    finish = RouteDecision(next=FINISH, reasoning="done")
    writer = RouteDecision(next="writer", reasoning="again")
    assert route(6, 6, finish) == "finalize"
    assert route(6, 6, writer) == "finalize"
    assert route(5, 6, finish) == FINISH
    assert route(5, 6, writer) == "writer"
    assert route(100, None, writer) == "writer"


def test_the_decision_type_is_a_closed_set_of_the_roster_and_finish():
    closed = RouteDecision.for_workers(["writer", "critic"])
    args = typing.get_args(closed.model_fields["next"].annotation)
    assert args == ("writer", "critic", FINISH)
    assert closed is RouteDecision.for_workers(["writer", "critic"])
    with pytest.raises(ValueError):
        closed(next="editor", reasoning="x")


# --- table 3: the outage request under a flat supervisor -----------------------------------


@pytest.mark.anyio
async def test_table_3_the_outage_request_costs_5_calls_3_of_them_routing():
    log: list[str] = []
    team = flat_router(log, "operations", "billing", FINISH)
    result = await team.run(OUTAGE)
    assert log == ["supervisor", "operations", "supervisor", "billing", "supervisor"]
    assert result.usage.model_calls == 5 and log.count("supervisor") == 3
    assert [r.routed_to for r in result.route_log] == ["operations", "billing", FINISH]
    assert [r.specialist_calls for r in result.route_log] == [0, 1, 2]
    assert result.completed and result.text == result.outputs["billing"]
    # decisions never enter the transcript: it holds the request and the two answers
    assert transcript(result) == [OUTAGE, result.outputs["operations"],
                                  result.outputs["billing"]]
    assert [m.model_name for m in result.messages[2:]] == ["operations", "billing"]


@pytest.mark.anyio
async def test_each_follow_up_on_the_thread_costs_3_more_calls_starting_at_the_supervisor():
    log: list[str] = []
    team = flat_router(log, "operations", "billing", FINISH, "billing", FINISH,
                       "billing", FINISH)
    thread = Thread()
    await team.run(OUTAGE, thread=thread)
    for _ in range(2):
        log.clear()
        follow = await team.run(FOLLOW_UP, thread=thread)
        assert log == ["supervisor", "billing", "supervisor"]
        assert follow.usage.model_calls == 3
    assert len(thread.runs) == 3
    assert [m.content for m in thread.messages if isinstance(m, UserMessage)] == [
        OUTAGE, FOLLOW_UP, FOLLOW_UP]
    router = team.model
    assert isinstance(router, Logged)
    last = router.calls[-2].messages            # the follow-up's first decision
    assert OUTAGE in [getattr(m, "content", None) for m in last]


@pytest.mark.anyio
async def test_a_worker_gets_the_request_and_the_labelled_work_so_far():
    seen: list[str] = []

    def billing(messages, params):
        seen.append(prompt_of(messages))
        return "credits: yes"

    team = Team.router(
        workers={"operations": answering("operations", "storage fault"),
                 "billing": Agent("Billing.", model=FunctionModel(billing), name="billing")},
        model=ScriptedModel(decisions("operations", "billing", FINISH)))
    await team.run(OUTAGE)
    assert f"[user] {OUTAGE}" in seen[0] and "[operations] storage fault" in seen[0]


# --- invalid decisions -------------------------------------------------------------------


@pytest.mark.anyio
async def test_an_invalid_decision_is_sent_back_once_as_a_structured_output_error():
    model = ScriptedModel([
        ModelResponse(text='{"next": "helper", "reasoning": "?"}'),
        RouteDecision(next="writer", reasoning="fixed"),
        RouteDecision(next=FINISH, reasoning="done"),
    ])
    log: list[str] = []
    team = Team.router(workers={"writer": answering("writer", log=log)}, model=model)
    result = await team.run(TASK)
    assert result.completed and log == ["writer"]
    correction = model.calls[1].messages[-1].content
    assert "not a valid routing decision" in correction and "helper" in correction
    assert [r.kind for r in result.route_log] == ["route", "route"]
    assert model.calls[0].params.output_type.__name__ == "RouteDecision"


@pytest.mark.anyio
async def test_a_decision_that_stays_invalid_ends_the_run_with_a_routing_failure_never_a_guess():
    log: list[str] = []
    model = ScriptedModel([
        RouteDecision(next="writer", reasoning="first"),
        ModelResponse(text="the writer, I think"),
        ModelResponse(text='{"next": "editor"}'),
    ])
    with model:
        team = Team.router(workers={"writer": answering("writer", "draft", log)}, model=model)
        result = await team.run(TASK)
    assert result.stop_reason == "route" and log == ["writer"]
    failure = result.route_log[-1]
    assert failure.kind == "routing_failure" and failure.overridden_by == "invalid"
    assert "editor" in failure.decision and result.text == "draft"


@pytest.mark.anyio
async def test_case_in_a_decision_is_forgiven_only_for_one_matching_name():
    model = ScriptedModel([ModelResponse(text='{"next": " Writer", "reasoning": "x"}'),
                           ModelResponse(text='{"next": "finish", "reasoning": "y"}')])
    log: list[str] = []
    result = await Team.router(workers={"writer": answering("writer", log=log)},
                               model=model).run(TASK)
    assert log == ["writer"] and result.completed


@pytest.mark.anyio
async def test_min_delegations_refuses_an_early_finish_once():
    log: list[str] = []
    model = ScriptedModel(decisions(FINISH, "writer", FINISH))
    team = Team.router(workers={"writer": answering("writer", "w", log)}, model=model,
                       min_delegations=1)
    result = await team.run(TASK)
    assert log == ["writer"] and result.completed and result.text == "w"
    assert [r.kind for r in result.route_log] == ["refused", "route", "route"]
    assert "FINISH is refused" in model.calls[1].messages[-1].content


@pytest.mark.anyio
async def test_the_recursion_limit_is_a_backstop_that_raises():
    team = Team.router(workers={"writer": answering("writer")}, decide=lambda s: "writer",
                       max_specialist_calls=None, recursion_limit=25)
    with pytest.raises(RecursionLimitExceeded) as caught:
        await team.run(TASK)
    assert caught.value.limit == 25 and "recursion_limit=25" in str(caught.value)


@pytest.mark.anyio
async def test_a_turn_cap_ends_with_the_finalize_answer():
    team = Team.router(workers={"writer": numbered_writer([])},
                       decide=lambda s: "writer", max_turns=3)
    result = await team.run(TASK)
    assert result.stop_reason == "cap" and result.text == "draft 3"
    assert "max_turns=3" in result.detail


@pytest.mark.anyio
async def test_a_rule_reads_the_route_state_and_finalize_writes_the_answer():
    seen: list[RouteState] = []

    def rule(state: RouteState):
        seen.append(state)
        return "writer" if state.specialist_calls == 0 else FINISH

    team = Router(workers={"writer": answering("writer", "w")}, decide=rule,
                  finalize=lambda delegations: f"{len(delegations)} output(s): "
                                               + delegations[-1].output)
    agent = Agent("", model=ScriptedModel(), architecture=team)
    result = await agent.run(TASK)
    assert result.text == "1 output(s): w" and result.output == "1 output(s): w"
    assert seen[0].request == TASK and seen[1].workers == ["writer"]
    assert seen[1].delegations[0].worker == "writer"
