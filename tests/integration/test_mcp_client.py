"""MCP servers as toolsets (issue 22, items 1-2): a real MCP server (the fixture
``tests/fixtures/mcp_echo_server.py``, over stdio and over streamable HTTP on 127.0.0.1)
whose tools an agent driven by a scripted test model calls.

What each test proves:

* discovery: ``allow`` / ``deny`` (patterns) and ``prefix`` decide what is offered, with
  the server's JSON input schemas;
* calls through an agent, over both transports: text and structured content reach the
  model, an ``isError`` result is a tool error it reads (the run goes on);
* ``timeout`` (and ``Guards.tool_timeout_s``) bound a call; the session goes on;
* a server that dies mid-call is restarted once; a second death is a tool error, and
  later calls are tool errors at once (no hang);
* a journaled run replayed, and a run SIGKILLed in a subprocess and resumed, do not call
  the server again (the counter file); ``runs show`` lists the call;
* a changed input schema for a recorded call is a JournalDivergence on resume;
* an approval required by pattern parks the run (``ask_later``), is granted from the
  runtime, and the resumed run calls the tool once;
* two workers of a team share one session (one server process), closed when the team's
  run ends; ``async with server:`` holds one session across runs;
* the server's tools/list_changed notification refreshes the run's tools;
* ``examples/mcp_tools.py`` runs and prints what it shows.

Run as a script (``python test_mcp_client.py child DB RUN_ID WORKDIR``) it is the child
process of the SIGKILL test.
"""

from __future__ import annotations

import os
import runpy
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from foreperson.agents import Agent, Guards, MCPServer, ask_later
from foreperson.journal import JournalDivergence
from foreperson.models import ToolCall, ToolReturn
from foreperson.runtime import SqliteRuntime
from foreperson.teams import Team
from foreperson.testing import FunctionModel, ScriptedModel

HERE = Path(__file__).resolve().parent
SERVER = HERE.parent / "fixtures" / "mcp_echo_server.py"
TIMEOUT_S = 60

pytestmark = pytest.mark.anyio


def echo_env(workdir: Path, **extra: str) -> dict[str, str]:
    return {"MCP_ECHO_COUNTER": str(workdir / "count.txt"),
            "MCP_ECHO_STARTS": str(workdir / "starts.txt"), **extra}


_LOG: list[Any] = []


