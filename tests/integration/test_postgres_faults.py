"""Workers on PostgreSQL under real faults: ``foreperson worker`` subprocesses killed with
SIGKILL, frozen with SIGSTOP past their lease, cut off from the database, and a task
that kills whoever runs it.

What users rely on, checked on the database and on the tasks' own log:
no task is lost, none is completed twice (a trigger records every transition to
COMPLETED), each side effect happens at least once, always with the same idempotency
key, and more than once only when the process that did it was killed before it could
record it done.
"""

from __future__ import annotations

import collections
import random
import signal

import pytest
from _pg_procs import Cluster, Db, wait_until

from foreperson.work import Task
from foreperson.work.stores.postgres import PostgresStore

pytestmark = pytest.mark.postgres


@pytest.fixture
def cluster(pg_dsn, pg_schema, tmp_path):
    store = PostgresStore(pg_dsn, schema=pg_schema, pool_size=2)
    store.close()
    db = Db(pg_dsn, pg_schema)
    db.record_completions()
    group = Cluster(pg_dsn, pg_schema, tmp_path)
    yield group, db
    group.stop_all()
    for worker in group.workers:
        worker.kill()
    db.close()


def add(dsn: str, schema: str, tasks: list[Task]) -> None:
    with PostgresStore(dsn, schema=schema, pool_size=2) as store:
        store.add(tasks)


def check_effects(group: Cluster, db: Db, ids: list[str], *, outage: bool = False) -> int:
    """Every task's side effect was done at least once, each time with the task's own
    key; an earlier doing was repeated only when its process was SIGKILLed before
    recording it done (or, with ``outage``, when the database was away at that moment).
    Returns how many were repeated."""
    done: dict[str, list[tuple[int, str]]] = collections.defaultdict(list)
    for w in group.lines():
        if w[0] == "effect":
            done[w[1]].append((int(w[3]), w[4]))
    repeats = 0
    for task_id in ids:
        assert done[task_id], f"{task_id}: side effect never done"
        assert {key for _, key in done[task_id]} == {f"task:{task_id}:send"}
        for pid, _ in done[task_id][:-1]:
            assert outage or pid in group.killed, (
                f"{task_id}: done twice, the first by a live worker")
        repeats += len(done[task_id]) - 1
    states = dict(db.rows("SELECT task_id, state FROM effects"))
    assert all(states[task_id] == "done" for task_id in ids)
    return repeats


@pytest.mark.timeout(150)
def test_sigkill_rounds_lose_nothing_and_complete_nothing_twice(cluster, pg_dsn, pg_schema):
    group, db = cluster
    rng = random.Random(7)
    ids = [f"t{i:04d}" for i in range(2000)]
    add(pg_dsn, pg_schema,
        [Task("work", {"ms": rng.randint(5, 30)}, id=i, max_attempts=20) for i in ids])
    live = [group.start(concurrency=4) for _ in range(3)]
    for fraction, victims in ((0.15, 1), (0.4, 2), (0.65, 1)):
        wait_until(lambda f=fraction: db.completed() >= f * len(ids), timeout=60,
                   what=f"{fraction:.0%} of the tasks to complete")
        for _ in range(victims):
            victim = live.pop(rng.randrange(len(live)))
            wait_until(lambda v=victim: db.value(
                "SELECT count(*) FROM tasks WHERE assigned_to = %s "
                "AND status IN ('assigned', 'running')", (v.name,)),
                timeout=10, what="the victim to hold tasks")
            group.kill(victim)
            live.append(group.start(concurrency=4))
    wait_until(lambda: db.completed() == len(ids), timeout=90, what="every task to complete")

    assert db.counts() == {"completed": len(ids)}
    assert db.completions() == collections.Counter(ids)        # 0 lost, 0 completed twice
    reclaimed = db.value("SELECT count(*) FROM tasks WHERE error IS NULL AND "
                         "errors::text LIKE '%%stopped heartbeating%%'")
    assert reclaimed > 0                  # the kills did hit tasks in flight
    repeated = check_effects(group, db, ids)
    assert repeated <= 4 * 4              # at most the tasks in flight at a kill
    assert all(w.proc.poll() is None for w in live)


