"""Tenant privacy of ``foreperson runs`` (issue 20, item 5; seed 001, tenant pinning):
``list`` shows the caller's runs only unless the operator's ``--all-users`` is given,
and a run of another user looks exactly like a run that does not exist to a caller who
does not own it (same message shape, the owner never named, same exit status), for
every subcommand that takes a RUN_ID."""

from __future__ import annotations

import textwrap

import pytest

from foreperson.cli.main import main
from foreperson.journal import RunRecord
from foreperson.runtime import InMemoryRuntime, SqliteRuntime

AGENT_FILE = textwrap.dedent('''
    from foreperson import Agent
    from foreperson.agents import Guards, ask_later
    from foreperson.models import ToolCall, ToolReturn
    from foreperson.testing import FunctionModel

    def refund(order: str) -> str:
        """Refund an order."""
        return f"refunded {order}"

    def reply(messages, params):
        if isinstance(messages[-1], ToolReturn):
            return f"done: {messages[-1].content}"
        return ToolCall("refund", {"order": "A-7"})

    def clerk():
        return Agent("Refund orders.", model=FunctionModel(reply), name="clerk",
                     tools=[refund],
                     guards=Guards(approval=ask_later, approval_required={"refund"}))
''')


@pytest.fixture
def runs_db(tmp_path, monkeypatch):
    """A SQLite file with three runs parked on an approval: ada's, bob's and an
    anonymous one (in that order, so the anonymous run is the newest)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "agents.py").write_text(AGENT_FILE)
    from foreperson.cli.runs import load_agent

    db = str(tmp_path / "runs.db")
    with SqliteRuntime(db) as runtime:
        agent = load_agent("agents.py:clerk")
        for run_id, user in (("r-ada", "ada"), ("r-bob", "bob"), ("r-anon", None)):
            assert agent.run_sync("refund A-7", runtime=runtime, run_id=run_id,
                                  user_id=user).stop_reason == "awaiting_approval"
    return db


def listed(capsys) -> list[tuple[str, str]]:
    """(run, user) of each line ``runs list`` printed."""
    lines = capsys.readouterr().out.splitlines()
    if lines == ["no runs"]:
        return []
    return [(line.split()[0], line.split()[2]) for line in lines[1:]]


def test_list_shows_only_the_callers_runs_unless_all_users(runs_db, capsys):
    assert main(["runs", "list", "--db", runs_db]) == 0
    assert listed(capsys) == [("r-anon", "-")]                 # no --user: the anonymous runs
    assert main(["runs", "list", "--db", runs_db, "--user", "bob"]) == 0
    assert listed(capsys) == [("r-bob", "bob")]
    assert main(["runs", "list", "--db", runs_db, "--user", "carol"]) == 0
    assert listed(capsys) == []
    assert main(["runs", "list", "--db", runs_db, "--all-users"]) == 0
    assert listed(capsys) == [("r-anon", "-"), ("r-bob", "bob"), ("r-ada", "ada")]
    assert main(["runs", "list", "--db", runs_db, "--all-users", "--user", "bob"]) == 2
    assert "give it or --user, not both" in capsys.readouterr().err


def test_all_users_is_documented_as_an_operators_flag(capsys):
    assert main(["runs", "list", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--all-users" in text and "operator's flag" in text


def commands(run_id: str, db: str) -> dict[str, list[str]]:
    """Every ``runs`` subcommand that takes a RUN_ID, aimed at ``run_id``."""
    store = ["--db", db]
    return {
        "show": ["runs", "show", run_id, *store],
        "show --json": ["runs", "show", run_id, "--json", *store],
        "approve": ["runs", "approve", run_id, "call_1", *store],
        "approve --deny": ["runs", "approve", run_id, "call_1", "--deny", *store],
        "edit": ["runs", "approve", run_id, "call_1", "--arguments", '{"order": "B"}', *store],
        "deny": ["runs", "deny", run_id, "call_1", "--reason", "no", *store],
        "resume": ["runs", "resume", run_id, "--agent", "agents.py:clerk", *store],
    }


@pytest.mark.parametrize("caller", [["--user", "bob"], ["--user", "carol"], []],
                         ids=["another user", "a user with no runs", "anonymous"])
def test_a_refused_run_and_a_missing_run_look_the_same(runs_db, capsys, caller):
    refused = commands("r-ada", runs_db)
    missing = commands("r-none", runs_db)
    for name in refused:
        refused_status = main([*refused[name], *caller])
        refused_out = capsys.readouterr()
        missing_status = main([*missing[name], *caller])
        missing_out = capsys.readouterr()
        assert refused_status == missing_status == 2, name
        assert refused_out.out == missing_out.out == "", name
        # byte for byte the same, but for the run id asked for
        assert refused_out.err.replace("r-ada", "RUN") == \
            missing_out.err.replace("r-none", "RUN"), name
        assert refused_out.err.startswith("error: no run 'r-ada' for "), name
        assert "ada" not in refused_out.err.replace("r-ada", ""), name   # owner not named
        assert "belongs" not in refused_out.err, name


def test_nothing_is_written_for_a_refused_caller_and_the_owner_still_can(runs_db, capsys):
    for name, argv in commands("r-ada", runs_db).items():
        assert main([*argv, "--user", "bob"]) == 2, name
    capsys.readouterr()
    with SqliteRuntime(runs_db) as runtime:           # ada's call is still undecided
        assert [p.call_id for p in runtime.pending("r-ada", user_id="ada")] == ["call_1"]
    assert main(["runs", "approve", "r-ada", "call_1", "--db", runs_db, "--user",
                 "ada"]) == 0
    assert "call call_1: approve" in capsys.readouterr().out


def test_the_anonymous_listing_is_not_hidden_by_newer_users_runs():
    runtime = InMemoryRuntime()
    ledger = runtime.store
    ledger.create_run(RunRecord("anon-1", "clerk", None))
    for i in range(30):
        ledger.create_run(RunRecord(f"ada-{i}", "clerk", "ada"))
    assert [r.run_id for r in runtime.list_runs(limit=1)] == ["anon-1"]
    assert [r.run_id for r in runtime.list_runs(user_id="ada", limit=2)] == \
        ["ada-29", "ada-28"]
    assert len(runtime.list_runs(all_users=True, limit=100)) == 31
