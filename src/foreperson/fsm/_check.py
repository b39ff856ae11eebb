"""The machine checker, and :func:`load_spec`, which runs it.

:func:`load_spec` reads the YAML (:mod:`foreperson.fsm._yaml`, every node with its line
and column); the checker walks the document, validates it piece by piece with the
pydantic models of :mod:`foreperson.fsm._spec` (so one broken state does not hide the
problems of the others), compiles and type-checks the CEL guards and actions, checks the
graph (initial state, a terminal state, reachability, dead ends, transitions that can
never fire), and builds the :class:`~foreperson.fsm.MachineSpec` the machine runs on.
Every problem is collected and reported at once, each at its line and column (STYLE 14),
in a :class:`~foreperson.errors.MachineSpecError`.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, ValidationError

from ..errors import MachineSpecError, SpecProblem
from ._cel import (
    CONTEXT,
    CelSyntaxError,
    Expression,
    LiteralComparison,
    Sample,
    Token,
    compile_expression,
    sample_contexts,
    sample_run,
    tokenize,
    type_name,
)
from ._fields import FieldSpec, Template
from ._lint import part_problems
from ._spec import (
    Action,
    AgentSpec,
    Edge,
    MachineSpec,
    Policy,
    Requirement,
    StateSpec,
    _ActionModel,
    _AgentModel,
    _FieldModel,
    _GuardModel,
    _Header,
    _PolicyModel,
    _RequirementModel,
    _StateModel,
    _TransitionModel,
)
from ._yaml import Located, Path, load_yaml_until_error, readable_prefix

__all__ = ["load_spec"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STATE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_EXPR = re.compile(r"^\$\{(.*)\}$", re.S)

_MAX_TYPOS = 20       # misspelled keys whose consequences are folded (the file is checked twice)
_FSM_KEYS = ("name", "version", "initialState", "context", "agents", "states", "policy")
_WHAT = {
    _Header: "`fsm`", _FieldModel: "a context field", _AgentModel: "an agent",
    _RequirementModel: "a requirement", _GuardModel: "a guard", _ActionModel: "an action",
    _TransitionModel: "a transition", _StateModel: "a state", _PolicyModel: "`policy`",
}
_LITERAL_KINDS = {        # the literals a field of each type can be compared with
    "enum": {"string", "null"}, "string": {"string", "null"},
    "number": {"number", "null"}, "boolean": {"bool", "null"},
}
_TYPE_WORDS = {
    "string_type": "a string", "int_type": "a whole number", "bool_type": "true or false",
    "list_type": "a list", "dict_type": "a mapping", "model_type": "a mapping",
    "int_parsing": "a whole number", "float_type": "a number",
}


def _aliases(model: type[BaseModel]) -> list[str]:
    return [f.alias or name for name, f in model.model_fields.items()]


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation) if get_origin(annotation) is not None else ():
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    current: type[BaseModel] | None = model
    for part in loc:
        if current is None:
            return None
        if isinstance(part, int):
            continue
        by_alias = {f.alias or n: f for n, f in current.model_fields.items()}
        field = by_alias.get(part)
        if field is None:
            return None
        current = _inner_model(field.annotation)
    return current


def _suggest(word: str, choices: list[str] | tuple[str, ...]) -> str:
    close = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _one_of(choices: Any) -> str:
    names = list(choices)
    return ", ".join(names) if names else "(none)"


# --- the checker --------------------------------------------------------------------------

class _Checker:
    def __init__(self, located: Located, problems: list[SpecProblem], *,
                 partial: bool = False) -> None:
        self.doc = located
        self.partial = partial
        """Only the part of a file before a YAML syntax error is checked: states after
        it are unknown, so what names a state, and the graph, are not checked."""
        self.problems = problems
        self.fields: dict[str, FieldSpec] = {}
        self.field_names: dict[str, None] = {}    # declared, valid or not, in order
        self.agents: dict[str, AgentSpec] = {}
        self.agent_names: dict[str, None] = {}
        self.state_names: list[str] = []
        self.states: dict[str, StateSpec] = {}
        self._sample_cache: list[Sample] | None = None
        self.typos: list[tuple[SpecProblem, Path, str, str]] = []
        """Misspelled keys: (their problem, the mapping's path, the key, the key meant)."""

    # helpers
    def problem(self, path: Path, message: str, *, key: bool = False,
                offset: int | None = None) -> None:
        self.problems.append(self.doc.problem(path, message, key=key, offset=offset))

    def typo(self, parent: Path, key: str, choices: list[str] | tuple[str, ...],
             mapping: Any) -> None:
        """Note the problem just recorded as misspelling ``key`` of the mapping at
        ``parent`` when one of ``choices`` is close and absent from ``mapping``, so
        that :func:`load_spec` can fold what follows from it."""
        if len(self.typos) >= _MAX_TYPOS:
            return
        close = difflib.get_close_matches(str(key), list(choices), n=1, cutoff=0.6)
        if close and isinstance(mapping, dict) and close[0] not in mapping:
            self.typos.append((self.problems[-1], parent, key, close[0]))

    def validate(self, model: type[BaseModel], data: Any, path: Path) -> Any:
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            for error in exc.errors(include_url=False):
                self._pydantic_problem(model, error, path)
            return None

    def _pydantic_problem(self, model: type[BaseModel], error: Any, path: Path) -> None:
        loc = tuple(error["loc"])
        kind = error["type"]
        where = (*path, *loc)
        parent = _model_at(model, loc[:-1]) if loc else model
        what = _WHAT.get(parent, "this mapping") if parent else "this mapping"
        key = str(loc[-1]) if loc else ""
        if len(loc) >= 2 and isinstance(loc[-1], int):
            key = f"{loc[-2]}[{loc[-1]}]"
            parent = _model_at(model, loc[:-2]) if len(loc) > 2 else model
        if kind == "extra_forbidden":
            allowed = _aliases(parent) if parent else []
            self.problem(where, f"unknown key {key!r} in {what}{_suggest(key, allowed)}; "
                                f"its keys are: {_one_of(allowed)}", key=True)
            if isinstance(loc[-1], str):
                self.typo(where[:-1], loc[-1], allowed, self._raw(where[:-1]))
        elif kind == "missing":
            self.problem((*path, *loc[:-1]), f"{what} needs {key!r}", key=True)
        elif kind in ("model_type", "dict_type") and not loc:
            self.problem(path, f"{what} must be a mapping of keys, got "
                               f"{self._got(error['input'], where)}")
        elif kind in _TYPE_WORDS:
            self.problem(where, f"{key or what} must be {_TYPE_WORDS[kind]}, got "
                                f"{self._got(error['input'], where)}")
        elif kind in ("greater_than_equal", "greater_than"):
            bound = error.get("ctx", {}).get("ge", error.get("ctx", {}).get("gt"))
            self.problem(where, f"{key} must be at least {bound}, got {error['input']!r}")
        elif kind == "literal_error":
            expected = error.get("ctx", {}).get("expected", "")
            self.problem(where, f"{key} must be {expected}, not {error['input']!r}")
        else:
            self.problem(where, f"{key or what}: {error['msg']}")

    def _raw(self, path: Path) -> Any:
        """The document's value at ``path``, or None."""
        value = self.doc.data
        for part in path:
            if isinstance(value, dict) and isinstance(part, str):
                value = value.get(part)
            elif isinstance(value, list) and isinstance(part, int) and part < len(value):
                value = value[part]
            else:
                return None
        return value

    def _got(self, value: Any, path: Path) -> str:
        scalar = self.doc.scalar(path)
        if isinstance(value, bool) and scalar is not None and scalar.style is None \
                and scalar.text.lower() not in ("true", "false"):
            return (f"{scalar.text!r}, which YAML reads as the boolean "
                    f"{str(value).lower()}: put it in quotes")
        if value is None:
            return "nothing (null)"
        if isinstance(value, dict):
            return "a mapping"
        if isinstance(value, list):
            return "a list"
        return f"{type_name(value)} {value!r}"

    # the document
    def run(self) -> MachineSpec | None:  # noqa: C901 - the checks of one spec section, each a problem with its own place
        root = self.doc.data
        if isinstance(root, dict) and "fsm" not in root:
            for key in root:
                if _suggest(key, ["fsm"]):
                    self.problem((key,), f"unknown top-level key {key!r} (did you mean "
                                         "'fsm'?); a machine file is a mapping with one key, "
                                         "`fsm:`", key=True)
                    self.typo((), key, ["fsm"], root)
                    return None
        if not isinstance(root, dict) or "fsm" not in root:
            self.problem((), "a machine file is a mapping with one key, `fsm:`, holding "
                             "name, initialState, context, agents, states and policy")
            return None
        for key in root:
            if key != "fsm":
                self.problem((key,), f"unknown top-level key {key!r}; everything goes "
                                     "under `fsm:`", key=True)
        fsm = root["fsm"]
        if not isinstance(fsm, dict):
            self.problem(("fsm",), "`fsm` must be a mapping (name, initialState, context, "
                                   "agents, states, policy)")
            return None
        for key in fsm:
            if key not in _FSM_KEYS:
                self.problem(("fsm", key), f"unknown key {key!r} in `fsm`"
                                           f"{_suggest(key, _FSM_KEYS)}; its keys are: "
                                           f"{_one_of(_FSM_KEYS)}", key=True)
                self.typo(("fsm",), key, _FSM_KEYS, fsm)
        header = self.validate(
            _Header, {k: fsm[k] for k in ("name", "version", "initialState") if k in fsm},
            ("fsm",))
        self._fields(fsm.get("context", {}))
        raw_states = fsm.get("states")
        if not isinstance(raw_states, dict) or not raw_states:
            self.problem(("fsm", "states") if "states" in fsm else ("fsm",),
                         "a machine needs `states:`, a mapping of state names to states",
                         key=True)
            raw_states = {}
        self.state_names = list(raw_states)
        for name in self.state_names:
            if not _STATE_NAME.fullmatch(name):
                self.problem(("fsm", "states", name), f"state name {name!r}: use letters, "
                             "digits, '_', '-' or '.', starting with a letter", key=True)
        self._agents(fsm.get("agents", {}))
        policy_model = self.validate(_PolicyModel, fsm.get("policy", {}) or {},
                                     ("fsm", "policy"))
        models: dict[str, _StateModel] = {}
        for name, raw in raw_states.items():
            model = self.validate(_StateModel, raw if raw is not None else {},
                                  ("fsm", "states", name))
            if model is not None:
                models[name] = model
        for name, model in models.items():
            state = self._state(name, model)
            if state is not None:
                self.states[name] = state
        if header is not None and not self.partial:
            self._graph(header.initial_state, raw_states)
        if header is None or policy_model is None or self.problems:
            return None
        canonical = json.dumps(root, sort_keys=True, ensure_ascii=False, default=str)
        return MachineSpec(
            name=header.name, version=header.version, initial_state=header.initial_state,
            fields=self.fields, agents=self.agents,
            states={n: self.states[n] for n in self.state_names},
            policy=Policy(policy_model.max_iterations, policy_model.max_exchanges_per_stage,
                          policy_model.max_exchanges_per_agent_per_stage,
                          policy_model.checkpoint_every),
            source=self.doc.source,
            digest=hashlib.sha256(canonical.encode()).hexdigest(),
        )

    def _fields(self, raw: Any) -> None:  # noqa: C901 - one check per way a context field is declared wrong
        base: Path = ("fsm", "context")
        if raw is None:
            return
        if not isinstance(raw, dict):
            self.problem(base, "`context` must be a mapping of field names to "
                               "{ type: ... }")
            return
        for name, spec in raw.items():
            path = (*base, name)
            self.field_names[name] = None
            if not _NAME.fullmatch(name):
                self.problem(path, f"field name {name!r}: CEL reads fields as "
                                   "context.NAME, so use letters, digits and '_', starting "
                                   "with a letter", key=True)
                continue
            model = self.validate(_FieldModel, spec, path)
            if model is None:
                continue
            ok = True
            if model.type == "enum":
                if not model.values:
                    self.problem(path, f"enum field {name!r} needs `values: [...]`, the "
                                       "words it may hold")
                    ok = False
                else:
                    seen: set[str] = set()
                    for i, value in enumerate(model.values):
                        if not value:
                            self.problem((*path, "values", i), "an enum value cannot be "
                                         "empty: \"\" means the field is not set")
                            ok = False
                        if value.casefold() in seen:
                            self.problem((*path, "values", i), f"enum value {value!r} is "
                                         "listed twice (values match ignoring case)")
                            ok = False
                        seen.add(value.casefold())
            elif model.values is not None:
                self.problem((*path, "values"), f"`values` goes with `type: enum`; "
                             f"{name!r} is {model.type}", key=True)
                ok = False
            if model.type == "list" and model.of is None:
                self.problem(path, f"list field {name!r} needs `of:` (string, number, "
                                   "boolean or object)")
                ok = False
            elif model.type != "list" and model.of is not None:
                self.problem((*path, "of"), f"`of` goes with `type: list`; {name!r} is "
                                            f"{model.type}", key=True)
                ok = False
            if ok:
                self.fields[name] = FieldSpec(name, model.type, tuple(model.values or ()),
                                              model.of)

    def _agents(self, raw: Any) -> None:
        base: Path = ("fsm", "agents")
        if raw is None:
            return
        if not isinstance(raw, dict):
            self.problem(base, "`agents` must be a mapping of agent names to "
                               "{ canTransition: [...] }")
            return
        for name, spec in raw.items():
            self.agent_names[name] = None
            if isinstance(spec, list):
                shown = ", ".join(str(s) for s in spec)
                self.problem((*base, name), f"agent {name!r} is written as a list; an "
                             "agent is a mapping, its states under `canTransition`: "
                             f"{name}: {{ canTransition: [{shown}] }}")
                if all(isinstance(s, str) for s in spec):    # read so, for the rest
                    self._can_transition(name, spec, (*base, name))
                    self.agents[name] = AgentSpec(name, tuple(spec), None)
                continue
            model = self.validate(_AgentModel, spec if spec is not None else {},
                                  (*base, name))
            if model is None:
                continue
            self._can_transition(name, model.can_transition, (*base, name, "canTransition"))
            self.agents[name] = AgentSpec(name, tuple(model.can_transition),
                                          model.instructions)

    def _can_transition(self, name: str, states: list[str], path: Path) -> None:
        """Check that agent ``name`` lists only states of the machine (at ``path``)."""
        for i, state in enumerate(states):
            if state not in self.state_names and not self.partial:
                self.problem((*path, i), f"agent {name!r} lists unknown state {state!r}"
                             f"{_suggest(state, self.state_names)}; the states are: "
                             f"{_one_of(self.state_names)}")

    # a state
    def _state(self, name: str, model: _StateModel) -> StateSpec | None:  # noqa: C901 - one check per way a state is declared wrong
        path: Path = ("fsm", "states", name)
        before = len(self.problems)
        template, mistakes = Template.parse(model.description)
        for text, offset in mistakes:
            self.problem((*path, "description"), text, offset=offset)
        for field in template.fields:
            if field not in self.field_names:
                self.problem((*path, "description"), f"the description shows "
                             f"{{{{ context.{field} }}}}, but there is no context field "
                             f"{field!r}{_suggest(field, list(self.field_names))}; the "
                             f"fields are: {_one_of(self.field_names)}",
                             offset=model.description.find(f"context.{field}"))
        requires = self._requires(name, model, path)
        reads: set[str] | None = set()
        exits = self._actions(model.exit, (*path, "exit"), name)
        for action in exits:
            reads = _add_reads(reads, action.expression)
        edges: list[Edge] = []
        unguarded: Edge | None = None
        for i, raw in enumerate(model.transitions):
            tpath = (*path, "transitions", i)
            t = self.validate(_TransitionModel, raw, tpath)
            if t is None:
                continue
            if t.to_state not in self.state_names and not self.partial:
                self.problem((*tpath, "toState"), f"unknown target state {t.to_state!r}"
                             f"{_suggest(t.to_state, self.state_names)}; the states are: "
                             f"{_one_of(self.state_names)}")
            guards: list[Expression] = []
            for g, raw_guard in enumerate(t.guards):
                gpath = (*tpath, "guards", g)
                guard = self.validate(_GuardModel, raw_guard, gpath)
                if guard is None:
                    continue
                compiled = self._guard(guard.expression, (*gpath, "expression"))
                if compiled is not None:
                    guards.append(compiled)
                    reads = _add_reads(reads, compiled)
            actions = self._actions(t.on_transition, (*tpath, "onTransition"), name)
            for action in actions:
                reads = _add_reads(reads, action.expression)
            edge = Edge(name, t.to_state, tuple(guards), tuple(actions), i)
            if unguarded is not None and not t.guards:
                self.problem(tpath, f"state {name!r} has two unguarded transitions (to "
                             f"{unguarded.target!r}, then to {t.to_state!r}): only the first "
                             "can ever fire; guard one of them, or remove one")
            elif unguarded is not None:
                self.problem(tpath, f"this transition (to {t.to_state!r}) can never fire: "
                             f"the unguarded transition to {unguarded.target!r} before it "
                             "always fires first; give that one a guard, or move it last")
            if not t.guards:
                unguarded = unguarded or edge
            edges.append(edge)
        if model.terminal:
            for key, what in (("transitions", model.transitions), ("requires", model.requires),
                              ("exit", model.exit)):
                if what:
                    self.problem((*path, key), f"state {name!r} is terminal (the run ends "
                                 f"there), so its `{key}` would never run: remove it, or "
                                 "drop `terminal: true`", key=True)
        elif not model.transitions:
            self.problem(path, f"state {name!r} has no way out: add `transitions:`, or "
                               "`terminal: true` if the run ends there", key=True)
        if len(self.problems) > before:
            return None
        return StateSpec(name, model.description, template, tuple(requires), tuple(exits),
                         tuple(edges), model.terminal,
                         None if reads is None else frozenset(reads))

    def _requires(self, state: str, model: _StateModel, path: Path) -> list[Requirement]:  # noqa: C901 - one check per way a requirement is declared wrong
        out: list[Requirement] = []
        seen: set[str] = set()
        for i, raw in enumerate(model.requires):
            rpath = (*path, "requires", i)
            req = self.validate(_RequirementModel, raw, rpath)
            if req is None:
                continue
            if req.name not in self.field_names:
                self.problem((*rpath, "name"), f"state {state!r} requires {req.name!r}, "
                             f"which is not a context field"
                             f"{_suggest(req.name, list(self.field_names))}; the fields "
                             f"are: {_one_of(self.field_names)}")
                continue
            if req.name in seen:
                self.problem((*rpath, "name"), f"{req.name!r} is required twice in state "
                                               f"{state!r}")
                continue
            seen.add(req.name)
            source = req.from_
            if source == "agent":
                able = [a.name for a in self.agents.values() if state in a.can_transition]
                if not able:
                    self.problem((*rpath, "from"), f"no agent may act in state {state!r} "
                                 f"to write {req.name!r}: add {state!r} to one agent's "
                                 "canTransition, or write from: {agent: NAME}")
                elif len(able) > 1:
                    self.problem((*rpath, "from"), f"`from: agent` is ambiguous in state "
                                 f"{state!r}: {', '.join(able)} may all act there; name one "
                                 "with from: {agent: NAME}")
                else:
                    out.append(Requirement(req.name, able[0], named=False))
                continue
            if not (isinstance(source, dict) and set(source) == {"agent"}
                    and isinstance(source["agent"], str)):
                self.problem((*rpath, "from"), "`from` must be `agent` (the agent that may "
                                               "act here) or {agent: NAME}")
                continue
            agent = source["agent"]
            if agent not in self.agent_names:
                self.problem((*rpath, "from", "agent"), f"undeclared agent {agent!r}"
                             f"{_suggest(agent, list(self.agent_names))}; declare it "
                             f"under `agents:` (declared: {_one_of(self.agent_names)})")
                continue
            spec = self.agents.get(agent)
            if spec is not None and state not in spec.can_transition:
                self.problem((*rpath, "from", "agent"), f"agent {agent!r} may not act in "
                             f"state {state!r}: add {state!r} to its canTransition "
                             f"(now: {_one_of(spec.can_transition)})")
                continue
            out.append(Requirement(req.name, agent, named=True))
        return out

    def _samples(self) -> list[Sample]:
        if self._sample_cache is None:
            self._sample_cache = sample_contexts(
                [{n: f.sample(v) for n, f in self.fields.items()} for v in (0, 1)])
        return self._sample_cache

    def _expression(self, source: str, path: Path, offset: int) -> Expression | None:
        """Compile, check names and fields; None when broken (problems recorded)."""
        try:
            expression = compile_expression(source)
        except CelSyntaxError as exc:
            self.problem(path, f"CEL syntax error: {exc}",
                         offset=None if exc.offset is None else exc.offset + offset)
            return None
        ok = True
        tokens = tokenize(expression.source) if expression.unknown_names else []
        where = {t.offset: k for k, t in enumerate(tokens)}
        for name, at in expression.unknown_names:
            self.problem(path, self._unknown_name(name, _compared_field(tokens, where.get(at))),
                         offset=at + offset)
            ok = False
        for use in expression.uses:
            if use.name not in self.field_names:
                self.problem(path, f"CEL: no context field {use.name!r}"
                             f"{_suggest(use.name, list(self.field_names))}; the fields "
                             f"are: {_one_of(self.field_names)}", offset=use.offset + offset)
                ok = False
        for comparison in expression.comparisons:
            wrong = self._compared_wrongly(comparison)
            if wrong:
                self.problem(path, wrong, offset=comparison.offset + offset)
                ok = False
        return expression if ok else None

    def _unknown_name(self, name: str, compared: str | None) -> str:
        """What to write instead of the unknown name ``name`` (compared with field
        ``compared``, or None): a field read as ``context.NAME``, or a word in quotes; an
        enum value is never a variable."""
        if name in self.field_names:
            return (f"CEL: unknown name {name!r}; read context fields as context.{name}")
        enums = [f for f in self.fields.values() if f.type == "enum"]
        owner = next((f for f in enums if name in f.values), None) \
            or next((f for f in enums if name.casefold() in
                     (v.casefold() for v in f.values)), None)
        if owner is None and compared is not None:
            owner = self.fields.get(compared)
        if owner is not None and owner.type == "enum":
            value = next((v for v in owner.values if v.casefold() == name.casefold()), None)
            if value is not None:
                return (f"CEL: unknown name {name!r}: {value!r} is a value of enum field "
                        f"{owner.name!r}, and a value is written in quotes: "
                        f"context.{owner.name} == {value!r}")
            return (f"CEL: unknown name {name!r}: to compare enum field {owner.name!r} "
                    f"with a word, quote it{_suggest(name, owner.values)}; its values "
                    f"are: {_one_of(owner.values)}")
        if compared is not None:
            return (f"CEL: unknown name {name!r}: to compare {compared!r} with the word, "
                    f"quote it: context.{compared} == {name!r}")
        close = difflib.get_close_matches(name, list(self.field_names), n=1, cutoff=0.6)
        if close:
            return (f"CEL: unknown name {name!r}; the only variable is `context` (did you "
                    f"mean context.{close[0]}?)")
        return (f"CEL: unknown name {name!r}; the only variable is `context`: read a "
                f"field as context.FIELD, and write a word in quotes ({name!r}); the "
                f"fields are: {_one_of(self.field_names)}")

    def _compared_wrongly(self, comparison: LiteralComparison) -> str | None:
        """What is wrong with comparing a field with a literal: an enum value that is
        not one of the field's, or a literal of another type (CEL says ``false`` for
        ``'a' == 3`` rather than an error, so such a guard would never fire)."""
        spec = self.fields.get(comparison.name)
        if spec is None or spec.type not in _LITERAL_KINDS:
            return None
        name, literal = comparison.name, comparison.literal
        if comparison.kind not in _LITERAL_KINDS[spec.type]:
            shown = repr(literal) if comparison.kind == "string" else literal
            values = (f"; its values are: {_one_of(spec.values)}" if spec.type == "enum"
                      else "")
            return (f"CEL: {spec.type} field {name!r} is compared with {shown} (a "
                    f"{comparison.kind}), which it can never equal{values}")
        if spec.type == "enum" and literal not in spec.values:
            return (f"CEL: {literal!r} is not a value of enum field {name!r}"
                    f"{_suggest(literal, spec.values)}; its values are: "
                    f"{_one_of(spec.values)}")
        return None

    def _guard(self, source: str, path: Path) -> Expression | None:
        expression = self._expression(source, path, 0)
        if expression is None or any(f not in self.fields for f in expression.fields):
            return expression
        values, error = sample_run(expression, self._samples())
        if error is not None:
            self.problem(path, error)
            return None
        if not self._parts_ok(expression, path, 0):
            return None
        wrong = next((v for v in values if not isinstance(v, bool)), None)
        if values and wrong is not None:
            self.problem(path, f"a guard must be true or false, but `{source}` gives "
                               f"{type_name(wrong)}: compare it, e.g. context.FIELD == 'x'")
            return None
        return expression

    def _parts_ok(self, expression: Expression, path: Path, offset: int) -> bool:
        """Check the parts of an expression that ran whole on the samples (see
        :mod:`foreperson.fsm._lint`); False when one is wrong (problems recorded)."""
        found = part_problems(expression.source, self._samples(), self.fields)
        for message, at in found:
            self.problem(path, message, offset=at + offset)
        return not found

    def _actions(self, raw: list[Any], path: Path, state: str) -> list[Action]:
        out: list[Action] = []
        for i, item in enumerate(raw):
            apath = (*path, i)
            model = self.validate(_ActionModel, item, apath)
            if model is None:
                continue
            given = [k for k in ("append", "assign") if getattr(model, k) is not None]
            if len(given) != 1:
                self.problem(apath, "an action is { append: {FIELD: VALUE} } or "
                                    "{ assign: {FIELD: VALUE} }: exactly one of them")
                continue
            kind: Literal["append", "assign"] = given[0]  # type: ignore[assignment]
            for field, value in getattr(model, kind).items():
                action = self._action(kind, field, value, (*apath, kind, field))
                if action is not None:
                    out.append(action)
        return out

    def _action(self, kind: Literal["append", "assign"], field: str, value: Any,  # noqa: C901 - one check per kind of action
                path: Path) -> Action | None:
        if field not in self.field_names:
            self.problem(path, f"{kind} to {field!r}, which is not a context field"
                               f"{_suggest(field, list(self.field_names))}; the fields "
                               f"are: {_one_of(self.field_names)}", key=True)
            return None
        spec = self.fields.get(field)
        if spec is None:
            return None
        if kind == "append" and spec.type != "list":
            self.problem(path, f"cannot append to {field!r}: it is a {spec.type}, and "
                               "append grows a list; use assign", key=True)
            return None
        if kind == "assign" and spec.type == "list":
            self.problem(path, f"{field!r} is a list, which only grows: use append",
                         key=True)
            return None
        expression_text = _EXPR.match(value) if isinstance(value, str) else None
        if isinstance(value, str) and expression_text is None and "${" in value:
            self.problem(path, "a CEL value is the whole text ${ EXPRESSION }, e.g. "
                               "${ 'note: ' + context.finding }")
            return None
        if expression_text is None:
            try:
                if kind == "append" and isinstance(value, list):
                    raise ValueError(f"append one item to {field!r} per action")
                coerced = (spec.coerce_items(value)[0] if kind == "append"
                           else spec.coerce(value, clear=True))
            except ValueError as exc:
                self.problem(path, f"{kind} {field}: {exc}")
                return None
            return Action(kind, field, coerced)
        source = expression_text.group(1)
        offset = 2 + (len(source) - len(source.lstrip()))
        expression = self._expression(source.strip(), path, offset)
        if expression is None:
            return None
        if all(f in self.fields for f in expression.fields):
            values, error = sample_run(expression, self._samples())
            if error is not None:
                self.problem(path, error)
                return None
            if not self._parts_ok(expression, path, offset):
                return None
            target = spec.of if kind == "append" else spec.type
            for produced in values:
                problem = _fits(target or "string", produced)
                if problem is not None:
                    self.problem(path, f"{kind} {field}: `{source.strip()}` gives "
                                       f"{type_name(produced)}, but {field} takes "
                                       f"{spec.allowed()}")
                    return None
        return Action(kind, field, None, expression)

    # the graph
    def _graph(self, initial: str, raw_states: dict[str, Any]) -> None:
        """initialState, a terminal state, reachability: read from the raw document, so a
        state with other problems still counts for these."""
        if not self.state_names:
            return
        if initial not in self.state_names:
            self.problem(("fsm", "initialState"), f"initialState {initial!r} is not a state"
                         f"{_suggest(initial, self.state_names)}; the states are: "
                         f"{_one_of(self.state_names)}")
            return
        shapes_ok = all(raw is None or isinstance(raw, dict) for raw in raw_states.values())
        if shapes_ok and not any(isinstance(raw, dict) and raw.get("terminal") is True
                                 for raw in raw_states.values()):
            self.problem(("fsm", "states"), "no state is terminal, so a run can never end: "
                                            "mark the final state `terminal: true`", key=True)
        reached = {initial}
        todo = [initial]
        while todo:
            raw = raw_states.get(todo.pop())
            transitions = raw.get("transitions") if isinstance(raw, dict) else None
            if not isinstance(transitions, list):
                transitions = []
            for t in transitions:
                target = t.get("toState") if isinstance(t, dict) else None
                if isinstance(target, str) and target in raw_states and target not in reached:
                    reached.add(target)
                    todo.append(target)
        for name in self.state_names:
            if name not in reached:
                self.problem(("fsm", "states", name), f"state {name!r} is unreachable: no "
                             f"transition from {initial!r} leads to it; add one, or remove "
                             "the state", key=True)


def _compared_field(tokens: list[Token], k: int | None) -> str | None:
    """The field ``F`` when the name at token ``k`` is compared with it:
    ``context.F == NAME``, ``NAME != context.F`` or ``context.F in [..., NAME]``."""
    if k is None:
        return None
    texts = [t.text for t in tokens]
    if k >= 4 and texts[k - 1] in ("==", "!=") and texts[k - 4:k - 2] == [CONTEXT, "."]:
        return texts[k - 2]
    if k + 4 < len(texts) and texts[k + 1] in ("==", "!=") \
            and texts[k + 2:k + 4] == [CONTEXT, "."]:
        return texts[k + 4]
    j = k
    while j > 0 and k - j < 64 and texts[j - 1] not in ("[", "]", "(", ")"):
        j -= 1
    if j >= 5 and texts[j - 1] == "[" and texts[j - 2] == "in" \
            and texts[j - 5:j - 3] == [CONTEXT, "."]:
        return texts[j - 3]
    return None


def _add_reads(reads: set[str] | None, expression: Expression | None) -> set[str] | None:
    if reads is None or expression is None:
        return reads
    if expression.whole_context:
        return None
    reads.update(expression.fields)
    return reads


_SECTIONS = ("name", "initialState", "context", "agents", "states")


def _checked_before(text: str, source: str, stopped: int) -> list[SpecProblem]:
    """The problems of the states before a YAML syntax error (issue 20, item 8: a
    syntax error no longer hides the mistakes before it), or none.

    Only when the error is inside ``states:`` and every section a state refers to
    (``context``, ``agents``) comes before it, as in seed 003: then the states before
    the one the error is in are checked whole, except what needs the states after it
    (target states, the graph). The state the error is in is not reported on.
    """
    located = readable_prefix(text, source, stopped)
    if located is None:
        return []
    fsm = located.data.get("fsm") if isinstance(located.data, dict) else None
    if not isinstance(fsm, dict) or list(fsm)[-1:] != ["states"] \
            or not all(k in fsm for k in _SECTIONS) or not isinstance(fsm["states"], dict) \
            or not fsm["states"]:
        return []
    last = located.mark(("fsm", "states", list(fsm["states"])[-1]), key=True)
    if last is None:
        return []
    checker = _Checker(located, [], partial=True)
    checker.run()
    return [p for p in checker.problems if p.line is not None and p.line < last.line]


def _fold_typos(checker: _Checker, problems: list[SpecProblem],
                read: set[tuple[int | None, int | None]],
                found: list[SpecProblem]) -> list[SpecProblem]:
    """``found`` with the problems that follow only from misspelled keys folded into the
    first misspelling's problem (issue 20, item 8: ``contxt:`` for ``context:`` gave 29
    problems after the right one).

    The document is checked again as if every misspelled key were spelled as suggested;
    a problem of the first check that the second does not have follows from a
    misspelling, and is counted, not shown. The second check's own problems (those
    that remain once the keys are fixed) are reported.
    """
    renames = [(parent, key, meant) for _, parent, key, meant in checker.typos]
    again = _Checker(checker.doc.renamed(renames), list(problems))
    again.run()
    typo_problems = [t[0] for t in checker.typos]
    remaining = [p for p in again.problems[len(problems):] if (p.line, p.column) not in read]
    kept = {(p.line, p.column, p.message) for p in remaining}
    folded = [p for p in found if p not in typo_problems and p not in problems
              and (p.line, p.column, p.message) not in kept]
    shown = [p for p in typo_problems if (p.line, p.column, p.message) not in kept]
    if not shown:                   # every misspelling is still one after the renames
        return [*problems, *remaining]
    first, *others = shown
    count = len(folded)
    if count:
        these = "it" if not others else "these misspelled keys"
        first = SpecProblem(first.path, first.line, first.column, (
            f"{first.message}; and {count} problem{'s' if count != 1 else ''} that "
            f"follow{'s' if count == 1 else ''} from {these} (not shown: fix the key and "
            "run again)"))
    return [*problems, first, *others, *remaining]


def _fits(kind: str, value: Any) -> str | None:
    if value is None:
        return None
    ok = {
        "string": isinstance(value, str), "enum": isinstance(value, str),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "boolean": isinstance(value, bool), "object": isinstance(value, dict),
    }.get(kind, True)
    return None if ok else kind


def load_spec(text: str, source: str = "<string>") -> MachineSpec:
    """Read and check a machine written in seed 003's YAML format.

    Every problem of the text is reported at once: YAML syntax, duplicate keys, unknown
    keys, unknown target states, undeclared agents and fields, requirements from an
    agent that may not act in the state, enum literals a guard compares with that are
    not values of the field, CEL syntax and type errors, actions that append to a
    non-list or assign a value of the wrong type, templates naming unknown fields,
    unreachable states, no terminal state, dead ends, and transitions that can never
    fire behind an unguarded one. Guards are compiled here, once.

    Args:
        text: the YAML.
        source: the name to report problems with (a file path).

    Returns:
        The checked spec.

    Raises:
        MachineSpecError: anything is wrong; ``problems`` lists it all, each with its
            line and column.
        MissingDependency: PyYAML or common-expression-language is not installed.
    """
    located, problems, stopped = load_yaml_until_error(text, source)
    if located is None:
        before = [] if stopped is None else _checked_before(text, source, stopped)
        raise MachineSpecError([*before, *problems])
    read = {(p.line, p.column) for p in problems}   # a value YAML could not give
    checker = _Checker(located, list(problems))
    spec = checker.run()
    if checker.problems or spec is None:
        found = problems + [p for p in checker.problems[len(problems):]
                            if (p.line, p.column) not in read]     # not its consequences
        if checker.typos:
            found = _fold_typos(checker, problems, read, found)
        ordered = sorted(found,
                         key=lambda p: (p.line is None, p.line or 0, p.column or 0))
        raise MachineSpecError(ordered or [SpecProblem(source, None, None, "invalid machine")])
    return spec
