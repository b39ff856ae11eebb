"""The TaskStore contract: every store (memory, SQLite, PostgreSQL) must pass all of it."""

from __future__ import annotations

import threading
from datetime import UTC

import pytest

from foreperson.errors import InvalidPlan
from foreperson.journal import RunRecord, Step, UnknownStepVersion, request_digest
from foreperson.work import Status, Task


def claim_one(store, kind="k", worker="w1", *, start=False, lease_s=90.0):
    got = store.claim(worker, {kind}, 1, start=start, lease_s=lease_s)
    assert len(got) == 1, f"expected one claimable {kind} task, got {got}"
    return got[0]


def test_add_and_get_round_trip(make_store, clock):
    store = make_store(clock=clock)
    task = Task("k", {"text": "héllo", "n": [1, 2]}, max_attempts=5, estimate_s=2.5,
                locks=["row:1"])
    assert store.add([task]) == [task.id]
    got = store.get(task.id)
    assert got is not None
    assert (got.kind, got.payload, got.max_attempts, got.estimate_s, got.locks) == (
        "k", {"text": "héllo", "n": [1, 2]}, 5, 2.5, ["row:1"])
    assert got.status is Status.PENDING and got.attempts == 0 and got.lease_token is None
    assert got.created_at.tzinfo == UTC
    assert got.created_at.timestamp() == pytest.approx(clock.now())
    assert store.get("missing") is None


def test_adding_the_same_id_twice_is_harmless(make_store):
    store = make_store()
    task = Task("k", {"a": 1}, id="ticket-1")
    assert store.add([task]) == ["ticket-1"]
    assert store.add([Task("k", {"a": 1}, id="ticket-1")]) == []
    assert store.get("ticket-1").payload == {"a": 1}


def test_re_adding_an_id_with_other_work_is_an_error_naming_it(make_store):
    store = make_store()
    store.add([Task("k", {"a": 1}, id="ticket-1")])
    fresh = Task("k", id="fresh")
    with pytest.raises(InvalidPlan, match="'ticket-1' is already stored as another task"):
        store.add([fresh, Task("k", {"a": 2}, id="ticket-1")])
    with pytest.raises(InvalidPlan, match="another id"):
        store.add([Task("other-kind", {"a": 1}, id="ticket-1")])
    assert store.get("ticket-1").payload == {"a": 1} and store.get("fresh") is None


def test_unknown_dependency_is_rejected_and_nothing_is_stored(make_store):
    store = make_store()
    ok = Task("k")
    bad = Task("k", depends_on=["nope"])
    with pytest.raises(InvalidPlan, match="unknown task"):
        store.add([ok, bad])
    assert store.get(ok.id) is None


def test_cycle_is_rejected_when_added(make_store):
    store = make_store()
    a, b, c = Task("k", id="a"), Task("k", id="b"), Task("k", id="c")
    a.depends_on, b.depends_on, c.depends_on = ["c"], ["a"], ["b"]
    with pytest.raises(InvalidPlan, match="cycle"):
        store.add([a, b, c])
    assert store.stats().total == 0


def test_payload_must_be_json(make_store):
    store = make_store()
    with pytest.raises(InvalidPlan, match="not JSON"):
        store.add([Task("k", {"when": object()})])


def test_dependencies_gate_readiness(make_store):
    store = make_store()
    first = Task("k", id="first")
    second = Task("k", id="second", depends_on=["first"])
    store.add([first, second])
    assert [t.id for t in store.ready({"k"}, 10)] == ["first"]
    claimed = claim_one(store)
    assert store.ready({"k"}, 10) == []
    assert store.complete(claimed.id, claimed.lease_token, {"ok": True})
    assert [t.id for t in store.ready({"k"}, 10)] == ["second"]


def test_a_brief_ready_list_is_the_ready_list_in_the_same_order(make_store):
    from foreperson.work.store import ListsReadyBriefly

    store = make_store()
    if not isinstance(store, ListsReadyBriefly):
        assert type(store).__name__ != "SqliteStore"     # SQLite must offer it
        return
    store.add([Task("k", id="a", estimate_s=2.0), Task("k", id="b", depends_on=["a"]),
               Task("other", id="c"), Task("k", id="d", locks=["row:1"]),
               Task("k", id="e", locks=["row:1"])])
    held = store.claim("w1", {"k"}, 1)                 # takes a; b waits for it
    assert [t.id for t in held] == ["a"]
    want = [(t.id, t.kind, t.estimate_s) for t in store.ready({"k", "other"}, 10)]
    assert store.ready_brief({"k", "other"}, 10) == want and want
    assert store.ready_brief({"k", "other"}, 1) == want[:1]
    assert store.ready_brief(set(), 10) == []


