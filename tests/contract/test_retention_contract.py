"""Retention and the aggregates, on every store (memory, SQLite, PostgreSQL): what
``prune`` removes and keeps, the tombstone of a removed id, and the counts kept as work
happens agreeing with the records themselves (issue 18)."""

from __future__ import annotations

import gzip
import json
from collections import Counter

import pytest

from foreperson.errors import InvalidPlan
from foreperson.journal import RunRecord, Step
from foreperson.work import Status, Task
from foreperson.work.metrics import chart_counts
from foreperson.work.retention import Prunes, Retention

DAY = 86400.0


def finish(store, ids, *, dead=(), worker="w"):
    """Claim and settle ``ids``: completed, or DEAD for those in ``dead``."""
    claimed = store.claim(worker, {"k"}, 1000, start=True)
    for task in claimed:
        if task.id not in ids:
            store.release(task.id, task.lease_token)
        elif task.id in dead:
            store.fail(task.id, task.lease_token, "boom", retry_at=None)
        else:
            store.complete(task.id, task.lease_token, {"ok": task.id})


def stored_ids(store) -> set[str]:
    return {t.id for t in store.list_tasks()}


def test_prune_removes_old_finished_runs_whole_and_keeps_what_may_still_matter(
        make_store, clock, tmp_path):
    store = make_store(clock=clock)
    assert isinstance(store, Prunes)
    store.add([Task("k", id=f"old-{i}", run_id="old") for i in range(3)]
              + [Task("k", id="half-done", run_id="half"), Task("k", id="half-waits",
                                                                 run_id="half")]
              + [Task("k", id="lone"), Task("k", id="needed"),
                 Task("k", id="old-dead", run_id="dead-run")])
    finish(store, {"old-0", "old-1", "old-2", "half-done", "lone", "needed", "old-dead"},
           dead={"old-dead"})
    store.add([Task("k", id="waits-on-needed", depends_on=["needed"])])
    store.put_step(Step("old", "model/1", "model", "d", {"text": "hi"}))
    clock.advance(40 * DAY)
    store.add([Task("k", id="young", run_id="young")])
    finish(store, {"young"})

    archive = tmp_path / "pruned.jsonl.gz"
    report = store.prune(Retention(30 * DAY, keep_dead_s=90 * DAY), archive=archive)

    assert stored_ids(store) == {"half-done", "half-waits", "needed", "waits-on-needed",
                                 "old-dead", "young"}
    assert (report.tasks, report.runs, report.steps, report.kept_dead) == (4, 1, 1, 1)
    assert store.list_steps("old") == []
    with gzip.open(archive, "rt") as lines_in:
        lines = [json.loads(line) for line in lines_in]
    assert sorted(r["id"] for r in lines if r["record"] == "task") == [
        "lone", "old-0", "old-1", "old-2"]
    assert [r["key"] for r in lines if r["record"] == "step"] == ["model/1"]
    assert next(r for r in lines if r["id"] == "old-0")["result"] == {"ok": "old-0"}
    counts = store.stats().counts
    assert counts[Status.COMPLETED] == 3 and counts[Status.DEAD] == 1    # needed, young, half

    finish(store, {"waits-on-needed"})            # "needed" is needed no more
    clock.advance(60 * DAY)                       # past --keep-dead: the DEAD run goes too
    store.prune(Retention(30 * DAY, keep_dead_s=90 * DAY))
    assert stored_ids(store) == {"half-done", "half-waits"}


def test_a_pruned_id_added_again_is_refused_until_its_tombstone_is_forgotten(
        make_store, clock):
    store = make_store(clock=clock)
    store.add([Task("k", {"n": 1}, id="t-1", run_id="night-1")])
    finish(store, {"t-1"})
    clock.advance(31 * DAY)
    assert store.prune(Retention(30 * DAY, forget_after_s=100 * DAY)).tasks == 1
    with pytest.raises(InvalidPlan, match="'t-1' already ran.*removed by retention") as info:
        store.add([Task("k", {"n": 1}, id="fresh"), Task("k", {"n": 1}, id="t-1")])
    assert info.value.task_id == "t-1"
    assert store.get("fresh") is None                   # nothing of that batch was added
    clock.advance(101 * DAY)
    assert store.prune(Retention(30 * DAY, forget_after_s=100 * DAY)).tombstones == 1
    assert store.add([Task("k", {"n": 1}, id="t-1")]) == ["t-1"]


