"""Issue 21 item 3: every process that talks to PostgreSQL rides out a real server
restart: the supervisor and its workers, the ticket job supervising remote workers. A
cluster of the test's own is restarted (``pg_ctl restart -m fast``: every connection is
terminated, as in a real restart), so the machine's cluster is never touched."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import psycopg
import pytest
from _pg_cluster import PrivateCluster
from _pg_procs import wait_until

pytestmark = pytest.mark.postgres

HERE = Path(__file__).resolve().parent


@pytest.fixture
def cluster():
    made = PrivateCluster().start()
    try:
        yield made
    finally:
        made.stop()


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "foreperson.cli.main", *args]


def lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def no_traceback(text: str) -> None:
    assert "Traceback" not in text, text[-3000:]


def one_outage(text: str, *, noticed: bool = True) -> None:
    """The restart is logged as one line when the server went away and one when it was
    back (a process that never talked to the server meanwhile may log neither)."""
    rows = text.splitlines()
    down = [r for r in rows if "is unreachable" in r]
    up = [r for r in rows if "is back after" in r]
    expected = [1] if noticed else [0, 1]
    assert len(down) == len(up) and len(down) in expected, text[-3000:]


@pytest.mark.timeout(180)
def test_a_supervisor_draining_on_postgresql_rides_out_a_server_restart(cluster, tmp_path):
    log = tmp_path / "done.log"
    child = subprocess.Popen(
        [sys.executable, str(HERE / "pg_drain_process.py"), cluster.dsn, "drain", "1500",
         str(log)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=HERE)
    try:
        wait_until(lambda: child.poll() is not None or len(lines(log)) >= 300, timeout=90,
                   what="300 tasks done")
        assert child.poll() is None, child.communicate()[1][-3000:]
        took = cluster.restart()
        out, err = child.communicate(timeout=150)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, err[-3000:]
    no_traceback(err)
    one_outage(err)
    with psycopg.connect(cluster.dsn) as conn:
        rows = conn.execute("SELECT status, count(*) FROM drain.tasks GROUP BY 1").fetchall()
    assert dict(rows) == {"completed": 1500}, (rows, took)
    ran = Counter(lines(log))
    assert len(ran) == 1500
    # a task runs twice only if the restart cut it off between its work and its record
    assert sum(n - 1 for n in ran.values()) <= 8, ran.most_common(5)


@pytest.mark.timeout(240)
def test_the_ticket_job_with_remote_workers_rides_out_a_server_restart(cluster, tmp_path):
    ids = [f"R{i:04d}" for i in range(600)]
    with (tmp_path / "in.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "subject", "body"])
        for i, ticket_id in enumerate(ids):
            writer.writerow([ticket_id, "Refund" if i % 2 else "Crash",
                             "I was charged twice" if i % 2 else "The app crashes on start"])
    env = dict(os.environ, FOREPERSON_PG_SCHEMA="tickets")
    logs = [tmp_path / f"worker{n}.log" for n in range(2)]
    handles = [path.open("w") for path in logs]
    workers = [subprocess.Popen(cli("worker", "foreperson.tickets.job", "--dsn", cluster.dsn,
                                    "--concurrency", "2", "--name", f"remote-{n}"),
                                env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                                stderr=handle) for n, handle in enumerate(handles)]
    job = subprocess.Popen(cli("tickets", "in.csv", "--dsn", cluster.dsn, "--workers", "0",
                               "--out", "o.jsonl", "--no-progress"),
                           env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        out = tmp_path / "o.jsonl"
        wait_until(lambda: job.poll() is not None or (
            out.exists() and len(out.read_text().splitlines()) >= 60),
            timeout=120, what="60 tickets written")
        assert job.poll() is None, job.communicate()[1][-3000:]
        cluster.restart()
        stdout, stderr = job.communicate(timeout=180)
    finally:
        if job.poll() is None:
            job.kill()
        for proc in workers:
            proc.send_signal(signal.SIGTERM)
        codes = [proc.wait(timeout=60) for proc in workers]
        for handle in handles:
            handle.close()
    assert job.returncode == 0, stderr[-3000:]
    no_traceback(stderr)
    one_outage(stderr)
    assert codes == [0, 0], [path.read_text()[-2000:] for path in logs]
    for path in logs:
        no_traceback(path.read_text())
        one_outage(path.read_text(), noticed=False)
    # the outage in its own words, not the pool's line per connection
    for text in [stderr] + [path.read_text() for path in logs]:
        assert "discarding closed connection" not in text, text[-2000:]
        assert "error connecting in" not in text, text[-2000:]
    results = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text().splitlines()]
    counts = Counter(r["id"] for r in results)
    assert sorted(counts) == ids and set(counts.values()) == {1}
