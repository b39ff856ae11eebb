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
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.to_thread

from ..errors import ConfigurationError, GiveUp, InputError, RunError
from ..work.app import App
from ..work.handles import TaskHandle
from ..work.store import TaskStore
from ..work.supervisor import Supervisor
from ..work.task import Status, Task
from ..work.worker import Worker, current_task
from .model import Classification, TicketModel, bundled_examples, load_examples
from .reader import Ticket, TicketFile

__all__ = ["CLASSIFY", "DRAFT", "TRIAGE", "JobProgress", "JobReport", "Outbox", "TicketJob",
           "kinds_for", "model_fingerprint", "run_job", "ticket_app", "ticket_tasks"]

CLASSIFY, DRAFT, TRIAGE = "classify_ticket", "draft_reply", "triage_ticket"
OUTPUT_FIELDS = ("id", "category", "priority", "needs_human", "reason", "draft_reply",
                 "attempts")
JOB_WORKER = "job@"
"""Prefix of the names of a ticket job's own local workers (``job@host:pid:wN``)."""


def model_fingerprint(model: Any) -> str:
    """A short hash of what decides a ticket's result: the model's kind and settings and
    every training example. Stored in each task's payload and kind, so a re-run with
    other examples (or a worker process configured differently) is noticed."""
    digest = hashlib.sha256(type(model).__name__.encode())
    digest.update(repr(getattr(model, "min_confidence", None)).encode())
    digest.update(repr(getattr(model, "model_name", None)).encode())
    for example in getattr(model, "examples", ()):
        digest.update(json.dumps([example.text, example.category, example.answer,
                                  example.priority]).encode())
    return digest.hexdigest()[:16]


def kinds_for(fingerprint: str) -> tuple[str, str, str]:
    """The classify / draft / triage kinds of a model: ``classify_ticket:<fingerprint>`` …

    The model is part of the kind, so a worker process configured with other examples
    or another model never claims the job's tasks (a worker claims only the kinds it
    can do) instead of failing them."""
    return (f"{CLASSIFY}:{fingerprint}", f"{DRAFT}:{fingerprint}", f"{TRIAGE}:{fingerprint}")


def ticket_tasks(ticket: Ticket, *, model: str = "", max_attempts: int = 3,
                 run_id: str | None = None) -> list[Task]:
    """The three tasks of one ticket, with ids derived from the ticket id (so adding the
    same ticket twice is harmless).

    Args:
        ticket: the ticket.
        model: the :func:`model_fingerprint` the tasks must be run with (it is part of
            their kinds).
        max_attempts: attempts per task.
        run_id: the job's run.
    """
    classify_kind, draft_kind, triage_kind = kinds_for(model)
    text = {"ticket_id": ticket.id, "subject": ticket.subject, "body": ticket.body,
            "model": model}
    classify = Task(classify_kind, text, id=f"{ticket.id}/classify",
                    max_attempts=max_attempts, run_id=run_id)
    draft = Task(draft_kind, {"ticket_id": ticket.id, "model": model},
                 id=f"{ticket.id}/draft", depends_on=[classify.id], max_attempts=max_attempts,
                 run_id=run_id)
    triage = Task(triage_kind, {"ticket_id": ticket.id, "model": model},
                  id=f"{ticket.id}/triage", depends_on=[classify.id, draft.id],
                  max_attempts=max_attempts, run_id=run_id)
    return [classify, draft, triage]


def _text(payload: dict[str, Any]) -> str:
    return f"{payload.get('subject', '')}\n{payload.get('body', '')}".strip()


