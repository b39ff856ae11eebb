"""What a year of history costs: the same work on stores holding 0, 100k and 1M finished
tasks (and more on PostgreSQL when asked), measured back to back in one run.

Usage:
    python benchmarks/bench_growth.py sqlite   [--sizes 0,100000,1000000] [--rounds 3]
    python benchmarks/bench_growth.py postgres [--sizes 0,100000,1000000,5000000]

Each store is filled through its own schema (``foreperson.testing.fill_history``: plain
SQL inserts of every column, a nightly ticket job's shape: 3,000 tasks a night, one run
and one worker name a night, one triage task in 33 DEAD, two durable agent runs a night
with their steps), then, round after round (each round visits every store in turn, so
a slow moment of the disk hits them all alike):

* W1 drain: 10,000 no-op tasks, 8 slots, library mode (``Supervisor.run_sync()``, 8
  workers) and worker mode (the supervisor ``foreperson worker --concurrency 8`` runs);
* enqueue: 2,000 tasks added one by one.

The ratio to the empty store is the median of the rounds' ratios (each round measures
every store back to back, starting from a different one), which a slow minute of the
machine cannot skew the way it skews one median against another.

Then, once per store: ``stats()``, ``foreperson status`` (a subprocess: wall time and
peak memory), each JSON endpoint of ``foreperson serve`` and ``/metrics`` (a subprocess:
the median of 10 requests each, and its peak memory), and ``db prune --older-than 30d``
while a drain runs beside it (tasks removed per second, and the drain's rate during the
prune divided by its rate without).

PostgreSQL also measures the floor of this server: a bare ``FOR UPDATE SKIP LOCKED``
queue in plain psycopg (a table with the same number of finished rows, random text ids,
three indexes; 8 connections claiming and completing one task per round trip), so the
worker mode's ratio can be read against what the server itself keeps as a table grows
past its buffer cache.

Prints one table with each figure and its ratio to the empty store of the same run;
the raw JSON goes to stderr. PostgreSQL: PEER_PG (default postgresql://postgres@127.0.0.1:
5432) and PGDB (default bench), one schema per size, dropped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from foreperson.testing import FillPlan, fill_history
from foreperson.work import SqliteStore, Supervisor, Task, Worker
from foreperson.work.process import process_supervisor
from foreperson.work.retention import Retention

HERE = Path(__file__).resolve().parent
SRC = str(HERE.parent / "src")
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]))
W1 = 10_000
ENDPOINTS = ["/api/snapshot", "/api/history", "/api/tasks?status=dead&offset=50",
             "/api/runs", "/api/task/T00000042%2Fdraft", "/metrics"]


class Backend:
    """One store per size: where it lives and how to open it."""

    def __init__(self, kind: str, folder: Path) -> None:
        self.kind = kind
        self.folder = folder
        base = os.environ.get("PEER_PG", "postgresql://postgres@127.0.0.1:5432")
        self.dsn = f"{base}/{os.environ.get('PGDB', 'bench')}"

    def name(self, size: int) -> str:
        return f"fp_growth_{size}"

    def open(self, size: int) -> Any:
        if self.kind == "sqlite":
            return SqliteStore(self.folder / f"{size}.db")
        from foreperson.work.stores.postgres import PostgresStore
        return PostgresStore(self.dsn, schema=self.name(size), pool_size=16)

    def where(self, size: int) -> list[str]:
        if self.kind == "sqlite":
            return ["--db", str(self.folder / f"{size}.db")]
        return ["--dsn", self.dsn, "--schema", self.name(size)]

    def autovacuum_off(self) -> bool:
        """Whether the PostgreSQL server runs without autovacuum."""
        if self.kind != "postgres":
            return False
        import psycopg
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            return bool(conn.execute("SHOW autovacuum").fetchone()[0] == "off")

    def vacuum(self, size: int) -> None:
        """What autovacuum would do after a drain: VACUUM (ANALYZE) the busy tables."""
        import psycopg
        from psycopg import sql
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            for table in ("tasks", "task_deps", "task_deltas", "task_counts", "task_history"):
                conn.execute(sql.SQL("VACUUM (ANALYZE) {}.{}").format(
                    sql.Identifier(self.name(size)), sql.Identifier(table)))

    def drop_table(self, table: str) -> None:
        import psycopg
        from psycopg import sql
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))

    def drop(self, size: int) -> None:
        if self.kind == "postgres":
            import psycopg
            from psycopg import sql
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                    sql.Identifier(self.name(size))))


async def _noop(task: Task) -> None:
    return None


def drain_library(store: Any) -> float:
    """W1 as the library runs it: tasks/s."""
    store.add([Task("w1") for _ in range(W1)])
    sup = Supervisor(store)
    for i in range(8):
        sup.register(Worker(f"w{i}", {"w1"}, fn=_noop))
    began = time.perf_counter()
    sup.run_sync()
    return W1 / (time.perf_counter() - began)


def drain_worker(store: Any) -> float:
    """W1 as ``foreperson worker --concurrency 8`` runs it: tasks/s."""
    store.add([Task("w1") for _ in range(W1)])
    sup = process_supervisor(store, Worker(f"bench:{os.getpid()}", {"w1"}, fn=_noop,
                                           concurrency=8), stale_after=30)
    began = time.perf_counter()
    sup.run_sync()
    return W1 / (time.perf_counter() - began)


def enqueue(store: Any, n: int = 2000) -> float:
    """Tasks added one by one: tasks/s."""
    tasks = [Task("w1e") for _ in range(n)]
    began = time.perf_counter()
    for task in tasks:
        store.add([task])
    rate = n / (time.perf_counter() - began)
    sup = Supervisor(store)
    sup.register(Worker("e", {"w1e"}, fn=_noop, concurrency=8))
    sup.run_sync()                            # leave nothing unfinished behind
    return rate


def bare_queue_table(dsn: str, size: int) -> str:
    """Make the floor's table holding ``size`` finished rows; returns its name."""
    import psycopg
    name = f"fp_growth_floor_{size}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {name}")
        conn.execute(f"CREATE TABLE {name} (id text PRIMARY KEY, seq bigserial, status text "
                     "NOT NULL, payload jsonb, result jsonb, run_id text, finished_at "
                     "timestamptz, lease_token text)")
        conn.execute(f"INSERT INTO {name} (id, status, payload, result, run_id, finished_at) "
                     "SELECT md5(g::text) || md5((g * 7)::text), 'completed', '{\"n\": 1}', "
                     "'{\"ok\": true}', 'run-' || (g / 3000), now() - make_interval(secs => g) "
                     "FROM generate_series(1, %s) g", (size,))
        conn.execute(f"CREATE INDEX ON {name} (seq) WHERE status = 'pending'")
        conn.execute(f"CREATE INDEX ON {name} (finished_at) WHERE finished_at IS NOT NULL")
        conn.execute(f"CREATE INDEX ON {name} (run_id, status)")
        conn.execute(f"VACUUM ANALYZE {name}")
    return name


