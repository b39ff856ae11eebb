"""Tasks over time: rebuilt from the records' timestamps, or from the changes a store
keeps (the counts now minus what changed since)."""

from __future__ import annotations

from foreperson.testing import ManualClock
from foreperson.work import MemoryStore, Task
from foreperson.work.metrics import timeline


def test_timeline_counts_unfinished_completed_and_dead():
    clock = ManualClock()
    store = MemoryStore(clock=clock)
    store.add([Task("k", id="a"), Task("k", id="b", max_attempts=1), Task("k", id="c")])
    a, b = store.claim("w", {"k"}, 2, start=True)
    clock.advance(10)
    store.complete(a.id, a.lease_token, None)
    clock.advance(10)
    store.fail(b.id, b.lease_token, "boom", retry_at=None)
    points = timeline(store.list_tasks(), points=3)
    assert [(p.unfinished, p.completed, p.dead) for p in points] == [
        (3, 0, 0), (2, 1, 0), (1, 1, 1)]
    assert timeline([], points=3) == []