def test_a_dry_run_counts_and_removes_nothing(make_store, clock):
    store = make_store(clock=clock)
    store.add([Task("k", id=str(i)) for i in range(5)])
    finish(store, {str(i) for i in range(5)})
    clock.advance(2 * DAY)
    report = store.prune(Retention(DAY), dry_run=True)
    assert (report.tasks, report.dry_run) == (5, True) and "would remove 5" in report.summary()
    assert len(stored_ids(store)) == 5
    assert store.prune(Retention(DAY)).tasks == 5 and stored_ids(store) == set()


def test_durable_runs_go_only_once_they_ended(make_store, clock):
    store = make_store(clock=clock)
    for run_id, status in (("done", "completed"), ("broke", "failed"), ("parked", "waiting"),
                           ("live", "running")):
        store.create_run(RunRecord(run_id, "clerk", None, "running", {"q": run_id}, owner="p"))
        store.put_step(Step(run_id, "model/1", "model", "d", {"text": run_id}))
        if status != "running":
            assert store.end_run(run_id, "p", status)
    store.put_step(Step("fsm-ended", "start", "fsm.start", "d", {}))
    store.put_step(Step("fsm-ended", "end", "fsm.end", "d", {}))
    store.put_step(Step("fsm-open", "start", "fsm.start", "d", {}))
    clock.advance(40 * DAY)
    report = store.prune(Retention(30 * DAY))
    assert (report.agent_runs, report.journals) == (2, 1)
    assert {r.run_id for r in store.list_runs()} == {"parked", "live"}
    assert store.list_steps("done") == [] and store.list_steps("fsm-ended") == []
    assert [s.key for s in store.list_steps("parked")] == ["model/1"]
    assert [s.key for s in store.list_steps("fsm-open")] == ["start"]


def test_the_kept_counts_agree_with_the_records_after_every_kind_of_change(make_store, clock):
    store = make_store(clock=clock)
    store.add([Task("k", id=f"t{i}", max_attempts=2) for i in range(8)]
              + [Task("j", id="child", depends_on=["t0"]), Task("j", id="grandchild",
                                                                 depends_on=["child"])])
    first = {t.id: t for t in store.claim("w1", {"k"}, 3, start=True)}
    clock.advance(2)
    store.complete("t1", first["t1"].lease_token, {})
    store.fail("t0", first["t0"].lease_token, "bad", retry_at=None)          # -> DEAD
    store.park_blocked(["t0"])                                                # child, grandchild
    store.fail("t2", first["t2"].lease_token, "slow", retry_at=clock.now() + 1)   # FAILED
    held = store.claim("w2", {"k"}, 2, start=True, lease_s=5)
    clock.advance(10)
    store.reclaim_stale()                                                     # back to PENDING
    assert sorted(store.retry_dead(["t0"])) == ["child", "grandchild", "t0"]
    again = store.claim("w2", {"k"}, 10, start=True)
    clock.advance(3)
    for task in again:
        store.complete(task.id, task.lease_token, {})
    finish(store, {"child"})
    assert held and store.worker_totals(["w2"])["w2"].failed == 2        # both reclaimed
    clock.advance(2 * DAY)
    store.prune(Retention(DAY))
    assert store.worker_totals(["w1", "w2"]) == {}      # not seen since the cutoff

    tasks = store.list_tasks()
    real = Counter(t.status for t in tasks)
    stats = store.stats()
    assert stats.counts == {s: real.get(s, 0) for s in Status}
    by_kind = store.counts_by_kind()
    for kind in {t.kind for t in tasks}:
        assert by_kind[kind] == {s: sum(1 for t in tasks if t.kind == kind and t.status is s)
                                 for s in Status}
    done = [t for t in tasks if t.status is Status.COMPLETED and t.started_at]
    if done:
        mean = sum((t.finished_at - t.started_at).total_seconds() for t in done) / len(done)
        assert store.mean_durations()[done[0].kind] == pytest.approx(mean)
    last = store.history(points=2)[-1]
    assert (last.unfinished, last.completed, last.dead) == tuple(
        chart_counts(stats.counts).values())


def test_history_reads_back_the_counts_at_each_instant(make_store, clock):
    store = make_store(clock=clock)
    start = clock.now()
    store.add([Task("k", id=str(i)) for i in range(4)])
    clock.advance(10)
    finish(store, {"0", "1"})
    clock.advance(10)
    finish(store, {"2"}, dead={"2"})
    clock.advance(10)
    points = store.history(since=start, until=clock.now(), points=4)
    assert [(p.unfinished, p.completed, p.dead) for p in points] == [
        (4, 0, 0), (2, 2, 0), (1, 2, 1), (1, 2, 1)]
    assert store.history(run_id="none") == []
