"""One record under everything (issue 9 items 10-12): every delegation is a work-layer
task (retried and parked DEAD by the usual rules, counted by run), a journaled step that
replays without calling a worker again, live events; and seed 000's model-planned
decomposition, validated before anything is dispatched."""

from __future__ import annotations

import json

import pytest
from _teams_support import answering, decisions

from foreperson.agents import (
    Agent,
    FinalEvent,
    Guards,
    MemoryAuditLog,
    ModelCallEvent,
    RunOptions,
    TextDeltaEvent,
)
from foreperson.agents.steps import JournaledSteps
from foreperson.errors import InvalidPlan, ModelError
from foreperson.models import ModelResponse, ToolCall
from foreperson.teams import (
    FINISH,
    TEAM_EVENTS_ADAPTER,
    DelegationFinishedEvent,
    DelegationStartedEvent,
    RouteDecisionEvent,
    Team,
    decompose,
    decompose_sync,
)
from foreperson.testing import FunctionModel, ScriptedModel
from foreperson.work import MemoryStore, SqliteStore, Status


def delegate(worker: str, instructions: str) -> ToolCall:
    return ToolCall("delegate", {"worker": worker, "instructions": instructions})


def supervised(model, *workers: Agent, **options) -> Team:
    return Team.supervisor(workers={w.name: w for w in workers}, instructions="Manage.",
                           model=model, name="lead", **options)


# --- item 10: every delegation is a task ---------------------------------------------------


@pytest.mark.anyio
async def test_every_delegation_is_a_task_of_the_run_with_its_output_as_result():
    store = MemoryStore()
    model = ScriptedModel([[delegate("writer", "draft it"), delegate("critic", "check it")],
                           "done"])
    team = supervised(model, answering("writer", "the draft"), answering("critic", "fine"),
                      store=store)
    result = await team.run("write")
    tasks = store.list_tasks(run_id=result.run_id)
    assert [(t.kind, t.payload["instructions"], t.result, t.status) for t in tasks] == [
        ("writer", "draft it", "the draft", Status.COMPLETED),
        ("critic", "check it", "fine", Status.COMPLETED)]
    assert {t.id for t in tasks} == {d.task_id for d in result.delegations}
    assert all(t.assigned_to == "team:lead" or t.assigned_to is None for t in tasks)
    assert store.stats(run_id=result.run_id).counts[Status.COMPLETED] == 2
    assert team.architecture.store is store


@pytest.mark.anyio
async def test_a_failed_delegation_is_a_dead_task_holding_the_error():
    broken = Agent("Break.", model=ScriptedModel([ModelError("unauthorized", status_code=401)]),
                   name="broken")
    team = supervised(ScriptedModel([delegate("broken", "try"), "sorry"]), broken,
                      max_attempts=3)
    result = await team.run("go")
    task = team.architecture.store.get(result.delegations[0].task_id)
    assert task.status is Status.DEAD and task.reason == "not_retryable"   # a 401 repeats
    assert task.attempts == 1 and "unauthorized" in task.error
    assert team.architecture.store.stats(run_id=result.run_id).counts[Status.DEAD] == 1


@pytest.mark.anyio
async def test_a_retryable_failure_is_retried_per_the_work_layers_rules():
    flaky = Agent("Flaky.", model=ScriptedModel([TimeoutError("slow upstream"), "got it"]),
                  name="flaky")
    team = supervised(ScriptedModel([delegate("flaky", "fetch"), "done"]), flaky,
                      max_attempts=2, retry_backoff_s=0)
    result = await team.run("go")
    delegation = result.delegations[0]
    assert delegation.completed and delegation.output == "got it" and delegation.attempts == 2
    task = team.architecture.store.get(delegation.task_id)
    assert task.status is Status.COMPLETED and task.attempts == 2
    assert [e["error"] for e in task.errors] == ["TimeoutError: slow upstream"]

    always = Agent("Down.", model=ScriptedModel([TimeoutError("a"), TimeoutError("b")]),
                   name="always")
    team = supervised(ScriptedModel([delegate("always", "fetch"), "gave up"]), always,
                      max_attempts=2, retry_backoff_s=0)
    result = await team.run("go")
    task = team.architecture.store.get(result.delegations[0].task_id)
    assert task.status is Status.DEAD and task.reason == "retries_exhausted"
    assert result.delegations[0].attempts == 2


@pytest.mark.anyio
async def test_a_worker_stopped_by_its_own_limit_is_a_dead_task_too():
    stuck = Agent("Work.", model=ScriptedModel([ModelResponse(text="")] * 2), name="stuck")
    team = supervised(ScriptedModel([delegate("stuck", "work"), "ok"]), stuck)
    result = await team.run("go")
    task = team.architecture.store.get(result.delegations[0].task_id)
    assert task.status is Status.DEAD and task.error.startswith("stopped: empty_reply")


