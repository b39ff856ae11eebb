"""The type check sees what CEL will do (issue 20, item 7): four kinds of mistake that
ran whole on the samples without an error, refused at load with line and column."""

from __future__ import annotations

import pytest

from foreperson.errors import MachineSpecError
from foreperson.fsm import load_spec

MACHINE = """\
fsm:
  name: typed
  initialState: triage
  context:
    route: { type: enum, values: [billing, technical] }
    level: { type: enum, values: ["1", "2"] }
    notes: { type: list, of: string }
    request: { type: string }
    score: { type: number }
  agents:
    supervisor: { canTransition: [triage] }
  states:
    triage:
      requires: [ { name: route, from: agent } ]
      exit: [ { assign: { request: "${ ACTION }" } } ]
      transitions:
        - toState: finished
          guards: [ { expression: "GUARD" } ]
        - { toState: triage }
    finished: { terminal: true }
"""
GUARD_LINE = 18
ACTION_LINE = 15


def machine(guard: str = "context.route == 'billing'", action: str = "'x'") -> str:
    def quoted(text: str) -> str:
        return text.replace("\\", "\\\\").replace('"', '\\"')

    return MACHINE.replace("GUARD", quoted(guard)).replace("ACTION", quoted(action))


def column_of(line: int, marker: str, offset: int) -> int:
    """The 1-based column of ``offset`` in the text that replaced ``marker``."""
    return MACHINE.splitlines()[line - 1].index(marker) + 1 + offset


def only_problem(text: str) -> tuple[int | None, int | None, str]:
    with pytest.raises(MachineSpecError) as caught:
        load_spec(text, "m.yaml")
    found = [(p.line, p.column, p.message) for p in caught.value.problems]
    assert len(found) == 1, found
    return found[0]


def test_the_machine_used_here_loads():
    load_spec(machine(), "m.yaml")


@pytest.mark.parametrize("guard", [
    "context.notes == 'billing'",
    "context.route == 'billing' || context.notes != context.request",
    "context.notes == context.score",
])
def test_a_list_compared_with_a_scalar_is_refused(guard):
    line, column, message = only_problem(machine(guard))
    assert line == GUARD_LINE and column == column_of(GUARD_LINE, "GUARD",
                                                       guard.index("context.notes"))
    assert "is a list" in message and "always" in message


def test_lists_compared_with_lists_and_nulls_load():
    load_spec(machine("context.notes == [] || context.notes == ['a']"), "m.yaml")
    load_spec(machine("context.request == null || 'a' in context.notes"), "m.yaml")


@pytest.mark.parametrize("guard, part", [
    ("context.route == 'nope_never' && context.score + 'x' == 'y'", "context.score + 'x'"),
    ("context.score > 100.0 && size(context.score) > 1", "size(context.score) > 1"),
    ("true || context.request - 1 > 0", "context.request - 1 > 0"),
])
def test_a_type_error_behind_a_short_circuit_is_refused(guard, part):
    if "nope_never" in guard:       # an unknown enum value is its own mistake
        guard = guard.replace("context.route == 'nope_never'", "context.score < -1.0")
    line, column, message = only_problem(machine(guard))
    assert line == GUARD_LINE and "CEL type error in" in message
    assert column == column_of(GUARD_LINE, "GUARD", guard.index(part))


def test_a_short_circuit_over_a_data_dependent_failure_loads():
    # an index out of range depends on the data: left for run time
    load_spec(machine("size(context.notes) > 0 && context.notes[0] == 'x'"), "m.yaml")
    load_spec(machine("context.notes.exists(n, n == 'x' && size(n) > 0)"), "m.yaml")


def test_int_of_an_enum_of_words_is_refused():
    guard = "int(context.route) > 1"
    line, column, message = only_problem(machine(guard))
    assert (line, column) == (GUARD_LINE, column_of(GUARD_LINE, "GUARD", 0))
    assert "int() of enum field 'route'" in message and "billing" in message


def test_int_of_an_enum_of_numbers_loads():
    load_spec(machine("int(context.level) > 1"), "m.yaml")


@pytest.mark.parametrize("pattern", ["[", "a(?=b)", "(unclosed"])
def test_an_invalid_regex_literal_is_refused(pattern):
    guard = f"context.request.matches('{pattern}')"
    line, column, message = only_problem(machine(guard))
    assert (line, column) == (GUARD_LINE, column_of(GUARD_LINE, "GUARD",
                                                     guard.index("'")))
    assert "invalid regular expression" in message and "RE2" in message


def test_a_valid_regex_literal_loads():
    load_spec(machine("context.request.matches('^[a-z]+\\\\d{2}$')"), "m.yaml")
    load_spec(machine("context.request.matches(r'a\\+')"), "m.yaml")


def test_an_action_is_checked_part_by_part_too():
    action = "context.score > 1.0 && size(context.score) > 0 ? 'a' : 'b'"
    line, column, message = only_problem(machine(action=action))
    assert line == ACTION_LINE and "CEL type error in" in message
    assert column == column_of(ACTION_LINE, "ACTION", action.index("size"))
