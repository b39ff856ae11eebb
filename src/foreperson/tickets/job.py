"""The nightly ticket job of seed 000: classify every ticket, draft a reply, triage.

Each ticket becomes three tasks of one run, linked by ``depends_on``::

    classify  ->  draft  ->  triage

The triage task's result is the ticket's output record. The job submits the tasks and
awaits the triage handles as they complete (``Supervisor.as_completed``), writing each
record to the output file (the "send") through the :class:`Outbox`: from stored
results only, so a worker whose lease was lost cannot complete and its late result
never reaches the file. The outbox is its own ledger, and the send is at least once
with a key (the ticket id) that the file dedupes: a re-run after a crash skips every
ticket already in the file and writes the ones whose results were stored but not yet
written. The cost per completed ticket is constant: no table scan while the job runs.

Everything the task functions need is in a :class:`TicketJob` (the model and its
fingerprint): no module state. ``foreperson worker foreperson.tickets.job`` builds one
from the environment (see :meth:`TicketJob.from_environment`).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import socket
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.to_thread

from ..errors import ConfigurationError, GiveUp, InputError, RunError
from ..work.app import App
from ..work.handles import TaskHandle
from ..work.leases import DEFAULT_LEASE_S
from ..work.store import TaskStore
from ..work.supervisor import Supervisor
from ..work.task import Status, Task
from ..work.worker import Worker, current_batch, current_task
from .model import Classification, TicketModel, bundled_examples, load_examples
from .reader import Ticket, TicketFile

__all__ = ["CLASSIFY", "DRAFT", "JOB_WORKER", "OUTPUT_FIELDS", "TRIAGE", "JobProgress",
           "JobReport", "Outbox", "TicketJob", "check_earlier_run", "check_output_path",
           "check_writable_path", "fingerprint_of", "job_settings", "kinds_for", "local_workers",
           "model_fingerprint", "run_job", "ticket_app", "ticket_tasks"]

CLASSIFY, DRAFT, TRIAGE = "classify_ticket", "draft_reply", "triage_ticket"
OUTPUT_FIELDS = ("id", "category", "confidence", "priority", "language", "needs_human",
                 "reason", "draft_reply", "attempts")
JOB_WORKER = "job@"
"""Prefix of the names of a ticket job's own local workers (``job@host:pid:wN``)."""

SETTING_OPTIONS = {"target_precision": "--target-precision",
                   "min_confidence": "--min-confidence"}
"""The settings a ticket's tasks carry, and the option that sets each."""


def model_fingerprint(model: Any) -> str:
    """A short hash of what decides a ticket's classification and draft: the model's
    kind and name and every training example (:func:`fingerprint_of`). Stored in each
    task's payload and kind, so a re-run with other examples (or a worker process
    configured differently) is noticed. The triage thresholds travel in the payload
    instead (``settings``)."""
    return fingerprint_of(type(model).__name__, getattr(model, "model_name", None),
                          getattr(model, "examples", ()))


def fingerprint_of(kind: str, model_name: str | None, examples: Iterable[Any]) -> str:
    """:func:`model_fingerprint` from its parts, before any model is trained: ``kind``
    is the model's class name (``TicketModel``, ``LlmTicketModel``), ``model_name`` the
    language model's name (None offline), ``examples`` the training examples.

    Returns:
        16 hexadecimal characters.
    """
    digest = hashlib.sha256(kind.encode())
    digest.update(repr(model_name).encode())
    for example in examples:
        digest.update(json.dumps([example.text, example.category, example.answer,
                                  example.priority,
                                  getattr(example, "language", "")]).encode())
    return digest.hexdigest()[:16]


def job_settings(target_precision: float, min_confidence: float | None) -> dict[str, Any]:
    """The triage settings every task of a job carries (compared on a re-run)."""
    return {"target_precision": target_precision, "min_confidence": min_confidence}


def kinds_for(fingerprint: str) -> tuple[str, str, str]:
    """The classify / draft / triage kinds of a model: ``classify_ticket:<fingerprint>`` …

    The model is part of the kind, so a worker process configured with other examples
    or another model never claims the job's tasks (a worker claims only the kinds it
    can do) instead of failing them."""
    return (f"{CLASSIFY}:{fingerprint}", f"{DRAFT}:{fingerprint}", f"{TRIAGE}:{fingerprint}")


