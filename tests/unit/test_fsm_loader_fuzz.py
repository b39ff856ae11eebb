"""Property: whatever is done to a valid machine file, loading it ends in success or a
``MachineSpecError``, within a time bound (issue 20, item 6). The mutations are the
ones that crashed or hung the loader: deleted, duplicated and inserted characters,
swapped lines, unclosed ``{{``, anchors and aliases, deep brackets, random unicode,
random CEL fragments in guards and actions."""

from __future__ import annotations

import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foreperson.errors import MachineSpecError
from foreperson.fsm import load_spec

ROOT = Path(__file__).resolve().parents[2]
SEED = (ROOT / "tests" / "fixtures" / "fsm" / "support_router_seed.yaml").read_text()
ROUTER = (ROOT / "examples" / "support_router.yaml").read_text()
BASES = [SEED, ROUTER]

LOAD_BOUND_S = 2.0
"""The longest one load may take (the loads here take milliseconds)."""

FRAGMENTS = [
    "{{", "}}", "{{ context.", "&a ", "*a", "&a [*a]", "&b {x: *b}", "[" * 70, "{" * 70,
    "- " * 70, "[" * 3000, "\n", "\t", "  ", ": ", "- ", "#", "'", '"', "|", ">-", "!!str ",
    "!!python/object ", "<<: ", "${ ", " }", "\x07", "\x00", "\ufeff", "\u2028", "\ud7ff",
    "9" * 5000, "0x" + "f" * 40, "1e999", "~", "no", ".inf",
    "context.", "context.route", "context.notes", "(", ")", "[", "]", ",", "&&", "||", "!",
    "==", "=", ".all(x, ", ".exists(x, ", ".map(x, x)", "size(", "int(", "string(",
    "[1, 2, 3]", ".matches('[')", "'billing'", "1 + ", "x" * 70_000, "(" * 200,
]

CEL_PARTS = st.lists(st.sampled_from([
    "context.route", "context.notes", "context.finding", "context.request", "'billing'",
    "'x'", "1", "2.0", "true", "null", "==", "!=", "<", "+", "&&", "||", "!", "(", ")",
    "[", "]", ",", "in", "size(", "int(", ".all(x, ", ".exists(y, ", ".map(z, z)", "x", "y",
    ".matches('a+')", ".contains('a')", "? 1 : 2", "[1, 2, 3]", "{'a': 1}", "[0]",
]), max_size=25).map(" ".join)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    """A base machine with a few random mutations applied."""
    text = draw(st.sampled_from(BASES))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["delete", "duplicate", "insert", "unicode", "swap",
                                     "cel"]))
        at = draw(st.integers(0, len(text)))
        if kind == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 40)):]
        elif kind == "duplicate":
            text = text[:at] + text[at:at + draw(st.integers(1, 200))] + text[at:]
        elif kind == "insert":
            text = text[:at] + draw(st.sampled_from(FRAGMENTS)) + text[at:]
        elif kind == "unicode":
            text = text[:at] + draw(st.text(max_size=8)) + text[at:]
        elif kind == "swap":
            lines = text.split("\n")
            i = draw(st.integers(0, len(lines) - 1))
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines)
        else:
            text = _replace_a_guard(text, draw(CEL_PARTS), draw(st.integers(0, 20)))
    return text


def _replace_a_guard(text: str, cel: str, which: int) -> str:
    """``text`` with its ``which``-th ``expression: "..."`` (cycling) set to ``cel``."""
    marker = 'expression: "'
    starts = []
    position = text.find(marker)
    while position >= 0:
        starts.append(position + len(marker))
        position = text.find(marker, position + 1)
    if not starts:
        return text
    start = starts[which % len(starts)]
    end = text.find('"', start)
    escaped = cel.replace("\\", "\\\\").replace('"', '\\"')
    return text[:start] + escaped + text[end if end >= 0 else start:]


def load(text: str) -> float:
    """Load ``text``: the seconds it took; anything but a ``MachineSpecError`` fails."""
    started = time.monotonic()
    try:
        load_spec(text, "fuzz.yaml")
    except MachineSpecError as exc:
        assert exc.problems
        for problem in exc.problems:
            assert problem.message
    return time.monotonic() - started


def test_the_bases_load():
    for text in BASES:
        load_spec(text, "base.yaml")


@settings(max_examples=250, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated())
def test_a_mutated_machine_loads_or_is_refused_quickly(text):
    assert load(text) < LOAD_BOUND_S


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(CEL_PARTS, st.integers(0, 20))
def test_any_guard_loads_or_is_refused_quickly(cel, which):
    assert load(_replace_a_guard(SEED, cel, which)) < LOAD_BOUND_S


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 6), st.integers(1, 60), st.sampled_from(["all", "exists", "map"]))
def test_nested_comprehensions_load_or_are_refused_quickly(depth, items, macro):
    literal = "[" + ", ".join(str(i) for i in range(items)) + "]"
    guard = "true"
    for level in reversed(range(depth)):
        guard = f"{literal}.{macro}(v{level}, {guard})"
    if macro == "map":
        guard = f"size({guard}) > 0"
    assert load(_replace_a_guard(SEED, guard, 0)) < LOAD_BOUND_S


ATOMS = st.sampled_from([
    "context.route", "context.notes", "context.finding", "context.request", "'billing'",
    "'technical'", "1", "2.0", "true", "false", "null", "[1, 2]", "['a']", "{'a': 1}",
    "size(context.notes)", "int(context.route)", "context.request.matches('[')",
    "context.request.matches('^a+$')", "context.notes.exists(n, n == 'x')",
])


def _combine(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    binary = st.tuples(children, st.sampled_from(["&&", "||", "==", "!=", "<", "+", "in"]),
                       children).map(" ".join)
    return st.one_of(binary, children.map(lambda c: f"({c})"), children.map(lambda c: f"!{c}"),
                     st.tuples(children, children, children).map(
                         lambda t: f"{t[0]} ? {t[1]} : {t[2]}"),
                     children.map(lambda c: f"[1, 2].all(v, {c})"))


WELL_FORMED = st.recursive(ATOMS, _combine, max_leaves=12)


@settings(max_examples=200, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(WELL_FORMED, st.integers(0, 20))
def test_any_well_formed_guard_loads_or_is_refused_quickly(cel, which):
    assert load(_replace_a_guard(SEED, cel, which)) < LOAD_BOUND_S
