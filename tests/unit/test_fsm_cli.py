"""`foreperson fsm check | render | run` and the state machine example."""

from __future__ import annotations

import re
import runpy
import sys
from pathlib import Path

import pytest

from foreperson.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "tests" / "fixtures" / "fsm" / "support_router_seed.yaml"
ROUTER = ROOT / "examples" / "support_router.yaml"


def test_check_on_the_seed_yaml_prints_one_summary_line(capsys):
    assert main(["fsm", "check", str(SEED), str(ROUTER)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{SEED}: ok: machine support-router v1: 7 states (1 terminal), 4 agents, "
        "5 context fields, 12 edges",
        f"{ROUTER}: ok: machine support-desk v1: 7 states (1 terminal), 4 agents, "
        "5 context fields, 12 edges",
    ]


def test_check_prints_every_problem_and_exits_1(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(SEED.read_text()
                   .replace("{ toState: done }", "{ toState: dnoe }")
                   .replace("context.route == 'security'", "context.route == 'securty'"))
    assert main(["fsm", "check", str(SEED), str(bad)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{SEED}: ok")
    assert lines[-1] == f"{bad}: 4 problems"
    problems = lines[1:-1]
    assert len(problems) == 4 and all(p.startswith(f"{bad}:") for p in problems)
    assert sum("'securty' is not a value of enum field 'route'" in p for p in problems) == 2
    assert any("unknown target state 'dnoe'" in p for p in problems)


def test_check_reports_an_unreadable_file(tmp_path, capsys):
    assert main(["fsm", "check", str(tmp_path / "missing.yaml")]) == 1
    assert "cannot read it" in capsys.readouterr().out


def test_render_draws_every_edge_with_its_guard(capsys):
    assert main(["fsm", "render", str(SEED)]) == 0
    mermaid = capsys.readouterr().out.splitlines()
    assert mermaid[:3] == ["stateDiagram-v2", "    [*] --> triage",
                           "    triage --> billing: context.route == 'billing'"]
    assert "    dispatch --> synthesize: context.route == 'synthesize'" in mermaid
    assert '    security --> dispatch: / route = "", finding = ""' in mermaid
    assert mermaid[-1] == "    done --> [*]"
    assert sum("-->" in line for line in mermaid) == 12 + 2

    assert main(["fsm", "render", str(SEED), "--format", "dot"]) == 0
    dot = capsys.readouterr().out
    assert dot.startswith('digraph "support-router" {')
    assert '"triage" -> "security" [label="context.route == \'security\'"];' in dot
    assert '"done" [shape=doublecircle];' in dot


def test_render_of_a_broken_file_is_a_usage_error(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("fsm:\n  name: x\n")
    assert main(["fsm", "render", str(bad)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: 2 problems in {bad}",
        f"{bad}:1:1: `fsm` needs 'initialState'",
        f"{bad}:1:1: a machine needs `states:`, a mapping of state names to states",
    ]


def test_run_with_a_bad_format_or_resume_without_db_is_refused(capsys):
    assert main(["fsm", "render", str(SEED), "--format", "svg"]) == 2
    assert main(["fsm", "run", str(SEED), "--request", "x", "--model", "openai:m",
                 "--resume", "r1"]) == 2
    assert "--resume needs the --db" in capsys.readouterr().err


def test_the_example_runs_offline(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["fsm_support_router.py"])
    runpy.run_path(str(ROOT / "examples" / "fsm_support_router.py"), run_name="__main__")
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("machine support-desk v1: 7 states")
    assert [line.split(" [")[0] for line in out[1:7]] == [
        "1. triage -> billing", "2. billing -> dispatch", "3. dispatch -> security",
        "4. security -> dispatch", "5. dispatch -> synthesize", "6. synthesize -> done"]
    assert "3. dispatch -> security [context.route == 'security'] route by supervisor" in out
    assert out[-2].startswith("completed: We checked: billing: order 1182 was charged twice")
    assert out[-1] == "checkpoints: checkpoint/2, checkpoint/4, checkpoint/6"


@pytest.mark.parametrize("name", ["support_router.yaml"])
def test_example_machines_pass_check(name, capsys):
    assert main(["fsm", "check", str(ROOT / "examples" / name)]) == 0


def test_check_prints_the_broken_corpus_at_each_mistake(capsys):
    """Each file of the corpus of broken machines (issue 20, item 8): its first expected
    problem as file:line:column, one line per problem, and the count."""
    corpus = sorted((ROOT / "tests" / "fixtures" / "fsm" / "broken").glob("*.yaml"))
    assert main(["fsm", "check", *map(str, corpus)]) == 1
    out = capsys.readouterr().out.splitlines()
    for path in corpus:
        head = path.read_text(encoding="utf-8").split("\n")
        first = re.fullmatch(r"# expect: (\d+:\d+): .*", head[0])
        count = int(re.fullmatch(r"# problems: (\d+)", head[len(
            [h for h in head if h.startswith("# expect:")])]).group(1))
        assert first is not None
        mine = [line for line in out if line.startswith(f"{path}:")]
        assert mine[0].startswith(f"{path}:{first.group(1)}: ")
        assert mine[-1] == f"{path}: {count} problem{'s' if count != 1 else ''}"
        assert len(mine) == count + 1
