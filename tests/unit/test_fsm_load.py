"""Loading a YAML state machine: seed 003's format as written, and every mistake of
issue 10 item 2 reported at load with its line (STYLE 14)."""

from __future__ import annotations

from pathlib import Path

import pytest

from foreperson.errors import ConfigurationError, MachineSpecError
from foreperson.fsm import Machine, load_spec

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "tests" / "fixtures" / "fsm" / "support_router_seed.yaml"

BASE = """\
fsm:
  name: mini
  initialState: triage
  context:
    request: { type: string }
    route:   { type: enum, values: [billing, technical, synthesize] }
    finding: { type: string }
    notes:   { type: list, of: string }
    answer:  { type: string }
  agents:
    supervisor: { canTransition: [triage, synthesize] }
    tech_agent: { canTransition: [technical] }
  states:
    triage:
      description: "Read {{ context.request }} and pick a route."
      requires:
        - { name: route, from: agent }
      transitions:
        - { toState: technical, guards: [ { backend: cel, expression: "context.route == 'technical'" } ] }
        - { toState: synthesize, guards: [ { backend: cel, expression: "context.route == 'synthesize'" } ] }
    technical:
      description: "Investigate."
      requires:
        - { name: finding, from: { agent: tech_agent } }
      exit:
        - { append: { notes: "${ 'technical: ' + context.finding }" } }
      transitions:
        - toState: synthesize
          onTransition: [ { assign: { route: "", finding: "" } } ]
    synthesize:
      description: "Answer from {{ context.notes }}."
      requires:
        - { name: answer, from: agent }
      transitions:
        - { toState: done }
    done:
      terminal: true
"""


def line_of(text: str, fragment: str) -> int:
    """1-based line of the only line holding ``fragment``."""
    hits = [i + 1 for i, line in enumerate(text.splitlines()) if fragment in line]
    assert len(hits) == 1, (fragment, hits)
    return hits[0]


def problems_of(text: str) -> list[tuple[int | None, int | None, str]]:
    with pytest.raises(MachineSpecError) as caught:
        load_spec(text, "m.yaml")
    return [(p.line, p.column, p.message) for p in caught.value.problems]


def test_the_base_machine_loads():
    spec = load_spec(BASE, "m.yaml")
    assert list(spec.states) == ["triage", "technical", "synthesize", "done"]


def test_the_seed_yaml_loads_as_written():
    machine = Machine.from_file(SEED)
    spec = machine.spec
    assert (spec.name, spec.version, spec.initial_state) == ("support-router", 1, "triage")
    assert list(spec.states) == ["triage", "billing", "technical", "security", "dispatch",
                                 "synthesize", "done"]
    assert spec.fields["route"].values == ("billing", "technical", "security", "synthesize")
    assert spec.fields["notes"].of == "string"
    assert spec.agents["supervisor"].can_transition == ("triage", "dispatch", "synthesize")
    assert [(r.field, r.agent) for r in spec.states["billing"].requires] == [
        ("finding", "billing_agent")]
    assert [(r.field, r.agent, r.named) for r in spec.states["triage"].requires] == [
        ("request", "supervisor", False), ("route", "supervisor", False)]
    assert [e.target for e in spec.states["dispatch"].transitions] == [
        "billing", "technical", "security", "synthesize"]
    exit_action = spec.states["security"].exit[0]
    assert (exit_action.kind, exit_action.field) == ("append", "notes")
    assert exit_action.expression is not None
    assert exit_action.expression.source == "'security: ' + context.finding"
    assert spec.policy.max_iterations == 12 and spec.policy.checkpoint_every == 5
    assert spec.policy.max_exchanges_per_stage == 30
    assert spec.policy.max_exchanges_per_agent_per_stage == 15
    assert spec.summary() == ("machine support-router v1: 7 states (1 terminal), 4 agents, "
                              "5 context fields, 12 edges")


