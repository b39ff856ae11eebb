"""The page and a durable run ride out a real PostgreSQL restart (a cluster of the test's
own: ``_pg_cluster``). ``foreperson serve --dsn`` answers ``/api/snapshot`` before, while
and after the server is down (a 503 with a clear body, or the answer once the server is
back) and logs the outage as one line down and one line back; a durable agent run whose
server restarts mid-run finishes with each step run and recorded once."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
from _pg_cluster import PrivateCluster
from _pg_procs import wait_until
from durable_counting import lines

from foreperson.runtime import PostgresRuntime
from foreperson.work import Task
from foreperson.work.stores._pg_reconnect import DEFAULT_RECONNECT_S
from foreperson.work.stores.postgres import PostgresStore

pytestmark = pytest.mark.postgres

HERE = Path(__file__).resolve().parent
WAIT_S = 30


class HeldCluster(PrivateCluster):
    """A private cluster whose restart can be held open: :meth:`down`, then :meth:`up`
    (``pg_ctl restart`` is the two back to back)."""

    def down(self) -> None:
        self._ctl("stop")

    def up(self) -> None:
        self._ctl("start")


@pytest.fixture
def cluster():
    made = HeldCluster().start()
    try:
        yield made
    finally:
        made.stop()


def outage_lines(stderr: str) -> tuple[list[str], list[str]]:
    """The store's lines saying the server went away, and that it is back."""
    rows = stderr.splitlines()
    return ([r for r in rows if "is unreachable" in r], [r for r in rows if "is back after" in r])


def ask(port: int, path: str) -> tuple[int, bytes]:
    """GET ``path`` from the page: (status, body); (0, error) when it does not answer."""
    head = f"GET {path} HTTP/1.1\r\nHost: localhost:{port}\r\nConnection: close\r\n\r\n"
    try:
        with socket.create_connection(("127.0.0.1", port),
                                      timeout=DEFAULT_RECONNECT_S + WAIT_S) as conn:
            conn.sendall(head.encode())
            data = b""
            while chunk := conn.recv(65536):
                data += chunk
    except OSError as exc:
        return 0, repr(exc).encode()
    status_line, _, rest = data.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


