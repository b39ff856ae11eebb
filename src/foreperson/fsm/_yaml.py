"""YAML read safely, with a line and column for every key and value.

PyYAML is only asked to *compose* the document (its safe composer: no tags that build
Python objects); the node tree is turned into plain dicts, lists and scalars here, so
that we keep each node's position and see what PyYAML would silently hide
(DEPENDENCIES.md): a key written twice (PyYAML keeps the last one), merge keys, and
plain words such as ``no`` that YAML 1.1 reads as booleans.

No text can crash or hang the reader: before anything is composed, the parser's events
are walked once (iteratively) and a document nested deeper than :data:`MAX_YAML_DEPTH`
or holding a recursive alias (``a: &x [*x]``) is refused by name, at its line and
column; libyaml's composer recurses in C and would otherwise overflow the stack, and our
builder would recurse forever on a node that contains itself. Numbers beyond 64 bits
(CEL's integers) are refused, and an alias bomb stops at ``_MAX_NODES`` nodes.

Messages name the fix (issue 20, item 8): a control character is reported at its line
and column in one line; a tab in the indentation says that YAML forbids tabs there; a
key indented less than the keys before it (which YAML reads as closing their mapping,
so the *next* line is where PyYAML complains) is reported at its own line; every YAML
syntax error says that checking stopped there. A position inside a scalar (a CEL error
column, an unclosed ``{{``) is found in the source by walking the scalar's text as
written, so it is right in ``>-`` and ``|`` blocks and in quoted text spanning lines.
"""

from __future__ import annotations

import datetime
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from ..errors import SpecProblem

__all__ = ["MAX_YAML_DEPTH", "Located", "Mark", "Path", "load_yaml", "load_yaml_until_error",
           "readable_prefix"]

Path = tuple[str | int, ...]
"""Where a value is in the document: keys and list indexes from the root."""

_MAX_NODES = 200_000     # an alias bomb stops here instead of eating memory
MAX_YAML_DEPTH = 64
"""How deep lists and mappings may nest in a machine file (seed 003's own files nest 8
deep); deeper is refused at load, aliases included."""
_INT64 = 2 ** 63
_STR = "tag:yaml.org,2002:str"
_NON_PRINTABLE = re.compile(        # what YAML 1.1 (and PyYAML's reader) refuses
    "[^\x09\x0A\x0D\x20-\x7E\x85\xA0-\uD7FF\uE000-\uFFFD\U00010000-\U0010FFFF]")
_MAX_CONTROL_PROBLEMS = 10
_STOPPED = "checking stopped here: fix it and run again to see the rest"
_PLAIN_TAGS = frozenset(f"tag:yaml.org,2002:{t}" for t in (
    "str", "int", "float", "bool", "null", "seq", "map", "timestamp", "binary", "merge"))


@dataclass(frozen=True)
class Mark:
    """A position in the source.

    Attributes:
        line: 1-based line.
        column: 1-based column.
    """

    line: int
    column: int


@dataclass(frozen=True)
class Scalar:
    """How a scalar was written.

    Attributes:
        text: the characters as written (without quotes).
        style: ``None`` (plain), ``"'"``, ``'"'``, ``"|"`` or ``">"``.
        single_line: True when the scalar sits on one source line, so a column inside
            its text maps to a column in the file.
    """

    text: str
    style: str | None
    single_line: bool


