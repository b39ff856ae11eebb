"""Floors measured in the same run as the benchmarks they bound (no framework at all).

Usage:
    python benchmarks/floors.py asyncio N SLEEP_MS WORKERS   # W2's floor
    python benchmarks/floors.py asyncio-commits N SLEEP_MS WORKERS   # ... with a store
    python benchmarks/floors.py sqlite-commits [N]            # SQLite's single-row commits

``asyncio``: WORKERS bare coroutines take N sleeps of SLEEP_MS between them (a shared
counter, no store): the drain time any asyncio framework can reach on this machine,
timer rounding and scheduling included. ``asyncio-commits``: the same, and every finished
sleep is recorded as a row committed by a thread (one SQLite transaction, WAL,
``synchronous=FULL``, for all the rows finished since the last one): the least a durable
asyncio runtime does. The thread's completion wakes the event loop while the other
sleeps are pending, and asyncio's selector rounds the next wait up to a whole
millisecond, so each sleep overshoots by about half a millisecond more than in the bare
floor: the cost of recording work durably in a thread, not of any one framework.
``sqlite-commits``: N single-row INSERTs, each its own transaction, into a WAL file
with ``synchronous=FULL`` (the durability W1 runs with): the rate at which a
store that commits every task one by one would be capped.

Prints one JSON line (``floor``, ``n``, ``workers``, ``sleep_ms``, ``process_s``,
``ideal_s``, ``drain_over_ideal`` / ``commits_per_s``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import sys
import tempfile
import time


def asyncio_floor(n: int, sleep_ms: float, workers: int) -> dict[str, object]:
    left = [n]
    seconds = sleep_ms / 1000.0

    async def worker() -> None:
        while left[0] > 0:
            left[0] -= 1
            await asyncio.sleep(seconds)

    async def main() -> float:
        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(workers)))
        return time.perf_counter() - began

    elapsed = asyncio.run(main())
    ideal = n * seconds / workers
    return {"floor": "asyncio", "n": n, "sleep_ms": sleep_ms, "workers": workers,
            "process_s": round(elapsed, 4), "ideal_s": round(ideal, 4),
            "drain_over_ideal": round(elapsed / ideal, 4)}


def asyncio_commits_floor(n: int, sleep_ms: float, workers: int) -> dict[str, object]:
    path = os.path.join(tempfile.mkdtemp(prefix="fp-floor-"), "done.db")
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE done (id INTEGER PRIMARY KEY)")
    left, finished = [n], []
    seconds = sleep_ms / 1000.0

    def commit(rows: list[int]) -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("INSERT INTO done (id) VALUES (?)", [(r,) for r in rows])
        conn.execute("COMMIT")

    async def worker() -> None:
        while left[0] > 0:
            left[0] -= 1
            mine = left[0]
            await asyncio.sleep(seconds)
            finished.append(mine)
            wake.set()

    async def committer() -> None:
        written = 0
        while written < n:
            await wake.wait()
            wake.clear()
            rows, finished[:] = list(finished), []
            await asyncio.to_thread(commit, rows)
            written += len(rows)

    async def main() -> float:
        began = time.perf_counter()
        await asyncio.gather(committer(), *(worker() for _ in range(workers)))
        return time.perf_counter() - began

    wake = asyncio.Event()
    elapsed = asyncio.run(main())
    assert conn.execute("SELECT count(*) FROM done").fetchone()[0] == n
    conn.close()
    ideal = n * seconds / workers
    return {"floor": "asyncio-commits", "n": n, "sleep_ms": sleep_ms, "workers": workers,
            "process_s": round(elapsed, 4), "ideal_s": round(ideal, 4),
            "drain_over_ideal": round(elapsed / ideal, 4)}


def sqlite_commits(n: int) -> dict[str, object]:
    path = os.path.join(tempfile.mkdtemp(prefix="fp-floor-"), "commits.db")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    began = time.perf_counter()
    for _ in range(n):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t (v) VALUES ('x')")
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - began
    conn.close()
    return {"floor": "sqlite-commits", "n": n, "process_s": round(elapsed, 4),
            "commits_per_s": round(n / elapsed)}


def main() -> None:
    kind = sys.argv[1] if len(sys.argv) > 1 else ""
    if kind == "asyncio" and len(sys.argv) == 5:
        row = asyncio_floor(int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]))
    elif kind == "asyncio-commits" and len(sys.argv) == 5:
        row = asyncio_commits_floor(int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]))
    elif kind == "sqlite-commits":
        row = sqlite_commits(int(sys.argv[2]) if len(sys.argv) > 2 else 2000)
    else:
        raise SystemExit(__doc__)
    print(json.dumps(row))


if __name__ == "__main__":
    main()