def ticket_tasks(ticket: Ticket, *, model: str = "", max_attempts: int = 3,
                 run_id: str | None = None,
                 settings: dict[str, Any] | None = None) -> list[Task]:
    """The three tasks of one ticket, with ids derived from the ticket id (so adding the
    same ticket twice is harmless).

    Args:
        ticket: the ticket.
        model: the :func:`model_fingerprint` the tasks must be run with (it is part of
            their kinds).
        max_attempts: attempts per task.
        run_id: the job's run.
        settings: the triage settings (``target_precision``, ``min_confidence``), in
            every task's payload.

    Returns:
        ``[classify, draft, triage]``, linked by ``depends_on``.
    """
    classify_kind, draft_kind, triage_kind = kinds_for(model)
    extra = {"settings": dict(settings)} if settings else {}
    text = {"ticket_id": ticket.id, "subject": ticket.subject, "body": ticket.body,
            "model": model, **extra}
    classify = Task(classify_kind, text, id=f"{ticket.id}/classify",
                    max_attempts=max_attempts, run_id=run_id)
    draft = Task(draft_kind, {"ticket_id": ticket.id, "model": model},
                 id=f"{ticket.id}/draft", depends_on=[classify.id], max_attempts=max_attempts,
                 run_id=run_id)
    triage = Task(triage_kind, {"ticket_id": ticket.id, "model": model, **extra},
                  id=f"{ticket.id}/triage", depends_on=[classify.id, draft.id],
                  max_attempts=max_attempts, run_id=run_id)
    return [classify, draft, triage]


def _text(payload: dict[str, Any]) -> str:
    return f"{payload.get('subject', '')}\n{payload.get('body', '')}".strip()


