"""Circuit breakers per model endpoint (issue 21 item 9: no run waits on a dead endpoint
over and over): the state machine on a manual clock, shared and thread-safe, and the
real SDKs against a real TCP server on 127.0.0.1 that accepts connections and never
answers, and against a port that refuses them."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from tests.fakes.anthropic_server import message
from tests.fakes.openai_server import chat_completion

from foreperson.errors import ConfigurationError, ModelError
from foreperson.models import (
    AnthropicModel,
    AnthropicProvider,
    BreakerPolicy,
    CircuitBreaker,
    EndpointUnavailable,
    ModelRequestParameters,
    OpenAIChatModel,
    OpenAIProvider,
    RetryingModel,
    UserMessage,
    infer_model,
    reset_circuit_breakers,
)
from foreperson.models._circuit import outage_reason
from foreperson.testing import ManualClock

HELLO = [UserMessage("hi")]
PARAMS = ModelRequestParameters()


@pytest.fixture(autouse=True)
def _fresh_breakers() -> Iterator[None]:
    reset_circuit_breakers()
    yield
    reset_circuit_breakers()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def policy(clock: ManualClock) -> BreakerPolicy:
    return BreakerPolicy(failures=3, cool_down_s=30.0, clock=clock.now)


class Sleeps:
    """Records the waits instead of waiting."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def timeout() -> ModelError:
    error = ModelError("model m: the request timed out")
    error.__cause__ = TimeoutError("read timed out")
    return error


def fail(breaker: CircuitBreaker, exc: Exception) -> None:
    with pytest.raises(type(exc)), breaker.attempt("openai:m"):
        raise exc


# --- the state machine, on a manual clock ------------------------------------------------


def test_n_outages_in_a_row_open_it_and_a_trial_after_the_cool_down_closes_it(
    clock: ManualClock, policy: BreakerPolicy,
) -> None:
    breaker = CircuitBreaker("http://127.0.0.1:9/v1", policy)
    for _ in range(2):
        fail(breaker, timeout())
    assert (breaker.state, breaker.failures) == ("closed", 2)
    fail(breaker, timeout())
    assert breaker.state == "open"

    with pytest.raises(EndpointUnavailable) as info, breaker.attempt("openai:m"):
        pytest.fail("an open breaker let a call through")
    error = info.value
    assert not error.retryable and error.status_code is None
    assert (error.failures, error.retry_in_s) == (3, 30.0)
    assert error.endpoint == "http://127.0.0.1:9/v1"
    assert error.reasons == ("timed out",) * 3
    text = str(error)
    assert "http://127.0.0.1:9/v1" in text and "3 timeouts or connection failures" in text
    assert "for another 30.0 s" in text and "UTC" in text and "one trial call" in text

    import pickle
    again = pickle.loads(pickle.dumps(error))     # e.g. through a process pool
    assert (str(again), again.failures, again.retryable) == (text, 3, False)

    clock.advance(29.5)
    with pytest.raises(EndpointUnavailable, match="another 0.5 s"), breaker.attempt("openai:m"):
        pass
    clock.advance(0.5)
    with breaker.attempt("openai:m"):       # the trial goes through ...
        assert str(breaker.state) == "half_open"
        with pytest.raises(EndpointUnavailable, match="trial call is being made"), \
                breaker.attempt("openai:m"):
            pass                            # ... alone
    assert (breaker.state, breaker.failures) == ("closed", 0)


def test_a_failed_trial_opens_it_for_another_cool_down(
    clock: ManualClock, policy: BreakerPolicy,
) -> None:
    breaker = CircuitBreaker("http://h/v1", policy)
    for _ in range(3):
        fail(breaker, ConnectionRefusedError("[Errno 111] Connection refused"))
    clock.advance(30)
    fail(breaker, ConnectionRefusedError("[Errno 111] Connection refused"))
    assert breaker.state == "open"
    with pytest.raises(EndpointUnavailable, match="another 30.0 s") as info, \
            breaker.attempt("openai:m"):
        pass
    assert info.value.failures == 4
    assert info.value.reasons[-1].startswith("cannot connect")


