"""``Agent.run_sync`` against ``await agent.run`` over real HTTP, printed as JSON lines.

Issue 8 item 13: a blocking call must not pay for a new SDK client and a new TCP
connection each time. Both sides talk to the scripted OpenAI and Anthropic servers of
``tests/fakes`` on 127.0.0.1 through the official SDKs; each run is one model call
answering text. Reported: median and 90th percentile milliseconds per run, and how
many TCP connections the server accepted for all the runs.

Run: ``python benchmarks/bench_run_sync.py [--runs 50]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]   # this tree, not an installed foreperson

from tests.fakes.anthropic_server import message  # noqa: E402
from tests.fakes.openai_server import chat_completion  # noqa: E402
from tests.fakes.server import FakeServer  # noqa: E402

from foreperson.agents import Agent  # noqa: E402
from foreperson.models import (  # noqa: E402
    AnthropicModel,
    AnthropicProvider,
    OpenAIChatModel,
    OpenAIProvider,
)


def _agent(kind: str, url: str) -> Agent:
    if kind == "openai":
        model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(api_key="sk-x",
                                                                  base_url=f"{url}/v1"))
    else:
        model = AnthropicModel("claude-x", provider=AnthropicProvider(api_key="sk-x",
                                                                     base_url=url))
    return Agent("Answer.", model=model)


def _reply(kind: str):
    return chat_completion("ok") if kind == "openai" else message("ok")


def _summary(kind: str, mode: str, times: list[float], server: FakeServer) -> dict:
    ms = sorted(t * 1000 for t in times)
    return {
        "provider": kind, "mode": mode, "runs": len(ms),
        "median_ms": round(statistics.median(ms), 2),
        "p90_ms": round(ms[int(0.9 * (len(ms) - 1))], 2),
        "connections": server.connections,
    }


def bench(kind: str, runs: int) -> list[dict]:
    out = []
    with FakeServer() as server:
        server.add(*(_reply(kind) for _ in range(runs + 1)))
        agent = _agent(kind, server.url)
        agent.run_sync("warm up")            # imports, first connection
        server.connections = 0
        times = []
        for _ in range(runs):
            began = time.perf_counter()
            agent.run_sync("q")
            times.append(time.perf_counter() - began)
        out.append(_summary(kind, "run_sync", times, server))

    with FakeServer() as server:
        server.add(*(_reply(kind) for _ in range(runs + 1)))

        async def awaited() -> list[float]:
            agent = _agent(kind, server.url)
            await agent.run("warm up")
            server.connections = 0
            times = []
            for _ in range(runs):
                began = time.perf_counter()
                await agent.run("q")
                times.append(time.perf_counter() - began)
            await agent.model.aclose()
            return times

        out.append(_summary(kind, "await run", anyio.run(awaited), server))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    for kind in ("openai", "anthropic"):
        for line in bench(kind, args.runs):
            print(json.dumps(line))


if __name__ == "__main__":
    main()