def test_a_claim_hands_a_task_out_once_and_start_counts_the_attempt(make_store):
    store = make_store()
    store.add([Task("k", id="t")])
    task = claim_one(store)
    assert task.attempts == 0 and task.status is Status.ASSIGNED   # prefetched: not yet
    assert task.assigned_to == "w1" and task.lease_token
    assert store.claim("w2", {"k"}, 5) == []
    assert store.start(task.id, task.lease_token)
    started = store.get("t")
    assert started.status is Status.RUNNING and started.attempts == 1
    assert store.stats().active_by_worker == {"w1": 1}
    store.add([Task("k", id="u")])
    assert claim_one(store, start=True).attempts == 1     # claimed and started at once


def test_claim_only_takes_the_kinds_asked_for(make_store):
    store = make_store()
    store.add([Task("a", id="a1"), Task("b", id="b1")])
    assert [t.id for t in store.claim("w", {"b"}, 5)] == ["b1"]


def test_writes_are_fenced_by_the_lease_token(make_store, clock):
    store = make_store(clock=clock)
    store.add([Task("k", id="t")])
    old = claim_one(store, worker="old", lease_s=90)
    clock.advance(100)
    assert store.reclaim_stale() == ["t"]
    new = claim_one(store, worker="new")
    assert new.lease_token != old.lease_token
    # the old worker, still alive, can no longer write anything
    assert not store.start("t", old.lease_token)
    assert store.heartbeat({"t": old.lease_token}) == {"t"}
    assert not store.complete("t", old.lease_token, {"late": True})
    assert store.fail("t", old.lease_token, "late", retry_at=None) is None
    assert not store.claim_effect("send", "t", old.lease_token)
    assert not store.release("t", old.lease_token)
    assert store.heartbeat({"t": new.lease_token}) == set()
    assert store.complete("t", new.lease_token, {"by": "new"})
    assert store.get("t").result == {"by": "new"}


def test_completed_task_is_never_handed_out_again(make_store, clock):
    store = make_store(clock=clock)
    store.add([Task("k", id="t")])
    task = claim_one(store)
    assert store.complete("t", task.lease_token, 1)
    clock.advance(10_000)
    assert store.reclaim_stale() == []
    assert store.claim("w", {"k"}, 5) == []
    done = store.get("t")
    assert done.status is Status.COMPLETED and done.finished_at is not None


def test_failed_attempt_waits_for_its_backoff(make_store, clock):
    store = make_store(clock=clock)
    store.add([Task("k", id="t")])
    task = claim_one(store)       # a failure counts the attempt even if never marked started
    assert store.fail("t", task.lease_token, "TimeoutError: slow",
                      retry_at=clock.now() + 4) is Status.FAILED
    failed = store.get("t")
    assert failed.status is Status.FAILED and failed.error == "TimeoutError: slow"
    assert failed.reason == "retrying" and failed.attempts == 1
    assert [e["attempt"] for e in failed.errors] == [1]
    assert store.claim("w", {"k"}, 1) == []
    clock.advance(5)
    again = claim_one(store, start=True)
    assert again.attempts == 2


def test_dead_says_why_by_reason_code(make_store):
    store = make_store()
    store.add([Task("k", id="bad"), Task("k", id="flaky", max_attempts=1)])
    for task in store.claim("w", {"k"}, 2, start=True):
        store.fail(task.id, task.lease_token, "boom", retry_at=None)
    assert store.get("bad").reason == "not_retryable"      # attempts left: a 4xx, GiveUp
    assert store.get("flaky").reason == "retries_exhausted"


def test_dead_task_parks_its_dependents_transitively(make_store):
    store = make_store()
    store.add([Task("k", id="a"), Task("k", id="b", depends_on=["a"]),
               Task("k", id="c", depends_on=["b"]), Task("k", id="free")])
    task = store.claim("w", {"k"}, 10)
    assert {t.id for t in task} == {"a", "free"}
    a = next(t for t in task if t.id == "a")
    assert store.fail("a", a.lease_token, "ValueError: bad payload", retry_at=None) is Status.DEAD
    assert sorted(store.park_blocked()) == ["b", "c"]
    assert store.get("b").status is Status.DEAD and store.get("b").reason == "dependency_dead"
    assert "dependency a is dead" in store.get("b").error
    assert store.stats().counts[Status.DEAD] == 3
    assert store.stats().unfinished == 1   # only "free" is still running


