"""Retention as a user sets it: ages as written on a command line, the rules checked up
front, and a long-lived supervisor pruning old work in the background while it serves."""

from __future__ import annotations

import anyio
import pytest

from foreperson.errors import ConfigurationError
from foreperson.testing import ManualClock
from foreperson.work import MemoryStore, Status, Supervisor, Task, Worker
from foreperson.work.retention import PruneReport, Retention, parse_age

DAY = 86400.0


@pytest.mark.parametrize(("text", "seconds"), [
    ("30d", 30 * DAY), ("12h", 43200), ("90m", 5400), ("3600s", 3600), ("2w", 14 * DAY),
    ("1.5d", 1.5 * DAY), ("45", 45), (" 7D ", 7 * DAY)])
def test_ages_are_a_number_and_a_unit(text, seconds):
    assert parse_age(text) == seconds


@pytest.mark.parametrize("text", ["", "30 days", "d", "-3d", "0d", "3y", "1e3d"])
def test_a_bad_age_says_how_to_write_one(text):
    with pytest.raises(ConfigurationError, match="30d|more than 0"):
        parse_age(text, what="--older-than")


def test_dead_tasks_can_be_kept_longer_not_less_long():
    assert Retention.parse("30d", "90d").cutoffs(100 * DAY) == (70 * DAY, 10 * DAY)
    with pytest.raises(ConfigurationError, match="kept longer, not less long"):
        Retention.parse("30d", "7d")


def test_a_summary_says_what_went_and_what_stayed():
    text = PruneReport(tasks=912, runs=304, steps=20, kept_dead=9, seconds=3.2,
                       freed_bytes=5_000_000, complete=False).summary()
    assert text.startswith("removed 912 task(s) (304 whole run(s)), 20 journal step(s)")
    assert "kept 9 DEAD task(s) for --keep-dead" in text and "5.0 MB" in text
    assert "run it again" in text


@pytest.mark.anyio
async def test_a_serving_supervisor_prunes_old_work_in_the_background():
    clock = ManualClock()
    store = MemoryStore(clock=clock)
    store.add([Task("k", id=f"old-{i}", run_id="last-month") for i in range(5)])
    for task in store.claim("w", {"k"}, 5, start=True):
        store.complete(task.id, task.lease_token, {})
    clock.advance(31 * DAY)
    sup = Supervisor(store, retention=Retention(30 * DAY, every_s=0.05))
    sup.register(Worker("w", {"k"}, fn=lambda task: {"n": task.payload["n"]}))
    async with sup.serving():
        handles = [await sup.submit(Task("k", {"n": i}, run_id="tonight")) for i in range(3)]
        assert [await h.result() for h in handles] == [{"n": 0}, {"n": 1}, {"n": 2}]
        with anyio.fail_after(10):
            while store.get("old-0") is not None:
                await anyio.sleep(0.02)
    assert {t.id for t in store.list_tasks()} == {h.task_id for h in handles}
    assert store.stats().counts[Status.COMPLETED] == 3
