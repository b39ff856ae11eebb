"""The nightly ticket job of seed 000: classify every ticket, draft a reply, triage.

Each ticket becomes three tasks linked by ``depends_on``::

    <id>/classify  ->  <id>/draft  ->  <id>/triage

The triage task's result is the ticket's output record. Writing it to the output file
(the "send") is done once per ticket by the supervisor's :class:`Outbox`, from stored
results only: a worker whose lease was lost cannot complete, so its late result never
reaches the file, and a re-run after a crash skips every ticket already in the file.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio

from ..errors import ConfigurationError, GiveUp, InputError, RunError
from ..work.app import App
from ..work.store import StoreStats, TaskStore
from ..work.supervisor import Supervisor
from ..work.task import Status, Task
from ..work.worker import current_task
from .model import Classification, TicketModel, bundled_examples, load_examples
from .reader import Ticket, TicketFile

__all__ = ["CLASSIFY", "DRAFT", "TRIAGE", "JobReport", "Outbox", "configure", "kinds_for",
           "ticket_app",
           "run_job", "ticket_tasks"]

CLASSIFY, DRAFT, TRIAGE = "classify_ticket", "draft_reply", "triage_ticket"
OUTPUT_FIELDS = ("id", "category", "priority", "needs_human", "reason", "draft_reply",
                 "attempts")

_model: Any = None   # TicketModel or LlmTicketModel
_model_lock = threading.Lock()


def configure(model: Any) -> None:
    """Set the model the ticket workers of this process use (a
    :class:`~foreperson.tickets.model.TicketModel` or
    :class:`~foreperson.tickets.llm.LlmTicketModel`)."""
    global _model
    _model = model


def _current_model() -> TicketModel:
    """The configured model. Worker processes started with ``foreperson worker
    foreperson.tickets.job`` build one from the environment: ``FOREPERSON_TICKETS_EXAMPLES``
    (a labelled file; default the bundled examples), ``FOREPERSON_TICKETS_MODEL`` and
    ``FOREPERSON_TICKETS_BASE_URL`` (a language model instead of the offline one)."""
    global _model
    with _model_lock:            # worker threads start together: train once
        if _model is None:
            _model = _model_from_environment()
    return _model


def _model_from_environment() -> Any:
    path = os.environ.get("FOREPERSON_TICKETS_EXAMPLES")
    examples = load_examples(path) if path else bundled_examples()
    llm = os.environ.get("FOREPERSON_TICKETS_MODEL")
    if llm:
        from .llm import LlmTicketModel
        return LlmTicketModel(llm, examples,
                              base_url=os.environ.get("FOREPERSON_TICKETS_BASE_URL"))
    return TicketModel(examples)


def model_fingerprint(model: Any) -> str:
    """A short hash of what decides a ticket's result: the model's kind and settings and
    every training example. Stored in each task's payload, so a re-run with other
    examples (or a worker process configured differently) is noticed."""
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


def ticket_app(model: Any = None) -> App:
    """The ticket job's task functions for ``model`` (default: this process's model,
    see :func:`configure`), under the kinds of :func:`kinds_for`."""
    app = App()
    fns = (classify_ticket, draft_reply, triage_ticket)
    for kind, fn in zip(kinds_for(model_fingerprint(model or _current_model())), fns,
                        strict=True):
        app.task(kind)(fn)
    return app


def __getattr__(name: str) -> Any:
    """``app``: what ``foreperson worker foreperson.tickets.job`` runs, built from the
    environment (see :func:`_current_model`)."""
    if name == "app":
        return ticket_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def ticket_tasks(ticket: Ticket, *, model: str = "", max_attempts: int = 3) -> list[Task]:
    """The three tasks of one ticket, with ids derived from the ticket id (so adding the
    same ticket twice is harmless).

    Args:
        ticket: the ticket.
        model: the :func:`model_fingerprint` the tasks must be run with (it is part of
            their kinds).
        max_attempts: attempts per task.
    """
    classify_kind, draft_kind, triage_kind = kinds_for(model)
    text = {"ticket_id": ticket.id, "subject": ticket.subject, "body": ticket.body,
            "model": model}
    classify = Task(classify_kind, text, id=f"{ticket.id}/classify",
                    max_attempts=max_attempts)
    draft = Task(draft_kind, {"ticket_id": ticket.id, "model": model},
                 id=f"{ticket.id}/draft", depends_on=[classify.id], max_attempts=max_attempts)
    triage = Task(triage_kind, {"ticket_id": ticket.id, "model": model},
                  id=f"{ticket.id}/triage", depends_on=[classify.id, draft.id],
                  max_attempts=max_attempts)
    return [classify, draft, triage]


def _model_for(task: Task) -> Any:
    """This process's model, refusing tasks made for another one."""
    model = _current_model()
    wanted = task.payload.get("model")
    if wanted and wanted != model_fingerprint(model):
        raise GiveUp("this worker's ticket model differs from the job's (other examples or "
                     "model): start `foreperson worker foreperson.tickets.job` with the same "
                     "FOREPERSON_TICKETS_EXAMPLES / FOREPERSON_TICKETS_MODEL as the job, then "
                     "`foreperson retry --all-dead`")
    return model


