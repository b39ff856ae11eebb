"""Messages that name the fix (issue 20, item 8): a corpus of broken machines, each at
the line and column of its mistake with the words that say how to fix it.

Each file of ``tests/fixtures/fsm/broken/`` starts with its expectations:

    # expect: LINE:COL: words | more words      (one line per problem, in file order)
    # problems: N                               (how many problems, folding included)
    # what the file gets wrong
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from foreperson.errors import MachineSpecError
from foreperson.fsm import load_spec

ROOT = Path(__file__).resolve().parents[2]
BROKEN = ROOT / "tests" / "fixtures" / "fsm" / "broken"
CORPUS = sorted(BROKEN.glob("*.yaml"))
SEED = ROOT / "tests" / "fixtures" / "fsm" / "support_router_seed.yaml"

_EXPECT = re.compile(r"# expect: (\d+):(\d+): (.*)")
_COUNT = re.compile(r"# problems: (\d+)")


def expectations(text: str) -> tuple[list[tuple[int, int, list[str]]], int]:
    """The ``# expect:`` lines of a corpus file and its ``# problems:`` count."""
    expected: list[tuple[int, int, list[str]]] = []
    count = None
    for line in text.split("\n"):
        if not line.startswith("#"):
            break
        found = _EXPECT.fullmatch(line)
        if found:
            words = [w.strip() for w in found.group(3).split(" | ")]
            expected.append((int(found.group(1)), int(found.group(2)), words))
        elif _COUNT.fullmatch(line):
            count = int(_COUNT.fullmatch(line).group(1))  # type: ignore[union-attr]
    assert expected and count is not None, "a corpus file starts with # expect: and # problems:"
    return expected, count


def problems_of(text: str, source: str = "m.yaml") -> list:
    with pytest.raises(MachineSpecError) as caught:
        load_spec(text, source)
    return caught.value.problems


def test_the_corpus_has_a_file_per_case():
    names = {p.stem for p in CORPUS}
    assert {"eq_for_eqeq", "enum_unquoted", "tab_indent", "agent_as_list", "control_char",
            "folded_block_field", "literal_block_unclosed", "block_guard", "exit_dedented",
            "yaml_syntax_stops", "yaml_syntax_after_mistake", "contxt_typo",
            "contxt_typo_and_more", "fsm_typo"} <= names


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_a_broken_machine_is_reported_where_it_is_wrong_with_the_fix(path):
    text = path.read_text(encoding="utf-8")
    expected, count = expectations(text)
    problems = problems_of(text, path.name)
    shown = "\n".join(str(p) for p in problems)
    assert len(problems) == count, shown
    for problem, (line, column, words) in zip(problems, expected, strict=False):
        assert (problem.line, problem.column) == (line, column), shown
        for word in words:
            assert word in problem.message, (word, shown)
        assert "\n" not in problem.message


# --- what the corpus files show, said once more in detail -----------------------------

def test_a_control_character_is_one_line_with_its_place():
    problems = problems_of("fsm:\n  name: a\x01b\n")
    assert [(p.line, p.column) for p in problems] == [(2, 10)]
    assert "U+0001" in problems[0].message and "\n" not in str(problems[0])


@pytest.mark.parametrize("text, place", [
    ("fsm:\n\tname: x\n", (2, 1)),
    ("fsm:\n  name: x\n  \tversion: 1\n", (3, 3)),
    ("fsm:\n  states:\n    - a\n\t- b\n", (4, 1)),
])
def test_a_tab_in_the_indentation_says_so(text, place):
    problems = problems_of(text)
    assert [(p.line, p.column) for p in problems] == [place]
    assert "YAML forbids tabs" in problems[0].message
    assert "indent with spaces" in problems[0].message


def test_a_single_equals_inside_a_string_is_not_taken_for_an_assignment():
    text = SEED.read_text().replace("context.route == 'billing'",
                                    "context.route == 'billing' && context.request == 'a=b' &&",
                                    1)
    message = problems_of(text)[0].message
    assert "CEL syntax error" in message and "`=` is not an operator" not in message


