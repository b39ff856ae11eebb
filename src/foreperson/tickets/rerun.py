"""The re-run guard: a run over an earlier run's task database and results file
continues it, or is refused, naming what differs.

A re-run is allowed when it is the same input (the same ticket ids with the same text),
the same model (the fingerprint of its kind, name and training examples:
:func:`~foreperson.tickets.tasks.fingerprint_of`) and the same triage settings
(:data:`SETTING_OPTIONS`). Anything else would mix two runs' results in one file, so it
is refused before any work, and, from :func:`check_earlier_run`, before the model is
trained. A re-run also tries again the tickets an earlier run could not do because the
language model's endpoint was not answering (:func:`revive_endpoint_down`).
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError, InputError
from ..work.store import ReportsWork, TaskStore
from ..work.task import Status
from .reader import Ticket, Tickets
from .results import Outbox
from .tasks import CLASSIFY, endpoint_down

__all__ = ["SETTING_OPTIONS", "check_earlier_run", "check_rerun", "revive_endpoint_down"]

SETTING_OPTIONS = {"target_precision": "--target-precision",
                   "min_confidence": "--min-confidence", "never_send": "--never-send"}
"""The settings a ticket's tasks carry, and the option that sets each."""


def check_earlier_run(tickets: Tickets, store: TaskStore, out: str | Path, *,
                      fingerprint: str, settings: dict[str, Any]) -> set[str]:
    """What :func:`~foreperson.tickets.runner.run_job` checks first, done before the model
    is trained (a re-run with other examples or one setting changed is refused in well
    under a second): ``fingerprint`` from
    :func:`~foreperson.tickets.tasks.fingerprint_of`, ``settings`` from
    :func:`~foreperson.tickets.tasks.job_settings`.

    Args:
        tickets: the input (:func:`~foreperson.tickets.reader.read_tickets` or
            :func:`~foreperson.tickets.reader.scan_tickets`).
        store: the task store of the run.
        out: the results file (not created when missing).
        fingerprint: the model's fingerprint (16 hexadecimal characters).
        settings: the triage settings (``target_precision``, ``min_confidence``).

    Returns:
        the ids of this input's tickets whose lines ``out`` already holds.

    Raises:
        InputError / ConfigurationError: as :func:`check_rerun`, or ``out`` is not a
            results file or is being written by another job.
    """
    if not Path(out).exists():             # nothing written yet (and nothing created)
        check_rerun(tickets, store, set(), str(out), fingerprint, settings)
        return set()
    outbox = Outbox(out)
    try:
        check_rerun(tickets, store, outbox.sent, str(outbox.path), fingerprint, settings)
        return {i for i in outbox.sent if tickets.has_id(i)}
    finally:
        outbox.close()


_CHUNK = 500
"""Tickets whose stored tasks are read per query by the checks."""


def check_rerun(tickets: Tickets, store: TaskStore, sent: set[str], out: str,
                fingerprint: str, settings: dict[str, Any]) -> None:
    """Refuse to mix this input with an earlier run's different tickets, model or
    settings.

    The input is read through once, :data:`_CHUNK` tickets at a time, each chunk's
    stored classify tasks fetched in one query: memory stays the same whatever the
    number of tickets, and with an empty task database nothing is read at all.

    Args:
        tickets: the input (:func:`~foreperson.tickets.reader.read_tickets` or
            :func:`~foreperson.tickets.reader.scan_tickets`).
        store: the task store of the run.
        sent: the ticket ids the results file already holds.
        out: the results file, for the messages.
        fingerprint: the model's fingerprint (16 hexadecimal characters).
        settings: the triage settings (``target_precision``, ``min_confidence``).

    Raises:
        InputError: a ticket id already stored with other text (file and line named).
        ConfigurationError: the task database holds tickets that are not in this input,
            or ones processed with another model, examples or setting (named), or --out
            holds results of other tickets.
    """
    where = tickets.path or "<input>"
    stored_total = sum(_classify_counts(store).values())
    matched, unknown, first_unknown = 0, 0, None
    for chunk in tickets.chunks(_CHUNK):
        stored = _stored_payloads(store, chunk) if stored_total else {}
        for ticket in chunk:
            earlier = stored.get(ticket.id)
            if earlier is None:
                if ticket.id in sent:
                    unknown += 1
                    first_unknown = min(first_unknown or ticket.id, ticket.id)
                continue
            matched += 1
            _check_ticket(earlier, ticket, fingerprint, settings, where, out)
    if stored_total > matched:
        stranger = _a_stranger(store, tickets)
        raise ConfigurationError(
            f"the task database already holds {stored_total - matched} ticket(s) that are "
            f"not in {where}" + (f" (e.g. {stranger})" if stranger else "") + ": it belongs "
            "to another input; give this input its own --db and --out (or --schema with "
            "--dsn)")
    others = sorted(i for i in sent if not tickets.has_id(i))
    if others:
        raise ConfigurationError(
            f"{out} already holds results of {len(others)} ticket(s) that are not "
            f"in {where} (e.g. {others[0]}): choose another --out for this input")
    if unknown:
        raise ConfigurationError(
            f"{out} already holds results for {unknown} of these tickets "
            f"(e.g. {first_unknown}) that the task database does not know: use another "
            "--out, or the --db of the run that wrote it")