@dataclass(frozen=True, eq=False)
class TicketJob:
    """Everything the ticket job's task functions need: the model (a
    :class:`~foreperson.tickets.model.TicketModel` or
    :class:`~foreperson.tickets.llm.LlmTicketModel`) and its fingerprint.

    Args:
        model: the model that classifies, drafts and triages.
        max_attempts: attempts per task before it is DEAD (default 3).
    """

    model: Any
    max_attempts: int = 3

    @functools.cached_property
    def fingerprint(self) -> str:
        """:func:`model_fingerprint` of the model."""
        return model_fingerprint(self.model)

    @property
    def kinds(self) -> tuple[str, str, str]:
        """The classify / draft / triage kinds of this model (:func:`kinds_for`)."""
        return kinds_for(self.fingerprint)

    @classmethod
    def from_environment(cls) -> TicketJob:
        """The job a ``foreperson worker foreperson.tickets.job`` process runs:
        ``FOREPERSON_TICKETS_EXAMPLES`` (a labelled file; default the bundled examples),
        ``FOREPERSON_TICKETS_MODEL`` and ``FOREPERSON_TICKETS_BASE_URL`` (a language model
        instead of the offline one). They must match the job's ``--examples`` /
        ``--model``, or the worker never claims the job's tasks (other kinds)."""
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
                            run_id=run_id)

    def app(self) -> App:
        """The task functions, under this model's kinds."""
        app = App()
        for kind, fn in zip(self.kinds, (self._classify, self._draft, self._triage),
                            strict=True):
            app.task(kind)(fn)
        return app

    def _checked(self, task: Task) -> Any:
        """The model, refusing tasks made for another one."""
        wanted = task.payload.get("model")
        if wanted and wanted != self.fingerprint:
            raise GiveUp("this worker's ticket model differs from the job's (other examples "
                         "or model): start `foreperson worker foreperson.tickets.job` with "
                         "the same FOREPERSON_TICKETS_EXAMPLES / FOREPERSON_TICKETS_MODEL as "
                         "the job, then `foreperson retry --all-dead`")
        return self.model

    def _classify(self, task: Task) -> dict[str, Any]:
        """Category, confidence and priority of the ticket in ``task.payload``."""
        result = self._checked(task).classify(_text(task.payload))
        return {"category": result.category, "confidence": round(result.confidence, 4),
                "priority": result.priority, "text": _text(task.payload)}

    def _draft(self, task: Task) -> dict[str, Any]:
        """A draft reply for the classified ticket."""
        (classified,) = current_task().dependency_results().values()
        return dict(self._checked(task).draft(classified["text"], classified["category"]))

    def _triage(self, task: Task) -> dict[str, Any]:
        """The ticket's output record: needs_human with the reasons, and the draft."""
        ctx = current_task()
        results = ctx.dependency_results()
        classified, drafted = (results[d] for d in task.depends_on)
        verdict = Classification(classified["category"], classified["confidence"],
                                 classified["priority"])
        triage = self._checked(task).triage(classified["text"], verdict)
        attempts = task.attempts       # the most attempts any of the ticket's steps needed
        for dep in task.depends_on:
            record = ctx.store.get(dep)
            attempts = max(attempts, record.attempts if record else 0)
        return {"id": task.payload["ticket_id"], "category": verdict.category,
                "priority": verdict.priority, "needs_human": triage.needs_human,
                "reason": triage.reason, "draft_reply": drafted["draft_reply"],
                "attempts": attempts}


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


def check_output_path(path: str | Path) -> Path:
    """Check that results can be written to ``path`` before any work starts.

    Returns:
        the path.

    Raises:
        ConfigurationError: the path is a directory or a special file (a device, a pipe),
            or its folder cannot be created or written.
    """
    path = Path(path)
    if path.exists() and not path.is_file():
        raise ConfigurationError(f"--out {path}: not a regular file; give a file path for "
                                 "the JSON Lines results")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigurationError(
            f"--out {path}: cannot create its folder: {exc.strerror}") from None
    if not os.access(path if path.exists() else path.parent, os.W_OK):
        raise ConfigurationError(f"--out {path}: not writable")
    return path


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
    """What the ticket job did (over every run on the same database).

    Attributes:
        tickets: tickets in the input.
        skipped: ``(line, id, reason)`` for unusable input rows.
        written: lines in the output file for this input.
        categories / priorities: counts over the finished tickets.
        needs_human: finished tickets flagged for a human.
        retries: failed attempts retried in this run.
        reclaimed: tasks taken back from dead workers in this run.
        dead: ``(task id, error)`` of every DEAD task.
        elapsed_s: seconds this run took.
    """

    tickets: int
    skipped: list[tuple[int, str, str]]
    written: int
    categories: Counter[str] = field(default_factory=Counter)
    priorities: Counter[str] = field(default_factory=Counter)
    needs_human: int = 0
    retries: int = 0
    reclaimed: int = 0
    dead: list[tuple[str, str]] = field(default_factory=list)
    elapsed_s: float = 0.0


def _finished_records(store: TaskStore, wanted: set[str],
                      triage_kind: str) -> list[dict[str, Any]]:
    return [t.result for t in store.list_tasks(status=Status.COMPLETED, kind=triage_kind)
            if t.result and str(t.result.get("id")) in wanted]