@pytest.mark.anyio
async def test_delegations_go_to_a_sqlite_store_and_survive_it(tmp_path):
    path = tmp_path / "team.db"
    store = SqliteStore(path)
    try:
        team = Team.router(workers={"writer": answering("writer", "w")}, store=store,
                           model=ScriptedModel(decisions("writer", FINISH)))
        result = await team.run("go")
    finally:
        store.close()
    again = SqliteStore(path)
    try:
        (task,) = again.list_tasks(run_id=result.run_id)
        assert (task.kind, task.result, task.status) == ("writer", "w", Status.COMPLETED)
    finally:
        again.close()


# --- a delegation is a journaled step ------------------------------------------------------


@pytest.mark.anyio
async def test_a_journaled_team_run_replays_without_running_a_worker_or_adding_a_task():
    store = MemoryStore()           # the journal and the task store in one
    options = RunOptions(steps=JournaledSteps(store))
    lead = ScriptedModel([delegate("writer", "draft"), "final"])
    writer = ScriptedModel(["the draft"])
    team = supervised(lead, Agent("Write.", model=writer, name="writer"), store=store)
    first = await team.run("write", run_id="run-1", options=options)
    again = await team.run("write", run_id="run-1", options=options)   # nothing is scripted
    assert again.text == first.text == "final" and again.usage == first.usage
    assert again.route_log == first.route_log
    assert len(store.list_tasks(run_id="run-1")) == 1
    steps = {s.key: s.kind for s in store.list_steps("run-1")}
    assert steps["agent:lead/turn:1/tool:1/delegation:writer"] == "delegation"
    assert "agent:lead/turn:1/tool:1/delegation:writer/agent:writer/turn:1/model" in steps


# --- item 12: events, live --------------------------------------------------------------


@pytest.mark.anyio
async def test_team_events_and_the_workers_own_events_stream_live_and_tagged():
    model = ScriptedModel([delegate("writer", "draft it"), "all done"])
    team = supervised(model, answering("writer", "three short words"))
    events = [e async for e in team.stream("write")]
    kinds = [e.kind for e in events]
    started = next(e for e in events if isinstance(e, DelegationStartedEvent))
    finished = next(e for e in events if isinstance(e, DelegationFinishedEvent))
    worker = [e for e in events if getattr(e, "level", 0) == 1]
    assert worker and all(e.agent == "writer" and e.parent_path == started.delegation_id
                          for e in worker)
    deltas = [i for i, e in enumerate(events) if isinstance(e, TextDeltaEvent) and e.level == 1]
    assert kinds.index("delegation_started") < deltas[0] < kinds.index("delegation_finished")
    assert "".join(events[i].text for i in deltas) == "three short words"
    assert finished.completed and finished.text == "three short words"
    assert finished.worker_run_id == next(e for e in worker
                                          if isinstance(e, ModelCallEvent)).run_id
    assert finished.task_id == started.task_id
    routes = [e for e in events if isinstance(e, RouteDecisionEvent)]
    assert [r.record.kind for r in routes] == ["delegate", "answer"]
    assert isinstance(events[-1], FinalEvent) and events[-1].level == 0
    for event in events:
        dumped = TEAM_EVENTS_ADAPTER.dump_python(event, mode="json")
        assert dumped["kind"] == event.kind
        json.dumps(dumped)


@pytest.mark.anyio
async def test_the_router_streams_its_decisions_and_nested_teams_their_own_level():
    inner = Team.router(workers={"b": answering("b")}, name="inner",
                        model=ScriptedModel(decisions("b", FINISH)))
    outer = Team.router(workers={"inner": inner}, name="outer",
                        model=ScriptedModel(decisions("inner", FINISH)))
    events = [e async for e in outer.stream("go")]
    routes = [(e.agent, e.level, e.record.routed_to) for e in events
              if isinstance(e, RouteDecisionEvent)]
    assert routes == [("outer", 0, "inner"), ("inner", 1, "b"), ("inner", 1, FINISH),
                      ("outer", 0, FINISH)]
    texts = [e for e in events if isinstance(e, TextDeltaEvent)]
    assert texts and {e.agent for e in texts} == {"b"}    # a decision streams no text


@pytest.mark.anyio
async def test_routes_and_delegations_are_audited():
    audit = MemoryAuditLog()
    team = supervised(ScriptedModel([delegate("writer", "go"), "done"]), answering("writer"),
                      guards=Guards(audit_log=audit))
    await team.run("go")
    assert [e.data["route"] for e in audit.of_kind("route")] == ["delegate", "answer"]
    (entry,) = audit.of_kind("delegation")
    assert entry.data["worker"] == "writer" and entry.data["completed"] is True


# --- item 11: decompose -----------------------------------------------------------------


def plan(*tasks: dict) -> str:
    return json.dumps({"tasks": list(tasks)})


KINDS = {"research", "write_section", "review"}