def _text(payload: dict[str, Any]) -> str:
    return f"{payload.get('subject', '')}\n{payload.get('body', '')}".strip()


def classify_ticket(task: Task) -> dict[str, Any]:
    """Category, confidence and priority of the ticket in ``task.payload``."""
    result = _model_for(task).classify(_text(task.payload))
    return {"category": result.category, "confidence": round(result.confidence, 4),
            "priority": result.priority, "text": _text(task.payload)}


def draft_reply(task: Task) -> dict[str, Any]:
    """A draft reply from the nearest answered example of the same category."""
    (classified,) = current_task().dependency_results().values()
    return _model_for(task).draft(classified["text"], classified["category"])


def triage_ticket(task: Task) -> dict[str, Any]:
    """The ticket's output record: needs_human with the reasons, and the draft."""
    ctx = current_task()
    results = ctx.dependency_results()
    classified = results[f"{task.payload['ticket_id']}/classify"]
    drafted = results[f"{task.payload['ticket_id']}/draft"]
    verdict = Classification(classified["category"], classified["confidence"],
                             classified["priority"])
    triage = _model_for(task).triage(classified["text"], verdict)
    attempts = task.attempts       # the most attempts any of the ticket's steps needed
    for dep in task.depends_on:
        record = ctx.store.get(dep)
        attempts = max(attempts, record.attempts if record else 0)
    return {"id": task.payload["ticket_id"], "category": verdict.category,
            "priority": verdict.priority, "needs_human": triage.needs_human,
            "reason": triage.reason, "draft_reply": drafted["draft_reply"],
            "attempts": attempts}


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
    stored = {t.id: t.payload for t in store.list_tasks() if t.id.endswith("/classify")}
    where = tickets.path or "<input>"
    for ticket in tickets.tickets:
        earlier = stored.get(f"{ticket.id}/classify")
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
    unknown = [i for i in outbox.sent & {t.id for t in tickets.tickets}
               if f"{i}/classify" not in stored]
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


