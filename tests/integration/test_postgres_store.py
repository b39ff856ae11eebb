"""PostgresStore beyond the shared contract: schema versions, limits that hold across
machines (several stores = several connection pools, as on several machines), rate
limits at claim time, wake-ups, the server's clock, and the worker process commands."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time

import anyio
import psycopg
import pytest
from _pg_catalog import catalog
from _pg_procs import Cluster, Db, wait_until
from psycopg import sql

from foreperson.errors import MissingDependency, RateLimited, StoreError
from foreperson.work import Status, Supervisor, Task, Worker
from foreperson.work.stores import _pg_schema
from foreperson.work.stores.postgres import PostgresStore, migrate_schema

pytestmark = pytest.mark.postgres


@pytest.fixture
def stores(pg_dsn, pg_schema):
    """``stores(n, clock=None)``: n stores on one schema, like n machines."""
    made: list[PostgresStore] = []

    def open_(n: int = 1, clock=None) -> list[PostgresStore]:
        out = [PostgresStore(pg_dsn, schema=pg_schema, clock=clock, pool_size=4)
               for _ in range(n)]
        made.extend(out)
        return out

    yield open_
    for store in made:
        store.close()


# -- schema versions ---------------------------------------------------------------

def test_migrating_from_version_1_gives_the_fresh_schema(pg_dsn, pg_schema):
    old = pg_schema + "_v1"
    try:
        assert migrate_schema(pg_dsn, schema=old, target=1) == (0, 1)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:     # a task from version 1
            conn.execute(sql.SQL("INSERT INTO {}.tasks (id, kind, payload, max_attempts, "
                                 "created_at) VALUES ('old', 'k', %s, 3, now())").format(
                sql.Identifier(old)), ('{"a": 1}',))
            conn.execute(sql.SQL("INSERT INTO {}.tasks (id, kind, payload, max_attempts, "
                                 "created_at, status, error) VALUES ('parked', 'k', '{{}}', "
                                 "3, now(), 'dead', 'dependency gone is dead')").format(
                sql.Identifier(old)))
        assert migrate_schema(pg_dsn, schema=old) == (1, _pg_schema.LATEST)
        assert migrate_schema(pg_dsn, schema=pg_schema) == (0, _pg_schema.LATEST)
        migrated, fresh = catalog(pg_dsn, old), catalog(pg_dsn, pg_schema)
        assert migrated == fresh
        assert len(fresh["functions"]) >= 9 and len(fresh["triggers"]) == 7
        with PostgresStore(pg_dsn, schema=old, migrate=False) as store:
            assert store.schema_version == _pg_schema.LATEST
            [task] = store.claim("w", {"k"}, 5, start=True)
            assert (task.id, task.payload, task.attempts) == ("old", {"a": 1}, 1)
            assert store.get("parked").reason == "dependency_dead"   # parked, by its code
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(old)))


def test_first_use_from_many_processes_at_once_migrates_once(pg_dsn, pg_schema):
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def open_one() -> None:
        barrier.wait()
        try:
            PostgresStore(pg_dsn, schema=pg_schema, pool_size=2).close()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    db = Db(pg_dsn, pg_schema)
    try:
        assert [r[0] for r in db.rows("SELECT version FROM schema_migrations ORDER BY 1")] \
            == list(range(1, _pg_schema.LATEST + 1))
    finally:
        db.close()


def test_a_newer_or_missing_schema_is_refused_with_the_fix(pg_dsn, pg_schema, stores):
    with pytest.raises(StoreError, match="foreperson db migrate"):
        PostgresStore(pg_dsn, schema=pg_schema, migrate=False)
    stores(1)
    db = Db(pg_dsn, pg_schema)
    db.conn.execute("INSERT INTO schema_migrations (version) VALUES (99)")
    db.close()
    with pytest.raises(StoreError, match="upgrade foreperson"):
        PostgresStore(pg_dsn, schema=pg_schema)


def test_driver_errors_are_store_errors_with_the_cause_kept():
    with pytest.raises(StoreError, match="cannot connect") as info:
        PostgresStore("postgresql://postgres@127.0.0.1:1/none", connect_timeout_s=1)
    assert isinstance(info.value.__cause__, psycopg.Error)


def test_importing_the_stores_does_not_import_psycopg():
    code = ("import sys, foreperson, foreperson.work.stores, foreperson.cli.main; "
            "assert 'psycopg' not in sys.modules, 'psycopg imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_without_psycopg_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(MissingDependency, match=r"pip install 'foreperson\[postgres\]'"):
        PostgresStore("postgresql://localhost/x")


# -- the server's clock ------------------------------------------------------------------

def test_staleness_is_judged_by_the_servers_clock(stores, pg_dsn, pg_schema):
    [store] = stores(1)
    store.add([Task("k", id="old"), Task("k", id="fresh")])
    store.claim("w", {"k"}, 2, lease_s=5)
    db = Db(pg_dsn, pg_schema)
    try:   # leases as the server sees them: expired 5 s ago, and 2 s to go
        db.conn.execute("UPDATE tasks SET lease_expires_at = now() - interval '5 s' "
                        "WHERE id = 'old'")
        db.conn.execute("UPDATE tasks SET lease_expires_at = now() + interval '2 s' "
                        "WHERE id = 'fresh'")
        assert store.reclaim_stale() == ["old"]
        store.heartbeat({"fresh": store.get("fresh").lease_token})
        left = db.value("SELECT extract(epoch FROM lease_expires_at - now()) FROM tasks "
                        "WHERE id = 'fresh'")
        assert 4 < float(left) <= 5              # renewed by the server's clock
    finally:
        db.close()


def test_a_backoff_is_a_delay_added_to_the_servers_clock(stores, pg_dsn, pg_schema):
    [store] = stores(1)
    store.add([Task("k", id="t")])
    [task] = store.claim("w", {"k"}, 1)
    assert store.fail("t", task.lease_token, "boom", retry_at=time.time() + 30) is Status.FAILED
    db = Db(pg_dsn, pg_schema)
    try:
        delay = float(db.value("SELECT extract(epoch FROM not_before - now()) FROM tasks"))
    finally:
        db.close()
    assert 28 < delay <= 30


# -- limits that hold across machines ----------------------------------------------------

def test_a_lock_holds_across_machines(stores):
    a, b = stores(2)
    a.add([Task("k", id="x1", locks=["report.csv"]), Task("k", id="x2", locks=["report.csv"])])
    [held] = a.claim("a", {"k"}, 5)
    assert b.claim("b", {"k"}, 5) == []
    assert a.complete(held.id, held.lease_token, None)
    assert [t.id for t in b.claim("b", {"k"}, 5)] == ["x2"]


def test_max_active_holds_across_machines_under_concurrency(stores):
    machines = stores(3)
    machines[0].set_limit("gpu", max_active=2)
    machines[0].add([Task("k", id=f"g{i}", locks=["gpu"]) for i in range(40)]
                    + [Task("k", id=f"free{i}") for i in range(10)])
    holding, most, done = 0, 0, []
    guard = threading.Lock()
    barrier = threading.Barrier(6)

    def run(store: PostgresStore, name: str) -> None:
        nonlocal holding, most
        barrier.wait()
        while True:
            got = store.claim(name, {"k"}, 1)
            if not got:
                if len(done) >= 50:
                    return
                continue
            task = got[0]
            gpu = task.locks == ["gpu"]
            if gpu:
                with guard:
                    holding += 1
                    most = max(most, holding)
            time.sleep(0.005)
            if gpu:
                with guard:
                    holding -= 1
            assert store.complete(task.id, task.lease_token, None)
            with guard:
                done.append(task.id)

    threads = [threading.Thread(target=run, args=(machines[i % 3], f"m{i}")) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(done) == sorted([f"g{i}" for i in range(40)] + [f"free{i}" for i in range(10)])
    assert most == 2


def test_a_kind_limit_caps_every_task_of_the_kind(stores):
    [store] = stores(1)
    store.set_limit("kind:classify", max_active=2)
    store.add([Task("classify", id=f"c{i}") for i in range(5)] + [Task("other", id="o")])
    assert [t.id for t in store.claim("w", {"classify", "other"}, 10)] == ["c0", "c1", "o"]
    assert store.limits()["kind:classify"].max_active == 2
    store.remove_limit("kind:classify")
    assert len(store.claim("w", {"classify"}, 10)) == 3


def test_a_rate_limit_is_a_token_bucket_taken_at_claim(stores, clock):
    [store] = stores(1, clock=clock)
    store.set_limit("model-api", rate_per_s=10, burst=3)
    store.add([Task("k", id=f"r{i}", locks=["model-api"]) for i in range(10)]
              + [Task("k", id="plain")])
    first = store.claim("w", {"k"}, 20)
    assert [t.id for t in first] == ["r0", "r1", "r2", "plain"]   # the burst, then wait
    clock.advance(0.1)
    assert [t.id for t in store.claim("w", {"k"}, 20)] == ["r3"]   # one token per 0.1 s
    assert store.claim("w", {"k"}, 20) == []
    clock.advance(0.35)
    assert [t.id for t in store.claim("w", {"k"}, 20)] == ["r4", "r5", "r6"]


def test_a_429_gives_the_attempt_back_and_closes_the_resource_everywhere(stores, clock):
    a, b = stores(2, clock=clock)
    a.set_limit("model-api", rate_per_s=100, burst=5)
    a.add([Task("k", id=f"r{i}", locks=["model-api"]) for i in range(4)])
    [task] = a.claim("a", {"k"}, 1, start=True)
    assert a.back_off(task.id, task.lease_token, "model-api", 2.0)
    back = a.get(task.id)
    assert back.status is Status.PENDING and back.attempts == 0
    assert "rate limited by model-api" in back.error
    assert not a.back_off(task.id, task.lease_token, "model-api", 2.0)   # fenced
    clock.advance(1.9)
    assert b.claim("b", {"k"}, 10) == []                 # closed on every machine
    clock.advance(0.2)
    assert [t.id for t in b.claim("b", {"k"}, 10, start=True)] == ["r0", "r1", "r2", "r3"]
    assert b.get("r0").attempts == 1


def test_a_rate_limit_holds_across_machines_in_real_time(stores):
    machines = stores(2)
    machines[0].set_limit("api", rate_per_s=20, burst=1)
    machines[0].add([Task("k", id=f"a{i}", locks=["api"]) for i in range(200)])
    claimed: list[str] = []
    guard = threading.Lock()
    barrier = threading.Barrier(4)

    def run(store: PostgresStore) -> None:
        barrier.wait()
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            for task in store.claim("w", {"k"}, 5):
                with guard:
                    claimed.append(task.id)
            time.sleep(0.002)

    began = time.monotonic()
    threads = [threading.Thread(target=run, args=(machines[i % 2],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    elapsed = time.monotonic() - began
    assert 10 <= len(claimed) <= 20 * elapsed + 2
    assert len(set(claimed)) == len(claimed)


def test_a_rate_limited_task_never_holds_a_worker_slot(stores):
    [store] = stores(1)
    store.set_limit("api", rate_per_s=1, burst=1)
    store.add([Task("job", id=f"api{i}", locks=["api"]) for i in range(3)]
              + [Task("job", id=f"plain{i}") for i in range(10)])
    started: dict[str, float] = {}

    async def job(task: Task) -> None:
        started[task.id] = time.monotonic()
        await anyio.sleep(0.03)

    supervisor = Supervisor(store, pull=True, stale_after=30)
    supervisor.register(Worker("one-slot", {"job"}, fn=job, concurrency=1))
    report = supervisor.run_sync()
    assert report.stats.counts[Status.COMPLETED] == 13
    # the single slot ran every plain task while the rate-limited ones waited for tokens
    assert max(started[f"plain{i}"] for i in range(10)) < started["api1"]
    assert started["api2"] - started["api1"] >= 0.9


def test_raising_rate_limited_does_not_burn_an_attempt(stores):
    [store] = stores(1)
    store.set_limit("api", rate_per_s=50, burst=5)
    store.add([Task("job", id="once-429", locks=["api"], max_attempts=1)])
    calls: list[float] = []

    async def job(task: Task) -> str:
        calls.append(time.monotonic())
        if len(calls) == 1:
            raise RateLimited("api", after_s=0.4)
        return "ok"

    supervisor = Supervisor(store, pull=True, stale_after=30)
    supervisor.register(Worker("w", {"job"}, fn=job))
    supervisor.run_sync()
    done = store.get("once-429")
    assert (done.status, done.result, done.attempts) == (Status.COMPLETED, "ok", 1)
    assert done.errors == [] and calls[1] - calls[0] >= 0.4


# -- wake-ups ----------------------------------------------------------------------------

def test_wait_for_work_wakes_on_a_new_task_from_another_machine(stores):
    a, b = stores(2)
    assert a.wait_for_work({"x"}, 0.05) is True   # just started listening: look once
    assert a.wait_for_work({"x"}, 0.05) is False          # listening from now on
    b.add([Task("y")])
    assert a.wait_for_work({"x"}, 0.3) is False           # another kind: keep sleeping
    woke: list[float] = []
    waiter = threading.Thread(target=lambda: woke.append(
        time.monotonic() if a.wait_for_work({"x"}, 10) else -1.0))
    waiter.start()
    added = time.monotonic()
    b.add([Task("x")])
    waiter.join(15)
    assert woke and woke[0] > 0 and woke[0] - added < 2


def test_an_idle_worker_is_woken_by_notify_not_by_polling(stores):
    a, b = stores(2)
    supervisor = Supervisor(a, pull=True, stale_after=30)
    supervisor.register(Worker("w", {"x"}, fn=lambda task: "done"))
    thread = threading.Thread(target=lambda: supervisor.run_sync(until_finished=False,
                                                                 idle_wait_s=60))
    thread.start()
    try:
        b.add([Task("x", id="first")])                   # the loop runs, then idles
        wait_until(lambda: b.get("first").status is Status.COMPLETED, timeout=10,
                   what="the worker to run its first task")
        b.add([Task("x", id="late")])
        wait_until(lambda: b.get("late").status is Status.COMPLETED, timeout=5,
                   what="the idle worker to wake up (it polls only every 60 s)")
    finally:
        supervisor.stop()
        b.add([Task("x", id="wake-to-stop")])
        thread.join(15)
    assert not thread.is_alive()


# -- worker processes --------------------------------------------------------------------

def test_stats_list_worker_processes_with_their_last_heartbeat(stores):
    [store] = stores(1)
    store.worker_seen("host-a:1", {"k"}, 4)
    store.add([Task("k")])
    store.claim("host-a:1", {"k"}, 1)
    stats = store.stats()
    assert set(stats.workers) == {"host-a:1"} and stats.active_by_worker == {"host-a:1": 1}
    assert abs((stats.now - stats.workers["host-a:1"]).total_seconds()) < 5
    store.worker_gone("host-a:1")
    assert store.stats().workers == {}


@pytest.fixture
def group(pg_dsn, pg_schema, tmp_path, stores):
    stores(1)
    cluster = Cluster(pg_dsn, pg_schema, tmp_path)
    yield cluster
    cluster.stop_all()
    for worker in cluster.workers:
        worker.kill()


def test_each_worker_process_claims_only_the_kinds_it_can_do(group, stores):
    [store] = stores(1)
    store.add([Task("work", {"ms": 5}, id=f"w{i}") for i in range(30)]
              + [Task("slow", {"s": 0.01}, id=f"s{i}") for i in range(30)])
    fast = group.start(kinds="work", concurrency=2)
    slow = group.start(kinds="slow", concurrency=2)
    wait_until(lambda: store.stats().counts[Status.COMPLETED] == 60, timeout=30,
               what="every task")
    by = {t.id: t.result["by"] for t in store.list_tasks()}
    assert {by[f"w{i}"] for i in range(30)} == {fast.pid}
    assert {by[f"s{i}"] for i in range(30)} == {slow.pid}


def test_status_shows_every_worker_process_with_its_active_count(group, stores, monkeypatch,
                                                                 capsys, pg_dsn, pg_schema):
    from foreperson.cli.main import main

    [store] = stores(1)
    store.add([Task("slow", {"s": 20}, id=f"s{i}") for i in range(4)])
    a = group.start(kinds="slow", concurrency=2, grace=0)
    b = group.start(kinds="slow", concurrency=1, grace=0)
    wait_until(lambda: store.stats().counts[Status.RUNNING] == 3, timeout=20,
               what="three running tasks")
    monkeypatch.setenv("FOREPERSON_PG_SCHEMA", pg_schema)
    capsys.readouterr()
    assert main(["status", "--dsn", pg_dsn, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["active_by_worker"][a.name] >= 2 and shown["active_by_worker"][b.name] >= 1
    assert {a.name, b.name} <= set(shown["workers_last_seen"])


def test_sigterm_lets_running_tasks_finish_and_gives_back_the_prefetched(group, stores):
    [store] = stores(1)
    store.add([Task("slow", {"s": 2.0}, id=f"s{i}") for i in range(5)])
    worker = group.start(kinds="slow", concurrency=2, prefetch=1, grace=20)
    wait_until(lambda: store.stats().counts[Status.ASSIGNED] == 1
               and sum(w[0] == "start" for w in group.lines()) == 2,
               timeout=20, what="two running (their functions begun) and one prefetched task")
    before = {t.id: t.status for t in store.list_tasks()}
    worker.kill(signal.SIGTERM)
    assert worker.proc.wait(15) == 0
    after = {t.id: t for t in store.list_tasks()}
    for task_id, status in before.items():
        if status is Status.RUNNING:            # in flight: finished, not abandoned
            assert after[task_id].status is Status.COMPLETED
        elif status is Status.ASSIGNED:         # prefetched: given back, claim undone
            assert (after[task_id].status, after[task_id].attempts) == (Status.PENDING, 0)
        elif status is Status.PENDING:
            assert after[task_id].status is Status.PENDING
    assert list(before.values()).count(Status.RUNNING) == 2
    assert store.stats().workers == {}


def test_after_the_grace_period_running_tasks_are_given_back(group, stores):
    [store] = stores(1)
    store.add([Task("slow", {"s": 60}, id="long")])
    worker = group.start(kinds="slow", concurrency=1, grace=0.5)
    # RUNNING in the store is not enough: a task claimed into a free slot is RUNNING
    # before its function begins (and one not begun is given back at once on SIGTERM)
    wait_until(lambda: any(w[:2] == ["start", "long"] for w in group.lines()), timeout=20,
               what="the long task's function to start")
    worker.kill(signal.SIGTERM)
    worker.proc.wait(15)
    back = store.get("long")
    assert (back.status, back.attempts, back.lease_token) == (Status.PENDING, 0, None)
    assert "released 1 task" in worker.stderr()


def test_db_commands(pg_dsn, pg_schema, capsys):
    from foreperson.cli.main import main

    args = ["--dsn", pg_dsn, "--schema", pg_schema]
    assert main(["db", "migrate", *args, "--to", "1"]) == 0
    assert main(["db", "migrate", *args]) == 0
    assert main(["db", "migrate", *args]) == 0
    assert main(["db", "version", *args]) == 0
    assert main(["db", "limit", "model-api", "--rate", "10", "--burst", "5", *args]) == 0
    assert main(["db", "limit", *args]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == [f"schema {pg_schema}: version 0 -> 1",
                       f"schema {pg_schema}: version 1 -> {_pg_schema.LATEST}",
                       f"schema {pg_schema} is at version {_pg_schema.LATEST}: nothing to do"]
    assert out[-1] == "model-api: max_active=None rate_per_s=10.0 burst=5"
    assert main(["db", "limit", "x", *args]) == 2          # neither --rate nor --max-active


def test_worker_command_reports_a_bad_app_spec(pg_dsn, capsys):
    from foreperson.cli.main import main

    assert main(["worker", "no_such_module_xyz", "--dsn", pg_dsn]) == 2
    assert "cannot import 'no_such_module_xyz'" in capsys.readouterr().err


def test_a_worker_turn_in_one_statement_is_fenced_like_the_separate_calls(stores):
    [store] = stores(1)
    store.add([Task("k", id=f"t{i}") for i in range(6)])
    first = store.claim("w", {"k"}, 3, start=1)          # t0 running, t1 t2 prefetched
    assert [t.status for t in first] == [Status.RUNNING, Status.ASSIGNED, Status.ASSIGNED]
    t0, t1, t2 = first
    stored, claimed = store.complete_and_claim(
        {t1.id: t1.lease_token}, [(t0.id, t0.lease_token, {"n": 0}), (t2.id, "stale", {})],
        "w", {"k"}, 2, start=1)
    assert stored == {"t0"}                                # a stale lease stores nothing
    assert [(t.id, t.status) for t in claimed] == [("t3", Status.RUNNING),
                                                   ("t4", Status.ASSIGNED)]
    assert store.get("t0").result == {"n": 0} and store.get("t0").status is Status.COMPLETED
    assert (store.get("t1").status, store.get("t1").attempts) == (Status.RUNNING, 1)
    assert store.get("t2").status is Status.ASSIGNED
    stored, claimed = store.complete_and_claim({}, [(t2.id, t2.lease_token, 2)], "w", {"k"}, 0)
    assert stored == {"t2"} and claimed == []
    assert store.get("t2").attempts == 1                  # counted when it completed