# (what the mistake is, the line of BASE to change, its replacement, words of the message)
MISTAKES = [
    ("yaml syntax", "    tech_agent: { canTransition: [technical] }",
     "    tech_agent: { canTransition: [technical }", "YAML syntax error"),
    ("duplicate key", "    answer:  { type: string }",
     "    answer:  { type: string }\n    route: { type: string }", "duplicate key 'route'"),
    ("unknown target state", "        - { toState: done }",
     "        - { toState: dnoe }", "unknown target state 'dnoe' (did you mean 'done'?)"),
    ("undeclared agent", "        - { name: finding, from: { agent: tech_agent } }",
     "        - { name: finding, from: { agent: tech_agnet } }",
     "undeclared agent 'tech_agnet'"),
    ("agent may not act there", "        - { name: finding, from: { agent: tech_agent } }",
     "        - { name: finding, from: { agent: supervisor } }",
     "agent 'supervisor' may not act in state 'technical': add 'technical' to its "
     "canTransition"),
    ("enum literal not a value", "expression: \"context.route == 'technical'\"",
     "expression: \"context.route == 'tech'\"",
     "'tech' is not a value of enum field 'route' (did you mean 'technical'?); its values "
     "are: billing, technical, synthesize"),
    ("enum compared with a number (CEL says false, so the edge would never fire)",
     "expression: \"context.route == 'technical'\"", "expression: \"context.route == 3\"",
     "enum field 'route' is compared with 3 (a number), which it can never equal; its "
     "values are: billing, technical, synthesize"),
    ("guard names an undeclared field", "expression: \"context.route == 'synthesize'\"",
     "expression: \"context.rout == 'synthesize'\"",
     "no context field 'rout' (did you mean 'route'?)"),
    ("cel syntax error", "expression: \"context.route == 'synthesize'\"",
     "expression: \"context.route == 'synthesize' &&\"", "CEL syntax error"),
    ("cel type error", "expression: \"context.route == 'synthesize'\"",
     "expression: \"context.route + 1 == 'synthesize'\"", "CEL type error"),
    ("guard is not boolean", "expression: \"context.route == 'synthesize'\"",
     "expression: \"context.route\"", "a guard must be true or false"),
    ("append to a non-list", "        - { append: { notes: \"${ 'technical: ' + context.finding }\" } }",
     "        - { append: { finding: \"more\" } }", "cannot append to 'finding': it is a string"),
    ("assign a wrong value", "          onTransition: [ { assign: { route: \"\", finding: \"\" } } ]",
     "          onTransition: [ { assign: { route: \"later\", finding: \"\" } } ]",
     "route must be one of: billing, technical, synthesize; 'later' is not one of them"),
    ("assign a cel value of the wrong type", "          onTransition: [ { assign: { route: \"\", finding: \"\" } } ]",
     "          onTransition: [ { assign: { finding: \"${ size(context.notes) }\" } } ]",
     "gives int, but finding takes a string"),
    ("template names an unknown field", '      description: "Answer from {{ context.notes }}."',
     '      description: "Answer from {{ context.note }}."',
     "no context field 'note' (did you mean 'notes'?)"),
    ("unreachable state", "    done:\n", "    orphan:\n      transitions: [ { toState: done } ]\n    done:\n",
     "state 'orphan' is unreachable"),
    ("no terminal state", "      terminal: true", "      transitions: [ { toState: triage } ]",
     "no state is terminal"),
    ("dead end", "        - { toState: done }", "        []", "has no way out"),
    ("two unguarded transitions", "        - { toState: done }",
     "        - { toState: done }\n        - { toState: triage }",
     "state 'synthesize' has two unguarded transitions (to 'done', then to 'triage')"),
    ("a guarded transition behind an unguarded one", "        - { toState: done }",
     "        - { toState: done }\n        - { toState: triage, guards: [ { expression: \"true\" } ] }",
     "this transition (to 'triage') can never fire: the unguarded transition to 'done' "
     "before it always fires first"),
    ("misspelled key (XState's silent trap)",
     "        - { toState: technical, guards: [",
     "        - { toState: technical, guard: [",
     "unknown key 'guard' in a transition (did you mean 'guards'?)"),
    ("yes/no read as booleans", "    route:   { type: enum, values: [billing, technical, synthesize] }",
     "    route:   { type: enum, values: [billing, technical, synthesize, no] }",
     "'no', which YAML reads as the boolean false: put it in quotes"),
]


# problems reported at a key rather than at the changed line
AT = {"unreachable state": "    orphan:", "no terminal state": "  states:",
      "dead end": "    synthesize:"}


@pytest.mark.parametrize("what, old, new, message", MISTAKES, ids=[m[0] for m in MISTAKES])
def test_each_mistake_is_reported_at_its_line(what, old, new, message):
    assert old in BASE
    text = BASE.replace(old, new, 1)
    found = problems_of(text)
    where = AT.get(what)
    if where is None:       # the changed line (the last one, for a line added after)
        lines = new.strip("\n").splitlines()
        where = lines[-1] if what in ("duplicate key", "two unguarded transitions",
                                      "a guarded transition behind an unguarded one") \
            else lines[0]
    expected_line = line_of(text, where)
    matching = [p for p in found if message in p[2]]
    assert matching, f"{message!r} not in {found}"
    assert matching[0][0] == expected_line, (matching, expected_line)


def test_a_cel_error_points_at_its_column():
    text = BASE.replace("context.route == 'technical'", "context.route == 'tech'")
    (line, column, message), = problems_of(text)
    assert text.splitlines()[line - 1][column - 1:].startswith("'tech'")


def test_every_problem_is_reported_at_once_in_file_order():
    text = (BASE.replace("        - { toState: done }", "        - { toState: dnoe }")
                .replace("agent: tech_agent", "agent: tech_agnet")
                .replace("context.route == 'synthesize'", "context.route == 'synth'")
                .replace("  initialState: triage", "  initialState: triage\n  colour: red"))
    found = problems_of(text)
    assert len(found) == 5          # the typo'd target also leaves `done` unreachable
    assert any("state 'done' is unreachable" in p[2] for p in found)
    assert [p[0] for p in found] == sorted(p[0] for p in found)
    with pytest.raises(MachineSpecError) as caught:
        load_spec(text, "m.yaml")
    error = caught.value
    assert isinstance(error, ConfigurationError)
    assert (error.path, error.line) == ("m.yaml", found[0][0])
    assert str(error).splitlines()[0] == "5 problems in m.yaml"
    assert str(error).splitlines()[1].startswith(f"m.yaml:{found[0][0]}:")


def test_a_file_is_read_safely():
    text = "fsm: !!python/object/apply:os.system ['echo hi']\n"
    line, column, message = problems_of(text)[0]
    assert (line, column) == (1, 6)
    assert "YAML tag 'tag:yaml.org,2002:python/object/apply:os.system' is not allowed" \
        in message


def test_empty_and_shapeless_files_say_what_is_expected():
    assert "empty" in problems_of("")[0][2]
    assert "`fsm:`" in problems_of("- a\n- b\n")[0][2]


def test_guards_are_compiled_at_load():
    spec = load_spec(BASE, "m.yaml")
    guard = spec.states["triage"].transitions[0].guards[0]
    assert guard.program.execute({"context": {"route": "technical"}}) is True
    assert spec.states["triage"].reads == frozenset({"route"})
