"""Running a YAML state machine with scripted agents (seed 003's semantics)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from foreperson.agents import Agent
from foreperson.errors import ConfigurationError, RunError
from foreperson.fsm import (
    UPDATE_CONTEXT,
    Machine,
    SummonResult,
    Summons,
)
from foreperson.journal import JournalDivergence, Step
from foreperson.models import ToolCall, ToolReturn, UserMessage
from foreperson.testing import ScriptedModel
from foreperson.work import MemoryStore

ROOT = Path(__file__).resolve().parents[2]
ROUTER = ROOT / "examples" / "support_router.yaml"
SEED = ROOT / "tests" / "fixtures" / "fsm" / "support_router_seed.yaml"


def write(field: str, value: Any) -> ToolCall:
    return ToolCall(UPDATE_CONTEXT, {"field": field, "value": value})


def agents(**scripts: list) -> tuple[dict[str, Agent], dict[str, ScriptedModel]]:
    """Scripted agents for every agent of the router (unscripted ones must not be
    called)."""
    names = ["supervisor", "billing_agent", "tech_agent", "security_agent"]
    models = {name: ScriptedModel(scripts.get(name, []), name=name) for name in names}
    return ({name: Agent(f"You are {name}.", model=m, name=name) for name, m in models.items()},
            models)


def prompts(model: ScriptedModel) -> list[str]:
    """The summons prompt of each agent run (the first user message of each call that
    starts a run)."""
    out = []
    for call in model.calls:
        if len(call.messages) == 2 and isinstance(call.messages[1], UserMessage):
            out.append(call.messages[1].content)
    return out


TWO_HOPS = dict(
    supervisor=[
        [write("request", "an unknown card charge"), write("route", "technical")], "routed",
        write("route", "security"), "routed",
        write("route", "synthesize"), "routed",
        write("answer", "We blocked the card and reversed the charge."), "done",
    ],
    tech_agent=[write("finding", "the charge came through a leaked API token"), "reported"],
    security_agent=[write("finding", "token revoked; account takeover ruled out"), "reported"],
)


def test_two_hop_route_walks_the_hub_and_keeps_both_findings_in_order():
    team, models = agents(**TWO_HOPS)
    machine = Machine.from_file(ROUTER)

    result = machine.run_sync("Someone charged my card 90 EUR and I did not do it", agents=team)

    assert result.completed and result.state == "done"
    assert result.path == ["triage", "technical", "dispatch", "security", "dispatch",
                           "synthesize", "done"]
    assert result.context["notes"] == [
        "technical: the charge came through a leaked API token",
        "security: token revoked; account takeover ruled out",
    ]
    assert result.context["answer"] == "We blocked the card and reversed the charge."
    # the hops consumed the trigger and the report
    assert result.context["route"] == "synthesize" and result.context["finding"] == ""
    guards = [t.guard for t in result.trace]
    assert guards == ["context.route == 'technical'", None, "context.route == 'security'",
                      None, "context.route == 'synthesize'", None]
    hop = result.trace[1]
    assert [(w.field, w.value, w.by, w.op) for w in hop.writes] == [
        ("finding", "the charge came through a leaked API token", "tech_agent", "assign"),
        ("notes", "technical: the charge came through a leaked API token", "exit", "append"),
        ("route", "", "onTransition", "assign"),
        ("finding", "", "onTransition", "assign"),
    ]
    assert hop.summoned == ("tech_agent",)
    assert all(t.duration_s >= 0 and t.entered_at.tzinfo is not None for t in result.trace)
    # each specialist asked once; the billing agent never
    assert len(prompts(models["tech_agent"])) == 1
    assert len(prompts(models["security_agent"])) == 1
    assert models["billing_agent"].calls == []
    for model in models.values():
        model.assert_all_used()
    assert result.usage.model_calls == sum(len(m.calls) for m in models.values())


def test_seed_yaml_runs_as_written():
    team, _ = agents(**TWO_HOPS)
    result = Machine.from_file(SEED).run_sync("a charge I do not recognise", agents=team)
    assert result.completed
    assert result.path == ["triage", "technical", "dispatch", "security", "dispatch",
                           "synthesize", "done"]
    assert [n.split(":")[0] for n in result.context["notes"]] == ["technical", "security"]


def test_a_second_visit_to_a_specialist_asks_it_again():
    team, models = agents(
        supervisor=[
            [write("request", "the app crashes"), write("route", "technical")], "ok",
            write("route", "technical"), "ok",          # same specialist again
            write("route", "synthesize"), "ok",
            write("answer", "Update to 2.1."), "ok",
        ],
        tech_agent=[write("finding", "crash in the image cache"), "ok",
                    write("finding", "fixed in release 2.1"), "ok"],
    )
    result = Machine.from_file(ROUTER).run_sync("crash on start", agents=team)

    assert result.path == ["triage", "technical", "dispatch", "technical", "dispatch",
                           "synthesize", "done"]
    asked = prompts(models["tech_agent"])
    assert len(asked) == 2
    # the second summons sees the first report in the record, and adds its own
    assert "technical: crash in the image cache" in asked[1]
    assert result.context["notes"] == ["technical: crash in the image cache",
                                       "technical: fixed in release 2.1"]


def test_an_out_of_vocabulary_route_is_refused_and_corrected_on_the_next_try():
    supervisor = ScriptedModel([
        [write("request", "double charge"), write("route", "refunds")],   # not a route
        write("route", "billing"),
        "routed",
        write("route", "synthesize"), "ok",
        write("answer", "Refunded."), "ok",
    ])
    team, models = agents(billing_agent=[write("finding", "charged twice on 3 May"), "ok"])
    team["supervisor"] = Agent("You route.", model=supervisor, name="supervisor")

    result = Machine.from_file(ROUTER).run_sync("I was charged twice", agents=team)

    returns = [m for m in supervisor.calls[1].messages if isinstance(m, ToolReturn)]
    refused = [r for r in returns if r.is_error]
    assert len(refused) == 1
    assert "billing, technical, security, synthesize" in refused[0].content
    assert "'refunds'" in refused[0].content
    assert result.path[:2] == ["triage", "billing"]
    routes = [w.value for t in result.trace for w in t.writes
              if w.field == "route" and w.by == "supervisor"]
    assert routes == ["billing", "synthesize"]          # the bad value never landed
    assert result.completed


def test_an_agent_may_write_only_the_fields_its_state_requires_from_it():
    team, models = agents(
        supervisor=[[write("request", "slow pages"), write("route", "technical")], "ok",
                    write("route", "synthesize"), "ok", write("answer", "a"), "ok"],
        tech_agent=[write("route", "billing"), write("finding", "slow database"), "ok"],
    )
    result = Machine.from_file(ROUTER).run_sync("pages are slow", agents=team)

    refused = [m for m in models["tech_agent"].calls[1].messages
               if isinstance(m, ToolReturn) and m.is_error]
    assert "you may not write 'route' here; you may write: finding" in refused[0].content
    assert result.path[:3] == ["triage", "technical", "dispatch"]


def test_max_iterations_ends_the_run_with_a_result():
    text = ROUTER.read_text().replace("maxIterations: 12", "maxIterations: 4")
    team, models = agents(
        supervisor=[[write("request", "loop"), write("route", "billing")], "ok",
                    write("route", "billing"), "ok"],
        billing_agent=[write("finding", "report 1"), "ok", write("finding", "report 2"), "ok"],
    )
    result = Machine.from_text(text, source="loop.yaml").run_sync("loop", agents=team)

    assert result.stop_reason == "max_iterations"
    assert not result.completed
    assert len(result.trace) == 4
    assert result.state == "dispatch"         # parked at the hub; nobody asked after the cap
    assert "maxIterations (4) reached" in (result.detail or "")
    assert result.context["notes"] == ["billing: report 1", "billing: report 2"]
    for model in models.values():
        model.assert_all_used()


def test_an_agent_that_never_writes_is_capped_per_stage():
    team, models = agents(supervisor=["I will think about it"] * 3)
    result = Machine.from_file(ROUTER).run_sync("?", agents=team)

    assert result.stop_reason == "max_exchanges_per_agent_per_stage"
    assert result.state == "triage" and result.trace == ()
    assert "still missing request, route" in (result.detail or "")
    again = prompts(models["supervisor"])
    assert len(again) == 3 and "You were asked before" in again[1]


class Instant:
    """A summoner whose agents answer at once from a table, recording each summons."""

    def __init__(self, answers: dict[str, list[dict[str, Any]]]) -> None:
        self.answers = {k: list(v) for k, v in answers.items()}
        self.seen: list[Summons] = []

    async def summon(self, summons: Summons) -> SummonResult:
        self.seen.append(Summons.from_json(summons.to_json()))   # JSON round trip
        writes = self.answers[summons.agent].pop(0)
        return SummonResult(tuple(writes.items()))


def two_hop_answers() -> dict[str, list[dict[str, Any]]]:
    return {
        "supervisor": [{"request": "x" * 1000, "route": "technical"}, {"route": "security"},
                       {"route": "synthesize"}, {"answer": "done"}],
        "tech_agent": [{"finding": "t1"}],
        "security_agent": [{"finding": "s1"}],
    }


def test_summons_show_values_capped_at_300_characters_and_objectives_in_full():
    summoner = Instant(two_hop_answers())
    Machine.from_file(ROUTER).run_sync("long", summoner=summoner)

    tech = next(s for s in summoner.seen if s.agent == "tech_agent")
    assert len(tech.context["request"]) == 300 and tech.context["request"].endswith("…")
    assert "x" * 1000 in tech.objective                    # the description, in full
    assert [f.name for f in tech.writable] == ["finding"] and tech.missing == ("finding",)
    assert tech.key == "summons/1/technical/tech_agent/1"


def test_a_custom_summoner_replaces_the_agents():
    result = Machine.from_file(ROUTER).run_sync("r", summoner=Instant(two_hop_answers()))
    assert result.completed and result.context["notes"] == ["technical: t1", "security: s1"]


class Crash(Exception):
    pass


class CrashAfter(Instant):
    """Answers ``n`` summons, then fails as a killed process would."""

    def __init__(self, answers: dict[str, list[dict[str, Any]]], n: int) -> None:
        super().__init__(answers)
        self.n = n

    async def summon(self, summons: Summons) -> SummonResult:
        if len(self.seen) == self.n:
            raise Crash()
        return await super().summon(summons)


def test_resume_continues_from_the_checkpoint_without_asking_anyone_twice():
    store = MemoryStore()
    machine = Machine.from_file(ROUTER)             # checkpointEvery: 2
    first = CrashAfter(two_hop_answers(), n=3)      # triage, technical, dispatch answered
    with pytest.raises(Crash):
        machine.run_sync("card", summoner=first, store=store, run_id="run-1")
    kinds = [s.key for s in store.list_steps("run-1")]
    assert "checkpoint/2" in kinds                  # parked at dispatch after two hops

    answers = two_hop_answers()
    rest = Instant({"supervisor": answers["supervisor"][2:],
                    "security_agent": answers["security_agent"]})
    result = machine.resume_sync("run-1", store=store, summoner=rest)

    assert result.completed and result.run_id == "run-1"
    assert result.context["notes"] == ["technical: t1", "security: s1"]
    assert [s.agent for s in first.seen] == ["supervisor", "tech_agent", "supervisor"]
    # only what was never answered is asked: the journaled dispatch summons is replayed
    assert [s.agent for s in rest.seen] == ["security_agent", "supervisor", "supervisor"]
    assert [t.index for t in result.trace] == [1, 2, 3, 4, 5, 6]
    assert [t.replayed for t in result.trace] == [False, False, True, False, False, False]
    # a finished run resumes to its recorded result, asking nobody
    again = machine.resume_sync("run-1", store=store, summoner=Instant({}))
    assert again.context == result.context and again.stop_reason == "completed"


def test_resume_refuses_another_version_of_the_machine_and_unknown_runs():
    store = MemoryStore()
    machine = Machine.from_file(ROUTER)
    with pytest.raises(Crash):
        machine.run_sync("r", summoner=CrashAfter(two_hop_answers(), n=1), store=store,
                         run_id="r1")
    changed = Machine.from_text(ROUTER.read_text().replace("maxIterations: 12",
                                                           "maxIterations: 13"))
    with pytest.raises(ConfigurationError, match="another version of machine"):
        changed.resume_sync("r1", store=store, summoner=Instant({}))
    with pytest.raises(ConfigurationError, match="no run nope"):
        machine.resume_sync("nope", store=store, summoner=Instant({}))
    with pytest.raises(ConfigurationError, match="already exists"):
        machine.run_sync("r", summoner=Instant({}), store=store, run_id="r1")


def test_a_journaled_summons_that_no_longer_matches_is_a_divergence():
    store = MemoryStore()
    machine = Machine.from_file(ROUTER)
    with pytest.raises(Crash):
        machine.run_sync("r", summoner=CrashAfter(two_hop_answers(), n=1), store=store,
                         run_id="r2")
    # another process recorded a different summons under the next key
    store.put_step(Step("r2", "summons/1/technical/tech_agent/1", "fsm.summons", "0" * 64,
                        SummonResult((("finding", "f"),)).to_json()))
    with pytest.raises(JournalDivergence):
        machine.resume_sync("r2", store=store, summoner=Instant(two_hop_answers()))


def test_checkpoints_are_written_every_checkpoint_every_transitions():
    store = MemoryStore()
    Machine.from_file(ROUTER).run_sync("r", summoner=Instant(two_hop_answers()), store=store,
                                       run_id="r3")
    keys = [s.key for s in store.list_steps("r3")]
    assert [k for k in keys if k.startswith("checkpoint/")] == [
        "checkpoint/2", "checkpoint/4", "checkpoint/6"]
    assert keys[0] == "start" and keys[-1] == "end"
    checkpoint = store.get_step("r3", "checkpoint/4")
    assert checkpoint is not None and checkpoint.result["state"] == "dispatch"
    assert checkpoint.result["context"]["notes"] == ["technical: t1", "security: s1"]


SCORED = """\
fsm:
  name: scored
  initialState: rate
  context:
    score: { type: number }
  agents:
    rater: { canTransition: [rate] }
  states:
    rate:
      requires: [ { name: score, from: agent } ]
      transitions:
        - { toState: high, guards: [ { expression: "context.score >= 5.0" } ] }
        - { toState: low, guards: [ { expression: "context.score < 2.0" } ] }
    high: { terminal: true }
    low: { terminal: true }
