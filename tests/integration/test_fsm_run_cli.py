"""`foreperson fsm run` with every agent on a model served over real HTTP by a fake
OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.fakes.openai_server import chat_completion, function_call
from tests.fakes.server import FakeReply, FakeServer, RecordedRequest

from foreperson.cli.main import main

ROUTER = Path(__file__).resolve().parents[2] / "examples" / "support_router.yaml"


class DeskServer(FakeServer):
    """A model that acts by the summons it reads: the supervisor routes a crash to the
    technical agent and then synthesizes; the technical agent reports once."""

    def _next(self, request: RecordedRequest) -> FakeReply:
        with self._lock:
            self.requests.append(request)
            n = len(self.requests)
        messages = request.body["messages"]
        if messages[-1]["role"] == "tool":
            return chat_completion("done")
        prompt = next(m["content"] for m in messages if m["role"] == "user")
        agent, state = re.search(r'You act as (\w+) in state "(\w+)"', prompt).groups()
        writes = {
            ("supervisor", "triage"): {"request": "the app crashes", "route": "technical"},
            ("tech_agent", "technical"): {"finding": "a full image cache"},
            ("supervisor", "dispatch"): {"route": "synthesize"},
            ("supervisor", "synthesize"): {"answer": "Clear the cache; a fix ships Friday."},
        }[(agent, state)]
        calls = [function_call("updateContext", {"field": k, "value": v}, f"c{n}_{i}")
                 for i, (k, v) in enumerate(writes.items())]
        return chat_completion(tool_calls=calls)


def test_fsm_run_prints_the_trace_and_the_answer(monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with DeskServer() as server:
        code = main(["fsm", "run", str(ROUTER), "--request", "The app crashes on start",
                     "--model", "openai:test-model", "--base-url", f"{server.url}/v1"])
    out = capsys.readouterr().out.splitlines()
    assert code == 0, out
    assert out[0].startswith("run ") and out[0].endswith(": machine support-desk")
    hops = [re.sub(r"\s+\d+\.\d+ s$", "", line).split() for line in out[1:5]]
    assert [h[:4] for h in hops] == [["1", "triage", "->", "technical"],
                                     ["2", "technical", "->", "dispatch"],
                                     ["3", "dispatch", "->", "synthesize"],
                                     ["4", "synthesize", "->", "done"]]
    assert "[context.route == 'technical']  supervisor: request, route" in out[1]
    assert out[5].startswith("completed in state done after 4 transitions (8 model calls")
    assert out[6] == "answer: Clear the cache; a fix ships Friday."
    # each agent got the generic instructions and the updateContext tool
    first = server.requests[0].body
    assert first["messages"][0]["role"] == "system"
    assert "one agent of the state machine support-desk" in first["messages"][0]["content"]
    assert [t["function"]["name"] for t in first["tools"]] == ["updateContext"]


def test_fsm_run_json(monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with DeskServer() as server:
        code = main(["fsm", "run", str(ROUTER), "--request", "crash", "--json",
                     "--model", "openai:test-model", "--base-url", f"{server.url}/v1"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["stop_reason"] == "completed"
    assert result["context"]["notes"] == ["technical: a full image cache"]
    assert [t["to_state"] for t in result["trace"]] == ["technical", "dispatch", "synthesize",
                                                       "done"]


def test_fsm_run_journals_to_sqlite_and_resumes(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    db = str(tmp_path / "runs.db")
    args = ["--model", "openai:test-model", "--json", "--db", db]
    with DeskServer() as server:
        assert main(["fsm", "run", str(ROUTER), "--request", "crash",
                     "--base-url", f"{server.url}/v1", *args]) == 0
        first = json.loads(capsys.readouterr().out)
        asked = len(server.requests)
        # a finished run resumes to its recorded result: no model is asked again
        assert main(["fsm", "run", str(ROUTER), "--request", "crash", "--resume",
                     first["run_id"], "--base-url", f"{server.url}/v1", *args]) == 0
        again = json.loads(capsys.readouterr().out)
        assert len(server.requests) == asked
    assert again == first
