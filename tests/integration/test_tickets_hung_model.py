"""`foreperson tickets --model` against a model server that accepts connections and never
answers (issue 21 item 9: no run waits on a dead endpoint over and over).

50 tickets, 4 workers, `--timeout 2`: the calls in flight each wait their timeout once,
the endpoint's circuit breaker opens and every other call fails at once. The run ends in
seconds, not tickets x timeout; the server saw a handful of connections, not one per
ticket; the summary says in one line which server is down (its password redacted) and
what to do; every ticket is DEAD in the task database, none lost; and once the server
answers, the same command does them all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.acceptance.test_tickets_with_model import TicketServer
from tests.fakes.server import FakeReply, RecordedRequest

from foreperson.work import SqliteStore, Status

TICKETS = 50
WORKERS = 4
TIMEOUT_S = 2
PASSWORD = "HUNG-PASSWORD-0042"
HOLD_S = 600.0           # a hung request is held this long, or until the server stops


class HungUntilFixed(TicketServer):
    """Accepts every connection and reads the request, then never answers (the POSTs and
    the ``GET /v1/models`` of profile detection alike) until :meth:`fix`; afterwards it
    answers as :class:`TicketServer`."""

    def __init__(self) -> None:
        super().__init__()
        self.down = True
        self.get_replies["/v1/models"] = FakeReply(hold_s=HOLD_S)

    def fix(self) -> None:
        with self._lock:
            self.down = False
            self.get_replies.clear()          # GET /v1/models: 404, an answer

    def _next(self, request: RecordedRequest) -> FakeReply:
        with self._lock:
            if self.down:
                self.requests.append(request)
                return FakeReply(hold_s=HOLD_S)
        return super()._next(request)


def run_tickets(tmp_path: Path, url: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """The job as a user runs it, and how long it took (seconds)."""
    began = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "foreperson.cli.main", "tickets", "in.csv",
         "--model", "openai:test-model", "--base-url", url, "--workers", str(WORKERS),
         "--timeout", str(TIMEOUT_S), "--db", "t.db", "--out", "o.jsonl", "--no-progress"],
        cwd=tmp_path, env=dict(os.environ, OPENAI_API_KEY="test-key"), capture_output=True,
        text=True, timeout=120)
    return proc, time.monotonic() - began


def test_a_hung_model_server_ends_the_run_fast_and_a_rerun_does_every_ticket(tmp_path):
    ids = [f"T-{i:03d}" for i in range(TICKETS)]
    (tmp_path / "in.csv").write_text("id,body\n" + "".join(
        f"{t},{'please refund my order' if i % 2 else 'the app crashes'} ({i})\n"
        for i, t in enumerate(ids)))
    with HungUntilFixed() as server:
        url = server.url.replace("http://", f"http://ops:{PASSWORD}@") + "/v1"
        shown_url = server.url.replace("http://", "http://ops:***@") + "/v1"

        proc, took_s = run_tickets(tmp_path, url)
        connections = server.connections

        # without the breaker: 50 tickets x 3 attempts x 3 model attempts, 2 s each
        assert took_s < 40, (took_s, proc.stdout, proc.stderr)
        # one round of calls in flight (each a GET /v1/models and a POST) and the
        # reachability check: nowhere near one connection per ticket
        assert connections <= 2 * 2 * WORKERS + 1, connections
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr, proc.stderr
        output = proc.stdout + proc.stderr
        assert PASSWORD not in output
        down = [line for line in proc.stdout.splitlines() if "is not answering" in line]
        assert down == [
            f"the model endpoint {shown_url} is not answering (timed out after "
            f"{TIMEOUT_S} s): {TICKETS} ticket(s) not done; check that the server is up "
            "and answers, then run the same command again to do them"], proc.stdout
        assert "DEAD task(s)" not in proc.stdout      # not 150 lines saying the same

        store = SqliteStore(tmp_path / "t.db")
        try:
            classify = [store.get(f"{t}/classify") for t in ids]
            assert all(t is not None and t.status is Status.DEAD for t in classify)
            assert all(shown_url in (t.error or "") for t in classify)
            assert all(t.attempts == 1 for t in classify)      # not retried: it would wait
        finally:
            store.close()
        results = tmp_path / "o.jsonl"
        assert not results.exists() or results.read_text() == ""

        server.fix()
        again, _ = run_tickets(tmp_path, url)

    assert again.returncode == 0, again.stdout + again.stderr
    assert f"{TICKETS} ticket(s) left by an earlier run" in again.stdout
    written = [json.loads(line) for line in results.read_text().splitlines()]
    assert sorted(r["id"] for r in written) == ids                 # each exactly once
    assert {r["category"] for r in written} == {"billing", "technical"}
