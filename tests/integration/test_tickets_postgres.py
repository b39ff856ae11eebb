"""The ticket job spread over processes: `foreperson tickets --dsn --workers 0` supervises
while `foreperson worker foreperson.tickets.job` processes do the work (issue: scale out)."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
from collections import Counter

import pytest

pytestmark = pytest.mark.postgres


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "foreperson.cli.main", *args]


@pytest.mark.timeout(240)
def test_remote_workers_do_the_ticket_job_exactly_once(tmp_path, pg_dsn, pg_schema):
    ids = [f"R{i:04d}" for i in range(200)]
    with (tmp_path / "in.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "subject", "body"])
        for i, ticket_id in enumerate(ids):
            writer.writerow([ticket_id, "Refund" if i % 2 else "Crash",
                             "I was charged twice" if i % 2 else "The app crashes\non start"])
    env = dict(os.environ, FOREPERSON_PG_SCHEMA=pg_schema)
    logs = [tmp_path / f"worker{n}.log" for n in range(2)]
    handles = [log.open("w") for log in logs]
    workers = [subprocess.Popen(cli("worker", "foreperson.tickets.job", "--dsn", pg_dsn,
                                    "--concurrency", "4", "--name", f"remote-{n}"),
                                env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                                stderr=handle) for n, handle in enumerate(handles)]
    try:
        job = subprocess.run(cli("tickets", "in.csv", "--dsn", pg_dsn, "--workers", "0",
                                 "--out", "o.jsonl", "--no-progress"),
                             env=env, cwd=tmp_path, capture_output=True, text=True,
                             timeout=180)
        assert job.returncode == 0, job.stderr
        status = json.loads(subprocess.run(cli("status", "--dsn", pg_dsn, "--json"), env=env,
                                           capture_output=True, text=True, timeout=60).stdout)
    finally:
        for proc in workers:
            proc.send_signal(signal.SIGTERM)
        codes = [proc.wait(timeout=60) for proc in workers]
    for handle in handles:
        handle.close()
    assert codes == [0, 0], [log.read_text()[-2000:] for log in logs]
    results = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text().splitlines()]
    counts = Counter(r["id"] for r in results)
    assert sorted(counts) == ids and set(counts.values()) == {1}
    assert status["counts"]["completed"] == 600
    assert {"remote-0", "remote-1"} <= set(status["workers_last_seen"])
    by_category = Counter(r["category"] for r in results)
    assert by_category["billing"] >= 90 and by_category["technical"] >= 90


@pytest.mark.parametrize(("dsn", "message"), [
    ("notadsn", "is not a PostgreSQL connection string"),
    ("postgresql://nobody@127.0.0.1:1/x", "Connection refused"),
])
def test_a_bad_dsn_fails_at_once_in_one_line(tmp_path, dsn, message):
    done = subprocess.run(cli("status", "--dsn", dsn), cwd=tmp_path, capture_output=True,
                          text=True, timeout=30)
    assert done.returncode != 0 and message in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


@pytest.mark.timeout(180)
def test_ctrl_c_on_a_dsn_supervisor_gives_its_held_tasks_back_at_once(tmp_path, pg_dsn,
                                                                     pg_schema):
    import time

    import psycopg
    from psycopg import sql

    with (tmp_path / "in.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "subject", "body"])
        for i in range(600):
            writer.writerow([f"C{i:04d}", "Refund", "I was charged twice, please help"])
    env = dict(os.environ, FOREPERSON_PG_SCHEMA=pg_schema)
    args = cli("tickets", "in.csv", "--dsn", pg_dsn, "--workers", "4", "--out", "o.jsonl",
               "--no-progress", "--max-attempts", "1")
    proc = subprocess.Popen(args, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)

    def held() -> int:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            return conn.execute(sql.SQL("SELECT count(*) FROM {}.tasks WHERE status IN "
                                        "('assigned', 'running')").format(
                sql.Identifier(pg_schema))).fetchone()[0]

    out = tmp_path / "o.jsonl"
    deadline = time.monotonic() + 120
    while not (out.exists() and len(out.read_text().splitlines()) >= 50):
        assert time.monotonic() < deadline and proc.poll() is None, "the job did not start"
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 130
    assert held() == 0                                   # given back, not left to expire
    again = subprocess.run(args, env=env, cwd=tmp_path, capture_output=True, text=True,
                           timeout=150)
    assert again.returncode == 0, again.stderr           # nothing went DEAD
    assert "reclaimed: 0" in again.stdout                # nothing waited for a lease
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 600


@pytest.mark.timeout(120)
def test_status_and_retry_read_the_schema_they_are_given(tmp_path, pg_dsn, pg_schema):
    (tmp_path / "in.csv").write_text("id,body\n1,please refund\n2,app crashes\n")
    done = subprocess.run(cli("tickets", "in.csv", "--dsn", pg_dsn, "--schema", pg_schema,
                              "--workers", "2", "--out", "o.jsonl", "--no-progress"),
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    status = subprocess.run(cli("status", "--dsn", pg_dsn, "--schema", pg_schema, "--json"),
                            cwd=tmp_path, capture_output=True, text=True, timeout=60)
    report = json.loads(status.stdout)
    assert report["source"] == f"schema {pg_schema}" and report["counts"]["completed"] == 6
    retry = subprocess.run(cli("retry", "--dsn", pg_dsn, "--schema", pg_schema, "--all-dead"),
                           cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert retry.returncode == 0 and f"0 task(s) back to pending in schema {pg_schema}" in (
        retry.stdout)
    lone = subprocess.run(cli("status", "--db", "x.db", "--schema", pg_schema), cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert lone.returncode == 2 and "--schema goes with --dsn" in lone.stderr
