"""SQLite leases run out on the host's boot clock, not on a process's wall clock (issue 21
item 8): a process whose clock runs an hour ahead cannot take a live lease, and a lease
that really ran out is still taken back. PostgreSQL judges leases by the server's clock
(tests/integration/test_postgres_faults.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from foreperson.clock import SystemClock
from foreperson.journal import RunRecord
from foreperson.work import SqliteStore, Status, Task

HOUR = 3600.0


class AheadClock(SystemClock):
    """A wall clock ``offset`` seconds ahead; the host's boot clock as it is."""

    def __init__(self, offset: float) -> None:
        self.offset = offset

    def now(self) -> float:
        return time.time() + self.offset


class WallOnlyAheadClock:
    """A wall clock ``offset`` seconds ahead and no boot clock: what the store had before."""

    def __init__(self, offset: float) -> None:
        self.offset = offset

    def now(self) -> float:
        return time.time() + self.offset


class OtherBootClock(SystemClock):
    """The real wall clock, with a boot id of another boot (as after a restart)."""

    def lease_time(self) -> tuple[str, float] | None:
        found = super().lease_time()
        assert found is not None
        return "another-boot", found[1]


@pytest.fixture
def leased(tmp_path: Path) -> tuple[Path, SqliteStore, Task]:
    """A store file holding one RUNNING task under a live 60 s lease."""
    if SystemClock().lease_time() is None:
        pytest.fail("this host has no boot clock (CLOCK_BOOTTIME and a boot id)")
    path = tmp_path / "work.db"
    holder = SqliteStore(path)
    holder.add([Task(kind="k", payload={"n": 1}, id="t1")])
    (task,) = holder.claim("holder", ["k"], 1, start=True, lease_s=60.0)
    return path, holder, task


def test_a_process_an_hour_ahead_takes_no_live_lease(leased):
    path, holder, task = leased
    ahead = SqliteStore(path, clock=AheadClock(HOUR))
    assert ahead.reclaim_stale() == []
    assert ahead.claim("ahead", ["k"], 1, start=True) == []
    assert ahead.get("t1").status is Status.RUNNING
    assert holder.heartbeat({"t1": task.lease_token}) == set()      # still the holder's
    assert holder.complete("t1", task.lease_token, {"ok": True})


def test_without_the_boot_clock_the_same_process_would_steal_it(leased):
    # the control: judged by its wall clock alone, the lease looks an hour overdue
    path, holder, task = leased
    wall_only = SqliteStore(path, clock=WallOnlyAheadClock(HOUR))
    assert wall_only.reclaim_stale() == ["t1"]
    assert not holder.complete("t1", task.lease_token, {"ok": True})


def test_a_lease_from_another_boot_is_judged_by_the_wall_clock(tmp_path):
    path = tmp_path / "work.db"
    before_restart = SqliteStore(path, clock=OtherBootClock())
    before_restart.add([Task(kind="k", payload={}, id="t1")])
    before_restart.claim("old", ["k"], 1, start=True, lease_s=60.0)
    now = SqliteStore(path)
    assert now.reclaim_stale() == []                  # within its 60 s of wall time
    later = SqliteStore(path, clock=AheadClock(120.0))
    assert later.reclaim_stale() == ["t1"]            # its wall-clock deadline passed
    assert later.get("t1").status is Status.PENDING


def test_a_lease_that_ran_out_is_taken_back(tmp_path):
    path = tmp_path / "work.db"
    store = SqliteStore(path)
    store.add([Task(kind="k", payload={}, id="t1")])
    (task,) = store.claim("gone", ["k"], 1, start=True, lease_s=0.2)
    other = SqliteStore(path)
    deadline = time.monotonic() + 10.0
    while (taken := other.reclaim_stale()) == [] and time.monotonic() < deadline:
        time.sleep(0.05)                  # polling to a deadline: the lease's own time
    assert taken == ["t1"]
    assert store.heartbeat({"t1": task.lease_token}) == {"t1"}     # not the holder's now


def test_a_durable_run_lease_is_judged_by_the_boot_clock_too(tmp_path):
    path = tmp_path / "work.db"
    holder = SqliteStore(path)
    holder.create_run(RunRecord(run_id="r1", agent="a", input={"prompt": "hi"}))
    assert holder.claim_run("r1", "holder", 60.0) is not None
    assert SqliteStore(path, clock=AheadClock(HOUR)).claim_run("r1", "ahead", 60.0) is None
    assert SqliteStore(path, clock=WallOnlyAheadClock(HOUR)).claim_run(
        "r1", "ahead", 60.0) is not None


_AHEAD_PROCESS = textwrap.dedent("""
    import json, sys, time
    from foreperson.work import SqliteStore
    store = SqliteStore(sys.argv[1])
    print(json.dumps({"now": time.time(), "reclaimed": store.reclaim_stale(),
                      "claimed": [t.id for t in store.claim("ahead", ["k"], 5, start=True)]}))
""")


def test_a_worker_process_under_faketime_two_hours_ahead_takes_no_live_lease(leased):
    # a real process whose wall clock is wrong, the host's boot clock untouched
    faketime = shutil.which("faketime")
    if faketime is None:
        pytest.fail("faketime is not installed (Debian package faketime; .ci/run installs it)")
    path, holder, task = leased
    done = subprocess.run(
        [faketime, "-f", "+2h", sys.executable, "-c", _AHEAD_PROCESS, str(path)],
        env={"DONT_FAKE_MONOTONIC": "1", "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["now"] > time.time() + 1.5 * HOUR       # its clock really was ahead
    assert seen["reclaimed"] == [] and seen["claimed"] == []
    assert holder.complete("t1", task.lease_token, {"ok": True})