@dataclass(frozen=True, eq=False)
class TicketJob:
    """Everything the ticket job's task functions need: the model (a
    :class:`~foreperson.tickets.model.TicketModel` or
    :class:`~foreperson.tickets.llm.LlmTicketModel`), its fingerprint and the triage
    settings.

    Args:
        model: the model that classifies, drafts and triages.
        max_attempts: attempts per task before it is DEAD (default 3).
        target_precision: share (0..1) of unflagged tickets that should be classified
            right; the model fits its confidence threshold for it (default 0.9).
        min_confidence: a fixed confidence threshold (0..1) instead of the fitted one.
    """

    model: Any
    max_attempts: int = 3
    target_precision: float = 0.9
    min_confidence: float | None = None
    _thresholds: dict[tuple[float, float | None], float] = field(default_factory=dict,
                                                                 repr=False)

    @functools.cached_property
    def fingerprint(self) -> str:
        """:func:`model_fingerprint` of the model."""
        return model_fingerprint(self.model)

    @property
    def kinds(self) -> tuple[str, str, str]:
        """The classify / draft / triage kinds of this model (:func:`kinds_for`)."""
        return kinds_for(self.fingerprint)

    @property
    def settings(self) -> dict[str, Any]:
        """The triage settings every task of this job carries (:func:`job_settings`)."""
        return job_settings(self.target_precision, self.min_confidence)

    @classmethod
    def from_environment(cls) -> TicketJob:
        """The job a ``foreperson worker foreperson.tickets.job`` process runs:
        ``FOREPERSON_TICKETS_EXAMPLES`` (a labelled file; default the bundled examples),
        ``FOREPERSON_TICKETS_MODEL`` and ``FOREPERSON_TICKETS_BASE_URL`` (a language model
        instead of the offline one). They must match the job's ``--examples`` /
        ``--model``, or the worker never claims the job's tasks (other kinds); the
        thresholds come with each task."""
        path = os.environ.get("FOREPERSON_TICKETS_EXAMPLES")
        examples = load_examples(path) if path else bundled_examples()
        llm = os.environ.get("FOREPERSON_TICKETS_MODEL")
        if llm:
            from .llm import LlmTicketModel
            return cls(LlmTicketModel(llm, examples,
                                      base_url=os.environ.get("FOREPERSON_TICKETS_BASE_URL")))
        return cls(TicketModel(examples))

    def run_id(self, tickets: TicketFile) -> str:
        """The job's run: the same input and model give the same run, so a re-run
        continues it."""
        digest = hashlib.sha256(self.fingerprint.encode())
        for ticket in tickets.tickets:
            digest.update(b"\0" + ticket.id.encode())
        return f"tickets-{digest.hexdigest()[:16]}"

    def tasks(self, ticket: Ticket, run_id: str | None = None) -> list[Task]:
        """The three tasks of ``ticket`` (see :func:`ticket_tasks`)."""
        return ticket_tasks(ticket, model=self.fingerprint, max_attempts=self.max_attempts,
                            run_id=run_id, settings=self.settings)

    def app(self) -> App:
        """The task functions, under this model's kinds: batch functions (up to the
        model's ``batch_size`` tickets per call) when the model classifies in batches,
        one ticket per call otherwise (a language model)."""
        app = App()
        size = getattr(self.model, "batch_size", None)
        if size:
            functions: tuple[Any, ...] = (self._classify_batch, self._draft_batch,
                                          self._triage_batch)
        else:
            functions = (self._classify, self._draft, self._triage)
        for kind, fn in zip(self.kinds, functions, strict=True):
            app.task(kind, batch_size=size or None)(fn)
        return app

    def threshold(self, settings: dict[str, Any] | None) -> float:
        """The confidence threshold for a task's settings (0..1; above 1: every ticket
        needs a human), computed once per settings."""
        settings = settings or self.settings
        key = (float(settings.get("target_precision") or self.target_precision),
               settings.get("min_confidence"))
        if key not in self._thresholds:
            calibrate = getattr(self.model, "calibrate", None)
            if calibrate is not None:
                value = float(calibrate(key[0], key[1]).threshold)
            else:
                value = key[1] if key[1] is not None else float(self.model.min_confidence)
            self._thresholds[key] = value
        return self._thresholds[key]

    def _mismatch(self, task: Task) -> GiveUp | None:
        """An error for a task made for another model (None when it is ours)."""
        wanted = task.payload.get("model")
        if wanted and wanted != self.fingerprint:
            return GiveUp("this worker's ticket model differs from the job's (other "
                          "examples or model): start `foreperson worker "
                          "foreperson.tickets.job` with the same FOREPERSON_TICKETS_EXAMPLES "
                          "/ FOREPERSON_TICKETS_MODEL as the job, then `foreperson retry "
                          "--all-dead`")
        return None

    def _checked(self, task: Task) -> Any:
        """The model, refusing tasks made for another one."""
        error = self._mismatch(task)
        if error is not None:
            raise error
        return self.model

    # -- one ticket per call (a language model) --------------------------------------
    def _classify(self, task: Task) -> dict[str, Any]:
        """Category, confidence, priority and language of the ticket in ``task.payload``."""
        return _classified(self._checked(task).classify(_text(task.payload)), task)

    def _draft(self, task: Task) -> dict[str, Any]:
        """A draft reply for the classified ticket."""
        record = current_task().store.get(task.depends_on[0])
        assert record is not None and record.result is not None
        classified = record.result
        return self._drafted(self._checked(task).draft(
            _text(record.payload), classified["category"], classified.get("language", "")))

    def _triage(self, task: Task) -> dict[str, Any]:
        """The ticket's output record: needs_human with the reasons, and the draft."""
        ctx = current_task()
        records = {d: ctx.store.get(d) for d in task.depends_on}
        self._checked(task)
        return self._record(task, {d: r for d, r in records.items() if r is not None})

    # -- batches (the offline model) --------------------------------------------------
    def _classify_batch(self, tasks: list[Task]) -> list[Any]:
        """:meth:`_classify` for a batch, in one pass of the model."""
        out: list[Any] = [self._mismatch(t) for t in tasks]
        todo = [i for i, error in enumerate(out) if error is None]
        found = self.model.classify_many([_text(tasks[i].payload) for i in todo])
        for i, verdict in zip(todo, found, strict=True):
            out[i] = _classified(verdict, tasks[i])
        return out

    def _draft_batch(self, tasks: list[Task]) -> list[Any]:
        """:meth:`_draft` for a batch, in one pass of the model (the classify records,
        text included, read in one query)."""
        records = current_batch().store.finished_among([t.depends_on[0] for t in tasks])
        out: list[Any] = [self._mismatch(t) for t in tasks]
        todo = [i for i, error in enumerate(out) if error is None]
        items = []
        for i in todo:
            record = records[tasks[i].depends_on[0]]
            classified = record.result or {}
            items.append((_text(record.payload), classified["category"],
                          classified.get("language", "")))
        for i, drafted in zip(todo, self.model.draft_many(items), strict=True):
            out[i] = self._drafted(drafted)
        return out

    def _triage_batch(self, tasks: list[Task]) -> list[Any]:
        """:meth:`_triage` for a batch: the dependencies read in one query."""
        store = current_batch().store
        records = store.finished_among([d for t in tasks for d in t.depends_on])
        out: list[Any] = []
        for task in tasks:
            error = self._mismatch(task)
            out.append(error if error is not None else self._record(task, records))
        return out

    @staticmethod
    def _drafted(drafted: dict[str, Any]) -> dict[str, Any]:
        return {"draft_reply": drafted["draft_reply"], "similarity": drafted.get("similarity"),
                "example": drafted.get("example", -1), "flags": list(drafted.get("flags", []))}

    def _record(self, task: Task, records: dict[str, Task]) -> dict[str, Any]:
        """The output record of ``task``'s ticket from its classify and draft records."""
        classify_id, draft_id = task.depends_on
        classified = records[classify_id].result or {}
        text = _text(records[classify_id].payload)
        drafted = records[draft_id].result or {}
        verdict = Classification(classified["category"], classified["confidence"],
                                 classified["priority"], classified.get("language", ""))
        threshold = self.threshold(task.payload.get("settings"))
        flags = drafted.get("flags", [])
        triage = self.model.triage(text, verdict, flags, min_confidence=threshold)
        attempts = max([task.attempts] + [records[d].attempts for d in task.depends_on])
        return {"id": task.payload["ticket_id"], "category": verdict.category,
                "confidence": verdict.confidence, "priority": verdict.priority,
                "language": verdict.language, "needs_human": triage.needs_human,
                "reason": triage.reason, "reasons": list(triage.reasons),
                "draft_reply": drafted.get("draft_reply", ""), "attempts": attempts}


