"""Every agent example runs (offline, with its test model) and prints what it shows."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", [name])
    runpy.run_path(str(EXAMPLES / name), run_name="__main__")


def test_agent_tools_example(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    run_example("agent_tools.py", monkeypatch)
    out = capsys.readouterr().out
    assert "refunded 50.00 EUR on A-101 for cust-7" in out  # the approval edit applied
    assert "== completed:" in out
    assert "audit log: 8 entries" in out


def test_agent_structured_example(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    run_example("agent_structured.py", monkeypatch)
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["billing", "bug", "account"]
