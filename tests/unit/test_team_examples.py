"""Every team example runs (offline, with its function models) and prints what it shows."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(name: str, monkeypatch: pytest.MonkeyPatch, capsys) -> list[str]:
    monkeypatch.setattr(sys, "argv", [name])
    runpy.run_path(str(EXAMPLES / name), run_name="__main__")
    return capsys.readouterr().out.splitlines()


def test_the_supervisor_example(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    lines = run_example("team_supervisor.py", monkeypatch, capsys)
    assert lines[:2] == ["-> researcher: Two facts about tidepool ecology.",
                         "-> writer: One sentence on why people should care about tidepools."]
    assert sorted(line.split(":")[0] for line in lines[2:4]) == ["<- researcher", "<- writer"]
    assert lines[5].startswith("== completed: Tidepools shelter") and "footstep" in lines[5]
    assert "model calls: 4" in lines
    assert "route: turn 1 delegate -> writer (specialist calls before: 1)" in lines
    assert "tasks: {'COMPLETED': 2}" in lines
    assert '    n0{{"editor (supervisor)"}}' in lines


def test_the_router_example(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    lines = run_example("team_router.py", monkeypatch, capsys)
    assert lines[0].startswith("== completed: A storage node failed")
    assert lines[1] == "model calls: 5 (3 routing)"
    assert lines[4].startswith("  decided FINISH     at counter 2 -> FINISH")
    assert lines[6].startswith("follow-up: 3 model calls")
    assert "== cap: draft 6" in lines
    assert ("decisions: 7, specialist calls: 6, last decision 'writer' overridden by 'cap' "
            "-> finalize") in lines


def test_the_hierarchy_example(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    lines = run_example("team_hierarchy.py", monkeypatch, capsys)
    assert lines[1] == "model calls: 7, routing decisions: 5"
    assert lines[3:8] == ["  ceo: platform (counter 0)", "  ceo: accounts (counter 1)",
                          "    accounts: billing (counter 0)", "    accounts: FINISH (counter 1)",
                          "  ceo: FINISH (counter 2)"]
    assert "the CEO's own log: ['platform', 'accounts', 'FINISH'], its counter: 2" in lines
    assert ("tasks: platform<-ceo, operations<-platform, accounts<-ceo, billing<-accounts"
            in lines)
    assert any(line.startswith("follow-up: 5 model calls") for line in lines)
