"""Seed 001's supervisor: the two forms, delegate / forward_message / spawn_worker, parallel
delegation, caps planned before a turn runs, loops, min_delegations, failures as a
status, and the capped context of issue 9 item 13."""

from __future__ import annotations

import json

import anyio
import pytest
from _teams_support import OUTAGE, Barrier, Logged, LoggedFunction, answering, prompt_of
from pydantic import BaseModel

from foreperson.agents import Agent, Guards, Limits, MemoryAuditLog, ToolResultEvent, tool
from foreperson.errors import ConfigurationError, ModelError
from foreperson.models import ModelResponse, ToolCall, ToolReturn, UserMessage
from foreperson.teams import (
    CapReachedEvent,
    LoopDetectedEvent,
    Team,
    TeamResult,
    TeamSupervisor,
    WorkerSpawnedEvent,
)
from foreperson.testing import FunctionModel, ScriptedModel
from foreperson.work import Status


def delegate(worker: str, instructions: str) -> ToolCall:
    return ToolCall("delegate", {"worker": worker, "instructions": instructions})


def tool_results(result: TeamResult) -> list[ToolReturn]:
    return [m for m in result.messages if isinstance(m, ToolReturn)]


def team_of(model, *workers: Agent, **options) -> Team:
    return Team.supervisor(workers={w.name: w for w in workers}, instructions="Manage.",
                           model=model, **options)


# --- item 1: two interchangeable forms --------------------------------------------------


@pytest.mark.anyio
async def test_team_supervisor_is_exactly_an_agent_with_the_supervisor_architecture():
    def run_with(make):
        log: list[str] = []
        writer = answering("writer", "a draft", log)
        model = Logged("lead", [delegate("writer", "draft it"), "Done: a draft"], log)
        return make(model, writer), log

    facade, facade_log = run_with(lambda m, w: Team.supervisor(
        workers={"writer": w}, instructions="Manage.", model=m, name="lead"))
    explicit, explicit_log = run_with(lambda m, w: Agent(
        "Manage.", model=m, name="lead", architecture=TeamSupervisor(workers={"writer": w})))
    a = await facade.run("write")
    b = await explicit.run("write")
    assert isinstance(facade, Agent) and isinstance(facade.architecture, TeamSupervisor)
    assert (a.text, a.stop_reason, a.usage) == (b.text, b.stop_reason, b.usage)
    assert [r.routed_to for r in a.route_log] == [r.routed_to for r in b.route_log]
    assert isinstance(b, TeamResult) and facade_log == explicit_log == ["lead", "writer", "lead"]


def test_a_team_runs_sync_and_is_a_worker_of_another_team():
    inner = team_of(ScriptedModel([delegate("writer", "x"), "inner done"]),
                    answering("writer", "w"), name="inner")
    outer = team_of(ScriptedModel([delegate("inner", "do it"), "outer done"]), inner)
    result = outer.run_sync("go")
    assert result.completed and result.text == "outer done"
    assert result.delegations[0].worker == "inner" and result.delegations[0].output == "inner done"
    assert result.usage.model_calls == 5


def test_bad_rosters_and_options_are_refused_at_construction():
    writer = answering("writer")
    with pytest.raises(ConfigurationError, match="not an Agent"):
        TeamSupervisor(workers={"writer": "not an agent"})  # type: ignore[dict-item]
    with pytest.raises(ConfigurationError, match="nobody to delegate"):
        TeamSupervisor(workers={})
    with pytest.raises(ConfigurationError, match="max_fan_out"):
        TeamSupervisor(workers={"writer": writer}, max_fan_out=0)
    with pytest.raises(ConfigurationError, match="unknown options"):
        Team.supervisor(workers={"writer": writer}, instructions="x", model="test",
                        max_fanout=3)  # type: ignore[call-arg]
    with pytest.raises(ConfigurationError, match="FINISH"):
        TeamSupervisor(workers={"FINISH": writer})


# --- item 2: delegate ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_delegate_offers_the_roster_as_an_enum_and_returns_the_final_answer():
    model = ScriptedModel([delegate("researcher", "find sources"), "summary"])
    team = team_of(model, answering("researcher", "three sources"), answering("writer"))
    result = await team.run("research")
    schema = next(t for t in model.calls[0].params.tools if t.name == "delegate").parameters
    assert schema["properties"]["worker"]["enum"] == ["researcher", "writer"]
    assert tool_results(result)[0].content == "three sources"
    assert not tool_results(result)[0].is_error


