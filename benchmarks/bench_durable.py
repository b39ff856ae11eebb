"""Journal overhead of durable runs (issue 11 item 9), printed as JSON lines.

1. Wall time of a supervisor run with 10 delegations (one per turn, so every journal
   write is on the critical path: 11 supervisor calls and 10 worker calls, each model
   call 20 ms of scripted latency, 420 ms of model time) journaled on SQLite and on
   PostgreSQL, divided by the same run with ``InMemoryRuntime``, measured in one run:
   the three interleaved, ``--repeats`` times each, median. Target <= 1.05. Measured on
   this machine at 20 ms steps: LangGraph's SQLite checkpointer 1.095, DBOS 1.32,
   pydantic-ai on DBOS 1.49. Every run is a fresh run id (nothing replays).
2. Journal size: bytes per step (key, digest, result and request summary as stored) of
   a single agent's run of 10 and of 100 model calls (each a tool call with a
   200-character result, after a 2,000-character system prompt): a journal that stores
   each message once stays flat; one that stores the conversation per step grows with
   the run.

Run: ``python benchmarks/bench_durable.py [--repeats 7] [--dsn postgresql://...]``
(``--dsn`` defaults to ``$FOREPERSON_TEST_DSN``, else the local test database; without
one the PostgreSQL line is skipped).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import anyio

from foreperson import Agent, Team
from foreperson.agents import Guards, Limits
from foreperson.models import ToolCall, ToolReturn, Usage
from foreperson.runtime import InMemoryRuntime, PostgresRuntime, Runtime, SqliteRuntime
from foreperson.testing import FunctionModel
from foreperson.work import MemoryStore

LATENCY_S = 0.020
DELEGATIONS = 10
USAGE = Usage(model_calls=1, input_tokens=10, output_tokens=5)


def _team() -> Team:
    async def lead(messages: Any, params: Any) -> Any:
        await anyio.sleep(LATENCY_S)
        done = sum(isinstance(m, ToolReturn) for m in messages)
        if done >= DELEGATIONS:
            return "all ten sections are written"
        return ToolCall("delegate", {"worker": f"w{done % 3}",
                                     "instructions": f"write section {done + 1}"})

    async def work(messages: Any, params: Any) -> Any:
        await anyio.sleep(LATENCY_S)
        return f"section text for: {messages[-1].content}"

    workers = {f"w{i}": Agent(f"You write sections ({i}).", model=FunctionModel(work),
                              name=f"w{i}") for i in range(3)}
    return Team.supervisor(workers=workers, instructions="Write ten sections, one per turn.",
                           model=FunctionModel(lead), name="lead",
                           max_specialist_calls=None, recursion_limit=100,
                           guards=Guards(limits=Limits(max_turns=None)))


async def _timed(team: Team, runtime: Runtime) -> float:
    started = time.perf_counter()
    result = await team.run("write the report", runtime=runtime, run_id=uuid.uuid4().hex)
    elapsed = time.perf_counter() - started
    assert result.completed and len(result.delegations) == DELEGATIONS, result.stop_reason
    return elapsed


def overhead(repeats: int, dsn: str | None) -> list[dict[str, Any]]:
    """Part 1: journaled wall time over in-memory wall time."""
    tmp = Path(tempfile.mkdtemp(prefix="fp-bench-durable-"))
    runtimes: dict[str, Runtime] = {"memory": InMemoryRuntime(),
                                    "sqlite": SqliteRuntime(str(tmp / "runs.db")),
                                    "sqlite_normal": SqliteRuntime(str(tmp / "normal.db"),
                                                                   synchronous="NORMAL")}
    schema = f"fp_bench_{uuid.uuid4().hex[:8]}"
    if dsn:
        runtimes["postgres"] = PostgresRuntime(dsn, schema=schema, pool_size=4)
    team = _team()
    times: dict[str, list[float]] = {name: [] for name in runtimes}

    async def main() -> None:
        for runtime in runtimes.values():          # warm up each: imports, pools, caches
            await _timed(team, runtime)
        for _ in range(repeats):
            for name, runtime in runtimes.items():
                times[name].append(await _timed(team, runtime))

    try:
        anyio.run(main)
    finally:
        for runtime in runtimes.values():
            runtime.close()
        if dsn:
            import psycopg
            from psycopg import sql

            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                    sql.Identifier(schema)))
    base = statistics.median(times["memory"])
    lines = [{"bench": "journal_overhead", "store": "memory", "model_calls": 21,
              "model_time_s": round(21 * LATENCY_S, 3), "wall_s": round(base, 4)}]
    for name in runtimes:
        if name == "memory":
            continue
        wall = statistics.median(times[name])
        lines.append({"bench": "journal_overhead", "store": name, "wall_s": round(wall, 4),
                      "ratio_to_memory": round(wall / base, 4), "target": 1.05,
                      "ratios": [round(t / m, 3) for t, m in zip(times[name], times["memory"],
                                                                strict=True)]})
    return lines


def journal_size(calls: int) -> dict[str, Any]:
    """Part 2: bytes per step of one agent's run of ``calls`` model calls."""

    def reply(messages: Any, params: Any) -> Any:
        done = sum(isinstance(m, ToolReturn) for m in messages)
        if done >= calls - 1:
            return f"noted {done} numbers"
        return ToolCall("note", {"n": done})

    def note(n: int) -> str:
        """Note a number."""
        return f"noted {n}: " + "x" * 200

    store = MemoryStore()
    agent = Agent("You note numbers. " + "Be careful. " * 170, model=FunctionModel(reply),
                  name="noter", tools=[note], guards=Guards(limits=Limits(max_turns=None)))
    agent.run_sync("note the numbers", runtime=InMemoryRuntime(store), run_id="r")
    steps = store.list_steps("r")
    sizes = [len(json.dumps([s.key, s.digest, s.result, s.request], separators=(",", ":")))
             for s in steps]
    total = sum(sizes)
    return {"bench": "journal_size", "model_calls": calls, "steps": len(steps),
            "bytes": total, "bytes_per_step": round(total / len(steps), 1),
            "largest_step": max(sizes)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--dsn", default=os.environ.get("FOREPERSON_TEST_DSN")
                        or "postgresql://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    dsn: str | None = args.dsn
    try:
        import psycopg

        with psycopg.connect(dsn, connect_timeout=3):
            pass
    except Exception:  # noqa: BLE001 - no database here: skip that line
        dsn = None
    for line in overhead(args.repeats, dsn):
        print(json.dumps(line))
    for calls in (10, 100):
        print(json.dumps(journal_size(calls)))


if __name__ == "__main__":
    main()