def test_an_answer_resets_the_count_and_other_errors_count_nothing(
    policy: BreakerPolicy,
) -> None:
    breaker = CircuitBreaker("http://h/v1", policy)
    fail(breaker, timeout())
    fail(breaker, timeout())
    fail(breaker, ModelError("model m: HTTP 500: boom", status_code=500))   # it answered
    assert breaker.failures == 0
    fail(breaker, timeout())
    fail(breaker, ValueError("a bug of ours"))
    fail(breaker, ConfigurationError("bad request shape"))
    assert (breaker.state, breaker.failures) == ("closed", 1)


def test_a_cancelled_trial_decides_nothing(clock: ManualClock, policy: BreakerPolicy) -> None:
    breaker = CircuitBreaker("http://h/v1", policy)
    for _ in range(3):
        fail(breaker, timeout())
    clock.advance(30)
    with pytest.raises(KeyboardInterrupt), breaker.attempt("openai:m"):
        raise KeyboardInterrupt          # a BaseException: the caller went away
    with breaker.attempt("openai:m"):    # the next call is the trial
        pass
    assert breaker.state == "closed"


def test_outages_are_timeouts_and_connection_failures_only() -> None:
    assert outage_reason(TimeoutError()) == "timed out"
    assert outage_reason(ConnectionResetError("reset")) == "cannot connect"
    wrapped = ModelError("model m: cannot connect")
    wrapped.__cause__ = OSError("[Errno 111] Connection refused")
    wrapped.__cause__.__cause__ = ConnectionRefusedError("[Errno 111] Connection refused")
    assert outage_reason(wrapped) == "cannot connect: [Errno 111] Connection refused"
    assert outage_reason(ModelError("HTTP 503", status_code=503)) is None
    assert outage_reason(ValueError("bad JSON")) is None


def test_threads_share_it_and_exactly_one_is_the_trial(
    clock: ManualClock, policy: BreakerPolicy,
) -> None:
    breaker = CircuitBreaker("http://h/v1", policy)
    workers = 8
    barrier = threading.Barrier(workers)

    def outage(_: int) -> None:
        with pytest.raises(ModelError, match="timed out"), breaker.attempt("openai:m"):
            barrier.wait(10)                # all 8 in flight while it is closed
            raise timeout()

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(outage, range(workers)))
    assert (breaker.state, breaker.failures) == ("open", workers)   # none lost
    clock.advance(30)

    barrier.reset()
    release = threading.Event()
    outcomes: list[str] = []
    lock = threading.Lock()

    def call(_: int) -> None:
        barrier.wait()
        try:
            with breaker.attempt("openai:m"):
                with lock:
                    outcomes.append("trial")
                release.wait(10)           # hold the trial until the others were refused
        except EndpointUnavailable:
            with lock:
                outcomes.append("refused")
                if outcomes.count("refused") == workers - 1:
                    release.set()

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(call, range(workers)))
    assert sorted(outcomes) == ["refused"] * (workers - 1) + ["trial"]
    assert breaker.state == "closed"


def test_policies_are_checked_and_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for bad in ({"failures": -1}, {"failures": 1.5}, {"cool_down_s": 0},
                {"cool_down_s": float("inf")}):
        with pytest.raises(ConfigurationError, match="BreakerPolicy"):
            BreakerPolicy(**bad)
    assert BreakerPolicy.from_env() == BreakerPolicy()
    monkeypatch.setenv("FOREPERSON_MODEL_BREAKER_FAILURES", "5")
    monkeypatch.setenv("FOREPERSON_MODEL_BREAKER_COOL_DOWN_S", "2.5")
    assert BreakerPolicy.from_env() == BreakerPolicy(failures=5, cool_down_s=2.5)
    provider = OpenAIProvider(api_key="sk-x", base_url="http://127.0.0.1:9/v1")
    assert provider.breaker_policy == BreakerPolicy(failures=5, cool_down_s=2.5)
    monkeypatch.setenv("FOREPERSON_MODEL_BREAKER_FAILURES", "0")
    off = OpenAIProvider(api_key="sk-x", base_url="http://127.0.0.1:9/v1")
    assert off.breaker_for("m") is None
    monkeypatch.setenv("FOREPERSON_MODEL_BREAKER_FAILURES", "three")
    with pytest.raises(ConfigurationError, match="FOREPERSON_MODEL_BREAKER_FAILURES"):
        OpenAIProvider(api_key="sk-x", base_url="http://127.0.0.1:9/v1")


