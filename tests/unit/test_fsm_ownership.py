"""A journaled state-machine run has one owner at a time, like a durable agent run, and a
summons that went DEAD is asked again when the run is resumed."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from foreperson.agents import Agent
from foreperson.errors import GiveUp, RunBusy, RunError
from foreperson.fsm import UPDATE_CONTEXT, Machine, SummonResult, Summons
from foreperson.models import ToolCall, ToolReturn
from foreperson.testing import FunctionModel
from foreperson.work import SqliteStore, Status

ROOT = Path(__file__).resolve().parents[2]
ROUTER = ROOT / "examples" / "support_router.yaml"

ANSWERS = {
    "supervisor": [{"request": "card charge", "route": "technical"}, {"route": "synthesize"},
                   {"answer": "reversed"}],
    "tech_agent": [{"finding": "leaked token"}],
}


class Table:
    """Answers every summons from a table; ``gate`` (when set) holds the tech agent's
    summons until it is set; ``resumed``: the supervisor's first answer is journaled."""

    def __init__(self, gate: anyio.Event | None = None, *, resumed: bool = False) -> None:
        self.answers = {k: list(v) for k, v in ANSWERS.items()}
        if resumed:
            del self.answers["supervisor"][0]
        self.gate = gate
        self.waiting = anyio.Event()

    async def summon(self, summons: Summons) -> SummonResult:
        if summons.agent == "tech_agent" and self.gate is not None:
            self.waiting.set()
            await self.gate.wait()
        return SummonResult(tuple(self.answers[summons.agent].pop(0).items()))


class StopsAtTech(Table):
    """The run stops at the tech agent's summons: its summoner raises (the process went
    away, as far as the run can tell)."""

    async def summon(self, summons: Summons) -> SummonResult:
        if summons.agent == "tech_agent":
            raise ConnectionError("the process went away")
        return await super().summon(summons)


def dead_pid() -> int:
    """The pid of a process of this machine that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_run_is_recorded_with_how_it_ended(tmp_path):
    store = SqliteStore(tmp_path / "fsm.db")
    machine = Machine.from_file(ROUTER)
    result = machine.run_sync("r", summoner=Table(), store=store, run_id="rec")
    record = store.get_run("rec")
    assert record is not None and record.agent == f"fsm:{machine.spec.name}"
    assert (record.status, record.stop_reason, record.owner) == ("completed", "completed", None)
    assert record.result["state"] == result.state
    assert record.result["transitions"] == len(result.trace)
    store.close()


@pytest.mark.anyio
async def test_a_second_driver_of_a_live_run_gets_run_busy(tmp_path):
    store = SqliteStore(tmp_path / "fsm.db")
    machine = Machine.from_file(ROUTER)
    gate = anyio.Event()
    first = Table(gate)
    results: list[Any] = []

    async def drive() -> None:
        results.append(await machine.run("r", summoner=first, store=store, run_id="busy"))

    async with anyio.create_task_group() as group:
        group.start_soon(drive)
        with anyio.fail_after(10):
            await first.waiting.wait()      # the first run is parked on a summons
        with pytest.raises(RunBusy) as busy:
            await machine.resume("busy", store=store, summoner=Table(resumed=True))
        assert busy.value.run_id == "busy"
        gate.set()
    assert results[0].completed
    store.close()


def test_a_run_whose_owner_died_on_this_machine_is_taken_over_at_once(tmp_path):
    store = SqliteStore(tmp_path / "fsm.db")
    machine = Machine.from_file(ROUTER)

    with pytest.raises(ConnectionError):
        machine.run_sync("r", summoner=StopsAtTech(), store=store, run_id="dead")
    assert store.get_run("dead").status == "failed"
    # as if a process of this machine had owned it and been killed with its lease fresh
    gone = f"{socket.gethostname()}:{dead_pid()}:0"
    assert store.claim_run("dead", gone, 3600.0) is not None
    result = machine.resume_sync("dead", store=store, summoner=Table(resumed=True))
    assert result.completed
    record = store.get_run("dead")
    assert (record.status, record.owner) == ("completed", None)
    store.close()


def test_a_run_owned_on_another_machine_waits_for_its_lease(tmp_path):
    store = SqliteStore(tmp_path / "fsm.db")
    machine = Machine.from_file(ROUTER)

    with pytest.raises(ConnectionError):
        machine.run_sync("r", summoner=StopsAtTech(), store=store, run_id="far")
    assert store.claim_run("far", "elsewhere.example:41:abc", 3600.0) is not None
    with pytest.raises(RunBusy) as busy:
        machine.resume_sync("far", store=store, summoner=Table(resumed=True))
    assert busy.value.owner == "elsewhere.example:41:abc"
    assert busy.value.expires_in_s is not None and busy.value.expires_in_s > 3000
    store.close()


def test_resuming_after_a_dead_summons_asks_it_again(tmp_path):
    store = SqliteStore(tmp_path / "fsm.db")
    machine = Machine.from_file(ROUTER)
    broken = {"on": True}
    supervisor_turns = iter([
        {"request": "card charge", "route": "technical"}, {"route": "synthesize"},
        {"answer": "reversed"}])

    def writes(values: dict[str, Any]) -> list[ToolCall]:
        return [ToolCall(UPDATE_CONTEXT, {"field": k, "value": v}) for k, v in values.items()]

    def lead(messages, params):
        if isinstance(messages[-1], ToolReturn):
            return "done"
        return writes(next(supervisor_turns))

    def tech(messages, params):
        if broken["on"]:
            raise GiveUp("the tech agent's credentials were revoked")
        if isinstance(messages[-1], ToolReturn):
            return "reported"
        return writes({"finding": "leaked token"})

    agents = {"supervisor": Agent("Lead.", model=FunctionModel(lead), name="supervisor"),
              "tech_agent": Agent("Tech.", model=FunctionModel(tech), name="tech_agent"),
              "billing_agent": Agent("B.", model=FunctionModel(tech), name="billing_agent"),
              "security_agent": Agent("S.", model=FunctionModel(tech), name="security_agent")}
    with pytest.raises(RunError, match="credentials were revoked.*resume the run"):
        machine.run_sync("r", agents=agents, store=store, run_id="revive")
    (summons,) = [t for t in store.list_tasks(run_id="revive") if t.kind.endswith("tech_agent")]
    assert summons.status is Status.DEAD and store.get_run("revive").status == "failed"

    broken["on"] = False                                   # the cause is fixed
    result = machine.resume_sync("revive", store=store, agents=agents)
    assert result.completed and result.context["answer"] == "reversed"
    again = store.get(summons.id)
    assert again.status is Status.COMPLETED and again.attempts == 1   # fresh attempts
    assert store.get_run("revive").status == "completed"
    store.close()
