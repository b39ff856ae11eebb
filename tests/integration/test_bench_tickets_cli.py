"""benchmarks/bench_tickets.py as someone runs it from their own folder (issue 23 item 7):
a relative INPUT works, and a failing run shows the child's own error."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks" / "bench_tickets.py"


def test_a_relative_input_is_benchmarked_and_a_failing_child_is_shown(tmp_path):
    shutil.copy(ROOT / "examples" / "tickets_sample.csv", tmp_path / "s.csv")
    done = subprocess.run([sys.executable, str(BENCH), "s.csv", "--repeat", "1"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    row = json.loads(done.stdout.splitlines()[-1])
    assert (row["input"], row["tickets"]) == ("s.csv", 25) and row["ratio"] > 0

    missing = subprocess.run([sys.executable, str(BENCH), "nope.csv"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and "bench_tickets: nope.csv: no such file" in missing.stderr

    (tmp_path / "bad.csv").write_text("id,subject,body\nA1,x,\"unclosed\n")
    bad = subprocess.run([sys.executable, str(BENCH), "bad.csv", "--repeat", "1"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 1
    assert "failed (exit" in bad.stderr and "bad.csv" in bad.stderr