@pytest.mark.anyio
async def test_decompose_turns_a_valid_plan_into_tasks_with_dependencies_as_ids():
    model = ScriptedModel([plan(
        {"kind": "research", "payload": {"topic": "cards"}, "depends_on": []},
        {"kind": "research", "payload": {"topic": "wallets"}},
        {"kind": "write_section", "payload": {"title": "market"}, "depends_on": [0, 1]},
        {"kind": "review", "payload": {}, "depends_on": [2]},
    )])
    tasks = await decompose("Brief on European payments", KINDS, model, run_id="r")
    assert [t.kind for t in tasks] == ["research", "research", "write_section", "review"]
    assert tasks[2].depends_on == [tasks[0].id, tasks[1].id]
    assert tasks[3].depends_on == [tasks[2].id] and all(t.run_id == "r" for t in tasks)
    assert MemoryStore().add(tasks) == [t.id for t in tasks]    # no cycle, nothing unknown
    call = model.calls[0]
    assert "research" in call.messages[0].content and call.params.output_type is not None


@pytest.mark.parametrize(("subtasks", "index", "words"), [
    ([{"kind": "research", "payload": {}}, {"kind": "verify_sources", "payload": {}},
      {"kind": "review", "payload": {}}], 1, "unknown kind 'verify_sources'"),
    ([{"kind": "research", "payload": {}, "depends_on": [1]},
      {"kind": "review", "payload": {}}, {"kind": "review", "payload": {}}], 0,
     "later subtask 1"),
    ([{"kind": "research", "payload": {}}, {"kind": "review", "payload": {}, "depends_on": [1]},
      {"kind": "review", "payload": {}}], 1, "depends on itself"),
    ([{"kind": "research", "payload": {}}, {"kind": "review", "payload": "all of it"},
      {"kind": "review", "payload": {}}], 1, "must be a JSON object"),
    ([{"kind": "research", "payload": {}}, {"kind": "review", "payload": {},
                                            "depends_on": ["0"]},
      {"kind": "review", "payload": {}}], 1, "list of 0-based subtask indices"),
])
def test_decompose_refuses_a_bad_plan_naming_the_subtask_and_the_fix(subtasks, index, words):
    model = ScriptedModel([plan(*subtasks)])
    with pytest.raises(InvalidPlan) as caught:
        decompose_sync("goal", KINDS, model)
    assert caught.value.index == index
    assert f"subtask {index}" in str(caught.value) and words in str(caught.value)


def test_decompose_refuses_too_many_subtasks_and_prose():
    nine = [{"kind": "research", "payload": {}}] * 9
    with pytest.raises(InvalidPlan, match="9 subtasks; ask for 3 to 8"):
        decompose_sync("goal", KINDS, ScriptedModel([plan(*nine)]))
    with pytest.raises(InvalidPlan, match="not JSON"):
        decompose_sync("goal", KINDS, ScriptedModel(["First, research; then write."]))


@pytest.mark.anyio
async def test_a_long_delegation_keeps_its_lease_renewed_while_the_worker_runs():
    import threading

    import anyio.to_thread

    renewed = threading.Event()

    class Watched(MemoryStore):
        def heartbeat(self, leases):
            lost = super().heartbeat(leases)
            renewed.set()
            return lost

    async def slow(messages, params):
        assert await anyio.to_thread.run_sync(renewed.wait, 5)   # until the lease is renewed
        return "finally"

    store = Watched()
    worker = Agent("Slow.", model=FunctionModel(slow), name="slow")
    team = supervised(ScriptedModel([delegate("slow", "take your time"), "done"]), worker,
                      store=store, stale_after=0.06)
    result = await team.run("go")
    task = store.get(result.delegations[0].task_id)
    assert task.status is Status.COMPLETED and task.result == "finally"
    assert task.heartbeat_at > task.started_at


@pytest.mark.anyio
async def test_a_journaled_router_and_a_spawned_worker_replay_as_recorded():
    store = MemoryStore()
    options = RunOptions(steps=JournaledSteps(store))
    router = Team.router(workers={"writer": Agent("W.", model=ScriptedModel(["w"]),
                                                  name="writer")},
                         model=ScriptedModel(decisions("writer", FINISH)), name="route")
    first = await router.run("go", run_id="r-1", options=options)
    again = await router.run("go", run_id="r-1", options=options)    # no reply is left
    assert again.route_log == first.route_log and again.text == first.text == "w"

    lead = ScriptedModel([
        ToolCall("spawn_worker", {"role": "poet", "instructions": "Write poems."}),
        delegate("poet", "rain"), "a poem about rain", "done"])
    team = supervised(lead, answering("writer"), allow_spawn=True)
    first = await team.run("go", run_id="s-1", options=options)
    again = await team.run("go", run_id="s-1", options=options)      # the poet is rebuilt
    assert again.delegations == first.delegations
    assert again.delegations[0].output == "a poem about rain"
    assert len(lead.calls) == 4
