"""The observation surface of every store (memory, SQLite, PostgreSQL): what the status
page, ``/metrics`` and traces read (issue 13)."""

from __future__ import annotations

from foreperson.work import MemoryStore, Status, Task
from foreperson.work.store import ReportsWork, TracksWorkers, WorkerTotals


def test_a_task_keeps_the_trace_context_it_was_added_with(make_store):
    store = make_store()
    carrier = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    store.add([Task("k", id="traced", trace_context=carrier), Task("k", id="plain")])
    assert store.get("traced").trace_context == carrier
    assert store.get("plain").trace_context is None
    [claimed] = store.claim("w", {"k"}, 1, start=True)          # the claim hands it on
    assert claimed.id == "traced" and claimed.trace_context == carrier
    # not part of the task's identity: re-adding from another trace is the same work
    assert store.add([Task("k", id="traced", trace_context=None)]) == []


def test_counts_by_kind_and_status_whole_store_or_one_run(make_store):
    store = make_store()
    assert isinstance(store, ReportsWork)
    store.add([Task("a", id="a1", run_id="r"), Task("a", id="a2"), Task("b", id="b1", run_id="r")])
    got = store.claim("w", {"a"}, 1, start=True)[0]
    store.complete(got.id, got.lease_token, {})
    counts = store.counts_by_kind()
    assert set(counts) == {"a", "b"} and set(counts["a"]) == set(Status)
    assert (counts["a"][Status.COMPLETED], counts["a"][Status.PENDING]) == (1, 1)
    assert counts["b"][Status.PENDING] == 1 and counts["b"][Status.DEAD] == 0
    in_run = store.counts_by_kind(run_id="r")
    assert sum(in_run["a"].values()) == 1 and sum(in_run["b"].values()) == 1


def test_worker_totals_count_completions_and_failed_attempts_per_worker(make_store, clock):
    store = make_store(clock=clock)
    store.add([Task("k", id=str(i), max_attempts=3) for i in range(4)])
    for worker in ("w1", "w2"):
        task = store.claim(worker, {"k"}, 1, start=True)[0]
        store.complete(task.id, task.lease_token, {})
    failing = store.claim("w1", {"k"}, 1, start=True)[0]
    assert store.fail(failing.id, failing.lease_token, "boom", retry_at=None) is Status.DEAD
    assert store.get(failing.id).errors[-1]["worker"] == "w1"
    stale = store.claim("w2", {"k"}, 1, start=True, lease_s=5)[0]
    clock.advance(10)
    assert store.reclaim_stale() == [stale.id]                  # a lapsed lease counts too
    assert store.worker_totals() == {"w1": WorkerTotals(completed=1, failed=1),
                                     "w2": WorkerTotals(completed=1, failed=1)}


def test_dependents_are_the_direct_ones_in_insertion_order(make_store):
    store = make_store()
    store.add([Task("k", id="root"), Task("k", id="x", depends_on=["root"]),
               Task("k", id="y", depends_on=["root", "x"]), Task("k", id="z", depends_on=["y"])])
    assert store.dependents("root") == ["x", "y"]
    assert store.dependents("z") == [] and store.dependents("missing") == []


def test_workers_are_recorded_with_the_process_that_runs_them(make_store):
    import os
    import socket

    store = make_store()
    if isinstance(store, MemoryStore):
        assert not isinstance(store, TracksWorkers)   # nothing to share with other processes
        return
    assert isinstance(store, TracksWorkers)
    store.worker_seen("w1", {"b", "a"}, 4)
    store.worker_seen("w1", {"a"}, 2)                        # seen again: updated
    [record] = store.list_workers()
    assert (record.name, record.kinds, record.concurrency) == ("w1", ("a",), 2)
    assert (record.host, record.pid) == (socket.gethostname(), os.getpid())
    assert record.heartbeat_at >= record.started_at
    assert set(store.stats().workers) == {"w1"}
    store.worker_gone("w1")
    assert store.list_workers() == [] and store.stats().workers == {}