def test_retry_dead_revives_the_task_and_its_parked_dependents(make_store):
    store = make_store()
    store.add([Task("k", id="a", max_attempts=1), Task("k", id="b", depends_on=["a"])])
    a = claim_one(store)
    store.fail("a", a.lease_token, "boom", retry_at=None)
    store.park_blocked()
    assert store.retry_dead(["a"]) == ["a", "b"]
    revived = store.get("a")
    assert revived.status is Status.PENDING and revived.attempts == 0
    assert revived.reason == "revived"
    assert [e["error"] for e in revived.errors] == ["boom"]   # history is kept
    assert store.get("b").status is Status.PENDING


def test_retry_dead_leaves_alone_dependents_that_died_on_their_own(make_store):
    store = make_store()
    store.add([Task("k", id="a"), Task("k", id="b", depends_on=["a"])])
    a = claim_one(store, start=True)
    store.complete("a", a.lease_token, 1)
    b = claim_one(store, start=True)
    store.fail("b", b.lease_token, "dependency looks odd", retry_at=None)  # its own error
    assert store.retry_dead(["a"]) == []          # a is not DEAD; b's death is its own
    assert store.get("b").status is Status.DEAD


def test_stale_task_is_reclaimed_then_dead_after_max_attempts(make_store, clock):
    store = make_store(clock=clock)
    store.add([Task("k", id="poison", max_attempts=2)])
    for attempt in (1, 2):
        task = claim_one(store, start=True, lease_s=90)
        assert task.attempts == attempt
        clock.advance(60)
        assert store.reclaim_stale() == []   # heartbeat 60 s old: not stale yet
        assert store.heartbeat({"poison": task.lease_token}) == set()
        clock.advance(91)
        assert store.reclaim_stale() == ["poison"]
        assert store.get("poison").reason == (
            "lease_expired" if attempt == 1 else "retries_exhausted")
    final = store.get("poison")
    assert final.status is Status.DEAD
    assert "stopped heartbeating" in final.error and "90 s" in final.error
    assert len(final.errors) == 2


def test_the_lease_belongs_to_the_task_whoever_sweeps(make_store, clock):
    store = make_store(clock=clock)
    store.add([Task("k", id="short", stale_after=3), Task("k", id="long")])
    for task in store.claim("w", {"k"}, 2, start=True, lease_s=30):
        assert task.lease_expires_at is not None
    clock.advance(4)
    assert store.reclaim_stale() == ["short"]   # its own 3 s lease, not the worker's 30
    clock.advance(20)
    assert store.reclaim_stale() == []          # "long" holds the claimer's 30 s lease
    clock.advance(7)
    assert store.reclaim_stale() == ["long"]


def test_a_prefetched_task_never_started_costs_no_attempt_when_reclaimed(make_store, clock):
    store = make_store(clock=clock)
    store.add([Task("k", id="t", max_attempts=1)])
    for _ in range(3):                          # three holders die before starting it
        claim_one(store, lease_s=5)
        clock.advance(6)
        assert store.reclaim_stale() == ["t"]
    back = store.get("t")
    assert back.status is Status.PENDING and back.attempts == 0 and back.errors == []
    assert back.reason == "lease_expired"


def test_reclaim_by_holder_prefix_takes_back_only_known_dead_holders(make_store):
    store = make_store()
    store.add([Task("k", id="mine"), Task("k", id="theirs")])
    claim_one(store, worker="job@host:111:w1", start=True)
    claim_one(store, worker="host:222", start=True)
    assert store.reclaim_stale(holder_prefix="job@host:") == ["mine"]
    assert store.get("theirs").status is Status.RUNNING


def test_release_gives_the_task_back_without_counting_the_attempt(make_store):
    store = make_store()
    store.add([Task("k", id="t")])
    task = claim_one(store, start=True)
    assert store.release("t", task.lease_token)
    back = store.get("t")
    assert back.status is Status.PENDING and back.attempts == 0 and back.reason == "released"
    assert claim_one(store, start=True).attempts == 1