@pytest.mark.anyio
async def test_an_unknown_worker_is_a_correctable_result_listing_the_names_never_a_default():
    log: list[str] = []
    model = ScriptedModel([delegate("helper", "do it"), delegate("writer", "do it"), "ok"])
    team = team_of(model, answering("writer", log=log), answering("critic", log=log))
    result = await team.run("go")
    first = tool_results(result)[0]
    assert first.is_error and "no worker named 'helper'" in first.content
    assert "writer, critic" in first.content
    assert log == ["writer"]             # nobody ran for the unknown name
    assert result.route_log[0].overridden_by == "invalid"
    assert result.completed


@pytest.mark.anyio
async def test_case_and_whitespace_are_forgiven_only_when_one_name_matches():
    model = ScriptedModel([delegate(" WRITER ", "draft"), "ok"])
    result = await team_of(model, answering("writer", "draft 1")).run("go")
    assert tool_results(result)[0].content == "draft 1"

    model = ScriptedModel([[delegate("WRITER", "draft"), delegate("WRITER", "draft")], "ok"])
    ambiguous = team_of(model, answering("Writer"), answering("writer"))
    result = await ambiguous.run("go")
    first, second = tool_results(result)
    assert first.is_error and "several workers (Writer, writer)" in first.content
    assert first.content == second.content          # the same input resolves the same way


@pytest.mark.anyio
async def test_empty_instructions_are_a_correctable_error():
    model = ScriptedModel([delegate("writer", "   "), "ok"])
    result = await team_of(model, answering("writer")).run("go")
    assert "empty instructions" in tool_results(result)[0].content
    assert result.delegations == []


@pytest.mark.anyio
async def test_delegations_of_one_turn_run_concurrently_and_every_one_runs():
    barrier = Barrier(3)
    seen: list[str] = []

    async def worker(messages, params):
        seen.append(prompt_of(messages))
        await barrier.wait()
        return f"done: {prompt_of(messages)}"

    writer = Agent("Write.", model=FunctionModel(worker), name="writer")
    critic = Agent("Critique.", model=FunctionModel(worker), name="critic")
    model = ScriptedModel([[delegate("writer", "part A"), delegate("writer", "part B"),
                            delegate("critic", "part C")], "all three"])
    with anyio.fail_after(10):
        result = await team_of(model, writer, critic).run("go")
    assert sorted(seen) == ["part A", "part B", "part C"]
    assert [r.content for r in tool_results(result)] == [
        "done: part A", "done: part B", "done: part C"]   # results in call order
    assert len(result.delegations) == 3 and all(d.completed for d in result.delegations)


@pytest.mark.anyio
async def test_parallel_calls_to_one_worker_never_share_a_conversation():
    conversations: list[list[str]] = []

    def worker(messages, params):
        conversations.append([getattr(m, "content", "") for m in messages])
        return f"answer to {prompt_of(messages)}"

    writer = Agent("Write.", model=FunctionModel(worker), name="writer")
    model = ScriptedModel([[delegate("writer", "question 1"), delegate("writer", "question 2")],
                           "both"])
    result = await team_of(model, writer).run("go")
    assert sorted(conversations) == [["Write.", "question 1"], ["Write.", "question 2"]]
    assert {d.output for d in result.delegations} == {"answer to question 1",
                                                      "answer to question 2"}


# --- item 2: forward_message ---------------------------------------------------------------


@pytest.mark.anyio
async def test_forward_message_hands_the_output_over_verbatim_with_no_further_model_call():
    report = "  Report:\n  every line, exactly as written.  "
    model = ScriptedModel([delegate("writer", "write it"),
                           ToolCall("forward_message", {"worker": "writer"})])
    with model:     # a third supervisor call would fail: none is scripted
        result = await team_of(model, answering("writer", report)).run("go")
    assert result.completed and result.text == report and result.output == report
    assert result.route_log[-1].kind == "forward"
    assert result.usage.model_calls == 3


class Refund(BaseModel):
    amount_cents: int
    reason: str


@pytest.mark.anyio
async def test_a_forwarded_structured_output_keeps_its_type():
    refund = Refund(amount_cents=1250, reason="charged twice")
    worker = Agent("You decide refunds.", model=ScriptedModel([refund]), name="refunds",
                   output_type=Refund)
    model = ScriptedModel([delegate("refunds", "decide"),
                           ToolCall("forward_message", {"worker": "refunds"})])
    result = await team_of(model, worker).run("go")
    assert result.completed and result.output == refund
    assert isinstance(result.output, Refund)
    assert Refund.model_validate_json(result.text) == refund