def test_one_breaker_per_endpoint_and_model_for_the_whole_process() -> None:
    url = "http://127.0.0.1:9/v1"
    first = infer_model("openai:m", base_url=url, api_key="sk-x")
    second = infer_model("openai:m", base_url=url, api_key="sk-y")
    other_model = infer_model("openai:n", base_url=url, api_key="sk-x")
    elsewhere = infer_model("openai:m", base_url="http://127.0.0.1:10/v1", api_key="sk-x")
    breaker = first.wrapped.provider.breaker_for("m")  # type: ignore[attr-defined]
    assert breaker is not None
    assert second.wrapped.provider.breaker_for("m") is breaker  # type: ignore[attr-defined]
    assert other_model.wrapped.provider.breaker_for("n") is not breaker  # type: ignore[attr-defined]
    assert elsewhere.wrapped.provider.breaker_for("m") is not breaker  # type: ignore[attr-defined]


# --- the real SDKs against real sockets ------------------------------------------------


class HungServer:
    """A TCP server on 127.0.0.1 (port 0) that accepts connections and never answers,
    until :meth:`recover` makes it answer each new connection with one HTTP reply.

    Attributes:
        connections: connections accepted so far.
    """

    def __init__(self) -> None:
        self._sock = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.port = self._sock.getsockname()[1]
        self._accepted: list[socket.socket] = []
        self._changed = threading.Condition()
        self._stopping = False
        self._reply: bytes | None = None
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def connections(self) -> int:
        with self._changed:
            return len(self._accepted)

    def wait_for(self, count: int, timeout_s: float = 10.0) -> int:
        """Wait until ``count`` connections were accepted; the number accepted."""
        with self._changed:
            self._changed.wait_for(lambda: len(self._accepted) >= count, timeout_s)
            return len(self._accepted)

    def recover(self, body: dict[str, Any]) -> None:
        """From now on, answer each new connection with HTTP 200 and ``body``."""
        payload = json.dumps(body).encode()
        self._reply = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                       b"Content-Length: " + str(len(payload)).encode() +
                       b"\r\nConnection: close\r\n\r\n" + payload)

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            if self._stopping:
                conn.close()
                return
            with self._changed:
                self._accepted.append(conn)
                self._changed.notify_all()
            if self._reply is not None:
                _answer(conn, self._reply)

    def close(self) -> None:
        self._stopping = True
        socket.create_connection(("127.0.0.1", self.port)).close()   # wakes accept()
        self._thread.join(10)
        self._sock.close()
        for conn in self._accepted:
            conn.close()


def _answer(conn: socket.socket, reply: bytes) -> None:
    """Read one HTTP request (headers, then Content-Length bytes) and send ``reply``."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return
        body += chunk
    conn.sendall(reply)


@pytest.fixture
def hung() -> Iterator[HungServer]:
    server = HungServer()
    yield server
    server.close()


@pytest.fixture
def refusing_url() -> Iterator[str]:
    """A port bound but not listening: connections to it are refused."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


def openai_adapter(url: str, policy: BreakerPolicy) -> OpenAIChatModel:
    provider = OpenAIProvider(api_key="sk-test", base_url=f"{url}/v1", timeout_s=0.1,
                              profile="openai-compatible", breaker=policy)
    return OpenAIChatModel("m", provider=provider)


def anthropic_adapter(url: str, policy: BreakerPolicy) -> AnthropicModel:
    provider = AnthropicProvider(api_key="sk-ant-test", base_url=url, timeout_s=0.1,
                                 breaker=policy)
    return AnthropicModel("m", provider=provider)


ADAPTERS: dict[str, tuple[Callable[[str, BreakerPolicy], Any], dict[str, Any]]] = {
    "openai": (openai_adapter, chat_completion("back again").body),
    "anthropic": (anthropic_adapter, message("back again").body),
}