@dataclass
class Located:
    """A YAML document as plain data, with the node of every key and value, so any
    position can be told when a problem is reported (and costs nothing otherwise).

    Attributes:
        data: the document (dicts, lists, str, int, float, bool, None).
        source: the file name used in problems.
        values: the YAML node of the value at each path.
        keys: the YAML node of the key of each mapping entry, by the entry's path.
        text: the YAML text itself, to place an offset inside a scalar that spans lines.
    """

    data: Any
    source: str
    values: dict[Path, Any] = field(default_factory=dict)
    keys: dict[Path, Any] = field(default_factory=dict)
    text: str = ""
    _lines: list[str] | None = field(default=None, repr=False, compare=False)
    _places: dict[int, list[Mark | None]] = field(default_factory=dict, repr=False,
                                                  compare=False)

    def renamed(self, renames: list[tuple[Path, str, str]]) -> Located:
        """This document with some mapping keys renamed (each ``(path of the mapping,
        old key, new key)``), every position kept: used to check a file as if a
        misspelled key were spelled right, so that the problems that follow only from
        the misspelling can be told apart (see ``load_spec``).

        Args:
            renames: the keys to rename; one whose mapping already has the new key, or
                lacks the old one, is skipped.

        Returns:
            A new document; this one is not changed.
        """
        data = self.data
        for parent, old, new in renames:
            data = _renamed(data, parent, old, new)
        by_path = {(*parent, old): new for parent, old, new in renames}
        tables: list[dict[Path, Any]] = []
        for table in (self.values, self.keys):
            copy = dict(table)
            for path, node in table.items():
                moved = _moved(path, by_path)
                if moved != path:
                    copy[moved] = node
            tables.append(copy)
        return Located(data, self.source, tables[0], tables[1], self.text)

    def mark(self, path: Path, *, key: bool = False) -> Mark | None:
        """The position of ``path`` (its key when ``key``), else of its nearest
        ancestor that has one, else None."""
        table = self.keys if key else self.values
        for depth in range(len(path), -1, -1):
            sub = path[:depth]
            node = table.get(sub) or self.values.get(sub)
            if node is not None:
                return Mark(node.start_mark.line + 1, node.start_mark.column + 1)
        return None

    def scalar(self, path: Path) -> Scalar | None:
        """How the scalar at ``path`` was written, or None (not a scalar)."""
        node = self.values.get(path)
        if node is None or not hasattr(node.value, "upper"):     # str: a scalar node
            return None
        style = node.style or None
        return Scalar(node.value, style, node.start_mark.line == node.end_mark.line
                      and style not in ("|", ">"))

    def problem(self, path: Path, message: str, *, key: bool = False,
                offset: int | None = None) -> SpecProblem:
        """A problem located at ``path``.

        Args:
            path: where the problem is.
            message: what is wrong, and how to fix it.
            key: point at the entry's key rather than its value.
            offset: 0-based offset inside the scalar's text (e.g. a CEL error column);
                used only when the scalar is on one line.

        Returns:
            The problem, with line and column when the path is known.
        """
        mark = self.mark(path, key=key)
        if mark is None:
            return SpecProblem(self.source, None, None, message)
        node = None if key else self.values.get(path)
        if node is not None and self.scalar(path) is not None:
            if offset is None and node.style in ("|", ">"):
                offset = 0           # the block's first line, not its `>-` indicator
            if offset is not None:
                mark = self._inside(node, offset) or mark
        return SpecProblem(self.source, mark.line, mark.column, message)

    def _inside(self, node: Any, offset: int) -> Mark | None:
        """Where character ``offset`` of scalar ``node``'s value is in the source, or
        None when not found (see :func:`_positions`; computed once per scalar)."""
        if not self.text:
            return None
        found = self._places.get(id(node))
        if found is None:
            if self._lines is None:
                self._lines = self.text.split("\n")
            found = self._places[id(node)] = _positions(self._lines, node)
        return found[offset] if 0 <= offset < len(found) else None


_ESCAPE_WIDTH = {"x": 4, "u": 6, "U": 10}


