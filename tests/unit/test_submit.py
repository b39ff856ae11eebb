"""Submit and await: handles, child tasks that lend their slot, runs in the work layer."""

from __future__ import annotations

import anyio
import pytest

from foreperson import GiveUp
from foreperson.errors import InvalidPlan, TaskFailed
from foreperson.work import MemoryStore, Status, Supervisor, Task, TaskHandle, Worker, current_task

pytestmark = pytest.mark.anyio


async def test_a_submitted_task_is_awaited_for_its_result():
    sup = Supervisor(MemoryStore())
    sup.register(Worker("w", {"double"}, fn=lambda t: {"n": t.payload["n"] * 2}))
    async with sup.serving():
        handle = await sup.submit(Task("double", {"n": 21}, run_id="r1"))
        assert await handle.result(timeout_s=10) == {"n": 42}
        assert handle.done and handle.run_id == "r1"
    assert sup.finished(run_id="r1")


async def test_a_dead_task_raises_with_its_last_error_and_reason():
    def refuse(task):
        raise GiveUp("payload has no customer id")

    sup = Supervisor(MemoryStore())
    sup.register(Worker("w", {"k"}, fn=refuse))
    async with sup.serving():
        handle = await sup.submit(Task("k"))
        with pytest.raises(TaskFailed, match="payload has no customer id") as caught:
            await handle.result(timeout_s=10)
    assert caught.value.reason == "not_retryable" and caught.value.task_id == handle.task_id


async def test_a_dependent_parked_by_a_dead_dependency_wakes_its_waiter():
    def fail(task):
        raise ValueError("bad")

    sup = Supervisor(MemoryStore())
    sup.register(Worker("w", {"k"}, fn=fail))
    first = Task("k", id="first", max_attempts=1)     # DEAD at once, no backoff
    async with sup.serving():
        _, second = await sup.submit_many([first, Task("k", id="second",
                                                       depends_on=["first"])])
        with pytest.raises(TaskFailed) as caught:
            await second.result(timeout_s=10)
    assert caught.value.reason == "dependency_dead"


async def test_waiting_has_a_bound_that_names_the_task():
    sup = Supervisor(MemoryStore(), kinds={"nobody-does-this"})
    handle = await sup.submit(Task("nobody-does-this", id="lonely"))
    with pytest.raises(TimeoutError, match="lonely did not finish within 0.05 s"):
        await handle.result(timeout_s=0.05)


async def test_an_invalid_submission_stores_nothing():
    sup = Supervisor(MemoryStore(), kinds={"k"})
    with pytest.raises(InvalidPlan, match="unknown task"):
        await sup.submit_many([Task("k", id="ok"), Task("k", depends_on=["missing"])])
    assert sup.store.get("ok") is None


async def test_eight_slots_eight_parents_each_awaiting_two_children_never_deadlock():
    """Every slot holds a parent waiting on its children: the parents lend their slots,
    so the 16 children still run, and every parent ends with both results."""
    async def work(task):
        if task.kind == "child":
            await anyio.sleep(0.01)
            return task.payload["n"] * 10
        ctx = current_task()
        handles = await ctx.submit_many([Task("child", {"n": 1}), Task("child", {"n": 2})])
        return [await h.result(timeout_s=20) for h in handles]

    sup = Supervisor(MemoryStore())
    sup.register(Worker("w", {"parent", "child"}, fn=work, concurrency=8))
    parents = [Task("parent", id=f"p{i}", run_id="job") for i in range(8)]
    sup.add_tasks(parents)
    with anyio.fail_after(30):
        report = await sup.run(run_id="job")
    assert report.stats.counts[Status.COMPLETED] == 8 + 16
    assert all(sup.tasks[p.id].result == [10, 20] for p in parents)
    children = [t for t in sup.store.list_tasks(run_id="job") if t.kind == "child"]
    assert len(children) == 16 and {t.parent_id for t in children} == {p.id for p in parents}


async def test_blocking_parents_await_children_without_holding_their_threads():
    def work(task):
        if task.kind == "child":
            return task.payload["n"] + 1
        ctx = current_task()
        handle = ctx.submit_sync(Task("child", {"n": task.payload["n"]}))
        return handle.result_sync(timeout_s=20)

    sup = Supervisor(MemoryStore())
    sup.register(Worker("w", {"parent", "child"}, fn=work, concurrency=2))
    sup.add_tasks([Task("parent", {"n": i}, id=f"p{i}") for i in range(4)])
    with anyio.fail_after(30):
        await sup.run()
    assert [sup.tasks[f"p{i}"].result for i in range(4)] == [1, 2, 3, 4]


