"""The nightly ticket job of seed 000: classify every ticket, draft a reply, triage.

Each ticket becomes three tasks of one run (classify -> draft -> triage), and each
ticket one line of the results file. The job is cut along its seams:

* :mod:`~foreperson.tickets.tasks`: what a ticket becomes (the tasks, their kinds, the
  model's fingerprint) and the functions that run them (:class:`TicketJob`);
* :mod:`~foreperson.tickets.results`: the results file (:class:`Outbox`) and the checks
  that a file the job writes can be written;
* :mod:`~foreperson.tickets.rerun`: the re-run guard (a run over an earlier run's task
  database or results continues it, or is refused naming what differs);
* :mod:`~foreperson.tickets.runner`: one run on a task store (:func:`run_job`).

This module is the job's entry point: :func:`run_tickets` runs it on a file from the
options of ``foreperson tickets`` (every check before any work, then reading, training
and running), and :func:`evaluate_examples` scores the offline model instead. It
re-exports the names of the modules above, so ``from foreperson.tickets.job import
...`` keeps working, and ``foreperson worker foreperson.tickets.job`` runs its ``app``,
built from the environment (see :meth:`TicketJob.from_environment`).
"""

from __future__ import annotations

import functools
import hashlib
import shlex
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from ..errors import ConfigurationError, redact_url
from ..work.app import App
from ..work.leases import DEFAULT_LEASE_S
from ..work.store import TaskStore
from .drafts import load_never_send
from .model import Example, TicketModel, bundled_examples, load_examples
from .reader import MAX_TICKET_CHARS, Tickets, TicketStream, scan_tickets
from .rerun import SETTING_OPTIONS, check_earlier_run
from .results import OUTPUT_FIELDS, Outbox, check_output_path, check_writable_path
from .runner import JOB_WORKER, JobProgress, JobReport, local_workers, run_job
from .tasks import (
    CLASSIFY,
    DRAFT,
    TRIAGE,
    TicketJob,
    fingerprint_of,
    job_settings,
    kinds_for,
    model_fingerprint,
    ticket_app,
    ticket_tasks,
)

if TYPE_CHECKING:
    from .evaluate import Evaluation
    from .retention import EarlierRun

__all__ = ["CLASSIFY", "DRAFT", "JOB_WORKER", "OUTPUT_FIELDS", "SETTING_OPTIONS", "TRIAGE",
           "JobInterrupted", "JobListener", "JobOptions", "JobOutcome", "JobProgress",
           "JobReport", "JobStart", "Outbox", "TicketJob", "check_earlier_run",
           "check_output_path", "check_writable_path", "default_names", "evaluate_examples",
           "fingerprint_of", "job_settings", "kinds_for", "local_workers",
           "model_fingerprint", "run_job", "run_tickets", "ticket_app", "ticket_tasks"]


@functools.lru_cache(maxsize=1)
def _environment_app() -> App:
    return TicketJob.from_environment().app()


def __getattr__(name: str) -> Any:
    """``app``: what ``foreperson worker foreperson.tickets.job`` runs, built once per
    process from the environment (see :meth:`TicketJob.from_environment`)."""
    if name == "app":
        return _environment_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def default_names(input_file: Path) -> tuple[str, str]:
    """Default ``--db`` and ``--out`` for an input: its name and a hash of its full path,
    in the current folder, so two inputs of one name (day1/tickets.csv, day2/tickets.csv)
    never share a database or results file.

    Returns:
        ``(db, out)`` file names.
    """
    stem = input_file.name.rsplit(".", 1)[0] or "tickets"
    digest = hashlib.sha256(str(input_file.resolve()).encode()).hexdigest()[:8]
    return f"{stem}.{digest}.tasks.db", f"{stem}.{digest}.results.jsonl"


