"""A supervisor draining tasks on PostgreSQL with local workers, for the server-restart
test (run as a script).

Usage: python pg_drain_process.py DSN SCHEMA COUNT LOG

Each task appends ``<task id>`` to LOG (one ``os.write`` with O_APPEND per line) and
sleeps a few milliseconds; the script prints ``done <completed>`` when the drain ends.
"""

from __future__ import annotations

import logging
import os
import sys
import time

from foreperson import Supervisor, Task, Worker
from foreperson.work.stores.postgres import PostgresStore


def main() -> None:
    dsn, schema, count, log_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    def work(task: Task) -> dict:
        fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{task.id}\n".encode())
        finally:
            os.close(fd)
        time.sleep(0.004)
        return {"ok": task.id}

    store = PostgresStore(dsn, schema=schema)
    sup = Supervisor(store, stale_after=10.0)
    sup.register(Worker("drain", {"work"}, fn=work, concurrency=8))
    sup.add_tasks([Task("work", {}, id=f"t{i:05d}", max_attempts=20) for i in range(count)])
    result = sup.run_sync()
    print(f"done retries={result.retries}", flush=True)
    store.close()


if __name__ == "__main__":
    main()
