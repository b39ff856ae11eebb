"""Supervisor behaviour on the in-memory store: dispatch, failures, dependencies, locks."""

from __future__ import annotations

import random
import threading
import time

import pytest

from foreperson import GiveUp, InvalidPlan, Retry
from foreperson.errors import ConfigurationError
from foreperson.work import MemoryStore, Status, Supervisor, Task, Worker, current_task
from foreperson.work.strategies import lower_bound, simulate_makespan


def supervisor(**kwargs) -> Supervisor:
    kwargs.setdefault("backoff_base_s", 0.001)
    kwargs.setdefault("backoff_cap_s", 0.005)
    return Supervisor(MemoryStore(), rng=random.Random(7), **kwargs)


# -- seed 000's strategy table -------------------------------------------------------

SEED_DURATIONS = [10, 2, 2, 10, 2, 2, 10, 2, 2]


@pytest.mark.parametrize(("strategy", "makespan"), [
    ("round_robin", 30), ("least_loaded", 16), ("balanced", 14)])
def test_seed_strategy_table_is_reproduced(strategy, makespan):
    assert simulate_makespan(SEED_DURATIONS, 3, strategy) == makespan


def test_longest_first_reaches_the_optimum():
    assert lower_bound(SEED_DURATIONS, 3) == 14
    assert simulate_makespan(SEED_DURATIONS, 3, "least_loaded", longest_first=True) == 14


# -- validation when added -------------------------------------------------------------

def test_unknown_kind_is_rejected_when_added():
    sup = supervisor()
    sup.register(Worker("w", {"classify"}, fn=lambda t: None))
    with pytest.raises(InvalidPlan, match="verify_sources"):
        sup.add_task(Task("verify_sources"))
    assert sup.stats().total == 0


def test_dependency_cycle_is_rejected_when_added():
    sup = supervisor(kinds={"k"})
    a, b = Task("k", id="a", depends_on=["b"]), Task("k", id="b", depends_on=["a"])
    with pytest.raises(InvalidPlan, match="cycle"):
        sup.add_tasks([a, b])


def test_registering_two_workers_with_one_name_fails():
    sup = supervisor()
    sup.register(Worker("w", {"k"}, fn=lambda t: None))
    with pytest.raises(ConfigurationError, match="already registered"):
        sup.register(Worker("w", {"k"}, fn=lambda t: None))


def test_run_without_workers_says_what_to_do():
    with pytest.raises(ConfigurationError, match="register"):
        supervisor().run_sync()


# -- the async runtime ------------------------------------------------------------------

def test_dependencies_run_in_order_and_see_results():
    sup = supervisor()
    order = []

    def work(task):
        order.append(task.id)
        deps = current_task().dependency_results()
        return {"n": 1 + sum(r["n"] for r in deps.values())}

    sup.register(Worker("w", {"k"}, fn=work, concurrency=4))
    sup.add_tasks([Task("k", id="a"), Task("k", id="b", depends_on=["a"]),
                   Task("k", id="c", depends_on=["a", "b"])])
    report = sup.run_sync()
    assert order == ["a", "b", "c"]
    assert sup.store.get("c").result == {"n": 4}
    assert report.stats.counts[Status.COMPLETED] == 3


def test_transient_error_is_retried_with_backoff_then_dead():
    sup = supervisor()
    calls = []

    def flaky(task):
        calls.append(time.monotonic())
        raise TimeoutError("upstream timed out")

    sup.register(Worker("w", {"k"}, fn=flaky))
    sup.add_task(Task("k", id="t", max_attempts=3))
    report = sup.run_sync(idle_wait_s=0.001)
    task = sup.store.get("t")
    assert task.status is Status.DEAD and task.attempts == 3 and len(calls) == 3
    assert [e["attempt"] for e in task.errors] == [1, 2, 3]
    assert all(e["error"] == "TimeoutError: upstream timed out" for e in task.errors)
    assert report.retries == 2


def test_retry_then_success_keeps_the_history():
    sup = supervisor()
    seen = []

    def second_time_lucky(task):
        seen.append(task.attempts)
        if task.attempts == 1:
            raise ConnectionError("reset by peer")
        return "ok"

    sup.register(Worker("w", {"k"}, fn=second_time_lucky))
    sup.add_task(Task("k", id="t"))
    sup.run_sync(idle_wait_s=0.001)
    task = sup.store.get("t")
    assert (task.status, task.result, seen) == (Status.COMPLETED, "ok", [1, 2])
    assert task.errors[0]["error"] == "ConnectionError: reset by peer"