"""


def test_no_transition_whose_guards_hold_ends_the_run_with_the_values():
    summoner = Instant({"rater": [{"score": "3"}]})
    result = Machine.from_text(SCORED).run_sync("rate it", summoner=summoner)
    assert result.stop_reason == "no_transition"
    assert result.context["score"] == 3.0
    assert "score=3.0" in (result.detail or "")


def test_a_guard_failing_on_the_runs_data_ends_the_run_with_a_result():
    # fine on the load-time samples, out of range on the run's value (issue 20: a
    # GuardError ends the run with a result, stop reason guard_error)
    text = SCORED.replace('"context.score >= 5.0"', '"[1, 2][int(context.score)] == 1"')
    result = Machine.from_text(text).run_sync("x", summoner=Instant({"rater": [{"score": 4}]}))
    assert result.stop_reason == "guard_error" and result.state == "rate"
    assert "index out of bounds" in (result.detail or "")


def test_run_arguments_are_checked_before_anything_runs():
    machine = Machine.from_file(ROUTER)
    team, _ = agents()
    with pytest.raises(ConfigurationError, match="security_agent"):
        machine.run_sync("x", agents={k: v for k, v in team.items() if k != "security_agent"})
    with pytest.raises(ConfigurationError, match="one of the two"):
        machine.run_sync("x")
    with pytest.raises(ConfigurationError, match="not a field"):
        machine.run_sync("x", agents=team, context={"colour": "red"})
    with pytest.raises(ConfigurationError, match="route must be one of"):
        machine.run_sync("x", agents=team, context={"route": "nowhere"})


def test_initial_context_values_satisfy_requirements():
    summoner = Instant({"tech_agent": [{"finding": "f"}], "supervisor": [
        {"route": "synthesize"}, {"answer": "a"}]})
    result = Machine.from_file(ROUTER).run_sync(
        "x", summoner=summoner, context={"request": "gist", "route": "technical"})
    assert result.path[:2] == ["triage", "technical"]
    assert result.trace[0].summoned == ()


def test_run_sync_refuses_a_running_loop():
    machine = Machine.from_file(ROUTER)

    async def inside() -> None:
        machine.run_sync("x", summoner=Instant({}))

    with pytest.raises(RuntimeError, match="await machine.run"):
        asyncio.run(inside())


@pytest.mark.anyio
async def test_results_round_trip_through_json():
    result = await Machine.from_file(ROUTER).run("r", summoner=Instant(two_hop_answers()))
    from foreperson.fsm import MachineResult

    assert MachineResult.from_json(result.to_json()) == result


def test_the_stage_cap_ends_the_run_with_a_result():
    text = ROUTER.read_text().replace("maxExchangesPerStage: 6", "maxExchangesPerStage: 2")
    team, models = agents(supervisor=["thinking", "still thinking"])
    result = Machine.from_text(text).run_sync("?", agents=team)
    assert result.stop_reason == "max_exchanges_per_stage"
    assert "maxExchangesPerStage (2) reached in state 'triage'" in (result.detail or "")
    models["supervisor"].assert_all_used()


def test_a_result_recorded_first_by_another_process_stops_the_run():
    store = MemoryStore()

    class Racing(Instant):
        async def summon(self, summons: Summons) -> SummonResult:
            result = await super().summon(summons)
            if summons.agent == "tech_agent":       # another process answers first
                store.put_step(Step(summons.run_id, summons.key, "fsm.summons", "d",
                                    SummonResult((("finding", "other"),)).to_json()))
            return result

    with pytest.raises(RunError, match="recorded first by another process"):
        Machine.from_file(ROUTER).run_sync("r", summoner=Racing(two_hop_answers()),
                                           store=store, run_id="race")


def test_with_a_task_store_every_summons_is_a_task_of_the_run(tmp_path):
    from foreperson.fsm import summons_kind
    from foreperson.work import SqliteStore, Status

    team, models = agents(**TWO_HOPS)
    store = SqliteStore(tmp_path / "run.db")
    machine = Machine.from_file(ROUTER)
    result = machine.run_sync("Someone charged my card", agents=team, store=store,
                              run_id="card-1")
    assert result.completed and result.context["notes"][1].startswith("security: ")
    summons = store.list_tasks(run_id="card-1")
    assert [t.kind.split(":")[1] for t in summons] == [
        "supervisor", "tech_agent", "supervisor", "security_agent", "supervisor",
        "supervisor"]
    assert {t.kind for t in summons} <= {summons_kind(machine.spec.name, a)
                                        for a in machine.spec.agents}
    assert all(t.status is Status.COMPLETED and t.attempts == 1 for t in summons)
    assert summons[1].result["writes"] == [["finding",
                                            "the charge came through a leaked API token"]]
    assert store.stats(run_id="card-1").counts[Status.COMPLETED] == 6
    for model in models.values():
        model.assert_all_used()
    again = machine.resume_sync("card-1", store=store, agents=team)   # finished: recorded
    assert again.context == result.context
    store.close()
