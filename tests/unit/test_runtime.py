"""Durable runs in memory (issue 11): replay by run id and by resume, a crash that
re-executes only unfinished work, tenant pinning, approvals decided later, a journal that
names how a replay diverged and grows linearly, replayed steps marked in events. The
same behaviour on real files and databases, across SIGKILL, is in
tests/integration/test_durable_sigkill.py."""

from __future__ import annotations

import json

import anyio
import pytest

from foreperson import Agent, Team
from foreperson.agents import (
    Approval,
    FinalEvent,
    Guards,
    Limits,
    ModelCallEvent,
    RunContext,
    RunOptions,
    ToolResultEvent,
    ask_later,
    tool,
)
from foreperson.agents.steps import ParentRun
from foreperson.errors import AccessDenied, ConfigurationError, RunBusy, RunNotFound
from foreperson.journal import JournalDivergence
from foreperson.models import ToolCall, ToolReturn
from foreperson.runtime import InMemoryRuntime, Runtime
from foreperson.teams import DelegationFinishedEvent, RouteDecisionEvent, WorkerSpawnedEvent
from foreperson.testing import FunctionModel, ScriptedModel
from foreperson.work import MemoryStore, SqliteStore, Status


class Crash(BaseException):
    """Stands in for the process dying: no layer catches it."""


def delegate(worker: str, instructions: str) -> ToolCall:
    return ToolCall("delegate", {"worker": worker, "instructions": instructions})


def last_tool_result(messages) -> str | None:
    last = messages[-1]
    return last.content if isinstance(last, ToolReturn) else None


