"""Agent-loop benchmarks, printed as JSON lines.

1. Loop overhead per turn with a zero-latency scripted model (target < 1 ms): one turn is
   a model call plus the tool call it asks for, with an async tool and with a sync tool
   (which hops to a worker thread); also a one-turn text run.
   The same with every step journaled (``JournaledSteps`` over a ``MemoryStore``: two
   thread hops and a digest per step), to show what recording costs on top.
2. Parallel tool dispatch (seed 001): two 0.5 s tools called in one turn finish in the
   time of one (target < 0.6 s for the whole run), async and sync.

Run: ``python benchmarks/bench_agent.py [--turns 200] [--runs 300]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import anyio

from foreperson.agents import Agent, Guards, Limits, RunOptions
from foreperson.agents.steps import JournaledSteps
from foreperson.models import ModelResponse, ToolCall, Usage
from foreperson.testing import ScriptedModel
from foreperson.work import MemoryStore

USAGE = Usage(model_calls=1, input_tokens=10, output_tokens=5)  # fixed: no token estimation


async def echo_async(value: int) -> int:
    """Return the value."""
    return value


def echo_sync(value: int) -> int:
    """Return the value."""
    return value


async def nap_async(seconds: float) -> str:
    """Sleep without blocking the loop."""
    await anyio.sleep(seconds)
    return "rested"


def nap_sync(seconds: float) -> str:
    """Sleep in a worker thread."""
    time.sleep(seconds)
    return "rested"


def emit(name: str, value: float, unit: str, target: float | None = None, **extra: object) -> None:
    record: dict[str, object] = {"bench": name, "value": round(value, 4), "unit": unit}
    if target is not None:
        record["target"] = target
        record["ok"] = value < target
    record.update(extra)
    print(json.dumps(record), flush=True)


async def per_turn_ms(tool_name: str, tool_fn, turns: int, repeats: int = 5,
                      journaled: bool = False) -> float:
    """Median over ``repeats`` runs of (run time / turns), in milliseconds."""
    samples = []
    for _ in range(repeats):
        replies = [
            ModelResponse(tool_calls=(ToolCall(tool_name, {"value": i}),), usage=USAGE)
            for i in range(turns - 1)
        ] + [ModelResponse(text="done", usage=USAGE)]
        agent = Agent("bench", model=ScriptedModel(replies), tools=[tool_fn],
                      guards=Guards(limits=Limits(max_turns=turns)))
        options = RunOptions(steps=JournaledSteps(MemoryStore())) if journaled else None
        started = time.perf_counter()
        result = await agent.run("go", options=options)
        elapsed = time.perf_counter() - started
        assert result.completed and result.usage.model_calls == turns
        samples.append(elapsed / turns * 1000)
    return statistics.median(samples)


async def text_run_ms(runs: int) -> float:
    agent = Agent("bench", model=ScriptedModel())
    samples = []
    for _ in range(runs):
        agent.model.add(ModelResponse(text="hi", usage=USAGE))  # type: ignore[attr-defined]
        started = time.perf_counter()
        await agent.run("hello")
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


async def parallel_tools_s(tool_fn) -> float:
    name = tool_fn.__name__
    model = ScriptedModel([
        [ToolCall(name, {"seconds": 0.5}), ToolCall(name, {"seconds": 0.5})],
        "both rested",
    ])
    agent = Agent("bench", model=model, tools=[tool_fn])
    started = time.perf_counter()
    result = await agent.run("rest twice")
    elapsed = time.perf_counter() - started
    assert result.output == "both rested" and result.usage.tool_calls == 2
    return elapsed


async def main(turns: int, runs: int) -> None:
    await per_turn_ms("echo_async", echo_async, 20)  # warm up imports and caches
    emit("loop_overhead_per_turn_async_tool", await per_turn_ms("echo_async", echo_async, turns),
         "ms", target=1.0, turns=turns)
    emit("loop_overhead_per_turn_sync_tool", await per_turn_ms("echo_sync", echo_sync, turns),
         "ms", target=1.0, turns=turns)
    emit("loop_overhead_per_turn_async_tool_journaled",
         await per_turn_ms("echo_async", echo_async, turns, journaled=True), "ms", turns=turns)
    emit("one_turn_text_run", await text_run_ms(runs), "ms", target=1.0, runs=runs)
    emit("two_0.5s_async_tools_one_turn", await parallel_tools_s(nap_async), "s", target=0.6)
    emit("two_0.5s_sync_tools_one_turn", await parallel_tools_s(nap_sync), "s", target=0.6)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200, help="turns per overhead run")
    parser.add_argument("--runs", type=int, default=300, help="one-turn runs to time")
    args = parser.parse_args()
    anyio.run(main, args.turns, args.runs)