def _positions(lines: list[str], node: Any) -> list[Mark | None]:
    """The place in the source of each character of scalar ``node``'s value: its text as
    written is walked alongside the value (folded line breaks, stripped indentation,
    escapes and doubled quotes skipped), so a place is right inside ``>-`` and ``|``
    blocks and in quoted text spanning lines. Linear in the scalar's length."""
    written = _written(lines, node)
    value: str = node.value
    places: list[Mark | None] = [None] * len(value)      # and one more: the end
    i = k = 0
    while k < len(written) and i < len(value):
        line, column, char = written[k]
        if value[i] == char:
            places[i] = Mark(line, column)
            i += 1
        elif char == "\\" and node.style == '"':
            places[i] = Mark(line, column)
            k += _ESCAPE_WIDTH.get(written[k + 1][2] if k + 1 < len(written) else "", 2)
            i += 1
            continue
        elif char == "\n" and value[i] == " ":
            places[i] = Mark(line, column)      # a line break folded into a space
            i += 1
        k += 1
    last = next((m for m in reversed(places) if m is not None), None)
    places.append(None if last is None or places[-1] is None
                  else Mark(last.line, last.column + 1))     # just after the end
    return places


def _written(lines: list[str], node: Any) -> list[tuple[int, int, str]]:
    """The characters of scalar ``node`` as written, each with its 1-based line and
    column; line breaks kept as ``"\\n"``, indentation and quotes left out."""
    start, end = node.start_mark, node.end_mark
    out: list[tuple[int, int, str]] = []
    if node.style in ("|", ">"):
        body = range(start.line + 1, min(end.line + 1, len(lines)))
        indent = next((len(lines[n]) - len(lines[n].lstrip(" ")) for n in body
                       if lines[n].strip()), 0)
        for n in body:
            out.extend((n + 1, c + 1, lines[n][c]) for c in range(indent, len(lines[n])))
            out.append((n + 1, len(lines[n]) + 1, "\n"))
        return out
    quoted = 1 if node.style in ("'", '"') else 0
    for n in range(start.line, min(end.line + 1, len(lines))):
        row = lines[n]
        first = start.column + quoted if n == start.line else len(row) - len(row.lstrip())
        last = end.column - quoted if n == end.line else len(row)
        out.extend((n + 1, c + 1, row[c]) for c in range(first, min(last, len(row))))
        if n != end.line:
            out.append((n + 1, len(row) + 1, "\n"))
    return out


def _moved(path: Path, renames: dict[Path, str]) -> Path:
    """``path`` with each renamed key on it (``renames``: the old key's path to the new
    key) replaced; one look-up per level."""
    parts = list(path)
    for depth in range(1, len(path) + 1):
        new = renames.get(path[:depth])
        if new is not None:
            parts[depth - 1] = new
    return tuple(parts)


def _renamed(data: Any, parent: Path, old: str, new: str) -> Any:
    """``data`` with key ``old`` of the mapping at ``parent`` renamed ``new`` (copies
    along the path; the rest shared)."""
    if not parent:
        if not isinstance(data, dict) or old not in data or new in data:
            return data
        return {new if k == old else k: v for k, v in data.items()}
    head, rest = parent[0], parent[1:]
    if isinstance(data, dict) and isinstance(head, str) and head in data:
        return {**data, head: _renamed(data[head], rest, old, new)}
    if isinstance(data, list) and isinstance(head, int) and 0 <= head < len(data):
        return [*data[:head], _renamed(data[head], rest, old, new), *data[head + 1:]]
    return data


def _control_problems(text: str, source: str) -> list[SpecProblem]:
    """One problem (one line, with line and column) per character YAML does not allow
    in a file, at most ``_MAX_CONTROL_PROBLEMS``."""
    problems: list[SpecProblem] = []
    for found in _NON_PRINTABLE.finditer(text):
        if len(problems) == _MAX_CONTROL_PROBLEMS:
            break
        at = found.start()
        line = text.count("\n", 0, at) + 1
        column = at - (text.rfind("\n", 0, at) + 1) + 1
        char = found.group()
        name = unicodedata.name(char, "")
        shown = f"U+{ord(char):04X}" + (f" ({name.lower()})" if name else "")
        problems.append(SpecProblem(source, line, column, (
            f"control character {shown} here: YAML allows no "
            "control characters in a file; delete it (in double quotes, write it as an "
            f"escape such as \\x{ord(char):02x}); {_STOPPED}")))
    return problems


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _key_line(line: str) -> bool:
    """Whether ``line`` is a block mapping key (``name:``), perhaps with its value."""
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith(("#", "-")) and (
        ": " in stripped or stripped.endswith(":"))


