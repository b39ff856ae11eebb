"""One run of the ticket job on a task store: :func:`run_job`.

The job submits each ticket's tasks (:mod:`~foreperson.tickets.tasks`) and awaits the
triage handles as they complete (``Supervisor.as_completed``), writing each record to
the results file (the "send") through the :class:`~foreperson.tickets.results.Outbox`:
from stored results only, so a worker whose lease was lost cannot complete and its late
result never reaches the file. The outbox is its own ledger, and the send is at least
once with a key (the ticket id) that the file dedupes: a re-run after a crash skips
every ticket already in the file and writes the ones whose results were stored but not
yet written. The cost per completed ticket is constant: no table scan while the job
runs. Progress is reported about four times a second (:class:`JobProgress`), and the
run ends with a :class:`JobReport`.
"""

from __future__ import annotations

import os
import socket
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from ..errors import first_error
from ..work.handles import TaskHandle
from ..work.leases import DEFAULT_LEASE_S
from ..work.store import TaskStore
from ..work.supervisor import Supervisor
from ..work.task import Status, Task
from ..work.worker import Worker
from .model import TicketModel, bundled_examples
from .reader import Ticket, TicketFile
from .rerun import check_rerun
from .results import Outbox, open_exclusive
from .tasks import TicketJob

__all__ = ["JOB_WORKER", "JobProgress", "JobReport", "local_workers", "run_job"]

JOB_WORKER = "job@"
"""Prefix of the names of a ticket job's own local workers (``job@host:pid:wN``)."""


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


class _JobLock:
    """One job per SQLite database at a time; a crashed holder's lock vanishes with it."""

    def __init__(self, db: str) -> None:
        self.path = f"{db}.lock"
        self._file = open_exclusive(self.path, "a+", f"another foreperson job is running on "
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
        check_rerun(tickets, store, outbox.sent, str(outbox.path), job.fingerprint,
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
        try:
            counted = await _run(sup, job, todo, run_id, writer, watch=watch)
        except BaseExceptionGroup as errors:      # the cause, not the group around it
            raise first_error(errors) from None
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
