"""`foreperson tickets --model` against a fake OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.fakes.openai_server import chat_completion
from tests.fakes.server import FakeReply, FakeServer, RecordedRequest


class TicketServer(FakeServer):
    """Answers by what is asked: a classification (JSON schema) or a draft (text)."""

    def _next(self, request: RecordedRequest) -> FakeReply:
        with self._lock:
            self.requests.append(request)
        body = request.body
        ticket = " ".join(str(m.get("content")) for m in body["messages"] if m["role"] == "user")
        if "response_format" in body:
            if "garbage" in ticket:
                return chat_completion("sure! it is billing, I think")
            category = "billing" if "refund" in ticket else "technical"
            return chat_completion(json.dumps(
                {"category": category, "priority": "high", "confidence": 0.9}))
        return chat_completion(f"Draft: we are on it ({len(ticket)} chars read).")


def run_cli(tmp_path, url, *extra):
    env = dict(os.environ, OPENAI_API_KEY="test-key")
    return subprocess.run(
        [sys.executable, "-m", "foreperson.cli.main", "tickets", "in.csv", "--workers", "4",
         "--model", "openai:test-model", "--base-url", f"{url}/v1", "--out", "o.jsonl",
         "--no-progress", *extra],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_model_classifies_into_the_example_labels_and_drafts(tmp_path):
    (tmp_path / "in.csv").write_text(
        "id,body\n1,please refund my order\n2,the app crashes\n3,refund again please\n")
    with TicketServer() as server:
        proc = run_cli(tmp_path, server.url)
    assert proc.returncode == 0, proc.stderr
    results = {r["id"]: r for r in map(json.loads, (tmp_path / "o.jsonl").read_text().splitlines())}
    assert {k: r["category"] for k, r in results.items()} == {
        "1": "billing", "2": "technical", "3": "billing"}
    assert all(r["draft_reply"].startswith("Draft: we are on it") for r in results.values())
    assert not any(r["needs_human"] for r in results.values())
    schema = next(r.body for r in server.requests if "response_format" in r.body)
    allowed = json.dumps(schema["response_format"])
    assert "feature_request" in allowed and "billing" in allowed   # the closed label set


def test_garbage_from_the_model_parks_only_that_ticket_with_a_clear_error(tmp_path):
    (tmp_path / "in.csv").write_text("id,body\n1,please refund\n2,garbage ticket\n")
    with TicketServer() as server:
        proc = run_cli(tmp_path, server.url)
    assert proc.returncode == 1
    results = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert [r["id"] for r in results] == ["1"]
    assert "2/classify" in proc.stdout and "DEAD" in proc.stdout
    assert "2/draft" in proc.stdout     # its dependents are parked, not left waiting


def test_missing_key_is_an_error_that_names_the_fix(tmp_path):
    (tmp_path / "in.csv").write_text("id,body\n1,hello\n")
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    proc = subprocess.run(
        [sys.executable, "-m", "foreperson.cli.main", "tickets", "in.csv", "--model",
         "gpt-4o-mini", "--no-progress"], cwd=tmp_path, env=env, capture_output=True,
        text=True, timeout=60)
    assert proc.returncode == 2 and "OPENAI_API_KEY" in proc.stderr


def test_unreachable_model_server_fails_before_any_work(tmp_path):
    (tmp_path / "in.csv").write_text("id,body\n1,hello\n")
    proc = run_cli(tmp_path, "http://127.0.0.1:9")
    assert proc.returncode == 2 and "not reachable" in proc.stderr
    assert not (tmp_path / "o.jsonl").exists()
