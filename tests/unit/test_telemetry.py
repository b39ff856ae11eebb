"""Metrics and traces (issue 13 items 2, 3, 5): ``/metrics`` parsed with
prometheus-client's own parser, spans collected with the SDK's in-memory exporter."""

from __future__ import annotations

import json
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from foreperson import Agent, Team, telemetry
from foreperson.errors import GiveUp
from foreperson.models import ToolCall
from foreperson.observe import StatusServer, metrics_registry
from foreperson.testing import ManualClock, ScriptedModel
from foreperson.work import MemoryStore, Supervisor, Task, Worker


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(parsed, name, **labels):
    return parsed.get((name, tuple(sorted(labels.items()))))


@pytest.fixture
def sink_registry():
    store = MemoryStore()
    registry, sink = metrics_registry(store)
    yield store, registry
    telemetry.remove_sink(sink)


def run_job(store: MemoryStore) -> None:
    calls = {"flaky": 0}

    def work(task: Task) -> dict:
        if task.kind == "flaky":
            calls["flaky"] += 1
            if calls["flaky"] == 1:
                raise TimeoutError("slow upstream")        # retryable: a retry
        if task.kind == "bad":
            raise GiveUp("refused")
        return {}

    sup = Supervisor(store, backoff_base_s=0.01, backoff_cap_s=0.01)
    for i in range(2):
        sup.register(Worker(f"w{i}", {"ok", "flaky", "bad"}, fn=work))
    sup.add_tasks([Task("ok") for _ in range(5)] + [Task("flaky"), Task("bad", id="b")])
    sup.run_sync()


def test_metrics_count_the_run_and_read_the_store(sink_registry):
    from prometheus_client import generate_latest

    store, registry = sink_registry
    run_job(store)
    model = ScriptedModel(["hello"])
    Agent("Greet.", model=model).run_sync("hi")
    parsed = samples(generate_latest(registry).decode())
    assert value(parsed, "foreperson_tasks", status="completed", kind="ok") == 5
    assert value(parsed, "foreperson_tasks", status="dead", kind="bad") == 1
    assert value(parsed, "foreperson_tasks", status="pending", kind="flaky") == 0
    assert value(parsed, "foreperson_oldest_unfinished_task_age_seconds") == 0
    assert value(parsed, "foreperson_task_retries_total", kind="flaky") == 1
    assert value(parsed, "foreperson_task_dead_total", kind="bad") == 1
    assert value(parsed, "foreperson_task_reclaims_total") == 0
    assert value(parsed, "foreperson_task_run_seconds_count", kind="ok", outcome="completed") == 5
    assert value(parsed, "foreperson_task_run_seconds_count", kind="flaky",
                 outcome="retrying") == 1
    assert value(parsed, "foreperson_task_run_seconds_count", kind="bad", outcome="dead") == 1
    assert value(parsed, "foreperson_task_claim_to_start_seconds_count", kind="ok") == 5
    assert value(parsed, "foreperson_model_calls_total", model="test:scripted") == 1
    assert value(parsed, "foreperson_model_tokens_total", model="test:scripted",
                 type="input") is not None


def test_the_gauges_show_active_workers_and_the_oldest_age():
    from prometheus_client import generate_latest

    clock = ManualClock()
    store = MemoryStore(clock=clock)
    registry, _ = metrics_registry(store, sink=False)
    store.add([Task("k", id="a"), Task("k", id="b")])
    store.claim("w1", {"k"}, 1, start=True)
    clock.advance(42)
    parsed = samples(generate_latest(registry).decode())
    assert value(parsed, "foreperson_worker_active_tasks", worker="w1") == 1
    assert value(parsed, "foreperson_oldest_unfinished_task_age_seconds") == pytest.approx(42)
    assert value(parsed, "foreperson_tasks", status="running", kind="k") == 1


def test_serve_exposes_metrics_and_the_snapshot():
    store = MemoryStore()
    store.add([Task("k", {"x": "<b>"}, id="t1")])
    server = StatusServer(store, port=0).start()
    try:
        with urllib.request.urlopen(server.url + "metrics", timeout=10) as response:
            parsed = samples(response.read().decode())
        assert value(parsed, "foreperson_tasks", status="pending", kind="k") == 1
        with urllib.request.urlopen(server.url + "api/task/t1", timeout=10) as response:
            assert response.headers["Content-Security-Policy"].startswith("default-src 'none'")
            assert json.load(response)["payload"] == {"x": "<b>"}
        request = urllib.request.Request(server.url + "api/snapshot",
                                         headers={"Host": "evil.example:80"})
        with pytest.raises(urllib.error.HTTPError) as refused:   # DNS rebinding
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 421
        refused.value.close()
    finally:
        server.shutdown()


