"""The page of ``foreperson serve`` on a real server (issue 21, items 1, 2 and 6): a
StatusServer on 127.0.0.1 (or 0.0.0.0) port 0 in a thread, asked over real sockets.
Wrong and rebinding ``Host`` names are refused, a token guards reads, hostile input is a
400 (never a traceback or a 503) on every kind of store, durable runs and their tasks are
shown only to their user, idle connections and stalled bodies cannot lock a normal
client out, and store reads neither block the event loop nor happen once per client."""

from __future__ import annotations

import asyncio
import base64
import json
import select
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from foreperson.journal import RunRecord
from foreperson.observe import StatusServer
from foreperson.observe._http import _interface_addresses, default_allowed_hosts
from foreperson.observe.metrics import metrics_registry, serve_metrics
from foreperson.work import MemoryStore, Status, Task, TaskStore

WAIT_S = 10
TOKEN = "s3cret-token-0123456789"


class Answer:
    """A parsed HTTP answer: status, headers (lower-case names), body."""

    def __init__(self, raw: bytes) -> None:
        head, _, self.body = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split()[1]) if lines[0] else 0
        self.headers = {k.strip().lower(): v.strip() for k, _, v in
                        (line.partition(":") for line in lines[1:])}

    def json(self) -> object:
        """The body as JSON."""
        return json.loads(self.body)