@pytest.mark.parametrize("error", [TypeError("payload is not a mapping"),
                                   GiveUp("no such customer"), KeyError("ticket")])
def test_non_retryable_error_is_dead_on_the_first_try(error):
    sup = supervisor()

    def broken(task):
        raise error

    sup.register(Worker("w", {"k"}, fn=broken))
    sup.add_task(Task("k", id="t", max_attempts=5))
    sup.run_sync()
    task = sup.store.get("t")
    assert task.status is Status.DEAD and task.attempts == 1
    assert type(error).__name__ in task.error


def test_retry_signal_sets_the_delay():
    sup = supervisor()

    def later(task):
        if task.attempts == 1:
            raise Retry("not yet", after_s=0.01)
        return task.attempts

    sup.register(Worker("w", {"k"}, fn=later))
    sup.add_task(Task("k", id="t"))
    sup.run_sync(idle_wait_s=0.001)
    task = sup.store.get("t")
    assert task.result == 2 and task.errors[0]["error"] == "Retry: not yet"


def test_dead_dependency_parks_dependents_and_the_run_finishes():
    sup = supervisor()

    def work(task):
        if task.id == "root":
            raise GiveUp("cannot parse")
        return "fine"

    sup.register(Worker("w", {"k"}, fn=work, concurrency=2))
    sup.add_tasks([Task("k", id="root"), Task("k", id="child", depends_on=["root"]),
                   Task("k", id="grandchild", depends_on=["child"]), Task("k", id="other")])
    report = sup.run_sync()
    assert sup.finished()
    statuses = {t.id: t.status for t in sup.store.list_tasks()}
    assert statuses == {"root": Status.DEAD, "child": Status.DEAD,
                        "grandchild": Status.DEAD, "other": Status.COMPLETED}
    assert sup.store.get("grandchild").error == "dependency child is dead"
    assert report.parked == 2


def test_async_work_runs_on_the_loop_and_blocking_work_in_threads():
    sup = supervisor()
    loop_thread = threading.get_ident()
    threads = {}

    async def async_work(task):
        threads["async"] = threading.get_ident()
        return 1

    def blocking_work(task):
        threads["blocking"] = threading.get_ident()
        return 2

    sup.register(Worker("a", {"a"}, fn=async_work))
    sup.register(Worker("b", {"b"}, fn=blocking_work))
    sup.add_tasks([Task("a"), Task("b")])

    import anyio

    async def main():
        nonlocal loop_thread
        loop_thread = threading.get_ident()
        return await sup.run()

    anyio.run(main)
    assert threads["async"] == loop_thread and threads["blocking"] != loop_thread


def test_tasks_sharing_a_lock_never_overlap():
    sup = supervisor()
    holders = 0
    most = 0
    guard = threading.Lock()

    def write_row(task):
        nonlocal holders, most
        with guard:
            holders += 1
            most = max(most, holders)
        time.sleep(0.002)
        with guard:
            holders -= 1
        return None

    for i in range(4):
        sup.register(Worker(f"w{i}", {"k"}, fn=write_row, concurrency=2))
    sup.add_tasks([Task("k", locks=["orders.csv"]) for _ in range(20)])
    sup.run_sync()
    assert most == 1
    assert sup.stats().counts[Status.COMPLETED] == 20


def test_worker_concurrency_is_respected():
    sup = supervisor()
    running = 0
    most = 0
    guard = threading.Lock()
    gate = threading.Event()

    def work(task):
        nonlocal running, most
        with guard:
            running += 1
            most = max(most, running)
            if running == 3:
                gate.set()
        gate.wait(5)
        with guard:
            running -= 1

    sup.register(Worker("w", {"k"}, fn=work, concurrency=3))
    sup.add_tasks([Task("k") for _ in range(9)])
    sup.run_sync()
    assert most == 3


def test_capability_strategy_prefers_the_specialist():
    sup = supervisor(strategy="capability", prefetch=0)
    who = []

    def work(task):
        who.append(current_task().worker)

    sup.register(Worker("generalist", {"summarise"}, {"summarise": 0.25}, fn=work))
    sup.register(Worker("specialist", {"summarise"}, {"summarise": 1.0}, fn=work))
    sup.add_task(Task("summarise"))
    sup.run_sync()
    assert who == ["specialist"]