@pytest.mark.parametrize("guard, words", [
    ("context.route == secrity", ["quote it", "did you mean 'security'?"]),
    ("context.route in [billing, 'security']", ["'billing' is a value of enum field"]),
    ("context.request == hello", ["quote it: context.request == 'hello'"]),
    ("requst == 'x'", ["did you mean context.request?"]),
    ("request == 'x'", ["read context fields as context.request"]),
])
def test_an_unknown_name_gets_the_fix_that_fits_it(guard, words):
    text = SEED.read_text().replace("context.route == 'billing'", guard, 1)
    problems = problems_of(text)
    assert len(problems) == 1
    for word in words:
        assert word in problems[0].message
    assert "context.security" not in problems[0].message


@pytest.mark.parametrize("guard", [
    "type(context.route) == string",
    "type(context.notes) == list && type(context.request) != int",
    "type(context.finding) == type(context.request)",
])
def test_type_names_are_accepted_as_cel_accepts_them(guard):
    text = SEED.read_text().replace("context.route == 'billing'", guard, 1)
    load_spec(text, "m.yaml")


def test_contxt_on_the_seed_folds_its_29_consequences_into_one_problem():
    text = SEED.read_text().replace("  context:\n", "  contxt:\n")
    problems = problems_of(text)
    assert len(problems) == 1
    assert (problems[0].line, problems[0].column) == (6, 3)
    assert "did you mean 'context'?" in problems[0].message
    assert "and 29 problems that follow from it" in problems[0].message


def test_a_misspelled_state_key_is_one_problem():
    text = SEED.read_text().replace("      transitions:\n        - toState: dispatch\n"
                                    "          # Both", "      transitons:\n"
                                    "        - toState: dispatch\n          # Both")
    problems = problems_of(text)
    assert len(problems) == 1
    assert "unknown key 'transitons' in a state (did you mean 'transitions'?)" \
        in problems[0].message


def test_a_mistake_in_a_double_quoted_scalar_over_two_lines_is_at_its_line():
    text = SEED.read_text().replace('      description: "Answer delivered."',
                                    '      description: "Answer\n        {{ context.anser }}."')
    problems = problems_of(text)
    line = text.split("\n").index("        {{ context.anser }}.\"") + 1
    assert [(p.line, p.column) for p in problems] == [(line, 12)]


def test_a_cel_error_at_the_end_of_a_guard_points_just_past_it():
    text = SEED.read_text().replace("context.route == 'billing'", "context.route == 'billing' &&",
                                    1)
    problem = problems_of(text)[0]
    row = text.split("\n")[problem.line - 1]
    assert row[problem.column - 1:].startswith('" } ] }')


def test_a_syntax_error_in_the_last_state_of_the_seed_is_its_only_problem():
    """The states before it are checked, and nothing that needs the states after it is
    reported (no unknown target, no unreachable state)."""
    text = SEED.read_text().replace('      description: "Answer delivered."',
                                    '      description: ["Answer delivered."')
    problems = problems_of(text)
    assert len(problems) == 1, problems
    assert "YAML syntax error" in problems[0].message
    assert "checking stopped here" in problems[0].message


def test_a_syntax_error_before_the_states_stops_the_check_there():
    text = SEED.read_text().replace("    supervisor:     { canTransition: [triage, dispatch, "
                                    "synthesize] }",
                                    "    supervisor:     { canTransition: [triage, dispatch, "
                                    "synthesize }")
    text = text.replace("context.route == 'security'", "context.route == 'securty'")
    problems = problems_of(text)
    assert len(problems) == 1
    assert "checking stopped here: fix it and run again to see the rest" \
        in problems[0].message


def test_a_syntax_error_does_not_hide_a_guard_mistake_before_it():
    text = SEED.read_text().replace("context.route == 'security'", "context.route == 'securty'",
                                    1)
    text = text.replace('      description: "Answer delivered."',
                        '      description: ["Answer delivered."')
    problems = problems_of(text)
    assert len(problems) == 2
    assert "'securty' is not a value of enum field 'route'" in problems[0].message
    assert "YAML syntax error" in problems[1].message