def ask(port: int, method: str = "GET", path: str = "/api/snapshot", *, host: str | None = None,
        headers: dict[str, str] | None = None, body: bytes | None = None,
        raw_head: bytes | None = None) -> Answer:
    """One request on its own connection (``Connection: close``), read to the end."""
    lines = [f"{method} {path} HTTP/1.1",
             f"Host: {host if host is not None else f'127.0.0.1:{port}'}",
             "Connection: close"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    if body is not None and not any(k.lower() == "content-length" for k in headers or {}):
        lines.append(f"Content-Length: {len(body)}")
    data = raw_head if raw_head is not None else ("\r\n".join(lines) + "\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as conn:
        conn.sendall(data + (body or b""))
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    return Answer(b"".join(chunks))


def chunked(port: int, headers: dict[str, str], body: bytes) -> Answer:
    """A POST /api/retry sent in chunks (no Content-Length) from a thread, while the
    answer is read (the server may answer before the body is all sent)."""
    head = (f"POST /api/retry HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n"
            "Transfer-Encoding: chunked\r\n"
            + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n").encode()
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as conn:
        conn.sendall(head)

        def send() -> None:
            try:
                for at in range(0, len(body), 65536):
                    piece = body[at:at + 65536]
                    conn.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                conn.sendall(b"0\r\n\r\n")
            except OSError:
                pass                                   # the server stopped reading: fine

        sender = threading.Thread(target=send)
        sender.start()
        chunks = []
        try:
            while chunk := conn.recv(65536):
                chunks.append(chunk)
        except ConnectionResetError:
            pass
        sender.join(WAIT_S)
    return Answer(b"".join(chunks))


def basic(user: str, secret: str) -> dict[str, str]:
    """The Authorization header of HTTP basic auth."""
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()}


@pytest.fixture
def store() -> MemoryStore:
    store = MemoryStore()
    store.add([Task("k", {"x": "<b>"}, id="t1"), Task("k", id="t/2")])
    for run_id, user in (("r-ada", "ada"), ("r-bob", "bob"), ("r-anon", None)):
        store.create_run(RunRecord(run_id=run_id, agent="helper", user_id=user,
                                   input={"prompt": f"secret of {user}"}))
    return store


@pytest.fixture
def serve_on() -> Iterator:
    """``serve_on(store, **options)``: a StatusServer on port 0, stopped after the test."""
    servers: list[StatusServer] = []

    def start(store: TaskStore, **options: object) -> StatusServer:
        server = StatusServer(store, port=options.pop("port", 0), **options).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()


@pytest.fixture
def serve(store: MemoryStore, serve_on) -> Iterator:
    return lambda **options: serve_on(store, **options)


# -- Host and origin ---------------------------------------------------------------------

def test_a_wrong_host_is_refused_on_every_path(serve):
    server = serve()
    for path in ("/", "/api/snapshot", "/api/task/t1", "/api/runs", "/metrics",
                 "/static/app.js"):
        assert ask(server.port, path=path, host="evil.example").status == 421, path
        assert ask(server.port, path=path, host=f"evil.example:{server.port}").status == 421
        assert ask(server.port, path=path).status == 200, path
    for name in (f"localhost:{server.port}", f"[::1]:{server.port}", "127.0.0.1"):
        assert ask(server.port, host=name).status == 200, name
    for malformed in ("", "a b", "127.0.0.1:x", "[::1", "127.0.0.1@evil.example"):
        assert ask(server.port, host=malformed).status in (400, 421), malformed


def test_bound_to_all_interfaces_a_rebinding_host_is_still_refused(serve):
    server = serve(host="0.0.0.0")
    assert ask(server.port, host=f"rebind.evil.example:{server.port}").status == 421
    assert ask(server.port, host="127.0.0.1.nip.io").status == 421
    assert ask(server.port, host=f"{socket.gethostname()}:{server.port}").status == 200
    assert ask(server.port, host=f"localhost:{server.port}").status == 200
    page = ask(server.port, path="/", host=f"rebind.evil.example:{server.port}")
    assert page.status == 421 and b"foreperson-token" not in page.body


def test_a_wrong_host_is_refused_on_a_retry_post_too(serve, store):
    store.add([Task("doomed", id="doomed", max_attempts=1)])
    (held,) = store.claim("w", {"doomed"}, 10)
    store.fail(held.id, held.lease_token, "boom", retry_at=None)
    server = serve(allow_retry=True)
    retry = {"Content-Type": "application/json", "X-Foreperson-Token": server.token}
    for host in ("evil.example", f"evil.example:{server.port}", "127.0.0.1.nip.io"):
        answer = ask(server.port, "POST", "/api/retry", host=host, headers=retry,
                     body=b'{"all": true}')
        assert answer.status == 421, host
    assert store.get("doomed").status is Status.DEAD              # nothing was revived
    assert ask(server.port, "POST", "/api/retry", headers=retry,
               body=b'{"all": true}').json() == {"revived": ["doomed"]}


def test_the_default_names_are_the_machines_name_fqdn_and_addresses(serve, monkeypatch):
    """A wildcard bind answers the host name, the FQDN (from the resolver: faked here, as
    this machine's FQDN may be plain ``localhost``), what both resolve to and every
    interface's address; nothing else."""
    real_getaddrinfo = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        if str(host).lower().rstrip(".") == "vm.corp.example":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("198.51.100.7", 0))]
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getfqdn", lambda name="": "VM.corp.example.")
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    names = default_allowed_hosts("0.0.0.0")
    interfaces = _interface_addresses()
    assert {socket.gethostname().lower(), "vm.corp.example", "198.51.100.7"} <= names
    assert interfaces - {"127.0.0.1", "::1"}, "no interface address to check"
    assert interfaces <= names
    assert "vm.corp.example" not in default_allowed_hosts("127.0.0.1")   # loopback only

    server = serve(host="0.0.0.0")
    monkeypatch.undo()                     # the names were taken at construction
    for host in ("vm.corp.example", "198.51.100.7", socket.gethostname(),
                 *(f"[{a}]" if ":" in a else a for a in sorted(interfaces))):
        assert ask(server.port, host=f"{host}:{server.port}").status == 200, host
    assert ask(server.port, host="corp.example").status == 421


def test_only_the_allowed_hosts_are_answered_when_given(serve):
    server = serve(host="0.0.0.0", allowed_hosts=["page.example.org"])
    assert ask(server.port, host="page.example.org").status == 200
    assert ask(server.port, host=f"PAGE.example.org.:{server.port}").status == 200
    assert ask(server.port, host=f"localhost:{server.port}").status == 421
    assert ask(server.port, host=f"{socket.gethostname()}:{server.port}").status == 421