@pytest.mark.anyio
async def test_forward_message_without_an_output_is_a_correctable_error():
    model = ScriptedModel([
        ToolCall("forward_message", {"worker": "writer"}),
        [delegate("writer", "write"), ToolCall("forward_message", {"worker": "writer"})],
        ToolCall("forward_message", {"worker": "writer"}),
    ])
    result = await team_of(model, answering("writer", "the text")).run("go")
    results = tool_results(result)
    assert results[0].is_error and "no output yet" in results[0].content
    assert results[2].is_error and "next turn" in results[2].content   # same turn: not yet
    assert result.text == "the text" and result.usage.model_calls == 4


# --- item 3: spawning ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_spawned_worker_is_delegable_on_the_next_turn_and_announced():
    model = ScriptedModel([
        ToolCall("spawn_worker", {"role": "translator", "instructions": "Translate to French."}),
        delegate("translator", "Bonjour?"),
        "merci",
    ])
    template = answering("template", "bonjour")
    team = team_of(model, answering("writer"), allow_spawn=True, spawn_template=template)
    events = [e async for e in team.stream("translate hello")]
    enums = [next(t for t in c.params.tools if t.name == "delegate").parameters[
        "properties"]["worker"]["enum"] for c in model.calls]
    assert enums == [["writer"], ["writer", "translator"], ["writer", "translator"]]
    spawned = [e for e in events if isinstance(e, WorkerSpawnedEvent)]
    assert len(spawned) == 1 and spawned[0].kind == "supervisor.worker_spawned"
    assert (spawned[0].role, spawned[0].running) == ("translator", 1) and spawned[0].worker_id
    result = events[-1].result
    assert result.delegations[0].worker == "translator"
    assert result.delegations[0].output == "bonjour"


@pytest.mark.anyio
async def test_a_spawned_worker_clones_the_templates_model_tools_and_guards():
    audit = MemoryAuditLog()
    calls: list[str] = []

    def lookup(term: str) -> str:
        """Look a term up."""
        calls.append(term)
        return f"{term}: found"

    def worker_reply(messages, params):
        if isinstance(messages[-1], ToolReturn):
            return f"used {messages[-1].content}"
        assert [t.name for t in params.tools] == ["lookup"]
        assert messages[0].content == "Look things up."     # the spawn's instructions
        return ToolCall("lookup", {"term": "tidepool"})

    template = Agent("template", model=FunctionModel(worker_reply), tools=[lookup],
                     guards=Guards(audit_log=audit, limits=Limits(max_turns=3)))
    model = ScriptedModel([
        ToolCall("spawn_worker", {"role": "scout", "instructions": "Look things up."}),
        delegate("scout", "tidepool"), "done"])
    team = team_of(model, answering("writer"), allow_spawn=True, spawn_template=template)
    result = await team.run("go")
    assert calls == ["tidepool"] and result.delegations[0].output == "used tidepool: found"
    assert {e.agent for e in audit.entries} == {"scout"}     # the template's audit log


@pytest.mark.anyio
async def test_without_a_template_a_spawned_worker_gets_the_supervisors_model_and_no_tools():
    model = ScriptedModel([
        ToolCall("spawn_worker", {"role": "poet", "instructions": "Write a haiku."}),
        delegate("poet", "about rain"), "an old pond", "here it is"])
    result = await team_of(model, answering("writer"), allow_spawn=True).run("go")
    assert result.delegations[0].output == "an old pond"
    assert list(model.calls[2].params.tools) == []      # the poet's call
    assert model.calls[2].messages[0].content == "Write a haiku."


@pytest.mark.anyio
async def test_each_spawn_mistake_is_a_correctable_error_string():
    model = ScriptedModel([[
        ToolCall("spawn_worker", {"role": "3d-artist", "instructions": "Draw."}),
        ToolCall("spawn_worker", {"role": "writer", "instructions": "Write."}),
        ToolCall("spawn_worker", {"role": "editor", "instructions": "  "}),
        ToolCall("spawn_worker", {"role": "editor", "instructions": "Edit."}),
        ToolCall("spawn_worker", {"role": "checker", "instructions": "Check."}),
    ], "done"])
    team = team_of(model, answering("writer"), allow_spawn=True, max_spawned=1)
    result = await team.run("go")
    contents = [r.content for r in tool_results(result)]
    assert "not a valid Python identifier" in contents[0]
    assert "already in the roster" in contents[1]
    assert "empty instructions" in contents[2]
    assert "spawned worker 'editor'" in contents[3]
    assert "max_spawned=1" in contents[4]
    assert [r.is_error for r in tool_results(result)] == [True, True, True, False, True]
    assert result.completed


