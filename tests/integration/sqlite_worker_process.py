"""A worker process on a SQLite task file, for the crash tests (run as a script).

Usage: python sqlite_worker_process.py DB LOG MODE
MODE "hang": log "start <id>" then block forever (to be SIGKILLed mid-task);
MODE "work": log "start <id>" / "end <id>" around a short sleep.
"""

from __future__ import annotations

import os
import sys
import time

import anyio

from foreperson.work import SqliteStore, Supervisor, Worker


def main() -> None:
    db, log, mode = sys.argv[1:4]

    def work(task):
        with open(log, "a") as f:
            f.write(f"start {task.id} {os.getpid()}\n")
        if mode == "hang":
            while True:
                time.sleep(60)
        time.sleep(0.01)
        with open(log, "a") as f:
            f.write(f"end {task.id} {os.getpid()}\n")
        return {"pid": os.getpid()}

    sup = Supervisor(SqliteStore(db), pull=True, stale_after=1.0, heartbeat_every_s=0.2,
                     sweep_every_s=0.2)
    sup.register(Worker(f"proc-{os.getpid()}", {"k"}, fn=work, concurrency=4))
    anyio.run(lambda: sup.run(until_finished=True, idle_wait_s=0.05))


if __name__ == "__main__":
    main()
