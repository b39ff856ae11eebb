"""The re-run guard: a run over an earlier run's task database and results file
continues it, or is refused, naming what differs.

A re-run is allowed when it is the same input (the same ticket ids with the same text),
the same model (the fingerprint of its kind, name and training examples:
:func:`~foreperson.tickets.tasks.fingerprint_of`) and the same triage settings
(:data:`SETTING_OPTIONS`). Anything else would mix two runs' results in one file, so it
is refused before any work, and, from :func:`check_earlier_run`, before the model is
trained.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import ConfigurationError, InputError
from ..work.store import TaskStore
from .reader import TicketFile
from .results import Outbox
from .tasks import CLASSIFY

__all__ = ["SETTING_OPTIONS", "check_earlier_run", "check_rerun"]

SETTING_OPTIONS = {"target_precision": "--target-precision",
                   "min_confidence": "--min-confidence"}
"""The settings a ticket's tasks carry, and the option that sets each."""


def check_earlier_run(tickets: TicketFile, store: TaskStore, out: str | Path, *,
                      fingerprint: str, settings: dict[str, Any]) -> set[str]:
    """What :func:`~foreperson.tickets.runner.run_job` checks first, done before the model
    is trained (a re-run with other examples or one setting changed is refused in well
    under a second): ``fingerprint`` from
    :func:`~foreperson.tickets.tasks.fingerprint_of`, ``settings`` from
    :func:`~foreperson.tickets.tasks.job_settings`.

    Args:
        tickets: the input (:func:`~foreperson.tickets.reader.read_tickets`).
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
        return outbox.sent & {t.id for t in tickets.tickets}
    finally:
        outbox.close()


def check_rerun(tickets: TicketFile, store: TaskStore, sent: set[str], out: str,
                fingerprint: str, settings: dict[str, Any]) -> None:
    """Refuse to mix this input with an earlier run's different tickets, model or
    settings.

    Args:
        tickets: the input (:func:`~foreperson.tickets.reader.read_tickets`).
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
    stored = {str(t.payload.get("ticket_id")): t.payload for t in store.list_tasks()
              if t.kind.startswith(CLASSIFY)}
    where = tickets.path or "<input>"
    ours = {t.id for t in tickets.tickets}
    for ticket in tickets.tickets:
        earlier = stored.get(ticket.id)
        if earlier is None:
            continue
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
    strangers = sorted(set(stored) - ours)
    if strangers:
        raise ConfigurationError(
            f"the task database already holds {len(strangers)} ticket(s) that are not in "
            f"{where} (e.g. {strangers[0]}): it belongs to another input; give this input "
            "its own --db and --out (or --schema with --dsn)")
    others = sorted(sent - ours)
    if others:
        raise ConfigurationError(
            f"{out} already holds results of {len(others)} ticket(s) that are not "
            f"in {where} (e.g. {others[0]}): choose another --out for this input")
    unknown = [i for i in sent & ours if i not in stored]
    if unknown:
        raise ConfigurationError(
            f"{out} already holds results for {len(unknown)} of these tickets "
            f"(e.g. {sorted(unknown)[0]}) that the task database does not know: use another "
            "--out, or the --db of the run that wrote it")


def _check_settings(earlier: dict[str, Any] | None, now: dict[str, Any]) -> None:
    """Name the first setting that differs from the earlier run's.

    Raises:
        ConfigurationError: a setting differs.
    """
    if earlier is None:
        return
    for key, option in SETTING_OPTIONS.items():
        if earlier.get(key) != now.get(key):
            def shown(value: Any) -> str:
                return "not given" if value is None else str(value)
            raise ConfigurationError(
                f"{option} was {shown(earlier.get(key))} in the earlier run on this task "
                f"database and is {shown(now.get(key))} now: run with the same {option}, or "
                "use another --db and --out to process the input again")
