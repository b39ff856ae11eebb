"""Durable runs across real crashes (issue 11 item 8), on a SQLite file and on
PostgreSQL: a run in a subprocess is killed with SIGKILL at a chosen step (or parks on an
approval and exits), then resumed in this process (or through ``foreperson runs``) from
the journal the dead process left.

What each test proves:

* parallel delegations, one finished and one running at the kill: the finished worker's
  model is not called again, the running one's unfinished call is, and the side-effect
  tool ran once per completed call; the dead process's task is taken over at once;
* killed between ``spawn_worker`` and the delegation to the spawned worker: the worker
  is rebuilt from the journal under the same role and id and answers (resumed by
  ``foreperson runs resume``);
* a team inside a team killed after the inner worker finished: the inner worker is not
  run again;
* a run parked on an approval, its process gone, approved by ``foreperson runs approve``
  in another process: the resumed run finishes and re-executes nothing;
* another user cannot resume, approve or read the parked run, an anonymous caller
  neither, and an anonymous run cannot reach a worker pinned to a user;
* a journal record in an unknown format version, and a replay with a changed prompt,
  each give their named error (naming the step).
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from durable_agents import (
    clerk,
    cli_store_args,
    counted,
    model_calls,
    nested_teams,
    open_runtime,
    parallel_team,
    routed_team,
    spawn_team,
    worker,
)

from foreperson import Agent, Team
from foreperson.errors import AccessDenied, RunNotFound
from foreperson.journal import JournalDivergence, UnknownStepVersion
from foreperson.models import ToolCall
from foreperson.teams import WorkerSpawnedEvent
from foreperson.testing import ScriptedModel
from foreperson.work import Status

HERE = Path(__file__).resolve().parent
TIMEOUT_S = 60


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_spec(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:{tmp_path / 'runs.db'}"
    dsn = request.getfixturevalue("pg_dsn")
    schema = request.getfixturevalue("pg_schema")
    return f"postgres:{dsn}|{schema}"


def run_child(scenario: str, spec: str, run_id: str, workdir: Path, user: str | None = None,
              *, until: str | None) -> str:
    """Run a scenario in a subprocess; with ``until``, SIGKILL it once it prints a line
    starting so, else wait for it to exit. Returns the line it printed."""
    args = [sys.executable, str(HERE / "durable_process.py"), scenario, spec, run_id,
            str(workdir)] + ([user] if user else [])
    child = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, cwd=HERE)
    try:
        line = child.stdout.readline().strip()        # blocks until the child is there
        if until is not None:
            assert line.startswith(until), f"the child said {line!r}"
            child.send_signal(signal.SIGKILL)
            assert child.wait(timeout=TIMEOUT_S) == -signal.SIGKILL
        else:
            assert child.wait(timeout=TIMEOUT_S) == 0, line
        return line
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=TIMEOUT_S)
        child.stdout.close()


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "foreperson.cli.main", *args],
                          capture_output=True, text=True, timeout=TIMEOUT_S, cwd=HERE)


def test_parallel_delegations_killed_mid_turn_resume_only_the_running_one(store_spec, tmp_path):
    run_child("parallel", store_spec, "par-1", tmp_path, until="ready")
    assert sorted(counted(tmp_path / "count.txt")) == ["fast", "slow"]
    runtime = open_runtime(store_spec)
    try:
        record = runtime.get_run("par-1")
        assert record.status == "running" and record.owner       # the dead process's
        tree = runtime.show("par-1")
        assert "delegation to fast: completed -> fast done" in tree
        assert "delegation to slow" not in tree and "tool 2 delegate(slow)" in tree
        held = [t for t in runtime.store.list_tasks(run_id="par-1") if t.kind == "slow"]
        assert [t.status for t in held] == [Status.RUNNING]

        team = parallel_team(tmp_path)
        result = team.resume_sync("par-1", runtime=runtime)
        assert result.text == "both done"
        assert model_calls(worker(team, "fast")) == 0      # finished: not called again
        assert model_calls(worker(team, "slow")) == 1      # only its unfinished call
        assert model_calls(team) == 1                      # the lead's turn 1 replayed
        assert sorted(counted(tmp_path / "count.txt")) == ["fast", "slow"]   # once each
        tasks = runtime.store.list_tasks(run_id="par-1")
        assert len(tasks) == 2 and {t.status for t in tasks} == {Status.COMPLETED}
        slow = next(d for d in result.delegations if d.worker == "slow")
        assert slow.task_id == held[0].id                  # the dead process's task
        assert runtime.get_run("par-1").status == "completed"
    finally:
        runtime.close()


def test_a_rule_routed_team_killed_mid_run_resumes_only_on_the_same_decisions(
        store_spec, tmp_path):
    run_child("router", store_spec, "route-1", tmp_path, until="ready")
    assert sorted(counted(tmp_path / "count.txt")) == ["fast", "slow"]
    runtime = open_runtime(store_spec)
    try:
        changed = routed_team(tmp_path, order=("fast", "audit"))    # the rule was edited
        with pytest.raises(JournalDivergence) as diverged:
            changed.resume_sync("route-1", runtime=runtime)
        assert diverged.value.key.endswith("/route:2")
        assert 'next: recorded "slow", now "audit"' in str(diverged.value)
        assert sorted(counted(tmp_path / "count.txt")) == ["fast", "slow"]   # nothing ran

        team = routed_team(tmp_path)                                  # the rule put back
        result = team.resume_sync("route-1", runtime=runtime)
        assert result.completed and result.text == "slow done"
        assert model_calls(worker(team, "fast")) == 0       # its delegation replayed
        assert model_calls(worker(team, "slow")) == 1       # only its unfinished call
        assert sorted(counted(tmp_path / "count.txt")) == ["fast", "slow"]   # once each
    finally:
        runtime.close()


def test_a_spawned_worker_is_rebuilt_and_answers_after_a_kill(store_spec, tmp_path):
    run_child("spawn", store_spec, "spawn-1", tmp_path, until="spawned")
    runtime = open_runtime(store_spec)
    try:
        (spawn,) = [s for s in runtime.steps("spawn-1") if s.kind == "spawn"]
    finally:
        runtime.close()
    resumed = cli("runs", "resume", "spawn-1", "--agent",
                  f"{HERE / 'durable_agents.py'}:spawn_team", *cli_store_args(store_spec))
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.splitlines()[:2] == ["run spawn-1: completed",
                                               "done: rain taps the roof"]
    runtime = open_runtime(store_spec)
    try:
        steps = runtime.steps("spawn-1")
        assert [s.result for s in steps if s.kind == "spawn"] == [spawn.result]   # same id
        (poem,) = [s for s in steps if s.kind == "delegation"]
        assert poem.result["worker"] == "poet" and poem.result["output"] == "rain taps the roof"
        team = spawn_team()
        events = [e for e in _stream(team, runtime, "spawn-1")]
        (spawned,) = [e for e in events if isinstance(e, WorkerSpawnedEvent)]
        assert spawned.replayed and spawned.worker_id == spawn.result["worker_id"]
        assert model_calls(team) == 0                      # everything replayed now
    finally:
        runtime.close()


def _stream(team: Team, runtime, run_id: str) -> list:
    import anyio

    async def collect() -> list:
        return [e async for e in team.stream("write a poem", runtime=runtime, run_id=run_id)]

    return anyio.run(collect)


def test_a_nested_team_killed_after_its_inner_worker_finished_does_not_rerun_it(
        store_spec, tmp_path):
    run_child("nested", store_spec, "nest-1", tmp_path, until="inner-done")
    assert counted(tmp_path / "count.txt") == ["analyst"]
    runtime = open_runtime(store_spec)
    try:
        office = nested_teams(tmp_path)
        desk = worker(office, "desk")
        result = office.resume_sync("nest-1", runtime=runtime)
        assert result.text == "office: desk: analyst done"
        assert model_calls(worker(desk, "analyst")) == 0   # the inner worker: not re-run
        assert model_calls(desk) == 1 and model_calls(office) == 1
        assert counted(tmp_path / "count.txt") == ["analyst"]
        tasks = runtime.store.list_tasks(run_id="nest-1")
        assert sorted(t.kind for t in tasks) == ["analyst", "desk"]
        assert {t.status for t in tasks} == {Status.COMPLETED}
        analyst = next(t for t in tasks if t.kind == "analyst")
        assert analyst.parent_id == next(t.id for t in tasks if t.kind == "desk")
    finally:
        runtime.close()


def test_an_approval_given_from_another_process_finishes_the_parked_run(store_spec, tmp_path):
    line = run_child("approval", store_spec, "appr-1", tmp_path, "ada", until=None)
    call_id = line.removeprefix("parked ")
    assert line.startswith("parked ") and counted(tmp_path / "count.txt") == []
    shown = cli("runs", "show", "appr-1", "--user", "ada", *cli_store_args(store_spec))
    assert shown.returncode == 0, shown.stderr
    assert f"waiting for approval: call {call_id} count" in shown.stdout
    approved = cli("runs", "approve", "appr-1", call_id, "--user", "ada",
                   *cli_store_args(store_spec))
    assert approved.returncode == 0, approved.stderr
    assert "approve" in approved.stdout
    runtime = open_runtime(store_spec)
    try:
        (waiting,) = runtime.list_runs(user_id="ada", status="waiting")
        assert (waiting.run_id, waiting.stop_reason) == ("appr-1", "awaiting_approval")
        agent = clerk(tmp_path)
        result = agent.resume_sync("appr-1", runtime=runtime, user_id="ada")
        assert result.output == "done: counted refund-A-7"
        assert model_calls(agent) == 1                     # turn 1 replayed
        assert counted(tmp_path / "count.txt") == ["refund-A-7"]   # the call ran once
        assert runtime.get_run("appr-1", user_id="ada").status == "completed"
    finally:
        runtime.close()


def test_another_user_or_an_anonymous_caller_cannot_reach_a_parked_run(store_spec, tmp_path):
    line = run_child("approval", store_spec, "ten-1", tmp_path, "ada", until=None)
    call_id = line.removeprefix("parked ")
    denied = cli("runs", "approve", "ten-1", call_id, "--user", "bob",
                 *cli_store_args(store_spec))
    assert denied.returncode == 2                 # as for a run that does not exist
    assert "no run 'ten-1' for user 'bob'" in denied.stderr and "ada" not in denied.stderr
    runtime = open_runtime(store_spec)
    try:
        for user_id in ("bob", None):
            with pytest.raises(RunNotFound, match="there is no run ten-1 for"):
                clerk(tmp_path).resume_sync("ten-1", runtime=runtime, user_id=user_id)
            with pytest.raises(RunNotFound):
                runtime.show("ten-1", user_id=user_id)
            with pytest.raises(RunNotFound):
                runtime.approve("ten-1", call_id, user_id=user_id)
        assert [p.call_id for p in runtime.pending("ten-1", user_id="ada")] == [call_id]
        assert counted(tmp_path / "count.txt") == []       # nothing ran
        vault = Agent("Read the vault.", model=ScriptedModel(["secret"]), name="vault",
                      pinned_user="ada")
        team = Team.supervisor(workers={"vault": vault}, instructions="Lead.", name="lead",
                               model=ScriptedModel([ToolCall("delegate", {
                                   "worker": "vault", "instructions": "read it"})]))
        with pytest.raises(AccessDenied, match="agent 'vault' belongs to user 'ada'"):
            team.run_sync("go", runtime=runtime, run_id="anon-1")
        assert vault.model.calls == []
        assert runtime.get_run("anon-1").status == "failed"
    finally:
        runtime.close()


def _tamper_version(spec: str, run_id: str, key: str) -> None:
    kind, _, where = spec.partition(":")
    if kind == "sqlite":
        with sqlite3.connect(where) as db:
            db.execute("UPDATE steps SET version = 99 WHERE run_id = ? AND key = ?",
                       (run_id, key))
        return
    import psycopg
    from psycopg import sql

    dsn, _, schema = where.partition("|")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("UPDATE {}.steps SET version = 99 WHERE run_id = %s AND key = %s")
                     .format(sql.Identifier(schema)), (run_id, key))


def test_an_unknown_journal_version_and_a_changed_prompt_give_their_named_errors(
        store_spec, tmp_path):
    run_child("approval", store_spec, "err-1", tmp_path, "ada", until=None)
    runtime = open_runtime(store_spec)
    try:
        with pytest.raises(JournalDivergence) as changed:
            clerk(tmp_path).run_sync("refund B-9", runtime=runtime, run_id="err-1",
                                     user_id="ada")
        assert changed.value.key == "agent:clerk/turn:1/model"
        assert "the messages added since the previous model call differ" in str(changed.value)
        _tamper_version(store_spec, "err-1", "agent:clerk/turn:1/model")
        with pytest.raises(UnknownStepVersion) as unknown:
            clerk(tmp_path).resume_sync("err-1", runtime=runtime, user_id="ada")
        assert unknown.value.version == 99 and unknown.value.key == "agent:clerk/turn:1/model"
        assert "journal format version 99" in str(unknown.value)
        assert counted(tmp_path / "count.txt") == []       # nothing was re-executed
    finally:
        runtime.close()
