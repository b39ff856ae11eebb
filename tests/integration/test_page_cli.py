"""``foreperson serve`` as an operator starts it (issue 21, items 2 and 6): the CLI in a
subprocess on a real SQLite file, bound to 0.0.0.0 on a free port. Without a token it
warns and still refuses a rebinding ``Host``; with a token from the environment reads
need it; durable runs stay hidden until ``--show-runs-of-all-users``; Ctrl-C stops it."""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from foreperson.journal import RunRecord
from foreperson.work import SqliteStore, Task

pytestmark = pytest.mark.slow

WAIT_S = 30
TOKEN = "env-token-0123456789abcdef"


def ask(port: int, path: str, host: str, headers: dict[str, str] | None = None) -> tuple[
        int, bytes]:
    """GET ``path`` with this Host header: (status, body)."""
    head = [f"GET {path} HTTP/1.1", f"Host: {host}", "Connection: close",
            *(f"{k}: {v}" for k, v in (headers or {}).items())]
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as conn:
        conn.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    status_line, _, rest = data.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


@contextmanager
def serving(db: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[
        tuple[int, list[str], subprocess.Popen]]:
    """``foreperson serve --db DB --host 0.0.0.0 --port 0 ARGS``: (port, stderr lines so
    far, process), once it says where it serves."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "foreperson.cli.main", "serve", "--db", str(db),
         "--host", "0.0.0.0", "--port", "0", *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **(env or {})})
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    seen: list[str] = []
    try:
        while True:
            line = lines.get(timeout=WAIT_S)
            assert line is not None, "serve exited: " + "".join(seen)
            seen.append(line)
            found = re.search(r"serving http://[^:]+:(\d+)/", line)
            if found:
                break
        yield int(found.group(1)), seen, proc
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(WAIT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(WAIT_S)
            reader.join(WAIT_S)
            assert proc.stderr is not None
            proc.stderr.close()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.db"
    store = SqliteStore(path)
    store.add([Task("k", {"secret": "payload"}, id="t1")])
    store.create_run(RunRecord(run_id="r-ada", agent="helper", user_id="ada",
                               input={"prompt": "ada's secret"}))
    store.close()
    return path


def test_serve_on_all_interfaces_warns_and_refuses_rebinding(db):
    with serving(db) as (port, stderr, proc):
        assert any("no token" in line for line in stderr), stderr
        assert ask(port, "/api/snapshot", f"rebind.evil.example:{port}")[0] == 421
        assert ask(port, "/", f"127.0.0.1.nip.io:{port}")[0] == 421
        status, body = ask(port, "/api/snapshot", f"{socket.gethostname()}:{port}")
        assert status == 200 and b'"total": 1' in body
        status, body = ask(port, "/api/runs", f"localhost:{port}")
        assert status == 200 and b'"runs": []' in body and b"--show-runs-of-all-users" in body
        assert ask(port, "/api/runs/r-ada", f"localhost:{port}")[0] == 404
    assert proc.returncode == 0, proc.returncode


def test_a_token_from_the_environment_guards_reads(db):
    with serving(db, "--show-runs-of-all-users",
                 env={"FOREPERSON_SERVE_TOKEN": TOKEN}) as (port, stderr, _):
        assert not any("no token" in line for line in stderr), stderr
        host = f"localhost:{port}"
        assert ask(port, "/api/snapshot", host)[0] == 401
        assert ask(port, "/", host)[0] == 401
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        assert ask(port, "/api/snapshot", host, bearer)[0] == 200
        status, body = ask(port, "/api/runs", host, bearer)
        assert status == 200 and b"r-ada" in body
        assert ask(port, "/api/runs", f"rebind.evil.example:{port}", bearer)[0] == 421


def test_per_user_logins_show_each_user_their_runs(db, tmp_path):
    users = tmp_path / "users.txt"
    users.write_text("# name:token\nada:ada-token-0123456789\nbob:bob-token-0123456789\n")
    with serving(db, "--users-file", str(users)) as (port, _, _):
        host = f"localhost:{port}"
        ada = {"Authorization": "Bearer ada-token-0123456789"}
        bob = {"Authorization": "Bearer bob-token-0123456789"}
        assert b"r-ada" in ask(port, "/api/runs", host, ada)[1]
        assert b"r-ada" not in ask(port, "/api/runs", host, bob)[1]
        assert ask(port, "/api/runs/r-ada", host, bob)[0] == 404
        assert ask(port, "/api/runs/r-ada", host, ada)[0] == 200