@pytest.mark.timeout(60)
def test_stopped_worker_past_its_lease_has_every_write_refused(cluster, pg_dsn, pg_schema):
    group, db = cluster
    add(pg_dsn, pg_schema, [Task("slow", {"s": 2.5}, id="slow-1")])
    a = group.start(kinds="slow", concurrency=1, stale_after=1.0)
    wait_until(lambda: db.value("SELECT assigned_to FROM tasks WHERE id = 'slow-1' "
                                "AND status = 'running'") == a.name,
               timeout=15, what="worker A to run the task")
    a.kill(signal.SIGSTOP)                                   # frozen, lease running out
    b = group.start(kinds="slow", concurrency=1, stale_after=1.0)
    wait_until(lambda: db.value("SELECT status FROM tasks WHERE id = 'slow-1'") == "completed",
               timeout=30, what="worker B to finish the reclaimed task")
    a.kill(signal.SIGCONT)
    wait_until(lambda: "result discarded, lease lost" in a.stderr(), timeout=15,
               what="worker A to try to complete and be refused")

    row = db.rows("SELECT result, attempts, assigned_to FROM tasks WHERE id = 'slow-1'")[0]
    assert row == ({"by": b.pid}, 2, b.name)
    assert db.completions() == {"slow-1": 1}
    effects = [w for w in group.lines() if w[0] == "effect"]
    assert [int(w[3]) for w in effects] == [b.pid]          # A's once() was refused too
    assert "lease lost" in a.stderr()                        # its heartbeat was refused
    assert a.proc.poll() is None and b.proc.poll() is None


@pytest.mark.timeout(120)
def test_workers_reconnect_after_the_database_goes_away(cluster, pg_dsn, pg_schema):
    group, db = cluster
    rng = random.Random(11)
    ids = [f"r{i:03d}" for i in range(600)]
    add(pg_dsn, pg_schema,
        [Task("work", {"ms": rng.randint(10, 25)}, id=i, max_attempts=20) for i in ids])
    workers = [group.start(concurrency=4, stale_after=6.0) for _ in range(2)]
    wait_until(lambda: db.completed() >= 150, timeout=60, what="a quarter of the tasks")
    how = db.outage(2.0)
    print(f"outage: {how}")
    wait_until(lambda: db.completed() == len(ids), timeout=90,
               what=f"every task to complete after the outage ({how})")

    assert db.counts() == {"completed": len(ids)}
    assert db.completions() == collections.Counter(ids)
    # nobody was killed: an effect is repeated (same key) only if the database went away
    # between doing it and recording it done
    assert check_effects(group, db, ids, outage=True) <= 2 * 4
    assert all(w.proc.poll() is None for w in workers), "a worker died in the outage"
    noticed = ("is unreachable", "store unavailable", "heartbeat failed")
    assert all(any(sign in w.stderr() for sign in noticed) for w in workers)


