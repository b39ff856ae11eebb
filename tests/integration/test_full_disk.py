"""Issue 21 item 4: a full disk is named in one line and nothing is torn. The ticket job
runs with its results file, then its task database, on a tmpfs of a few hundred KB; it
stops with exit status 1 and one line naming the disk and the file (no traceback), every
results line is whole, and after the disk is given room the same command finishes every
ticket exactly once."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest

TICKETS = 1500


@pytest.fixture
def small_disk():
    """A tmpfs mounted for the test (root is needed, as in CI); yields (path, resize)."""
    where = Path(tempfile.mkdtemp(prefix="foreperson-full-"))
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160k", "tmpfs", str(where)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.fail(f"this test mounts a small tmpfs and needs root: {mounted.stderr.strip()}")

    def resize(size: str) -> None:
        subprocess.run(["mount", "-o", f"remount,size={size}", str(where)], check=True)

    try:
        yield where, resize
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)
        where.rmdir()


def tickets_csv(path: Path) -> list[str]:
    ids = [f"T{i:05d}" for i in range(TICKETS)]
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "subject", "body"])
        for i, ticket_id in enumerate(ids):
            writer.writerow([ticket_id, "Refund" if i % 2 else "Crash",
                             "I was charged twice for my plan" if i % 2
                             else "The app crashes when I open settings"])
    return ids


def job(tmp_path: Path, db: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "foreperson.cli.main", "tickets", "in.csv",
                           "--db", str(db), "--out", str(out), "--no-progress"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)


def whole_lines(out: Path) -> Counter[str]:
    data = out.read_bytes()
    assert not data or data.endswith(b"\n"), data[-200:]       # no torn last line
    return Counter(json.loads(line)["id"] for line in data.splitlines())


def stops_in_one_line(done: subprocess.CompletedProcess[str], file: Path) -> None:
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if "the disk is full" in line]
    assert len(errors) == 1 and str(file) in errors[0], done.stderr[-2000:]


@pytest.mark.timeout(600)
def test_a_full_disk_under_the_results_file(small_disk, tmp_path):
    disk, resize = small_disk
    ids = tickets_csv(tmp_path / "in.csv")
    out = disk / "results.jsonl"
    first = job(tmp_path, tmp_path / "jobs.db", out)
    stops_in_one_line(first, out)
    assert 0 < sum(whole_lines(out).values()) < TICKETS
    resize("20m")
    again = job(tmp_path, tmp_path / "jobs.db", out)
    assert again.returncode == 0, again.stderr[-2000:]
    counts = whole_lines(out)
    assert sorted(counts) == ids and set(counts.values()) == {1}


@pytest.mark.timeout(600)
def test_a_full_disk_under_the_task_database(small_disk, tmp_path):
    disk, resize = small_disk
    ids = tickets_csv(tmp_path / "in.csv")
    db = disk / "jobs.db"
    first = job(tmp_path, db, tmp_path / "results.jsonl")
    stops_in_one_line(first, db)
    resize("40m")
    again = job(tmp_path, db, tmp_path / "results.jsonl")
    assert again.returncode == 0, again.stderr[-2000:]
    counts = whole_lines(tmp_path / "results.jsonl")
    assert sorted(counts) == ids and set(counts.values()) == {1}