def _classified(verdict: Classification, task: Task) -> dict[str, Any]:
    return {"category": verdict.category, "confidence": round(verdict.confidence, 4),
            "priority": verdict.priority, "language": verdict.language}


def ticket_app(model: Any) -> App:
    """The ticket job's task functions for ``model`` (:meth:`TicketJob.app`)."""
    return TicketJob(model).app()


@functools.lru_cache(maxsize=1)
def _environment_app() -> App:
    return TicketJob.from_environment().app()


def __getattr__(name: str) -> Any:
    """``app``: what ``foreperson worker foreperson.tickets.job`` runs, built once per
    process from the environment (see :meth:`TicketJob.from_environment`)."""
    if name == "app":
        return _environment_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _probe(path: Path, option: str) -> None:
    """Prove ``path`` (an existing file) or its folder can be written by writing, not by
    asking ``os.access`` (which says yes to root everywhere).

    Raises:
        ConfigurationError: it cannot (the option and the reason named).
    """
    try:
        if path.exists():
            with open(path, "ab"):
                pass
        else:
            with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".foreperson-probe-"):
                pass
    except OSError as exc:
        where = path if path.exists() else path.parent
        raise ConfigurationError(f"{option} {path}: cannot write to {where} "
                                 f"({exc.strerror or exc})") from None


def check_writable_path(path: str | Path, option: str, what: str) -> Path:
    """Check before any work that ``option``'s file can be written: a regular file or
    nothing yet, in a folder that exists (it is created) and can be written.

    Args:
        path: the file.
        option: the command-line option that named it (``--out``, ``--db``).
        what: what the file holds, for the message.

    Returns:
        the path.

    Raises:
        ConfigurationError: a directory or special file, or a folder that cannot be
            created or written.
    """
    path = Path(path)
    if path.exists() and not path.is_file():
        raise ConfigurationError(f"{option} {path}: not a regular file; give a file path for "
                                 f"{what}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigurationError(
            f"{option} {path}: cannot create its folder: {exc.strerror or exc}") from None
    _probe(path, option)
    return path