@dataclass(frozen=True)
class JobOptions:
    """One run of the ticket job on a file, as ``foreperson tickets`` takes it (each
    attribute is the option of that name; the combinations are checked by the caller).

    Attributes:
        input_file: the tickets (.csv, .json or .jsonl).
        workers: local workers (0: only supervise, with ``dsn``).
        db: the SQLite task database (default :func:`default_names`; None with ``dsn``).
        dsn / schema: a PostgreSQL database and schema instead of ``db``.
        out: the JSON Lines results (default :func:`default_names`).
        examples: labelled tickets to train on (default: the bundled demo set).
        examples_text_column / examples_label_column / examples_answer_column: their
            columns (the answer column: the reply a draft copies).
        id_column / subject_column / body_column: the input's columns.
        target_precision: share (0..1) of unflagged tickets that should be right.
        min_confidence: a fixed confidence threshold (0..1) instead of the fitted one.
        max_attempts: attempts per task before it is DEAD.
        stale_after: seconds without a heartbeat before a task is reclaimed.
        model / base_url: a language model (and its server) instead of the offline one.
        model_timeout_s: seconds one request to ``model`` may take (``--timeout``; None:
            :data:`~foreperson.models.DEFAULT_TIMEOUT_S`, 30).
        prune_older_than: first delete earlier runs' task databases older than this
            (an age such as ``30d``).
        raise_priority: the triage signals that raise a ticket's priority to high
            (None: ``$FOREPERSON_TICKETS_RAISE_PRIORITY``, else security, legal and
            outage; ``()``: none).
        never_send: a file of phrases a draft must not say (one per line): a draft that
            says one is flagged, naming the phrase and its line.
    """

    input_file: Path
    workers: int = 8
    db: str | None = None
    dsn: str | None = None
    schema: str | None = None
    out: Path | None = None
    examples: Path | None = None
    examples_text_column: str | None = None
    examples_label_column: str | None = None
    examples_answer_column: str | None = None
    id_column: str | None = None
    subject_column: str | None = None
    body_column: str | None = None
    target_precision: float = 0.9
    min_confidence: float | None = None
    max_attempts: int = 3
    stale_after: float = DEFAULT_LEASE_S
    model: str | None = None
    base_url: str | None = None
    prune_older_than: str | None = None
    raise_priority: tuple[str, ...] | None = None
    model_timeout_s: float | None = None
    never_send: Path | None = None

    def resolved(self) -> JobOptions:
        """These options with the defaults of ``db`` (without ``dsn``) and ``out``
        filled in (:func:`default_names`)."""
        default_db, default_out = default_names(self.input_file)
        return replace(self, db=self.db if self.dsn or self.db else default_db,
                       out=self.out or Path(default_out))


@dataclass(frozen=True)
class JobStart:
    """What a run is about to do, once every check passed and the model is trained.

    Attributes:
        options: the run's options, defaults filled in (:meth:`JobOptions.resolved`).
        tickets: tickets to process (the input's, unusable rows left out).
        job: the trained job (its model's labels and batch size).
        store: the open task store.
        hint: how to start remote workers that run this job's model.
    """

    options: JobOptions
    tickets: int
    job: TicketJob
    store: TaskStore
    hint: str


@dataclass(frozen=True)
class JobOutcome:
    """What :func:`run_tickets` did.

    Attributes:
        out: the results file.
        job: the job that ran (its model and thresholds, for a summary).
        report: the :class:`JobReport`.
    """

    out: Path
    job: TicketJob
    report: JobReport


class JobInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a run of the job after it started; the finished tickets are in the
    results file and the listener was told how to continue."""


def _ignore(_: Any) -> None:
    """Say nothing."""


def _no_stop(_: JobStart) -> Callable[[], None]:
    return lambda: None


def _no_progress(_: int) -> AbstractContextManager[Callable[[JobProgress], None] | None]:
    return nullcontext(None)


@dataclass(frozen=True)
class JobListener:
    """What :func:`run_tickets` says as it goes; by default nothing (the command line
    prints, see ``foreperson.cli.tickets``).

    Attributes:
        note: called with a line for the user about the job's checks and steps:
            skipped input rows, warnings, training, nothing to do, an interruption.
        deleted: called with each earlier run whose task database was deleted
            (a :class:`~foreperson.tickets.retention.EarlierRun`).
        starting: called with a :class:`JobStart` when the job is about to run;
            returns what to call when the run ends (e.g. stop a metrics server).
        progress: called with the number of tickets; returns a context manager, entered
            around the run, that gives the function called about four times a second,
            from a thread, with a :class:`JobProgress` (or None: no progress).
    """

    note: Callable[[str], None] = _ignore
    deleted: Callable[[EarlierRun], None] = _ignore
    starting: Callable[[JobStart], Callable[[], None]] = _no_stop
    progress: Callable[[int], AbstractContextManager[Callable[[JobProgress], None] | None]] = (
        _no_progress)


def run_tickets(options: JobOptions, listener: JobListener | None = None) -> JobOutcome | None:
    """Run the ticket job on a file: check that the input and examples are files and
    that ``--db`` and ``--out`` can be written, delete earlier runs' task databases
    (``prune_older_than``), read the input, refuse a re-run that would mix other
    tickets, examples, model or settings with an earlier run's (before training), train
    the model (or reach the language model), then run the job to the end
    (:func:`run_job`). A task database this call created is deleted again when the run
    is refused before any work. Synchronous: it runs its own event loop.

    Args:
        options: the run's options.
        listener: told what happens (default: nothing is said).

    Returns:
        a :class:`JobOutcome`, or None when an earlier run had written every ticket
        already (nothing done; the listener was told).

    Raises:
        ConfigurationError: the input or examples are not a file (or are standard
            input), ``--db`` / ``--out`` cannot be written or are one file, the input
            has no ticket with text, a re-run that does not match the earlier run, a
            language model that cannot be reached, or a database or results file in use
            by another job.
        InputError: the input or examples cannot be read, or a ticket id an earlier run
            stored with other text.
        JobInterrupted: Ctrl-C while the job ran (finished tickets are kept).
    """
    listener = listener or JobListener()
    _check_input(options.input_file, "INPUT")
    _check_input(options.examples, "--examples")
    options = options.resolved()
    assert options.out is not None
    _check_paths(None if options.dsn else options.db, options.out)     # before any work
    if options.prune_older_than:
        _prune_earlier(options, listener)
    tickets = _read(options, listener)                                 # fails before work
    training = _training_set(options)
    prepared = _prepare(options, tickets, training, listener)
    if prepared is None:
        return None
    store, job = prepared
    try:
        report = _run(options, tickets, store, job, listener)
    finally:
        store.close()
    return JobOutcome(options.out, job, report)


def _check_input(path: Path | None, option: str) -> None:
    """``option``'s file (if given) is a file, not standard input.

    Raises:
        ConfigurationError: naming the option.
    """
    if path is None:
        return
    if str(path) == "-":
        raise ConfigurationError(f"{option}: reading from standard input is not "
                                 "supported; save the tickets to a file and give its path")
    if not path.is_file():
        raise ConfigurationError(f"{option} {path}: "
                                 + ("no such file" if not path.exists() else "not a file"))


def _check_paths(db: str | None, out: Path) -> None:
    """``--db`` and ``--out`` can be written and are not one file.

    Raises:
        ConfigurationError: naming the option.
    """
    if db and Path(db).resolve() == out.resolve():
        raise ConfigurationError(f"--db and --out are the same file ({out}): the task "
                                 "database and the results need a file each")
    check_output_path(out)
    if db:
        check_writable_path(db, "--db", "the SQLite task database")


def _prune_earlier(options: JobOptions, listener: JobListener) -> None:
    """``--prune-older-than``: delete earlier runs' task databases, saying which."""
    import time

    from ..work.retention import parse_age
    from .retention import prune_earlier_runs

    assert options.prune_older_than is not None
    gone = prune_earlier_runs(
        older_than_s=parse_age(options.prune_older_than, what="--prune-older-than"),
        now=time.time(), db=None if options.dsn else options.db, dsn=options.dsn,
        schema=options.schema)
    for run in gone:
        listener.deleted(run)


def _read(options: JobOptions, listener: JobListener) -> TicketStream:
    """The input's tickets, checked to the end but not held (read again, a chunk at a
    time, as the job runs: :func:`~foreperson.tickets.reader.scan_tickets`), each
    unusable row told to ``listener``.

    Raises:
        InputError: the file cannot be read.
        ConfigurationError: no ticket has text.
    """
    tickets = scan_tickets(options.input_file, id_column=options.id_column,
                           subject_column=options.subject_column,
                           body_column=options.body_column)
    for line, ticket_id, reason in tickets.skipped:
        listener.note(f"{options.input_file}:{line}: skipped ticket {ticket_id or '?'}: "
                      f"{reason}")
    for line, ticket_id, count in tickets.nul:
        listener.note(f"{options.input_file}:{line}: ticket {ticket_id}: {count} NUL "
                      f"byte{'s' if count != 1 else ''} removed from its text (binary data "
                      "in the export?)")
    for line, ticket_id, size in tickets.cut:
        listener.note(f"{options.input_file}:{line}: ticket {ticket_id} has {size:,} "
                      f"characters; only its first {MAX_TICKET_CHARS:,} were read (the "
                      "limit per ticket)")
    if not tickets.count:
        raise ConfigurationError(f"{options.input_file}: {_why_none(options.input_file, tickets)}")
    return tickets