@pytest.mark.anyio
@pytest.mark.parametrize("sdk", sorted(ADAPTERS))
async def test_a_hung_server_times_out_n_times_then_calls_fail_fast_without_connecting(
    sdk: str, hung: HungServer, clock: ManualClock, policy: BreakerPolicy,
) -> None:
    pytest.importorskip(sdk)
    make, answer = ADAPTERS[sdk]
    async with make(hung.url, policy) as adapter:
        sleeps = Sleeps()
        model = RetryingModel(adapter, max_attempts=3, sleep=sleeps)
        # the first call: 3 attempts, each times out on a connection of its own
        with pytest.raises(ModelError, match=r"timed out after 0\.1 s") as info:
            await model.request(HELLO, PARAMS)
        assert not isinstance(info.value, EndpointUnavailable)
        assert info.value.attempts == 3 and len(sleeps.waits) == 2
        assert hung.wait_for(3) == 3
        breaker = adapter.provider.breaker_for("m")
        assert breaker is not None and breaker.state == "open"

        # the next calls fail at once, not retried, and connect to nothing
        for _ in range(5):
            with pytest.raises(EndpointUnavailable) as info:
                await model.request(HELLO, PARAMS)
            assert info.value.attempts == 1 and not info.value.retryable
        assert len(sleeps.waits) == 2
        text = str(info.value)
        assert hung.url in text and "3 timeouts or connection failures in a row" in text
        assert "timed out after 0.1 s" in text and "for another 30.0 s" in text
        with pytest.raises(EndpointUnavailable):
            _ = [item async for item in adapter.request_stream(HELLO, PARAMS)]

        # after the cool-down, one trial goes through: it times out, the breaker reopens
        clock.advance(30)
        with pytest.raises(ModelError, match="timed out") as info:
            await adapter.request(HELLO, PARAMS)
        assert not isinstance(info.value, EndpointUnavailable)
        assert hung.wait_for(4) == 4
        with pytest.raises(EndpointUnavailable):
            await adapter.request(HELLO, PARAMS)

        # the server is back: after the next cool-down the trial's answer closes it
        hung.recover(answer)
        clock.advance(30)
        response = await model.request(HELLO, PARAMS)
        assert response.text == "back again"
        assert breaker.state == "closed"
        assert hung.wait_for(5) == 5
    # 3 + 1 + 1 connections: none for the 6 calls refused by the open breaker
    assert hung.connections == 5


@pytest.mark.anyio
@pytest.mark.parametrize("sdk", sorted(ADAPTERS))
async def test_a_refused_endpoint_opens_the_breaker_too(
    sdk: str, refusing_url: str, policy: BreakerPolicy,
) -> None:
    pytest.importorskip(sdk)
    make, _ = ADAPTERS[sdk]
    async with make(refusing_url, policy) as adapter:
        for _ in range(3):
            with pytest.raises(ModelError, match="cannot connect") as info:
                await adapter.request(HELLO, PARAMS)
            assert info.value.retryable and not isinstance(info.value, EndpointUnavailable)
        with pytest.raises(EndpointUnavailable, match="cannot connect") as refused:
            await adapter.request(HELLO, PARAMS)
    assert refused.value.failures == 3


def test_blocking_callers_in_worker_threads_share_the_breaker(
    hung: HungServer, policy: BreakerPolicy,
) -> None:
    from foreperson.agents import Agent

    pytest.importorskip("openai")
    # every ticket worker builds its own agent and provider: the breaker is still one
    agents: list[Agent[Any]] = [Agent("Answer.", model=openai_adapter(hung.url, policy))
                                for _ in range(4)]

    def run(index: int) -> str:
        try:
            agents[index % 4].run_sync(f"q{index}")
        except EndpointUnavailable:
            return "fast"
        except ModelError:
            return "timed out"
        return "answered"

    with ThreadPoolExecutor(max_workers=4) as pool:
        outcomes = list(pool.map(run, range(16)))
    assert set(outcomes) <= {"fast", "timed out"}
    assert outcomes.count("fast") >= 16 - 4 - 2     # at most 4 in flight + 2 before opening
    assert hung.wait_for(outcomes.count("timed out")) == outcomes.count("timed out")