def check_output_path(path: str | Path) -> Path:
    """Check that results can be written to ``path`` before any work starts (see
    :func:`check_writable_path`).

    Returns:
        the path.

    Raises:
        ConfigurationError: the path is a directory or a special file (a device, a pipe),
            or its folder cannot be created or written.
    """
    return check_writable_path(path, "--out", "the JSON Lines results")


def _open_exclusive(path: str | Path, mode: str, busy: str) -> IO[Any]:
    """Open ``path`` holding an exclusive lock for as long as it stays open; the lock
    dies with the process, so a crashed holder never blocks the next run.

    Raises:
        ConfigurationError: another live process holds it (``busy`` is the message).
    """
    handle = open(path, mode)  # noqa: SIM115 - held for the job's life
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise ConfigurationError(busy) from None
    return handle


class Outbox:
    """The output file, written once per ticket.

    The file is its own ledger: a ticket is sent when its line is in the file. Lines
    are flushed and fsynced before they count; on opening, the ids already present are
    read back and a torn last line (a crash mid-write) is cut off. An exclusive lock on
    the file keeps a second job from writing to it at the same time.

    Args:
        path: the JSON Lines output file (created when missing).

    Raises:
        ConfigurationError: another process holds the file.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = check_output_path(path)
        self._file = _open_exclusive(
            self.path, "a+b", f"{self.path} is being written by another foreperson job; "
            "wait for it or choose another --out")
        self.sent: set[str] = set()
        try:
            self._recover()
        except BaseException:
            self._file.close()
            raise

    def _recover(self) -> None:
        """Read back the ids already sent. The file is checked whole before anything is
        changed: only a torn last line that starts like a results line (a crash in the
        middle of a write) is cut off; any other content means this is not our file."""
        self._file.seek(0)
        data = self._file.read()
        *lines, tail = data.split(b"\n")
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                self.sent.add(str(json.loads(line)["id"]))
            except (ValueError, KeyError, TypeError):
                raise InputError("not a foreperson results file (this line is not a results "
                                 "line); choose another --out", path=str(self.path),
                                 line=number) from None
        if tail.strip():
            if not tail.lstrip().startswith(b'{"id": '):
                raise InputError("not a foreperson results file (it does not end with a "
                                 "complete line); choose another --out",
                                 path=str(self.path), line=len(lines) + 1)
            self._file.truncate(len(data) - len(tail))
        self._file.seek(0, os.SEEK_END)

    def send(self, records: list[dict[str, Any]]) -> int:
        """Append the records whose id is not in the file yet; returns how many."""
        fresh: dict[str, dict[str, Any]] = {}
        for record in records:
            key = str(record["id"])
            if key not in self.sent and key not in fresh:
                fresh[key] = record
        if not fresh:
            return 0
        blob = b"".join(json.dumps({k: r.get(k) for k in OUTPUT_FIELDS},
                                   ensure_ascii=False).encode() + b"\n"
                        for r in fresh.values())
        try:
            self._file.write(blob)
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as exc:
            raise RunError(f"cannot write results to {self.path}: {exc.strerror}; fix that "
                           "and run the same command again (finished work is kept)") from exc
        self.sent.update(fresh)
        return len(fresh)

    def close(self) -> None:
        """Release the file and its lock."""
        if not self._file.closed:
            self._file.close()


@dataclass
class JobReport:
    """What the ticket job did for this input (over every run on the same database).

    Attributes:
        tickets: tickets in the input.
        skipped: ``(line, id, reason)`` for unusable or repeated input rows.
        written: lines in the output file for this input.
        earlier: of those, lines an earlier run on the same database had written.
        categories / priorities / languages: counts over the finished tickets.
        needs_human: finished tickets flagged for a human.
        reasons: finished tickets per kind of reason (``low confidence``, ``legal``,
            ``draft promises money`` ...); a ticket counts once per kind.
        low_confidence_only: tickets flagged for low confidence and nothing else.
        retries: failed attempts retried in this run.
        reclaimed: tasks taken back from dead workers in this run.
        dead: ``(task id, error)`` of every DEAD task.
        elapsed_s: seconds this run took.
    """

    tickets: int
    skipped: list[tuple[int, str, str]]
    written: int
    earlier: int = 0
    categories: Counter[str] = field(default_factory=Counter)
    priorities: Counter[str] = field(default_factory=Counter)
    languages: Counter[str] = field(default_factory=Counter)
    needs_human: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    low_confidence_only: int = 0
    retries: int = 0
    reclaimed: int = 0
    dead: list[tuple[str, str]] = field(default_factory=list)
    elapsed_s: float = 0.0


def _reason_kind(reason: str) -> str:
    """``"legal (lawyer)"`` -> ``"legal"``; ``"draft promises money (refund)"`` ->
    ``"draft promises money"``."""
    return reason.split(" (", 1)[0]


def check_earlier_run(tickets: TicketFile, store: TaskStore, out: str | Path, *,
                      fingerprint: str, settings: dict[str, Any]) -> set[str]:
    """What :func:`run_job` checks first, done before the model is trained (a re-run
    with other examples or one setting changed is refused in well under a second):
    ``fingerprint`` from :func:`fingerprint_of`, ``settings`` from :func:`job_settings`.

    Returns:
        the ids of this input's tickets whose lines ``out`` already holds.

    Raises:
        InputError / ConfigurationError: as :func:`run_job` would, or ``out`` is being
            written by another job.
    """
    if not Path(out).exists():             # nothing written yet (and nothing created)
        _check_earlier_run(tickets, store, set(), str(out), fingerprint, settings)
        return set()
    outbox = Outbox(out)
    try:
        _check_earlier_run(tickets, store, outbox.sent, str(outbox.path), fingerprint, settings)
        return outbox.sent & {t.id for t in tickets.tickets}
    finally:
        outbox.close()


def _check_earlier_run(tickets: TicketFile, store: TaskStore, sent: set[str], out: str,
                       fingerprint: str, settings: dict[str, Any]) -> None:
    """Refuse to mix this input with an earlier run's different tickets, model or
    settings.

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