@pytest.mark.anyio
async def test_spawned_workers_live_only_for_their_run():
    model = ScriptedModel([
        ToolCall("spawn_worker", {"role": "poet", "instructions": "Write poems."}), "first",
        delegate("poet", "a poem"), "second"])
    team = team_of(model, answering("writer"), allow_spawn=True)
    await team.run("run one")
    second = await team.run("run two")
    assert "no worker named 'poet'" in tool_results(second)[0].content
    assert "poet" not in team.architecture.roster


# --- item 6: caps that end with a result ---------------------------------------------------


@pytest.mark.anyio
async def test_fan_out_is_capped_before_dispatch_exactly_three_of_eight_run():
    log: list[str] = []
    calls = [delegate("writer", f"part {i}") for i in range(1, 9)]
    model = ScriptedModel([calls])
    with model:
        events = [e async for e in team_of(model, answering("writer", "ok", log),
                                           max_fan_out=3).stream("go")]
    result = events[-1].result
    contents = [r.content for r in tool_results(result)]
    assert log == ["writer"] * 3
    assert contents[:3] == ["ok"] * 3
    assert all(c.startswith("skipped: cap") and "max_fan_out=3" in c for c in contents[3:])
    assert len(contents) == 8
    assert result.stop_reason == "cap" and result.text == "ok"
    assert [d.instructions for d in result.delegations] == ["part 1", "part 2", "part 3"]
    caps = [e for e in events if isinstance(e, CapReachedEvent)]
    assert [(c.cap, c.limit) for c in caps] == [("max_fan_out", 3)]


@pytest.mark.anyio
async def test_a_delegation_cap_of_three_never_runs_a_fourth_when_a_turn_fans_out():
    log: list[str] = []
    model = ScriptedModel([
        [delegate("writer", "a"), delegate("writer", "b")],
        [delegate("writer", "c"), delegate("writer", "d"), delegate("writer", "e")],
    ])
    result = await team_of(model, answering("writer", "ok", log),
                           max_specialist_calls=3).run("go")
    assert log == ["writer"] * 3 and result.specialist_calls == 3
    assert result.stop_reason == "cap" and "max_specialist_calls=3" in result.detail
    assert [r.routed_to for r in result.route_log] == [
        "writer", "writer", "writer", "skipped", "skipped"]
    assert [r.specialist_calls for r in result.route_log] == [0, 1, 2, 3, 3]


@pytest.mark.anyio
async def test_a_per_worker_cap_skips_the_extra_calls_and_ends_the_run():
    log: list[str] = []
    model = ScriptedModel([[delegate("writer", "a"), delegate("critic", "b"),
                            delegate("writer", "c")]])
    result = await team_of(model, answering("writer", "w", log), answering("critic", "c", log),
                           max_calls_per_worker=1).run("go")
    assert sorted(log) == ["critic", "writer"]
    assert "max_calls_per_worker=1" in tool_results(result)[2].content
    assert result.stop_reason == "cap" and result.partial == []


@pytest.mark.anyio
async def test_the_supervisors_turn_cap_ends_with_its_last_synthesis():
    model = ScriptedModel([
        ModelResponse(text="Starting.", tool_calls=(delegate("writer", "a"),)),
        ModelResponse(text="Draft A is good; now B.", tool_calls=(delegate("writer", "b"),)),
    ])
    with model:
        result = await team_of(model, answering("writer", "draft"), max_turns=2).run("go")
    assert result.stop_reason == "cap" and "max_turns=2" in result.detail
    assert result.text == "Draft A is good; now B."       # written after an output came back
    assert len(result.delegations) == 2


@pytest.mark.anyio
async def test_the_agents_own_turn_limit_also_ends_with_the_work_done():
    model = ScriptedModel([delegate("writer", "a"), delegate("writer", "b")])
    team = team_of(model, answering("writer", "draft b"),
                   guards=Guards(limits=Limits(max_turns=2)))
    result = await team.run("go")
    assert result.stop_reason == "max_turns" and result.text == "draft b"


