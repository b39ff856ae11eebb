"""Typed context fields: coercion of what agents and actions write, presence, the
CONTEXT block agents read, and ``{{ context.FIELD }}`` templates.

Seed 003: the supervisor's only lever is a typed write; a value that does not fit its
field (an out-of-vocabulary enum value, a wrong type) is refused with what is allowed,
so the writer can correct it, and never misroutes. Requirements are satisfied by
presence, so writing ``""`` (or ``null``) consumes a field and re-arms the states that
require it.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any, Literal

__all__ = [
    "CONTEXT_VALUE_CAP",
    "FieldSpec",
    "FieldType",
    "ItemType",
    "Template",
    "context_block",
    "is_set",
    "render_value",
]

FieldType = Literal["string", "enum", "list", "number", "boolean", "object"]
"""The type of a context field (seed 003: ``string``, ``enum``, ``list``; foreperson adds
``number``, ``boolean`` and ``object``)."""

ItemType = Literal["string", "number", "boolean", "object"]
"""The type of a list field's items (``of:``)."""

CONTEXT_VALUE_CAP = 300
"""Characters of each value shown in an agent's CONTEXT block (seed 003: "capped at 300
chars per value"); a state's description is rendered in full."""


def is_set(value: Any) -> bool:
    """Whether a field holds a value: anything but None, ``""``, ``[]`` and ``{}``.

    Seed 003: a requirement is satisfied by presence; ``0`` and ``false`` are values.
    """
    return not (value is None or value == "" or value == [] or value == {})


