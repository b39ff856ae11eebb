"""A very large input through ``foreperson tickets``: memory, time to first result, rate.

Usage: python benchmarks/bench_big_input.py [--rows N] [--keep DIR] [--timeout S]

Generates a CSV of N tickets (default 1,000,000; about 100-300 bytes each: an id, a
subject and a body made from the bundled examples, every text different), runs the
offline ticket job on it (the real command, ``python -m foreperson.cli.main tickets``,
SQLite task database, as in ``bench_tickets.py``) as a subprocess, and meanwhile samples
the resident memory of its whole process tree from ``/proc`` every 0.1 s. It prints,
beside the targets, with PASS or FAIL:

* the peak RSS of the process tree (MB; target at most 500), the larger of the sampled
  peak and the kernel's own high-water mark of the job process (``ru_maxrss``);
* the seconds from start to the first complete line in ``--out`` (target at most 60);
* the total seconds and the tickets written per second;
* whether the writer kept pace: results were written throughout the run, not at the end
  (the share of lines present at the run's three-quarter mark, target at least half of
  what the rate so far would give).

The last line is one JSON object with the same figures. Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RSS_TARGET_MB = 500.0
FIRST_TARGET_S = 60.0
_PAGE = os.sysconf("SC_PAGE_SIZE")


def generate(path: Path, rows: int, *, seed: int = 7) -> int:
    """Write ``rows`` tickets to the CSV ``path`` (columns id, subject, body).

    Bodies are bundled example texts cut to 60-240 characters with a ticket number and a
    random word order tail, so no two rows are alike and the classifier does real work.

    Returns:
        the file's size in bytes.
    """
    import csv

    from foreperson.tickets.model import bundled_examples

    rng = random.Random(seed)
    texts = [e.text.replace("\n", " ") for e in bundled_examples()]
    words = " ".join(texts).split()
    with path.open("w", encoding="utf-8", newline="") as f:
        out = csv.writer(f)
        out.writerow(["id", "subject", "body"])
        for i in range(rows):
            base = texts[i % len(texts)]
            cut = base[:rng.randint(60, 200)]
            tail = " ".join(rng.choice(words) for _ in range(rng.randint(2, 6)))
            out.writerow([f"T-{i:07d}", f"case {i}", f"{cut} {tail} (ref {i})"])
    return path.stat().st_size


def _tree(root: int) -> list[int]:
    """``root`` and every descendant process id (from ``/proc/PID/task/*/children``)."""
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            continue
    return found


def _rss_bytes(pids: list[int]) -> int:
    """Summed resident memory of ``pids`` (those that still exist), bytes."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm") as f:
                total += int(f.read().split()[1]) * _PAGE
        except (OSError, IndexError, ValueError):
            continue
    return total


def _lines(path: Path) -> int:
    """Complete lines in ``path`` so far (0 when it does not exist)."""
    try:
        with path.open("rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    except OSError:
        return 0


def _has_line(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return b"\n" in f.read(1 << 16)
    except OSError:
        return False


def run_job(work: Path, source: Path, timeout_s: float) -> dict[str, float | int]:
    """Run the offline job on ``source`` in ``work`` and measure it.

    Returns:
        ``peak_rss_mb``, ``first_result_s`` (-1: none), ``total_s``, ``rows_written``,
        ``exit_code``, ``samples`` (``(seconds, lines)`` checkpoints, as two lists).
    """
    out, db = work / "results.jsonl", work / "tasks.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    began = time.monotonic()
    log = (work / "job.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "foreperson.cli.main", "tickets", str(source), "--db", str(db),
         "--out", str(out), "--no-progress"], cwd=work, env=env, stdout=log,
        stderr=subprocess.STDOUT)
    peak, first, marks = 0, -1.0, []
    next_mark = began + 5.0
    status, usage = 0, None
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        peak = max(peak, _rss_bytes(_tree(proc.pid)))
        now = time.monotonic()
        if first < 0 and _has_line(out):
            first = now - began
        if now >= next_mark:
            marks.append((round(now - began, 1), _lines(out)))
            next_mark = now + 5.0
        if now - began > timeout_s:
            proc.kill()
            os.wait4(proc.pid, 0)
            status = -9
            break
        time.sleep(0.1)
    total = time.monotonic() - began
    log.close()
    proc.returncode = os.waitstatus_to_exitcode(status) if status >= 0 else -9
    if first < 0 and _has_line(out):
        first = total
    high_water = usage.ru_maxrss * 1024 if usage is not None else 0   # kilobytes on Linux
    return {"peak_rss_mb": round(max(peak, high_water) / 2**20, 1),
            "sampled_peak_rss_mb": round(peak / 2**20, 1),
            "first_result_s": round(first, 1), "total_s": round(total, 1),
            "rows_written": _lines(out), "exit_code": proc.returncode,
            "marks_s": [m[0] for m in marks], "marks_lines": [m[1] for m in marks]}


def _kept_pace(result: dict[str, object]) -> tuple[bool, str]:
    """Whether lines were written throughout: at three quarters of the run at least half
    of the lines that run's final rate would have written by then."""
    times, lines = result["marks_s"], result["marks_lines"]
    assert isinstance(times, list) and isinstance(lines, list)
    total, written = float(result["total_s"]), int(result["rows_written"])  # type: ignore[arg-type]
    if not times or written == 0:
        return written > 0, "too short to tell"
    at = 0.75 * total
    seen = max((n for t, n in zip(times, lines, strict=True) if t <= at), default=0)
    expected = written * 0.75
    return seen >= 0.5 * expected, f"{seen:,} of {written:,} lines at {at:.0f} s"


def main() -> None:
    """Parse the options, generate, run, print."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="tickets to generate")
    parser.add_argument("--keep", help="work in this folder and keep it (default: a "
                                       "temporary one, deleted)")
    parser.add_argument("--timeout", type=float, default=6 * 3600.0,
                        help="seconds before the job is killed")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="fp-bench-big-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        source = work / "tickets.csv"
        t0 = time.monotonic()
        size = generate(source, args.rows)
        print(f"generated {args.rows:,} tickets ({size / 2**20:.0f} MB, "
              f"{size / max(args.rows, 1):.0f} bytes each) in {time.monotonic() - t0:.1f} s",
              flush=True)
        result = run_job(work, source, args.timeout)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    rate = result["rows_written"] / max(float(result["total_s"]), 1e-9)
    pace_ok, pace = _kept_pace(result)
    checks = [
        ("peak RSS, process tree", f"{result['peak_rss_mb']} MB",
         f"<= {RSS_TARGET_MB:.0f} MB", float(result["peak_rss_mb"]) <= RSS_TARGET_MB),
        ("first result line", f"{result['first_result_s']} s", f"<= {FIRST_TARGET_S:.0f} s",
         0 <= float(result["first_result_s"]) <= FIRST_TARGET_S),
        ("results written as they complete", pace, ">= half the final rate's lines at 3/4",
         pace_ok),
        ("tickets written", f"{result['rows_written']:,}", f"= {args.rows:,}",
         result["rows_written"] == args.rows and result["exit_code"] == 0),
    ]
    for name, value, target, ok in checks:
        print(f"{name:34} {value:>28}   target {target:38} {'PASS' if ok else 'FAIL'}")
    print(f"{'total':34} {result['total_s']:>26} s   {rate:,.0f} tickets/s")
    print(json.dumps({"bench": "big_input", "rows": args.rows, "input_mb": round(size / 2**20),
                      **{k: v for k, v in result.items() if not k.startswith("marks")},
                      "rows_per_s": round(rate, 1),
                      "pass": all(ok for *_, ok in checks)}))


if __name__ == "__main__":
    main()
