"""CEL expressions: compiled once at load, analysed for the fields they read, evaluated
on a view of the context built once per step.

The library is ``common-expression-language`` (``import cel``, Rust-backed;
DEPENDENCIES.md). It parses but does not type-check, so the loader checks types by
running each expression on typed sample contexts (see :func:`sample_problems`), and
finds the fields and enum literals an expression uses with the small tokenizer below.
Its errors (``ValueError``, ``KeyError``, ``TypeError``, ``RuntimeError``, ...) are
wrapped in :class:`GuardError` at run time. Never Python ``eval``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import GuardError

__all__ = [
    "CelSyntaxError",
    "Expression",
    "compile_expression",
    "sample_contexts",
    "sample_run",
    "tokenize",
]

CONTEXT = "context"
"""The one variable an expression sees: ``context.FIELD``."""

_MACROS = {"all", "exists", "exists_one", "map", "filter"}

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
    """

    source: str
    program: Any
    fields: tuple[str, ...]
    uses: tuple[FieldUse, ...]
    whole_context: bool
    comparisons: tuple[LiteralComparison, ...]
    unknown_names: tuple[tuple[str, int], ...]

    def evaluate(self, activation: Any, *, state: str) -> Any:
        """Run the expression.

        Args:
            activation: a ``cel.Context`` or a dict ``{"context": {...}}``.
            state: the state it belongs to, for the error.

        Returns:
            The value, as Python (bool, int, float, str, list, dict, None).

        Raises:
            GuardError: CEL failed; its message is kept.
        """
        try:
            return self.program.execute(activation)
        except Exception as exc:  # noqa: BLE001 - the library raises several kinds
            raise GuardError(
                f"state {state!r}: CEL `{self.source}` failed: {type(exc).__name__}: {exc}",
                expression=self.source, state=state) from exc


class CelSyntaxError(Exception):
    """The expression does not parse. ``offset`` is 0-based, or None."""

    def __init__(self, message: str, offset: int | None) -> None:
        super().__init__(message)
        self.offset = offset


_PARSE_AT = re.compile(r"<input>:(\d+):(\d+):\s*(.*)")


def compile_expression(source: str) -> Expression:  # noqa: C901 - one branch per way a CEL expression is refused, each with a message
    """Compile a CEL expression and analyse it.

    Args:
        source: the expression.

    Returns:
        The compiled expression.

    Raises:
        CelSyntaxError: it does not parse (the message is the parser's, shortened).
        MissingDependency: ``common-expression-language`` is not installed.
    """
    try:
        import cel
    except ImportError as exc:  # pragma: no cover - the fsm extra
        from ..errors import MissingDependency
        raise MissingDependency("CEL guards need the fsm extra: "
                                "pip install 'foreperson[fsm]'") from exc
    if not source.strip():
        raise CelSyntaxError("the expression is empty", 0)
    try:
        program = cel.compile(source)
    except Exception as exc:  # noqa: BLE001 - ValueError, in practice
        text = str(exc)
        found = _PARSE_AT.search(text)
        if found:
            line, column, what = int(found.group(1)), int(found.group(2)), found.group(3)
            what = what.split("\n")[0].removeprefix("Syntax error: ")
            if " expecting {" in what:
                what = what[:what.index(" expecting {")] + " (CEL expected something else here)"
            lines = source.split("\n")
            offset = sum(len(x) + 1 for x in lines[:line - 1]) + column - 1
            raise CelSyntaxError(what, offset) from None
        raise CelSyntaxError(text.split("\n")[0], None) from None
    tokens = tokenize(source)
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
    variables = set(program.variables()) - {CONTEXT} - bound
    for variable in sorted(variables):
        offset = next((t.offset for t in tokens if t.kind == "ident" and t.text == variable),
                      0)
        unknown.append((variable, offset))
    comparisons = _comparisons(tokens)
    fields = tuple(dict.fromkeys(u.name for u in uses))
    return Expression(source, program, fields, tuple(uses), whole, tuple(comparisons),
                      tuple(unknown))


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


def sample_contexts(samples: list[dict[str, Any]]) -> list[Any]:
    """The CEL activations of typed sample contexts, built once for every expression
    of a machine (see :func:`sample_run`).

    Args:
        samples: contexts holding a value of the right type for every field.

    Returns:
        One ``cel.Context`` per sample.
    """
    import cel

    return [cel.Context(variables={CONTEXT: sample}) for sample in samples]


def sample_run(expression: Expression, samples: list[Any]) -> tuple[list[Any], str | None]:
    """Run ``expression`` on typed sample contexts, to find type errors at load.

    A ``TypeError`` (no such overload), or a function CEL does not know for the given
    argument types, is a mistake in the expression whatever the data; other failures
    (an index out of range on a sample list, a missing map key) depend on the data and
    are left for run time.

    Args:
        expression: the compiled expression.
        samples: :func:`sample_contexts` of contexts holding a value of the right type
            for every field.

    Returns:
        ``(values, error)``: the values it gave on the samples where it ran, and the
        text of the first type error, or None.
    """
    values: list[Any] = []
    for sample in samples:
        try:
            values.append(expression.program.execute(sample))
        except TypeError as exc:
            return values, _short(str(exc))
        except RuntimeError as exc:
            text = str(exc)
            if "Undefined variable or function" in text:
                return values, (_short(text) + " (or it was given arguments of the wrong "
                                "type; string methods: size, contains, startsWith, endsWith, "
                                "matches)")
        except Exception:  # noqa: BLE001,S112 - data-dependent; checked at run time
            continue
    return values, None


def _short(text: str) -> str:
    first = text.split("\n")[0].strip()
    cut = first.find(". CEL does not coerce")
    if cut > 0:
        first = first[:cut] + " (CEL does not convert between types: use int(x), double(x) " \
                              "or string(x))"
    return first
