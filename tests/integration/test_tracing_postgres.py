"""Traces across processes on PostgreSQL (issue 13 item 3): a team's delegation runs in
a ``foreperson worker`` process; its task span there is the child of the supervisor
turn's ``delegate`` tool call span here, in the same trace, because the task record
carries the trace context."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from foreperson import Agent, Team
from foreperson.models import ToolCall, ToolReturn
from foreperson.runtime import PostgresRuntime
from foreperson.testing import FunctionModel, ScriptedModel

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.postgres


def test_a_remote_delegation_joins_the_supervisor_turns_trace(pg_dsn, pg_schema, tmp_path,
                                                             spans):
    trace_file = tmp_path / "worker-spans.jsonl"
    env = {**os.environ, "FP_TRACE_FILE": str(trace_file),
           "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    with open(tmp_path / "worker.stderr", "wb") as err:
        worker = subprocess.Popen(
            [sys.executable, "-m", "foreperson.cli.main", "worker", "traced_workers:app",
             "--dsn", pg_dsn, "--schema", pg_schema, "--grace", "2"],
            stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=tmp_path)
    runtime = PostgresRuntime(pg_dsn, schema=pg_schema, remote_workers={"researcher"})
    try:
        lead = FunctionModel(lambda messages, params: (
            ToolCall("delegate", {"worker": "researcher", "instructions": "find sources"})
            if not isinstance(messages[-1], ToolReturn) else f"lead: {messages[-1].content}"))
        here = Agent("Find sources.", model=ScriptedModel([]), name="researcher")  # never run
        team = Team.supervisor(workers={"researcher": here}, instructions="Lead.", model=lead,
                               name="lead", worker_timeout_s=60)
        result = team.run_sync("write", runtime=runtime, run_id="traced-1", user_id="ada")
        assert result.text == "lead: 3 sources" and here.model.calls == []
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(timeout=5)
        runtime.close()
    local = {s.name: s for s in spans.get_finished_spans()}
    delegate = local["execute_tool delegate"]
    turn = next(s for s in spans.get_finished_spans()
                if s.context.span_id == delegate.parent.span_id)
    assert turn.name == "turn 1"
    remote = [json.loads(line) for line in trace_file.read_text().splitlines()]
    (task,) = [s for s in remote if s["name"] == "task researcher"]
    assert task["trace_id"] == f"{delegate.context.trace_id:032x}"      # one trace
    assert task["parent_id"] == f"{delegate.context.span_id:016x}"      # across processes
    assert task["attributes"]["foreperson.task.outcome"] == "completed"
    (run,) = [s for s in remote if s["name"] == "invoke_agent researcher"]
    assert run["parent_id"] == task["span_id"] and run["trace_id"] == task["trace_id"]