def test_a_cross_site_script_is_refused_even_for_reads(serve):
    server = serve()
    assert ask(server.port, headers={"Origin": "http://evil.example"}).status == 403
    assert ask(server.port, headers={"Sec-Fetch-Site": "cross-site",
                                     "Sec-Fetch-Mode": "cors"}).status == 403
    # following a link from another site to the page is a navigation: allowed
    assert ask(server.port, path="/", headers={"Sec-Fetch-Site": "cross-site",
                                               "Sec-Fetch-Mode": "navigate"}).status == 200
    assert ask(server.port, headers={"Origin": f"http://127.0.0.1:{server.port}"}).status == 200


def test_a_non_loopback_bind_without_a_token_warns(serve, caplog):
    with caplog.at_level("WARNING", logger="foreperson.observe"):
        serve(host="0.0.0.0")
    assert any("no token" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level("WARNING", logger="foreperson.observe"):
        serve(host="0.0.0.0", access_token=TOKEN)
        serve()
    assert not any("no token" in r.getMessage() for r in caplog.records)


# -- the token -----------------------------------------------------------------------------

def test_a_token_guards_reads_as_well_as_writes(serve):
    server = serve(access_token=TOKEN, allow_retry=True)
    for path in ("/", "/api/snapshot", "/api/task/t1", "/api/runs", "/metrics",
                 "/static/app.js"):
        refused = ask(server.port, path=path)
        assert refused.status == 401, path
        assert refused.headers["www-authenticate"].startswith("Basic realm=")
        assert b"foreperson-token" not in refused.body
        assert ask(server.port, path=path,
                   headers={"Authorization": f"Bearer {TOKEN}"}).status == 200, path
        assert ask(server.port, path=path, headers=basic("anyone", TOKEN)).status == 200
    for wrong in ({"Authorization": "Bearer nope"}, basic("x", "nope"),
                  {"Authorization": "Basic !!!"}, {"Authorization": f"Token {TOKEN}"},
                  {"Authorization": "Bearer "}):
        assert ask(server.port, headers=wrong).status == 401, wrong
    retry = {"Content-Type": "application/json", "X-Foreperson-Token": server.token}
    assert ask(server.port, "POST", "/api/retry", headers=retry,
               body=b'{"all": true}').status == 401
    assert ask(server.port, "POST", "/api/retry", body=b'{"all": true}',
               headers={**retry, "Authorization": f"Bearer {TOKEN}"}).status == 200


# -- hostile input ------------------------------------------------------------------------

def test_nul_bytes_and_odd_ids_are_400s(make_store, serve_on):
    """On every kind of store (PostgreSQL refuses a NUL in a text parameter: the page must
    answer before the store sees one)."""
    store = make_store()
    store.add([Task("k", {"x": "<b>"}, id="t1"), Task("k", id="t/2")])
    server = serve_on(store)
    for path in ("/api/task/%00", "/api/task/a%00b", "/api/runs/r%00", "/api/runs/%01x",
                 "/api/task/a%0Ab", "/api/task/%0D", "/api/runs/r%0A",
                 "/api/snapshot?run=a%00", "/api/history?run=%00", "/api/tasks?run=%7f",
                 "/api/snapshot?run=a%0Ab", "/api/task/" + "x" * 2000,
                 "/api/tasks?offset=99999999999999999999",
                 "/api/tasks?limit=abc", "/api/tasks?status=completed"):
        answer = ask(server.port, path=path)
        assert answer.status == 400, (path, answer.status, answer.body)
        assert "error" in answer.json()
    # bytes that are not UTF-8 arrive replaced (U+FFFD): a well-formed unknown id
    for path in ("/api/task/%FF", "/api/task/%ED%A0%80", "/api/runs/%C0%80",
                 "/api/task/" + "%F0%9F%98%80" * 1024):
        assert ask(server.port, path=path).status == 404, path
    assert ask(server.port, path="/api/snapshot?run=%FF").json()["total"] == 0
    assert ask(server.port, path="/api/task/t%2F2").json()["id"] == "t/2"   # a slash in an id
    assert ask(server.port, path="/api/task/nope").status == 404


def test_malformed_requests_are_400s_not_hangs(serve):
    server = serve(allow_retry=True)
    port = server.port
    head = f"POST /api/retry HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
    for length in ("-1", "abc", "1, 2", "+5", "0x10", "99999999999999999999999"):
        answer = ask(port, raw_head=(head + f"Content-Length: {length}\r\n\r\n").encode())
        assert answer.status == 400, length
    two = head + "Content-Length: 1\r\nContent-Length: 2\r\n\r\nab"
    assert ask(port, raw_head=two.encode()).status == 400
    assert ask(port, raw_head=b"GET /\x00 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").status == 400
    big = (f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n"
           f"X-Big: {'a' * 40000}\r\n\r\n")
    assert ask(port, raw_head=big.encode()).status in (400, 431)


def asgi_post(server: StatusServer, headers: list[tuple[bytes, bytes]], body: bytes
              ) -> tuple[int, dict]:
    """POST /api/retry straight to the page's ASGI application (no HTTP parser in front:
    the headers arrive as given): (status, JSON body)."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": "/api/retry",
             "raw_path": b"/api/retry", "query_string": b"", "root_path": "",
             "client": ("127.0.0.1", 40000), "server": ("127.0.0.1", server.port),
             "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
                         (b"x-foreperson-token", server.token.encode()), *headers]}
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(server.app(scope, receive, send))
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    return status, json.loads(b"".join(m.get("body", b"") for m in sent
                                       if m["type"] == "http.response.body"))


def test_a_malformed_content_length_is_a_400_whatever_parses_the_request(store):
    """h11 refuses these first; the application holds the rule too (another HTTP parser,
    a proxy passing the header on), and a length over the limit stays a 413."""
    server = StatusServer(store, port=0, allow_retry=True, metrics=False)
    try:
        for length in (b"-1", b"abc", b"1, 2", b"\xb2", b" ", b"+5"):
            status, body = asgi_post(server, [(b"content-length", length)], b'{"all": true}')
            assert status == 400 and "Content-Length" in body["error"], length
        status, _ = asgi_post(server, [(b"content-length", b"13"), (b"content-length", b"13")],
                              b'{"all": true}')
        assert status == 400
        status, _ = asgi_post(server, [(b"content-length", str(10 << 20).encode())], b"{}")
        assert status == 413
        assert asgi_post(server, [(b"content-length", b"13")], b'{"all": true}') == (
            200, {"revived": []})
    finally:
        server.shutdown()


def test_retry_bodies_are_bounded_and_parsed_safely(serve, store):
    server = serve(allow_retry=True)
    headers = {"Content-Type": "application/json", "X-Foreperson-Token": server.token}

    def post(body: bytes, extra: dict[str, str] | None = None) -> Answer:
        return ask(server.port, "POST", "/api/retry", headers={**headers, **(extra or {})},
                   body=body)

    deep = b'{"ids": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert post(deep).status == 400
    assert post(b'{"ids": ["\\ud800"]}').status == 400                  # a lone surrogate
    assert post(b'{"ids": ["a\\u0000b"]}').status == 400                 # NUL in an id
    assert post(b"not json").status == 400
    assert post(b'{"ids": "t1"}').status == 400
    assert chunked(server.port, headers, b"x" * (2 << 20)).status == 413
    assert post(b"{}", {"Content-Length": str(10 << 20)}).status == 413
    assert post(b'{"all": true}', {"Origin": "http://evil.example"}).status == 403
    assert post(b'{"all": true}', {"X-Foreperson-Token": "wrong"}).status == 403
    assert post(b'{"all": true}', {"Content-Type": "text/plain"}).status == 403
    assert post(b'{"ids": ["t1"]}').json() == {"revived": []}          # t1 is not DEAD
    read_only = serve()
    assert ask(read_only.port, "POST", "/api/retry", headers=headers,
               body=b'{"all": true}').status == 404


# -- tenants --------------------------------------------------------------------------------

def _run_ids(server: StatusServer, headers: dict[str, str] | None = None) -> tuple[set, dict]:
    answer = ask(server.port, path="/api/runs", headers=headers)
    assert answer.status == 200
    body = answer.json()
    assert isinstance(body, dict)
    return {r["run_id"] for r in body["runs"]}, body


def test_runs_are_hidden_when_the_page_has_no_users(serve):
    server = serve()
    ids, body = _run_ids(server)
    assert ids == set() and body["shown"] == "none"
    assert "--show-runs-of-all-users" in body["note"]
    for run_id in ("r-ada", "r-bob", "r-anon"):
        answer = ask(server.port, path=f"/api/runs/{run_id}")
        assert answer.status == 404 and b"secret" not in answer.body
    shared = serve(access_token=TOKEN)                # a shared token is nobody's runs
    assert _run_ids(shared, {"Authorization": f"Bearer {TOKEN}"})[0] == set()


def test_the_flag_shows_every_users_runs(serve):
    server = serve(show_runs_of_all_users=True)
    ids, body = _run_ids(server)
    assert ids == {"r-ada", "r-bob", "r-anon"} and body["shown"] == "all"
    assert ask(server.port, path="/api/runs/r-bob").json()["run_id"] == "r-bob"


def test_each_user_sees_only_their_own_runs(serve):
    users = {"ada": "ada-token-0123456789", "bob": "bob-token-0123456789"}
    server = serve(users=users)
    assert ask(server.port, path="/api/runs").status == 401
    ids, body = _run_ids(server, basic("ada", users["ada"]))
    assert ids == {"r-ada"} and body["user"] == "ada"
    assert _run_ids(server, {"Authorization": f"Bearer {users['bob']}"})[0] == {"r-bob"}
    assert ask(server.port, path="/api/runs/r-ada", headers=basic("ada", users["ada"])
               ).status == 200
    mine, theirs = (ask(server.port, path=f"/api/runs/{r}", headers=basic("ada", users["ada"]))
                    for r in ("r-bob", "r-nonexistent"))
    assert theirs.status == mine.status == 404 and mine.json() == theirs.json()
    assert ask(server.port, headers=basic("bob", users["ada"])).status == 401  # ada's token


ADA, BOB = "ada-token-0123456789", "bob-token-0123456789"


def _tenants(store: TaskStore) -> None:
    """Ada's and Bob's durable runs with a DEAD task each, a batch job's task (its run id
    has no record: a label), a task outside any run, and a task of Bob's that waits on
    Ada's."""
    for run_id, user in (("r-ada", "ada"), ("r-bob", "bob"), ("r-anon", None)):
        store.create_run(RunRecord(run_id=run_id, agent="helper", user_id=user,
                                   input={"prompt": f"secret of {user}"}))
    store.add([Task("k", {"x": "ada-payload"}, id="ta", run_id="r-ada", max_attempts=1),
               Task("k", {"x": "bob-payload"}, id="tb", run_id="r-bob", max_attempts=1),
               Task("k", id="tx", run_id="r-anon", max_attempts=1),
               Task("k", id="tj", run_id="job-1", max_attempts=1),
               Task("k", id="tn", max_attempts=1)])
    for held in store.claim("w", {"k"}, 10):
        store.fail(held.id, held.lease_token, f"ada-secret-error of {held.id}",
                   retry_at=None)
    store.add([Task("later", id="tw", run_id="r-bob", depends_on=["ta"])])


