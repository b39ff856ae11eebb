"""A full disk under a durable run's journal: the run's SQLite file (runs, steps, tasks)
lives on a tmpfs of 1 MB. A run killed mid-way is resumed with ``foreperson runs resume``
while one of its steps is larger than the disk: the command stops with exit status 1 and
one line naming the disk and the file, no traceback. Once the disk has room the same
command finishes the run, each tool call made once and each step recorded once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from durable_counting import lines

from foreperson.runtime import SqliteRuntime

HERE = Path(__file__).resolve().parent
WAIT_S = 60


@pytest.fixture
def small_disk():
    """A tmpfs of 1 MB mounted for the test (root is needed, as in CI); yields
    (path, resize)."""
    where = Path(tempfile.mkdtemp(prefix="foreperson-full-journal-"))
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)],
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


def environment(workdir: Path, **shape: str) -> dict[str, str]:
    return {**os.environ, "FP_WORKDIR": str(workdir), "FP_STEPS": "6", **shape,
            "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}


def start_and_kill(db: Path, workdir: Path) -> None:
    """Run ``r1`` in a process until turn 3, then SIGKILL it (turns 0-2 are recorded)."""
    child = subprocess.Popen([sys.executable, str(HERE / "durable_counting.py"),
                              f"sqlite:{db}", "r1"], stdout=subprocess.PIPE, text=True,
                             env=environment(workdir, FP_PAUSE_AT="3"), cwd=workdir)
    try:
        assert child.stdout is not None
        said = child.stdout.readline().strip()
        assert said == "paused", said
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=WAIT_S) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=WAIT_S)
        assert child.stdout is not None
        child.stdout.close()


def resume(db: Path, workdir: Path) -> subprocess.CompletedProcess[str]:
    """``foreperson runs resume r1``, turn 4's tool call carrying a 2 MB note."""
    return subprocess.run(
        [sys.executable, "-m", "foreperson.cli.main", "runs", "resume", "r1", "--agent",
         f"{HERE / 'durable_counting.py'}:counting_agent", "--db", str(db)],
        capture_output=True, text=True, timeout=WAIT_S, cwd=workdir,
        env=environment(workdir, FP_BIG_AT="4", FP_BIG_BYTES=str(2 * 1024 * 1024)))


@pytest.mark.timeout(120)
def test_a_full_disk_under_the_journal_stops_in_one_line_and_the_run_resumes(small_disk,
                                                                           tmp_path):
    disk, resize = small_disk
    db = disk / "runs.db"
    start_and_kill(db, tmp_path)
    assert lines(tmp_path / "count.txt") == ["step0", "step1", "step2"]

    full = resume(db, tmp_path)
    assert full.returncode == 1, full.stderr[-3000:]
    assert "Traceback" not in full.stderr, full.stderr[-3000:]
    said = [line for line in full.stderr.splitlines() if line.strip()]
    assert len(said) == 1, full.stderr[-3000:]
    assert "the disk is full" in said[0] and str(db) in said[0], said
    assert str(disk) in said[0].split("the disk is full", 1)[1], said   # the disk, named
    # the tool call before the step that did not fit ran; the one after it did not
    assert lines(tmp_path / "count.txt") == ["step0", "step1", "step2", "step3"]

    resize("20m")
    again = resume(db, tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Traceback" not in again.stderr, again.stderr[-3000:]
    assert again.stdout.splitlines()[0] == "run r1: completed", again.stdout
    assert lines(tmp_path / "count.txt") == [f"step{i}" for i in range(6)]    # once each
    # each model call once, but turn 4's: its record was the write the full disk refused
    assert lines(tmp_path / "model.txt") == [
        "turn0", "turn1", "turn2", "turn3", "turn4", "turn4", "turn5", "turn6"]
    with SqliteRuntime(str(db)) as runtime:
        assert runtime.get_run("r1").status == "completed"
        steps = runtime.steps("r1")
    kinds = Counter(step.kind for step in steps)
    assert len({step.key for step in steps}) == len(steps) == 13, [s.key for s in steps]
    assert kinds["model_call"] == 7, kinds