class Serving:
    """``foreperson serve --dsn DSN --port 0`` in a subprocess, its stderr read as it
    comes."""

    def __init__(self, dsn: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "foreperson.cli.main", "serve", "--dsn", dsn,
             "--port", "0"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()
        self.port = int(self.until(r"serving http://[^:]+:(\d+)/").group(1))

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._lines.put(line)
        self._lines.put(None)

    def until(self, pattern: str, timeout: float = WAIT_S) -> re.Match[str]:
        """Read stderr until a line matches ``pattern``; fail after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        for line in self.seen:
            if found := re.search(pattern, line):
                return found
        while True:
            try:
                line = self._lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no line matching {pattern!r} within {timeout:g} s: "
                                     + "".join(self.seen)) from None
            assert line is not None, "serve exited: " + "".join(self.seen)
            self.seen.append(line)
            if found := re.search(pattern, line):
                return found

    def stop(self) -> str:
        """Ctrl-C, wait; every stderr line."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(WAIT_S)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(WAIT_S)
        self._reader.join(WAIT_S)
        assert self.proc.stderr is not None
        self.proc.stderr.close()
        while (line := self._lines.get_nowait() if not self._lines.empty() else None):
            self.seen.append(line)
        return "".join(self.seen)


def snapshot_now(body: bytes) -> datetime:
    return datetime.fromisoformat(json.loads(body)["now"])


@pytest.mark.timeout(120)
def test_the_page_answers_before_during_and_after_a_server_restart(cluster):
    with PostgresStore(cluster.dsn) as store:
        store.add([Task("k", {}, id="t1")])
    page = Serving(cluster.dsn)
    try:
        status, body = ask(page.port, "/api/snapshot")
        assert status == 200 and json.loads(body)["total"] == 1, body

        cluster.down()
        answers: list[tuple[int, bytes]] = []
        back = threading.Event()

        def keep_asking() -> None:       # a browser polling the page through the outage
            while not back.is_set():
                answers.append(ask(page.port, "/api/snapshot"))

        poller = threading.Thread(target=keep_asking, daemon=True)
        poller.start()
        page.until("is unreachable")     # a request reached the store while it was down
        cluster.up()
        came_up = datetime.now(UTC)

        def fresh() -> bool:
            status, body = ask(page.port, "/api/snapshot")
            return status == 200 and snapshot_now(body) >= came_up

        wait_until(fresh, timeout=DEFAULT_RECONNECT_S, what="a fresh snapshot")
        back.set()
        poller.join(DEFAULT_RECONNECT_S + WAIT_S)
        assert not poller.is_alive()
        for status, body in answers:       # each request answered, none dropped or a 500
            assert status == 200 or (status == 503 and b"store unavailable" in body), (
                status, body[:500])
    finally:
        stderr = page.stop()
    assert page.proc.returncode == 0, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    down, up = outage_lines(stderr)
    assert len(down) == 1 and len(up) == 1, stderr[-3000:]
    assert "127.0.0.1/postgres" in down[0] and "127.0.0.1/postgres" in up[0]
    assert "discarding" not in stderr and "error connecting in" not in stderr, stderr[-3000:]


@pytest.mark.timeout(120)
def test_a_durable_run_rides_out_a_server_restart_mid_run(cluster, tmp_path):
    spec = f"postgres:{cluster.dsn}|runs"
    env = {**os.environ, "FP_WORKDIR": str(tmp_path), "FP_STEPS": "6", "FP_PAUSE_AT": "3",
           "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen([sys.executable, str(HERE / "durable_counting.py"), spec, "r1"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env, cwd=tmp_path)
    try:
        assert child.stdout is not None
        said = child.stdout.readline().strip()     # blocks until the run is at turn 3
        assert said == "paused", said + child.communicate(timeout=WAIT_S)[1][-3000:]
        cluster.restart()                          # every connection of the run is cut
        (tmp_path / "go").touch()
        out, err = child.communicate(timeout=WAIT_S + DEFAULT_RECONNECT_S)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(WAIT_S)
    assert child.returncode == 0, err[-3000:]
    assert out.strip() == "done all counted", out
    assert "Traceback" not in err, err[-3000:]
    down, up = outage_lines(err)
    assert len(down) == 1 and len(up) == 1, err[-3000:]
    # each step ran once: the tool's side effect and each model call
    assert lines(tmp_path / "count.txt") == [f"step{i}" for i in range(6)]
    assert lines(tmp_path / "model.txt") == [f"turn{i}" for i in range(7)]
    with PostgresRuntime(cluster.dsn, schema="runs") as runtime:
        assert runtime.get_run("r1").status == "completed"
        steps = runtime.steps("r1")
    kinds = Counter(step.kind for step in steps)
    assert len({step.key for step in steps}) == len(steps) == 13, [s.key for s in steps]
    assert kinds["model_call"] == 7 and sum(kinds.values()) - kinds["model_call"] == 6, kinds


@pytest.mark.timeout(120)
def test_a_durable_run_rides_out_a_connection_lost_in_the_middle_of_a_journal_batch(
        cluster, tmp_path):
    spec = f"postgres:{cluster.dsn}|runs"
    env = {**os.environ, "FP_WORKDIR": str(tmp_path), "FP_STEPS": "4", "FP_CUT_BATCH": "1",
           "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    (tmp_path / "go").touch()          # the cut comes at the first batch
    done = subprocess.run([sys.executable, str(HERE / "durable_counting.py"), spec, "r2"],
                          capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=WAIT_S + DEFAULT_RECONNECT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "done all counted", done.stdout
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert lines(tmp_path / "count.txt") == [f"step{i}" for i in range(4)]
    assert lines(tmp_path / "model.txt") == [f"turn{i}" for i in range(5)]
    with PostgresRuntime(cluster.dsn, schema="runs") as runtime:
        assert runtime.get_run("r2").status == "completed"
        steps = runtime.steps("r2")
    assert len({step.key for step in steps}) == len(steps) == 9, [s.key for s in steps]
