"""Reading support tickets from CSV, JSON (a list) or JSONL, with errors that name the
file and line.

Columns are found by name, case-insensitively: the id from ``id`` / ``ticket_id``, the
subject from ``subject`` / ``title``, the body from ``body`` / ``text`` / ``description``
/ ``message``. Without an id column the 1-based row number is the id. A malformed file
raises :class:`~foreperson.errors.InputError` before any work starts; a row with neither
subject nor body is reported in :attr:`TicketFile.skipped`, never dropped silently.
"""

from __future__ import annotations

import bisect
import csv
import itertools
import json
import math
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError

__all__ = ["BODY_NAMES", "ID_NAMES", "MAX_TICKET_CHARS", "SUBJECT_NAMES", "Ticket",
           "TicketFile", "TicketStream", "Tickets", "find_column", "iter_records",
           "read_records", "read_tickets", "scan_tickets"]

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
        nul: ``(line, id, count)`` for every ticket whose text held NUL bytes: they are
            removed.
    """

    tickets: list[Ticket]
    skipped: list[tuple[int, str, str]] = field(default_factory=list)
    columns: dict[str, str | None] = field(default_factory=dict)
    path: str = ""
    cut: list[tuple[int, str, int]] = field(default_factory=list)
    nul: list[tuple[int, str, int]] = field(default_factory=list)

    @property
    def count(self) -> int:
        """The number of usable tickets."""
        return len(self.tickets)

    def __iter__(self) -> Iterator[Ticket]:
        """The usable tickets, in file order."""
        return iter(self.tickets)

    def chunks(self, size: int) -> Iterator[list[Ticket]]:
        """The tickets in file order, ``size`` at a time (the last chunk may be shorter)."""
        return (self.tickets[i:i + size] for i in range(0, len(self.tickets), size))

    def has_id(self, ticket_id: str) -> bool:
        """Whether a ticket of this file has ``ticket_id``."""
        ids = self.__dict__.get("_ids")
        if ids is None or len(ids) != len(self.tickets):
            ids = self.__dict__["_ids"] = {t.id for t in self.tickets}
        return ticket_id in ids


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


def _text_lines(path: Path) -> Iterator[str]:
    """The lines of ``path`` as text, each with its line ending, read as they are needed
    (a line at a time, never the whole file); a UTF-8 byte-order mark is dropped.

    Raises:
        InputError: missing or unreadable file, or a line that is not UTF-8 (its line
            and the byte's offset in the file named).
    """
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise InputError("no such file", path=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=str(path)) from None
    with handle:
        offset = 0
        try:
            for number, raw in enumerate(handle, start=1):
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise InputError(f"not UTF-8 text (byte {offset + exc.start}); re-save "
                                     "the file as UTF-8", path=str(path), line=number) from None
                if number == 1 and text.startswith("\ufeff"):
                    text = text[1:]
                offset += len(raw)
                yield text
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror}", path=str(path)) from None


def _delimiter(path: Path, header: str) -> str:
    if path.suffix.lower() == ".tsv" or header.count("\t") > header.count(","):
        return "\t"
    if header.count(";") > header.count(","):
        return ";"
    return ","


def _csv_records(path: Path, lines: Iterator[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """The rows of a CSV file (its lines, read as needed) as ``(line, mapping)``.

    Raises:
        InputError: an empty file, a bad header, malformed CSV or a row of another
            width (file and line named).
    """
    first = next(lines, None)
    if first is None:
        raise InputError("the file is empty", path=str(path))
    delimiter = _delimiter(path, first.split("\n", 1)[0])
    reader = csv.reader(itertools.chain([first], lines), delimiter=delimiter, strict=True)
    start = 1
    old_limit = csv.field_size_limit(1 << 30)      # a long ticket body is still a ticket
    try:
        header = next(reader, None)
        if header is None:
            raise InputError("the file is empty", path=str(path))
        names = [h.strip() for h in header]
        _check_header(names, delimiter, path)
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


def _check_header(names: list[str], delimiter: str, path: Path) -> None:
    """A CSV header names every column once.

    Raises:
        InputError: a column without a name, two with one name, or another separator.
    """
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


_TOO_DEEP = ("JSON nested too deeply (lists or objects inside each other thousands of "
             "levels down): a ticket is an object of text fields; fix or remove this line")


def _json_records(path: Path, lines: Iterator[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """The items of a JSON list (or of the one list an object holds) as ``(line,
    mapping)``. A JSON list is read whole: for a very large input use JSON Lines or CSV,
    which are read a line at a time.

    Raises:
        InputError: invalid JSON, nested too deeply, or not a list of objects.
    """
    text = "".join(lines)
    if not text.strip():
        raise InputError("the file is empty", path=str(path))
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg} (column {exc.colno})",
                         path=str(path), line=exc.lineno) from None
    except RecursionError:
        raise InputError(_TOO_DEEP, path=str(path), line=1) from None
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
    line, counted = 1, 0            # lines counted up to ``counted``: linear, not quadratic
    for _ in range(count):
        while text[pos] in " \t\r\n,":
            pos += 1
        line += text.count("\n", counted, pos)
        counted = pos
        lines.append(line)
        _, pos = decoder.raw_decode(text, pos)
    return lines


def _jsonl_records(path: Path, lines: Iterator[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """The objects of a JSON Lines file (its lines, read as needed) as ``(line, mapping)``.

    Raises:
        InputError: a line that is not JSON, is nested too deeply, or is not an object
            (file and line named).
    """
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON: {exc.msg} (column {exc.colno})",
                             path=str(path), line=number) from None
        except RecursionError:
            raise InputError(_TOO_DEEP, path=str(path), line=number) from None
        if not isinstance(item, dict):
            raise InputError(f"expected a JSON object, got {type(item).__name__}",
                             path=str(path), line=number)
        yield number, item


def iter_records(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Every record of a CSV / JSON / JSONL file as ``(line, mapping)``, read as they are
    needed: CSV and JSON Lines a line at a time (memory does not grow with the file), a
    JSON list whole.

    Raises:
        InputError: an unknown file type (at once); missing file, not UTF-8, malformed
            CSV or JSON, nested too deeply, wrong shape (as the records are read).
    """
    path = Path(path)
    reader = {"csv": _csv_records, "json": _json_records,
              "jsonl": _jsonl_records}[_format_of(path)]
    return reader(path, _text_lines(path))


def read_records(path: str | Path) -> list[tuple[int, dict[str, Any]]]:
    """Every record of a CSV / JSON / JSONL file as ``(line, mapping)``, in a list (see
    :func:`iter_records` to read a large file without holding it).

    Raises:
        InputError: missing file, not UTF-8, malformed CSV or JSON, wrong shape.
    """
    return list(iter_records(path))


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


def _columns_of(path: Path) -> tuple[list[str], bool]:
    """The column names of ``path`` (every key of every record, in order of first use;
    a CSV's header) and whether it has any record.

    Raises:
        InputError: the file cannot be read.
    """
    columns: list[str] = []
    seen: set[str] = set()
    records = False
    csv_file = _format_of(path) == "csv"
    for _, record in iter_records(path):
        records = True
        for key in record:
            if key not in seen:
                seen.add(key)
                columns.append(key)
        if csv_file:
            break                          # every row has the header's names
    return columns, records


def _ticket_columns(columns: list[str], records: bool, where: str,
                    id_column: str | None, subject_column: str | None,
                    body_column: str | None) -> tuple[str | None, str | None, str | None]:
    """The id, subject and body columns among ``columns`` (detected, or as overridden);
    ``records``: whether the file has any record (an empty one needs no text column).

    Raises:
        InputError: no subject/body column, a body under a name we do not know, or an
            override that names a missing column.
    """
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


def _fields(record: dict[str, Any], row_number: int, columns: tuple[str | None, ...], *,
            where: str, line: int) -> tuple[str, str, str]:
    """``(id, subject, body)`` of one record ("" for what it lacks).

    Raises:
        InputError: an id that is not text or a number.
    """
    id_col, subject_col, body_col = columns
    try:
        ticket_id = (_as_id(record.get(id_col), path=where, line=line) if id_col
                     else str(row_number))
        subject = _as_text(record.get(subject_col)) if subject_col else ""
        body = _as_text(record.get(body_col)) if body_col else ""
    except RecursionError:        # a field nested almost as deep as JSON allows
        raise InputError(_TOO_DEEP, path=where, line=line) from None
    if "\x00" in subject or "\x00" in body or "\x00" in ticket_id:
        # NUL bytes (binary garbage in an export) are removed; scan_tickets reports them
        ticket_id, subject, body = (v.replace("\x00", "") for v in (ticket_id, subject, body))
    return ticket_id, subject, body


def _nul_bytes(record: dict[str, Any]) -> int:
    """NUL characters in a record's text values."""
    return sum(v.count("\x00") for v in record.values() if isinstance(v, str))


def _cut(subject: str, body: str, max_chars: int) -> tuple[str, str]:
    """Subject and body cut to ``max_chars`` characters together (the subject first)."""
    subject = subject[:max_chars]
    return subject, body[:max(0, max_chars - len(subject))]


def _sorted_hashes(values: array[int]) -> Any:
    """``values`` sorted (a NumPy array when NumPy is there, else a list)."""
    try:
        import numpy as np
    except ImportError:            # pragma: no cover - NumPy comes with the tickets extra
        return sorted(values)
    return np.sort(np.frombuffer(values, dtype=np.int64)) if len(values) else np.zeros(0)


def _repeated(hashes: array[int]) -> set[int]:
    """Positions in ``hashes`` of every value that occurs more than once."""
    try:
        import numpy as np
    except ImportError:            # pragma: no cover - NumPy comes with the tickets extra
        first: dict[int, int] = {}
        out: set[int] = set()
        for i, value in enumerate(hashes):
            if value in first:
                out.update((first[value], i))
            else:
                first[value] = i
        return out
    if len(hashes) < 2:
        return set()
    values = np.frombuffer(hashes, dtype=np.int64)
    order = np.argsort(values, kind="stable")
    same = np.flatnonzero(values[order][1:] == values[order][:-1])
    return {int(i) for i in order[same]} | {int(i) for i in order[same + 1]}


class TicketStream:
    """The tickets of one file, checked whole but never held: iterating reads the file
    again, a record at a time (CSV and JSON Lines a line at a time; a JSON list whole).

    Built by :func:`scan_tickets`, which reads the file once to the end before any work
    starts: every malformed record, every unusable row and every id shared by rows with
    different text is found then. What it keeps is small: the skipped and cut rows, and
    a 64-bit hash of each ticket's id (8 bytes a ticket) to answer :meth:`has_id`.

    Attributes:
        path: the file.
        columns: the column name used for each role (``id``, ``subject``, ``body``).
        skipped: ``(line, id, reason)`` for every record that is not used.
        cut: ``(line, id, characters)`` for every ticket cut to ``max_chars``.
        count: the number of usable tickets.
    """

    def __init__(self, path: Path, columns: tuple[str | None, str | None, str | None], *,
                 max_chars: int, skipped: list[tuple[int, str, str]],
                 cut: list[tuple[int, str, int]], count: int, drop: set[int],
                 ids: Any, stamp: tuple[int, int],
                 nul: list[tuple[int, str, int]] | None = None) -> None:
        self.path = str(path)
        self.columns: dict[str, str | None] = dict(zip(("id", "subject", "body"), columns,
                                                       strict=True))
        self.skipped = skipped
        self.cut = cut
        self.nul = nul or []
        self.count = count
        self._file = path
        self._roles = columns
        self._max_chars = max_chars
        self._drop = drop                # rows (1-based numbers) repeating an earlier row
        self._ids = ids                  # sorted hashes of the tickets' ids
        self._stamp = stamp

    def __iter__(self) -> Iterator[Ticket]:
        """The usable tickets in file order, read from the file now.

        Raises:
            InputError: the file changed since it was checked (size or modification
                time), or cannot be read any more.
        """
        if _stamp(self._file) != self._stamp:
            raise InputError("the file changed while the job was reading it: leave the "
                             "input as it is until the job ends, then run the same command "
                             "again", path=self.path)
        for row_number, (line, record) in enumerate(iter_records(self._file), start=1):
            if row_number in self._drop:
                continue
            ticket_id, subject, body = _fields(record, row_number, self._roles,
                                               where=self.path, line=line)
            if not ticket_id or not (subject or body):
                continue
            if len(subject) + len(body) > self._max_chars:
                subject, body = _cut(subject, body, self._max_chars)
            yield Ticket(ticket_id, subject, body, line)

    def chunks(self, size: int) -> Iterator[list[Ticket]]:
        """The tickets in file order, ``size`` at a time (the last chunk may be shorter).

        Raises:
            InputError: as :meth:`__iter__`.
        """
        return _chunks(iter(self), size)

    def has_id(self, ticket_id: str) -> bool:
        """Whether a ticket of this file has ``ticket_id`` (by a 64-bit hash of it: a
        chance of about one in 10^13 of a wrong yes for a million tickets)."""
        key = hash(ticket_id)
        if isinstance(self._ids, list):    # pragma: no cover - without NumPy
            i = bisect.bisect_left(self._ids, key)
        else:
            i = int(self._ids.searchsorted(key))
        return i < len(self._ids) and int(self._ids[i]) == key


Tickets = TicketFile | TicketStream
"""The input of a run: read whole (:class:`TicketFile`) or streamed
(:class:`TicketStream`); both give ``count``, ``path``, ``skipped``, iteration in file
order, ``chunks(size)`` and ``has_id``."""


def _chunks(tickets: Iterator[Ticket], size: int) -> Iterator[list[Ticket]]:
    while chunk := list(itertools.islice(tickets, size)):
        yield chunk


def _stamp(path: Path) -> tuple[int, int]:
    """Size and modification time of ``path`` (nanoseconds); ``(-1, -1)`` when gone."""
    try:
        info = path.stat()
    except OSError:
        return (-1, -1)
    return (info.st_size, info.st_mtime_ns)


def scan_tickets(path: str | Path, *, id_column: str | None = None,
                 subject_column: str | None = None, body_column: str | None = None,
                 max_chars: int = MAX_TICKET_CHARS) -> TicketStream:
    """Check every record of ``path`` without holding them, and return a
    :class:`TicketStream` that reads the tickets again as they are needed.

    The file is read two or three times: its columns (a CSV's header; every key of a
    JSON file), then every record to the end, and only when two rows share an id, once
    more for those rows. Memory is about 32 bytes a row while scanning and 8 bytes a
    ticket afterwards, whatever the size of the tickets.

    Args / Raises / rules: as :func:`read_tickets`.

    Returns:
        the :class:`TicketStream`.
    """
    path = Path(path)
    where = str(path)
    stamp = _stamp(path)
    columns, records = _columns_of(path)
    roles = _ticket_columns(columns, records, where, id_column, subject_column, body_column)
    skipped: list[tuple[int, str, str]] = []
    empty: list[tuple[int, int, str]] = []      # (row, line, id) of rows without text
    cut: list[tuple[int, int, str, int]] = []   # (row, line, id, characters)
    nul: list[tuple[int, int, str, int]] = []   # (row, line, id, NUL bytes removed)
    rows, id_hashes, text_hashes, kept = array("q"), array("q"), array("q"), array("q")
    with_text = 0
    for row_number, (line, record) in enumerate(iter_records(path), start=1):
        ticket_id, subject, body = _fields(record, row_number, roles, where=where, line=line)
        if not ticket_id:
            skipped.append((line, "", "no ticket id"))
            continue
        nuls = _nul_bytes(record)
        if nuls:
            nul.append((row_number, line, ticket_id, nuls))
        rows.append(row_number)
        id_hashes.append(hash(ticket_id))
        text_hashes.append(hash((subject, body)))
        if not subject and not body:
            empty.append((row_number, line, ticket_id))
            continue
        with_text += 1
        kept.append(hash(ticket_id))
        size = len(subject) + len(body)
        if size > max_chars:
            cut.append((row_number, line, ticket_id, size))
    shared = {rows[i] for i in _repeated(id_hashes)}
    del id_hashes, text_hashes
    drop: set[int] = set()
    if shared:
        repeats, dropped_with_text = _resolve_shared(path, roles, shared, where)
        skipped += [(line, ticket_id, reason) for line, ticket_id, reason, _ in repeats]
        drop = {row for *_, row in repeats}
        with_text -= dropped_with_text
    skipped += [(line, ticket_id, "no subject or body text")
                for row, line, ticket_id in empty if row not in drop]
    skipped.sort(key=lambda s: s[0])
    return TicketStream(path, roles, max_chars=max_chars, skipped=skipped,
                        cut=[(line, i, n) for row, line, i, n in cut if row not in drop],
                        count=with_text, drop=drop, ids=_sorted_hashes(kept), stamp=stamp,
                        nul=[(line, i, n) for row, line, i, n in nul if row not in drop])


def _resolve_shared(path: Path, roles: tuple[str | None, str | None, str | None],
                    shared: set[int], where: str
                    ) -> tuple[list[tuple[int, str, str, int]], int]:
    """Read the rows ``shared`` (numbers of rows whose id hash another row has) again
    and sort them out: a row repeating an earlier one (same id, same text) is processed
    once; rows with one id and different text are an error.

    Returns:
        ``(line, id, reason, row)`` of each repeat, and how many of them have text.

    Raises:
        InputError: ids shared by rows with different text (every such id and its lines).
    """
    first_seen: dict[str, tuple[int, str, str]] = {}
    conflicts: dict[str, list[int]] = {}
    repeats: list[tuple[int, str, str, int]] = []
    with_text = 0
    for row_number, (line, record) in enumerate(iter_records(path), start=1):
        if row_number not in shared:
            continue
        ticket_id, subject, body = _fields(record, row_number, roles, where=where, line=line)
        earlier = first_seen.get(ticket_id)
        if earlier is None:
            first_seen[ticket_id] = (line, subject, body)
        elif earlier[1:] == (subject, body):
            repeats.append((line, ticket_id, f"repeats line {earlier[0]} (same id and "
                            "text): processed once", row_number))
            with_text += bool(subject or body)
        else:
            conflicts.setdefault(ticket_id, [earlier[0]]).append(line)
    if conflicts:
        raise _conflicting_ids(conflicts, where)
    return repeats, with_text


def read_tickets(path: str | Path, *, id_column: str | None = None,
                 subject_column: str | None = None,
                 body_column: str | None = None,
                 max_chars: int = MAX_TICKET_CHARS) -> TicketFile:
    """Read tickets from ``path``, every one held in memory (see :func:`scan_tickets`
    for a file too large for that).

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
        InputError: malformed file (nested too deeply included), no subject/body column,
            an override that names a missing column, or ids shared by rows with
            different text (every such id and its lines in one message).
    """
    stream = scan_tickets(path, id_column=id_column, subject_column=subject_column,
                          body_column=body_column, max_chars=max_chars)
    return TicketFile(list(stream), skipped=stream.skipped, columns=stream.columns,
                      path=stream.path, cut=stream.cut, nul=stream.nul)


def _conflicting_ids(conflicts: dict[str, list[int]], where: str) -> InputError:
    """One error naming every id that rows with different text share."""
    shown = "; ".join(f"{ticket_id!r} at lines {', '.join(map(str, lines))}"
                      for ticket_id, lines in list(conflicts.items())[:20])
    more = f"; and {len(conflicts) - 20} more" if len(conflicts) > 20 else ""
    first = min(lines[1] for lines in conflicts.values())
    return InputError(f"{len(conflicts)} ticket id(s) are used by rows with different text: "
                      f"{shown}{more}; give each ticket its own id (or --id-column)",
                      path=where, line=first)
