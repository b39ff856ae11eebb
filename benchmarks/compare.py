"""foreperson next to its peers and floors, interleaved in one run; prints medians and
ratios against targets.

Usage:
    python benchmarks/compare.py sqlite   [--rounds 3] [--peers DIR]
    python benchmarks/compare.py postgres [--rounds 3] [--peers DIR]

Each round runs every command once, in turn (ours, the peer, the floor, ...), so a slow
moment of the disk or of a neighbour hits all of them alike; each figure is the median
of the rounds, shown with its spread (min-max). Workloads (see ../shared/peers/README.md):

* W1: 10,000 no-op tasks, 8 workers, durable defaults: drain tasks/s. SQLite: against
  huey (target >= 2x at the median) and the raw single-row commit rate of SQLite with
  synchronous=FULL (the floor a one-commit-per-task store cannot pass). PostgreSQL:
  against pgqueuer (target >= 2x) and the raw single-row commit rate of the same server
  (``pg_baseline.py``; target >= 1.5x).
* W2: 2,000 tasks x 50 ms at 8 / 32 / 64 workers: drain / ideal, divided by the floor of
  bare asyncio coroutines doing the same sleeps (``floors.py asyncio``). Target: <= 1.01
  on SQLite, <= 1.03 on PostgreSQL. On SQLite also divided by the floor of the same
  coroutines recording each finished sleep in a thread (``floors.py asyncio-commits``:
  the least a durable asyncio runtime does, with the millisecond timer rounding that a
  thread's wake-up brings).

The raw JSON lines go to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
PY = sys.executable


def run(cmd: list[str]) -> dict[str, object] | None:
    """One command's JSON line (or the pg_baseline rate), None when it failed."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(HERE.parent / "src"), os.environ.get("PYTHONPATH", "")]))
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    except subprocess.TimeoutExpired:
        print(f"timed out: {' '.join(cmd)}", file=sys.stderr)
        return None
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            print(line, file=sys.stderr)
            row: dict[str, object] = json.loads(line)
            return row
        match = re.search(r"raw autocommit inserts/s: (\d+)", line)
        if match:
            print(line, file=sys.stderr)
            return {"floor": "pg-commits", "commits_per_s": int(match.group(1))}
    print(f"failed: {' '.join(cmd)}\n{done.stderr[-2000:]}", file=sys.stderr)
    return None


def rounds(plan: dict[str, list[str]], count: int) -> dict[str, list[dict[str, object]]]:
    """Run every named command once per round, interleaved."""
    out: dict[str, list[dict[str, object]]] = defaultdict(list)
    for number in range(count):
        print(f"# round {number + 1}/{count}", file=sys.stderr)
        for name, cmd in plan.items():
            row = run(cmd)
            if row is not None:
                out[name].append(row)
    return out


def median(rows: list[dict[str, object]], key: str) -> tuple[float, float, float]:
    values = sorted(float(r[key]) for r in rows if r.get(key) is not None)  # type: ignore[arg-type]
    if not values:
        return (float("nan"),) * 3
    return statistics.median(values), values[0], values[-1]


def show(label: str, value: tuple[float, float, float], fmt: str = "{:.0f}") -> str:
    mid, low, high = value
    return f"{label} {fmt.format(mid)} ({fmt.format(low)}-{fmt.format(high)})"


def verdict(ok: bool) -> str:
    return "MET" if ok else "NOT MET"


def sqlite(args: argparse.Namespace) -> None:
    peers = args.peers
    plan = {"ours W1": [PY, str(HERE / "bench_sqlite.py"), "10000", "0", "8"],
            "huey W1": [PY, str(peers / "bench_huey.py"), "10000", "0", "8"],
            "commits": [PY, str(HERE / "floors.py"), "sqlite-commits", "2000"]}
    for c in (8, 32, 64):
        plan[f"ours W2 {c}"] = [PY, str(HERE / "bench_sqlite.py"), "2000", "50", str(c)]
        plan[f"huey W2 {c}"] = [PY, str(peers / "bench_huey.py"), "2000", "50", str(c)]
        plan[f"floor W2 {c}"] = [PY, str(HERE / "floors.py"), "asyncio", "2000", "50", str(c)]
        plan[f"durable W2 {c}"] = [PY, str(HERE / "floors.py"), "asyncio-commits", "2000",
                                   "50", str(c)]
    got = rounds(plan, args.rounds)
    ours, huey = median(got["ours W1"], "process_per_s"), median(got["huey W1"], "process_per_s")
    commits = median(got["commits"], "commits_per_s")
    print(f"W1 SQLite, 10,000 no-op tasks, 8 workers (median of {args.rounds}, spread):")
    print("  " + show("foreperson", ours) + "/s   " + show("huey", huey) + "/s   "
          + show("raw commits", commits) + "/s")
    print(f"  foreperson / huey {ours[0] / huey[0]:.2f} (target >= 2: "
          f"{verdict(ours[0] >= 2 * huey[0])}); foreperson / raw commits "
          f"{ours[0] / commits[0]:.2f}")
    w2(got, "SQLite", 1.01, args.rounds)