@pytest.mark.timeout(90)
def test_poison_task_ends_dead_after_max_attempts_and_blocks_nothing(cluster, pg_dsn,
                                                                     pg_schema):
    group, db = cluster
    ids = [f"p{i:03d}" for i in range(150)]
    add(pg_dsn, pg_schema, [Task("poison", id="poison", max_attempts=2)]
        + [Task("work", {"ms": 20}, id=i, max_attempts=20) for i in ids])
    live = [group.start(concurrency=2, stale_after=1.0) for _ in range(2)]

    def finished() -> bool:
        for i, worker in enumerate(live):          # a crashed worker is restarted
            if worker.proc.poll() is not None:
                group.killed.add(worker.pid)
                live[i] = group.start(concurrency=2, stale_after=1.0)
        return db.value("SELECT count(*) FROM tasks WHERE status IN ('completed', 'dead')") \
            == len(ids) + 1

    wait_until(finished, timeout=60, what="the poison task to die and the rest to finish")
    status, attempts, errors = db.rows(
        "SELECT status, attempts, errors FROM tasks WHERE id = 'poison'")[0]
    assert (status, attempts) == ("dead", 2)                 # every run that crashed counts
    assert all("stopped heartbeating" in e["error"] for e in errors) and len(errors) == 2
    assert db.completed() == len(ids)
    assert db.completions() == collections.Counter(ids)
    starts = collections.Counter(w[1] for w in group.lines() if w[0] == "start")
    # a prefetched run that kills its worker before its start is recorded is not
    # counted, once: its next start is recorded before it runs
    assert 2 <= starts["poison"] <= 3


@pytest.mark.timeout(120)
def test_many_slots_over_short_tasks_never_deadlock(cluster, pg_dsn, pg_schema):
    """Heartbeats, batched completions, claims and sweeps of 3 processes x 16 slots over
    5,000 tasks of 1-20 ms take row locks in one order: the server counts no deadlock."""
    group, db = cluster
    rng = random.Random(5)
    ids = [f"d{i:04d}" for i in range(5000)]
    before = db.value("SELECT deadlocks FROM pg_stat_database WHERE datname = "
                      "current_database()")
    add(pg_dsn, pg_schema, [Task("work", {"ms": rng.randint(1, 20)}, id=i) for i in ids])
    workers = [group.start(concurrency=16, stale_after=1.5) for _ in range(3)]
    wait_until(lambda: db.completed() == len(ids), timeout=100, what="every task to complete")
    assert db.completions() == collections.Counter(ids)
    db.conn.execute("SELECT pg_stat_clear_snapshot()")
    after = db.value("SELECT deadlocks FROM pg_stat_database WHERE datname = "
                     "current_database()")
    assert after == before, f"{after - before} deadlock(s) detected"
    assert not any("deadlock" in w.stderr() for w in workers)


@pytest.mark.timeout(150)
def test_a_kill_storm_burns_no_attempt_of_a_task_that_never_ran(cluster, pg_dsn, pg_schema):
    """Worker processes killed right after claiming (their prefetched tasks not started)
    over and over: no task ends DEAD, and every counted attempt either completed or was
    recorded as running when its worker died."""
    group, db = cluster
    rng = random.Random(3)
    ids = [f"s{i:04d}" for i in range(1500)]
    kills = 30
    # A victim dies with its slots' tasks RUNNING too (their attempts count, as they
    # should), and a task reclaimed from one victim can be the next victim's first
    # claim; more attempts than kills means no task can go DEAD that way, so what is
    # checked is only that no attempt is counted for a task that never ran.
    add(pg_dsn, pg_schema, [Task("work", {"ms": rng.randint(5, 20)}, id=i,
                                 max_attempts=kills + 1) for i in ids])
    live = [group.start(concurrency=4, prefetch=4, stale_after=1.0) for _ in range(3)]
    for _ in range(kills):
        victim = live.pop(rng.randrange(len(live)))
        wait_until(lambda v=victim: db.value(
            "SELECT count(*) FROM tasks WHERE assigned_to = %s AND status = 'assigned'",
            (v.name,)) or db.completed() == len(ids), timeout=20,
            what="the victim to hold prefetched tasks")
        group.kill(victim)
        live.append(group.start(concurrency=4, prefetch=4, stale_after=1.0))
    wait_until(lambda: db.completed() == len(ids), timeout=90, what="every task to complete")
    assert db.counts() == {"completed": len(ids)}            # none DEAD
    assert db.completions() == collections.Counter(ids)
    attempts, crashed = db.rows(
        "SELECT sum(attempts), sum(jsonb_array_length(errors)) FROM tasks")[0]
    assert attempts == len(ids) + crashed                    # each counted attempt ran
