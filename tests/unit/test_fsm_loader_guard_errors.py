"""At run time a CEL guard or action that fails on the run's data, or would exceed its
evaluation budget, ends the run with a result (stop reason ``guard_error``), and a
journaled run stopped so resumes once the machine file is fixed (issue 20, items 6-7)."""

from __future__ import annotations

from typing import Any

import pytest

from foreperson.agents import STOP_REASONS
from foreperson.errors import ConfigurationError
from foreperson.fsm import MACHINE_STOP_REASONS, Machine, SummonResult, Summons
from foreperson.fsm._cel import MAX_EVALUATION_STEPS
from foreperson.work import MemoryStore

SCORED = """\
fsm:
  name: scored
  initialState: rate
  context:
    score: { type: number }
    notes: { type: list, of: string }
    verdict: { type: string }
  agents:
    rater: { canTransition: [rate] }
  states:
    rate:
      requires: [ { name: score, from: agent } ]
      exit: [ { assign: { verdict: "EXIT" } } ]
      transitions:
        - { toState: high, guards: [ { expression: "GUARD" } ] }
        - { toState: low, guards: [ { expression: "context.score < 2.0" } ] }
    high: { terminal: true }
    low: { terminal: true }
"""
BROKEN = "[1, 2][int(context.score)] == 1"     # fine on the samples, out of range on 4
FIXED = "context.score >= 3.0"


def machine(guard: str = FIXED, exit_value: str = "'rated'") -> Machine:
    text = SCORED.replace("GUARD", guard).replace("EXIT", "${ " + exit_value + " }")
    return Machine.from_text(text)


class Table:
    """A summoner answering each agent from a list of writes, recording each summons."""

    def __init__(self, answers: dict[str, list[dict[str, Any]]]) -> None:
        self.answers = {k: list(v) for k, v in answers.items()}
        self.seen: list[Summons] = []

    async def summon(self, summons: Summons) -> SummonResult:
        self.seen.append(summons)
        return SummonResult(tuple(self.answers[summons.agent].pop(0).items()))


def test_guard_error_is_a_registered_machine_stop_reason():
    assert "guard_error" in MACHINE_STOP_REASONS
    assert "guard_error" in STOP_REASONS


def test_a_guard_failing_on_the_runs_data_ends_the_run_with_a_result():
    result = machine(BROKEN).run_sync("x", summoner=Table({"rater": [{"score": 4}]}))
    assert result.stop_reason == "guard_error" and not result.completed
    assert result.state == "rate" and result.context["score"] == 4.0
    assert "index out of bounds" in (result.detail or "")
    assert "state 'rate'" in (result.detail or "")


def test_an_action_failing_on_the_runs_data_ends_the_run_with_a_result():
    broken_action = "['a'][int(context.score)]"
    result = machine(exit_value=broken_action).run_sync(
        "x", summoner=Table({"rater": [{"score": 4}]}))
    assert result.stop_reason == "guard_error" and result.trace == ()


def test_a_guard_over_its_budget_on_the_runs_data_is_not_run():
    guard = ("context.notes.all(a, context.notes.all(b, context.notes.exists(c, "
             "a == b && b == c)))")
    text = SCORED.replace("GUARD", guard).replace("EXIT", "rated").replace(
        "requires: [ { name: score, from: agent } ]",
        "requires: [ { name: score, from: agent }, { name: notes, from: agent } ]")
    notes = [f"n{i}" for i in range(200)]           # 200 ** 3 steps: past the budget
    result = Machine.from_text(text).run_sync(
        "x", summoner=Table({"rater": [{"score": 4, "notes": notes}]}))
    assert result.stop_reason == "guard_error"
    assert f"budget of {MAX_EVALUATION_STEPS:,}" in (result.detail or "")
    assert "MAX_EVALUATION_STEPS" in (result.detail or "")


def test_a_run_stopped_on_a_guard_error_resumes_with_the_fixed_file():
    store = MemoryStore()
    first = Table({"rater": [{"score": 4}]})
    stopped = machine(BROKEN).run_sync("x", summoner=first, store=store, run_id="g1")
    assert stopped.stop_reason == "guard_error"
    assert "fix the machine file, then resume" in (stopped.detail or "")
    assert store.get_step("g1", "end") is None          # not ended: it can go on

    # the same file stops at the same guard again, asking nobody
    again = machine(BROKEN).resume_sync("g1", store=store, summoner=Table({}))
    assert again.stop_reason == "guard_error"

    nobody = Table({})
    fixed = machine(FIXED).resume_sync("g1", store=store, summoner=nobody)
    assert fixed.completed and fixed.state == "high"
    assert fixed.context == {"score": 4.0, "notes": [], "verdict": "rated"}
    assert nobody.seen == []                             # the score was replayed
    assert [t.replayed for t in fixed.trace] == [True]

    # the journal now holds the fixed file's digest: the broken one is another version
    with pytest.raises(ConfigurationError, match="another version of machine"):
        machine(BROKEN).resume_sync("g1", store=store, summoner=Table({}))
    assert machine(FIXED).resume_sync("g1", store=store, summoner=Table({})).completed


def test_a_run_that_did_not_stop_on_a_guard_error_still_needs_the_same_file():
    store = MemoryStore()
    done = machine(FIXED).run_sync("x", summoner=Table({"rater": [{"score": 1}]}),
                                   store=store, run_id="g2")
    assert done.state == "low"
    with pytest.raises(ConfigurationError, match="another version of machine"):
        machine("context.score >= 4.0").resume_sync("g2", store=store, summoner=Table({}))


def test_a_fix_that_drops_the_parked_state_is_refused():
    store = MemoryStore()
    machine(BROKEN).run_sync("x", summoner=Table({"rater": [{"score": 4}]}), store=store,
                             run_id="g3")
    renamed = SCORED.replace("GUARD", FIXED).replace("EXIT", "rated").replace(
        "initialState: rate", "initialState: grade").replace("    rate:", "    grade:") \
        .replace("canTransition: [rate]", "canTransition: [grade]")
    with pytest.raises(ConfigurationError, match="state 'rate'"):
        Machine.from_text(renamed).resume_sync("g3", store=store, summoner=Table({}))