async def run_job(tickets: TicketFile, store: TaskStore, out: str | Path, *, workers: int,
                  model: Any = None, max_attempts: int = 3,
                  stale_after: float = 90.0, exclusive_db: str | None = None,
                  progress: Callable[[StoreStats, int], None] | None = None,
                  worker_factory: Callable[[str], Any] | None = None) -> JobReport:
    """Run the ticket job to the end and write one output line per ticket.

    Args:
        tickets: what :func:`~foreperson.tickets.reader.read_tickets` returned.
        store: the task store (SQLite file or PostgreSQL).
        out: the JSON Lines output file.
        workers: local workers (each runs one task at a time); 0 = only supervise while
            ``foreperson worker foreperson.tickets.job`` processes do the work.
        model: the offline model (default: trained on the bundled examples).
        max_attempts: attempts per task before it is DEAD.
        stale_after: seconds without a heartbeat before a task is reclaimed.
        exclusive_db: a SQLite path: take the job lock on it and, holding it, reclaim at
            once the tasks a crashed earlier run left held.
        progress: called about twice a second with the store's stats and the number of
            tickets written.
        worker_factory: builds a worker by name (default: this module's app).

    Returns:
        a :class:`JobReport`.

    Raises:
        ConfigurationError: the database or output file is in use by another job.
    """
    began = time.monotonic()
    if model is not None:
        configure(model)
    else:
        _current_model()
    lock = _JobLock(exclusive_db) if exclusive_db else None
    outbox = Outbox(out)
    try:
        wanted = {t.id for t in tickets.tickets}
        orphans = 0
        if lock is not None:      # we hold the job lock: whatever is held is orphaned
            orphans = len(store.reclaim_stale(0.0))
        fingerprint = model_fingerprint(_current_model())
        _check_earlier_run(tickets, store, outbox, fingerprint)
        app = ticket_app()
        triage_kind = kinds_for(fingerprint)[2]
        supervisor = Supervisor(store, stale_after=stale_after, kinds=app.kinds)
        tasks = [task for t in tickets.tickets if t.id not in outbox.sent
                 for task in ticket_tasks(t, model=fingerprint, max_attempts=max_attempts)]
        for start in range(0, len(tasks), 3000):
            supervisor.add_tasks(tasks[start:start + 3000])
        make = worker_factory or (lambda name: app.worker(name))
        host = socket.gethostname()
        for i in range(workers):
            supervisor.register(make(f"{host}:{os.getpid()}:w{i + 1}"))

        def job_done() -> bool:
            """Every ticket of this input is written or has a DEAD task (other work in a
            shared database does not keep the job running)."""
            open_tickets = wanted - outbox.sent
            if not open_tickets:
                return True
            dead = {t.id.rsplit("/", 1)[0] for t in store.list_tasks(status=Status.DEAD)}
            return open_tickets <= dead and not any(
                t.id.rsplit("/", 1)[0] in open_tickets
                for s in (Status.PENDING, Status.ASSIGNED, Status.RUNNING, Status.FAILED)
                for t in store.list_tasks(status=s))

        def tick(stats: StoreStats) -> None:
            outbox.send(_finished_records(store, wanted, triage_kind))
            if progress is not None:
                progress(stats, len(outbox.sent & wanted))
            if workers > 0 and stats.unfinished and job_done():
                supervisor.stop()

        if workers > 0:
            report = await supervisor.run(progress=tick)
            retries, reclaimed = report.retries, report.reclaimed + orphans
        else:
            retries, reclaimed = 0, orphans
            while True:
                stats = await anyio.to_thread.run_sync(store.stats)
                reclaimed += len(await anyio.to_thread.run_sync(store.reclaim_stale,
                                                                stale_after))
                await anyio.to_thread.run_sync(store.park_blocked)
                tick(stats)
                if stats.unfinished == 0 or job_done():
                    break
                await anyio.sleep(0.5)
        outbox.send(_finished_records(store, wanted, triage_kind))
        results = _finished_records(store, wanted, triage_kind)
        dead = [(t.id, t.error or "") for t in store.list_tasks(status=Status.DEAD)
                if t.id.rsplit("/", 1)[0] in wanted]
        return JobReport(
            tickets=len(tickets.tickets), skipped=tickets.skipped,
            written=len(outbox.sent & wanted),
            categories=Counter(r["category"] for r in results),
            priorities=Counter(r["priority"] for r in results),
            needs_human=sum(1 for r in results if r["needs_human"]),
            retries=retries, reclaimed=reclaimed, dead=dead,
            elapsed_s=time.monotonic() - began)
    finally:
        outbox.close()
        if lock is not None:
            lock.close()
