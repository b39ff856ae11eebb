"""``foreperson serve`` as an operator starts it (issue 21, items 2 and 6): the CLI in a
subprocess on a real SQLite file, bound to 0.0.0.0 on a free port. Without a token it
warns and still refuses a rebinding ``Host``; ``--allowed-host`` replaces the accepted
names; with a token from the environment reads need it; durable runs stay hidden until
``--show-runs-of-all-users``; hostile requests leave no traceback in its log; a file
that is not a task database is refused, untouched; Ctrl-C stops it."""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from foreperson.journal import RunRecord
from foreperson.observe._http import _interface_addresses
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


def send_raw(port: int, data: bytes, *, abandon: bool = False) -> int:
    """Send ``data`` as it is on a connection of its own: the answer's status (0: none),
    or with ``abandon`` close the connection at once, answered or not (0)."""
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as conn:
        conn.sendall(data)
        if abandon:
            return 0
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return int(answer.split()[1]) if answer.startswith(b"HTTP/") else 0


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
            while not lines.empty():              # the whole log, once it has exited
                rest = lines.get_nowait()
                if rest is not None:
                    seen.append(rest)


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
        for name in (socket.getfqdn(), *_interface_addresses()):   # the FQDN, addresses
            host = f"[{name}]:{port}" if ":" in name else f"{name}:{port}"
            assert ask(port, "/api/snapshot", host)[0] == 200, host
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


def test_allowed_host_replaces_the_default_names(db):
    with serving(db, "--allowed-host", "page.example.org", "--allowed-host",
                 "Other.Example.") as (port, _, proc):
        for host in ("page.example.org", f"PAGE.example.org:{port}", "other.example"):
            assert ask(port, "/api/snapshot", host)[0] == 200, host
        for host in (f"localhost:{port}", f"127.0.0.1:{port}", socket.gethostname(),
                     "evil.example"):
            assert ask(port, "/api/snapshot", host)[0] == 421, host
    assert proc.returncode == 0


def test_hostile_requests_leave_no_traceback_in_the_log(db):
    with serving(db, "--allow-retry") as (port, log, proc):
        status, page = ask(port, "/", f"localhost:{port}")
        token = re.search(rb'name="foreperson-token" content="([^"]+)"', page)
        assert status == 200 and token, page[:300]
        post = (f"POST /api/retry HTTP/1.1\r\nHost: localhost:{port}\r\n"
                "Content-Type: application/json\r\n"
                f"X-Foreperson-Token: {token.group(1).decode()}\r\n")
        deep = b'{"ids": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
        assert send_raw(port, (post + f"Content-Length: {len(deep)}\r\nConnection: close"
                               "\r\n\r\n").encode() + deep) == 400
        for length in ("-1", "abc", "1, 2", "99999999999999999999999"):
            assert send_raw(port, (post + f"Content-Length: {length}\r\n\r\n").encode()) \
                == 400, length
        assert send_raw(port, (post + "Content-Length: 0\r\nConnection: close\r\n\r\n"
                               ).encode()) == 400                          # {} is no retry
        for path in ("/api/task/a%00b", "/api/task/%0A", "/api/runs/%00",
                     "/api/snapshot?run=%00", "/api/tasks?run=a%00b", "/api/history?run=%01"):
            assert ask(port, path, f"localhost:{port}")[0] == 400, path
        assert send_raw(port, b"GET /\x00 HTTP/1.1\r\nHost: localhost\r\n\r\n") == 400
        stalled = (post + "Content-Length: 100\r\n\r\n").encode() + b'{"all": tr'
        send_raw(port, stalled, abandon=True)         # headers, 10 bytes, then gone
        assert ask(port, "/api/snapshot", f"localhost:{port}")[0] == 200   # still serving
    assert proc.returncode == 0, "".join(log)
    assert any("Invalid HTTP request" in line for line in log), "".join(log)  # read to the end
    assert not any("Traceback" in line for line in log), "".join(log)


def _foreign(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE tasks (id TEXT, title TEXT)")     # another app's "tasks"
        conn.execute("INSERT INTO tasks VALUES ('1', 'buy milk')")
    conn.close()


@pytest.mark.parametrize("kind", ["foreign", "empty", "missing", "not sqlite"])
def test_serve_refuses_a_file_that_is_not_a_task_database_and_leaves_it_alone(
        tmp_path, kind):
    path = tmp_path / "other.db"
    if kind == "foreign":
        _foreign(path)
    elif kind == "empty":
        path.touch()
    elif kind == "not sqlite":
        path.write_bytes(b"just some notes, not a database\n" * 200)
    before = path.read_bytes() if path.exists() else None
    done = subprocess.run(
        [sys.executable, "-m", "foreperson.cli.main", "serve", "--db", str(path), "--port", "0"],
        capture_output=True, text=True, timeout=WAIT_S)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith("error: ") and str(path) in lines[0], lines
    assert "serving" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ([] if before is None
                                                          else ["other.db"])  # no -wal
    assert (path.read_bytes() if path.exists() else None) == before
    if kind == "foreign":
        with sqlite3.connect(path) as conn:
            assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["tasks"]
        conn.close()
