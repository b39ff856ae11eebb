"""PostgreSQL W1 with 1, 2, 4 and 8 ``foreperson worker`` processes on one database, the
same total concurrency (8 slots), measured in one run, beside the server's own limit.

Usage: python benchmarks/bench_scaleout.py [--n 20000] [--rounds 3] [--processes 1,2,4,8]

For each process count, the workers are started and wait (idle, registered), then N no-
op tasks are added in one batch and timed until every one is COMPLETED. Reported per
count: drain tasks/s (the median of the rounds), deadlocks the server counted meanwhile,
how often a sample of ``pg_stat_activity`` (every 20 ms) found one of our sessions
waiting for a lock, and the machine's CPU: how busy its cores were and the CPU time
spent per task (workers, supervisor and server together). The server's limit is the rate
of single-row autocommit inserts on one connection and on eight at once (every
completion is at least one commit). The floor of each process count is a bare ``FOR
UPDATE SKIP LOCKED`` queue in plain psycopg, the same processes and slots claiming and
completing one task per round trip: what this machine can do for that many processes
without any framework.

Environment: PEER_PG (default postgresql://postgres@127.0.0.1:5432), PGDB (default
bench); the schema ``fp_scaleout`` is dropped and made again.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
from psycopg import sql

from foreperson.work import Status, Task
from foreperson.work.stores.postgres import PostgresStore

HERE = Path(__file__).resolve().parent
SCHEMA = "fp_scaleout"


def raw_commits(dsn: str, connections: int, n: int = 2000) -> float:
    """Single-row autocommit inserts per second over ``connections`` connections."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS fp_scaleout_raw")
        conn.execute("CREATE TABLE fp_scaleout_raw (id bigserial PRIMARY KEY, v text)")

    def insert(count: int) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for _ in range(count):
                conn.execute("INSERT INTO fp_scaleout_raw (v) VALUES ('x')")

    threads = [threading.Thread(target=insert, args=(n // connections,))
               for _ in range(connections)]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.perf_counter() - began
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE fp_scaleout_raw")
    return (n // connections) * connections / took


def cpu_jiffies() -> tuple[int, int]:
    """(busy, total) clock ticks of every core so far (``/proc/stat``)."""
    with open("/proc/stat", encoding="ascii") as handle:
        fields = [int(v) for v in handle.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def _process_ticks(pid: int) -> int:
    """Clock ticks of CPU a process has used so far (user + system)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def deadlocks(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return int(conn.execute("SELECT deadlocks FROM pg_stat_database "
                                "WHERE datname = current_database()").fetchone()[0])


# The floor: a bare SKIP LOCKED queue in plain psycopg, the least a worker that claims
# and completes one task per round trip does: the same processes and slots, no framework.
_FLOOR_WORKER = r"""
import sys, threading, psycopg
dsn, slots = sys.argv[1], int(sys.argv[2])
def work():
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            row = conn.execute(
                "UPDATE fp_scaleout_floor SET status = 'running' WHERE id = (SELECT id FROM "
                "fp_scaleout_floor WHERE status = 'pending' ORDER BY id LIMIT 1 "
                "FOR UPDATE SKIP LOCKED) RETURNING id").fetchone()
            if row is None:
                return
            conn.execute("UPDATE fp_scaleout_floor SET status = 'done' WHERE id = %s", row)
threads = [threading.Thread(target=work) for _ in range(slots)]
for t in threads: t.start()
for t in threads: t.join()
"""


def floor_run(dsn: str, processes: int, n: int) -> float:
    """Tasks/s of the bare queue with ``processes`` processes sharing 8 slots."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS fp_scaleout_floor")
        conn.execute("CREATE TABLE fp_scaleout_floor (id bigserial PRIMARY KEY, "
                     "status text NOT NULL DEFAULT 'pending')")
        conn.execute("CREATE INDEX ON fp_scaleout_floor (id) WHERE status = 'pending'")
        conn.execute("INSERT INTO fp_scaleout_floor (status) SELECT 'pending' "
                     "FROM generate_series(1, %s)", (n,))
    began = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", _FLOOR_WORKER, dsn,
                               str(max(1, 8 // processes))]) for _ in range(processes)]
    for proc in procs:
        proc.wait(600)
    took = time.perf_counter() - began
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE fp_scaleout_floor")
    return n / took


def one_run(dsn: str, processes: int, n: int) -> dict[str, float]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(SCHEMA)))
    store = PostgresStore(dsn, schema=SCHEMA)
    env = dict(os.environ, FOREPERSON_PG_SCHEMA=SCHEMA, PYTHONPATH=os.pathsep.join(
        [str(HERE.parent / "src"), str(HERE), os.environ.get("PYTHONPATH", "")]))
    slots = max(1, 8 // processes)
    workers = [subprocess.Popen(
        [sys.executable, "-m", "foreperson.cli.main", "worker", "_noop_app", "--dsn", dsn,
         "--concurrency", str(slots), "--log-level", "WARNING"], cwd=HERE, env=env)
        for _ in range(processes)]
    try:
        deadline = time.monotonic() + 60
        while len(store.list_workers()) < processes:
            if time.monotonic() > deadline:
                raise RuntimeError("the workers did not start")
            time.sleep(0.1)
        before = deadlocks(dsn)
        waits = {"samples": 0, "lock_waits": 0}
        stop = threading.Event()

        def sample() -> None:
            with psycopg.connect(dsn, autocommit=True) as conn:
                while not stop.is_set():
                    waiting = conn.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                        "'foreperson' AND wait_event_type = 'Lock'").fetchone()[0]
                    waits["samples"] += 1
                    waits["lock_waits"] += int(waiting > 0)
                    time.sleep(0.02)

        sampler = threading.Thread(target=sample)
        sampler.start()
        busy0, total0 = cpu_jiffies()
        workers_cpu0 = sum(_process_ticks(proc.pid) for proc in workers)
        began = time.perf_counter()
        store.add([Task("w1") for _ in range(n)])
        while store.stats().counts[Status.COMPLETED] < n:
            time.sleep(0.05)
        took = time.perf_counter() - began
        busy1, total1 = cpu_jiffies()
        ticks = os.sysconf("SC_CLK_TCK")
        workers_cpu = sum(_process_ticks(proc.pid) for proc in workers) - workers_cpu0
        stop.set()
        sampler.join()
        return {"processes": processes, "slots_each": slots, "drain_per_s": n / took,
                "deadlocks": deadlocks(dsn) - before,
                "lock_wait_share": waits["lock_waits"] / max(1, waits["samples"]),
                "cpu_busy": (busy1 - busy0) / max(1, total1 - total0),
                "cpu_us_per_task": (busy1 - busy0) / ticks / n * 1e6,
                "workers_cpu_share": workers_cpu / max(1, busy1 - busy0)}
    finally:
        for proc in workers:
            proc.terminate()
        for proc in workers:
            proc.wait(30)
        store.close()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                sql.Identifier(SCHEMA)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--processes", default="1,2,4,8")
    args = parser.parse_args()
    base = os.environ.get("PEER_PG", "postgresql://postgres@127.0.0.1:5432")
    dsn = f"{base}/{os.environ.get('PGDB', 'bench')}"
    counts = [int(p) for p in args.processes.split(",")]
    runs: dict[int, list[dict[str, float]]] = {p: [] for p in counts}
    raw: dict[int, list[float]] = {1: [], 8: []}
    for _ in range(args.rounds):
        for p in counts:
            row = one_run(dsn, p, args.n)
            row["floor_per_s"] = floor_run(dsn, p, args.n)
            print(json.dumps(row), file=sys.stderr)
            runs[p].append(row)
        for c in raw:
            raw[c].append(raw_commits(dsn, c))
    one = statistics.median(raw[1])
    print(f"\nraw single-row commits/s: 1 connection {one:,.0f}, "
          f"8 connections {statistics.median(raw[8]):,.0f}")
    first = statistics.median(r["drain_per_s"] for r in runs[counts[0]])
    for p in counts:
        rate = statistics.median(r["drain_per_s"] for r in runs[p])
        floor = statistics.median(r["floor_per_s"] for r in runs[p])
        print(f"{p} process(es), the bare SKIP LOCKED queue (plain psycopg, one task per "
              f"round trip): {floor:,.0f} tasks/s; foreperson / that floor "
              f"{rate / floor:.2f}")
        busy = statistics.median(r["cpu_busy"] for r in runs[p])
        cost = statistics.median(r["cpu_us_per_task"] for r in runs[p])
        print(f"{p} process(es) x {runs[p][0]['slots_each']} slots: {rate:,.0f} tasks/s "
              f"({rate / first:.2f}x one process, {rate / one:.2f}x one connection's "
              f"commits), deadlocks {sum(r['deadlocks'] for r in runs[p])}, lock-wait "
              f"samples {max(r['lock_wait_share'] for r in runs[p]):.1%}, CPU {busy:.0%} "
              f"busy, {cost:,.0f} us of CPU per task (all processes and the server; the "
              f"worker processes' share "
              f"{statistics.median(r['workers_cpu_share'] for r in runs[p]):.0%})")


if __name__ == "__main__":
    main()
