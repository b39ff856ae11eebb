"""A SQLite task database taken away from a running process. Moved over by another
database (an operator restoring a copy with ``mv``), it leaves the running store's
``-wal`` beside the new file: the store's next write stops with an error that says so and
what to delete, and once that is done the new file opens with its own tasks. Deleted under
a ``foreperson worker``, the worker exits with status 1 and one error line, no traceback
and no line per held task."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _pg_procs import wait_until

from foreperson.errors import StoreError
from foreperson.testing import ManualClock
from foreperson.work import SqliteStore, Task

HERE = Path(__file__).resolve().parent
WAIT_S = 30


def python(code: str, *args: str) -> str:
    """Run ``code`` in another Python process; its stdout."""
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                          text=True, timeout=WAIT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


MOVE_OVER = """
import os, sys
from foreperson.work import SqliteStore, Task
new, path = sys.argv[1:3]
store = SqliteStore(new)
store.add([Task("work", {}, id="x1")])
store.close()
os.replace(new, path)
"""

TASK_IDS = """
import sys
from foreperson.work import SqliteStore
store = SqliteStore(sys.argv[1], create=False)
print(" ".join(sorted(t.id for t in store.list_tasks())))
store.close()
"""


def test_a_database_moved_over_a_running_store_stops_its_next_write(tmp_path):
    path = tmp_path / "jobs.db"
    clock = ManualClock()        # the next write comes in the same second as the last
    store = SqliteStore(path, clock=clock)
    try:
        store.add([Task("work", {}, id="t1")])
        python(MOVE_OVER, str(tmp_path / "restored.db"), str(path))
        wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
        assert wal.exists() and shm.exists()       # the old database's, left beside it
        with pytest.raises(StoreError) as info:
            store.add([Task("work", {}, id="t2")])
        message = str(info.value)
        assert "was deleted or replaced while this process had it open" in message
        assert f"{wal} beside the new file is the old database's write-ahead log" in message
        assert f"delete it and {shm}" in message
        with pytest.raises(StoreError, match="was deleted or replaced"):
            store.add([Task("work", {}, id="t3")])             # and every write after
    finally:
        store.close()
    wal.unlink()                                   # what the message says to do
    shm.unlink(missing_ok=True)
    assert python(TASK_IDS, str(path)).split() == ["x1"]      # the new file, intact


@pytest.mark.timeout(60)
def test_a_worker_whose_database_is_deleted_mid_run_stops_in_one_line(tmp_path):
    db = tmp_path / "jobs.db"
    with SqliteStore(db) as store:
        store.add([Task("work", {"ms": 20}, id=f"t{i:04d}") for i in range(2000)])
    log = tmp_path / "tasks.log"
    env = {**os.environ, "FP_TEST_LOG": str(log),
           "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    worker = subprocess.Popen(
        [sys.executable, "-m", "foreperson.cli.main", "worker", "_pg_app:app", "--db",
         str(db), "--concurrency", "4"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        wait_until(lambda: worker.poll() is not None or (
            log.exists() and len(log.read_text().splitlines()) >= 40),
            timeout=WAIT_S, what="40 task lines")
        assert worker.poll() is None, worker.communicate()[1][-3000:]
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        deleted = time.monotonic()
        _, stderr = worker.communicate(timeout=WAIT_S)
        took = time.monotonic() - deleted
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(WAIT_S)
    assert worker.returncode == 1, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, stderr[-3000:]
    assert f"{db} was deleted or replaced while this process had it open" in errors[0]
    assert "cannot give it back" not in stderr, stderr[-3000:]     # no line per task
    assert len([line for line in stderr.splitlines() if "not given back" in line]) <= 1
    assert took < 10, took