def _without(value: object, *keys: str) -> object:
    assert isinstance(value, dict)
    return {k: v for k, v in value.items() if k not in keys}


def test_a_task_of_another_users_run_answers_as_a_missing_task(make_store, serve_on):
    store = make_store()
    _tenants(store)
    server = serve_on(store, users={"ada": ADA, "bob": BOB}, allow_retry=True)
    port = server.port
    bob, ada = basic("bob", BOB), basic("ada", ADA)

    missing = ask(port, path="/api/task/nope", headers=bob)
    for task_id in ("ta", "tx"):                               # Ada's, an anonymous run's
        theirs = ask(port, path=f"/api/task/{task_id}", headers=bob)
        assert (theirs.status, theirs.body) == (404, missing.body), task_id
    for task_id in ("tb", "tj", "tn"):                   # Bob's, a batch job's, no run's
        assert ask(port, path=f"/api/task/{task_id}", headers=bob).status == 200, task_id
    mine = ask(port, path="/api/task/ta", headers=ada)
    assert mine.status == 200 and b"ada-payload" in mine.body
    assert ask(port, path="/api/task/tw", headers=ada).status == 404

    waiting = ask(port, path="/api/task/tw", headers=bob).json()       # waits on Ada's
    assert waiting["depends_on"] == [{"id": "ta", "kind": None, "status": "unknown"}]
    assert ask(port, path="/api/task/ta", headers=ada).json()["dependents"] == []

    # a run's snapshot, history and task pages: as a run that does not exist
    for path in ("/api/snapshot?run={}", "/api/history?run={}",
                 "/api/tasks?status=dead&run={}"):
        theirs = ask(port, path=path.format("r-ada"), headers=bob)
        nobodys = ask(port, path=path.format("r-nobody"), headers=bob)
        assert theirs.status == nobodys.status == 200, path
        assert b"ada-" not in theirs.body and b"of ta" not in theirs.body, path
        if isinstance(theirs.json(), dict):
            assert _without(theirs.json(), "now", "run_id") == _without(
                nobodys.json(), "now", "run_id"), path
        else:
            assert theirs.json() == nobodys.json() == [], path
    assert ask(port, path="/api/snapshot?run=r-ada", headers=ada).json()["total"] == 1
    assert ask(port, path="/api/snapshot?run=r-bob", headers=bob).json()["total"] == 2

    # the whole store's lists leave the tasks of other users' runs out
    whole = ask(port, path="/api/snapshot", headers=bob)
    assert {t["id"] for t in whole.json()["dead"]} == {"tb", "tj", "tn"}
    assert b"of ta" not in whole.body and b"of tx" not in whole.body
    assert {t["id"] for t in ask(port, path="/api/tasks?status=dead", headers=bob
                                 ).json()["tasks"]} == {"tb", "tj", "tn"}

    # a retry neither revives nor names a task of another user's run
    retry = {**bob, "Content-Type": "application/json", "X-Foreperson-Token": server.token}
    assert ask(port, "POST", "/api/retry", headers=retry,
               body=b'{"ids": ["ta", "tx"]}').json() == {"revived": []}
    revived = ask(port, "POST", "/api/retry", headers=retry, body=b'{"all": true}').json()
    assert sorted(revived["revived"]) == ["tb", "tj", "tn"]
    assert store.get("ta").status is store.get("tx").status is Status.DEAD


