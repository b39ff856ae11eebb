"""Seed 000's nightly job, scaled down: 2,000 tickets of 6.2 ms of agent time each.

Usage: python benchmarks/bench_nightly.py [N] [WORKERS ...]

Each ticket is either one task of 6.2 ms, or the ticket job's shape: three linked tasks
(classify 2.5 ms -> draft 2.5 ms -> triage 1.2 ms). The time is simulated I/O (an async
sleep), on the durable SQLite store. Prints one JSON line per run with
efficiency = ideal / actual, where ideal = N x 6.2 ms / workers.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

import anyio
import anyio._backends._asyncio  # noqa: F401  (import cost is not part of the drain)

from foreperson.work import SqliteStore, Status, Supervisor, Task, Worker

STAGES = {"classify": 0.0025, "draft": 0.0025, "triage": 0.0012}


async def agent_time(task: Task) -> dict:
    await anyio.sleep(task.payload["s"])
    return {"ok": True}


def run(n: int, workers: int, shape: str) -> dict:
    store = SqliteStore(os.path.join(tempfile.mkdtemp(prefix="fp-nightly-"), "n.db"))
    sup = Supervisor(store)
    kinds = {"ticket"} | set(STAGES)
    for i in range(workers):
        sup.register(Worker(f"w{i}", kinds, fn=agent_time))
    tasks: list[Task] = []
    for i in range(n):
        if shape == "one-task":
            tasks.append(Task("ticket", {"s": 0.0062}, id=f"{i}"))
        else:
            prev: list[str] = []
            for stage, seconds in STAGES.items():
                task = Task(stage, {"s": seconds}, id=f"{i}/{stage}", depends_on=prev,
                            estimate_s=seconds)
                tasks.append(task)
                prev = [task.id]
    sup.add_tasks(tasks)
    t0 = time.perf_counter()
    report = sup.run_sync()
    actual = time.perf_counter() - t0
    ideal = n * 0.0062 / workers
    store.close()
    return {"bench": "nightly", "shape": shape, "n": n, "workers": workers,
            "ideal_s": round(ideal, 3), "actual_s": round(actual, 3),
            "efficiency": round(ideal / actual, 3),
            "tickets_per_s": round(n / actual),
            "completed": report.stats.counts[Status.COMPLETED], "ok":
            report.stats.counts[Status.COMPLETED] == len(tasks)}


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    widths = [int(w) for w in sys.argv[2:]] or [8, 64]
    for shape in ("one-task", "three-tasks"):
        for workers in widths:
            print(json.dumps(run(n, workers, shape)), flush=True)


if __name__ == "__main__":
    main()