class Ledger:
    """A side-effect tool: records each real call."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def refund(self, order: str) -> str:
        """Refund an order.

        Args:
            order: the order id.
        """
        self.calls.append(order)
        return f"refunded {order}"


def clerk(ledger: Ledger, *, approval=None, name: str = "clerk", answer: str = "done") -> Agent:
    def reply(messages, params):
        result = last_tool_result(messages)
        if result is not None:
            return f"{answer}: {result}"
        return ToolCall("refund", {"order": "A-7"})

    guards = Guards(approval=approval, approval_required={"refund"}) if approval else Guards()
    return Agent("Handle refunds.", model=FunctionModel(reply), name=name,
                 tools=[tool(ledger.refund, name="refund")], guards=guards)


# --- item 1: replay by run id and by resume ------------------------------------------------


@pytest.mark.anyio
async def test_a_run_again_with_its_id_or_resumed_replays_without_model_or_tool():
    runtime = InMemoryRuntime()
    ledger = Ledger()
    agent = clerk(ledger)
    first = await agent.run("refund A-7", runtime=runtime, run_id="r1", user_id="ada")
    calls = len(agent.model.calls)
    again = await agent.run("refund A-7", runtime=runtime, run_id="r1", user_id="ada")
    resumed = await agent.resume("r1", runtime=runtime, user_id="ada")
    assert first.output == again.output == resumed.output == "done: refunded A-7"
    assert len(agent.model.calls) == calls == 2 and ledger.calls == ["A-7"]
    assert again.usage == first.usage
    record = runtime.get_run("r1", user_id="ada")
    assert (record.status, record.stop_reason, record.owner) == ("completed", "completed", None)
    assert record.input["prompt"] == "refund A-7"
    assert record.result["text"] == "done: refunded A-7"


@pytest.mark.anyio
async def test_a_crash_mid_run_reexecutes_only_the_unfinished_steps():
    runtime = InMemoryRuntime()
    done: list[str] = []
    crash = [True]

    def search(q: str) -> str:
        """Search."""
        done.append(q)
        return f"found {q}"

    def reply(messages, params):
        if last_tool_result(messages) is None:
            return [ToolCall("search", {"q": "a"}), ToolCall("search", {"q": "b"})]
        if crash[0]:
            crash[0] = False
            raise Crash
        return "both found"

    agent = Agent("Search.", model=FunctionModel(reply), name="finder", tools=[search])
    with pytest.raises(Crash):
        await agent.run("find", runtime=runtime, run_id="r1")
    assert runtime.get_run("r1").status == "failed"
    result = await agent.resume("r1", runtime=runtime)
    assert result.output == "both found"
    assert sorted(done) == ["a", "b"]                   # each tool ran once
    assert len(agent.model.calls) == 3                  # turn 1 once; turn 2 twice (it crashed)


@pytest.mark.anyio
async def test_a_team_crashed_mid_delegation_takes_its_task_over_and_replays_the_rest():
    store = MemoryStore()
    runtime = InMemoryRuntime(store)
    researched: list[str] = []
    crash = [True]

    def research(messages, params):
        researched.append("model")
        return "3 sources"

    def write(messages, params):
        if crash[0]:
            crash[0] = False
            raise Crash
        return "the draft"

    lead = FunctionModel(lambda messages, params: (
        [delegate("researcher", "find"), delegate("writer", "draft")]
        if last_tool_result(messages) is None else "the article"))
    team = Team.supervisor(
        workers={"researcher": Agent("R.", model=FunctionModel(research), name="researcher"),
                 "writer": Agent("W.", model=FunctionModel(write), name="writer")},
        instructions="Lead.", model=lead, name="lead")
    with pytest.raises(Crash):
        await team.run("write", runtime=runtime, run_id="t1")
    (held,) = [t for t in store.list_tasks(run_id="t1") if t.status is Status.RUNNING]
    assert held.kind == "writer" and held.assigned_to.startswith("run:t1@")
    result = await team.resume("t1", runtime=runtime)
    assert result.text == "the article" and researched == ["model"]   # not run again
    tasks = store.list_tasks(run_id="t1")
    assert len(tasks) == 2 and {t.status for t in tasks} == {Status.COMPLETED}
    writer = next(d for d in result.delegations if d.worker == "writer")
    assert writer.task_id == held.id                       # the same task, taken over
    assert store.get(held.id).attempts == 1                # the dead attempt not counted


@pytest.mark.anyio
async def test_resuming_needs_a_recorded_run_of_the_same_agent():
    runtime = InMemoryRuntime()
    agent = Agent("A.", model=ScriptedModel(["hi"]), name="a")
    with pytest.raises(ConfigurationError, match="there is no run nope"):
        await agent.resume("nope", runtime=runtime)
    await agent.run("x", runtime=runtime, run_id="r1")
    other = Agent("B.", model=ScriptedModel([]), name="b")
    with pytest.raises(ConfigurationError, match="run of agent 'a', not 'b'"):
        await other.resume("r1", runtime=runtime)


@pytest.mark.anyio
async def test_a_run_owned_by_a_live_session_is_busy():
    runtime = InMemoryRuntime()
    inside = anyio.Event()
    release = anyio.Event()

    async def slow(messages, params):
        inside.set()
        await release.wait()
        return "ok"

    agent = Agent("Slow.", model=FunctionModel(slow), name="slow")
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: agent.run("go", runtime=runtime, run_id="r1"))
        with anyio.fail_after(5):
            await inside.wait()
        with pytest.raises(RunBusy, match="run r1 is being run by"):
            await agent.resume("r1", runtime=runtime)
        release.set()
    assert (await agent.resume("r1", runtime=runtime)).output == "ok"


def test_a_runtime_needs_a_store_that_keeps_runs():
    class TasksOnly:
        pass

    with pytest.raises(ConfigurationError, match="keeps no step journal"):
        Runtime(TasksOnly())  # type: ignore[arg-type]


# --- item 4: tenant pinning ----------------------------------------------------------------


@pytest.mark.anyio
async def test_another_user_cannot_run_resume_read_or_approve_a_run():
    runtime = InMemoryRuntime()
    agent = clerk(Ledger(), approval=ask_later)
    parked = await agent.run("refund A-7", runtime=runtime, run_id="r1", user_id="ada")
    call = parked.pending[0].call_id
    for user in ("bob", None):
        who = "an anonymous caller" if user is None else f"user {user!r}"
        refusals: list[str] = []
        for run_id in ("r1", "r9"):          # another user's run, and one that does not exist
            with pytest.raises(RunNotFound, match=f"there is no run {run_id} for {who}") as info:
                await agent.resume(run_id, runtime=runtime, user_id=user)
            refusals.append(str(info.value).replace(run_id, "ID"))
            for read in (runtime.show, runtime.get_run, runtime.steps, runtime.pending):
                with pytest.raises(RunNotFound) as info:
                    read(run_id, user_id=user)
                refusals.append(str(info.value).replace(run_id, "ID"))
            for decide in (runtime.approve, runtime.deny):
                with pytest.raises(RunNotFound) as info:
                    decide(run_id, call, user_id=user)
                refusals.append(str(info.value).replace(run_id, "ID"))
        assert len(set(refusals)) == 1 and "ada" not in refusals[0]   # the same, no owner
        with pytest.raises(AccessDenied, match="run id r1 is taken") as taken:
            await agent.run("refund A-7", runtime=runtime, run_id="r1", user_id=user)
        assert "ada" not in str(taken.value)
    assert runtime.pending("r1", user_id="ada")              # nothing was decided
    assert [r.run_id for r in runtime.list_runs(user_id="bob")] == []
    assert [r.run_id for r in runtime.list_runs(user_id="ada")] == ["r1"]


@pytest.mark.anyio
async def test_a_pinned_worker_refuses_an_anonymous_run_and_another_users():
    runtime = InMemoryRuntime()
    vault = Agent("Read the vault.", model=ScriptedModel(["secret"] * 3), name="vault",
                  pinned_user="ada")
    lead = FunctionModel(lambda messages, params: delegate("vault", "read it")
                         if last_tool_result(messages) is None else "ok")
    team = Team.supervisor(workers={"vault": vault}, instructions="Lead.", model=lead,
                           name="lead")
    for user in (None, "bob"):
        with pytest.raises(AccessDenied, match="agent 'vault' belongs to user 'ada'"):
            await team.run("go", runtime=runtime, user_id=user)   # an error, not a result
    assert vault.model.calls == []
    result = await team.run("go", runtime=runtime, user_id="ada")
    assert result.delegations[0].output == "secret"


@pytest.mark.anyio
async def test_a_nested_run_cannot_switch_to_another_user():
    inner = Agent("Inner.", model=ScriptedModel(["x"]), name="inner")

    async def consult(ctx: RunContext) -> str:
        """Consult."""
        return (await inner.run("q", user_id="bob", options=ctx.nested())).text or ""

    outer = Agent("Outer.", model=ScriptedModel([ToolCall("consult", {}), "unused"]),
                  name="outer", tools=[consult])
    with pytest.raises(AccessDenied, match="user 'bob' cannot run a nested agent in it"):
        await outer.run("go", runtime=InMemoryRuntime(), user_id="ada")


@pytest.mark.anyio
async def test_a_spawned_worker_is_pinned_to_the_spawning_runs_user():
    runtime = InMemoryRuntime()
    lead = ScriptedModel([
        ToolCall("spawn_worker", {"role": "poet", "instructions": "Write poems."}),
        delegate("poet", "rain"), "done"])
    poet_model = ScriptedModel(["a poem about rain"])
    template = Agent("template", model=poet_model, name="template")
    team = Team.supervisor(workers={}, instructions="Lead.", model=lead, name="lead",
                           allow_spawn=True, spawn_template=template)
    events = [e async for e in team.stream("go", runtime=runtime, run_id="s1", user_id="ada")]
    spawned = next(e for e in events if isinstance(e, WorkerSpawnedEvent))
    result = events[-1].result
    assert result.delegations[0].output == "a poem about rain"
    (spawn,) = [s for s in runtime.steps("s1", user_id="ada") if s.kind == "spawn"]
    assert spawn.result["data"] == {"user_id": "ada"} and not spawned.replayed
    replayed = [e async for e in team.stream("go", runtime=runtime, run_id="s1",
                                             user_id="ada")]
    again = next(e for e in replayed if isinstance(e, WorkerSpawnedEvent))
    assert again.replayed and again.worker_id == spawned.worker_id      # same role and id


# --- item 3: approvals decided later, from anywhere --------------------------------------------


@pytest.mark.anyio
async def test_a_parked_approval_is_decided_later_and_the_resume_reexecutes_nothing():
    runtime = InMemoryRuntime()
    ledger = Ledger()
    agent = clerk(ledger, approval=ask_later)
    parked = await agent.run("refund A-7", runtime=runtime, run_id="r1", user_id="ada")
    assert parked.stop_reason == "awaiting_approval" and ledger.calls == []
    (pending,) = parked.pending
    assert (pending.tool, pending.arguments, pending.key) == (
        "refund", {"order": "A-7"}, "agent:clerk/turn:1/tool:1/approval")
    assert "runtime.approve" in parked.detail
    record = runtime.get_run("r1", user_id="ada")
    assert (record.status, record.stop_reason, record.owner) == (
        "waiting", "awaiting_approval", None)
    again = await agent.resume("r1", runtime=runtime, user_id="ada")   # still undecided
    assert again.stop_reason == "awaiting_approval" and ledger.calls == []
    calls = len(agent.model.calls)
    assert runtime.approve("r1", pending.call_id, user_id="ada") == Approval.approve()
    assert runtime.approve("r1", pending.call_id, user_id="ada").decision == "approve"
    done = await agent.resume("r1", runtime=runtime, user_id="ada")
    assert done.output == "done: refunded A-7" and ledger.calls == ["A-7"]
    assert len(agent.model.calls) == calls + 1           # only the turn after the call
    assert runtime.pending("r1", user_id="ada") == []


@pytest.mark.anyio
async def test_a_denied_call_reaches_the_model_as_an_error_and_the_first_decision_wins():
    runtime = InMemoryRuntime()
    ledger = Ledger()
    agent = clerk(ledger, approval=ask_later)
    parked = await agent.run("refund A-7", runtime=runtime, run_id="r1")
    call = parked.pending[0].call_id
    assert runtime.deny("r1", call, reason="not this one").decision == "deny"
    assert runtime.approve("r1", call).decision == "deny"           # decided already
    done = await agent.resume("r1", runtime=runtime)
    assert ledger.calls == [] and "was denied: not this one" in done.output
    with pytest.raises(ConfigurationError, match="waits on no tool call 'call_9'"):
        runtime.approve("r1", "call_9")


@pytest.mark.anyio
async def test_an_approval_can_edit_the_arguments():
    runtime = InMemoryRuntime()
    ledger = Ledger()
    agent = clerk(ledger, approval=ask_later)
    parked = await agent.run("refund A-7", runtime=runtime, run_id="r1")
    runtime.approve("r1", parked.pending[0].call_id, arguments={"order": "A-8"})
    assert (await agent.resume("r1", runtime=runtime)).output == "done: refunded A-8"
    assert ledger.calls == ["A-8"]


@pytest.mark.anyio
async def test_a_workers_parked_call_parks_the_team_and_its_siblings_finish_first():
    store = MemoryStore()
    runtime = InMemoryRuntime(store)
    ledger = Ledger()
    researched: list[str] = []

    def research(messages, params):
        researched.append("r")
        return "3 sources"

    lead = FunctionModel(lambda messages, params: (
        [delegate("clerk", "refund A-7"), delegate("researcher", "find")]
        if last_tool_result(messages) is None else "all done"))
    team = Team.supervisor(
        workers={"clerk": clerk(ledger, approval=ask_later),
                 "researcher": Agent("R.", model=FunctionModel(research), name="researcher")},
        instructions="Lead.", model=lead, name="lead")
    parked = await team.run("go", runtime=runtime, run_id="t1", user_id="ada")
    assert parked.stop_reason == "awaiting_approval"
    assert parked.pending[0].agent == "clerk" and researched == ["r"]
    steps = {s.key: s.kind for s in runtime.steps("t1", user_id="ada")}
    assert steps["agent:lead/turn:1/tool:2/delegation:researcher"] == "delegation"
    assert "agent:lead/turn:1/tool:1/delegation:clerk" not in steps      # not recorded
    clerk_task = next(t for t in store.list_tasks(run_id="t1") if t.kind == "clerk")
    assert clerk_task.status is Status.PENDING and clerk_task.attempts == 0   # given back
    runtime.approve("t1", parked.pending[0].call_id, user_id="ada")
    done = await team.resume("t1", runtime=runtime, user_id="ada")
    assert done.text == "all done" and ledger.calls == ["A-7"] and researched == ["r"]
    assert store.get(clerk_task.id).status is Status.COMPLETED


@pytest.mark.anyio
async def test_a_pending_decision_without_a_journal_is_refused_with_a_fix():
    agent = clerk(Ledger(), approval=ask_later)
    with pytest.raises(ConfigurationError, match="needs a journal: run it with runtime="):
        await agent.run("refund A-7")


@pytest.mark.anyio
async def test_a_parked_run_survives_an_upgrade_that_keeps_the_steps_before_it():
    runtime = InMemoryRuntime()
    parked = await clerk(Ledger(), approval=ask_later).run("refund A-7", runtime=runtime,
                                                           run_id="r1")
    runtime.approve("r1", parked.pending[0].call_id)
    upgraded = Ledger()          # new code: another tool body, another answer after the call
    done = await clerk(upgraded, approval=ask_later, answer="v2 done").resume(
        "r1", runtime=runtime)
    assert done.output == "v2 done: refunded A-7" and upgraded.calls == ["A-7"]


# --- item 5: a checked, linear journal -----------------------------------------------------


@pytest.mark.anyio
async def test_a_replay_whose_calls_diverge_names_the_step_and_what_differs():
    runtime = InMemoryRuntime()
    agent = clerk(Ledger())
    await agent.run("refund A-7", runtime=runtime, run_id="r1")
    with pytest.raises(JournalDivergence) as prompt:
        await agent.run("refund B-9", runtime=runtime, run_id="r1")
    assert prompt.value.key == "agent:clerk/turn:1/model"
    assert "messages added since the previous model call differ" in str(prompt.value)
    changed = Agent("Handle refunds politely.", model=FunctionModel(lambda m, p: "x"),
                    name="clerk", tools=[tool(Ledger().refund, name="refund")])
    with pytest.raises(JournalDivergence, match="the system message .* differs"):
        await changed.resume("r1", runtime=runtime)

    def lookup(order: str) -> str:
        """Look an order up."""
        return "ok"

    more_tools = Agent("Handle refunds.", model=FunctionModel(lambda m, p: "x"), name="clerk",
                       tools=[tool(Ledger().refund, name="refund"), lookup])
    with pytest.raises(JournalDivergence, match=r"tools offered differ: recorded \[\"refund\"\]"):
        await more_tools.resume("r1", runtime=runtime)
    assert runtime.get_run("r1").status == "failed"       # and nothing was mixed in
    assert (await agent.resume("r1", runtime=runtime)).output == "done: refunded A-7"


@pytest.mark.anyio
async def test_the_journal_grows_linearly_in_the_number_of_model_calls():
    def counting(calls: int):
        def reply(messages, params):
            done = sum(isinstance(m, ToolReturn) for m in messages)
            return f"done after {done}" if done >= calls - 1 else ToolCall("note", {"n": done})
        return reply

    def note(n: int) -> str:
        """Note a number."""
        return f"noted {n} " + "x" * 200

    per_step = {}
    for calls in (10, 100):
        store = MemoryStore()
        agent = Agent("Count. " + "y" * 2000, model=FunctionModel(counting(calls)),
                      name="counter", tools=[note], guards=Guards(limits=Limits(max_turns=None)))
        await agent.run("count", runtime=InMemoryRuntime(store), run_id="r")
        steps = store.list_steps("r")
        size = sum(len(json.dumps([s.key, s.digest, s.result, s.request])) for s in steps)
        per_step[calls] = size / len(steps)
    assert per_step[100] < per_step[10] * 1.2        # no step drags the conversation along


# --- item 5: replayed steps in events ------------------------------------------------------


@pytest.mark.anyio
async def test_replayed_steps_are_in_the_events_marked_replayed():
    runtime = InMemoryRuntime()
    lead = FunctionModel(lambda messages, params: delegate("writer", "draft")
                         if last_tool_result(messages) is None else "done")
    team = Team.supervisor(workers={"writer": Agent("W.", model=ScriptedModel(["draft"]),
                                                    name="writer")},
                           instructions="Lead.", model=lead, name="lead")
    first = [e async for e in team.stream("go", runtime=runtime, run_id="t1")]
    again = [e async for e in team.stream("go", runtime=runtime, run_id="t1")]

    def kinds(events, replayed):
        return [e.kind for e in events if getattr(e, "replayed", None) is replayed]

    assert kinds(first, True) == []
    assert kinds(again, True) == ["model_call", "route_decision", "delegation_started",
                                  "delegation_finished", "model_call", "route_decision"]
    finished = [e for e in again if isinstance(e, DelegationFinishedEvent)]
    assert finished[0].text == "draft" and finished[0].replayed
    assert all(e.replayed for e in again if isinstance(e, (ModelCallEvent, RouteDecisionEvent)))
    assert not any(isinstance(e, ToolResultEvent) and e.level == 1 for e in again)
    assert isinstance(again[-1], FinalEvent) and again[-1].result.text == "done"


# --- options --------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_durable_run_takes_the_callers_clock_ids_and_event_sink(tmp_path):
    seen: list[str] = []

    async def sink(event):
        seen.append(event.kind)

    runtime = Runtime(SqliteStore(tmp_path / "r.db"))
    try:
        ids = iter(["run-7"])
        agent = Agent("A.", model=ScriptedModel(["hi"]), name="a")
        result = await agent.run("x", runtime=runtime,
                                 options=RunOptions(ids=lambda: next(ids), events=sink))
        assert result.run_id == "run-7" and seen == ["model_call", "final"]
        with pytest.raises(ConfigurationError, match="durable run is a top-level run"):
            await agent.run("x", runtime=runtime,
                            options=RunOptions(parent=ParentRun("p", "k", 1, "p")))
    finally:
        runtime.close()


def test_the_durable_team_example(tmp_path, monkeypatch, capsys):
    import runpy
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "durable_team.py"
    monkeypatch.setattr(sys, "argv", ["durable_team.py", str(tmp_path / "runs.db")])
    runpy.run_path(str(example), run_name="__main__")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("parked: awaiting_approval, waiting on refund {'order': 'A-7'} "
                        "(call call_1), refunds so far: []")
    assert lines[1] == "resumed: completed: Sorry about the double charge: A-7 is refunded."
    assert lines[2] == "refunds: ['A-7']; researcher called again: []"
    assert any("approval: approve" in line for line in lines)


@pytest.mark.anyio
async def test_a_raised_workers_usage_is_recorded_and_replays_the_same():
    runtime = InMemoryRuntime()

    def flaky(messages, params):
        if last_tool_result(messages) is None:
            return ToolCall("count", {})
        raise ValueError("the upstream answer was cut off")

    def count() -> str:
        """Count."""
        return "1"

    worker = Agent("W.", model=FunctionModel(flaky), name="w", tools=[count])
    lead = FunctionModel(lambda messages, params: delegate("w", "go")
                         if last_tool_result(messages) is None else "gave up")
    team = Team.supervisor(workers={"w": worker}, instructions="Lead.", model=lead,
                           name="lead", max_attempts=2, retry_backoff_s=0)
    first = await team.run("go", runtime=runtime, run_id="t1")
    (failed,) = first.delegations
    assert not failed.completed and failed.attempts == 2
    assert failed.usage.model_calls == 2 and failed.usage.tool_calls == 2   # both attempts
    again = await team.run("go", runtime=runtime, run_id="t1")
    assert again.usage == first.usage and len(lead.calls) == 2


@pytest.mark.anyio
async def test_a_worker_in_a_worker_process_parks_the_team_on_its_approval():
    from foreperson.runtime import agent_app
    from foreperson.work.process import AppWorker, process_supervisor

    store = MemoryStore()
    ledger = Ledger()
    app = agent_app({"clerk": clerk(ledger, approval=ask_later)})    # "another machine"
    serving = process_supervisor(store, AppWorker(app, "box:1"), stale_after=5)
    runtime = InMemoryRuntime(store, remote_workers={"clerk"})
    here = Agent("Refund orders.", model=ScriptedModel([]), name="clerk")   # never runs here
    lead = FunctionModel(lambda messages, params: delegate("clerk", "refund A-7")
                         if last_tool_result(messages) is None else f"lead: {messages[-1].content}")
    team = Team.supervisor(workers={"clerk": here}, instructions="Lead.", model=lead,
                           name="lead")
    async with serving.serving():
        parked = await team.run("go", runtime=runtime, run_id="t1", user_id="ada")
        assert parked.stop_reason == "awaiting_approval" and ledger.calls == []
        (pending,) = parked.pending
        assert pending.agent == "clerk" and pending.key.startswith(
            "agent:lead/turn:1/tool:1/delegation:clerk/agent:clerk/turn:1/tool:1")
        (task,) = store.list_tasks(run_id="t1")
        assert task.status is Status.DEAD and "parked" in task.error
        runtime.approve("t1", pending.call_id, user_id="ada")
        done = await team.resume("t1", runtime=runtime, user_id="ada")
    assert done.text == "lead: done: refunded A-7" and ledger.calls == ["A-7"]
    assert here.model.calls == []
    assert store.get(task.id).status is Status.COMPLETED
    assert done.delegations[0].usage.model_calls == 2      # counted, though it ran elsewhere