@pytest.mark.anyio
async def test_a_repeated_identical_delegation_ends_the_run_as_a_loop():
    log: list[str] = []
    model = ScriptedModel([delegate("writer", "draft the intro"),
                           delegate("writer", " draft  the intro ")])
    events = [e async for e in team_of(model, answering("writer", "intro", log)).stream("go")]
    result = events[-1].result
    assert log == ["writer"] and result.stop_reason == "loop"
    assert tool_results(result)[1].content.startswith("skipped: loop")
    assert result.text == "intro"
    assert [e.worker for e in events if isinstance(e, LoopDetectedEvent)] == ["writer"]


@pytest.mark.anyio
async def test_the_same_delegation_twice_in_one_turn_runs_once():
    log: list[str] = []
    model = ScriptedModel([[delegate("writer", "draft the intro"),
                            delegate("writer", " draft  the intro "),
                            delegate("writer", "draft the outro")], "done"])
    result = await team_of(model, answering("writer", "text", log)).run("go")
    assert log == ["writer", "writer"]                   # the intro once, the outro once
    assert result.completed and result.specialist_calls == 2
    first, second, third = tool_results(result)
    assert first.content == "text" and third.content == "text"
    assert second.content.startswith("skipped: the same delegation as call 1 of this turn")
    assert not second.is_error
    assert [r.overridden_by for r in result.route_log if r.kind == "delegate"] == [
        None, "duplicate", None]


@pytest.mark.anyio
async def test_min_delegations_refuses_an_answer_without_delegation_once():
    model = ScriptedModel(["I know this already.", delegate("writer", "check"), "checked"])
    result = await team_of(model, answering("writer", "fine"), min_delegations=1).run("go")
    assert result.completed and result.text == "checked"
    assert [r.kind for r in result.route_log] == ["refused", "delegate", "answer"]
    assert result.route_log[0].overridden_by == "min_delegations"
    assert "at least 1 delegation" in model.calls[1].messages[-1].content

    stubborn = ScriptedModel(["No.", "Still no."])
    result = await team_of(stubborn, answering("writer"), min_delegations=1).run("go")
    assert result.completed and result.text == "Still no."
    assert "accepted after one refusal" in result.route_log[-1].detail


# --- item 7: failure is a status -----------------------------------------------------------


@pytest.mark.anyio
async def test_a_worker_that_raises_reaches_the_supervisor_as_a_failure_not_an_answer():
    broken = Agent("Break.", model=ScriptedModel([ModelError("bad request", status_code=400)]),
                   name="broken")
    model = ScriptedModel([[delegate("broken", "try"), delegate("writer", "write")], "partial"])
    team = team_of(model, broken, answering("writer", "ok"))
    result = await team.run("go")
    failed = json.loads(tool_results(result)[0].content)
    assert tool_results(result)[0].is_error
    assert failed["completed"] is False and failed["worker"] == "broken"
    assert "ModelError: bad request" in failed["reason"]
    assert result.partial == ["broken"] and result.outputs == {"writer": "ok"}
    task = team.architecture.store.get(result.delegations[0].task_id)
    assert task.status is Status.DEAD and "bad request" in task.error


@pytest.mark.anyio
async def test_a_worker_out_of_steps_is_a_failure_with_what_it_produced():
    def looping(messages, params):
        return ToolCall("note", {"text": "step"})

    def note(text: str) -> str:
        """Take a note."""
        return f"noted {text}"

    stuck = Agent("Work.", model=FunctionModel(looping), tools=[note], name="stuck",
                  guards=Guards(limits=Limits(max_turns=2)))
    model = ScriptedModel([delegate("stuck", "work"), "gave up"])
    result = await team_of(model, stuck).run("go")
    failed = json.loads(tool_results(result)[0].content)
    assert failed["completed"] is False and "max_turns" in failed["reason"]
    assert failed["produced"] == "noted step"
    assert result.delegations[0].stop_reason == "max_turns"
    assert result.partial == ["stuck"]


@pytest.mark.anyio
async def test_a_worker_that_times_out_is_a_failure_and_the_team_goes_on():
    never = anyio.Event()

    async def hangs(messages, params):
        await never.wait()

    slow = Agent("Wait.", model=FunctionModel(hangs), name="slow")
    model = ScriptedModel([delegate("slow", "wait"), "moved on"])
    with anyio.fail_after(5):
        result = await team_of(model, slow, worker_timeout_s=0.05).run("go")
    failed = json.loads(tool_results(result)[0].content)
    assert "worker_timeout_s=0.05" in failed["reason"] and result.text == "moved on"


