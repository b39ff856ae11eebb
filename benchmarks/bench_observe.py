"""Overhead of metrics and tracing on W1 (issue 13 item 7): 10,000 no-op tasks, 8
workers, SQLite (synchronous=FULL), with both off and with both on (a Prometheus sink
counting every attempt, and the OpenTelemetry SDK recording a span per attempt into an
in-memory exporter), interleaved in one run; each round runs in a fresh process.

Usage: python benchmarks/bench_observe.py [--rounds 5] [--n 10000] [--workers 8]

Prints one JSON line per round and a summary: median tasks/s of each mode and
``on_over_off`` (drain time with instrumentation / without; target <= 1.05).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def one(n: int, workers: int, mode: str) -> dict[str, object]:
    """One W1 drain in this process, instrumented or not."""
    exporter = None
    if mode == "on":
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        from foreperson.observe.metrics import metrics_registry

        metrics_registry(None)                # installs the Prometheus sink
    import anyio._backends._asyncio  # noqa: F401  (import cost is not part of the drain)

    from foreperson.work import SqliteStore, Status, Supervisor, Task, Worker

    folder = tempfile.mkdtemp(prefix="fp-bench-observe-")
    sup = Supervisor(SqliteStore(os.path.join(folder, "bench.db")))

    async def work(task: Task) -> None:
        return None

    for i in range(workers):
        sup.register(Worker(f"w{i}", {"noop"}, fn=work))
    sup.add_tasks([Task("noop") for _ in range(n)])
    began = time.perf_counter()
    report = sup.run_sync()
    drain = time.perf_counter() - began
    spans = len(exporter.get_finished_spans()) if exporter is not None else 0
    return {"mode": mode, "n": n, "workers": workers, "process_s": round(drain, 3),
            "process_per_s": round(n / drain),
            "completed": report.stats.counts[Status.COMPLETED], "spans": spans}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n", type=int, default=10000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--one", choices=["on", "off"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.n, args.workers, args.one)))
        return
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [os.path.join(os.path.dirname(HERE), "src"), os.environ.get("PYTHONPATH", "")])}
    times: dict[str, list[float]] = {"off": [], "on": []}
    for r in range(args.rounds):
        for mode in (("off", "on") if r % 2 == 0 else ("on", "off")):
            out = subprocess.run([sys.executable, __file__, "--one", mode, "--n", str(args.n),
                                  "--workers", str(args.workers)], check=True, env=env,
                                 capture_output=True, text=True).stdout
            row = json.loads(out.strip().splitlines()[-1])
            assert row["completed"] == args.n, row
            assert mode == "off" or row["spans"] == args.n, row
            print(json.dumps({"round": r, **row}), flush=True)
            times[mode].append(float(row["process_s"]))
    off, on = statistics.median(times["off"]), statistics.median(times["on"])
    print(json.dumps({
        "summary": "W1 drain, metrics + tracing on vs off", "rounds": args.rounds,
        "off_per_s": round(args.n / off), "on_per_s": round(args.n / on),
        "on_over_off": round(on / off, 3),
        "on_over_off_pairs": sorted(round(a / b, 3) for a, b in zip(times["on"], times["off"],
                                                                    strict=True))}))


if __name__ == "__main__":
    main()