async def test_handles_come_out_as_their_tasks_finish():
    async def work(task):
        await anyio.sleep(task.payload["s"])
        return task.id

    sup = Supervisor(MemoryStore())
    sup.register(Worker("w", {"k"}, fn=work, concurrency=3))
    async with sup.serving():
        handles = await sup.submit_many([Task("k", {"s": s}, id=f"t{s}")
                                         for s in (0.3, 0.0, 0.15)])
        order = [h.task_id async for h in sup.as_completed(handles)]
    assert order == ["t0.0", "t0.15", "t0.3"]


async def test_a_task_finished_by_another_supervisor_on_the_store_wakes_the_waiter():
    store = MemoryStore()
    submitter = Supervisor(store, kinds={"k"})          # no workers of its own
    elsewhere = Supervisor(store)
    elsewhere.register(Worker("remote", {"k"}, fn=lambda t: "done elsewhere"))
    handle = await submitter.submit(Task("k"))
    async with anyio.create_task_group() as group:
        group.start_soon(elsewhere.run)
        assert await handle.result(timeout_s=10) == "done elsewhere"


async def test_each_run_reports_only_itself():
    attempts = {"n": 0}

    def flaky(task):
        attempts["n"] += 1
        if attempts["n"] == 1:
            raise TimeoutError("slow upstream")
        return "ok"

    sup = Supervisor(MemoryStore(), backoff_base_s=0.01)
    sup.register(Worker("w", {"k"}, fn=flaky))
    sup.add_task(Task("k", run_id="a"))
    first = await sup.run(run_id="a")
    sup.add_task(Task("k", run_id="b"))
    second = await sup.run(run_id="b")
    assert (first.retries, second.retries) == (1, 0)
    assert first.stats.total == 1 and second.stats.total == 1


async def test_a_dead_child_ends_its_parent_dead_and_finished_children_run_once():
    runs: list[str] = []

    async def work(task):
        if task.kind == "child":
            runs.append(task.payload["n"])
            if task.payload["n"] == 2:
                raise GiveUp("child 2 cannot be done")
            return task.payload["n"]
        ctx = current_task()
        handles = await ctx.submit_many([Task("child", {"n": 1}), Task("child", {"n": 2})])
        return [await h.result(timeout_s=20) for h in handles]

    sup = Supervisor(MemoryStore(), backoff_base_s=0.01)
    sup.register(Worker("w", {"parent", "child"}, fn=work, concurrency=4))
    sup.add_task(Task("parent", id="p", max_attempts=3))
    with anyio.fail_after(30):
        await sup.run()
    parent = sup.tasks["p"]
    assert parent.status is Status.DEAD and parent.reason == "not_retryable"
    assert "child 2 cannot be done" in parent.error
    assert sorted(runs) == [1, 2]                       # each child ran once
    assert [t.id for t in sup.store.list_tasks(kind="child")] == ["p/1", "p/2"]


async def test_a_retried_parent_finds_the_children_it_already_submitted():
    attempts: list[int] = []
    runs: list[int] = []

    async def work(task):
        if task.kind == "child":
            runs.append(task.payload["n"])
            return task.payload["n"] * 10
        attempts.append(task.attempts)
        ctx = current_task()
        first, second = await ctx.submit_many([Task("child", {"n": 1}),
                                               Task("child", {"n": 2}, depends_on=[])])
        results = [await first.result(timeout_s=20), await second.result(timeout_s=20)]
        if len(attempts) == 1:
            raise TimeoutError("the parent's own upstream timed out")
        return results

    sup = Supervisor(MemoryStore(), backoff_base_s=0.01)
    sup.register(Worker("w", {"parent", "child"}, fn=work, concurrency=4))
    sup.add_task(Task("parent", id="p", max_attempts=3))
    with anyio.fail_after(30):
        await sup.run()
    assert sup.tasks["p"].result == [10, 20] and attempts == [1, 2]
    assert sorted(runs) == [1, 2]                       # not run again on the retry


async def test_submit_returns_one_handle_as_the_supervisors_does_and_the_old_shapes_warn():
    seen: dict[str, object] = {}

    async def work(task: Task) -> object:
        if task.kind == "child":
            return task.payload["n"]
        ctx = current_task()
        one = await ctx.submit(Task("child", {"n": 1}))
        seen["one"] = one
        with pytest.warns(DeprecationWarning, match="submit_many"):
            several = await ctx.submit(Task("child", {"n": 2}), Task("child", {"n": 3}))
        with pytest.warns(DeprecationWarning, match="returns the handle itself"):
            (unpacked,) = await ctx.submit(Task("child", {"n": 4}))
        return [await h.result(timeout_s=20) for h in (one, *several, unpacked)]

    sup = Supervisor(MemoryStore())
    sup.register(Worker("w", {"parent", "child"}, fn=work, concurrency=4))
    with anyio.fail_after(30):
        async with sup.serving():
            handle = await sup.submit(Task("parent", id="p"))
            assert await handle.result(timeout_s=20) == [1, 2, 3, 4]
    assert isinstance(seen["one"], TaskHandle) and isinstance(handle, TaskHandle)