def render_value(value: Any) -> str:
    """A value as text: strings as they are, anything else as JSON (``null`` unset)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _article(kind: str) -> str:
    return "an" if kind[0] in "aeiou" else "a"


@dataclass(frozen=True)
class FieldSpec:
    """One declared context field.

    Attributes:
        name: the field's name (``context.NAME`` in CEL and templates).
        type: its type.
        values: the allowed values of an ``enum`` (empty otherwise).
        of: the item type of a ``list`` (None otherwise).
    """

    name: str
    type: FieldType
    values: tuple[str, ...] = ()
    of: ItemType | None = None

    def allowed(self) -> str:
        """What may be written, in words (for error messages and prompts).

        Returns:
            ``one of: a, b, c`` for an enum, ``a string (each write appends it)`` for a
            list of strings, ``a number`` ...
        """
        if self.type == "enum":
            return "one of: " + ", ".join(self.values)
        if self.type == "list":
            return f"{_article(self.of or 'string')} {self.of} (each write appends it)"
        return f"{_article(self.type)} {self.type}"

    def empty(self) -> Any:
        """The value of the field before anything is written (and after it is consumed).

        Returns:
            ``""`` for strings and enums, ``[]`` for lists, ``{}`` for objects, None for
            numbers and booleans.
        """
        if self.type in ("string", "enum"):
            return ""
        if self.type == "list":
            return []
        if self.type == "object":
            return {}
        return None

    def coerce(self, value: Any, *, clear: bool = False) -> Any:
        """``value`` converted to this field's type.

        Strings accept numbers (written as text); enums match their values ignoring
        case and surrounding spaces and give the declared spelling; numbers are CEL
        doubles (``3`` becomes ``3.0``; text such as ``"3.5"`` is read); booleans accept
        ``"true"``/``"false"``; objects accept a JSON object or its text. A list takes
        one item or a list of items, to append (see :meth:`coerce_items`).

        Args:
            value: what was written.
            clear: allow ``None`` / ``""`` (an action consuming the field); an agent may
                not clear a field.

        Returns:
            The converted value.

        Raises:
            ValueError: it does not fit; the message says what is allowed.
        """
        if clear and (value is None or value == ""):
            return self.empty()
        if self.type == "list":
            return self.coerce_items(value)
        return _coerce(self.type, value, self)

    def coerce_items(self, value: Any) -> list[Any]:
        """Items to append to a list field (seed 003: lists only grow by append).

        Args:
            value: one item, or a list of items.

        Returns:
            The items, each converted to the ``of`` type.

        Raises:
            ValueError: an item does not fit ``of``.
        """
        items = value if isinstance(value, list) else [value]
        return [_coerce(self.of or "string", item, self) for item in items]

    def sample(self, variant: int) -> Any:
        """A value of this field's type, for checking CEL expressions at load.

        Args:
            variant: 0 for zero-like values (``""``, ``0.0``, false, the first enum value,
                a one-item list), 1 for others (``"x"``, ``1.0``, true, the last enum
                value, an empty list).

        Returns:
            The sample value.
        """
        if self.type == "enum":
            return self.values[0 if variant == 0 else -1] if self.values else ""
        if self.type == "list":
            item = FieldSpec(self.name, self.of or "string").sample(0)
            return [item] if variant == 0 else []
        return {"string": ("", "x"), "number": (0.0, 1.0), "boolean": (False, True),
                "object": ({}, {})}[self.type][variant]

    def to_json(self) -> dict[str, Any]:
        """The spec as JSON, for a :class:`~foreperson.fsm.Summons` sent elsewhere.

        Returns:
            ``{"name", "type", "values", "of"}``.
        """
        return {"name": self.name, "type": self.type, "values": list(self.values),
                "of": self.of}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FieldSpec:
        """Read a spec written by :meth:`to_json`.

        Args:
            data: the JSON object.

        Returns:
            The spec.

        Raises:
            KeyError: ``name`` or ``type`` is missing.
        """
        return cls(data["name"], data["type"], tuple(data.get("values") or ()),
                   data.get("of"))


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"{_cap(value, 60)!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _coerce(kind: str, value: Any, spec: FieldSpec) -> Any:  # noqa: C901 - one branch per field type of a state machine's context
    what = spec.name if kind == spec.type else f"an item of {spec.name}"
    if kind == "enum":
        if isinstance(value, str):
            wanted = value.strip().casefold()
            for allowed in spec.values:
                if allowed.casefold() == wanted:
                    return allowed
        raise ValueError(f"{what} must be {spec.allowed()}; {_describe(value)} is not one "
                         "of them")
    if kind == "string":
        if isinstance(value, str):
            return value
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        raise ValueError(f"{what} must be a string (text); got {_describe(value)}")
    if kind == "number":
        number: float | None = None
        if isinstance(value, int | float) and not isinstance(value, bool):
            number = float(value)
        elif isinstance(value, str):
            try:
                number = float(value.strip())
            except ValueError:
                number = None
        if number is None or not math.isfinite(number):
            raise ValueError(f"{what} must be a finite number, such as 3 or 2.5; got "
                             f"{_describe(value)}")
        return number
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise ValueError(f"{what} must be true or false; got {_describe(value)}")
    if kind == "object":
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                value = json.loads(value)
        if isinstance(value, dict):
            try:
                return json.loads(json.dumps(value, allow_nan=False))
            except (TypeError, ValueError):
                pass
        raise ValueError(f"{what} must be a JSON object, such as {{\"key\": \"value\"}}; "
                         f"got {_describe(value)}")
    raise ValueError(f"{what}: unknown type {kind!r}")  # pragma: no cover - checked at load


def context_block(fields: Mapping[str, FieldSpec], context: Mapping[str, Any],
                  cap: int = CONTEXT_VALUE_CAP) -> dict[str, str]:
    """The CONTEXT block an agent reads: every set field, in declaration order, its
    value as text capped at ``cap`` characters (seed 003: 300).

    Args:
        fields: the declared fields.
        context: the current values.
        cap: characters per value (an ellipsis marks a cut).

    Returns:
        ``{field: text}`` of the set fields.
    """
    block: dict[str, str] = {}
    for name in fields:
        value = context.get(name)
        if value is None or value == "" or value == [] or value == {}:
            continue                                        # not set (see is_set)
        if value.__class__ is str:
            block[name] = value if len(value) <= cap else value[:cap - 1] + "…"
        else:
            block[name] = _capped(value, cap)
    return block


def _capped(value: Any, cap: int) -> str:
    """``render_value(value)`` capped at ``cap`` characters, without rendering more of a
    long list than the cap shows (a record of 10,000 notes costs the same as of 3)."""
    if isinstance(value, list):
        parts: list[str] = []
        size = 1
        for item in value:
            text = encode_basestring(item) if isinstance(item, str) else \
                json.dumps(item, ensure_ascii=False)
            parts.append(text)
            size += len(text) + 2
            if size > cap:
                return _cap("[" + ", ".join(parts) + ", …]", cap)
        return _cap("[" + ", ".join(parts) + "]", cap)
    if isinstance(value, str):
        return _cap(value, cap)
    return _cap(render_value(value), cap)


_TEMPLATE_FIELD = re.compile(r"\s*context\.([A-Za-z_][A-Za-z0-9_]*)\s*")


@dataclass(frozen=True)
class Template:
    """A state's description with its ``{{ context.FIELD }}`` places.

    Attributes:
        parts: literal text (str) and field places (``("field", name)``) in order.
    """

    parts: tuple[str | tuple[str, str], ...]

    @classmethod
    def parse(cls, text: str) -> tuple[Template, list[tuple[str, int]]]:
        """Split ``text`` into literals and ``{{ context.FIELD }}`` places, in one pass
        (linear in the text: each ``{{`` is paired with the first ``}}`` after it, and
        the search goes on after that ``}}``).

        Returns:
            ``(template, mistakes)``: each mistake is ``(what is wrong, offset)`` for a
            ``{{ ... }}`` that is not ``{{ context.FIELD }}``, and for a ``{{`` that is
            never closed (the rest of the text is then kept as written).
        """
        parts: list[str | tuple[str, str]] = []
        mistakes: list[tuple[str, int]] = []
        position = 0
        while (start := text.find("{{", position)) >= 0:
            end = text.find("}}", start + 2)
            if end < 0:
                shown = text[start:start + 30] + ("…" if len(text) > start + 30 else "")
                mistakes.append((f"template {shown!r} is never closed: a description shows "
                                 "a field as {{ context.FIELD }}; add the `}}`, or write "
                                 "the braces some other way", start))
                break
            if start > position:
                parts.append(text[position:start])
            inner = _TEMPLATE_FIELD.fullmatch(text, start + 2, end)
            whole = text[start:end + 2]
            if inner is None:
                mistakes.append((f"template {whole!r}: a description can show a field as "
                                 "{{ context.FIELD }}, nothing else", start))
                parts.append(whole)
            else:
                parts.append(("field", inner.group(1)))
            position = end + 2
        if position < len(text):
            parts.append(text[position:])
        return cls(tuple(parts)), mistakes

    @property
    def fields(self) -> list[str]:
        """The fields it shows, in order."""
        return [p[1] for p in self.parts if isinstance(p, tuple)]

    def render(self, context: dict[str, Any]) -> str:
        """The text with every place filled from ``context``, in full (unset: empty)."""
        out: list[str] = []
        for part in self.parts:
            if isinstance(part, tuple):
                value = context.get(part[1])
                out.append(render_value(value) if is_set(value) else "")
            else:
                out.append(part)
        return "".join(out)