def _why_none(path: Path, tickets: Tickets) -> str:
    """Why an input gave no ticket to process, in the one form every kind of file gets."""
    if tickets.skipped:
        return (f"no tickets with text (its {len(tickets.skipped)} row(s) were skipped, "
                "each named above)")
    try:
        if path.stat().st_size == 0 or not path.read_bytes()[:4096].strip():
            return "the file is empty"
    except OSError:
        pass
    shape = {".csv": "only a header row", ".tsv": "only a header row",
             ".json": "an empty list"}.get(path.suffix.lower(), "no rows")
    return f"no tickets ({shape})"


def _training_set(options: JobOptions) -> list[Example]:
    if options.examples is None:
        return bundled_examples()
    return load_examples(options.examples, text_column=options.examples_text_column,
                         label_column=options.examples_label_column,
                         answer_column=options.examples_answer_column)


def _open_store(options: JobOptions) -> TaskStore:
    """The task store of ``--dsn`` (PostgreSQL) or ``--db`` (SQLite)."""
    if options.dsn:
        from ..work.stores.postgres import PostgresStore
        return PostgresStore(options.dsn, schema=options.schema)
    from ..work.stores.sqlite import SqliteStore
    assert options.db
    return SqliteStore(options.db)


def _prepare(options: JobOptions, tickets: Tickets, training: list[Example],
             listener: JobListener) -> tuple[TaskStore, TicketJob] | None:
    """Open the store, refuse a re-run that does not match (before training), train.

    Returns:
        the open store and the job, or None when every ticket is written already (the
        store closed).
    """
    db = options.db
    fresh_db = db is not None and not options.dsn and not Path(db).exists()
    store = _open_store(options)
    try:      # a re-run with other examples, model or settings: refused before training
        written = _check_earlier_run(tickets, store, options, training)
        if len(written) == tickets.count:
            listener.note(f"nothing to do: all {len(written)} tickets of {options.input_file} "
                          f"are already in {options.out} (an earlier run finished them)")
            store.close()
            return None
        _warn_thin_labels(options.examples, training, listener)
        job = _make_job(training, options, listener)
    except BaseException:
        store.close()
        if fresh_db:                 # refused before any work: leave no database behind
            for suffix in ("", "-wal", "-shm"):
                Path(f"{db}{suffix}").unlink(missing_ok=True)
        raise
    return store, job


def _check_earlier_run(tickets: Tickets, store: TaskStore, options: JobOptions,
                       training: list[Example]) -> set[str]:
    assert options.out is not None
    kind = "LlmTicketModel" if options.model is not None else "TicketModel"
    return check_earlier_run(tickets, store, options.out,
                             fingerprint=fingerprint_of(kind, options.model, training),
                             settings=job_settings(options.target_precision,
                                                   options.min_confidence,
                                                   _never_send(options)))


def _warn_thin_labels(examples: Path | None, training: list[Example],
                      listener: JobListener) -> None:
    if examples is None:
        return
    per_label = Counter(e.category for e in training)
    thin = sorted(label for label, n in per_label.items() if n < 3)
    if thin:
        listener.note(f"warning: {examples}: {len(thin)} label(s) have fewer than 3 examples "
                      f"({', '.join(thin[:5])}{' ...' if len(thin) > 5 else ''}); the "
                      "classifier will be unsure about them")


def _make_job(training: list[Example], options: JobOptions,
              listener: JobListener) -> TicketJob:
    """The job with its model trained (offline) or reachable (``--model``).

    Raises:
        ConfigurationError: the language model's server cannot be reached.
    """
    settings = (options.max_attempts, options.target_precision, options.min_confidence)
    if options.model is not None:
        from ..models import check_reachable, infer_model
        from .llm import LlmTicketModel
        # before any work: a server that cannot be reached at all (no network, a typo,
        # nothing listening) is a configuration error, also for the providers' own APIs
        check_reachable(options.base_url or infer_model(options.model, max_attempts=1))
        llm: Any = LlmTicketModel(options.model, training, base_url=options.base_url,
                                  min_confidence=options.min_confidence,
                                  timeout_s=options.model_timeout_s)
        return _with_options(TicketJob(llm, *settings), options, listener)
    offline = TicketModel(training, target_precision=options.target_precision,
                          min_confidence=options.min_confidence, progress=listener.note)
    if offline.training_s > 3:
        listener.note(f"trained on {len(training)} examples in {offline.training_s:.1f} s")
    return _with_options(TicketJob(offline, *settings), options, listener)


