"""Batch workers: up to N ready tasks of one kind per call, each task settled on its own."""

from __future__ import annotations

import threading

import anyio
import pytest

from foreperson.errors import ConfigurationError, GiveUp
from foreperson.work import App, MemoryStore, SqliteStore, Status, Supervisor, Task, Worker
from foreperson.work.process import AppWorker
from foreperson.work.worker import current_batch


def supervisor(store=None, **kwargs) -> Supervisor:
    kwargs.setdefault("backoff_base_s", 0.001)
    return Supervisor(store or MemoryStore(), **kwargs)


class Recorder:
    """A batch function that doubles ``payload["n"]`` and records every call."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.lock = threading.Lock()

    def __call__(self, tasks: list[Task]) -> list:
        with self.lock:
            self.calls.append([t.id for t in tasks])
        return [{"double": t.payload["n"] * 2} for t in tasks]


def test_a_batch_worker_takes_many_tasks_of_one_kind_per_call():
    sup = supervisor()
    fn = Recorder()
    sup.register(Worker("w", {"a", "b"}, fn=fn, batch_size=8))
    sup.add_tasks([Task("a" if i % 2 else "b", {"n": i}, id=f"t{i}") for i in range(40)])
    report = sup.run_sync()
    assert report.stats.counts[Status.COMPLETED] == 40
    assert all(sup.tasks[f"t{i}"].result == {"double": 2 * i} for i in range(40))
    assert all(1 <= len(call) <= 8 for call in fn.calls)
    assert len(fn.calls) < 40                          # batched, not one call per task
    for call in fn.calls:                              # one kind per call
        assert len({sup.tasks[i].kind for i in call}) == 1
    assert sorted(i for call in fn.calls for i in call) == sorted(f"t{i}" for i in range(40))


def test_an_exception_in_the_list_fails_only_its_own_task():
    seen: dict[str, int] = {}

    def fn(tasks: list[Task]) -> list:
        out: list = []
        for t in tasks:
            seen[t.id] = seen.get(t.id, 0) + 1
            if t.id == "bad":
                out.append(GiveUp("this payload can never work"))
            elif t.id == "flaky" and seen[t.id] == 1:
                out.append(ConnectionError("upstream hiccup"))
            else:
                out.append({"ok": t.id})
        return out

    sup = supervisor()
    sup.register(Worker("w", {"k"}, fn=fn, batch_size=10))
    sup.add_tasks([Task("k", id=i) for i in ("bad", "flaky", "fine1", "fine2")])
    report = sup.run_sync()
    assert sup.tasks["bad"].status is Status.DEAD and sup.tasks["bad"].attempts == 1
    assert "never work" in (sup.tasks["bad"].error or "")
    assert sup.tasks["flaky"].status is Status.COMPLETED and sup.tasks["flaky"].attempts == 2
    assert [sup.tasks[i].attempts for i in ("fine1", "fine2")] == [1, 1]
    assert report.retries == 1


def test_a_call_that_raises_fails_every_task_of_it_each_with_its_own_retries():
    calls = []

    async def fn(tasks: list[Task]) -> list:
        calls.append(len(tasks))
        if len(calls) == 1:
            raise TimeoutError("the model server took too long")
        return [{"ok": True} for _ in tasks]

    sup = supervisor()
    sup.register(Worker("w", {"k"}, fn=fn, batch_size=5))
    sup.add_tasks([Task("k", id=f"t{i}", max_attempts=2) for i in range(5)])
    sup.run_sync()
    for i in range(5):
        task = sup.tasks[f"t{i}"]
        assert task.status is Status.COMPLETED and task.attempts == 2
        assert task.errors and "took too long" in task.errors[0]["error"]


def test_a_wrong_number_of_results_is_a_programming_error_for_each_task():
    sup = supervisor()
    sup.register(Worker("w", {"k"}, fn=lambda tasks: [{"only": "one"}], batch_size=4))
    sup.add_tasks([Task("k", id="a"), Task("k", id="b")])
    sup.run_sync()
    for task_id in ("a", "b"):
        task = sup.tasks[task_id]
        assert task.status is Status.DEAD and "one result or exception per task" in task.error


def test_a_result_that_is_not_json_parks_only_its_task():
    sup = supervisor()
    sup.register(Worker("w", {"k"}, fn=lambda tasks: [{1, 2}, {"fine": True}], batch_size=2))
    sup.add_tasks([Task("k", id="a"), Task("k", id="b", depends_on=["a"]),
                   Task("k", id="c")])
    sup.run_sync()
    assert sup.tasks["a"].status is Status.DEAD and "not JSON" in sup.tasks["a"].error
    assert sup.tasks["b"].status is Status.DEAD            # parked: its dependency is DEAD
    assert sup.tasks["c"].status is Status.COMPLETED


def test_each_task_of_a_batch_is_fenced_by_its_own_lease(tmp_path):
    store = SqliteStore(tmp_path / "t.db")
    runs: dict[str, int] = {}

    def fn(tasks: list[Task]) -> list:
        ctx = current_batch()
        for t in tasks:
            runs[t.id] = runs.get(t.id, 0) + 1
            if t.id == "taken" and runs[t.id] == 1:   # its lease is gone mid-call
                ctx.store.release(t.id, t.lease_token or "")
        return [{"run": runs[t.id]} for t in tasks]

    sup = supervisor(store)
    sup.register(Worker("w", {"k"}, fn=fn, batch_size=4))
    sup.add_tasks([Task("k", id=i) for i in ("taken", "kept1", "kept2")])
    report = sup.run_sync()
    assert report.lease_lost == 1                  # the stale result was refused ...
    assert sup.tasks["taken"].result == {"run": 2}   # ... and the task ran again
    assert sup.tasks["kept1"].result == {"run": 1} and sup.tasks["kept2"].result == {"run": 1}
    store.close()


def test_a_batch_reads_its_dependencies_results_in_one_go():
    def fn(tasks: list[Task]) -> list:
        if tasks[0].kind == "first":
            return [{"v": t.payload["v"]} for t in tasks]
        deps = current_batch().dependency_results()
        return [{"sum": sum(r["v"] for r in deps[t.id].values())} for t in tasks]

    sup = supervisor()
    sup.register(Worker("w", {"first", "second"}, fn=fn, batch_size=16))
    tasks = []
    for i in range(6):
        a, b = Task("first", {"v": i}, id=f"a{i}"), Task("first", {"v": 10}, id=f"b{i}")
        tasks += [a, b, Task("second", id=f"s{i}", depends_on=[a.id, b.id])]
    sup.add_tasks(tasks)
    sup.run_sync()
    assert [sup.tasks[f"s{i}"].result for i in range(6)] == [{"sum": i + 10} for i in range(6)]


def test_a_batch_worker_holds_at_most_concurrency_times_batch_size_running():
    running = {"now": 0, "most": 0}

    async def fn(tasks: list[Task]) -> list:
        running["now"] += len(tasks)
        running["most"] = max(running["most"], running["now"])
        await anyio.sleep(0.01)
        running["now"] -= len(tasks)
        return [None] * len(tasks)

    sup = supervisor()
    sup.register(Worker("w", {"k"}, fn=fn, batch_size=3, concurrency=2))
    sup.add_tasks([Task("k", id=f"t{i}") for i in range(30)])
    assert sup.run_sync().stats.counts[Status.COMPLETED] == 30
    assert 3 < running["most"] <= 6


def test_an_app_batch_function_runs_in_app_and_process_workers():
    app = App()

    @app.task("embed", batch_size=4)
    def embed(tasks: list[Task]) -> list:
        return [{"len": len(t.payload["text"]), "batch": len(tasks)} for t in tasks]

    for worker in (app.worker("w1"), AppWorker(app, "w2")):
        assert worker.batch_size == 4
        sup = supervisor()
        sup.register(worker)
        sup.add_tasks([Task("embed", {"text": "x" * i}, id=f"e{i}") for i in range(9)])
        sup.run_sync()
        results = [sup.tasks[f"e{i}"].result for i in range(9)]
        assert [r["len"] for r in results] == list(range(9))
        assert max(r["batch"] for r in results) > 1

    @app.task("plain")
    def plain(task: Task) -> dict:
        return {}

    with pytest.raises(ConfigurationError, match="batch and one-task"):
        app.worker("mixed")
    assert app.worker("only-plain", kinds=["plain"]).batch_size is None


def test_seed_000s_threaded_loop_runs_a_batch_worker_one_task_at_a_time():
    sup = supervisor()
    fn = Recorder()
    sup.register(Worker("w", {"k"}, fn=fn, batch_size=8))
    sup.add_tasks([Task("k", {"n": 3}, id="a"), Task("k", {"n": 4}, id="b")])
    done = threading.Event()
    for _ in range(2000):
        sup.dispatch_round()
        if sup.finished():
            done.set()
            break
        done.wait(0.005)
    assert done.is_set()
    assert (sup.tasks["a"].result, sup.tasks["b"].result) == ({"double": 6}, {"double": 8})


@pytest.mark.parametrize("size", [0, -1])
def test_batch_size_must_be_positive(size):
    with pytest.raises(ConfigurationError, match="batch_size"):
        Worker("w", {"k"}, fn=lambda tasks: tasks, batch_size=size)


def test_current_batch_outside_a_batch_says_so():
    with pytest.raises(LookupError, match="batch function"):
        current_batch()
