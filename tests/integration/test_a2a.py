"""A2A (issue 22 item 4), against real servers on 127.0.0.1: a remote agent written with
the a2a-sdk server API only (``tests/fixtures/a2a_sdk_server.py``) as a team's worker and
as a state machine's agent, and foreperson's own ``foreperson a2a serve`` driven by the
a2a-sdk client (card, streamed updates, cancel) and by ``a2a_agent`` (a machine's summons
answered by a served foreperson agent)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

pytest.importorskip("a2a")

from foreperson.agents import A2AUpdateEvent, Agent, a2a_agent  # noqa: E402
from foreperson.errors import RunError  # noqa: E402
from foreperson.fsm import UPDATE_CONTEXT, Machine  # noqa: E402
from foreperson.models import ToolCall  # noqa: E402
from foreperson.runtime import SqliteRuntime  # noqa: E402
from foreperson.teams import FINISH, Team  # noqa: E402
from foreperson.testing import ScriptedModel  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ROUTER = FIXTURES.parents[1] / "examples" / "support_router.yaml"
CLI = [sys.executable, "-m", "foreperson.cli.main"]
TOKEN = "a2a-test-token-0123456789abcdef"


def started(proc: subprocess.Popen, stream: Any, pattern: str) -> re.Match:
    """The first line of ``stream`` matching ``pattern`` (within 60 s)."""
    deadline = time.monotonic() + 60
    line = ""
    while time.monotonic() < deadline:
        line = stream.readline()
        found = re.search(pattern, line)
        if found or not line:
            break
    assert found, f"no line like {pattern!r}: {line!r} (exit {proc.poll()})"
    return found


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=30)
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


@pytest.fixture
def sdk_agent(tmp_path) -> Iterator[tuple[str, Path, dict[str, str]]]:
    """The a2a-sdk echo agent; yields (url, calls file, env to restart it with)."""
    calls = tmp_path / "calls.txt"
    env = {**os.environ, "A2A_ECHO_CALLS": str(calls)}
    procs: list[subprocess.Popen] = []

    def start(extra: dict[str, str]) -> str:
        proc = subprocess.Popen([sys.executable, str(FIXTURES / "a2a_sdk_server.py")],
                                env={**env, **extra}, stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        port = started(proc, proc.stdout, r"listening (\d+)").group(1)
        return f"http://127.0.0.1:{port}/"

    url = start({})
    try:
        yield url, calls, env
    finally:
        for proc in procs:
            stop(proc)


def served(tmp_path: Path, target: str, *options: str,
           env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    """``foreperson a2a serve TARGET`` on a free port: (process, url)."""
    proc = subprocess.Popen([*CLI, "a2a", "serve", target, "--port", "0", *options],
                            cwd=tmp_path, env={**os.environ, **(env or {})},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return proc, started(proc, proc.stderr, r"serving (http://\S+/) ").group(1)


def test_a_remote_agent_is_a_team_worker_and_its_updates_are_the_workers_events(sdk_agent):
    url, calls, _ = sdk_agent
    remote = a2a_agent(url, name="echo", description="Echoes the request.")
    team = Team.router(workers={"echo": remote}, name="front",
                       decide=lambda state: "echo" if not state.delegations else FINISH)

    async def body() -> tuple[list[Any], Any]:
        events, final = [], None
        async for event in team.stream("What is on INV-7?"):
            events.append(event)
            if event.kind == "final" and event.level == 0:
                final = event.result
        return events, final

    events, result = anyio.run(body)
    assert result.stop_reason == "completed"
    assert result.text == "echo: What is on INV-7?"
    updates = [e for e in events if isinstance(e, A2AUpdateEvent)]
    assert [u.text for u in updates if u.state == "working" and u.text] == ["looking",
                                                                           "halfway"]
    assert all(u.agent == "echo" and u.level == 1 for u in updates)
    assert updates[-1].state == "completed"
    finished = [e for e in events if e.kind == "delegation_finished"]
    assert [(e.worker, e.completed) for e in finished] == [("echo", True)]
    assert calls.read_text().splitlines() == ["What is on INV-7?"]


def test_a_journaled_remote_call_is_not_sent_again(sdk_agent, tmp_path):
    url, calls, _ = sdk_agent
    remote = a2a_agent(url, name="echo")
    with SqliteRuntime(str(tmp_path / "runs.db")) as runtime:
        first = remote.run_sync("hello", runtime=runtime, run_id="r-1")
        again = remote.run_sync("hello", runtime=runtime, run_id="r-1")
    assert first.text == again.text == "echo: hello"
    assert calls.read_text().splitlines() == ["hello"]           # sent once
    assert first.usage.model_calls == 0                           # no model here


def test_a_failed_slow_or_unreachable_remote_agent_is_an_error_that_names_it(sdk_agent):
    url, _, _ = sdk_agent
    with pytest.raises(RunError, match="its task ended failed: it broke"):
        a2a_agent(url, name="echo").run_sync("fail")
    with pytest.raises(RunError, match=r"did not answer within 0\.5 s"):
        a2a_agent(url, name="echo", timeout_s=0.5).run_sync("slow 5")
    closed = "http://127.0.0.1:9/"
    with pytest.raises(RunError, match="127.0.0.1:9: cannot read its agent card"):
        a2a_agent(closed, name="gone", timeout_s=5).run_sync("hello")


def write(field: str, value: Any) -> ToolCall:
    return ToolCall(UPDATE_CONTEXT, {"field": field, "value": value})


def machine_agents(billing: Agent) -> dict[str, Agent]:
    """The support router's agents: a scripted supervisor routing to billing once, and
    ``billing`` as the billing agent."""
    supervisor = ScriptedModel([
        [write("request", "a double charge"), write("route", "billing")], "routed",
        write("route", "synthesize"), "routed",
        write("answer", "We refunded the second charge."), "done"], name="supervisor")
    return {"supervisor": Agent("You route.", model=supervisor, name="supervisor"),
            "billing_agent": billing,
            "tech_agent": Agent("x", model=ScriptedModel([]), name="tech_agent"),
            "security_agent": Agent("x", model=ScriptedModel([]), name="security_agent")}


def test_a_machine_summons_a_remote_agent_whose_writes_keep_the_typed_rules(sdk_agent):
    url, calls, env = sdk_agent
    result = Machine.from_file(ROUTER).run_sync(
        "I was charged twice", agents=machine_agents(a2a_agent(url, name="billing_agent")))
    assert result.completed and result.state == "done"
    assert result.context["notes"] == ["billing: the charge came from a reseller"]
    [summons] = [line for line in calls.read_text().splitlines()]
    assert summons.startswith('You act as billing_agent in state "billing"')


def test_a_remote_agent_may_not_write_what_its_state_does_not_require(tmp_path):
    writes = json.dumps({"finding": "ok", "answer": "hijacked"})
    proc = subprocess.Popen([sys.executable, str(FIXTURES / "a2a_sdk_server.py")],
                            env={**os.environ, "A2A_ECHO_WRITES": writes},
                            stdout=subprocess.PIPE, text=True)
    try:
        port = started(proc, proc.stdout, r"listening (\d+)").group(1)
        remote = a2a_agent(f"http://127.0.0.1:{port}/", name="billing_agent")
        result = Machine.from_file(ROUTER).run_sync("charged twice",
                                                    agents=machine_agents(remote))
    finally:
        stop(proc)
    assert result.context["answer"] == "We refunded the second charge."   # not hijacked
    billing = [t for t in result.trace if t.from_state == "billing"][0]
    assert [(w.field, w.by) for w in billing.writes][:1] == [("finding", "billing_agent")]


def test_a_served_team_answers_the_sdk_client_with_its_card_updates_and_cancel(tmp_path):
    from a2a.client import ClientConfig, create_client
    from a2a.types import CancelTaskRequest, Message, Part, Role, SendMessageRequest

    notes = tmp_path / "woke.txt"
    proc, url = served(tmp_path, f"{FIXTURES / 'mcp_team.py'}:team",
                       env={"MCP_TEAM_WOKE": str(notes)})
    try:
        card = httpx.get(f"{url}.well-known/agent-card.json", timeout=10).json()
        assert card["name"] == "support" and card["capabilities"]["streaming"] is True
        assert card["supportedInterfaces"][0]["url"] == url

        async def ask(text: str, *, cancel_on: str | None = None) -> list[tuple[str, str]]:
            seen: list[tuple[str, str]] = []
            async with httpx.AsyncClient(timeout=60) as http:
                client = await create_client(url, client_config=ClientConfig(
                    httpx_client=http, streaming=True))
                request = SendMessageRequest(message=Message(
                    message_id=f"m-{len(text)}", role=Role.ROLE_USER, parts=[Part(text=text)]))
                task_id = None
                async for event in client.send_message(request):
                    which = event.WhichOneof("payload")
                    if which == "task":
                        task_id = event.task.id
                    elif which == "status_update":
                        status = event.status_update.status
                        said = " ".join(p.text for p in status.message.parts)
                        seen.append((str(status.state), said))
                        if cancel_on and cancel_on in said:
                            while "started" not in (notes.read_text() if notes.exists()
                                                    else ""):
                                await anyio.sleep(0.02)
                            await client.cancel_task(CancelTaskRequest(id=task_id))
                            cancel_on = None
                    elif which == "artifact_update":
                        seen.append(("artifact", " ".join(
                            p.text for p in event.artifact_update.artifact.parts)))
                await client.close()
            return seen

        answered = anyio.run(ask, "What is on INV-7?")
        assert ("2", "support -> billing: What is on INV-7?") in answered   # WORKING
        assert ("artifact", "Done: invoice INV-7: 42.00 EUR") in answered
        assert answered[-1][0] == "3"                                         # COMPLETED

        cancelled = anyio.run(lambda: ask("wait 30 then answer", cancel_on="asks for wait"))
        assert cancelled[-1][0] == "5"                                         # CANCELED
        deadline = time.monotonic() + 20
        while "cancelled" not in notes.read_text() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert notes.read_text().split() == ["started", "cancelled"]          # it never woke
    finally:
        stop(proc)


def test_a_machine_summons_a_served_foreperson_agent_behind_a_token(tmp_path):
    proc, url = served(tmp_path, f"{FIXTURES / 'a2a_agents.py'}:analyst",
                       env={"FOREPERSON_A2A_TOKEN": TOKEN})
    try:
        assert httpx.get(f"{url}.well-known/agent-card.json", timeout=10).status_code == 401
        with pytest.raises(RunError, match="cannot read its agent card"):
            a2a_agent(url, name="billing_agent", timeout_s=10).run_sync("hello")
        remote = a2a_agent(url, name="billing_agent",
                           headers={"Authorization": f"Bearer {TOKEN}"})
        assert remote.run_sync("the May invoice").text == "analysed: the May invoice"
        result = Machine.from_file(ROUTER).run_sync("I was charged twice",
                                                    agents=machine_agents(remote))
    finally:
        stop(proc)
    assert result.completed
    assert result.context["notes"] == ["billing: invoice 7 was charged twice"]


def test_the_a2a_example_runs_a_remote_worker_and_a_summons():
    example = FIXTURES.parents[1] / "examples" / "a2a_worker.py"
    done = subprocess.run([sys.executable, str(example)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "billing (working): billing: invoice answered" in out
    assert "== completed: Checked: invoice INV-7: 42.00 EUR, paid twice on 3 May." in out
    assert "notes: ['billing: INV-7 was paid twice on 3 May']" in out