def test_without_users_the_tasks_of_durable_runs_are_hidden_unless_all_are_shown(
        make_store, serve_on):
    store = make_store()
    _tenants(store)
    hidden = serve_on(store)
    missing = ask(hidden.port, path="/api/task/nope")
    for task_id in ("ta", "tb", "tx", "tw"):
        answer = ask(hidden.port, path=f"/api/task/{task_id}")
        assert (answer.status, answer.body) == (404, missing.body), task_id
    for task_id in ("tj", "tn"):               # a batch job's label guards nothing
        assert ask(hidden.port, path=f"/api/task/{task_id}").status == 200, task_id
    assert ask(hidden.port, path="/api/snapshot?run=r-ada").json()["total"] == 0
    assert ask(hidden.port, path="/api/snapshot?run=job-1").json()["total"] == 1
    shared = serve_on(store, access_token=TOKEN)      # a shared token is nobody's runs
    assert ask(shared.port, path="/api/task/ta",
               headers={"Authorization": f"Bearer {TOKEN}"}).status == 404
    every = serve_on(store, show_runs_of_all_users=True)
    for task_id in ("ta", "tb", "tx", "tw", "tj", "tn"):
        assert ask(every.port, path=f"/api/task/{task_id}").status == 200, task_id
    assert ask(every.port, path="/api/snapshot?run=r-ada").json()["total"] == 1
    assert len(ask(every.port, path="/api/snapshot").json()["dead"]) == 5