def _with_options(job: TicketJob, options: JobOptions, listener: JobListener) -> TicketJob:
    """``job`` with ``options.raise_priority`` and ``options.never_send`` when given (the
    phrases' count said in a note)."""
    if options.never_send is not None:
        phrases = _never_send(options)
        listener.note(f"drafts are checked against {len(phrases)} phrase(s) of "
                      f"{options.never_send}" if phrases else
                      f"{options.never_send} lists no phrase (only blank lines and "
                      "comments): no draft is checked against it")
        job = replace(job, never_send=tuple(phrases))
    if options.raise_priority is None:
        return job
    return replace(job, raise_priority=options.raise_priority)


def _never_send(options: JobOptions) -> list[tuple[str, str]]:
    """The phrases of ``options.never_send`` (none without it).

    Raises:
        ConfigurationError: the file cannot be read, or a line of it is not a phrase.
    """
    return [] if options.never_send is None else load_never_send(options.never_send)


def _remote_hint(options: JobOptions) -> str:
    """How to start workers that run this job's model."""
    env = []
    if options.examples is not None:
        env.append(f"FOREPERSON_TICKETS_EXAMPLES={options.examples.resolve()}")
        for role in ("text", "label", "answer"):
            name = getattr(options, f"examples_{role}_column")
            if name:
                env.append(f"FOREPERSON_TICKETS_EXAMPLES_{role.upper()}_COLUMN={shlex.quote(name)}")
    if options.model is not None:
        env.append(f"FOREPERSON_TICKETS_MODEL={options.model}")
    if options.base_url is not None:
        env.append(f"FOREPERSON_TICKETS_BASE_URL={redact_url(options.base_url)}")
    if options.model_timeout_s is not None:
        env.append(f"FOREPERSON_TICKETS_TIMEOUT_S={options.model_timeout_s:g}")
    if options.raise_priority is not None:
        env.append("FOREPERSON_TICKETS_RAISE_PRIORITY="
                   + (",".join(options.raise_priority) or "none"))
    if options.schema:
        env.append(f"FOREPERSON_PG_SCHEMA={options.schema}")
    return ("start them with: " + " ".join(env + ["foreperson worker foreperson.tickets.job "
                                                  "--dsn DSN --concurrency 8"])
            + " (the same examples and model as this job, on every machine)")


def _run(options: JobOptions, tickets: Tickets, store: TaskStore, job: TicketJob,
         listener: JobListener) -> JobReport:
    """Run the job to the end, the listener told it starts and shown its progress.

    Raises:
        JobInterrupted: Ctrl-C.
    """
    hint = _remote_hint(options)
    total = tickets.count
    stop = listener.starting(JobStart(options, total, job, store, hint))

    def notice(line: str) -> None:
        listener.note(f"warning: {line}")

    try:
        with listener.progress(total) as progress:
            async def go() -> JobReport:
                assert options.out is not None
                return await run_job(tickets, store, options.out, workers=options.workers,
                                     job=job, stale_after=options.stale_after,
                                     exclusive_db=None if options.dsn else options.db,
                                     progress=progress, notice=notice, remote_hint=hint)

            return anyio.run(go)
    except KeyboardInterrupt:
        listener.note(f"interrupted: finished tickets are in {options.out}; run the same "
                      "command again to continue")
        raise JobInterrupted from None
    finally:
        stop()


def evaluate_examples(examples: Path, *, text_column: str | None = None,
                      label_column: str | None = None, target_precision: float = 0.9,
                      min_confidence: float | None = None,
                      listener: JobListener | None = None) -> Evaluation:
    """``foreperson tickets --evaluate``: read labelled tickets and score the offline
    model on its own held-out rows (:func:`~foreperson.tickets.evaluate.evaluate`).

    Args:
        examples: the labelled file (CSV / JSON / JSONL).
        text_column / label_column: its columns (default: found by name).
        target_precision: share (0..1) of unflagged tickets that should be right.
        min_confidence: a fixed confidence threshold (0..1) instead of the fitted one.
        listener: told how many rows are evaluated.

    Returns:
        the :class:`~foreperson.tickets.evaluate.Evaluation`.

    Raises:
        ConfigurationError: ``examples`` is not a file (or is standard input).
        InputError: the file cannot be read (malformed, no text or label column,
            fewer than two labels), or too few rows or labels to hold some out.
    """
    from .evaluate import evaluate

    _check_input(examples, "--examples")
    rows = load_examples(examples, text_column=text_column, label_column=label_column)
    (listener or JobListener()).note(f"evaluating on {len(rows)} labelled rows of "
                                     f"{examples} ...")
    return evaluate(rows, target_precision=target_precision, min_confidence=min_confidence)