def test_tasks_sharing_a_lock_never_run_together(make_store):
    store = make_store()
    store.add([Task("k", id="w1", locks=["out.csv"]), Task("k", id="w2", locks=["out.csv"]),
               Task("k", id="other", locks=["elsewhere"])])
    first = store.claim("w", {"k"}, 10)
    assert sorted(t.id for t in first) == ["other", "w1"]
    assert store.claim("w", {"k"}, 10) == []
    holder = next(t for t in first if t.id == "w1")
    assert store.complete("w1", holder.lease_token, None)
    assert [t.id for t in store.claim("w", {"k"}, 10)] == ["w2"]


def test_lock_is_freed_by_failure_and_by_reclaim(make_store, clock):
    store = make_store(clock=clock)
    store.add([Task("k", id="a", locks=["x"]), Task("k", id="b", locks=["x"])])
    a = claim_one(store)
    store.fail(a.id, a.lease_token, "boom", retry_at=clock.now() + 100)
    b = claim_one(store)
    assert b.id == "b"
    clock.advance(200)
    store.reclaim_stale()
    assert {t.id for t in store.claim("w", {"k"}, 10)} == {"a"}


def test_a_side_effect_claimed_but_never_done_is_done_again_with_its_key(make_store, clock):
    store = make_store(clock=clock)
    store.add([Task("k", id="t", max_attempts=5)])
    first = claim_one(store, start=True)
    assert store.claim_effect("task:t:send", "t", first.lease_token)
    assert not store.claim_effect("task:t:send", "t", first.lease_token)   # same attempt
    clock.advance(100)
    store.reclaim_stale()                 # crashed between claiming and finishing it
    second = claim_one(store, start=True)
    assert store.claim_effect("task:t:send", "t", second.lease_token)      # at least once
    assert store.effect_done("task:t:send", "t", second.lease_token)
    clock.advance(100)
    store.reclaim_stale()
    third = claim_one(store, start=True)
    assert not store.claim_effect("task:t:send", "t", third.lease_token)   # done: never again
    assert store.claim_effect("task:t:other", "t", third.lease_token)
    assert not store.effect_done("task:t:other", "t", "stale-token")


def test_stats_report_counts_active_workers_and_oldest_age(make_store, clock):
    store = make_store(clock=clock)
    store.add([Task("k", id="old")])
    clock.advance(30)
    store.add([Task("k", id="new")])
    claim_one(store, worker="alice")
    clock.advance(10)
    stats = store.stats()
    assert stats.counts[Status.ASSIGNED] == 1 and stats.counts[Status.PENDING] == 1
    assert stats.active_by_worker == {"alice": 1}
    assert stats.oldest_unfinished_age_s == pytest.approx(40)
    assert stats.total == 2 and stats.unfinished == 2


def test_a_run_scopes_stats_listing_and_finished(make_store):
    store = make_store()
    parent = Task("k", id="p", run_id="run-1")
    store.add([parent, Task("k", id="c", run_id="run-1", parent_id="p"),
               Task("k", id="other", run_id="run-2"), Task("k", id="loose")])
    got = store.get("c")
    assert (got.run_id, got.parent_id) == ("run-1", "p")
    assert [t.id for t in store.list_tasks(run_id="run-1")] == ["p", "c"]
    assert store.stats(run_id="run-1").total == 2 and store.stats().total == 4
    for task in store.claim("w", {"k"}, 4, start=True):
        if task.id in ("p", "c"):
            store.complete(task.id, task.lease_token, task.id)
    assert store.stats(run_id="run-1").unfinished == 0
    assert store.stats(run_id="run-2").unfinished == 1
    assert set(store.finished_among(["p", "c", "other", "missing"])) == {"p", "c"}
    assert store.finished_among(["c"])["c"].result == "c"


def test_mean_durations_are_learned_per_kind(make_store, clock):
    store = make_store(clock=clock)
    store.add([Task("slow", id="s"), Task("fast", id="f")])
    for kind, seconds in (("slow", 8), ("fast", 2)):
        task = store.claim("w", {kind}, 1, start=True)[0]
        clock.advance(seconds)
        store.complete(task.id, task.lease_token, None)
    assert store.mean_durations() == {"slow": pytest.approx(8), "fast": pytest.approx(2)}


