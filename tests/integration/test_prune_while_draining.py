"""``foreperson db prune`` removes a year of nightly runs while a drain runs beside it
(issue 18): the prune ends without an error, every task of the drain is done exactly
once, and nothing that was not old and finished is removed."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter

import anyio
import pytest

from foreperson.testing import FillPlan, fill_history
from foreperson.work import SqliteStore, Status, Supervisor, Task, Worker

YEAR = FillPlan(365 * 60, per_night=60, agent_runs_per_night=1, steps_per_run=5)
TONIGHT = 3000


def drain_beside_prune(open_store, where: list[str]) -> tuple[Counter[str], str, object]:
    """Fill a year, then drain tonight's tasks in a thread while ``foreperson db prune``
    runs in a process of its own. Returns (runs per task id, prune's output, stats)."""
    store = open_store()
    fill_history(store, YEAR)
    store.add([Task("tonight", {"n": i}, id=f"tonight-{i}", run_id="tonight")
               for i in range(TONIGHT)])
    ran: Counter[str] = Counter()
    started = threading.Event()
    pruned_done = threading.Event()     # the last tasks wait for it: the drain outlives the prune
    failures: list[BaseException] = []

    async def work(task: Task) -> dict:
        ran[task.id] += 1
        started.set()
        if task.payload["n"] >= TONIGHT - 4:
            assert await anyio.to_thread.run_sync(pruned_done.wait, 300)
        await anyio.sleep(0.02)
        return {"n": task.payload["n"]}

    def drain() -> None:
        sup = Supervisor(store, stale_after=30)
        for i in range(4):
            sup.register(Worker(f"tonight-{i}", {"tonight"}, fn=work, concurrency=4))
        try:
            sup.run_sync(run_id="tonight")
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    thread = threading.Thread(target=drain)
    thread.start()
    assert started.wait(30)
    pruned = subprocess.run(
        [sys.executable, "-m", "foreperson.cli.main", "db", "prune", *where, "--older-than", "30d",
         "--keep-dead", "60d"], capture_output=True, text=True, timeout=300,
        env=dict(os.environ))
    during = store.stats(run_id="tonight")
    pruned_done.set()
    thread.join(300)
    assert not thread.is_alive() and failures == []
    assert pruned.returncode == 0, pruned.stderr
    assert during.unfinished > 0          # the prune ended while the drain still ran
    assert during.counts[Status.COMPLETED] > 0
    stats = store.stats()
    store.close()
    return ran, pruned.stdout, stats


def check(ran: Counter[str], output: str, stats) -> None:
    assert sorted(ran.values()) == [1] * TONIGHT                 # none lost, none redone
    assert stats.counts[Status.COMPLETED] >= TONIGHT
    # a year of 60 tasks a night: the 30 newest nights stay (and the DEAD of 60 nights)
    assert stats.counts[Status.COMPLETED] - TONIGHT == pytest.approx(30 * 60, abs=120)
    assert "removed" in output and "error" not in output.lower()


def test_sqlite_prune_a_year_while_a_drain_runs(tmp_path):
    path = tmp_path / "year.db"
    began = time.monotonic()
    ran, output, stats = drain_beside_prune(lambda: SqliteStore(path), ["--db", str(path)])
    check(ran, output, stats)
    assert time.monotonic() - began < 120


@pytest.mark.postgres
def test_postgres_prune_a_year_while_a_drain_runs(pg_dsn, pg_schema):
    from foreperson.work.stores.postgres import PostgresStore

    ran, output, stats = drain_beside_prune(
        lambda: PostgresStore(pg_dsn, schema=pg_schema, pool_size=8),
        ["--dsn", pg_dsn, "--schema", pg_schema])
    check(ran, output, stats)