def bare_queue(dsn: str, table: str) -> float:
    """W1 through the floor's table: tasks/s (then VACUUM, as for the stores)."""
    import psycopg
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"INSERT INTO {table} (id, status, payload) SELECT "
                     f"gen_random_uuid()::text, 'pending', '{{}}' FROM generate_series(1, {W1})")

    def work() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            while True:
                row = conn.execute(
                    f"UPDATE {table} SET status = 'running', lease_token = 'x' WHERE id = ("
                    f"SELECT id FROM {table} WHERE status = 'pending' ORDER BY seq LIMIT 1 "
                    "FOR UPDATE SKIP LOCKED) RETURNING id").fetchone()
                if row is None:
                    return
                conn.execute(f"UPDATE {table} SET status = 'completed', result = '{{}}', "
                             "finished_at = now(), lease_token = NULL WHERE id = %s", row)

    threads = [threading.Thread(target=work) for _ in range(8)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    rate = W1 / (time.perf_counter() - began)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"VACUUM ANALYZE {table}")
    return rate


def median_ms(call: Any, times: int = 20) -> float:
    took = []
    for _ in range(times):
        began = time.perf_counter()
        call()
        took.append((time.perf_counter() - began) * 1000)
    return statistics.median(took)


def status_cli(backend: Backend, size: int) -> tuple[float, float]:
    """``foreperson status``: (median wall ms of 3, peak memory MB)."""
    took, peak = [], 0.0
    for _ in range(3):
        began = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "foreperson.cli.main", "status",
                                 *backend.where(size)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, env=ENV)
        _, code, usage = os.wait4(proc.pid, 0)
        took.append((time.perf_counter() - began) * 1000)
        assert code == 0, proc.stderr.read() if proc.stderr else code
        peak = max(peak, usage.ru_maxrss / 1024)
    return statistics.median(took), peak