@pytest.mark.anyio
async def test_a_tool_named_like_a_team_tool_is_refused():
    @tool(name="delegate")
    def mine(x: str) -> str:
        """Mine."""
        return x

    team = Team.supervisor(workers={"w": answering("w")}, instructions="x",
                           model=ScriptedModel(["hi"]), tools=[mine])
    with pytest.raises(ConfigurationError, match="delegate"):
        await team.run("go")


# --- item 13: the capped context -----------------------------------------------------------


def _prompt_chars(call) -> int:
    total = 0
    for message in call.messages:
        total += len(getattr(message, "content", None) or getattr(message, "text", None) or "")
        for c in getattr(message, "tool_calls", ()):
            total += len(c.arguments_json())
    return total


async def _sizes(context: str, delegations: int) -> list[int]:
    report = "r" * 2000
    model = ScriptedModel([delegate("researcher", f"question {i}") for i in range(delegations)]
                          + ["done"])
    team = team_of(model, answering("researcher", report), context=context,
                   max_specialist_calls=None, recursion_limit=100,
                   guards=Guards(limits=Limits(max_turns=50)))
    result = await team.run("Research these questions one by one.")
    assert result.completed and len(result.delegations) == delegations
    return [_prompt_chars(call) for call in model.calls]


@pytest.mark.anyio
async def test_the_capped_context_stays_flat_in_the_number_of_delegations():
    capped = await _sizes("capped", 20)
    transcript = await _sizes("transcript", 20)
    assert capped[20] <= 1.2 * capped[1]              # after 20 delegations vs after 1
    assert transcript[20] > 15 * transcript[1]        # the transcript grows with each report
    assert transcript[20] > 40_000


@pytest.mark.anyio
async def test_read_output_returns_the_whole_output_from_the_store():
    report = "x" * 1000 + "THE END"
    model = ScriptedModel([delegate("researcher", "dig"),
                           ToolCall("read_output", {"worker": "researcher"}), "done"])
    result = await team_of(model, answering("researcher", report), context="capped").run("go")
    ack, full = tool_results(result)
    assert "1007 characters" in ack.content and "THE END" not in ack.content
    assert full.content == report
    block = model.calls[1].messages[0].content
    assert "x" * 300 + "..." in block and "x" * 301 not in block
    assert isinstance(model.calls[2].messages[-1], ToolReturn)


@pytest.mark.anyio
async def test_the_outage_request_with_both_specialists_in_one_turn_takes_four_calls():
    log: list[str] = []
    barrier = Barrier(2)

    def specialist(name: str, answer: str) -> Agent:
        async def reply(messages, params):
            await barrier.wait()
            return answer
        return Agent(f"{name}.", model=LoggedFunction(name, reply, log), name=name)

    model = Logged("supervisor", [
        [delegate("operations", "Explain last night's outage."),
         delegate("billing", "Do outages earn service credits?")],
        "The outage was a storage fault; you get a 10 % credit."], log)
    team = team_of(model, specialist("operations", "storage fault"),
                   specialist("billing", "10 % credit"))
    with anyio.fail_after(10):
        result = await team.run(OUTAGE)
    assert result.usage.model_calls == 4 and log[0] == log[-1] == "supervisor"
    assert sorted(log[1:3]) == ["billing", "operations"]
    assert [r.specialist_calls for r in result.route_log[:2]] == [0, 1]


@pytest.mark.anyio
async def test_the_correction_from_min_delegations_stays_out_of_the_workers_prompt():
    seen: list[str] = []

    def worker(messages, params):
        seen.append(prompt_of(messages))
        return "ok"

    model = ScriptedModel(["answer", delegate("w", "do the thing"), "final"])
    team = team_of(model, Agent("W.", model=FunctionModel(worker), name="w"),
                   min_delegations=1)
    result = await team.run("go")
    assert seen == ["do the thing"]
    assert isinstance(result.messages[3], UserMessage)


@pytest.mark.anyio
async def test_tool_result_events_of_the_supervisor_carry_the_structured_failure():
    broken = Agent("Break.", model=ScriptedModel([ModelError("boom", status_code=400)]),
                   name="broken")
    model = ScriptedModel([delegate("broken", "try"), "sorry"])
    events = [e async for e in team_of(model, broken).stream("go")]
    results = [e for e in events if isinstance(e, ToolResultEvent) and e.level == 0]
    assert results[0].result.is_error and '"completed": false' in results[0].result.content