def _syntax_problem(text: str, source: str, line: int | None, column: int | None,
                    what: str) -> SpecProblem:
    """The problem for a YAML syntax error at 0-based ``line``, ``column``, saying how to
    fix it: a tab in the indentation, a key indented less than its siblings, or else
    the parser's words."""
    if line is None or column is None:
        return SpecProblem(source, None, None,
                           f"YAML syntax error: {what}; fix the YAML at this place; {_STOPPED}")
    lines = text.split("\n")
    for n in (line, line - 1):
        row = lines[n] if 0 <= n < len(lines) else ""
        lead = row[:len(row) - len(row.lstrip(" \t"))]
        if "\t" in lead:
            return SpecProblem(source, n + 1, lead.index("\t") + 1, (
                "a tab in the indentation: YAML forbids tabs there (it reads only spaces as "
                f"indentation); indent with spaces instead; {_STOPPED}"))
    if "did not find expected key" in what and 0 <= line < len(lines):
        dedented = _dedented_key(lines, line)
        if dedented is not None:
            at, sibling, owner = dedented
            key, like = _key_of(lines[at]), _key_of(lines[sibling])
            width = _indent(lines[sibling])
            under = f"a key of `{_key_of(lines[owner])}:`" if owner is not None \
                else "a top-level key"
            return SpecProblem(source, at + 1, _indent(lines[at]) + 1, (
                f"`{key}:` is indented {_indent(lines[at])} spaces, less than the keys "
                f"before it ({width} spaces, like `{like}:` at line {sibling + 1}), so YAML "
                f"ends their mapping here and reads `{key}` as {under}; line {line + 1}, "
                f"indented {width}, then belongs nowhere (that is where YAML complains). "
                f"Indent `{key}:` by {width} spaces, like `{like}:`; {_STOPPED}"))
    return SpecProblem(source, line + 1, column + 1,
                       f"YAML syntax error: {what}; fix the YAML at this place; {_STOPPED}")


def _key_of(line: str) -> str:
    return line.strip().split(":")[0].strip()


def _dedented_key(lines: list[str], line: int) -> tuple[int, int, int | None] | None:
    """For "did not find expected key" at 0-based ``line``: the key line above it that
    is indented less than both the error line and the key lines before it (the one a
    user dedented by mistake), with the sibling key line it should align with and the
    key line it now falls under (None: none, it is top-level)."""
    wanted = _indent(lines[line])
    content = [n for n in range(line - 1, -1, -1)
               if lines[n].strip() and not lines[n].strip().startswith("#")]
    culprit = next((n for n in content if _indent(lines[n]) < wanted), None)
    if culprit is None or not _key_line(lines[culprit]):
        return None
    before = [n for n in content if n < culprit]
    sibling = next((n for n in before if _indent(lines[n]) <= wanted), None)
    if sibling is None or _indent(lines[sibling]) != wanted or not _key_line(lines[sibling]):
        return None
    owner = next((n for n in before if _indent(lines[n]) < _indent(lines[culprit])
                  and _key_line(lines[n])), None)
    return culprit, sibling, owner


def load_yaml(text: str, source: str) -> tuple[Located | None, list[SpecProblem]]:
    """Read one YAML document safely (see :func:`load_yaml_until_error`).

    Args:
        text: the YAML text.
        source: the file name to report problems with.

    Returns:
        ``(document, problems)``, as :func:`load_yaml_until_error`.

    Raises:
        MissingDependency: PyYAML is not installed.
    """
    located, problems, _ = load_yaml_until_error(text, source)
    return located, problems


