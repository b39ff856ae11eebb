"""A model server that echoes the credentials it was sent in its error bodies (issue 21
item 6), reached by `foreperson tickets --model` through the CLI: the password of
`--base-url`, a token given as its user name, or the key of `$OPENAI_API_KEY`. The planted
credential is then looked for everywhere a person or a store could read it: the job's
standard output and error, the results file, every byte of the SQLite task database,
`foreperson status` on it, and the JSON of `foreperson serve` on it (the snapshot and the
failed tasks). It must be nowhere, while the errors themselves are kept."""

from __future__ import annotations

import base64
import json
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
from tests.acceptance.test_tickets_with_model import TicketServer
from tests.fakes.openai_server import chat_error
from tests.fakes.server import FakeReply, RecordedRequest

WAIT_S = 60
ENV_KEY = "sk-planted-EnvKey-0123456789abcdef"


class EchoingServer(TicketServer):
    """Answers as :class:`TicketServer`, except that the classification of a ticket that
    mentions a crash, and the draft for one about an invoice, fail with HTTP 500 and an
    error body quoting what the request carried: the Authorization header, its token
    and, for Basic, the decoded ``user:password``, some of it with no word before it
    that announces a key (as careless proxies do)."""

    def _next(self, request: RecordedRequest) -> FakeReply:
        body = request.body
        ticket = " ".join(str(m.get("content")) for m in body["messages"] if m["role"] == "user")
        classifying = "response_format" in body
        if (classifying and "crash" in ticket) or (not classifying and "invoice" in ticket):
            with self._lock:
                self.requests.append(request)
            auth = request.headers.get("authorization", "")
            scheme, _, token = auth.partition(" ")
            decoded = (base64.b64decode(token).decode() if scheme.lower() == "basic" else token)
            user, _, password = decoded.partition(":")
            return chat_error(500, f"upstream rejected the credentials. Authorization: {auth}; "
                                   f"token {token}; sent as {decoded!r} (user {user!r}, "
                                   f"password {password!r})")
        return super()._next(request)


def get(port: int, path: str) -> tuple[int, str]:
    """GET ``path`` from 127.0.0.1:``port``: (status, the whole reply after the status
    line, headers included)."""
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as conn:
        conn.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                     "Connection: close\r\n\r\n".encode())
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    status_line, _, rest = data.partition(b"\r\n")
    return int(status_line.split()[1]), rest.decode("utf-8", "replace")


@contextmanager
def serving(db: Path) -> Iterator[int]:
    """``foreperson serve --db DB`` on 127.0.0.1 (any free port): its port, once it says
    where it serves."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "foreperson.cli.main", "serve", "--db", str(db),
         "--host", "127.0.0.1", "--port", "0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
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
        yield int(found.group(1))
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


def foreperson(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "foreperson.cli.main", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=120)


# (what a user gives: the userinfo of --base-url and $OPENAI_API_KEY; what must not leak)
CREDENTIALS = {
    # percent-encoded in the URL: the server receives, and echoes, "PLANTEDKEY123!"
    "url password": ("ops:PLANTEDKEY123%21@", ENV_KEY, "PLANTEDKEY123"),
    # a token as the URL's user name, the way a proxy or a git host takes one
    "url token": ("PLANTEDUSERTOKEN0123456789@", ENV_KEY, "PLANTEDUSERTOKEN0123456789"),
    # a self-hosted server's key (vLLM --api-key): no well-known prefix to recognise
    "api key": ("", "planted-vllm-key-42", "planted-vllm-key-42"),
}


@pytest.mark.parametrize("userinfo, api_key, planted", CREDENTIALS.values(),
                         ids=CREDENTIALS.keys())
def test_a_key_the_model_server_echoes_reaches_no_output_store_or_page(
        tmp_path, userinfo, api_key, planted):
    (tmp_path / "in.csv").write_text(
        "id,body\nok-1,please refund my order\ncrash-1,the app crashes at start\n"
        "invoice-1,my invoice shows the wrong amount\n")
    env = dict(os.environ, OPENAI_API_KEY=api_key)
    with EchoingServer() as server:
        url = server.url.replace("http://", f"http://{userinfo}") + "/v1"
        job = foreperson("tickets", "in.csv", "--model", "openai:test-model", "--base-url", url,
                         "--workers", "2", "--max-attempts", "2", "--db", "t.db",
                         "--out", "o.jsonl", "--no-progress", cwd=tmp_path, env=env)
    sent = " ".join(r.headers.get("authorization", "") for r in server.requests)
    assert sent, "the server saw no credentials: nothing was planted"
    assert job.returncode == 1, job.stdout + job.stderr         # two tickets DEAD
    assert "crash-1/classify" in job.stdout and "invoice-1/draft" in job.stdout
    assert "upstream rejected the credentials" in job.stdout    # the error is kept

    places = {"stdout": job.stdout, "stderr": job.stderr,
              "results": (tmp_path / "o.jsonl").read_text()}
    assert json.loads(places["results"])["id"] == "ok-1"
    for path in sorted(tmp_path.glob("t.db*")):               # the database, -wal, -shm
        places[path.name] = path.read_bytes().decode("latin-1")
    # wide: a key folded over two lines of a table would hide from the search
    status = foreperson("status", "--db", "t.db", cwd=tmp_path, env={**env, "COLUMNS": "2000"})
    assert status.returncode == 0 and "upstream rejected" in status.stdout, status.stderr
    places["status"] = status.stdout + status.stderr
    with serving(tmp_path / "t.db") as port:
        for path in ("/api/snapshot", "/api/task/crash-1/classify",
                     "/api/task/invoice-1/draft", "/api/tasks?status=dead"):
            code, body = get(port, path)
            assert code == 200, (path, body[:300])
            places[path] = body
    assert "upstream rejected" in places["/api/task/crash-1/classify"]

    leaked = [where for where, text in places.items() if planted in text]
    assert leaked == [], f"{planted!r} found in {leaked}"
    assert not [where for where, text in places.items() if ENV_KEY in text]
