"""foreperson on PostgreSQL, timed like the peer scripts in /work/shared/peers.

Usage: python benchmarks/bench_postgres.py N SLEEP_MS WORKERS [batch] [--prefetch P]

Enqueues N tasks one by one (``store.add([task])``, one transaction each; or one
``add`` of all N with ``batch``), then drains them with one worker process's runtime:
the supervisor ``foreperson worker APP --concurrency WORKERS`` runs
(``process_supervisor``: pull mode, prefetch half the concurrency), each task sleeping
SLEEP_MS (async). Durable defaults: ``synchronous_commit`` is whatever the server says (on).

Prints one JSON line with the peers' fields: peer, n, sleep_ms, workers,
enqueue_per_s, process_s, process_per_s, ideal_s, completed, ok (plus db, prefetch).

Environment: PEER_PG (default postgresql://postgres@127.0.0.1:5432), PGDB (default
bench). Uses the schema ``foreperson_bench``, dropped and recreated on every run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import anyio

from foreperson.work import Task, Worker
from foreperson.work.process import process_supervisor
from foreperson.work.stores.postgres import PostgresStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", type=int)
    parser.add_argument("sleep_ms", type=float)
    parser.add_argument("workers", type=int)
    parser.add_argument("mode", nargs="?", default="one-by-one", choices=["one-by-one", "batch"])
    parser.add_argument("--prefetch", type=int, default=None,
                        help="tasks held beyond concurrency (default: foreperson worker's)")
    args = parser.parse_args()
    db = os.environ.get("PGDB", "bench")
    dsn = os.environ.get("PEER_PG", "postgresql://postgres@127.0.0.1:5432") + "/" + db
    schema = "foreperson_bench"

    import psycopg
    from psycopg import sql
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    store = PostgresStore(dsn, schema=schema, pool_size=args.workers + 4)
    done = 0

    async def work(task: Task) -> None:
        nonlocal done
        if args.sleep_ms:
            await anyio.sleep(args.sleep_ms / 1000.0)
        done += 1

    tasks = [Task("work", {"i": i}) for i in range(args.n)]
    t0 = time.perf_counter()
    if args.mode == "batch":
        store.add(tasks)
    else:
        for task in tasks:
            store.add([task])
    t_enq = time.perf_counter() - t0

    supervisor = process_supervisor(
        store, Worker(f"bench:{os.getpid()}", {"work"}, fn=work, concurrency=args.workers),
        stale_after=30, prefetch=args.prefetch)
    t1 = time.perf_counter()
    report = supervisor.run_sync()
    t_proc = time.perf_counter() - t1
    completed = report.stats.counts[next(s for s in report.stats.counts if s.value == "completed")]
    store.close()
    ideal = args.n * args.sleep_ms / 1000.0 / args.workers
    print(json.dumps({
        "peer": "foreperson-pg", "db": db, "n": args.n, "sleep_ms": args.sleep_ms,
        "workers": args.workers, "enqueue_mode": args.mode, "prefetch": supervisor.prefetch,
        "enqueue_s": round(t_enq, 3), "enqueue_per_s": round(args.n / t_enq),
        "process_s": round(t_proc, 3), "process_per_s": round(args.n / t_proc),
        "ideal_s": round(ideal, 3), "completed": done,
        "ok": done == args.n and completed == args.n}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
