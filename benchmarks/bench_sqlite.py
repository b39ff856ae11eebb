"""foreperson on SQLite, on the peers' workloads (see ../shared/peers/README.md).

Usage: python benchmarks/bench_sqlite.py N SLEEP_MS WORKERS [--sync FULL|NORMAL] [--blocking]

Prints one JSON line with the peers' fields (peer, n, sleep_ms, workers, enqueue_per_s,
process_s, process_per_s, ideal_s, completed, ok) plus drain_over_ideal. Enqueue is one
task per call, as huey's script does; drain is timed from the start of the run until
every task is COMPLETED. With --blocking the work is a blocking time.sleep in a thread
(as huey's); by default it is an async sleep.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import anyio
import anyio._backends._asyncio  # noqa: F401  (import cost is not part of the drain)

from foreperson.work import SqliteStore, Status, Supervisor, Task, Worker


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("n", type=int)
    parser.add_argument("sleep_ms", type=float)
    parser.add_argument("workers", type=int)
    parser.add_argument("--sync", default="FULL", choices=["FULL", "NORMAL"])
    parser.add_argument("--blocking", action="store_true")
    parser.add_argument("--label", default="foreperson-sqlite")
    args = parser.parse_args()

    folder = tempfile.mkdtemp(prefix="fp-bench-")
    store = SqliteStore(os.path.join(folder, "bench.db"), synchronous=args.sync)
    sup = Supervisor(store)
    seconds = args.sleep_ms / 1000.0

    if args.blocking:
        def work(task):
            if seconds:
                time.sleep(seconds)
    else:
        async def work(task):  # type: ignore[misc]
            if seconds:
                await anyio.sleep(seconds)

    for i in range(args.workers):
        sup.register(Worker(f"w{i}", {"noop"}, fn=work))

    t0 = time.perf_counter()
    for _ in range(args.n):
        sup.add_task(Task("noop"))
    t_enq = time.perf_counter() - t0

    t1 = time.perf_counter()
    report = sup.run_sync()
    t_proc = time.perf_counter() - t1
    ideal = args.n * seconds / args.workers
    completed = report.stats.counts[Status.COMPLETED]
    print(json.dumps({
        "peer": args.label, "sqlite_sync": args.sync.lower(), "n": args.n,
        "sleep_ms": args.sleep_ms, "workers": args.workers,
        "enqueue_s": round(t_enq, 3), "enqueue_per_s": round(args.n / t_enq),
        "process_s": round(t_proc, 3), "process_per_s": round(args.n / t_proc),
        "ideal_s": round(ideal, 3),
        "drain_over_ideal": round(t_proc / ideal, 3) if ideal else None,
        "completed": completed, "ok": completed == args.n}))


if __name__ == "__main__":
    main()