class _JobLock:
    """One job per SQLite database at a time; a crashed holder's lock vanishes with it."""

    def __init__(self, db: str) -> None:
        self.path = f"{db}.lock"
        self._file = _open_exclusive(self.path, "a+", f"another foreperson job is running on "
                                     f"{db}; wait for it to finish or use another --db")

    def close(self) -> None:
        self._file.close()


@dataclass(frozen=True)
class JobProgress:
    """Where the job stands (for a progress display; O(1) to compute).

    Attributes:
        total: tickets in the input.
        written: tickets in the output file.
        dead: tickets that cannot be written (a task of theirs is DEAD).
        elapsed_s: seconds since the job started.
    """

    total: int
    written: int
    dead: int
    elapsed_s: float


@dataclass
class _Writer:
    """Collects finished tickets and writes them to the outbox in batches (one fsync
    per batch), from a thread."""

    outbox: Outbox
    wanted: set[str]
    began: float
    progress: Callable[[JobProgress], None] | None
    pending: list[dict[str, Any]] = field(default_factory=list)
    dead: set[str] = field(default_factory=set)

    def finished(self, task: Task) -> None:
        if task.status is Status.COMPLETED:
            self.pending.append(task.result)
        else:
            self.dead.add(str(task.payload.get("ticket_id", task.id)))

    def flush(self) -> None:
        batch, self.pending = self.pending, []
        if batch:
            self.outbox.send(batch)
        if self.progress is not None:
            self.progress(JobProgress(len(self.wanted), len(self.outbox.sent & self.wanted),
                                      len(self.dead), time.monotonic() - self.began))


async def _write_as_completed(sup: Supervisor, handles: list[TaskHandle],
                              writer: _Writer) -> None:
    """Write each ticket as its triage task finishes; flush every 0.25 s."""
    async def flusher() -> None:
        while True:
            await anyio.sleep(0.25)
            await anyio.to_thread.run_sync(writer.flush)

    async with anyio.create_task_group() as group:
        group.start_soon(flusher)
        async for handle in sup.as_completed(handles):
            writer.finished(await handle.wait())
        group.cancel_scope.cancel()
    await anyio.to_thread.run_sync(writer.flush)