def tree(spans):
    finished = spans.get_finished_spans()
    by_id = {s.context.span_id: s for s in finished}
    return finished, by_id


def parent_of(span, by_id):
    return by_id.get(span.parent.span_id) if span.parent is not None else None


def test_a_task_attempt_is_a_span_under_the_span_that_made_the_task(spans):
    from opentelemetry import trace

    store = MemoryStore()
    sup = Supervisor(store)
    sup.register(Worker("w0", {"ok", "bad"}, fn=lambda t: (_ for _ in ()).throw(GiveUp("no"))
                        if t.kind == "bad" else {}))
    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("nightly job") as job:
        sup.add_tasks([Task("ok", id="a"), Task("bad", id="b", max_attempts=1)])
    sup.run_sync()
    finished, by_id = tree(spans)
    attempts = {s.attributes["foreperson.task.id"]: s for s in finished
                if s.name.startswith("task ")}
    assert set(attempts) == {"a", "b"}
    ok, bad = attempts["a"], attempts["b"]
    assert ok.name == "task ok" and ok.kind is trace.SpanKind.CONSUMER
    expected = {"foreperson.task.kind": "ok", "foreperson.worker": "w0",
                "foreperson.task.attempt": 1, "foreperson.task.outcome": "completed"}
    assert {k: ok.attributes.get(k) for k in expected} == expected
    assert bad.attributes["foreperson.task.outcome"] == "dead"
    assert bad.status.status_code is trace.StatusCode.ERROR
    for span in (ok, bad):
        assert span.parent.span_id == job.get_span_context().span_id
        assert span.context.trace_id == job.get_span_context().trace_id


def test_agent_spans_follow_the_genai_conventions_and_delegations_nest(spans):
    researcher = Agent("Find sources.", model=ScriptedModel(["3 sources"]), name="researcher")
    lead = ScriptedModel([ToolCall("delegate", {"worker": "researcher",
                                                "instructions": "find secret sources"}),
                          "the article"])
    team = Team.supervisor(workers={"researcher": researcher}, instructions="Lead.",
                           model=lead, name="lead")
    team.run_sync("write about the secret project")
    finished, by_id = tree(spans)
    named = {}
    for s in finished:
        named.setdefault(s.name, []).append(s)
    (run,) = [s for s in named["invoke_agent lead"]]
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["foreperson.stop_reason"] == "completed"
    turns = sorted((s for s in finished if s.name.startswith("turn ")
                    and parent_of(s, by_id) is run), key=lambda s: s.start_time)
    assert [t.name for t in turns] == ["turn 1", "turn 2"]
    chat = [s for s in finished if s.name == "chat test:scripted" and parent_of(s, by_id)
            is turns[0]][0]
    assert {k: chat.attributes[k] for k in ("gen_ai.operation.name", "gen_ai.system",
                                            "gen_ai.request.model")} == {
        "gen_ai.operation.name": "chat", "gen_ai.system": "test",
        "gen_ai.request.model": "test:scripted"}
    assert "gen_ai.usage.input_tokens" in chat.attributes
    (delegate,) = named["execute_tool delegate"]
    assert parent_of(delegate, by_id) is turns[0]                   # the turn that made it
    assert delegate.attributes["gen_ai.tool.name"] == "delegate"
    (worker_run,) = named["invoke_agent researcher"]
    assert parent_of(worker_run, by_id) is delegate
    # prompt and tool contents are off by default
    text = json.dumps([dict(s.attributes) for s in finished])
    assert "secret" not in text and "3 sources" not in text


def test_contents_are_recorded_only_when_asked(spans):
    telemetry.set_capture_content(True)
    try:
        Agent("Echo.", model=ScriptedModel(["the answer"])).run_sync("the question")
    finally:
        telemetry.set_capture_content(False)
    text = json.dumps([dict(s.attributes) for s in spans.get_finished_spans()])
    assert "the question" in text and "the answer" in text


NO_SDK = """
import json
from foreperson import telemetry
parent = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
alone = telemetry.start_span("step")
child = telemetry.start_span("step", parent=telemetry.span_context(parent))
with telemetry.use_span(child):
    carried = telemetry.current_carrier()
print(json.dumps({"alone": alone is None, "carried": carried}))
"""


def test_without_an_sdk_a_span_is_made_only_to_carry_a_parent_on():
    """No tracer provider set (a fresh process): a span with nothing to link is skipped,
    one under a parent from a task record still passes that parent's trace on."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", NO_SDK], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    got = json.loads(out)
    assert got["alone"] is True
    assert got["carried"]["traceparent"].split("-")[1] == "4bf92f3577b34da6a3ce929d0e0e4736"
