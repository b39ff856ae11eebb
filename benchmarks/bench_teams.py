"""Team benchmarks (issue 9 item 16), printed as JSON lines with the ratio to each floor.

1. Seed 004's outage request with fixed model latencies (supervisor / router call
   100 ms, specialist call 300 ms):
   * sequential: a flat ``Team.router`` (route, operations, route, billing, finish: 5
     calls); floor 0.90 s, target wall <= 1.005 x floor;
   * parallel: ``Team.supervisor`` delegating to both specialists in one turn (4 calls);
     floor 0.50 s, target <= 1.01 x floor.
   Peers measured on this machine: 0.91-0.93 s sequential, 0.506-0.517 s parallel.
   Printed beside it: the same latencies slept back to back with nothing else (the event
   loop's timer overshoot, part of every run) and the whole run with zero latency (the
   team's own time).
2. Routing overhead per decision with zero-latency models: a router run of
   ``--decisions`` decisions (each but the last sends one worker run; default 20, about
   what the default caps allow), minus the same worker runs made directly, divided by
   the decisions, median over ``--runs`` runs; every delegation recorded in a
   ``MemoryStore`` (target < 0.5 ms) and in a ``SqliteStore`` (target < 2 ms; with
   ``synchronous=NORMAL``, and with the default ``FULL`` for reference: one fsync per
   commit, two commits per delegation). The same for ``Team.supervisor``.
3. The supervisor's prompt size (characters sent to its model) after 1, 5 and 20
   delegations of 2,000-character reports, ``context="capped"`` against the transcript
   (target: after 20 <= 1.2 x after 1; peers grow from about 2k to 40-43k).

Run: ``python benchmarks/bench_teams.py [--decisions 20] [--runs 50] [--repeats 5]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from foreperson.agents import Agent, Guards, Limits
from foreperson.models import (
    Message,
    ModelBase,
    ModelRequestParameters,
    ModelResponse,
    ToolCall,
    Usage,
)
from foreperson.teams import FINISH, RouteDecision, Team
from foreperson.testing import ScriptedModel
from foreperson.work import MemoryStore, SqliteStore

USAGE = Usage(model_calls=1, input_tokens=10, output_tokens=5)   # no token estimation
OUTAGE = "My server went down last night. Do I get service credits?"


class Delayed(ModelBase):
    """Answers after a fixed latency; replies scripted, or one fixed text."""

    def __init__(self, name: str, latency_s: float, replies: Sequence[Any] = (),
                 text: str | None = None) -> None:
        self._name = name
        self.latency_s = latency_s
        self.replies = list(replies)
        self.text = text
        self.calls = 0

    @property
    def name(self) -> str:
        return f"bench:{self._name}"

    async def request(self, messages: Sequence[Message], params: ModelRequestParameters
                      ) -> ModelResponse:
        self.calls += 1
        if self.latency_s:
            await anyio.sleep(self.latency_s)
        if self.text is not None:
            return ModelResponse(text=self.text, usage=USAGE, finish_reason="stop")
        reply = self.replies.pop(0)
        if isinstance(reply, RouteDecision):
            return ModelResponse(text=reply.model_dump_json(), output=None, usage=USAGE,
                                 finish_reason="stop")
        if isinstance(reply, list):
            return ModelResponse(tool_calls=tuple(reply), usage=USAGE,
                                 finish_reason="tool_calls")
        return ModelResponse(text=reply, usage=USAGE, finish_reason="stop")


def emit(name: str, value: float, unit: str, *, floor: float | None = None,
         target: float | None = None, **extra: object) -> None:
    record: dict[str, object] = {"bench": name, "value": round(value, 5), "unit": unit}
    if floor is not None:
        record["floor"] = floor
        record["ratio"] = round(value / floor, 4)
        if target is not None:
            record["target_ratio"] = target
            record["ok"] = value / floor <= target
    elif target is not None:
        record["target"] = target
        record["ok"] = value < target
    record.update(extra)
    print(json.dumps(record), flush=True)


def specialist(name: str, latency_s: float) -> Agent:
    return Agent(f"You are {name}.", model=Delayed(name, latency_s, text=f"{name} answer"),
                 name=name)


def decision(name: str) -> RouteDecision:
    return RouteDecision(next=name, reasoning=f"{name} next")


# --- 1. the outage request ----------------------------------------------------------------


async def outage_sequential(route_s: float, answer_s: float) -> float:
    router = Delayed("router", route_s, [decision("operations"), decision("billing"),
                                         decision(FINISH)])
    team = Team.router(workers={"operations": specialist("operations", answer_s),
                                "billing": specialist("billing", answer_s),
                                "data": specialist("data", answer_s)}, model=router)
    started = time.perf_counter()
    result = await team.run(OUTAGE)
    elapsed = time.perf_counter() - started
    assert result.completed and result.usage.model_calls == 5
    return elapsed


async def outage_parallel(route_s: float, answer_s: float) -> float:
    delegate = [ToolCall("delegate", {"worker": "operations", "instructions": "the outage?"}),
                ToolCall("delegate", {"worker": "billing", "instructions": "credits?"})]
    lead = Delayed("supervisor", route_s, [delegate, "both answered"])
    team = Team.supervisor(workers={"operations": specialist("operations", answer_s),
                                    "billing": specialist("billing", answer_s)},
                           instructions="Answer with the specialists.", model=lead)
    started = time.perf_counter()
    result = await team.run(OUTAGE)
    elapsed = time.perf_counter() - started
    assert result.completed and result.usage.model_calls == 4
    return elapsed


# --- 2. routing overhead -------------------------------------------------------------------


def make_store(kind: str, folder: Path) -> Any:
    if kind == "memory":
        return MemoryStore()
    synchronous = "FULL" if kind == "sqlite_full" else "NORMAL"
    return SqliteStore(folder / f"{kind}-{time.perf_counter_ns()}.db", synchronous=synchronous)


async def router_run_s(decisions: int, store: Any) -> float:
    worker = Agent("w", model=ScriptedModel(
        [ModelResponse(text="ok", usage=USAGE)] * (decisions - 1)), name="worker")
    replies = [ModelResponse(text='{"next": "worker", "reasoning": "r"}', usage=USAGE)] * (
        decisions - 1) + [ModelResponse(text='{"next": "FINISH", "reasoning": "r"}',
                                        usage=USAGE)]
    team = Team.router(workers={"worker": worker}, model=ScriptedModel(replies), store=store,
                       max_specialist_calls=None, recursion_limit=10 * decisions,
                       guards=Guards(limits=Limits(max_turns=None)))
    started = time.perf_counter()
    result = await team.run("go")
    elapsed = time.perf_counter() - started
    assert result.completed and len(result.route_log) == decisions
    return elapsed


async def supervisor_run_s(decisions: int, store: Any) -> float:
    worker = Agent("w", model=ScriptedModel(
        [ModelResponse(text="ok", usage=USAGE)] * (decisions - 1)), name="worker")
    replies = [ModelResponse(tool_calls=(ToolCall("delegate", {
        "worker": "worker", "instructions": f"part {i}"}, id=f"c{i}"),), usage=USAGE)
        for i in range(decisions - 1)] + [ModelResponse(text="done", usage=USAGE)]
    team = Team.supervisor(workers={"worker": worker}, instructions="Manage.",
                           model=ScriptedModel(replies), store=store,
                           max_specialist_calls=None, recursion_limit=10 * decisions,
                           guards=Guards(limits=Limits(max_turns=None)))
    started = time.perf_counter()
    result = await team.run("go")
    elapsed = time.perf_counter() - started
    assert result.completed and len(result.delegations) == decisions - 1
    return elapsed


async def direct_runs_s(runs: int) -> float:
    worker = Agent("w", model=ScriptedModel([ModelResponse(text="ok", usage=USAGE)] * runs),
                   name="worker")
    started = time.perf_counter()
    for _ in range(runs):
        await worker.run("part")
    return time.perf_counter() - started


async def overhead_ms(shape: str, kind: str, decisions: int, runs: int, folder: Path
                      ) -> float:
    run = router_run_s if shape == "router" else supervisor_run_s
    samples = []
    for _ in range(runs):
        store = make_store(kind, folder)
        try:
            team_s = await run(decisions, store)
        finally:
            store.close()
        direct_s = await direct_runs_s(decisions - 1)
        samples.append((team_s - direct_s) / decisions * 1000)
    return statistics.median(samples)


# --- 3. prompt sizes ------------------------------------------------------------------------


def prompt_chars(messages: Sequence[Message]) -> int:
    total = 0
    for message in messages:
        total += len(getattr(message, "content", None) or getattr(message, "text", None) or "")
        for call in getattr(message, "tool_calls", ()):
            total += len(call.arguments_json())
    return total


async def prompt_sizes(context: str, delegations: int) -> list[int]:
    report = "r" * 2000
    worker = Agent("Research.", model=ScriptedModel(
        [ModelResponse(text=report, usage=USAGE)] * delegations), name="researcher")
    lead = ScriptedModel([ModelResponse(tool_calls=(ToolCall("delegate", {
        "worker": "researcher", "instructions": f"question {i}"}),), usage=USAGE)
        for i in range(delegations)] + [ModelResponse(text="done", usage=USAGE)])
    team = Team.supervisor(workers={"researcher": worker, "writer": specialist("writer", 0)},
                           instructions="Research the questions one by one, then answer.",
                           model=lead, context=context, max_specialist_calls=None,
                           recursion_limit=100, guards=Guards(limits=Limits(max_turns=50)))
    await team.run("Twenty questions about tidepools.")
    return [prompt_chars(call.messages) for call in lead.calls]


async def sleeps_s(latencies: Sequence[float]) -> float:
    """The same model latencies slept back to back, nothing else: the event loop's own
    timer overshoot (asyncio rounds each wait up to the millisecond)."""
    started = time.perf_counter()
    for latency in latencies:
        await anyio.sleep(latency)
    return time.perf_counter() - started


async def main(decisions: int, runs: int, repeats: int) -> None:
    await outage_sequential(0, 0)            # warm up imports and caches
    await outage_parallel(0, 0)
    zero_seq = statistics.median([await outage_sequential(0, 0) for _ in range(200)])
    zero_par = statistics.median([await outage_parallel(0, 0) for _ in range(200)])
    sequential, parallel, timer_seq, timer_par = [], [], [], []
    for _ in range(repeats):
        sequential.append(await outage_sequential(0.1, 0.3))
        timer_seq.append(await sleeps_s((0.1, 0.3, 0.1, 0.3, 0.1)))
        parallel.append(await outage_parallel(0.1, 0.3))
        timer_par.append(await sleeps_s((0.1, 0.3, 0.1)))
    emit("outage_sequential_router_5_calls", statistics.median(sequential), "s", floor=0.90,
         target=1.005, peers="0.91-0.93 s",
         timer_only_s=round(statistics.median(timer_seq), 5),
         zero_latency_run_ms=round(zero_seq * 1000, 3))
    emit("outage_parallel_supervisor_4_calls", statistics.median(parallel), "s", floor=0.50,
         target=1.01, peers="0.506-0.517 s",
         timer_only_s=round(statistics.median(timer_par), 5),
         zero_latency_run_ms=round(zero_par * 1000, 3))

    with tempfile.TemporaryDirectory() as folder:
        for shape in ("router", "supervisor"):
            await overhead_ms(shape, "memory", decisions, 5, Path(folder))     # warm up
            for kind, target in (("memory", 0.5), ("sqlite_normal", 2.0), ("sqlite_full", None)):
                value = await overhead_ms(shape, kind, decisions, runs, Path(folder))
                emit(f"{shape}_overhead_per_decision_{kind}", value, "ms", target=target,
                     decisions_per_run=decisions, runs=runs)

    for context in ("capped", "transcript"):
        sizes = await prompt_sizes(context, 20)
        emit(f"supervisor_prompt_chars_{context}", sizes[20] / sizes[1], "x after 1",
             target=1.2 if context == "capped" else None,
             after_1=sizes[1], after_5=sizes[5], after_20=sizes[20])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--decisions", type=int, default=20,
                        help="routing decisions per overhead run")
    parser.add_argument("--runs", type=int, default=50, help="overhead runs per store")
    parser.add_argument("--repeats", type=int, default=5, help="outage runs per measurement")
    args = parser.parse_args()
    anyio.run(main, args.decisions, args.runs, args.repeats)
