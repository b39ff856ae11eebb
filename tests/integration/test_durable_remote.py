"""A team's worker under ``foreperson worker`` in other processes (issue 11 item 6), on
PostgreSQL: the supervisor's run records the delegation as a task in the shared
database and awaits it; the worker process that claims it dies mid-run (SIGKILL, after
its tool call finished); another worker process reclaims the task after its lease,
replays the dead one's finished steps from the shared journal (the side effect is not
done twice) and completes it. The supervisor's run neither knows nor cares where its
worker ran.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from durable_agents import counted

from foreperson import Agent, Team
from foreperson.models import ToolCall, ToolReturn
from foreperson.runtime import PostgresRuntime
from foreperson.testing import FunctionModel, ScriptedModel
from foreperson.work import Status

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.postgres


def start_worker(dsn: str, schema: str, tmp: Path, n: int) -> subprocess.Popen:
    env = {**os.environ, "FP_DURABLE_DIR": str(tmp),
           "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    with open(tmp / f"worker{n}.stderr", "wb") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "foreperson.cli.main", "worker", "durable_workers:app",
             "--dsn", dsn, "--schema", schema, "--stale-after", "1.5", "--grace", "2"],
            stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=tmp)


def test_a_worker_on_another_process_dies_mid_run_and_another_finishes_it(
        pg_dsn, pg_schema, tmp_path):
    runtime = PostgresRuntime(pg_dsn, schema=pg_schema, remote_workers={"researcher"})
    workers = [start_worker(pg_dsn, pg_schema, tmp_path, n) for n in range(2)]
    try:
        lead = FunctionModel(lambda messages, params: (
            ToolCall("delegate", {"worker": "researcher", "instructions": "find sources"})
            if not isinstance(messages[-1], ToolReturn) else f"lead: {messages[-1].content}"))
        here = Agent("Find sources.", model=ScriptedModel([]), name="researcher")  # never run
        team = Team.supervisor(workers={"researcher": here}, instructions="Lead.", model=lead,
                               name="lead", max_attempts=2, stale_after=1.5,
                               worker_timeout_s=60)
        result = team.run_sync("write about agents", runtime=runtime, run_id="remote-1",
                               user_id="ada")
        died = int((tmp_path / "died").read_text())
        assert result.text.startswith("lead: 3 sources, from process ")
        survivor = int(result.text.rsplit(" ", 1)[1])
        assert survivor != died and survivor in {w.pid for w in workers}
        assert here.model.calls == []                      # it ran elsewhere
        assert counted(tmp_path / "count.txt") == ["researcher"]   # once, across the crash
        (task,) = runtime.store.list_tasks(run_id="remote-1")
        assert (task.kind, task.status, task.attempts) == ("researcher", Status.COMPLETED, 2)
        assert "stopped heartbeating" in task.errors[0]["error"]   # the dead attempt
        (delegation,) = result.delegations
        assert delegation.completed and delegation.usage.model_calls == 2
        assert result.usage.model_calls == 4        # the lead's 2 + the researcher's 2
        keys = [s.key for s in runtime.steps("remote-1", user_id="ada")]
        assert ("agent:lead/turn:1/tool:1/delegation:researcher/agent:researcher/turn:1/tool:1"
                in keys)                            # journaled by the worker processes
    finally:
        for proc in workers:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in workers:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        runtime.close()