def load_yaml_until_error(text: str, source: str
                          ) -> tuple[Located | None, list[SpecProblem], int | None]:
    """Read one YAML document safely, and tell where a syntax error's construct begins.

    Args:
        text: the YAML text.
        source: the file name to report problems with.

    Returns:
        ``(document, problems, line)``. A syntax error gives ``(None, [that error],
        line)``, ``line`` the 1-based line where the construct it is in begins (a flow
        bracket's line, a dedented key's, a tab's), before which the text may still be
        read; other problems that stop the reading (a control character, nesting too
        deep) give ``(None, [problems], None)``; others (duplicate keys, merge keys,
        non-scalar keys) come with the document as it could be read, and ``None``.

    Raises:
        MissingDependency: PyYAML is not installed.
    """
    try:
        import yaml
    except ImportError as exc:  # pragma: no cover - the fsm extra
        from ..errors import MissingDependency
        raise MissingDependency("reading a state machine needs the fsm extra: "
                                "pip install 'foreperson[fsm]'") from exc
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    controls = _control_problems(text, source)
    if controls:
        return None, controls, None
    try:
        refused = _shape_problem(yaml, text, loader, source)
        if refused is not None:
            return None, [refused], None
        root = yaml.compose(text, Loader=loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        opened = exc.context_mark
        context = exc.context
        if context and opened is not None and mark is not None \
                and (opened.line, opened.column) != (mark.line, mark.column):
            context += f" (begun at line {opened.line + 1}, column {opened.column + 1})"
        what = " ".join(p for p in (context, exc.problem) if p) or "invalid YAML"
        problem = _syntax_problem(text, source, None if mark is None else mark.line,
                                  None if mark is None else mark.column, what)
        begins = [m.line + 1 for m in (exc.problem_mark, exc.context_mark) if m is not None]
        if problem.line is not None:
            begins.append(problem.line)         # a dedented key, a tab
        return None, [problem], min(begins) if begins else None
    except yaml.YAMLError as exc:
        first = str(exc).split("\n")[0]
        return None, [SpecProblem(source, None, None, f"YAML error: {first}; {_STOPPED}")], None
    if root is None:
        return None, [SpecProblem(source, None, None,
                                  "the file is empty; a machine starts with `fsm:`")], None
    builder = _Builder(yaml, source)
    located = Located(None, source, text=text)
    located.data = builder.build(root, (), located)
    return located, builder.problems, None


def _shape_problem(yaml: Any, text: str, loader: Any, source: str) -> SpecProblem | None:
    """The first place where ``text`` nests deeper than :data:`MAX_YAML_DEPTH` or uses
    an alias inside the node it names, from the parser's events (no recursion); else
    None.

    Raises:
        yaml.YAMLError: the text does not parse.
    """
    open_anchors: list[str | None] = []
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.CollectionStartEvent):
            open_anchors.append(event.anchor)
            if len(open_anchors) > MAX_YAML_DEPTH:
                return _event_problem(source, event, (
                    f"lists and mappings nest more than {MAX_YAML_DEPTH} levels deep here "
                    f"(MAX_YAML_DEPTH = {MAX_YAML_DEPTH}); a machine is much flatter: "
                    "close the brackets, or move the nested data out of the machine"))
        elif isinstance(event, yaml.CollectionEndEvent):
            open_anchors.pop()
        elif isinstance(event, yaml.AliasEvent) and event.anchor in open_anchors:
            return _event_problem(source, event, (
                f"recursive alias *{event.anchor}: it is used inside the node its anchor "
                f"&{event.anchor} names, which would contain itself forever; write the "
                "value out instead"))
    return None


def _event_problem(source: str, event: Any, message: str) -> SpecProblem:
    mark = event.start_mark
    return SpecProblem(source, mark.line + 1, mark.column + 1, message)