def _stored_payloads(store: TaskStore, chunk: list[Ticket]) -> dict[str, dict[str, Any]]:
    """Ticket id -> payload of the stored classify task of each ticket of ``chunk``
    (finished ones in one query, the few unfinished one by one)."""
    ids = [f"{t.id}/classify" for t in chunk]
    found = store.finished_among(ids)
    for task_id in ids:
        if task_id not in found:
            task = store.get(task_id)
            if task is not None:
                found[task_id] = task
    return {str(t.payload.get("ticket_id")): t.payload for t in found.values()
            if t.kind.startswith(CLASSIFY)}


def _check_ticket(earlier: dict[str, Any], ticket: Ticket, fingerprint: str,
                  settings: dict[str, Any], where: str, out: str) -> None:
    """One input ticket against the payload stored for its id by an earlier run.

    Raises:
        ConfigurationError: another model or examples, or another setting (named).
        InputError: another text under that id (file and line named).
    """
    if earlier.get("model", fingerprint) != fingerprint:
        raise ConfigurationError(
            "the tickets in this task database were processed with other --examples "
            "(another file, or other --examples-label-column / --examples-text-column) "
            "or another --model: use the same as that run, or another --db and --out "
            f"(or delete the task database and {out} to start again)")
    if (earlier.get("subject"), earlier.get("body")) != (ticket.subject, ticket.body):
        raise InputError(
            f"ticket {ticket.id} is not the ticket with that id already processed in "
            "this task database (an earlier run on other input): use another --db (or "
            "--schema with --dsn) and --out for this input", path=where, line=ticket.line)
    _check_settings(earlier.get("settings"), settings)


def _classify_counts(store: TaskStore) -> dict[str, int]:
    """Classify tasks in the store per kind (from its aggregates: no table scan)."""
    if isinstance(store, ReportsWork):
        counts = store.counts_by_kind()
        return {kind: sum(by_status.values()) for kind, by_status in counts.items()
                if kind.startswith(CLASSIFY)}
    out: dict[str, int] = {}          # a store without aggregates: counted by listing
    for task in store.list_tasks():
        if task.kind.startswith(CLASSIFY):
            out[task.kind] = out.get(task.kind, 0) + 1
    return out


def _a_stranger(store: TaskStore, tickets: Tickets) -> str | None:
    """A ticket id the task database holds that is not in ``tickets`` (for the message;
    read a page at a time), or None when none is found."""
    for kind in _classify_counts(store):
        offset = 0
        while page := store.list_tasks(kind=kind, limit=1000, offset=offset):
            for task in page:
                ticket_id = str(task.payload.get("ticket_id"))
                if not tickets.has_id(ticket_id):
                    return ticket_id
            offset += len(page)
    return None


def _check_settings(earlier: dict[str, Any] | None, now: dict[str, Any]) -> None:
    """Name the first setting that differs from the earlier run's.

    Raises:
        ConfigurationError: a setting differs.
    """
    if earlier is None:
        return
    for key, option in SETTING_OPTIONS.items():
        if key == "never_send":
            _check_phrases(earlier.get(key), now.get(key))
            continue
        if earlier.get(key) != now.get(key):
            def shown(value: Any) -> str:
                return "not given" if value is None else str(value)
            raise ConfigurationError(
                f"{option} was {shown(earlier.get(key))} in the earlier run on this task "
                f"database and is {shown(now.get(key))} now: run with the same {option}, or "
                "use another --db and --out to process the input again")


def _check_phrases(earlier: list[list[str]] | None, now: list[list[str]] | None) -> None:
    """The ``--never-send`` phrases of a re-run against the earlier run's: the same
    phrases (in any order, case or file) pass; otherwise what was added and removed is
    named.

    Raises:
        ConfigurationError: the phrases differ.
    """
    before = {phrase.casefold(): phrase for phrase, _ in earlier or ()}
    after = {phrase.casefold(): phrase for phrase, _ in now or ()}
    if before.keys() == after.keys():
        return
    if not after:
        what = "not given now"
    elif not before:
        what = "given now and was not in the earlier run"
    else:
        def some(keys: set[str], phrases: dict[str, str]) -> str:
            shown = ", ".join(repr(phrases[k]) for k in sorted(keys)[:3])
            return shown + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")
        added, removed = after.keys() - before.keys(), before.keys() - after.keys()
        parts = ([f"adds {some(added, after)}"] if added else []) + (
            [f"drops {some(removed, before)}"] if removed else [])
        what = "changed since the earlier run: it " + " and ".join(parts)
    raise ConfigurationError(
        f"--never-send is {what} on this task database; its tickets' drafts were checked "
        "against the earlier phrases: run with the same phrases, or use another --db and "
        "--out to process the input again")


def revive_endpoint_down(tickets: Tickets, store: TaskStore,
                         kinds: Collection[str]) -> list[str]:
    """Put back to PENDING, with fresh attempts, the tasks of this input's tickets that
    an earlier run left DEAD because the language model's endpoint was not answering
    (:func:`~foreperson.tickets.tasks.endpoint_down`), with the tasks parked behind them:
    the ticket was never wrong, the server was down, so running the job again once it
    answers does them. Other DEAD tasks stay DEAD (``foreperson retry`` revives them).

    Args:
        tickets: the input.
        store: the task store of the run.
        kinds: the job's task kinds (:attr:`~foreperson.tickets.tasks.TicketJob.kinds`);
            tasks of other kinds are left alone.

    Returns:
        the ids of the tickets whose tasks were put back, in the store's order.
    """
    down = [t for t in store.list_tasks(status=Status.DEAD)
            if t.kind in kinds and endpoint_down(t.error) is not None
            and tickets.has_id(str(t.payload.get("ticket_id")))]
    if not down:
        return []
    store.retry_dead([t.id for t in down])
    return list(dict.fromkeys(str(t.payload.get("ticket_id")) for t in down))
