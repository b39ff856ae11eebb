"""CEL expressions: compiled once at load, analysed for the fields they read, evaluated
on a view of the context built once per step.

The library is ``common-expression-language`` (``import cel``, Rust-backed;
DEPENDENCIES.md). It parses but does not type-check, so the loader checks types by
running each expression on typed sample contexts (see :func:`sample_problems`), and
finds the fields and enum literals an expression uses with the small tokenizer below.
Its errors (``ValueError``, ``KeyError``, ``TypeError``, ``RuntimeError``, ...) are
wrapped in :class:`GuardError` at run time. Never Python ``eval``.

Nothing written in a machine can crash or hang the library (issue 20):

* an expression longer than :data:`MAX_EXPRESSION_CHARS` or nesting brackets deeper than
  :data:`MAX_EXPRESSION_NESTING` is refused before the library sees it (its parser
  panics on an error past column 65,535, and its evaluator overflows the stack on a few
  thousand chained operators); a Rust panic (``pyo3_runtime.PanicException``, which
  derives from ``BaseException``) is caught as a backstop, and nothing else that is not
  an ``Exception``;
* the library has no step limit, so every evaluation is given a budget of
  :data:`MAX_EVALUATION_STEPS` estimated steps (see :meth:`Expression.cost`): each
  comprehension (``all``, ``exists``, ``exists_one``, ``map``, ``filter``) multiplies
  the cost of its body by the size of the list it walks, known from a list literal or
  from the data. An expression over budget on the load-time samples is refused at load;
  one over budget on a run's data is a :class:`GuardError` there, raised before the
  library runs it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import GuardError

__all__ = [
    "MAX_EVALUATION_STEPS",
    "MAX_EXPRESSION_CHARS",
    "MAX_EXPRESSION_NESTING",
    "CelSyntaxError",
    "Expression",
    "Sample",
    "compile_expression",
    "sample_contexts",
    "sample_run",
    "tokenize",
]

CONTEXT = "context"
"""The one variable an expression sees: ``context.FIELD``."""

_MACROS = {"all", "exists", "exists_one", "map", "filter"}
TYPE_NAMES = frozenset({"int", "uint", "double", "bool", "string", "bytes", "list", "map",
                        "null_type", "type"})
"""CEL's names of types (``type(context.route) == string``): the library lists them as
variables, but they are defined."""

MAX_EXPRESSION_CHARS = 4_000
"""The longest CEL expression a machine may hold (a guard or a ``${ ... }`` value), in
characters. The library's parser panics on a syntax error past column 65,535 and its
evaluator overflows the stack on ~20,000 chained operators; seed 003's guards are under
100 characters."""

MAX_EXPRESSION_NESTING = 32
"""How deep brackets (``(``, ``[``, ``{``) may nest in a CEL expression (the library
refuses 96 levels with a message that does not say so)."""

MAX_EVALUATION_STEPS = 1_000_000
"""The budget of one evaluation of a CEL expression, in estimated steps (about a tenth
of a second of the library's work): see :meth:`Expression.cost`."""

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<string>[rRbB]{0,2}(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"
                          |'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"))
  | (?P<number>(?:0x[0-9a-fA-F]+|\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)[uU]?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>==|!=|<=|>=|&&|\|\||[-+*/%<>!?:.,()\[\]{}])
""", re.VERBOSE)


@dataclass(frozen=True)
class Token:
    """One lexical token of a CEL expression.

    Attributes:
        kind: ``"string"``, ``"number"``, ``"ident"``, ``"op"`` or ``"other"``.
        text: the token as written.
        offset: 0-based position in the expression.
    """

    kind: str
    text: str
    offset: int

    @property
    def literal(self) -> tuple[str, str] | None:
        """``(kind, value)`` for a literal (see :class:`LiteralComparison`); else None."""
        if self.kind == "number":
            return "number", self.text
        if self.kind == "ident" and self.text in ("true", "false"):
            return "bool", self.text
        if self.kind == "ident" and self.text == "null":
            return "null", self.text
        value = self.string_value
        return None if value is None else ("string", value)

    @property
    def string_value(self) -> str | None:
        """The text of a plain (not raw, not bytes) string literal, unescaped; else None."""
        if self.kind != "string" or self.text[0] in "rRbB":
            return None
        quote = 3 if self.text[:3] in ("'''", '"""') else 1
        body = self.text[quote:-quote]
        return re.sub(r"\\(.)", r"\1", body)


def tokenize(source: str) -> list[Token]:
    """Split a CEL expression into tokens (whitespace dropped; an unknown character is
    an ``"other"`` token, left for the CEL parser to report)."""
    tokens: list[Token] = []
    position = 0
    while position < len(source):
        match = _TOKEN.match(source, position)
        if match is None:
            tokens.append(Token("other", source[position], position))
            position += 1
            continue
        kind = match.lastgroup or "other"
        if kind != "space":
            tokens.append(Token(kind, match.group(), position))
        position = match.end()
    return tokens


@dataclass(frozen=True)
class FieldUse:
    """``context.NAME`` in an expression.

    Attributes:
        name: the field.
        offset: 0-based position of ``NAME`` in the expression.
    """

    name: str
    offset: int


@dataclass(frozen=True)
class LiteralComparison:
    """A field compared with a literal: ``context.F == 'x'``, ``!=``, or
    ``context.F in ['x', 3]``.

    Attributes:
        name: the field.
        literal: the string compared with (unescaped), or a number, ``true``, ``false``
            or ``null`` as written.
        offset: 0-based position of the literal in the expression.
        kind: ``"string"``, ``"number"``, ``"bool"`` or ``"null"``.
    """

    name: str
    literal: str
    offset: int
    kind: str = "string"


@dataclass(frozen=True, eq=False)
class Expression:
    """A compiled CEL expression and what it reads.

    Attributes:
        source: the expression as written.
        program: the compiled ``cel.Program``.
        fields: the context fields it reads (``context.NAME``), in order of first use.
        uses: each ``context.NAME`` with its position.
        whole_context: True when it uses ``context`` other than as ``context.NAME``
            (``size(context)``, ``context['x']``): it is then given every field.
        comparisons: the string literals it compares fields with.
        unknown_names: variables other than ``context`` (each a mistake), with positions.
        plan: its comprehensions, for :meth:`cost`; None when it has none (its cost is
            then its length, always within budget).
    """

    source: str
    program: Any
    fields: tuple[str, ...]
    uses: tuple[FieldUse, ...]
    whole_context: bool
    comparisons: tuple[LiteralComparison, ...]
    unknown_names: tuple[tuple[str, int], ...]
    plan: _Plan | None = None

    def cost(self, context: Mapping[str, Any]) -> int:
        """The estimated steps of one evaluation on ``context``.

        Every token costs one step (a string literal one per character: a regex is
        compiled on every call), times the size of each comprehension it sits in; a
        context field read inside a comprehension costs the size of its value too
        (``x in context.notes``, ``context.text.contains(x)``). A comprehension walks a
        list literal's items, a field's value, an outer comprehension's result (as long
        as the list that one walked), or anything else (a bound variable, a function's
        result): then the largest list or map in the data it reads plus every list
        literal's items, a bound on what the expression can build.

        Args:
            context: the field values (the run's context, or a sample).

        Returns:
            The estimate; past :data:`MAX_EVALUATION_STEPS` it may stop counting.
        """
        if self.plan is None:
            return len(self.source)
        return self.plan.cost(context, self.fields, self.whole_context)

    def over_budget(self, context: Mapping[str, Any]) -> int | None:
        """The estimated cost on ``context`` when it exceeds
        :data:`MAX_EVALUATION_STEPS`, else None (always None without comprehensions)."""
        if self.plan is None:
            return None
        cost = self.cost(context)
        return cost if cost > MAX_EVALUATION_STEPS else None

    def evaluate(self, activation: Any, *, state: str,
                 context: Mapping[str, Any] | None = None) -> Any:
        """Run the expression.

        Args:
            activation: a ``cel.Context`` or a dict ``{"context": {...}}``.
            state: the state it belongs to, for the error.
            context: the field values ``activation`` was made of; when given, an
                expression whose :meth:`cost` on them exceeds
                :data:`MAX_EVALUATION_STEPS` is not run.

        Returns:
            The value, as Python (bool, int, float, str, list, dict, None).

        Raises:
            GuardError: CEL failed (its message is kept), or the evaluation would exceed
                its budget.
        """
        if context is not None and self.plan is not None:
            cost = self.over_budget(context)
            if cost is not None:
                raise GuardError(
                    f"state {state!r}: CEL `{_clip(self.source)}` would take about "
                    f"{cost:,} steps on this run's data, more than the budget of "
                    f"{MAX_EVALUATION_STEPS:,} (MAX_EVALUATION_STEPS): its comprehensions "
                    "walk lists that grew too long; walk fewer lists, or nest less",
                    expression=self.source, state=state)
        try:
            return self.program.execute(activation)
        except BaseException as exc:
            if not isinstance(exc, Exception) and not is_panic(exc):
                raise
            raise GuardError(
                f"state {state!r}: CEL `{_clip(self.source)}` failed: "
                f"{type(exc).__name__}: {exc}", expression=self.source, state=state) from exc


def is_panic(exc: BaseException) -> bool:
    """Whether ``exc`` is a Rust panic surfaced by PyO3 (``pyo3_runtime.PanicException``,
    a ``BaseException``; the class is not importable, so it is known by name)."""
    kind = type(exc)
    return kind.__name__ == "PanicException" and kind.__module__ == "pyo3_runtime"


def _clip(source: str, limit: int = 200) -> str:
    return source if len(source) <= limit else source[:limit - 1] + "…"


@dataclass(frozen=True)
class _Loop:
    """One comprehension of an expression, for :meth:`Expression.cost`.

    Attributes:
        kind: what it walks: ``"items"`` (a literal of ``size`` items), ``"field"``
            (``context.NAME``), ``"loop"`` (the result of comprehension ``index``) or
            ``"unknown"``.
        size: the literal's items (``"items"``).
        name: the field (``"field"``).
        index: the comprehension (``"loop"``).
        parent: the comprehension it sits in, or None.
        tokens: the tokens directly in its body.
        reads: the context fields read directly in its body.
    """

    kind: str
    size: int = 0
    name: str = ""
    index: int = 0
    parent: int | None = None
    tokens: int = 0
    reads: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Plan:
    """The comprehensions of an expression (see :meth:`Expression.cost`).

    Attributes:
        top: the tokens outside every comprehension.
        loops: the comprehensions, outer ones before the ones they hold.
        literal_items: the items of every list and map literal.
    """

    top: int
    loops: tuple[_Loop, ...]
    literal_items: int

    def cost(self, context: Mapping[str, Any], fields: tuple[str, ...],
             whole: bool) -> int:
        """See :meth:`Expression.cost`."""
        unknown: list[int] = []

        def walked(loop: _Loop) -> int:
            if loop.kind == "items":
                return loop.size
            if loop.kind == "field":
                return _size(context.get(loop.name))
            if loop.kind == "loop":
                return sizes[loop.index]
            if not unknown:
                read = context.values() if whole else (context.get(f) for f in fields)
                unknown.append(self.literal_items + max(map(_largest, read), default=0))
            return unknown[0]

        sizes: list[int] = []
        times: list[int] = []
        total = self.top
        for loop in self.loops:
            size = max(walked(loop), 1)
            sizes.append(size)
            factor = size * (1 if loop.parent is None else times[loop.parent])
            times.append(factor)
            total += factor * (loop.tokens + sum(_size(context.get(f)) for f in loop.reads))
            if total > MAX_EVALUATION_STEPS:
                return total
        return total


def _size(value: Any) -> int:
    return len(value) if isinstance(value, list | dict | str) else 0


def _largest(value: Any) -> int:
    """The size of the largest list or map in ``value`` (without recursion)."""
    best = 0
    todo = [value]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            best = max(best, len(item))
            todo.extend(item.values())
        elif isinstance(item, list):
            best = max(best, len(item))
            todo.extend(item)
    return best


def _plan(tokens: list[Token]) -> _Plan | None:  # noqa: C901 - one branch per kind of bracket and receiver
    """The comprehensions of a parsed expression (its brackets balance), or None."""
    scopes: list[dict[str, Any]] = [{"tokens": 0, "reads": []}]
    loops: list[_Loop] = []
    stack: list[list[Any]] = []         # [bracket, loop index or None, literal?, commas, items]
    closed: dict[int, tuple[str, int]] = {}     # closer's token index -> what it closed
    literal_items = 0
    for i, token in enumerate(tokens):
        current = next((entry[1] for entry in reversed(stack) if entry[1] is not None), None)
        scope = scopes[0 if current is None else current + 1]
        scope["tokens"] += len(token.text) if token.kind == "string" else 1
        name = _context_name(tokens, i)
        if name is not None:
            scope["reads"].append(name)
        if stack and token.text not in (")", "]", "}"):
            stack[-1][4] = 1
        if token.text == "," and stack:
            stack[-1][3] += 1
        elif token.text in ("(", "[", "{"):
            before = tokens[i - 1] if i else None
            literal = token.text != "(" and (before is None or (
                before.kind == "op" and before.text not in (")", "]", "}", ".")))
            loop = None
            if (token.text == "(" and i >= 3 and tokens[i - 2].text == "."
                    and tokens[i - 1].kind == "ident" and tokens[i - 1].text in _MACROS):
                loop = len(loops)
                loops.append(_receiver(tokens, i - 3, closed, current))
                scopes.append({"tokens": 0, "reads": []})
            stack.append([token.text, loop, literal, 0, 0])
        elif token.text in (")", "]", "}") and stack:
            _, loop, literal, commas, items = stack.pop()
            if loop is not None:
                closed[i] = ("loop", loop)
            elif literal:
                count = commas + 1 if items else 0
                literal_items += count
                closed[i] = ("items", count)
    if not loops:
        return None
    done = tuple(_Loop(lp.kind, lp.size, lp.name, lp.index, lp.parent,
                       scopes[k + 1]["tokens"], tuple(scopes[k + 1]["reads"]))
                 for k, lp in enumerate(loops))
    return _Plan(scopes[0]["tokens"], done, literal_items)


def _receiver(tokens: list[Token], end: int, closed: dict[int, tuple[str, int]],
              parent: int | None) -> _Loop:
    """What the comprehension whose receiver ends at token ``end`` walks."""
    token = tokens[end]
    found = closed.get(end)
    if found is not None and found[0] == "items":
        return _Loop("items", size=found[1], parent=parent)
    if found is not None:
        return _Loop("loop", index=found[1], parent=parent)
    if token.kind == "ident" and end >= 2 and _context_name(tokens, end - 2) == token.text:
        return _Loop("field", name=token.text, parent=parent)
    return _Loop("unknown", parent=parent)


def _context_name(tokens: list[Token], i: int) -> str | None:
    """``NAME`` when tokens i..i+2 are ``context . NAME`` (``context`` not itself a
    member of something)."""
    if (i + 2 < len(tokens) and tokens[i].text == CONTEXT and tokens[i + 1].text == "."
            and tokens[i + 2].kind == "ident" and (i == 0 or tokens[i - 1].text != ".")):
        return tokens[i + 2].text
    return None


class CelSyntaxError(Exception):
    """The expression does not parse. ``offset`` is 0-based, or None."""

    def __init__(self, message: str, offset: int | None) -> None:
        super().__init__(message)
        self.offset = offset


_PARSE_AT = re.compile(r"<input>:(\d+):(\d+):\s*(.*)")


def compile_expression(source: str) -> Expression:
    """Compile a CEL expression and analyse it.

    Args:
        source: the expression.

    Returns:
        The compiled expression.

    Raises:
        CelSyntaxError: it does not parse (the message is the parser's, shortened), is
            longer than :data:`MAX_EXPRESSION_CHARS`, nests brackets deeper than
            :data:`MAX_EXPRESSION_NESTING`, or made the library panic.
        MissingDependency: ``common-expression-language`` is not installed.
    """
    return _compiled(source)


@functools.lru_cache(maxsize=2048)
def _compiled(source: str) -> Expression:
    """:func:`compile_expression`, kept per source: an :class:`Expression` is immutable,
    and a machine compares one field with many values, and the type check compiles each
    operand of a guard on its own (a refused source raises and is not kept)."""
    tokens, program = _parse(source)
    return _analyse(source, tokens, program)


def _parse(source: str) -> tuple[list[Token], Any]:
    """The tokens and the compiled program of ``source``, within the bounds."""
    try:
        import cel
    except ImportError as exc:  # pragma: no cover - the fsm extra
        from ..errors import MissingDependency
        raise MissingDependency("CEL guards need the fsm extra: "
                                "pip install 'foreperson[fsm]'") from exc
    if not source.strip():
        raise CelSyntaxError("the expression is empty", 0)
    if len(source) > MAX_EXPRESSION_CHARS:
        raise CelSyntaxError(
            f"the expression is {len(source):,} characters long, more than "
            f"{MAX_EXPRESSION_CHARS:,} (MAX_EXPRESSION_CHARS): split the decision into "
            "several guards or fields", None)
    tokens = tokenize(source)
    _check_nesting(tokens)
    try:
        return tokens, cel.compile(source)
    except BaseException as exc:
        if not isinstance(exc, Exception) and not is_panic(exc):
            raise                                   # KeyboardInterrupt, SystemExit
        raise _syntax_error(exc, source) from None


def _syntax_error(exc: BaseException, source: str) -> CelSyntaxError:
    """The library's refusal of ``source`` (a ``ValueError``, or a panic) as ours."""
    if is_panic(exc):
        return CelSyntaxError(f"the CEL library failed on this expression ({exc}); write "
                              "it shorter or simpler", None)
    text = str(exc)
    found = _PARSE_AT.search(text)
    if not found:
        return CelSyntaxError(text.split("\n")[0], None)
    line, column, what = int(found.group(1)), int(found.group(2)), found.group(3)
    what = what.split("\n")[0].removeprefix("Syntax error: ")
    if " expecting {" in what:
        what = what[:what.index(" expecting {")] + " (CEL expected something else here)"
    lines = source.split("\n")
    offset = sum(len(x) + 1 for x in lines[:line - 1]) + column - 1
    single = _single_equals(source)
    if single is not None:
        return CelSyntaxError(
            "`=` is not an operator in CEL (nothing is assigned in a guard): to compare, "
            "write `==`, e.g. context.route == 'billing'", single)
    return CelSyntaxError(what, offset)


def _single_equals(source: str) -> int | None:
    """The offset of the first ``=`` of ``source`` outside string literals that is not
    part of ``==``, ``!=``, ``<=`` or ``>=``; else None."""
    for token in tokenize(source):
        if token.kind == "other" and token.text == "=":
            return token.offset
    return None


def _analyse(source: str, tokens: list[Token], program: Any) -> Expression:
    """The fields, comparisons, unknown names and comprehensions of a parsed expression."""
    uses: list[FieldUse] = []
    whole = False
    bound: set[str] = set()
    for i, token in enumerate(tokens):
        if token.kind != "ident":
            continue
        before = tokens[i - 1] if i else None
        after = tokens[i + 1] if i + 1 < len(tokens) else None
        if (token.text in _MACROS and before is not None and before.text == "."
                and after is not None and after.text == "(" and i + 3 < len(tokens)
                and tokens[i + 2].kind == "ident" and tokens[i + 3].text == ","):
            bound.add(tokens[i + 2].text)              # x in list.exists(x, ...)
        if token.text != CONTEXT or (before is not None and before.text == "."):
            continue
        name = tokens[i + 2] if i + 2 < len(tokens) else None
        if after is not None and after.text == "." and name is not None and name.kind == "ident":
            uses.append(FieldUse(name.text, name.offset))
        else:
            whole = True
    unknown: list[tuple[str, int]] = []
    variables = set(program.variables()) - {CONTEXT} - bound - TYPE_NAMES
    for variable in sorted(variables):
        offset = next((t.offset for k, t in enumerate(tokens)
                       if t.kind == "ident" and t.text == variable
                       and (k == 0 or tokens[k - 1].text != ".")), 0)
        unknown.append((variable, offset))
    comparisons = _comparisons(tokens)
    fields = tuple(dict.fromkeys(u.name for u in uses))
    return Expression(source, program, fields, tuple(uses), whole, tuple(comparisons),
                      tuple(unknown), _plan(tokens))


def _check_nesting(tokens: list[Token]) -> None:
    """Refuse brackets nested deeper than :data:`MAX_EXPRESSION_NESTING`.

    Raises:
        CelSyntaxError: at the first bracket too deep.
    """
    depth = 0
    for token in tokens:
        if token.text in ("(", "[", "{"):
            depth += 1
            if depth > MAX_EXPRESSION_NESTING:
                raise CelSyntaxError(
                    f"brackets nest more than {MAX_EXPRESSION_NESTING} levels deep here "
                    f"(MAX_EXPRESSION_NESTING): name the parts with fields, or write it "
                    "flatter", token.offset)
        elif token.text in (")", "]", "}"):
            depth = max(depth - 1, 0)


def _field_at(tokens: list[Token], i: int) -> str | None:
    """``NAME`` when tokens i..i+2 are ``context . NAME`` (not part of a longer path)."""
    if (i + 2 < len(tokens) and tokens[i].text == CONTEXT and tokens[i + 1].text == "."
            and tokens[i + 2].kind == "ident"
            and (i == 0 or tokens[i - 1].text != ".")
            and not (i + 3 < len(tokens) and tokens[i + 3].text in (".", "[", "("))):
        return tokens[i + 2].text
    return None


def _comparisons(tokens: list[Token]) -> list[LiteralComparison]:
    found: list[LiteralComparison] = []

    def note(name: str, token: Token) -> None:
        literal = token.literal
        if literal is not None:
            found.append(LiteralComparison(name, literal[1], token.offset, literal[0]))

    for i in range(len(tokens)):
        name = _field_at(tokens, i)
        if name is None:
            continue
        op = tokens[i + 3] if i + 3 < len(tokens) else None
        if op is not None and op.text in ("==", "!=") and i + 4 < len(tokens):
            note(name, tokens[i + 4])
        elif op is not None and op.text == "in" and i + 4 < len(tokens) \
                and tokens[i + 4].text == "[":
            j = i + 5
            while j < len(tokens) and tokens[j].text != "]":
                note(name, tokens[j])
                j += 1
        if i >= 2 and tokens[i - 1].text in ("==", "!="):
            note(name, tokens[i - 2])
    return found


def type_name(value: Any) -> str:
    """CEL's name for the type of a Python value CEL returned."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, Mapping):
        return "map"
    return type(value).__name__


@dataclass(frozen=True)
class Sample:
    """A typed sample context, for checking expressions at load.

    Attributes:
        data: a value of the right type for every field.
        activation: the ``cel.Context`` of ``data``.
    """

    data: dict[str, Any]
    activation: Any


def sample_contexts(samples: list[dict[str, Any]]) -> list[Sample]:
    """The samples of typed contexts, built once for every expression of a machine (see
    :func:`sample_run`).

    Args:
        samples: contexts holding a value of the right type for every field.

    Returns:
        One :class:`Sample` per context.
    """
    import cel

    return [Sample(data, cel.Context(variables={CONTEXT: data})) for data in samples]


def sample_run(expression: Expression, samples: list[Sample]) -> tuple[list[Any], str | None]:
    """Run ``expression`` on typed sample contexts, to find type errors at load.

    A ``TypeError`` (no such overload), or a function CEL does not know for the given
    argument types, is a mistake in the expression whatever the data; other failures
    (an index out of range on a sample list, a missing map key) depend on the data and
    are left for run time. An expression whose :meth:`Expression.cost` on a sample is
    over :data:`MAX_EVALUATION_STEPS` is not run: that is the error.

    Args:
        expression: the compiled expression.
        samples: :func:`sample_contexts` of contexts holding a value of the right type
            for every field.

    Returns:
        ``(values, error)``: the values it gave on the samples where it ran, and the
        message of the first problem (``CEL type error: ...``, or the budget exceeded),
        or None.
    """
    values: list[Any] = []
    for sample in samples:
        cost = expression.over_budget(sample.data)
        if cost is not None:
            return values, (
                f"CEL: this expression would take at least {cost:,} steps on a sample "
                f"context, more than the budget of {MAX_EVALUATION_STEPS:,} for one evaluation "
                "(MAX_EVALUATION_STEPS): each comprehension (all, exists, map, filter) "
                "multiplies the steps of its body by the items it walks; walk fewer or "
                "shorter lists, or nest fewer comprehensions")
        try:
            values.append(expression.program.execute(sample.activation))
        except TypeError as exc:
            return values, "CEL type error: " + _short(str(exc))
        except RuntimeError as exc:
            text = str(exc)
            if "Undefined variable or function" in text:
                return values, ("CEL type error: " + _short(text) + " (or it was given "
                                "arguments of the wrong type; string methods: size, "
                                "contains, startsWith, endsWith, matches)")
        except Exception:  # noqa: BLE001,S112 - data-dependent; checked at run time
            continue
        except BaseException as exc:
            if not is_panic(exc):
                raise
            return values, f"CEL: the library failed on it ({exc}); write it more simply"
    return values, None


def _short(text: str) -> str:
    first = text.split("\n")[0].strip()
    cut = first.find(". CEL does not coerce")
    if cut > 0:
        first = first[:cut] + " (CEL does not convert between types: use int(x), double(x) " \
                              "or string(x))"
    return first
