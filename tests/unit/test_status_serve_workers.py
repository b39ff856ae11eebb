"""`foreperson status` and the page of `foreperson serve` list the same workers (issue 23
item 7: status once showed none where serve listed them): a worker holding a task now,
and workers of a run that ended a moment ago."""

from __future__ import annotations

import json

from foreperson.cli.main import main
from foreperson.observe import snapshot
from foreperson.work import SqliteStore, Supervisor, Task, Worker


def test_status_and_the_page_list_the_same_workers(tmp_path, capsys):
    db = str(tmp_path / "t.db")
    store = SqliteStore(db)
    sup = Supervisor(store, stale_after=60)
    for i in range(2):
        sup.register(Worker(f"w{i}", {"echo"}, fn=lambda task: {"ok": True}))
    sup.add_tasks([Task("echo", {"n": n}) for n in range(6)])
    sup.run_sync()                                    # a run that just ended
    store.add([Task("echo", {"n": 99}, id="held")])
    [claimed] = store.claim("holder", ["echo"], 1, start=True)   # a worker at work now
    assert claimed.id == "held"
    page = sorted(w["name"] for w in snapshot(store)["workers"])
    store.close()

    assert main(["status", "--db", db, "--json"]) == 0
    status = sorted(w["name"] for w in json.loads(capsys.readouterr().out)["workers"])
    assert status == page
    assert "holder" in status and {"w0", "w1"} & set(status)


def test_the_timelines_last_point_is_its_end_and_counts_every_change_up_to_it():
    from foreperson.work.metrics import history_points
    from foreperson.work.task import Status

    since, until = 1_700_000_000.1, 1_700_000_000.1 + 0.3     # 0.1 + 0.3 steps round
    changes = [(until, Status.COMPLETED, 3)]
    points = history_points({Status.COMPLETED: 3}, changes, since, until, 4)
    assert abs(points[-1].at.timestamp() - until) < 1e-6
    assert points[-1].completed == 3 and points[0].completed == 0
