"""Seed 000's nightly job, scaled down: 2,000 tickets of agent time each.

Usage: python benchmarks/bench_nightly.py [N] [WORKERS ...] [--per-ticket SECONDS]
       [--batch-size N]

Each ticket is either one task, or the ticket job's shape: three linked tasks
(classify 40 % -> draft 40 % -> triage 20 % of the ticket's time). The default time
per ticket is 62 ms (seed 000's 6.2 s, scaled to 1 %; ``--per-ticket 0.0062`` for the
older 0.1 % scale). The time is simulated I/O (an async sleep), on the durable SQLite
store. With ``--batch-size``, each worker takes up to that many ready tasks of one kind
per call and works through them one after the other (the same agent time per ticket:
only the bookkeeping is shared). Prints one JSON line per run with
efficiency = ideal / actual, where ideal = N x per-ticket time / workers, and the floor
measured in the same run: the same sleeps in the same order (a ticket's next stage
becomes ready when its previous one ends; the earliest ready stage goes first) taken by
as many bare asyncio coroutines from an in-memory heap, no store, no framework. The
floor is below 1 by asyncio's timer rounding (each wake is rounded up to a whole
millisecond, and with many sleepers pending one wake serves several) and by the chains'
tail; ``vs_floor`` = floor time / actual time is the share the framework keeps.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import json
import os
import tempfile
import time

import anyio
import anyio._backends._asyncio  # noqa: F401  (import cost is not part of the drain)

from foreperson.work import SqliteStore, Status, Supervisor, Task, Worker

SHARES = {"classify": 0.4, "draft": 0.4, "triage": 0.2}


async def agent_time(task: Task) -> dict:
    await anyio.sleep(task.payload["s"])
    return {"ok": True}


async def agent_time_batch(tasks: list[Task]) -> list[dict]:
    await anyio.sleep(sum(t.payload["s"] for t in tasks))
    return [{"ok": True} for _ in tasks]


def floor_s(n: int, workers: int, shape: str, per_ticket: float) -> float:
    """Seconds bare asyncio coroutines take for the same sleeps in the same order."""
    stages = [1.0] if shape == "one-task" else list(SHARES.values())
    ready = [(i * len(stages), i, 0) for i in range(n)]      # (seq, ticket, stage)
    heapq.heapify(ready)
    more = asyncio.Event()
    running = [0]

    async def worker() -> None:
        while ready or running[0]:
            if not ready:
                more.clear()
                await more.wait()
                continue
            seq, ticket, stage = heapq.heappop(ready)
            running[0] += 1
            await asyncio.sleep(per_ticket * stages[stage])
            running[0] -= 1
            if stage + 1 < len(stages):
                heapq.heappush(ready, (seq + 1, ticket, stage + 1))
            more.set()

    async def main() -> float:
        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(workers)))
        return time.perf_counter() - began

    return asyncio.run(main())


def run(n: int, workers: int, shape: str, per_ticket: float, batch: int | None) -> dict:
    store = SqliteStore(os.path.join(tempfile.mkdtemp(prefix="fp-nightly-"), "n.db"))
    sup = Supervisor(store)
    kinds = {"ticket"} | set(SHARES)
    for i in range(workers):
        sup.register(Worker(f"w{i}", kinds, fn=agent_time_batch if batch else agent_time,
                            batch_size=batch))
    tasks: list[Task] = []
    for i in range(n):
        if shape == "one-task":
            tasks.append(Task("ticket", {"s": per_ticket}, id=f"{i}"))
        else:
            prev: list[str] = []
            for stage, share in SHARES.items():
                task = Task(stage, {"s": per_ticket * share}, id=f"{i}/{stage}",
                            depends_on=prev, estimate_s=per_ticket * share)
                tasks.append(task)
                prev = [task.id]
    sup.add_tasks(tasks)
    t0 = time.perf_counter()
    report = sup.run_sync()
    actual = time.perf_counter() - t0
    ideal = n * per_ticket / workers
    store.close()
    floor = floor_s(n, workers, shape, per_ticket)
    return {"bench": "nightly", "shape": shape, "n": n, "workers": workers,
            "per_ticket_s": per_ticket, "batch_size": batch,
            "ideal_s": round(ideal, 3), "actual_s": round(actual, 3),
            "efficiency": round(ideal / actual, 3), "floor_s": round(floor, 3),
            "floor_efficiency": round(ideal / floor, 3), "vs_floor": round(floor / actual, 3),
            "tickets_per_s": round(n / actual),
            "completed": report.stats.counts[Status.COMPLETED], "ok":
            report.stats.counts[Status.COMPLETED] == len(tasks)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("n", nargs="?", type=int, default=2000)
    parser.add_argument("workers", nargs="*", type=int)
    parser.add_argument("--per-ticket", type=float, default=0.062)
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--shapes", default="one-task,three-tasks")
    args = parser.parse_args()
    for shape in args.shapes.split(","):
        for workers in args.workers or [8, 64]:
            print(json.dumps(run(args.n, workers, shape, args.per_ticket, args.batch_size)),
                  flush=True)


if __name__ == "__main__":
    main()
