"""Seed 000's own wiring, written the seed's way with foreperson's names."""

from __future__ import annotations

import threading
import time

from foreperson import Status, Task
from foreperson.work import Supervisor, Worker


class TicketWorker(Worker):
    """A seed-style worker: overrides execute, reports through the supervisor."""

    runs: dict[str, int] = {}
    guard = threading.Lock()

    def execute(self, task: Task) -> dict:
        with self.guard:
            self.runs[task.id] = self.runs.get(task.id, 0) + 1
        return {"category": "billing" if "refund" in task.payload["ticket"] else "other",
                "by": self.name}


def test_seed_loop_processes_every_ticket_exactly_once():
    TicketWorker.runs = {}
    todays_tickets = [f"ticket {i}: please refund" if i % 3 == 0 else f"ticket {i}"
                      for i in range(200)]

    sup = Supervisor(strategy="least_loaded", stale_after=90.0)
    for i in range(8):
        sup.register(TicketWorker(f"w{i}", {"classify_ticket"}, {"classify_ticket": 1.0}, sup))
    for ticket in todays_tickets:
        sup.add_task(Task(kind="classify_ticket", payload={"ticket": ticket}))

    deadline = time.monotonic() + 60
    while not sup.finished():
        sup.dispatch_round()
        time.sleep(0.01)       # the seed's polling loop, as written
        assert time.monotonic() < deadline

    done = sup.store.list_tasks(status=Status.COMPLETED)
    assert len(done) == 200
    assert sorted(TicketWorker.runs.values()) == [1] * 200
    assert sum(t.result["category"] == "billing" for t in done) == 67
    assert len({t.result["by"] for t in done}) == 8      # the work was spread out


def test_seed_callbacks_on_fail_and_on_complete():
    sup = Supervisor(kinds={"k"}, backoff_base_s=0.0)
    task = Task("k", id="t", max_attempts=2)
    sup.add_task(task)
    claimed = sup.store.claim("w", {"k"}, 1)[0]
    assert sup.on_fail(claimed, "rate limited") is Status.FAILED
    again = sup.store.claim("w", {"k"}, 1)[0]
    assert sup.on_complete(again, {"ok": True})
    assert not sup.on_complete(claimed, {"late": True})   # the first lease is gone
    assert sup.store.get("t").result == {"ok": True}
