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
import json
import os
import socket
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio

from ..errors import ConfigurationError, InputError
from ..work.app import App
from ..work.store import StoreStats, TaskStore
from ..work.supervisor import Supervisor
from ..work.task import Status, Task
from ..work.worker import current_task
from .model import Classification, TicketModel, bundled_examples, load_examples
from .reader import Ticket, TicketFile

__all__ = ["CLASSIFY", "DRAFT", "TRIAGE", "JobReport", "Outbox", "app", "configure",
           "run_job", "ticket_tasks"]

CLASSIFY, DRAFT, TRIAGE = "classify_ticket", "draft_reply", "triage_ticket"
OUTPUT_FIELDS = ("id", "category", "priority", "needs_human", "reason", "draft_reply",
                 "attempts")

app = App()
_model: Any = None   # TicketModel or LlmTicketModel


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
    if _model is None:
        path = os.environ.get("FOREPERSON_TICKETS_EXAMPLES")
        examples = load_examples(path) if path else bundled_examples()
        llm = os.environ.get("FOREPERSON_TICKETS_MODEL")
        if llm:
            from .llm import LlmTicketModel
            _model = LlmTicketModel(llm, examples,
                                    base_url=os.environ.get("FOREPERSON_TICKETS_BASE_URL"))
        else:
            _model = TicketModel(examples)
    return _model


def ticket_tasks(ticket: Ticket, *, max_attempts: int = 3) -> list[Task]:
    """The three tasks of one ticket, with ids derived from the ticket id (so adding the
    same ticket twice is harmless)."""
    text = {"ticket_id": ticket.id, "subject": ticket.subject, "body": ticket.body}
    classify = Task(CLASSIFY, text, id=f"{ticket.id}/classify", max_attempts=max_attempts)
    draft = Task(DRAFT, {"ticket_id": ticket.id}, id=f"{ticket.id}/draft",
                 depends_on=[classify.id], max_attempts=max_attempts)
    triage = Task(TRIAGE, {"ticket_id": ticket.id}, id=f"{ticket.id}/triage",
                  depends_on=[classify.id, draft.id], max_attempts=max_attempts)
    return [classify, draft, triage]


def _text(payload: dict[str, Any]) -> str:
    return f"{payload.get('subject', '')}\n{payload.get('body', '')}".strip()


@app.task(CLASSIFY)
def classify_ticket(task: Task) -> dict[str, Any]:
    """Category, confidence and priority of the ticket in ``task.payload``."""
    result = _current_model().classify(_text(task.payload))
    return {"category": result.category, "confidence": round(result.confidence, 4),
            "priority": result.priority, "text": _text(task.payload)}


@app.task(DRAFT)
def draft_reply(task: Task) -> dict[str, Any]:
    """A draft reply from the nearest answered example of the same category."""
    (classified,) = current_task().dependency_results().values()
    return _current_model().draft(classified["text"], classified["category"])


@app.task(TRIAGE)
def triage_ticket(task: Task) -> dict[str, Any]:
    """The ticket's output record: needs_human with the reasons, and the draft."""
    ctx = current_task()
    results = ctx.dependency_results()
    classified = results[f"{task.payload['ticket_id']}/classify"]
    drafted = results[f"{task.payload['ticket_id']}/draft"]
    verdict = Classification(classified["category"], classified["confidence"],
                             classified["priority"])
    triage = _current_model().triage(classified["text"], verdict)
    attempts = task.attempts
    for dep in task.depends_on:
        record = ctx.store.get(dep)
        attempts += record.attempts if record else 0
    return {"id": task.payload["ticket_id"], "category": verdict.category,
            "priority": verdict.priority, "needs_human": triage.needs_human,
            "reason": triage.reason, "draft_reply": drafted["draft_reply"],
            "attempts": attempts}


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
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = _open_exclusive(
            self.path, "a+b", f"{self.path} is being written by another foreperson job; "
            "wait for it or choose another --out")
        self.sent: set[str] = set()
        self._recover()

    def _recover(self) -> None:
        self._file.seek(0)
        data = self._file.read()
        good = data.rfind(b"\n") + 1          # everything after the last newline is torn
        if good < len(data):
            self._file.truncate(good)
        for number, line in enumerate(data[:good].splitlines(), start=1):
            if not line.strip():
                continue
            try:
                self.sent.add(str(json.loads(line)["id"]))
            except (ValueError, KeyError, TypeError):
                raise InputError("not a foreperson results line; choose another --out",
                                 path=str(self.path), line=number) from None
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
        self._file.write(blob)
        self._file.flush()
        os.fsync(self._file.fileno())
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


def _finished_records(store: TaskStore, wanted: set[str]) -> list[dict[str, Any]]:
    return [t.result for t in store.list_tasks(status=Status.COMPLETED, kind=TRIAGE)
            if t.result and str(t.result.get("id")) in wanted]


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
        if lock is not None:      # we hold the job lock: whatever is held is orphaned
            store.reclaim_stale(0.0)
        supervisor = Supervisor(store, stale_after=stale_after, kinds=app.kinds)
        tasks = [task for t in tickets.tickets if t.id not in outbox.sent
                 for task in ticket_tasks(t, max_attempts=max_attempts)]
        for start in range(0, len(tasks), 3000):
            supervisor.add_tasks(tasks[start:start + 3000])
        make = worker_factory or (lambda name: app.worker(name))
        host = socket.gethostname()
        for i in range(workers):
            supervisor.register(make(f"{host}:{os.getpid()}:w{i + 1}"))

        def tick(stats: StoreStats) -> None:
            outbox.send(_finished_records(store, wanted))
            if progress is not None:
                progress(stats, len(outbox.sent & wanted))

        if workers > 0:
            report = await supervisor.run(progress=tick)
            retries, reclaimed = report.retries, report.reclaimed
        else:
            retries = reclaimed = 0
            while True:
                stats = await anyio.to_thread.run_sync(store.stats)
                reclaimed += len(await anyio.to_thread.run_sync(store.reclaim_stale,
                                                                stale_after))
                await anyio.to_thread.run_sync(store.park_blocked)
                tick(stats)
                if stats.unfinished == 0:
                    break
                await anyio.sleep(0.5)
        outbox.send(_finished_records(store, wanted))
        results = _finished_records(store, wanted)
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
