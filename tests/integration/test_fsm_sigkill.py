"""A machine run killed with SIGKILL after two hops resumes at dispatch, notes intact,
with no agent asked twice (issue 10 item 6), on a SQLite journal.

Runs once this foreperson's SqliteStore implements the step journal
(:class:`foreperson.journal.Journal`); skipped before that.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from foreperson.fsm import Machine, SummonResult, Summons
from foreperson.journal import Journal
from foreperson.work import SqliteStore

HERE = Path(__file__).resolve().parent
ROUTER = HERE.parents[1] / "examples" / "support_router.yaml"


def journaled_sqlite(path: Path) -> Any:
    store = SqliteStore(path)
    if not isinstance(store, Journal):
        store.close()
        pytest.skip("this SqliteStore has no step journal yet")
    return store


class Rest:
    """The rest of the walk, recording who is asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []
        self.routes = iter(["security", "synthesize"])

    async def summon(self, summons: Summons) -> SummonResult:
        self.asked.append((summons.state, summons.agent))
        if summons.agent == "security_agent":
            return SummonResult((("finding", "token revoked"),))
        if summons.state == "synthesize":
            return SummonResult((("answer", "reversed and secured"),))
        return SummonResult((("route", next(self.routes)),))


def test_a_run_killed_after_two_hops_resumes_at_dispatch(tmp_path):
    db = tmp_path / "run.db"
    journaled_sqlite(db).close()
    child = subprocess.Popen([sys.executable, str(HERE / "fsm_run_process.py"), str(db), "r1"],
                             stdout=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline()           # blocks until the child is parked
        assert line.startswith("parked dispatch summons/2/dispatch/supervisor/1"), line
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
        child.stdout.close()

    store = journaled_sqlite(db)
    try:
        keys = [s.key for s in store.list_steps("r1")]
        assert "checkpoint/2" in keys and "end" not in keys
        rest = Rest()
        result = Machine.from_file(ROUTER).resume_sync("r1", store=store, summoner=rest)
    finally:
        store.close()
    assert rest.asked[0] == ("dispatch", "supervisor")       # resumed at the parked hub
    assert ("triage", "supervisor") not in rest.asked        # nobody asked twice
    assert all(agent != "tech_agent" for _, agent in rest.asked)
    assert result.completed
    assert result.path == ["triage", "technical", "dispatch", "security", "dispatch",
                           "synthesize", "done"]
    assert result.context["notes"] == ["technical: a leaked API token",
                                       "security: token revoked"]


def rest_as_agents(asked: list[tuple[str, str]]) -> dict[str, Any]:
    """Agents that answer the rest of the walk, recording (state, agent) per summons."""
    from foreperson.agents import Agent
    from foreperson.fsm import UPDATE_CONTEXT
    from foreperson.models import ToolCall, ToolReturn, UserMessage
    from foreperson.testing import FunctionModel

    routes = iter(["security", "synthesize"])

    def model(name: str) -> FunctionModel:
        def answer(messages, params):
            if isinstance(messages[-1], ToolReturn):
                return "done"
            prompt = next(m.content for m in messages if isinstance(m, UserMessage))
            state = prompt.split('in state "', 1)[1].split('"', 1)[0]
            asked.append((state, name))
            if name == "security_agent":
                return ToolCall(UPDATE_CONTEXT, {"field": "finding", "value": "token revoked"})
            if state == "synthesize":
                return ToolCall(UPDATE_CONTEXT, {"field": "answer", "value": "secured"})
            return ToolCall(UPDATE_CONTEXT, {"field": "route", "value": next(routes)})
        return FunctionModel(answer, name=name)

    return {n: Agent(f"You are {n}.", model=model(n), name=n)
            for n in ("supervisor", "billing_agent", "tech_agent", "security_agent")}


def test_a_run_whose_summons_are_tasks_resumes_at_once_after_sigkill(tmp_path):
    """The summons in flight when the process died is a RUNNING task of a dead local
    process: the resumed run takes it back at once (not after its 30 s lease) and asks
    only the parked supervisor, every finished summons kept."""
    import time

    from foreperson.work import Status

    db = tmp_path / "run.db"
    SqliteStore(db).close()
    child = subprocess.Popen([sys.executable, str(HERE / "fsm_run_process.py"), str(db), "r2",
                              "tasks"], stdout=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline()
        assert line.startswith("parked dispatch (as a task)"), line
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
        child.stdout.close()

    store = SqliteStore(db)
    asked: list[tuple[str, str]] = []
    try:
        held = [t for t in store.list_tasks(run_id="r2") if t.status.active]
        assert [t.kind.rsplit(":", 1)[1] for t in held] == ["supervisor"]
        began = time.monotonic()
        result = Machine.from_file(ROUTER).resume_sync("r2", store=store,
                                                       agents=rest_as_agents(asked))
        assert time.monotonic() - began < 20                  # not the 30 s lease
        tasks = store.list_tasks(run_id="r2")
        assert all(t.status is Status.COMPLETED for t in tasks)
        assert [t.attempts for t in tasks if t.id == held[0].id] == [2]   # it ran again
    finally:
        store.close()
    assert asked[0] == ("dispatch", "supervisor")
    assert ("triage", "supervisor") not in asked and ("technical", "tech_agent") not in asked
    assert result.completed and result.context["notes"] == ["technical: a leaked API token",
                                                            "security: token revoked"]
