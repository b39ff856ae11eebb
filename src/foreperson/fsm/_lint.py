"""What the sample run of :func:`~foreperson.fsm._cel.sample_run` cannot see, checked at
load (issue 20, item 7): the parts of an expression, each run on every sample.

Running a whole guard on the samples misses mistakes that CEL hides at run time: the
right side of ``&&`` / ``||`` is not run when the left side decides on both samples, a
list compared with a string is silently ``false``, ``int()`` of an enum field fails
only on data, and an invalid regex literal fails only when ``matches`` runs. So the
expression is split at its top-level operators (by precedence, from its tokens: the
library gives no syntax tree) and each operand of ``&&``, ``||``, ``==`` and ``!=`` is
compiled on its own and run on every sample; parts that read a comprehension's
variable cannot run alone and are skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ._cel import (
    CONTEXT,
    CelSyntaxError,
    Sample,
    Token,
    compile_expression,
    is_panic,
    tokenize,
    type_name,
)
from ._fields import FieldSpec

__all__ = ["part_problems"]

_OPEN = {"(": ")", "[": "]", "{": "}"}
_LOGICAL = ("||", "&&")
_EQUALITY = ("==", "!=")
_RELATIONS = ("==", "!=", "<", "<=", ">", ">=", "in")
_GROUPS = {"bool": "a boolean", "int": "a number", "double": "a number", "string": "a string",
           "list": "a list", "map": "a map"}
_CONVERSIONS = ("int", "uint", "double")


def part_problems(source: str, samples: list[Sample],
                  fields: dict[str, FieldSpec]) -> list[tuple[str, int]]:
    """Mistakes in the parts of ``source`` that running it whole on the samples misses.

    Args:
        source: a CEL expression that compiles and runs on the samples without a type
            error.
        samples: the typed sample contexts of the machine.
        fields: the machine's fields.

    Returns:
        ``(message, offset)`` for each mistake, ``offset`` 0-based in ``source``.
    """
    tokens = tokenize(source)
    found = list(_conversions(tokens, fields))
    found.extend(_regexes(tokens))
    for kind, parts in _operators(tokens, 0, len(tokens)):
        spans = [(source[tokens[lo].offset:_end(tokens, hi)], tokens[lo].offset)
                 for lo, hi in parts]
        found.extend(_operands(kind, spans, samples))
    return found


def _end(tokens: list[Token], hi: int) -> int:
    last = tokens[hi - 1]
    return last.offset + len(last.text)


def _operators(tokens: list[Token], lo: int, hi: int
               ) -> Iterator[tuple[str, list[tuple[int, int]]]]:
    """Each ``&&``/``||`` (all its operands) and ``==``/``!=`` (both sides) in tokens
    ``lo:hi``, outermost first, as token spans."""
    if hi - lo < 1:
        return
    top = _top_level(tokens, lo, hi)
    for ops in (("?", ":"), ("||",), ("&&",), _RELATIONS):
        cuts = [i for i in top if tokens[i].text in ops]
        if not cuts:
            continue
        if ops[0] in _LOGICAL or (ops is _RELATIONS and tokens[cuts[-1]].text in _EQUALITY):
            if ops is _RELATIONS:
                cuts = cuts[-1:]          # left-associative: the last one is the root
            bounds = [lo, *cuts, hi]
            parts = [(bounds[k] + (k > 0), bounds[k + 1]) for k in range(len(bounds) - 1)]
            if all(b > a for a, b in parts):
                yield (ops[0] if ops[0] in _LOGICAL else tokens[cuts[-1]].text, parts)
        bounds = [lo, *cuts, hi]
        for k in range(len(bounds) - 1):
            yield from _operators(tokens, bounds[k] + (k > 0), bounds[k + 1])
        return
    yield from _inside_brackets(tokens, lo, hi)


def _inside_brackets(tokens: list[Token], lo: int, hi: int
                     ) -> Iterator[tuple[str, list[tuple[int, int]]]]:
    """The operators inside each top-level bracket of tokens ``lo:hi``, one argument (or
    list item) at a time."""
    i = lo
    while i < hi:
        if tokens[i].text not in _OPEN:
            i += 1
            continue
        close = _closing(tokens, i, hi)
        start = i + 1
        for cut in [*(c for c in _top_level(tokens, i + 1, close) if tokens[c].text == ","),
                    close]:
            yield from _operators(tokens, start, cut)
            start = cut + 1
        i = close + 1


def _top_level(tokens: list[Token], lo: int, hi: int) -> list[int]:
    """The indexes of the tokens of ``lo:hi`` outside every bracket."""
    out: list[int] = []
    depth = 0
    for i in range(lo, hi):
        text = tokens[i].text
        if text in _OPEN:
            depth += 1
        elif text in (")", "]", "}"):
            depth -= 1
        elif depth == 0:
            out.append(i)
    return out


def _closing(tokens: list[Token], i: int, hi: int) -> int:
    depth = 0
    for j in range(i, hi):
        if tokens[j].text in _OPEN:
            depth += 1
        elif tokens[j].text in (")", "]", "}"):
            depth -= 1
            if depth == 0:
                return j
    return hi


def _run_alone(source: str, samples: list[Sample]) -> list[Any] | str | None:
    """The values of ``source`` on every sample; the text of a type error; or None
    when it cannot run alone (a comprehension's variable) or fails on data."""
    try:
        expression = compile_expression(source)
    except CelSyntaxError:
        return None
    if expression.unknown_names:
        return None
    values: list[Any] = []
    for sample in samples:
        if expression.over_budget(sample.data) is not None:
            return None
        try:
            values.append(expression.program.execute(sample.activation))
        except BaseException as exc:
            if not isinstance(exc, Exception) and not is_panic(exc):
                raise
            return _type_error(exc)
    return values


def _type_error(exc: BaseException) -> str | None:
    """The text of ``exc`` when it is a type error whatever the data, else None."""
    if isinstance(exc, TypeError):
        return str(exc).split("\n")[0].split(". CEL does not coerce")[0]
    if isinstance(exc, RuntimeError) and "Undefined variable or function" in str(exc):
        # a function without an overload for these argument types
        return str(exc).split(". Check")[0] + " (for arguments of these types)"
    return None                      # data-dependent (or a panic): left for run time


def _operands(kind: str, spans: list[tuple[str, int]], samples: list[Sample]
              ) -> Iterator[tuple[str, int]]:
    results = [_run_alone(text, samples) for text, _ in spans]
    for (text, offset), result in zip(spans, results, strict=True):
        if isinstance(result, str) and kind in _LOGICAL:
            yield (f"CEL type error in `{text}`: {result} (the other side of `{kind}` "
                   "decided on the load-time samples, so this one was not run; at run "
                   "time it may be)", offset)
    if kind in _EQUALITY and all(isinstance(r, list) for r in results):
        yield from _mismatch(kind, spans, results)


def _mismatch(kind: str, spans: list[tuple[str, int]], results: list[Any]
              ) -> Iterator[tuple[str, int]]:
    """A comparison of two kinds of value that can never be equal."""
    (left, at), (right, _) = spans
    for a, b in zip(results[0], results[1], strict=True):
        ka, kb = _GROUPS.get(type_name(a)), _GROUPS.get(type_name(b))
        if ka is not None and kb is not None and ka != kb:
            never = "false" if kind == "==" else "true"
            yield (f"CEL: `{left}` is {ka} and `{right}` is {kb}: CEL compares them "
                   f"without an error, and `{kind}` is always {never}; compare values of "
                   "one type (e.g. `'x' in context.notes`, `size(context.notes) > 0`)", at)
            return


def _conversions(tokens: list[Token], fields: dict[str, FieldSpec]
                 ) -> Iterator[tuple[str, int]]:
    """``int(context.F)`` (or ``uint``, ``double``) of an enum field whose values are not
    all numbers: it fails at run time on the words."""
    for i, token in enumerate(tokens[:-5]):
        if (token.kind == "ident" and token.text in _CONVERSIONS
                and (i == 0 or tokens[i - 1].text != ".")
                and [t.text for t in tokens[i + 1:i + 3]] == ["(", CONTEXT]
                and tokens[i + 3].text == "." and tokens[i + 5].text == ")"):
            spec = fields.get(tokens[i + 4].text)
            if spec is None or spec.type != "enum" or all(_numeric(v) for v in spec.values):
                continue
            yield (f"CEL: {token.text}() of enum field {spec.name!r} fails at run time: "
                   f"its values are words ({', '.join(spec.values)}); compare it instead, "
                   f"e.g. context.{spec.name} == {spec.values[0]!r}", token.offset)


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _regexes(tokens: list[Token]) -> Iterator[tuple[str, int]]:
    """``matches('...')`` (or ``matches(x, '...')``) with a literal pattern the CEL
    library's regex engine (RE2 syntax) refuses; it is asked directly, so what is
    refused is what would fail at run time."""
    for i, token in enumerate(tokens):
        if token.text != "matches" or i + 2 >= len(tokens) or tokens[i + 1].text != "(":
            continue
        j = i + 2
        if tokens[j].kind != "string" and j + 2 < len(tokens) and tokens[j + 1].text == ",":
            j += 2
        pattern = tokens[j]
        if pattern.kind != "string" or j + 1 >= len(tokens) or tokens[j + 1].text != ")":
            continue
        error = _regex_error(pattern.text)
        if error is not None:
            yield (f"CEL: invalid regular expression {pattern.text}: {error} (CEL's "
                   "`matches` uses RE2 syntax: no look-around, no backreferences)",
                   pattern.offset)


def _regex_error(literal: str) -> str | None:
    """What the library says of the regex literal ``literal`` (as written), or None."""
    try:
        import cel

        cel.compile(f"''.matches({literal})").execute({})
    except RuntimeError as exc:
        text = str(exc)
        if "not a valid regex" not in text:
            return None
        lines = [line.strip() for line in text.split("\n") if line.strip()]
        detail = next((line for line in lines if line.startswith("error:")), lines[-1])
        return detail.removeprefix("error:").split(". Check function")[0].strip()
    except Exception:  # noqa: BLE001 - not a regex problem
        return None
    return None