async def _sweep(sup: Supervisor) -> None:
    """With no local workers, keep reclaiming expired leases and parking the dependents
    of DEAD tasks (the remote workers do too; sweeps are idempotent)."""
    while True:
        await anyio.to_thread.run_sync(sup.sweep_if_due)
        await anyio.sleep(1.0)


def local_workers(job: TicketJob, workers: int) -> int:
    """How many local workers the job runs for ``--workers N``: N for a model that waits
    on the network (a language model: N calls in flight), one for a model that works in
    batches in this process (the offline classifier is CPU-bound Python: a second worker
    thread would only contend for the interpreter, and would split the batches)."""
    return min(workers, 1) if getattr(job.model, "batch_size", None) else workers


async def run_job(tickets: TicketFile, store: TaskStore, out: str | Path, *, workers: int,
                  job: TicketJob | None = None, model: Any = None, max_attempts: int = 3,
                  stale_after: float = DEFAULT_LEASE_S, exclusive_db: str | None = None,
                  progress: Callable[[JobProgress], None] | None = None,
                  worker_factory: Callable[[str], Worker] | None = None,
                  notice: Callable[[str], None] | None = None,
                  remote_hint: str = "", stalled_after_s: float = 30.0) -> JobReport:
    """Run the ticket job to the end and write one output line per ticket.

    Args:
        tickets: what :func:`~foreperson.tickets.reader.read_tickets` returned.
        store: the task store (SQLite file or PostgreSQL).
        out: the JSON Lines output file.
        workers: local workers (each runs one task at a time); 0 = only supervise while
            ``foreperson worker foreperson.tickets.job`` processes do the work. A model
            that works in batches (the offline one, CPU-bound) gets one batch worker
            instead (see :func:`local_workers`).
        job: the job's model and settings (default: ``TicketJob(model, max_attempts)``,
            ``model`` defaulting to the offline one trained on the bundled examples).
        model: the model, when ``job`` is not given.
        max_attempts: attempts per task before it is DEAD, when ``job`` is not given.
        stale_after: seconds without a heartbeat before a task is reclaimed.
        exclusive_db: a SQLite path: take the job lock on it and, holding it, take back
            at once the tasks an earlier run of the job left held (its workers are
            known dead: the lock says so); other processes' tasks are left alone.
        progress: called about four times a second, in a thread, with a
            :class:`JobProgress`.
        worker_factory: builds a worker by name (default: the job's app).
        notice: called with a line for the user when remote workers do not take the
            job's tasks (``workers=0``).
        remote_hint: how to start the right remote workers (in that line).
        stalled_after_s: seconds without progress before ``notice`` is called.

    Returns:
        a :class:`JobReport`.

    Raises:
        ConfigurationError: the database or output file is in use by another job.
    """
    began = time.monotonic()
    job = job or TicketJob(model if model is not None else TicketModel(bundled_examples()),
                           max_attempts)
    lock = _JobLock(exclusive_db) if exclusive_db else None
    outbox = Outbox(out)
    try:
        host = socket.gethostname()
        orphans = (store.reclaim_stale(holder_prefix=f"{JOB_WORKER}{host}:")
                   if lock is not None else [])
        _check_earlier_run(tickets, store, outbox.sent, str(outbox.path), job.fingerprint,
                           job.settings)
        run_id = job.run_id(tickets)
        app = job.app()
        sup = Supervisor(store, stale_after=stale_after, kinds=app.kinds)
        make = worker_factory or (lambda name: app.worker(name))
        for i in range(local_workers(job, workers)):
            sup.register(make(f"{JOB_WORKER}{host}:{os.getpid()}:w{i + 1}"))
        wanted = {t.id for t in tickets.tickets}
        writer = _Writer(outbox, wanted, began, progress)
        todo = [t for t in tickets.tickets if t.id not in outbox.sent]
        earlier = len(outbox.sent & wanted)
        watch = None if workers > 0 else _RemoteWatch(store, writer, job, notice, remote_hint,
                                                      stalled_after_s)
        counted = await _run(sup, job, todo, run_id, writer, watch=watch)
        report = _report(tickets, store, job, outbox, counted, len(orphans), began)
        report.earlier = earlier
        return report
    finally:
        outbox.close()
        if lock is not None:
            lock.close()


