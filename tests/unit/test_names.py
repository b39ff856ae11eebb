"""One name per concept: the lease is ``stale_after`` at every public edge, and the old
names still work for a while, each with a warning that says the new one."""

from __future__ import annotations

import pytest

from foreperson.agents import Agent
from foreperson.teams import Parallel, Pipeline, Router, Team, TeamSupervisor
from foreperson.testing import ScriptedModel
from foreperson.work import Supervisor
from foreperson.work.leases import DEFAULT_LEASE_S


def worker(name: str) -> Agent:
    return Agent(f"You are {name}.", model=ScriptedModel([], name=name), name=name)


def shapes(**options: float) -> list:
    return [TeamSupervisor({"a": worker("a")}, **options),
            Router({"a": worker("a")}, **options),
            Pipeline([worker("a")], **options),
            Parallel([worker("a"), worker("b")], **options)]


def test_every_lease_defaults_to_the_work_layers():
    assert Supervisor().stale_after == DEFAULT_LEASE_S
    assert all(shape.stale_after == DEFAULT_LEASE_S for shape in shapes())


def test_team_shapes_take_stale_after_and_the_old_lease_s_with_a_warning():
    assert [shape.stale_after for shape in shapes(stale_after=12.0)] == [12.0] * 4
    with pytest.warns(DeprecationWarning, match=r"Router\(lease_s=\) is now stale_after="):
        router = Router({"a": worker("a")}, lease_s=7.0)
    assert router.stale_after == 7.0
    with pytest.warns(DeprecationWarning, match="is now stale_after="):
        team = Team.router(workers={"a": worker("a")}, model=ScriptedModel([]), lease_s=3.0)
    assert team.architecture.stale_after == 3.0


def test_runtimes_and_worker_processes_take_stale_after_and_warn_on_the_old_names():
    from foreperson.runtime import InMemoryRuntime as MemoryRuntime
    from foreperson.work import MemoryStore, Worker
    from foreperson.work.process import process_supervisor

    assert MemoryRuntime().stale_after == DEFAULT_LEASE_S
    assert MemoryRuntime(stale_after=5.0).stale_after == 5.0
    with pytest.warns(DeprecationWarning, match=r"InMemoryRuntime\(lease_s=\) is now"):
        assert MemoryRuntime(lease_s=6.0).stale_after == 6.0
    worker = Worker("w", {"k": lambda task: None})
    assert process_supervisor(MemoryStore(), worker, stale_after=7.0).stale_after == 7.0
    with pytest.warns(DeprecationWarning, match="stale_after_s=\\) is now stale_after="):
        supervisor = process_supervisor(MemoryStore(), worker, stale_after_s=8.0)
    assert supervisor.stale_after == 8.0
