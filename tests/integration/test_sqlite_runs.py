"""Real SQLite files, real threads, real processes killed with SIGKILL."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio

from foreperson.work import SqliteStore, Status, Supervisor, Task, Worker, current_task
from foreperson.work.stores import sqlite as sqlite_store

HERE = Path(__file__).parent


def wait_for(condition, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def test_every_task_runs_exactly_once_under_64_concurrent_workers(tmp_path):
    store = SqliteStore(tmp_path / "tasks.db")
    sup = Supervisor(store)
    runs = collections.Counter()
    effects = collections.Counter()
    guard = threading.Lock()

    async def work(task):
        await anyio.sleep(0.001)
        with guard:
            runs[task.id] += 1
        if current_task().once("send"):
            with guard:
                effects[task.id] += 1
        return {"id": task.id}

    for i in range(64):
        sup.register(Worker(f"w{i}", {"k"}, fn=work))
    sup.add_tasks([Task("k", id=f"t{i}") for i in range(2000)])
    report = sup.run_sync()
    assert report.stats.counts[Status.COMPLETED] == 2000
    assert len(runs) == 2000 and set(runs.values()) == {1}
    assert len(effects) == 2000 and set(effects.values()) == {1}
    store.close()


def test_restart_on_the_same_file_finds_every_unfinished_task(tmp_path):
    path = tmp_path / "tasks.db"
    first = SqliteStore(path)
    first.add([Task("k", id=str(i)) for i in range(10)])
    done = first.claim("w", {"k"}, 3)
    for task in done:
        first.complete(task.id, task.lease_token, {"ok": 1})
    first.close()
    again = SqliteStore(path)
    assert again.stats().counts[Status.PENDING] == 7
    assert {t.id for t in again.ready({"k"}, 100)} == {str(i) for i in range(3, 10)}
    assert again.schema_version == len(sqlite_store.MIGRATIONS)


def test_a_version_1_file_migrates_to_the_fresh_schema_with_its_tasks(tmp_path):
    import sqlite3

    old = tmp_path / "v1.db"
    conn = sqlite3.connect(old, isolation_level=None)
    conn.executescript(sqlite_store.MIGRATIONS[0] + "PRAGMA user_version = 1;")
    columns = ("id, kind, payload, status, max_attempts, created_at, error, heartbeat_at, "
               "lease_token, assigned_to, attempts")
    conn.executemany(f"INSERT INTO tasks ({columns}) VALUES (?,?,?,?,?,?,?,?,?,?,?)", [
        ("a", "k", "{}", "dead", 3, 1.0, "boom", None, None, None, 1),
        ("b", "k", "{}", "dead", 3, 2.0, "dependency a is dead", None, None, None, 0),
        ("held", "k", "{}", "running", 3, 3.0, None, 100.0, "tok", "w", 1)])
    conn.execute("INSERT INTO task_deps VALUES ('b', 'a')")
    conn.close()
    migrated = SqliteStore(old)
    fresh = SqliteStore(tmp_path / "fresh.db")
    schema = "SELECT type, name, sql FROM sqlite_master ORDER BY name"
    assert migrated._read(schema) == fresh._read(schema)
    assert migrated.schema_version == fresh.schema_version == len(sqlite_store.MIGRATIONS)
    assert migrated.get("b").reason == "dependency_dead"         # parked, by its code now
    assert migrated.get("held").lease_expires_at.timestamp() == 190.0
    assert migrated.retry_dead(["a"]) == ["a", "b"]
    assert migrated.reclaim_stale() == ["held"]                  # its lease expired long ago


def test_a_killed_worker_process_task_is_reclaimed_and_run_again(tmp_path):
    db, log = tmp_path / "tasks.db", tmp_path / "log.txt"
    log.touch()
    store = SqliteStore(db)
    store.add([Task("k", id="victim", max_attempts=3)])
    proc = subprocess.Popen([sys.executable, str(HERE / "sqlite_worker_process.py"),
                             str(db), str(log), "hang"])
    try:
        wait_for(lambda: "start victim" in log.read_text(), what="the worker to start")
        assert store.get("victim").status.active
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    sup = Supervisor(store, stale_after=1.0, sweep_every_s=0.1)
    sup.register(Worker("survivor", {"k"}, fn=lambda task: {"pid": os.getpid()}))
    report = sup.run_sync(idle_wait_s=0.05)
    task = store.get("victim")
    assert task.status is Status.COMPLETED and task.result == {"pid": os.getpid()}
    assert task.attempts == 2 and report.reclaimed == 1
    assert "stopped heartbeating" in task.errors[0]["error"]


def test_worker_processes_killed_mid_run_lose_nothing(tmp_path):
    db, log = tmp_path / "tasks.db", tmp_path / "log.txt"
    log.touch()
    store = SqliteStore(db)
    store.add([Task("k", id=f"t{i}") for i in range(300)])
    script = str(HERE / "sqlite_worker_process.py")
    procs = [subprocess.Popen([sys.executable, script, str(db), str(log), "work"])
             for _ in range(3)]
    wait_for(lambda: log.read_text().count("end ") >= 40, what="some progress")
    procs[0].send_signal(signal.SIGKILL)
    procs[0].wait()
    wait_for(lambda: log.read_text().count("end ") >= 120, what="more progress")
    procs[1].send_signal(signal.SIGKILL)
    procs[1].wait()
    assert procs[2].wait(timeout=60) == 0
    stats = store.stats()
    assert stats.counts[Status.COMPLETED] == 300, stats.counts
    ends = collections.Counter(line.split()[1] for line in log.read_text().splitlines()
                               if line.startswith("end "))
    completed_by = {t.id: t.result["pid"] for t in store.list_tasks()}
    assert len(completed_by) == 300
    # a task may have *ended* in a killed process after its lease was already given away,
    # but the stored result always comes from one attempt, and every task ended at least once
    assert set(ends) == set(completed_by)


def test_a_paused_worker_cannot_complete_after_its_lease_was_taken(tmp_path):
    db = tmp_path / "tasks.db"
    SqliteStore(db).add([Task("k", id="t")])
    paused = threading.Event()
    resume = threading.Event()

    def slow(task):
        paused.set()
        resume.wait(30)
        return {"by": "paused"}

    # supervisor A claims with a 0.3 s lease and never heartbeats (as if its process
    # were stopped); B's own lease is long, but the task's lease is the one A took
    a = Supervisor(SqliteStore(db), stale_after=0.3, prefetch=0)
    a.heartbeat = lambda: None
    a.register(Worker("a", {"k"}, fn=slow))
    reports = {}
    runner = threading.Thread(target=lambda: reports.setdefault("a", a.run_sync()))
    runner.start()
    assert paused.wait(10)

    b = Supervisor(SqliteStore(db), stale_after=60, sweep_every_s=0.05)
    b.register(Worker("b", {"k"}, fn=lambda task: {"by": "b"}))
    b.run_sync(idle_wait_s=0.02)
    resume.set()
    runner.join(30)
    task = SqliteStore(db).get("t")
    assert task.result == {"by": "b"} and task.attempts == 2
    assert reports["a"].lease_lost == 1


def test_once_tells_a_worker_that_lost_its_lease_to_stop(tmp_path):
    import pytest

    from foreperson.errors import LeaseLost
    from foreperson.work import TaskContext

    store = SqliteStore(tmp_path / "tasks.db")
    store.add([Task("k", id="t")])
    first = store.claim("old", {"k"}, 1)[0]
    old = TaskContext(first, "old", store)
    assert old.once("send")
    assert not old.once("send")                  # this attempt claimed it already
    store.release("t", first.lease_token)        # gone before saying it was done
    second = store.claim("new", {"k"}, 1)[0]
    with pytest.raises(LeaseLost, match="lease lost"):
        old.once("other")
    with pytest.raises(LeaseLost):
        old.done("send")
    new = TaskContext(second, "new", store)
    assert new.effect_key("send") == old.effect_key("send") == "task:t:send"
    assert new.once("send")                      # at least once: done again, same key
    new.done("send")
    store.release("t", second.lease_token)
    third = store.claim("third", {"k"}, 1)[0]
    assert not TaskContext(third, "third", store).once("send")   # done: never again
