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
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

from ..errors import SpecProblem

__all__ = ["MAX_YAML_DEPTH", "Located", "Mark", "Path", "load_yaml"]

Path = tuple[str | int, ...]
"""Where a value is in the document: keys and list indexes from the root."""

_MAX_NODES = 200_000     # an alias bomb stops here instead of eating memory
MAX_YAML_DEPTH = 64
"""How deep lists and mappings may nest in a machine file (seed 003's own files nest 8
deep); deeper is refused at load, aliases included."""
_INT64 = 2 ** 63
_STR = "tag:yaml.org,2002:str"
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
    """

    data: Any
    source: str
    values: dict[Path, Any] = field(default_factory=dict)
    keys: dict[Path, Any] = field(default_factory=dict)

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
        column = mark.column
        info = self.scalar(path)
        if offset is not None and info is not None and info.single_line:
            column += offset + (1 if info.style in ("'", '"') else 0)
        return SpecProblem(self.source, mark.line, column, message)


def load_yaml(text: str, source: str) -> tuple[Located | None, list[SpecProblem]]:
    """Read one YAML document safely.

    Args:
        text: the YAML text.
        source: the file name to report problems with.

    Returns:
        ``(document, problems)``. A syntax error gives ``(None, [that error])``; other
        problems (duplicate keys, merge keys, non-scalar keys) come with the document
        as it could be read.

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
    try:
        refused = _shape_problem(yaml, text, loader, source)
        if refused is not None:
            return None, [refused]
        root = yaml.compose(text, Loader=loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = " ".join(p for p in (exc.context, exc.problem) if p) or "invalid YAML"
        line = mark.line + 1 if mark is not None else None
        column = mark.column + 1 if mark is not None else None
        return None, [SpecProblem(source, line, column,
                                  f"YAML syntax error: {what}; fix the YAML at this place")]
    except yaml.YAMLError as exc:
        return None, [SpecProblem(source, None, None, f"YAML error: {exc}")]
    if root is None:
        return None, [SpecProblem(source, None, None,
                                  "the file is empty; a machine starts with `fsm:`")]
    builder = _Builder(yaml, source)
    located = Located(None, source)
    located.data = builder.build(root, (), located)
    return located, builder.problems


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