def test_batch_commits_every_call_made_inside(make_store):
    store = make_store()
    store.add([Task("k", id=str(i)) for i in range(5)])
    claimed = store.claim("w", {"k"}, 5)
    with store.batch():
        for task in claimed:
            assert store.complete(task.id, task.lease_token, {"i": task.id})
        assert not store.complete(claimed[0].id, "stale-token", {})
    assert store.stats().counts[Status.COMPLETED] == 5


def test_concurrent_claims_never_hand_a_task_out_twice(make_store):
    store = make_store()
    store.add([Task("k", id=str(i)) for i in range(400)])
    seen: list[str] = []
    seen_lock = threading.Lock()
    barrier = threading.Barrier(8)

    def worker(name: str) -> None:
        barrier.wait()
        while True:
            got = store.claim(name, {"k"}, 3)
            if not got:
                return
            for task in got:
                assert store.complete(task.id, task.lease_token, name)
            with seen_lock:
                seen.extend(t.id for t in got)

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(seen, key=int) == [str(i) for i in range(400)]
    assert store.stats().counts[Status.COMPLETED] == 400


def test_bulk_start_and_complete_are_fenced_like_single_calls(make_store, clock):
    store = make_store(clock=clock)
    store.add([Task("k", id=str(i), locks=["x"] if i == 0 else []) for i in range(4)])
    claimed = store.claim("w", {"k"}, 4)
    assert {t.id for t in claimed} == {"0", "1", "2", "3"}
    leases = {t.id: t.lease_token for t in claimed}
    assert store.start_many({**leases, "3": "stale"}) == {"3"}
    assert store.get("1").status is Status.RUNNING
    done = store.complete_many([(i, leases[i], {"n": int(i)}) for i in ("0", "1")]
                               + [("2", "stale", {}), ("missing", "x", {})])
    assert done == {"0", "1"}
    assert store.get("1").result == {"n": 1} and store.get("2").status is Status.RUNNING
    store.add([Task("k", id="next", locks=["x"])])
    assert [t.id for t in store.claim("w", {"k"}, 5)] == ["next"]   # lock "x" was freed


def test_a_result_that_is_not_json_is_refused_and_the_task_stays_held(make_store):
    store = make_store()
    store.add([Task("k", id="t")])
    task = claim_one(store)
    with pytest.raises(TypeError):
        store.complete("t", task.lease_token, {1, 2})
    assert store.get("t").status is Status.ASSIGNED
    assert store.complete("t", task.lease_token, [1, 2])


# -- the step journal (foreperson.journal.Journal), in the same store ---------------------

def test_journal_records_steps_in_order_first_write_wins(make_store):
    store = make_store()
    first = store.put_step(Step("run", "agent:a/turn:1/model", "model_call",
                                request_digest({"q": 1}), {"text": "hi"}))
    assert first.seq is not None and first.created_at is not None
    store.put_step(Step("run", "agent:a/turn:1/tool:0", "tool_call", "d2", [1, "two"]))
    again = store.put_step(Step("run", "agent:a/turn:1/model", "model_call", "other", "late"))
    assert again.result == {"text": "hi"} and again.digest == first.digest
    store.put_step(Step("elsewhere", "agent:a/turn:1/model", "model_call", "d", None))
    steps = store.list_steps("run")
    assert [s.key for s in steps] == ["agent:a/turn:1/model", "agent:a/turn:1/tool:0"]
    assert steps[1].result == [1, "two"] and steps[1].kind == "tool_call"
    assert store.get_step("run", "agent:a/turn:1/tool:0").digest == "d2"
    assert store.get_step("run", "missing") is None
    assert store.has_steps("run") and store.has_steps("elsewhere")
    assert not store.has_steps("nowhere")
    assert store.stats().total == 0              # a step is never a claimable task


def test_journal_refuses_a_step_format_it_does_not_know(make_store):
    store = make_store()
    store.put_step(Step("run", "k", "model_call", "d", 1, version=99))
    with pytest.raises(UnknownStepVersion, match="version 99"):
        store.get_step("run", "k")
    with pytest.raises(UnknownStepVersion):
        store.list_steps("run")


def test_journal_results_must_be_json(make_store):
    store = make_store()
    with pytest.raises(TypeError):
        store.put_step(Step("run", "k", "tool_call", "d", {1, 2}))
    assert store.list_steps("run") == []