@dataclass
class _RemoteWatch:
    """With remote workers only: says so when nothing progresses, and what to start."""

    store: TaskStore
    writer: _Writer
    job: TicketJob
    notice: Callable[[str], None] | None
    hint: str
    stalled_after_s: float
    last: int = -1
    since: float = field(default_factory=time.monotonic)
    said: bool = False

    def check(self) -> None:
        """Compare progress with the last look; speak once per stall."""
        done = len(self.writer.outbox.sent) + len(self.writer.dead)
        now = time.monotonic()
        if done != self.last:
            self.last, self.since, self.said = done, now, False
            return
        if self.said or now - self.since < self.stalled_after_s or self.notice is None:
            return
        self.said = True
        stats = self.store.stats()
        live = [name for name, seen in stats.workers.items()
                if (stats.now - seen).total_seconds() < 60]
        waited = f"for {now - self.since:.0f} s"
        if live:
            self.notice(f"{len(live)} live worker(s), but none has taken this job's tasks "
                        f"{waited}: they run another ticket model (this job's is "
                        f"{self.job.fingerprint}); {self.hint}")
        else:
            self.notice(f"no live worker has taken this job's tasks {waited}; {self.hint}")

    async def run(self) -> None:
        """Look every few seconds."""
        while True:
            await anyio.sleep(min(5.0, self.stalled_after_s / 3))
            await anyio.to_thread.run_sync(self.check)


async def _run(sup: Supervisor, job: TicketJob, todo: Sequence[Ticket], run_id: str,
               writer: _Writer, *, watch: _RemoteWatch | None) -> tuple[int, int]:
    """Submit the tickets' tasks and write them as they complete; returns
    ``(retries, reclaimed)`` of this run."""
    async def submit_and_write() -> None:
        handles: list[TaskHandle] = []
        for start in range(0, len(todo), 1000):
            tasks = [task for t in todo[start:start + 1000] for task in job.tasks(t, run_id)]
            handles += (await sup.submit_many(tasks))[2::3]      # the triage tasks
        await _write_as_completed(sup, handles, writer)

    if watch is None:
        async with sup.serving():
            await submit_and_write()
    else:
        async with anyio.create_task_group() as group:
            group.start_soon(_sweep, sup)
            group.start_soon(watch.run)
            await submit_and_write()
            group.cancel_scope.cancel()
    return sup.counters.retries, sup.counters.reclaimed


def _report(tickets: TicketFile, store: TaskStore, job: TicketJob, outbox: Outbox,
            counted: tuple[int, int], orphans: int,
            began: float) -> JobReport:
    """The job's report, from one read of the input's triage tasks and DEAD tasks."""
    wanted = {t.id for t in tickets.tickets}
    finished = store.finished_among([f"{t.id}/triage" for t in tickets.tickets])
    results = [t.result for t in finished.values() if t.status is Status.COMPLETED]
    dead = [(t.id, t.error or "") for t in store.list_tasks(status=Status.DEAD)
            if t.kind in job.kinds and str(t.payload.get("ticket_id")) in wanted]
    retries, reclaimed = counted
    reasons: Counter[str] = Counter()
    low_only = 0
    for r in results:
        kinds = {_reason_kind(x) for x in r.get("reasons") or ([r["reason"]] if r["reason"]
                                                                else [])}
        reasons.update(kinds)
        low_only += kinds == {"low confidence"}
    return JobReport(
        tickets=len(tickets.tickets), skipped=tickets.skipped,
        written=len(outbox.sent & wanted),
        categories=Counter(r["category"] for r in results),
        priorities=Counter(r["priority"] for r in results),
        languages=Counter(r.get("language") or "?" for r in results),
        needs_human=sum(1 for r in results if r["needs_human"]), reasons=reasons,
        low_confidence_only=low_only,
        retries=retries, reclaimed=reclaimed + orphans, dead=dead,
        elapsed_s=time.monotonic() - began)