def test_balanced_places_the_longest_ready_task_first():
    sup = supervisor(prefetch=0)
    order = []
    sup.register(Worker("w", {"k"}, fn=lambda t: order.append(t.id)))
    sup.add_tasks([Task("k", id="short", estimate_s=1), Task("k", id="long", estimate_s=9)])
    sup.run_sync()
    assert order == ["long", "short"]


def test_runtime_heartbeats_keep_a_long_task_alive():
    sup = supervisor(stale_after=0.3, heartbeat_every_s=0.05, sweep_every_s=0.05)
    attempts = []

    def long_task(task):
        attempts.append(task.attempts)
        time.sleep(1.0)        # three times stale_after: only heartbeats keep it ours
        return "done"

    sup.register(Worker("w", {"k"}, fn=long_task))
    sup.add_task(Task("k", id="t"))
    report = sup.run_sync()
    assert attempts == [1] and report.reclaimed == 0
    assert sup.store.get("t").result == "done"


def test_progress_and_history_record_tasks_by_status_over_time():
    sup = supervisor()
    seen = []
    sup.register(Worker("w", {"k"}, fn=lambda t: None, concurrency=2))
    sup.add_tasks([Task("k") for _ in range(10)])
    report = sup.run_sync(progress=seen.append, progress_every_s=0.0)
    assert seen[-1].counts[Status.COMPLETED] == 10
    assert report.history[-1][1][Status.COMPLETED] == 10
    assert report.history[0][1][Status.COMPLETED] < 10


def test_worker_needs_kinds_and_a_body():
    with pytest.raises(ConfigurationError, match="no kinds"):
        Worker("w", set())
    with pytest.raises(NotImplementedError, match="override execute"):
        Worker("w", {"k"}).execute(Task("k"))


def test_a_prefetched_task_does_not_wait_behind_a_long_one():
    sup = supervisor(prefetch=1, prefetch_wait_s=0.1)
    shorts_done = threading.Event()
    finished = []
    guard = threading.Lock()

    def work(task):
        if task.id == "long":
            assert shorts_done.wait(20), "a short task was stuck behind the long one"
        with guard:
            finished.append(task.id)
            if sum(1 for t in finished if t != "long") == 4:
                shorts_done.set()

    sup.register(Worker("w1", {"k"}, fn=work))
    sup.register(Worker("w2", {"k"}, fn=work))
    sup.add_tasks([Task("k", id="long", estimate_s=100)] +
                  [Task("k", id=f"s{i}", estimate_s=0.01) for i in range(4)])
    sup.run_sync()
    assert finished[-1] == "long" and sup.store.get("long").status is Status.COMPLETED


@pytest.mark.parametrize("result", [{1, 2}, __import__("datetime").datetime(2026, 1, 1),
                                    float("nan")])
def test_a_result_that_is_not_json_parks_the_task_not_the_run(result):
    sup = supervisor()
    sup.register(Worker("w", {"k"}, fn=lambda task: result if task.id == "bad" else "ok",
                        concurrency=2))
    sup.add_tasks([Task("k", id="bad"), Task("k", id="good")])
    sup.run_sync()
    bad = sup.store.get("bad")
    assert bad.status is Status.DEAD and "not JSON" in bad.error and bad.attempts == 1
    assert sup.store.get("good").result == "ok"


def test_a_blocking_task_past_its_timeout_fails_and_the_run_goes_on():
    sup = supervisor()
    release = threading.Event()

    def stuck(task):
        release.wait(30)            # never returns in time
        return "late"

    sup.register(Worker("w", {"k"}, fn=stuck, timeout_s=0.1))
    sup.add_task(Task("k", id="t", max_attempts=2))
    sup.run_sync(idle_wait_s=0.01)
    release.set()
    task = sup.store.get("t")
    assert task.status is Status.DEAD and task.attempts == 2
    assert all(e["error"].startswith("TimeoutError") for e in task.errors)


def test_a_single_kind_may_be_given_as_a_string():
    assert Worker("w", "classify", fn=lambda t: None).can_do == frozenset({"classify"})