class _Builder:
    def __init__(self, yaml: Any, source: str) -> None:
        self.yaml = yaml
        self.source = source
        self.constructor = yaml.constructor.SafeConstructor()
        self.problems: list[SpecProblem] = []
        self.count = 0

    def _at(self, node: Any) -> Mark:
        return Mark(node.start_mark.line + 1, node.start_mark.column + 1)

    def _problem(self, node: Any, message: str) -> None:
        mark = self._at(node)
        self.problems.append(SpecProblem(self.source, mark.line, mark.column, message))

    def build(self, node: Any, path: Path, out: Located, depth: int = 0) -> Any:  # noqa: C901 - one branch per YAML node kind, each with its line in errors
        """Plain data of ``node`` (at ``path``, nested ``depth`` deep); problems are
        recorded, and a refused node reads as None."""
        yaml = self.yaml
        self.count += 1
        if self.count > _MAX_NODES:
            if self.count == _MAX_NODES + 1:
                self._problem(node, f"the document has more than {_MAX_NODES} nodes (aliases "
                                    "expanding?); write it out plainly")
            return None
        if depth > MAX_YAML_DEPTH:      # aliases of nested nodes inside nested nodes
            self._problem(node, f"lists and mappings nest more than {MAX_YAML_DEPTH} "
                                f"levels deep here, aliases expanded (MAX_YAML_DEPTH = "
                                f"{MAX_YAML_DEPTH}): write the value out plainly")
            self.count = _MAX_NODES + 1     # one such problem is enough
            return None
        out.values[path] = node
        tag = node.tag
        if tag == _STR:
            return node.value
        if tag not in _PLAIN_TAGS:
            self._problem(node, f"YAML tag {tag!r} is not allowed in a machine (it is "
                                "read safely, as plain data): remove the tag")
            return None
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, i), out, depth + 1)
                    for i, item in enumerate(node.value)]
        result: dict[str, Any] = {}
        first: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                self._problem(key_node, "merge keys (`<<`) are not supported: write the "
                                        "keys out in full")
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                self._problem(key_node, "a key must be a plain name, not a list or a mapping")
                continue
            key = key_node.value        # names as written: `no:` is the name "no"
            if key in first:
                line = first[key].start_mark.line + 1
                self._problem(key_node, f"duplicate key {key!r} (first at line {line}); YAML "
                                        "would silently keep only the last one: remove or "
                                        "rename one of them")
                continue
            first[key] = key_node
            entry = (*path, key)
            out.keys[entry] = key_node
            result[key] = self.build(value_node, entry, out, depth + 1)
        return result

    def _scalar(self, node: Any) -> Any:
        try:
            value = self.constructor.construct_object(node, deep=True)
        except (ValueError, OverflowError, self.yaml.YAMLError) as exc:
            # e.g. an integer of more than 4,300 digits (Python's conversion limit)
            self._problem(node, f"this value cannot be read: {exc}; write it in quotes, "
                                "or shorter")
            return None
        if isinstance(value, datetime.date | datetime.datetime | bytes):
            return node.value      # a date is data for us: keep it as written
        if isinstance(value, int) and not isinstance(value, bool) \
                and not -_INT64 <= value < _INT64:
            self._problem(node, "this whole number does not fit in 64 bits (CEL's "
                                "integers): write a smaller number, or put it in quotes")
            return None
        return value


def readable_prefix(text: str, source: str, line: int) -> Located | None:
    """The document made of the lines of ``text`` before 1-based ``line`` (where a YAML
    syntax error's construct begins: see :func:`load_yaml_until_error`), so that what
    comes before the error can still be checked; None when that part cannot be read
    cleanly either.

    Args:
        text: the YAML text.
        source: the file name to report problems with.
        line: the first line left out.

    Returns:
        The document, or None.
    """
    located, problems = load_yaml("\n".join(text.split("\n")[:line - 1]), source)
    return None if located is None or problems else located
