"""Kill-a-worker test for foreperson on PostgreSQL, the scenario of the peers' crash_test.py.

Usage: python benchmarks/crash_postgres.py

The parent enqueues N tasks of ~1.5 s, starts worker A (``foreperson worker``,
concurrency 8) as a subprocess, SIGKILLs it while its tasks are in flight, then starts
worker B (another ``foreperson worker``) and waits until every task is COMPLETED. There
is no sweeper to write: every worker process reclaims tasks whose worker stopped
heartbeating for ``stale_after`` seconds (judged by the database's clock), checking
every ``stale_after / 3`` seconds.

Each task appends ``start`` when it begins, ``done`` when its function reaches the end
(every time), and ``end`` through ``TaskContext.once("end")``, the side effect that
must happen once per task (seed 000's claim key). Printed (one JSON line): tasks
started by A then killed, re-executed starts, completed once / twice / never (by the
``end`` side effect), functions that ran to the end twice, the time from the kill until
every task A held was back in play (``reclaim_s``, to compare with lease + sweep
interval) and until everything was done (``recovery_wall_s``).

Environment: PEER_PG (default postgresql://postgres@127.0.0.1:5432), PGDB (default
bench), PEER_WORKDIR (scratch folder). Uses the schema ``foreperson_crash``.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

from foreperson.work import App, Task, current_task

N, TASK_S, CONC = 20, 1.5, 8
STALE_AFTER_S = 3.0
SCHEMA = "foreperson_crash"
WORK = os.environ.get("PEER_WORKDIR", os.path.join(tempfile.gettempdir(), "peers"))
LOG = os.path.join(WORK, "crash_foreperson.log")
DSN = (os.environ.get("PEER_PG", "postgresql://postgres@127.0.0.1:5432") + "/"
       + os.environ.get("PGDB", "bench"))

app = App()


def mark(i: str, phase: str) -> None:
    fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{i} {phase} {os.getpid()}\n".encode())
    finally:
        os.close(fd)


@app.task("work")
async def work(task: Task) -> None:
    import anyio

    i = str(task.payload["i"])
    mark(i, "start")
    await anyio.sleep(TASK_S)
    mark(i, "done")
    if await anyio.to_thread.run_sync(current_task().once, "end"):
        mark(i, "end")


def start_worker() -> subprocess.Popen:
    here = os.path.dirname(os.path.abspath(__file__))
    return subprocess.Popen(
        [sys.executable, "-m", "foreperson.cli.main", "worker", "crash_postgres:app",
         "--dsn", DSN, "--schema", SCHEMA, "--concurrency", str(CONC),
         "--stale-after", str(STALE_AFTER_S), "--log-level", "WARNING"],
        cwd=here, env={**os.environ, "PEER_WORKDIR": WORK})


def main() -> None:
    import psycopg
    from psycopg import sql

    from foreperson.work.stores.postgres import PostgresStore

    os.makedirs(WORK, exist_ok=True)
    if os.path.exists(LOG):
        os.remove(LOG)
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(SCHEMA)))
    store = PostgresStore(DSN, schema=SCHEMA, pool_size=2)
    store.add([Task("work", {"i": i}, id=f"crash-{i}") for i in range(N)])

    a = start_worker()
    name_a = f"{socket.gethostname()}:{a.pid}"
    deadline = time.monotonic() + 30
    while store.stats().active_by_worker.get(name_a, 0) < CONC:   # A holds a full batch
        if time.monotonic() > deadline:
            raise SystemExit("worker A never started its tasks")
        time.sleep(0.05)
    time.sleep(0.5)                                               # mid-task
    held = {t.id for t in store.list_tasks() if t.assigned_to == name_a}
    os.kill(a.pid, signal.SIGKILL)
    a.wait()
    t_kill = time.monotonic()
    b = start_worker()
    reclaim_s = None
    while True:
        tasks = store.list_tasks()
        if reclaim_s is None and not any(t.assigned_to == name_a for t in tasks if t.id in held):
            reclaim_s = time.monotonic() - t_kill
        if all(t.status.value == "completed" for t in tasks):
            break
        if time.monotonic() - t_kill > 120:
            break
        time.sleep(0.05)
    recovery = time.monotonic() - t_kill
    b.send_signal(signal.SIGTERM)
    b.wait(30)
    left = store.stats().counts
    store.close()

    with open(LOG) as log_file:
        lines = [line.split() for line in log_file]
    starts = collections.Counter(w[0] for w in lines if w[1] == "start")
    ends = collections.Counter(w[0] for w in lines if w[1] == "end")
    dones = collections.Counter(w[0] for w in lines if w[1] == "done")
    ids = [str(i) for i in range(N)]
    print(json.dumps({
        "peer": "foreperson-pg", "tasks": N,
        "started_by_A_then_killed": sum(1 for w in lines
                                        if w[1] == "start" and w[2] == str(a.pid)),
        "re_executed_starts": sum(v - 1 for v in starts.values() if v > 1),
        "completed_once": sum(1 for i in ids if ends[i] == 1),
        "completed_twice_or_more": sum(1 for i in ids if ends[i] > 1),
        "never_completed": sum(1 for i in ids if ends[i] == 0),
        "function_ran_to_end_twice": sum(1 for i in ids if dones[i] > 1),
        "stale_after_s": STALE_AFTER_S, "sweep_every_s": STALE_AFTER_S / 3,
        "reclaim_s": None if reclaim_s is None else round(reclaim_s, 2),
        "recovered_within_lease_plus_sweep": reclaim_s is not None
        and reclaim_s <= STALE_AFTER_S + STALE_AFTER_S / 3 + 0.5,
        "recovery_wall_s": round(recovery, 1), "user_written_sweeper": False,
        "queue_left": {s.value: n for s, n in left.items() if n}}))


if __name__ == "__main__":
    main()
