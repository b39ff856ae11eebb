"""A machine loader that cannot be crashed or hung (issue 20, item 6): each input that
used to raise ``RecursionError``, a Rust panic, or run for seconds ends in a
``MachineSpecError`` naming the bound, at its line and column."""

from __future__ import annotations

import pytest

from foreperson.errors import MachineSpecError
from foreperson.fsm import load_spec
from foreperson.fsm._cel import (
    MAX_EVALUATION_STEPS,
    MAX_EXPRESSION_CHARS,
    MAX_EXPRESSION_NESTING,
    CelSyntaxError,
    compile_expression,
)
from foreperson.fsm._fields import Template
from foreperson.fsm._yaml import MAX_YAML_DEPTH

MACHINE = """\
fsm:
  name: mini
  initialState: triage
  context:
    route: { type: enum, values: [technical, done] }
    notes: { type: list, of: string }
  agents:
    supervisor: { canTransition: [triage] }
  states:
    triage:
      description: "Pick a route."
      requires: [ { name: route, from: agent } ]
      transitions:
        - toState: finished
          guards: [ { expression: "GUARD" } ]
        - { toState: triage }
    finished: { terminal: true }
"""
GUARD_LINE = 15


def machine(guard: str = "context.route == 'done'") -> str:
    """The machine with ``guard`` on its first transition (double quotes escaped)."""
    return MACHINE.replace("GUARD", guard.replace("\\", "\\\\").replace('"', '\\"'))


def problems(text: str) -> list[tuple[int | None, int | None, str]]:
    with pytest.raises(MachineSpecError) as caught:
        load_spec(text, "m.yaml")
    return [(p.line, p.column, p.message) for p in caught.value.problems]


def only_problem(text: str) -> tuple[int | None, int | None, str]:
    found = problems(text)
    assert len(found) == 1, found
    return found[0]


def numbers(n: int) -> str:
    return "[" + ", ".join(str(i) for i in range(n)) + "]"


def test_the_machine_used_here_loads():
    assert list(load_spec(machine(), "m.yaml").states) == ["triage", "finished"]


# --- YAML -----------------------------------------------------------------------------

@pytest.mark.parametrize("text, line, column", [
    ("a: &x [*x]\n", 1, 8),
    ("a: &x {b: [1, *x]}\n", 1, 15),
    ("fsm:\n  name: &n\n    - x\n    - *n\n", 4, 7),
])
def test_a_recursive_alias_is_refused_by_name(text, line, column):
    assert only_problem(text)[:2] == (line, column)
    assert "recursive alias *" in only_problem(text)[2]


@pytest.mark.parametrize("text", [
    "[" * 2000 + "]" * 2000,
    "[" * 100_000,                                   # libyaml's composer used to segfault
    "{a: " * 3000 + "1" + "}" * 3000,
    "- " * 3000 + "x",
    "".join("  " * i + "a:\n" for i in range(600)) + "  " * 600 + "b\n",
    "fsm:\n  name: " + "[" * 500 + "]" * 500 + "\n",
])
def test_yaml_nested_too_deep_is_refused_with_the_bound(text):
    line, column, message = only_problem(text)
    assert line is not None and column is not None
    assert f"more than {MAX_YAML_DEPTH} levels" in message and "MAX_YAML_DEPTH" in message


def test_aliases_that_nest_past_the_bound_are_refused():
    deep = "[" * 40 + "]" * 40
    text = f"a: &a {deep}\nb: &b [[[[[[[[[[[[[[[[[[[[[[[[[[[[*a]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n" \
           "c: [*b, *b]\n"
    found = [m for _, _, m in problems(text) if "aliases expanded" in m]
    assert len(found) == 1 and "MAX_YAML_DEPTH" in found[0]


def test_an_integer_too_long_to_read_is_a_problem_not_a_crash():
    text = machine().replace("name: mini", "name: mini\n  version: " + "9" * 5000)
    line, column, message = only_problem(text)
    assert (line, column) == (3, 12) and "cannot be read" in message
    assert "64 bits" in only_problem(machine().replace("name: mini", "name: mini\n  version: "
                                                        + "1" + "0" * 30))[2]


# --- CEL -------------------------------------------------------------------------------

def test_an_overlong_expression_is_refused_before_the_library_parses_it():
    # past column ~65,535 the library's own error formatting panics (a BaseException)
    long_guard = "context.route == 'done' && " + "x" * 70_000 + " +"
    line, column, message = only_problem(machine(long_guard))
    assert line == GUARD_LINE and column is not None
    assert f"more than {MAX_EXPRESSION_CHARS:,}" in message
    assert "MAX_EXPRESSION_CHARS" in message


def test_a_sum_of_thousands_of_terms_is_refused_rather_than_overflowing_the_stack():
    # 20,000 chained '+' made the library's evaluator segfault
    with pytest.raises(CelSyntaxError, match="MAX_EXPRESSION_CHARS"):
        compile_expression("1" + " + 1" * 20_000)


