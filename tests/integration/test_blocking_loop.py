"""Blocking calls share one long-lived event loop (issue 8 item 13): the model's client
is made once, the caller's context is kept, an interrupted wait cancels the call, and
the loop shuts down cleanly at exit, closing the clients it opened."""

from __future__ import annotations

import contextvars
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import anyio
import pytest
from tests.fakes.openai_server import chat_completion
from tests.fakes.server import FakeServer

from foreperson.agents import Agent
from foreperson.models import (
    OpenAIChatModel,
    OpenAIProvider,
    run_blocking,
    shutdown_blocking_loop,
)

ROOT = Path(__file__).resolve().parents[2]
REQUEST = contextvars.ContextVar("REQUEST", default="none")


def test_the_callers_context_variables_are_visible() -> None:
    async def read() -> str:
        return REQUEST.get()

    token = REQUEST.set("req-7")
    try:
        assert run_blocking(read) == "req-7"
    finally:
        REQUEST.reset(token)
    assert run_blocking(read) == "none"


def test_one_client_serves_every_blocking_call_until_shutdown() -> None:
    with FakeServer() as server:
        server.add(*(chat_completion("ok") for _ in range(3)))
        provider = OpenAIProvider(api_key="sk-test", base_url=f"{server.url}/v1")
        agent = Agent("Answer.", model=OpenAIChatModel("gpt-4o", provider=provider))
        agent.run_sync("a")
        agent.run_sync("b")
        assert server.connections == 1
        shutdown_blocking_loop()         # closes the model's client on its loop
        assert agent.run_sync("c").output == "ok"   # a new loop, a new client
        assert server.connections == 2


def test_an_interrupted_wait_cancels_the_call() -> None:
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    started = threading.Event()
    cancelled = threading.Event()

    async def forever() -> None:
        started.set()
        try:
            await anyio.sleep(60)
        finally:
            cancelled.set()

    def interrupt() -> None:
        if started.wait(10):
            os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        run_blocking(forever)
    assert cancelled.wait(5), "the call kept running on the loop after Ctrl-C"


def test_refused_inside_a_running_loop() -> None:
    async def inside() -> None:
        async def nothing() -> None:
            return None

        with pytest.raises(RuntimeError, match="running event loop"):
            run_blocking(nothing)

    anyio.run(inside)


def test_the_loop_shuts_down_cleanly_at_exit() -> None:
    """A script that uses run_sync and just ends: no unclosed-transport warning, no
    hang, exit status 0 (-X dev turns ResourceWarning on; -W error makes it fatal)."""
    script = textwrap.dedent("""
        from tests.fakes.openai_server import chat_completion
        from tests.fakes.server import FakeServer
        from foreperson.agents import Agent
        from foreperson.models import OpenAIChatModel, OpenAIProvider

        server = FakeServer().start()
        server.add(chat_completion("bye"), chat_completion("bye"))
        provider = OpenAIProvider(api_key="sk-test", base_url=server.url + "/v1")
        agent = Agent("Answer.", model=OpenAIChatModel("gpt-4o", provider=provider))
        print(agent.run_sync("a").output, agent.run_sync("b").output)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    done = subprocess.run([sys.executable, "-X", "dev", "-W", "error", "-c", script],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "bye bye"
    assert "unclosed" not in done.stderr.lower() and "Traceback" not in done.stderr