def w2(got: dict[str, list[dict[str, object]]], where: str, target: float,
       count: int) -> None:
    print(f"W2 {where}, 2,000 x 50 ms: drain / ideal, and ours / the bare-asyncio floor "
          f"(median of {count}):")
    worst = 0.0
    for c in (8, 32, 64):
        def ratio(rows: list[dict[str, object]]) -> tuple[float, float, float]:
            values = sorted(float(r["process_s"]) / float(r["ideal_s"])  # type: ignore[arg-type]
                            for r in rows if r.get("ideal_s"))
            if not values:
                return (float("nan"),) * 3
            return statistics.median(values), values[0], values[-1]

        ours, floor = ratio(got[f"ours W2 {c}"]), ratio(got[f"floor W2 {c}"])
        durable = ratio(got[f"durable W2 {c}"]) if f"durable W2 {c}" in got else None
        peers = [name for name in got if name.endswith(f"W2 {c}")
                 and not name.startswith(("ours", "floor", "durable"))]
        cells = "   ".join(show(name.split()[0], ratio(got[name]), "{:.3f}") for name in peers)
        over = ours[0] / floor[0]
        worst = max(worst, over)
        versus = (f"   durable floor {durable[0]:.3f}, ours/durable {ours[0] / durable[0]:.3f}"
                  if durable is not None else "")
        print(f"  C={c:<3d} " + show("foreperson", ours, "{:.3f}") + "   "
              + show("floor", floor, "{:.3f}") + f"   ours/floor {over:.3f}{versus}   {cells}")
    print(f"  target ours/floor <= {target}: {verdict(worst <= target)} (worst {worst:.3f})")


def postgres(args: argparse.Namespace) -> None:
    peers = args.peers
    plan = {"ours W1": [PY, str(HERE / "bench_postgres.py"), "10000", "0", "8"],
            "pgqueuer W1": [PY, str(peers / "bench_pgqueuer.py"), "10000", "0", "8"],
            "procrastinate W1": [PY, str(peers / "bench_procrastinate.py"), "10000", "0", "8"],
            "commits": [PY, str(peers / "pg_baseline.py")]}
    for c in (8, 32, 64):
        plan[f"ours W2 {c}"] = [PY, str(HERE / "bench_postgres.py"), "2000", "50", str(c)]
        plan[f"pgqueuer W2 {c}"] = [PY, str(peers / "bench_pgqueuer.py"), "2000", "50", str(c)]
        plan[f"floor W2 {c}"] = [PY, str(HERE / "floors.py"), "asyncio", "2000", "50", str(c)]
    got = rounds(plan, args.rounds)
    ours = median(got["ours W1"], "process_per_s")
    pgq = median(got["pgqueuer W1"], "process_per_s")
    proc = median(got["procrastinate W1"], "process_per_s")
    commits = median(got["commits"], "commits_per_s")
    print(f"W1 PostgreSQL, 10,000 no-op tasks, 8 workers (median of {args.rounds}, spread):")
    print("  " + show("foreperson", ours) + "/s   " + show("pgqueuer", pgq) + "/s   "
          + show("procrastinate", proc) + "/s   " + show("raw commits", commits) + "/s")
    print(f"  foreperson / pgqueuer {ours[0] / pgq[0]:.2f} (target >= 2: "
          f"{verdict(ours[0] >= 2 * pgq[0])}); foreperson / raw commits "
          f"{ours[0] / commits[0]:.2f} (target >= 1.5: {verdict(ours[0] >= 1.5 * commits[0])})")
    w2(got, "PostgreSQL", 1.03, args.rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", choices=["sqlite", "postgres"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--peers", type=Path,
                        default=Path(os.environ.get("PEERS_DIR", HERE.parent.parent / "shared"
                                                    / "peers")))
    args = parser.parse_args()
    (sqlite if args.store == "sqlite" else postgres)(args)


if __name__ == "__main__":
    main()