def serve_cli(backend: Backend, size: int) -> tuple[dict[str, float], float]:
    """``foreperson serve``: median ms per endpoint (10 requests each), peak memory MB."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "foreperson.cli.main", "serve",
                             *backend.where(size), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(base + "/api/runs", timeout=5).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        out = {path: median_ms(lambda p=path: _get(base + p), times=10) for path in ENDPOINTS}
        with open(f"/proc/{proc.pid}/status", encoding="ascii") as handle:
            peak = next(int(line.split()[1]) for line in handle if line.startswith("VmHWM"))
        return out, peak / 1024
    finally:
        proc.terminate()
        proc.wait(10)


def _get(url: str) -> bytes:
    """The body of a GET (a 404, for a task the empty store lacks, is an answer too)."""
    try:
        with urllib.request.urlopen(url, timeout=60) as answer:
            return bytes(answer.read())
    except urllib.error.HTTPError as exc:
        return bytes(exc.read())


def prune_beside_drain(backend: Backend, size: int, store: Any) -> dict[str, float]:
    """``prune --older-than 30d`` in another connection while a W1 drain runs."""
    other = backend.open(size)
    result: dict[str, Any] = {}

    def prune() -> None:
        result["report"] = other.prune(Retention(30 * 86400.0))

    thread = threading.Thread(target=prune)
    thread.start()
    rate = drain_library(store)
    thread.join()
    other.close()
    report = result["report"]
    return {"pruned": report.tasks, "prune_s": round(report.seconds, 2),
            "prune_per_s": round(report.tasks / report.seconds) if report.seconds else 0,
            "drain_during_prune": round(rate)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("backend", choices=["sqlite", "postgres"])
    parser.add_argument("--sizes", default="0,100000,1000000")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    folder = Path(tempfile.mkdtemp(prefix="fp-growth-"))
    backend = Backend(args.backend, folder)
    stores: dict[int, Any] = {}
    rows: dict[int, dict[str, Any]] = {size: {"size": size} for size in sizes}
    try:
        for size in sizes:
            backend.drop(size)
            store = stores[size] = backend.open(size)
            began = time.perf_counter()
            if size:
                fill_history(store, FillPlan(size))
            rows[size]["fill_s"] = round(time.perf_counter() - began, 1)
            print(f"filled {size}: {rows[size]['fill_s']} s", file=sys.stderr)
        floors = ({size: bare_queue_table(backend.dsn, size) for size in sizes}
                  if backend.kind == "postgres" else {})
        vacuum = backend.autovacuum_off()
        if vacuum:
            print("this server runs with autovacuum off: the stores are vacuumed after "
                  "each measurement, as autovacuum would", file=sys.stderr)
        for turn in range(args.rounds):     # each round starts from another store
            order = sizes[turn % len(sizes):] + sizes[:turn % len(sizes)]
            for key, measure in (("library", drain_library), ("worker", drain_worker),
                                 ("enqueue", enqueue)):
                for size in order:
                    rows[size].setdefault(key, []).append(measure(stores[size]))
                    if vacuum:
                        backend.vacuum(size)
            for size in order if floors else []:
                rows[size].setdefault("bare_queue", []).append(
                    bare_queue(backend.dsn, floors[size]))
        for size in sizes:
            row, store = rows[size], stores[size]
            for key in ("library", "worker", "enqueue", "bare_queue")[:4 if floors else 3]:
                # the ratio: the median of each round's (this store / the empty store)
                row[f"{key}_ratio"] = round(statistics.median(
                    mine / empty for mine, empty in zip(row[key], rows[sizes[0]][key],
                                                        strict=True)), 3)
        for size in sizes:
            row, store = rows[size], stores[size]
            for key in ("library", "worker", "enqueue", "bare_queue")[:4 if floors else 3]:
                row[key] = round(statistics.median(row[key]))
            if floors:
                row["worker_over_bare_queue"] = round(row["worker_ratio"]
                                                      / row["bare_queue_ratio"], 2)
            row["stats_ms"] = round(median_ms(store.stats), 2)
            row["status_ms"], row["status_mb"] = (round(v, 1)
                                                  for v in status_cli(backend, size))
            pages, row["serve_mb"] = serve_cli(backend, size)
            row.update({f"GET {p}": round(v, 1) for p, v in pages.items()})
            row["serve_mb"] = round(row["serve_mb"], 1)
            if size:
                row.update(prune_beside_drain(backend, size, store))
                row["drain_during_prune"] = round(row["drain_during_prune"]
                                                  / row["library"], 2)
            print(json.dumps(row), file=sys.stderr)
    finally:
        for size, store in stores.items():
            store.close()
            backend.drop(size)
            if size in floors:
                backend.drop_table(floors[size])
        shutil.rmtree(folder, ignore_errors=True)
    report(args.backend, sizes, rows)


def report(kind: str, sizes: list[int], rows: dict[int, dict[str, Any]]) -> None:
    """The table: each figure, and for the drains its ratio to the empty store."""
    base = rows[sizes[0]]
    keys = [k for k in base if k != "size" and not k.endswith("_ratio")] + [
        k for k in rows[sizes[-1]] if k not in base]
    print(f"\n{kind}: " + " | ".join(f"{s:,} finished tasks" for s in sizes))
    for key in keys:
        cells = []
        for size in sizes:
            value = rows[size].get(key, "")
            cell = f"{value:,}" if isinstance(value, (int, float)) else str(value)
            if key in ("library", "worker", "enqueue", "bare_queue") and size != sizes[0]:
                cell += f" ({rows[size][key + '_ratio']:.2f}x)"
            cells.append(cell)
        print(f"  {key:40s} " + " | ".join(f"{c:>22s}" for c in cells))


if __name__ == "__main__":
    main()