def _check_earlier_run(tickets: TicketFile, store: TaskStore, outbox: Outbox,
                       fingerprint: str) -> None:
    """Refuse to mix this input with an earlier run's different tickets or model.

    Raises:
        InputError: a ticket id already stored with other text (file and line named).
        ConfigurationError: the stored tickets were processed with another model or
            examples, or --out holds results the task database does not know.
    """
    stored = {t.payload.get("ticket_id"): t.payload for t in store.list_tasks()
              if t.kind.startswith(CLASSIFY)}
    where = tickets.path or "<input>"
    for ticket in tickets.tickets:
        earlier = stored.get(ticket.id)
        if earlier is None:
            continue
        if (earlier.get("subject"), earlier.get("body")) != (ticket.subject, ticket.body):
            raise InputError(
                f"ticket {ticket.id} is not the ticket with that id already processed in "
                "this task database (an earlier run on other input): use another --db (or "
                "--schema with --dsn) and --out for this input", path=where, line=ticket.line)
        if earlier.get("model", fingerprint) != fingerprint:
            raise ConfigurationError(
                "the tickets in this task database were processed with other examples or "
                "another model: use the same --examples / --model as that run, or another "
                "--db and --out")
    unknown = [i for i in outbox.sent & {t.id for t in tickets.tickets} if i not in stored]
    if unknown:
        raise ConfigurationError(
            f"{outbox.path} already holds results for {len(unknown)} of these tickets "
            f"(e.g. {sorted(unknown)[0]}) that the task database does not know: use another "
            "--out, or the --db of the run that wrote it")


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


async def run_job(tickets: TicketFile, store: TaskStore, out: str | Path, *, workers: int,
                  job: TicketJob | None = None, model: Any = None, max_attempts: int = 3,
                  stale_after: float = 90.0, exclusive_db: str | None = None,
                  progress: Callable[[JobProgress], None] | None = None,
                  worker_factory: Callable[[str], Worker] | None = None) -> JobReport:
    """Run the ticket job to the end and write one output line per ticket.

    Args:
        tickets: what :func:`~foreperson.tickets.reader.read_tickets` returned.
        store: the task store (SQLite file or PostgreSQL).
        out: the JSON Lines output file.
        workers: local workers (each runs one task at a time); 0 = only supervise while
            ``foreperson worker foreperson.tickets.job`` processes do the work.
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
        _check_earlier_run(tickets, store, outbox, job.fingerprint)
        run_id = job.run_id(tickets)
        app = job.app()
        sup = Supervisor(store, stale_after=stale_after, kinds=app.kinds)
        make = worker_factory or (lambda name: app.worker(name))
        for i in range(workers):
            sup.register(make(f"{JOB_WORKER}{host}:{os.getpid()}:w{i + 1}"))
        wanted = {t.id for t in tickets.tickets}
        writer = _Writer(outbox, wanted, began, progress)
        todo = [t for t in tickets.tickets if t.id not in outbox.sent]
        counted = await _run(sup, job, todo, run_id, writer, local=workers > 0)
        return _report(tickets, store, job, outbox, counted, len(orphans), began)
    finally:
        outbox.close()
        if lock is not None:
            lock.close()


async def _run(sup: Supervisor, job: TicketJob, todo: Sequence[Ticket], run_id: str,
               writer: _Writer, *, local: bool) -> tuple[int, int]:
    """Submit the tickets' tasks and write them as they complete; returns
    ``(retries, reclaimed)`` of this run."""
    async def submit_and_write() -> None:
        handles: list[TaskHandle] = []
        for start in range(0, len(todo), 1000):
            tasks = [task for t in todo[start:start + 1000] for task in job.tasks(t, run_id)]
            handles += (await sup.submit_many(tasks))[2::3]      # the triage tasks
        await _write_as_completed(sup, handles, writer)

    if local:
        async with sup.serving():
            await submit_and_write()
    else:
        async with anyio.create_task_group() as group:
            group.start_soon(_sweep, sup)
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
    return JobReport(
        tickets=len(tickets.tickets), skipped=tickets.skipped,
        written=len(outbox.sent & wanted),
        categories=Counter(r["category"] for r in results),
        priorities=Counter(r["priority"] for r in results),
        needs_human=sum(1 for r in results if r["needs_human"]),
        retries=retries, reclaimed=reclaimed + orphans, dead=dead,
        elapsed_s=time.monotonic() - began)