class FlakyStore(MemoryStore):
    """A memory store whose claims fail with a StoreError the first ``failures`` times."""

    def __init__(self, failures: int, *, transient: bool) -> None:
        super().__init__()
        self.failures, self.transient = failures, transient

    def assign(self, pairs, *, start=False, lease_s=90.0):
        if pairs and self.failures > 0:
            self.failures -= 1
            from foreperson.errors import StoreError
            raise StoreError("database is locked", transient=self.transient)
        return super().assign(pairs, start=start, lease_s=lease_s)


def test_a_transient_store_failure_is_retried_and_nothing_is_lost():
    sup = Supervisor(FlakyStore(2, transient=True))
    sup.register(Worker("w", {"k"}, fn=lambda task: task.id, concurrency=2))
    sup.add_tasks([Task("k", id=str(i)) for i in range(5)])
    report = sup.run_sync(idle_wait_s=0.01)
    assert report.stats.counts[Status.COMPLETED] == 5


def test_a_store_error_that_would_repeat_stops_the_run_with_it():
    from foreperson.errors import StoreError
    sup = Supervisor(FlakyStore(1, transient=False))
    sup.register(Worker("w", {"k"}, fn=lambda task: task.id))
    sup.add_task(Task("k"))
    with pytest.raises(StoreError, match="database is locked"):
        sup.run_sync()


def test_a_reclaimed_attempt_still_running_here_frees_its_slot_when_it_returns():
    """Attempt 1 of "t" stops heartbeating (its lease is reclaimed) but keeps running;
    attempt 2 runs in the other slot of the same worker. When attempt 1 returns, its
    result is refused and its slot is free again: two tasks that must run at the same
    time still can."""
    import threading

    release_first = threading.Event()
    both = threading.Barrier(2, timeout=10)
    runs = []

    def work(task):
        if task.id == "t":
            runs.append(task.lease_token)
            if len(runs) == 1:
                assert release_first.wait(10)
                return "first"
            release_first.set()
            return "second"
        both.wait()            # needs both slots at once
        return task.id

    sup = Supervisor(MemoryStore(), stale_after=0.3, sweep_every_s=0.05, prefetch=0)
    sup.heartbeat = lambda: None            # attempt 1's holder looks dead
    sup.register(Worker("w", {"k"}, fn=work, concurrency=2))
    sup.add_tasks([Task("k", id="t"), Task("k", id="p1", depends_on=["t"]),
                   Task("k", id="p2", depends_on=["t"])])
    report = sup.run_sync(idle_wait_s=0.01)
    assert sup.tasks["t"].result == "second" and report.lease_lost == 1
    assert report.stats.counts[Status.COMPLETED] == 3


def test_seed_000s_inspection_reads_the_tasks():
    sup = Supervisor(MemoryStore())
    sup.register(Worker("w", {"k"}, fn=lambda t: t.payload["n"] * 2))
    sup.add_tasks([Task("k", {"n": 1}, id="a"), Task("k", {"n": 2}, id="b")])
    sup.run_sync()
    assert list(sup.tasks) == ["a", "b"] and len(sup.tasks) == 2
    assert sup.tasks["b"].result == 4 and sup.tasks["a"].status is Status.COMPLETED
    with pytest.raises(KeyError):
        sup.tasks["missing"]


def test_an_attempt_hung_in_a_live_process_is_bounded_by_its_lease():
    """Heartbeats keep a live process's tasks held; an attempt running past ten times its
    lease is presumed hung: its heartbeat stops, it is reclaimed and run again."""
    import threading

    unblock = threading.Event()
    attempts = []

    def work(task):
        attempts.append(task.lease_token)
        if len(attempts) == 1:
            assert unblock.wait(20)          # hung, until the test lets it go
            return "hung"
        unblock.set()
        return "fresh"

    sup = Supervisor(MemoryStore(), stale_after=0.1, hung_after=3, sweep_every_s=0.02,
                     prefetch=0)
    sup.register(Worker("w", {"k"}, fn=work, concurrency=2))
    sup.add_task(Task("k", id="t"))
    report = sup.run_sync(idle_wait_s=0.01)
    task = sup.tasks["t"]
    assert task.result == "fresh" and task.attempts == 2 and report.lease_lost == 1
    assert "stopped heartbeating" in task.errors[0]["error"]