# -- load: connections, caching, the event loop ---------------------------------------------

def test_answers_are_gzipped_for_clients_that_accept_it_but_never_the_page(serve, store):
    import gzip

    store.add([Task("k", {"text": "x" * 5000}, id="big")])
    server = serve(allow_retry=True)
    plain = ask(server.port, path="/api/task/big")
    zipped = ask(server.port, path="/api/task/big", headers={"Accept-Encoding": "gzip"})
    assert "content-encoding" not in plain.headers
    assert zipped.headers["content-encoding"] == "gzip"
    assert zipped.headers["vary"] == "Accept-Encoding"
    assert json.loads(gzip.decompress(zipped.body)) == plain.json()
    page = ask(server.port, path="/", headers={"Accept-Encoding": "gzip"})
    assert "content-encoding" not in page.headers and server.token.encode() in page.body
    script = ask(server.port, path="/static/app.js", headers={"Accept-Encoding": "gzip"})
    assert script.headers["cache-control"] == "max-age=300"
    assert b"function single" in gzip.decompress(script.body)


def test_idle_connections_do_not_lock_a_normal_client_out(serve):
    server = serve(max_connections=40)
    idle = [socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S)
            for _ in range(120)]
    try:
        began = time.monotonic()
        assert ask(server.port).status == 200
        assert time.monotonic() - began < 5
        closed: set[socket.socket] = set()            # the longest idle were closed
        deadline = time.monotonic() + WAIT_S
        while len(closed) < len(idle) - 40 and time.monotonic() < deadline:
            readable, _, _ = select.select([c for c in idle if c not in closed], [], [], 0.2)
            closed |= {c for c in readable if c.recv(1) == b""}
        assert len(closed) >= len(idle) - 40
    finally:
        for conn in idle:
            conn.close()


