"""``foreperson mcp serve`` (issue 22 item 3), driven by the MCP SDK's own client against
a real server process: stdio (the client starts ``foreperson mcp serve``) and
streamable HTTP (a server on 127.0.0.1 with a bearer token).

The served team is ``tests/fixtures/mcp_team.py``: a rule-routed team whose worker calls
one tool per request (lookup; refund, which waits for an approval; wait N seconds)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_team.py"
CLI = [sys.executable, "-m", "foreperson.cli.main"]


def stdio(tmp_path: Path, *options: str) -> StdioServerParameters:
    """``foreperson mcp serve`` of the fixture team, as the client starts it."""
    env = {**os.environ, "MCP_TEAM_WOKE": str(tmp_path / "woke.txt")}
    return StdioServerParameters(command=sys.executable,
                                 args=["-m", "foreperson.cli.main", "mcp", "serve",
                                       f"{FIXTURE}:team", *options],
                                 env=env, cwd=str(tmp_path))


def run(body: Any) -> Any:
    return anyio.run(body)


def test_a_served_team_offers_its_entry_points_and_answers_with_progress_and_its_run_id(
        tmp_path):
    db = tmp_path / "runs.db"
    progress: list[str] = []

    async def body() -> tuple[Any, Any]:
        async with Client(stdio(tmp_path, "--db", str(db))) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}

            async def noted(done: float, total: float | None, message: str | None) -> None:
                progress.append(message or "")

            answer = await client.call_tool("support", {"prompt": "What is on INV-7?"},
                                            progress_callback=noted)
            return tools, answer

    tools, answer = run(body)
    assert set(tools) == {"support", "support_resume"}
    assert tools["support"].input_schema["required"] == ["prompt"]
    assert tools["support"].output_schema["properties"]["run_id"]["type"] == "string"
    assert not answer.is_error
    assert answer.structured_content["stop_reason"] == "completed"
    assert "42.00 EUR" in answer.structured_content["text"]
    run_id = answer.structured_content["run_id"]
    assert run_id in answer.content[0].text
    assert "support -> billing: What is on INV-7?" in progress
    assert "billing: lookup answered" in progress
    shown = subprocess.run([*CLI, "runs", "show", run_id, "--db", str(db)],
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "lookup" in shown.stdout                      # the run is durable, in the store


def test_a_parked_run_answers_with_its_pending_call_and_resumes_after_approval_elsewhere(
        tmp_path):
    db = tmp_path / "runs.db"

    async def park() -> Any:
        async with Client(stdio(tmp_path, "--db", str(db))) as client:
            return await client.call_tool("support", {"prompt": "Please refund INV-7"})

    parked = run(park).structured_content
    assert parked["stop_reason"] == "awaiting_approval"
    [pending] = parked["pending"]
    assert (pending["tool"], pending["arguments"], pending["agent"]) == (
        "refund", {"invoice": "INV-7"}, "billing")

    approved = subprocess.run([*CLI, "runs", "approve", parked["run_id"], pending["call_id"],
                               "--db", str(db)], capture_output=True, text=True, timeout=60)
    assert approved.returncode == 0, approved.stderr

    async def resume() -> Any:                  # a new server process: the journal holds it
        async with Client(stdio(tmp_path, "--db", str(db))) as client:
            return await client.call_tool("support_resume", {"run_id": parked["run_id"]})

    done = run(resume).structured_content
    assert done["stop_reason"] == "completed"
    assert done["text"] == "Done: refunded INV-7"


def test_a_cancelled_call_stops_the_run_and_the_server_goes_on(tmp_path):
    notes = tmp_path / "woke.txt"

    async def body() -> Any:
        async with Client(stdio(tmp_path)) as client:
            asked = anyio.Event()

            async def noted(done: float, total: float | None, message: str | None) -> None:
                if message and "asks for wait" in message:
                    asked.set()

            async with anyio.create_task_group() as group:
                async def call() -> None:
                    await client.call_tool("support", {"prompt": "wait 30 then answer"},
                                           progress_callback=noted)
                group.start_soon(call)
                with anyio.fail_after(30):
                    await asked.wait()
                    while "started" not in (notes.read_text() if notes.exists() else ""):
                        await anyio.sleep(0.02)
                group.cancel_scope.cancel()        # the client abandons the call
            with anyio.fail_after(20):
                while "cancelled" not in notes.read_text():
                    await anyio.sleep(0.02)
            return await client.call_tool("support", {"prompt": "What is on INV-7?"})

    after = run(body)
    assert notes.read_text().split() == ["started", "cancelled"]   # it never woke
    assert after.structured_content["stop_reason"] == "completed"


@pytest.fixture
def http_server(tmp_path):
    """``foreperson mcp serve --http`` on a free port with a token; yields (url, token)."""
    token = "t0ken-for-the-mcp-test-0123456789"
    env = {**os.environ, "FOREPERSON_MCP_TOKEN": token}
    proc = subprocess.Popen([*CLI, "mcp", "serve", f"{FIXTURE}:team", "--http", "--port", "0"],
                            env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        line = ""
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if "serving http://" in line or not line:
                break
        found = re.search(r"serving (http://\S+/mcp)", line)
        assert found, f"no serving line: {line!r}"
        yield found.group(1), token
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        proc.stderr.close()


def test_over_http_the_token_and_the_host_are_checked_and_the_sdk_client_is_answered(
        http_server):
    url, token = http_server
    hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    assert httpx.post(url, json=hello, timeout=10).status_code == 401
    wrong = httpx.post(url, json=hello, timeout=10, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    rebound = httpx.post(url, json=hello, timeout=10, headers={
        "Authorization": f"Bearer {token}", "Host": "attacker.example"})
    assert rebound.status_code == 421

    @asynccontextmanager
    async def transport() -> AsyncIterator[Any]:
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(headers=headers, timeout=30) as http, \
                streamable_http_client(url, http_client=http) as streams:
            yield streams

    async def body() -> Any:
        async with Client(transport()) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            return names, await client.call_tool("support", {"prompt": "What is on INV-7?"})

    names, answer = run(body)
    assert names == {"support"}                          # no store: no resume tool
    assert answer.structured_content["stop_reason"] == "completed"
    assert "42.00 EUR" in answer.structured_content["text"]


@pytest.mark.parametrize(("options", "message"), [
    (["--token", "x" * 20], "--token and --allowed-host are for --http"),
    (["--work-kind", "echo"], "--work-kind needs the store"),
    (["--http", "--token", "short"], "--token is under 16 characters"),
])
def test_options_that_do_not_fit_are_refused_with_what_to_do(tmp_path, options, message):
    done = subprocess.run([*CLI, "mcp", "serve", f"{FIXTURE}:team", *options],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_a_target_that_is_not_an_agent_or_a_machine_is_named(tmp_path):
    done = subprocess.run([*CLI, "mcp", "serve", f"{FIXTURE}:lookup"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2
    assert "lookup is Tool, not an Agent or a Machine" in done.stderr


def test_the_serving_example_runs_and_shows_the_parked_and_the_finished_run():
    example = FIXTURE.parents[2] / "examples" / "serve_team_mcp.py"
    done = subprocess.run([sys.executable, str(example)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "== tools: ['support', 'support_resume']" in out
    assert "progress: billing: model call 2 asks for refund" in out
    assert "== awaiting_approval" in out
    assert "== completed: You were charged twice; refunded 42.00 EUR on INV-7." in out
