"""Reading support tickets from CSV, JSON (a list) or JSONL, with errors that name the
file and line.

Columns are found by name, case-insensitively: the id from ``id`` / ``ticket_id``, the
subject from ``subject`` / ``title``, the body from ``body`` / ``text`` / ``description``
/ ``message``. Without an id column the 1-based row number is the id. A malformed file
raises :class:`~foreperson.errors.InputError` before any work starts; a row with neither
subject nor body is reported in :attr:`TicketFile.skipped`, never dropped silently.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError

__all__ = ["BODY_NAMES", "ID_NAMES", "MAX_TICKET_CHARS", "SUBJECT_NAMES", "Ticket",
           "TicketFile", "find_column", "read_records", "read_tickets"]

ID_NAMES = ("id", "ticket_id", "ticketid", "ticket", "key")
SUBJECT_NAMES = ("subject", "title", "summary")
BODY_NAMES = ("body", "text", "description", "message", "content")


@dataclass(frozen=True)
class Ticket:
    """One support ticket.

    Attributes:
        id: the ticket's id, as text.
        subject: the subject line ("" when absent).
        body: the message.
        line: the 1-based line where its record starts in the input file.
    """

    id: str
    subject: str
    body: str
    line: int

    @property
    def text(self) -> str:
        """Subject and body, as one text."""
        return f"{self.subject}\n{self.body}".strip()


@dataclass
class TicketFile:
    """What was read from one input file.

    Attributes:
        tickets: the usable tickets, in file order.
        skipped: ``(line, id, reason)`` for every record that was not used.
        columns: the column name used for each role (``id``, ``subject``, ``body``).
        path: the file read.
        cut: ``(line, id, characters)`` for every ticket whose text was longer than the
            limit: it is kept, cut to its first ``max_chars`` characters.
    """

    tickets: list[Ticket]
    skipped: list[tuple[int, str, str]] = field(default_factory=list)
    columns: dict[str, str | None] = field(default_factory=dict)
    path: str = ""
    cut: list[tuple[int, str, int]] = field(default_factory=list)


def _format_of(path: Path) -> str:
    if str(path) == "-":
        raise InputError("reading tickets from standard input is not supported: save them "
                         "to a .csv, .json or .jsonl file and give its path", path="-")
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix == ".json":
        return "json"
    if suffix in (".csv", ".tsv", ".txt"):
        return "csv"
    raise InputError(f"unknown file type {suffix!r}: use .csv, .json (a list) or .jsonl",
                     path=str(path))


def _read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError("no such file", path=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=str(path)) from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise InputError(f"not UTF-8 text (byte {exc.start}); re-save the file as UTF-8",
                         path=str(path), line=line) from None


def _delimiter(path: Path, header: str) -> str:
    if path.suffix.lower() == ".tsv" or header.count("\t") > header.count(","):
        return "\t"
    if header.count(";") > header.count(","):
        return ";"
    return ","


def _csv_records(path: Path, text: str) -> Iterator[tuple[int, dict[str, Any]]]:
    delimiter = _delimiter(path, text.split("\n", 1)[0])
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    start = 1
    old_limit = csv.field_size_limit(1 << 30)      # a long ticket body is still a ticket
    try:
        header = next(reader, None)
        if header is None:
            raise InputError("the file is empty: expected a header row", path=str(path), line=1)
        names = [h.strip() for h in header]
        _check_separator(names, delimiter, path)
        for position, name in enumerate(names, start=1):
            if not name:
                raise InputError(f"column {position} of the header has no name",
                                 path=str(path), line=1)
        seen: dict[str, int] = {}
        for position, name in enumerate(names, start=1):
            if name.lower() in seen:
                raise InputError(f"columns {seen[name.lower()]} and {position} are both named "
                                 f"{name!r}", path=str(path), line=1)
            seen[name.lower()] = position
        start = reader.line_num + 1
        for row in reader:
            if not any(cell.strip() for cell in row):
                start = reader.line_num + 1
                continue
            if len(row) != len(names):
                raise InputError(
                    f"{len(row)} fields where the header has {len(names)} "
                    f"(separated by {delimiter!r}); check quoting: a field with the "
                    "separator or a line break must be in double quotes",
                    path=str(path), line=start)
            yield start, dict(zip(names, row, strict=True))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise InputError(f"malformed CSV: {exc}", path=str(path), line=start) from None
    finally:
        csv.field_size_limit(old_limit)


def _check_separator(names: list[str], delimiter: str, path: Path) -> None:
    """A header that did not split but holds another separator: say which.

    Raises:
        InputError: the header is one column with ``|`` (or another separator) in it.
    """
    if len(names) != 1:
        return
    for other in ("|", ";", "\t", ","):
        if other != delimiter and other in names[0]:
            shown = "tab" if other == "\t" else repr(other)
            raise InputError(
                f"the header has no {delimiter!r} but has {shown}: is the separator "
                f"{shown}? Save the file with commas (.csv) or tabs (.tsv)",
                path=str(path), line=1)


def _json_records(path: Path, text: str) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg} (column {exc.colno})",
                         path=str(path), line=exc.lineno) from None
    except RecursionError:
        raise InputError("JSON nested too deeply", path=str(path), line=1) from None
    starts: list[int] | None = None
    if isinstance(data, dict):
        lists = [v for v in data.values() if isinstance(v, list)]
        if len(lists) != 1:
            raise InputError("expected a JSON list of ticket objects (or an object holding "
                             "exactly one such list)", path=str(path), line=1)
        data = lists[0]
        starts = [1] * len(data)       # item lines are only tracked for a top-level list
    if not isinstance(data, list):
        raise InputError(f"expected a JSON list of ticket objects, got {type(data).__name__}",
                         path=str(path), line=1)
    if starts is None:      # line numbers: where each top-level item starts
        starts = _item_lines(text, len(data))
    for i, item in enumerate(data):
        if not isinstance(item, dict):
            raise InputError(f"item {i + 1} is {type(item).__name__}, expected an object",
                             path=str(path), line=starts[i])
        yield starts[i], item


def _item_lines(text: str, count: int) -> list[int]:
    """1-based line of each top-level list item (best effort: a decoder walk)."""
    decoder = json.JSONDecoder()
    lines, pos = [], text.index("[") + 1
    for _ in range(count):
        while text[pos] in " \t\r\n,":
            pos += 1
        lines.append(text.count("\n", 0, pos) + 1)
        _, pos = decoder.raw_decode(text, pos)
    return lines


def _jsonl_records(path: Path, text: str) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON: {exc.msg} (column {exc.colno})",
                             path=str(path), line=number) from None
        if not isinstance(item, dict):
            raise InputError(f"expected a JSON object, got {type(item).__name__}",
                             path=str(path), line=number)
        yield number, item


def read_records(path: str | Path) -> list[tuple[int, dict[str, Any]]]:
    """Every record of a CSV / JSON / JSONL file as ``(line, mapping)``.

    Raises:
        InputError: missing file, not UTF-8, malformed CSV or JSON, wrong shape.
    """
    path = Path(path)
    fmt = _format_of(path)
    text = _read_text(path)
    reader = {"csv": _csv_records, "json": _json_records, "jsonl": _jsonl_records}[fmt]
    return list(reader(path, text))


def find_column(columns: Sequence[str], wanted: Sequence[str], override: str | None,
                *, role: str, path: str) -> str | None:
    """The column playing ``role``: ``override`` when given (must exist), else the first
    of ``wanted`` present (case-insensitive), else None.

    Raises:
        InputError: ``override`` names a column the file does not have.
    """
    lower = {c.lower(): c for c in columns}
    if override:
        if override.lower() not in lower:
            raise InputError(f"no column {override!r} for the {role}; columns are "
                             f"{list(columns)}", path=path)
        return lower[override.lower()]
    return next((lower[w] for w in wanted if w in lower), None)


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


def _as_id(value: Any, *, path: str, line: int) -> str:
    if isinstance(value, bool) or (isinstance(value, float) and not math.isfinite(value)) \
            or isinstance(value, (list, dict)):
        raise InputError(f"ticket id {json.dumps(value)} is not text or a number",
                         path=path, line=line)
    return _as_text(value)


def _ticket_columns(records: list[tuple[int, dict[str, Any]]], where: str,
                    id_column: str | None, subject_column: str | None,
                    body_column: str | None) -> tuple[str | None, str | None, str | None]:
    """The id, subject and body columns of ``records`` (detected, or as overridden).

    Raises:
        InputError: no subject/body column, a body under a name we do not know, or an
            override that names a missing column.
    """
    columns: list[str] = []
    for _, record in records:
        columns.extend(k for k in record if k not in columns)
    id_col = find_column(columns, ID_NAMES, id_column, role="ticket id", path=where)
    subject_col = find_column(columns, SUBJECT_NAMES, subject_column, role="subject", path=where)
    body_col = find_column(columns, BODY_NAMES, body_column, role="body", path=where)
    if records and subject_col is None and body_col is None:
        raise InputError(
            f"no subject or body column: found {columns}; name one with --subject-column "
            "or --body-column", path=where)
    if body_col is not None and body_col == subject_col:
        subject_col = None                    # --body-column subject: the subjects alone
    others = [c for c in columns if c not in (id_col, subject_col)]
    if records and body_col is None and others:
        # a body under another name (message_text, ...) would be left out without a word
        raise InputError(
            f"no body column (looked for {', '.join(BODY_NAMES)}); found {columns}: name it "
            f"with --body-column, or pass --body-column {subject_col} to classify the "
            "subjects alone", path=where)
    return id_col, subject_col, body_col


MAX_TICKET_CHARS = 100_000
"""Characters of subject and body a ticket is read with (default 100,000, about 100 KB):
a longer one is cut to them and noted, so one huge ticket cannot take minutes and
gigabytes, or hold up the batch it is in."""


def read_tickets(path: str | Path, *, id_column: str | None = None,
                 subject_column: str | None = None,
                 body_column: str | None = None,
                 max_chars: int = MAX_TICKET_CHARS) -> TicketFile:
    """Read tickets from ``path``.

    Args:
        path: a .csv, .json (a list of objects) or .jsonl file.
        id_column / subject_column / body_column: override the detected columns.
        max_chars: characters of subject plus body kept per ticket (see
            :data:`MAX_TICKET_CHARS`); a longer ticket is cut and listed in ``cut``.

    Returns:
        a :class:`TicketFile`.

    A row that repeats an earlier one (same id, same subject and body) is processed
    once and reported in :attr:`TicketFile.skipped`.

    Raises:
        InputError: malformed file, no subject/body column, an override that names a
            missing column, or ids shared by rows with different text (every such id
            and its lines in one message).
    """
    path = Path(path)
    records = read_records(path)
    where = str(path)
    id_col, subject_col, body_col = _ticket_columns(records, where, id_column,
                                                    subject_column, body_column)
    out = TicketFile([], columns={"id": id_col, "subject": subject_col, "body": body_col},
                     path=where)
    first_seen: dict[str, tuple[int, str, str]] = {}
    conflicts: dict[str, list[int]] = {}
    for row_number, (line, record) in enumerate(records, start=1):
        ticket_id = (_as_id(record.get(id_col), path=where, line=line) if id_col
                     else str(row_number))
        if not ticket_id:
            out.skipped.append((line, "", "no ticket id"))
            continue
        subject = _as_text(record.get(subject_col)) if subject_col else ""
        body = _as_text(record.get(body_col)) if body_col else ""
        earlier = first_seen.get(ticket_id)
        if earlier is not None:
            if earlier[1:] == (subject, body):
                out.skipped.append((line, ticket_id, f"repeats line {earlier[0]} (same id "
                                    "and text): processed once"))
            else:
                conflicts.setdefault(ticket_id, [earlier[0]]).append(line)
            continue
        first_seen[ticket_id] = (line, subject, body)
        if not subject and not body:
            out.skipped.append((line, ticket_id, "no subject or body text"))
            continue
        size = len(subject) + len(body)
        if size > max_chars:
            out.cut.append((line, ticket_id, size))
            subject = subject[:max_chars]
            body = body[:max(0, max_chars - len(subject))]
        out.tickets.append(Ticket(ticket_id, subject, body, line))
    if conflicts:
        raise _conflicting_ids(conflicts, where)
    return out


def _conflicting_ids(conflicts: dict[str, list[int]], where: str) -> InputError:
    """One error naming every id that rows with different text share."""
    shown = "; ".join(f"{ticket_id!r} at lines {', '.join(map(str, lines))}"
                      for ticket_id, lines in list(conflicts.items())[:20])
    more = f"; and {len(conflicts) - 20} more" if len(conflicts) > 20 else ""
    first = min(lines[1] for lines in conflicts.values())
    return InputError(f"{len(conflicts)} ticket id(s) are used by rows with different text: "
                      f"{shown}{more}; give each ticket its own id (or --id-column)",
                      path=where, line=first)