def test_journal_keeps_each_steps_request_summary(make_store):
    store = make_store()
    summary = {"tool": "add", "arguments": {"a": 2}}
    stored = store.put_step(Step("run", "k", "tool_call", "d", 5, request=summary))
    assert stored.request == summary
    assert store.get_step("run", "k").request == summary
    assert store.list_steps("run")[0].request == summary
    store.put_step(Step("run", "old", "tool_call", "d", 5))      # written without one
    assert store.get_step("run", "old").request is None


# -- durable runs (foreperson.journal.RunLedger), in the same store ------------------------

def test_a_run_record_belongs_to_its_first_user_and_keeps_its_input(make_store, clock):
    store = make_store(clock=clock)
    first = store.create_run(RunRecord("r1", "lead", "ada", input={"prompt": "héllo"}))
    assert (first.agent, first.user_id, first.status, first.input) == (
        "lead", "ada", "running", {"prompt": "héllo"})
    assert first.created_at.tzinfo == UTC and first.owner is None
    again = store.create_run(RunRecord("r1", "other", "bob", input={"prompt": "x"}))
    assert (again.agent, again.user_id, again.input) == ("lead", "ada", {"prompt": "héllo"})
    assert store.get_run("r1") == again
    assert store.get_run("missing") is None
    assert store.stats().total == 0              # a run is never a claimable task


def test_a_run_has_one_owner_at_a_time_until_its_lease_lapses(make_store, clock):
    store = make_store(clock=clock)
    store.create_run(RunRecord("r1", "lead", None, input={}))
    assert store.claim_run("missing", "p1", 30) is None
    held = store.claim_run("r1", "p1", 30)
    assert held.owner == "p1" and held.status == "running"
    assert held.lease_expires_at.timestamp() == pytest.approx(clock.now() + 30)
    assert store.claim_run("r1", "p2", 30) is None                  # p1 holds it
    assert store.claim_run("r1", "p1", 30).owner == "p1"            # its own again
    assert store.claim_run("r1", "p2", 30, take_from="p1").owner == "p2"   # p1 is dead
    assert not store.renew_run("r1", "p1", 30)                       # fenced
    clock.advance(20)
    assert store.renew_run("r1", "p2", 30)
    clock.advance(20)
    assert store.claim_run("r1", "p3", 30) is None                  # renewed: still p2's
    clock.advance(15)
    assert store.claim_run("r1", "p3", 30).owner == "p3"            # the lease lapsed


def test_ending_a_run_records_how_and_lets_it_go(make_store, clock):
    store = make_store(clock=clock)
    store.create_run(RunRecord("r1", "lead", "ada", input={}))
    store.claim_run("r1", "p1", 30)
    assert not store.end_run("r1", "p2", "completed", result={"text": "no"})
    clock.advance(2)
    assert store.end_run("r1", "p1", "waiting", result={"text": None},
                         stop_reason="awaiting_approval")
    record = store.get_run("r1")
    assert (record.status, record.result, record.stop_reason, record.owner) == (
        "waiting", {"text": None}, "awaiting_approval", None)
    assert record.updated_at.timestamp() == pytest.approx(clock.now())
    assert store.claim_run("r1", "p2", 30).owner == "p2"            # nobody holds it
    assert store.end_run("r1", "p2", "failed", error="ModelError: boom")
    assert (store.get_run("r1").status, store.get_run("r1").error) == (
        "failed", "ModelError: boom")
    store.claim_run("r1", "p3", 30)
    with pytest.raises(TypeError):
        store.end_run("r1", "p3", "completed", result={1, 2})
    assert store.get_run("r1").owner == "p3"                          # nothing written


def test_runs_are_listed_newest_first_by_user_and_status(make_store, clock):
    store = make_store(clock=clock)
    for run_id, user in [("a1", "ada"), ("b1", "bob"), ("a2", "ada"), ("n1", None)]:
        store.create_run(RunRecord(run_id, "lead", user, input={}))
        clock.advance(1)
    store.claim_run("a1", "p", 30)
    store.end_run("a1", "p", "completed", result={})
    assert [r.run_id for r in store.list_runs()] == ["n1", "a2", "b1", "a1"]
    assert [r.run_id for r in store.list_runs(user_id="ada")] == ["a2", "a1"]
    assert [r.run_id for r in store.list_runs(status="completed")] == ["a1"]
    assert [r.run_id for r in store.list_runs(limit=2)] == ["n1", "a2"]