@pytest.fixture(autouse=True, scope="module")
def server_log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Where the stdio servers' stderr goes (not the test's)."""
    with (tmp_path_factory.mktemp("mcp") / "server.log").open("a") as log:
        _LOG[:] = [log]
        yield
        _LOG.clear()


def stdio_server(workdir: Path, schema: str = "1", **options: Any) -> MCPServer:
    """The fixture server over stdio."""
    return MCPServer.stdio(sys.executable, [str(SERVER)],
                           env=echo_env(workdir, MCP_ECHO_SCHEMA=schema),
                           errlog=_LOG[0] if _LOG else sys.stderr, name="echo", **options)


def lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


@pytest.fixture
def http_url(tmp_path: Path) -> Iterator[str]:
    """The fixture server over streamable HTTP on 127.0.0.1, a free port."""
    env = {**os.environ, **echo_env(tmp_path)}
    child = subprocess.Popen([sys.executable, str(SERVER), "--http"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        line = child.stdout.readline().split()       # it listens before it says so
        assert line[:1] == ["listening"], line
        yield f"http://127.0.0.1:{line[1]}/mcp"
    finally:
        child.kill()
        child.wait(timeout=TIMEOUT_S)
        child.stdout.close()


def results(messages: Any) -> list[ToolReturn]:
    return [m for m in messages if isinstance(m, ToolReturn)]


# --- discovery ------------------------------------------------------------------------


async def test_discovery_offers_what_allow_deny_and_prefix_let_through(tmp_path):
    server = stdio_server(tmp_path, allow=["a*", "c*", "weather"], deny=["crash"],
                          prefix="echo_")
    tools = await server.list_tools()
    assert [t.name for t in tools] == ["echo_add", "echo_count", "echo_weather"]
    add = tools[0]
    assert add.remote_name == "add" and add.description == "Add two integers."
    assert add.parameters["properties"].keys() == {"a", "b"}
    assert add.parameters["required"] == ["a", "b"]
    assert server.version == 0 and server._host is None      # closed again


async def test_a_model_sees_the_servers_tools_with_their_schemas(tmp_path):
    model = ScriptedModel(["nothing to do"])
    agent = Agent("x", model=model, toolsets=[stdio_server(tmp_path, deny=["c*", "s*"])])
    result = await agent.run("hi")
    assert result.output == "nothing to do"
    offered = {d.name: d for d in model.calls[0].params.tools}
    assert sorted(offered) == ["add", "fail", "grow", "pid", "weather"]
    assert offered["weather"].parameters["properties"]["city"]["type"] == "string"


# --- calls ------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_calls_come_back_as_results_the_model_reads(transport, tmp_path, request):
    if transport == "http":
        server = MCPServer.http(request.getfixturevalue("http_url"), name="echo",
                                headers={"X-Test": "1"}, prefix="e_")
    else:
        server = stdio_server(tmp_path, prefix="e_")
    model = ScriptedModel([
        [ToolCall("e_add", {"a": 2, "b": 3}), ToolCall("e_fail", {"reason": "bad input"}),
         ToolCall("e_weather", {"city": "Oslo"}), ToolCall("e_add", {"a": "x"})],
        "done",
    ])
    agent = Agent("x", model=model, toolsets=[server])
    result = await agent.run("go")
    assert result.output == "done" and result.stop_reason == "completed"
    add, fail, weather, wrong = results(result.messages)
    assert (add.name, add.is_error) == ("e_add", False)
    assert add.content == "5"              # the text (its structured twin said once)
    assert fail.is_error and "failed: bad input" in fail.content       # read, not raised
    assert not weather.is_error and '"celsius": 21' in weather.content
    assert wrong.is_error                               # the server rejected the arguments
    assert result.usage.tool_calls == 4


async def test_a_call_past_its_timeout_is_an_error_and_the_session_goes_on(tmp_path):
    model = ScriptedModel([ToolCall("slow", {"seconds": 60}), ToolCall("add", {"a": 1, "b": 1}),
                           "done"])
    agent = Agent("x", model=model, toolsets=[stdio_server(tmp_path, timeout=0.5)])
    with anyio.fail_after(TIMEOUT_S):
        result = await agent.run("go")
    slow, add = results(result.messages)
    assert slow.is_error and "timeout_s=0.5" in slow.content
    assert not add.is_error and add.content.startswith("2")


async def test_the_guards_tool_timeout_bounds_a_call_too(tmp_path):
    model = ScriptedModel([ToolCall("slow", {"seconds": 60}), "done"])
    agent = Agent("x", model=model, toolsets=[stdio_server(tmp_path)],
                  guards=Guards(tool_timeout_s=0.5))
    with anyio.fail_after(TIMEOUT_S):
        result = await agent.run("go")
    (slow,) = results(result.messages)
    assert slow.is_error and "timeout_s=0.5" in slow.content


async def test_a_crashed_server_is_restarted_once_then_its_calls_are_errors(tmp_path):
    model = ScriptedModel([ToolCall("crash", {}), ToolCall("add", {"a": 2, "b": 2}),
                           ToolCall("crash", {}), ToolCall("add", {"a": 2, "b": 2}), "done"])
    agent = Agent("x", model=model, toolsets=[stdio_server(tmp_path)])
    with anyio.fail_after(TIMEOUT_S):
        result = await agent.run("go")
    first, after, second, last = results(result.messages)
    assert first.is_error and "was restarted" in first.content
    assert not after.is_error and after.content.startswith("4")      # the new process
    assert second.is_error and "not restarted again" in second.content
    assert last.is_error and "unavailable" in last.content
    assert result.stop_reason == "completed"
    assert len(lines(tmp_path / "starts.txt")) == 2                    # restarted once


# --- journaled: replay, resume after SIGKILL, divergence, approval -------------------------


def counting_model() -> ScriptedModel:
    return ScriptedModel([ToolCall("count", {"label": "once"}), "counted"])


async def test_a_replayed_run_does_not_call_the_server_again(tmp_path):
    runtime = SqliteRuntime(str(tmp_path / "runs.db"))
    try:
        agent = Agent("x", model=counting_model(), toolsets=[stdio_server(tmp_path)],
                      name="counter")
        first = await agent.run("go", run_id="r-1", runtime=runtime)
        assert first.output == "counted" and lines(tmp_path / "count.txt") == ["once"]
        again = Agent("x", model=ScriptedModel([]), toolsets=[stdio_server(tmp_path)],
                      name="counter")
        replayed = await again.resume("r-1", runtime=runtime)
        assert replayed.output == "counted"
        assert lines(tmp_path / "count.txt") == ["once"]                  # not called again
        (step,) = [s for s in runtime.steps("r-1") if s.kind == "tool_call"]
        assert step.key == "agent:counter/turn:1/tool:1"
        assert "tool 1 count" in runtime.show("r-1")
    finally:
        runtime.close()


def test_a_run_killed_mid_run_resumes_without_calling_the_server_again(tmp_path):
    db = tmp_path / "runs.db"
    child = subprocess.Popen([sys.executable, __file__, "child", str(db), "kill-1",
                              str(tmp_path)], stdout=subprocess.PIPE, text=True, cwd=HERE)
    try:
        line = child.stdout.readline().strip()   # after the tool call, at the next model call
        assert line == "ready", line
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=TIMEOUT_S) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=TIMEOUT_S)
        child.stdout.close()
    assert lines(tmp_path / "count.txt") == ["once"]
    runtime = SqliteRuntime(str(db))
    try:
        model = ScriptedModel(["counted"])          # only the unfinished model call
        agent = Agent("x", model=model, toolsets=[stdio_server(tmp_path)], name="counter")
        result = agent.resume_sync("kill-1", runtime=runtime)
        assert result.output == "counted"
        assert lines(tmp_path / "count.txt") == ["once"]                  # not called again
        assert len(model.calls) == 1
    finally:
        runtime.close()


def child(db: str, run_id: str, workdir: str) -> None:
    """The killed process: calls ``count`` once, then blocks in its next model call."""

    async def reply(messages: Any, params: Any) -> Any:
        if not isinstance(messages[-1], ToolReturn):
            return ToolCall("count", {"label": "once"})
        print("ready", flush=True)      # the tool call's record is on disk before this
        await anyio.sleep_forever()

    runtime = SqliteRuntime(db)
    agent = Agent("x", model=FunctionModel(reply), toolsets=[stdio_server(Path(workdir))],
                  name="counter")
    agent.run_sync("go", run_id=run_id, runtime=runtime)


async def test_a_changed_input_schema_of_a_recorded_call_is_a_divergence(tmp_path):
    runtime = SqliteRuntime(str(tmp_path / "runs.db"))
    try:
        agent = Agent("x", model=counting_model(), toolsets=[stdio_server(tmp_path)],
                      name="counter")
        await agent.run("go", run_id="r-2", runtime=runtime)
        (step,) = [s for s in runtime.steps("r-2") if s.kind == "tool_call"]
        assert "schema" in step.request                   # its schema's digest, recorded
        changed = Agent("x", model=ScriptedModel([]), name="counter",
                        toolsets=[stdio_server(tmp_path, schema="2")])
        with pytest.raises(JournalDivergence) as diverged:
            await changed.resume("r-2", runtime=runtime)
        assert diverged.value.key.startswith("agent:counter/turn:1")
        assert lines(tmp_path / "count.txt") == ["once"]
    finally:
        runtime.close()


async def test_an_approval_by_pattern_parks_the_run_until_it_is_granted(tmp_path):
    runtime = SqliteRuntime(str(tmp_path / "runs.db"))
    guards = Guards(approval=ask_later, approval_required={"e_co*"})
    try:
        agent = Agent("x", model=ScriptedModel([ToolCall("e_count", {"label": "ok"})]),
                      toolsets=[stdio_server(tmp_path, prefix="e_")], guards=guards,
                      name="clerk")
        parked = await agent.run("go", run_id="r-3", runtime=runtime)
        assert parked.stop_reason == "awaiting_approval"
        (pending,) = parked.pending
        assert pending.tool == "e_count" and lines(tmp_path / "count.txt") == []
        runtime.approve("r-3", pending.call_id)
        later = Agent("x", model=ScriptedModel(["counted it"]), guards=guards, name="clerk",
                      toolsets=[stdio_server(tmp_path, prefix="e_")])
        result = await later.resume("r-3", runtime=runtime)
        assert result.output == "counted it"
        assert lines(tmp_path / "count.txt") == ["ok"]                     # once
        (step,) = [s for s in runtime.steps("r-3") if s.kind == "tool_call"]
        assert step.result["content"].startswith("counted ok")
    finally:
        runtime.close()


# --- lifetimes ----------------------------------------------------------------------------


async def test_two_workers_of_a_team_share_one_session(tmp_path):
    server = stdio_server(tmp_path)

    def worker(name: str) -> Agent:
        def reply(messages: Any, params: Any) -> Any:
            last = messages[-1]
            if not isinstance(last, ToolReturn):
                return ToolCall("pid", {})
            return f"{name} saw {last.content}"

        return Agent(f"You are {name}.", model=FunctionModel(reply, name=name), name=name,
                     toolsets=[server])

    def lead(messages: Any, params: Any) -> Any:
        if not isinstance(messages[-1], ToolReturn):
            return [ToolCall("delegate", {"worker": "a", "instructions": "pid"}),
                    ToolCall("delegate", {"worker": "b", "instructions": "pid"})]
        return "both asked"

    team = Team.supervisor(workers={"a": worker("a"), "b": worker("b")},
                           instructions="Lead.", model=FunctionModel(lead, name="lead"),
                           name="lead")
    result = await team.run("go")
    assert result.output == "both asked"
    (pid,) = lines(tmp_path / "starts.txt")                  # one server process
    outputs = sorted(d.output for d in result.delegations)
    assert outputs == [f"a saw {pid}", f"b saw {pid}"]
    assert server._host is None                            # closed with the team's run


async def test_async_with_holds_one_session_across_runs(tmp_path):
    server = stdio_server(tmp_path)
    async with server:
        for _ in range(2):
            agent = Agent("x", model=ScriptedModel([ToolCall("pid", {}), "ok"]),
                          toolsets=[server])
            assert (await agent.run("go")).output == "ok"
        assert server._host is not None
    assert len(lines(tmp_path / "starts.txt")) == 1
    assert server._host is None


def test_a_run_on_another_thread_shares_the_session_and_the_opener_waits_for_it(tmp_path):
    """Runs on two event loops (two threads) use one server object: the first opens the
    session on its loop, the second's calls are handed to it, and the first run's end
    waits until the second lets go (its calls still run on the first loop)."""
    server = stdio_server(tmp_path)
    opened, a_done_asking = threading.Event(), threading.Event()
    finished: list[str] = []

    def opener_gate() -> str:
        """Holds the first run until the second has its session."""
        opened.set()
        return "ok" if guest_joined.wait(TIMEOUT_S) else "timed out"

    guest_joined = threading.Event()

    def opener(messages: Any, params: Any) -> Any:
        returns = results(messages)
        if not returns:
            return ToolCall("pid", {})
        if len(returns) == 1:
            return ToolCall("opener_gate", {})
        a_done_asking.set()
        return f"a saw {returns[0].content}"

    def guest(messages: Any, params: Any) -> Any:
        returns = results(messages)
        if not returns:
            return ToolCall("pid", {})
        if len(returns) == 1:
            guest_joined.set()
            assert a_done_asking.wait(TIMEOUT_S)
            host = server._host
            deadline = time.monotonic() + TIMEOUT_S       # the opener's release is waiting
            while host is not None and host.drained is None and time.monotonic() < deadline:
                time.sleep(0.01)
            return ToolCall("pid", {})                    # on the opener's loop still
        return f"b saw {returns[0].content} then {returns[1].content}"

    outputs: dict[str, str] = {}

    def run(name: str, model: Any, tools: list[Any]) -> None:
        agent = Agent("x", model=FunctionModel(model, name=name), tools=tools,
                      toolsets=[server])
        outputs[name] = anyio.run(agent.run, "go").output      # a loop of this thread's own
        finished.append(name)

    first = threading.Thread(target=run, args=("a", opener, [opener_gate]))
    first.start()
    assert opened.wait(TIMEOUT_S)
    second = threading.Thread(target=run, args=("b", guest, []))
    second.start()
    for thread in (first, second):
        thread.join(TIMEOUT_S)
    (pid,) = lines(tmp_path / "starts.txt")                  # one server process
    assert outputs == {"a": f"a saw {pid}", "b": f"b saw {pid} then {pid}"}
    assert finished == ["b", "a"]                             # the opener let go last
    assert server._host is None


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_list_changed_notification_refreshes_the_runs_tools(transport, tmp_path,
                                                                      request):
    if transport == "http":
        server = MCPServer.http(request.getfixturevalue("http_url"), name="echo")
    else:
        server = stdio_server(tmp_path)
    seen: list[list[str]] = []

    def reply(messages: Any, params: Any) -> Any:
        seen.append(sorted(t.name for t in params.tools))
        if len(seen) == 1:
            return ToolCall("grow", {})
        if len(seen) == 2:
            return ToolCall("extra", {})
        return messages[-1].content

    agent = Agent("x", model=FunctionModel(reply), toolsets=[server])
    result = await agent.run("go")
    assert "extra" not in seen[0] and "extra" in seen[1]
    assert result.output == "extra!"


# --- the example --------------------------------------------------------------------------


def test_the_mcp_example_runs(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    example = HERE.parents[1] / "examples" / "mcp_tools.py"
    monkeypatch.setattr(sys, "argv", [str(example)])
    runpy.run_path(str(example), run_name="__main__")
    out = capsys.readouterr().out
    assert "== offered: ['stock_stock', 'stock_reserve']" in out     # wipe denied
    assert "stock_reserve (error): Error executing tool reserve: only 4 nut in stock" in out
    assert "== completed: Reserved 10 bolts" in out
    assert out.count("the server saw 2 reservations") == 2               # replay: none more


if __name__ == "__main__" and sys.argv[1:2] == ["child"]:
    child(*sys.argv[2:5])
