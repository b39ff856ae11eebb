"""A CPU-bound batch keeps its leases (issue 23 item 6): a batch function that computes
for three times the lease, in pure Python (it holds the GIL but for the interpreter's
switches), while another process reclaims every lease it finds expired on the same
SQLite file. The batch's own process must renew the leases throughout: nothing is
reclaimed, every task completes on its first attempt."""

from __future__ import annotations

import subprocess
import sys
import time

from foreperson.work import SqliteStore, Status, Supervisor, Task, Worker

LEASE_S = 1.0
COMPUTE_S = 3 * LEASE_S

RECLAIMER = """
import sys, time
from foreperson.work import SqliteStore
store = SqliteStore(sys.argv[1])
print("ready", flush=True)
reclaimed = 0
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    reclaimed += len(store.reclaim_stale())
    time.sleep(0.05)
print(reclaimed, flush=True)
"""


def crunch(tasks: list[Task]) -> list[dict]:
    """Pure-Python arithmetic for COMPUTE_S seconds, then one result per task."""
    began, total = time.perf_counter(), 0
    while time.perf_counter() - began < COMPUTE_S:
        for i in range(20_000):
            total = (total * 31 + i) % 1_000_003
    return [{"n": task.payload["n"], "total": total} for task in tasks]


def test_a_batch_that_computes_for_three_leases_keeps_them(tmp_path):
    db = str(tmp_path / "t.db")
    store = SqliteStore(db)
    store.add([Task("crunch", {"n": n}, id=f"t{n}", stale_after=LEASE_S) for n in range(4)])
    reclaimer = subprocess.Popen([sys.executable, "-c", RECLAIMER, db, str(COMPUTE_S + 3)],
                                 stdout=subprocess.PIPE, text=True)
    try:
        assert reclaimer.stdout is not None and reclaimer.stdout.readline().strip() == "ready"
        sup = Supervisor(store, stale_after=LEASE_S)
        sup.register(Worker("cruncher", {"crunch"}, fn=crunch, batch_size=4))
        sup.run_sync()
        reclaimed = int(reclaimer.communicate(timeout=60)[0].strip())
    finally:
        if reclaimer.poll() is None:
            reclaimer.kill()
            reclaimer.wait()
    assert reclaimed == 0                             # no lease ran out, anywhere
    tasks = [store.get(f"t{n}") for n in range(4)]
    assert all(t.status is Status.COMPLETED and t.attempts == 1 for t in tasks)
    assert sup.counters.reclaimed == 0 and sup.counters.retries == 0
    store.close()