def test_keep_alive_answers_do_not_wait_for_delayed_acks(serve):
    server = serve()
    # asyncio turns Nagle off only on sockets that say they are TCP: a response's second
    # write would otherwise wait for the client's delayed ACK (40 ms a request)
    assert server._http._sock.proto == socket.IPPROTO_TCP
    with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = conn.makefile("rb")
        for path in ("/static/app.js", "/static/app.css", "/api/snapshot", "/api/history"):
            conn.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
            assert reader.readline().startswith(b"HTTP/1.1 200")
            length = 0
            while (line := reader.readline()) != b"\r\n":
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            assert len(reader.read(length)) == length
        reader.close()


def test_a_silent_connection_is_closed_after_the_head_timeout(serve):
    server = serve(head_timeout_s=0.5)
    with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S) as silent, \
            socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S) as slow:
        slow.sendall(b"GET /api/snapshot HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never ends
        began = time.monotonic()
        assert silent.recv(100) == b""                # closed by the server, not by us
        assert slow.recv(100) == b""
        assert time.monotonic() - began < WAIT_S


def test_a_stalled_body_is_cut_off_and_does_not_hold_the_server(serve):
    """Headers, ``Content-Length: 100``, 10 bytes, then silence: the client is answered
    408 once the body timeout passes and its connection is closed at once (not a
    keep-alive later); meanwhile other clients are answered."""
    body_timeout_s = 1.0
    server = serve(allow_retry=True, body_timeout_s=body_timeout_s)
    head = (f"POST /api/retry HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
            f"Content-Type: application/json\r\nX-Foreperson-Token: {server.token}\r\n"
            "Content-Length: 100\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S) as stalled:
        stalled.sendall(head + b'{"all": tr')
        began = time.monotonic()
        for path in ("/api/snapshot", "/", "/api/runs"):       # answered meanwhile
            assert ask(server.port, path=path).status == 200
        waiting, _, _ = select.select([stalled], [], [], 0)
        assert not waiting, "the stalled client was answered before its deadline"
        data = b""
        while chunk := stalled.recv(65536):                    # to the server's close
            data += chunk
        took = time.monotonic() - began
    assert Answer(data).status == 408 and "error" in Answer(data).json()
    assert body_timeout_s <= took + 0.1
    assert took < body_timeout_s + 2.5, took                   # not the 5 s keep-alive more


class CountingStore(MemoryStore):
    """A memory store counting its ``stats()`` reads, which wait for ``gate``."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self.gate = threading.Event()
        self.gate.set()
        self.reading = threading.Event()

    def stats(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN201 - the base's signature
        self.reads += 1
        self.reading.set()
        assert self.gate.wait(WAIT_S)
        return super().stats(*args, **kwargs)


def test_many_clients_polling_cost_one_store_read_per_interval():
    store = CountingStore()
    server = StatusServer(store, port=0, cache_s=60, metrics=False).start()
    try:
        results: list[int] = []
        threads = [threading.Thread(target=lambda: results.append(ask(server.port).status))
                   for _ in range(40)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(WAIT_S)
        assert results == [200] * 40
        assert store.reads == 1
    finally:
        server.shutdown()


def test_a_slow_store_does_not_block_the_event_loop():
    store = CountingStore()
    store.gate.clear()
    server = StatusServer(store, port=0, metrics=False).start()
    try:
        stuck: list[int] = []
        waiting = threading.Thread(target=lambda: stuck.append(ask(server.port).status))
        waiting.start()
        assert store.reading.wait(WAIT_S)
        began = time.monotonic()                      # the snapshot's read is stuck now
        assert ask(server.port, path="/static/app.js").status == 200
        assert ask(server.port, path="/").status == 200
        assert time.monotonic() - began < 5
        store.gate.set()
        waiting.join(WAIT_S)
        assert stuck == [200]
    finally:
        store.gate.set()
        server.shutdown()


class BrokenStore(MemoryStore):
    """A store whose ``stats()`` has a bug (not a StoreError)."""

    def stats(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN201 - the base's signature
        raise RuntimeError("a bug")


def test_a_bug_behind_the_page_is_a_500_answer_not_a_dropped_connection(caplog):
    server = StatusServer(BrokenStore(), port=0, metrics=False).start()
    try:
        with caplog.at_level("ERROR", logger="foreperson.observe"):
            answer = ask(server.port)
        assert answer.status == 500 and "error" in answer.json()
        assert answer.headers["content-security-policy"].startswith("default-src 'none'")
        assert any("/api/snapshot failed" in r.getMessage() for r in caplog.records)
        assert ask(server.port, path="/static/app.css").status == 200   # still serving
    finally:
        server.shutdown()


# -- /metrics of --metrics-port ---------------------------------------------------------------

def test_the_metrics_port_checks_host_like_the_page(store):
    registry, _ = metrics_registry(store, sink=False)
    for bind in ("127.0.0.1", "0.0.0.0"):
        server = serve_metrics(registry, 0, bind)
        try:
            assert ask(server.port, path="/metrics").status == 200
            assert b"foreperson_tasks" in ask(server.port, path="/metrics").body
            assert ask(server.port, path="/metrics",
                       host=f"rebind.evil.example:{server.port}").status == 421
        finally:
            server.shutdown()
            server.server_close()
