"""``foreperson runs`` (issue 11 item 7), in process on a SQLite file: list, show as a
tree or as JSON, approve / deny, resume with an agent loaded from a file, and the
refusals (another user, a bad argument). Tenant privacy (issue 20 item 5) in
test_runs_privacy.py."""

from __future__ import annotations

import json
import textwrap

import pytest

from foreperson.cli.main import main
from foreperson.runtime import SqliteRuntime

AGENT_FILE = textwrap.dedent('''
    from foreperson import Agent
    from foreperson.agents import Guards, ask_later
    from foreperson.models import ToolCall, ToolReturn
    from foreperson.testing import FunctionModel

    def refund(order: str) -> str:
        """Refund an order."""
        return f"refunded {order}"

    def reply(messages, params):
        last = messages[-1]
        if isinstance(last, ToolReturn):
            return f"done: {last.content}"
        return ToolCall("refund", {"order": "A-7"})

    def clerk():
        return Agent("Refund orders.", model=FunctionModel(reply), name="clerk",
                     tools=[refund],
                     guards=Guards(approval=ask_later, approval_required={"refund"}))
''')


@pytest.fixture
def parked(tmp_path, monkeypatch):
    """A SQLite file with two runs parked on an approval (ada's and bob's), and the agent
    file that makes the clerk."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "agents.py").write_text(AGENT_FILE)
    from foreperson.cli.runs import load_agent

    db = str(tmp_path / "runs.db")
    with SqliteRuntime(db) as runtime:
        agent = load_agent("agents.py:clerk")
        for run_id, user in (("r-ada", "ada"), ("r-bob", "bob")):
            assert agent.run_sync("refund A-7", runtime=runtime, run_id=run_id,
                                  user_id=user).stop_reason == "awaiting_approval"
    return db


def test_runs_list_shows_the_callers_runs_or_every_users_for_an_operator(parked, capsys):
    assert main(["runs", "list", "--db", parked, "--all-users"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:4] == ["run", "agent", "user", "status"]
    assert [line.split()[:5] for line in out[1:]] == [
        ["r-bob", "clerk", "bob", "waiting", "awaiting_approval"],
        ["r-ada", "clerk", "ada", "waiting", "awaiting_approval"]]
    assert main(["runs", "list", "--db", parked, "--user", "ada"]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]] == ["r-ada"]
    assert main(["runs", "list", "--db", parked]) == 0          # the anonymous runs: none
    assert capsys.readouterr().out.strip() == "no runs"
    assert main(["runs", "list", "--db", parked, "--all-users", "--status",
                 "completed"]) == 0
    assert capsys.readouterr().out.strip() == "no runs"


def test_runs_show_prints_the_tree_or_the_journal_for_its_user_only(parked, capsys):
    assert main(["runs", "show", "r-ada", "--db", parked, "--user", "ada"]) == 0
    tree = capsys.readouterr().out
    assert "status waiting  stop_reason awaiting_approval" in tree
    assert 'waiting for approval: call call_1 refund({"order": "A-7"}) by clerk' in tree
    assert 'turn 1 model: calls refund({"order": "A-7"})' in tree
    assert "approval: waiting for a human decision" in tree
    assert main(["runs", "show", "r-ada", "--db", parked, "--user", "ada", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(s["key"], s["kind"]) for s in lines] == [
        ("agent:clerk/turn:1/model", "model_call"),
        ("agent:clerk/turn:1/tool:1/approval/request", "approval_request")]
    assert main(["runs", "show", "r-ada", "--db", parked, "--user", "bob"]) == 2
    refused = capsys.readouterr().err
    assert refused.startswith("error: no run 'r-ada' for user 'bob': ")
    assert "ada" not in refused.replace("'r-ada'", "")         # the owner is not named
    assert main(["runs", "show", "nope", "--db", parked]) == 2
    assert "no run 'nope' for an anonymous caller" in capsys.readouterr().err


def test_runs_approve_deny_and_resume(parked, capsys):
    assert main(["runs", "approve", "r-ada", "call_1", "--db", parked, "--user", "ada",
                 "--arguments", '{"order": "A-8"}']) == 0
    assert "call call_1: edit" in capsys.readouterr().out
    assert main(["runs", "resume", "r-ada", "--agent", "agents.py:clerk", "--db", parked,
                 "--user", "ada"]) == 0
    assert capsys.readouterr().out.splitlines() == ["run r-ada: completed",
                                                    "done: refunded A-8"]
    assert main(["runs", "deny", "r-bob", "call_1", "--reason", "no", "--db", parked,
                 "--user", "bob"]) == 0
    assert "call call_1: deny (no)" in capsys.readouterr().out
    assert main(["runs", "resume", "r-bob", "--agent", "agents.py:clerk", "--db", parked,
                 "--user", "bob"]) == 0
    assert "was denied: no" in capsys.readouterr().out
    assert main(["runs", "approve", "r-bob", "call_1", "--db", parked,
                 "--user", "bob"]) == 1                   # a second decision is refused
    assert "already decided: deny (no); the first decision stands" in capsys.readouterr().err
    assert main(["runs", "approve", "r-ada", "call_1", "--db", parked, "--user", "ada",
                 "--arguments", "[1]"]) == 2
    assert "must be a JSON object" in capsys.readouterr().err
    assert main(["runs", "resume", "r-ada", "--agent", "agents.py:nothing", "--db",
                 parked]) == 2
    assert "agents.py has no attribute 'nothing'" in capsys.readouterr().err
    assert main(["runs", "resume", "r-ada", "--agent", "agents.py:Guards", "--db",
                 parked]) == 2
    assert "Guards is a class, not an Agent" in capsys.readouterr().err