@pytest.mark.parametrize("depth", [MAX_EXPRESSION_NESTING + 1, 100, 65_600 // 2])
def test_deep_parentheses_are_refused_with_the_bound(depth):
    guard = "(" * depth + "context.route == 'done'" + ")" * depth
    if len(guard) > MAX_EXPRESSION_CHARS:
        guard = guard[:MAX_EXPRESSION_CHARS]
    line, column, message = only_problem(machine(guard))
    assert line == GUARD_LINE
    assert "MAX_EXPRESSION_NESTING" in message or "MAX_EXPRESSION_CHARS" in message


def test_nesting_within_the_bound_loads():
    depth = MAX_EXPRESSION_NESTING - 1
    load_spec(machine("(" * depth + "context.route == 'done'" + ")" * depth), "m.yaml")


def test_deep_parentheses_name_the_column_of_the_first_bracket_too_deep():
    guard = "(" * (MAX_EXPRESSION_NESTING + 5) + "true" + ")" * (MAX_EXPRESSION_NESTING + 5)
    line, column, message = only_problem(machine(guard))
    start = MACHINE.splitlines()[GUARD_LINE - 1].index("GUARD") + 1
    assert (line, column) == (GUARD_LINE, start + MAX_EXPRESSION_NESTING)
    assert f"more than {MAX_EXPRESSION_NESTING} levels" in message


def test_a_library_panic_becomes_a_syntax_error():
    class PanicException(BaseException):
        pass

    PanicException.__module__ = "pyo3_runtime"

    class Panicking:
        @staticmethod
        def compile(source: str) -> None:
            raise PanicException("Formatting argument out of range")

    import sys

    real = sys.modules["cel"]
    sys.modules["cel"] = Panicking   # type: ignore[assignment]
    try:
        with pytest.raises(CelSyntaxError, match="the CEL library failed"):
            compile_expression("1 + 1")
    finally:
        sys.modules["cel"] = real


def test_keyboard_interrupt_is_not_swallowed_as_a_panic():
    class Interrupting:
        @staticmethod
        def compile(source: str) -> None:
            raise KeyboardInterrupt

    import sys

    real = sys.modules["cel"]
    sys.modules["cel"] = Interrupting   # type: ignore[assignment]
    try:
        with pytest.raises(KeyboardInterrupt):
            compile_expression("1 + 1")
    finally:
        sys.modules["cel"] = real


# --- the evaluation budget ---------------------------------------------------------------

FIVE_DEEP = (f"{numbers(50)}.all(a, {numbers(50)}.all(b, {numbers(50)}.all(c, "
             f"{numbers(50)}.all(d, {numbers(50)}.exists(e, a + b + c + d + e < 0)))))")


def test_five_nested_comprehensions_over_fifty_items_are_refused_at_load():
    # this guard ran past 60 s in the load-time type check before it had a budget
    line, column, message = only_problem(machine(FIVE_DEEP))
    assert line == GUARD_LINE and column is not None
    assert f"budget of {MAX_EVALUATION_STEPS:,}" in message
    assert "MAX_EVALUATION_STEPS" in message


def test_the_estimate_multiplies_the_sizes_of_nested_comprehensions():
    one = compile_expression(f"{numbers(50)}.all(a, a >= 0)")
    two = compile_expression(f"{numbers(50)}.all(a, {numbers(50)}.all(b, a + b >= 0))")
    assert 50 <= one.cost({}) < 500
    assert 50 * 50 <= two.cost({}) < 50 * 1000   # the inner literal, 50 times
    assert compile_expression(FIVE_DEEP).cost({}) > MAX_EVALUATION_STEPS


def test_the_estimate_reads_the_size_of_fields_and_of_comprehension_results():
    nested = compile_expression("context.notes.all(a, context.notes.exists(b, a == b))")
    assert nested.cost({"notes": []}) < 50
    assert nested.cost({"notes": ["x"] * 100}) >= 100 * 100
    chained = compile_expression(f"{numbers(40)}.map(x, x * 2).all(y, y >= 0)")
    assert chained.cost({}) >= 2 * 40
    # a bound variable walked: as large as the largest list the data or literals hold
    inner = compile_expression("context.notes.all(a, [a, a].exists(b, b == a))")
    assert inner.plan is not None and inner.cost({"notes": ["x"] * 10}) >= 10 * 2


def test_an_expression_without_comprehensions_is_never_over_budget():
    plain = compile_expression("context.route == 'done' && size(context.notes) > 2")
    assert plain.plan is None
    assert plain.over_budget({"notes": ["x"] * 10_000_000}) is None


def test_a_two_deep_comprehension_within_budget_loads():
    guard = f"{numbers(50)}.all(a, {numbers(50)}.exists(b, a + b >= 0))"
    load_spec(machine(guard), "m.yaml")


# --- templates ---------------------------------------------------------------------------

def test_an_unclosed_template_is_reported_at_its_column():
    text = MACHINE.replace('"Pick a route."', '"Pick {{ context.route"').replace(
        "GUARD", "context.route == 'done'")
    line, column, message = only_problem(text)
    description = text.splitlines()[10]
    assert (line, column) == (11, description.index("{{") + 1)
    assert "never closed" in message and "}}" in message


def test_sixty_kilobytes_of_open_braces_are_scanned_once():
    text = "{{" * 30_000
    calls = 0
    real_find = str.find

    class Counting(str):
        def find(self, *args):      # type: ignore[override]
            nonlocal calls
            calls += 1
            return real_find(self, *args)

    template, mistakes = Template.parse(Counting(text))
    assert calls <= 3                      # a quadratic scan restarted at every '{{'
    assert len(mistakes) == 1 and mistakes[0][1] == 0
    assert template.parts == (text,)       # the unclosed rest is kept as written


def test_sixty_kilobytes_of_open_braces_in_a_description_load_as_one_problem():
    text = MACHINE.replace('"Pick a route."', '"' + "{{" * 30_000 + '"').replace(
        "GUARD", "context.route == 'done'")
    (line, column, message), = problems(text)
    assert (line, column) == (11, 21) and "never closed" in message


def test_templates_still_pair_each_open_with_the_first_close():
    template, mistakes = Template.parse("a {{ context.x }} b {{ y }} {{{ context.z }}}")
    assert template.fields == ["x"]
    assert [m[1] for m in mistakes] == [20, 28]
    assert template.render({"x": "1"}) == "a 1 b {{ y }} {{{ context.z }}}"
