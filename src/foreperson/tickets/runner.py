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
from collections.abc import AsyncIterator, Callable, Iterator
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
from .reader import Ticket, Tickets
from .rerun import check_rerun, revive_endpoint_down
from .results import Outbox, open_exclusive
from .tasks import TicketJob, endpoint_down

__all__ = ["CHUNK_TICKETS", "FLUSH_TICKETS", "JOB_WORKER", "LOCAL_POLL_S", "RAISED",
           "WINDOW_TICKETS", "EndpointDown", "JobProgress", "JobReport", "local_workers",
           "run_job"]

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
        priority_raised: finished tickets whose priority triage raised to high.
        retries: failed attempts retried in this run.
        reclaimed: tasks taken back from dead workers in this run.
        dead: ``(task id, error)`` of every DEAD task.
        elapsed_s: seconds this run took.
        endpoints_down: the language model endpoints that were not answering, each with
            the tickets they left undone (their tasks are among ``dead``; a re-run tries
            them again).
        revived: tickets an earlier run left undone because the model's endpoint was
            not answering, tried again by this run.
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
    priority_raised: int = 0
    retries: int = 0
    reclaimed: int = 0
    dead: list[tuple[str, str]] = field(default_factory=list)
    elapsed_s: float = 0.0
    endpoints_down: list[EndpointDown] = field(default_factory=list)
    revived: int = 0


@dataclass(frozen=True)
class EndpointDown:
    """A language model endpoint that was not answering (its circuit breaker open), and
    what that left undone.

    Attributes:
        endpoint: the server's URL, credentials redacted.
        why: its last failure (``"timed out after 30 s"``, ``"cannot connect: ..."``).
        tickets: ids of the tickets it left undone, in the store's order (their tasks
            are DEAD; running the job again once the server answers does them).
    """

    endpoint: str
    why: str
    tickets: tuple[str, ...]


RAISED = "priority raised to high"
"""The kind of reason triage gives when it raised a ticket's priority."""


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
class _Tally:
    """Counts over finished tickets' records, kept as they are written (O(1) each)."""

    categories: Counter[str] = field(default_factory=Counter)
    priorities: Counter[str] = field(default_factory=Counter)
    languages: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    needs_human: int = 0
    low_confidence_only: int = 0
    priority_raised: int = 0

    def add(self, r: dict[str, Any]) -> None:
        """Count one ticket's output record (a triage task's result)."""
        kinds = {_reason_kind(x) for x in r.get("reasons") or ([r["reason"]] if r["reason"]
                                                                else [])}
        self.reasons.update(kinds)
        self.low_confidence_only += kinds == {"low confidence"}
        self.priority_raised += RAISED in kinds
        self.categories[r["category"]] += 1
        self.priorities[r["priority"]] += 1
        self.languages[r.get("language") or "?"] += 1
        self.needs_human += bool(r["needs_human"])


@dataclass
class _Writer:
    """Collects finished tickets and writes them to the outbox in batches (one fsync
    per batch), from a thread. Holds only what is not written yet: a few batches."""

    outbox: Outbox
    total: int
    began: float
    progress: Callable[[JobProgress], None] | None
    earlier: int = 0
    written: int = 0
    tally: _Tally = field(default_factory=_Tally)
    pending: list[dict[str, Any]] = field(default_factory=list)
    dead: set[str] = field(default_factory=set)

    def finished(self, task: Task) -> None:
        if task.status is Status.COMPLETED:
            self.pending.append(task.result)
        else:
            self.dead.add(str(task.payload.get("ticket_id", task.id)))

    def flush(self) -> int:
        """Write what is pending (one fsync); returns how many records it took."""
        batch, self.pending = self.pending, []
        if batch:
            fresh = {str(r["id"]) for r in batch} - self.outbox.sent
            self.written += self.outbox.send(batch)
            for record in batch:
                key = str(record["id"])
                if key in fresh:
                    fresh.discard(key)
                    self.tally.add(record)
        if self.progress is not None:
            self.progress(JobProgress(self.total, self.earlier + self.written,
                                      len(self.dead), time.monotonic() - self.began))
        return len(batch)


CHUNK_TICKETS = 500
"""Tickets read from the input and submitted (three tasks each) at a time."""

WINDOW_TICKETS = 2000
"""Most tickets submitted and not yet written to the results file (the look-ahead): the
job reads more of the input only as results are written, so memory and every per-turn
cost stay the same for a thousand tickets and for a million, and the results file is
never more than this behind the store."""

FLUSH_TICKETS = 250
"""Finished tickets that make the writer write at once (else it writes every 0.25 s)."""


class _Window:
    """A count of tickets in flight, bounded: :meth:`take` waits for room."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.used = 0
        self._room = anyio.Event()

    async def take(self, n: int) -> None:
        """Wait until ``n`` more fit (a chunk larger than the window fits alone)."""
        while self.used and self.used + n > self.size:
            self._room = anyio.Event()
            await self._room.wait()
        self.used += n

    def give(self, n: int = 1) -> None:
        """``n`` tickets are done with (written, or DEAD)."""
        self.used -= n
        self._room.set()


LOCAL_POLL_S = 0.5
"""With local workers, seconds between asking the store which of the awaited tickets
finished elsewhere (an earlier run, another process): the local workers' results
arrive at once without asking."""


async def _settled_here(sup: Supervisor, handles: list[TaskHandle]) -> AsyncIterator[TaskHandle]:
    """``handles`` as their tasks finish, when this process's workers run them: each
    comes out when its worker settles it; the store is asked (one query for every
    waiter) at once and then every :data:`LOCAL_POLL_S`, not after every settled batch
    as :meth:`~foreperson.work.supervisor.Supervisor.as_completed` does for work done
    elsewhere (that asking, every few milliseconds for thousands of tickets, took a
    fifth of the job's time)."""
    waiters = sup.waiters
    remaining = dict.fromkeys(handles)
    asked = 0.0
    while remaining:
        wakeup = waiters.wakeup()
        waiters.deliver()
        done = [h for h in remaining if h.done]
        for handle in done:
            del remaining[handle]
            yield handle
        if done or not remaining:
            continue
        left = asked + LOCAL_POLL_S - time.monotonic()
        if left > 0:
            await waiters.news(wakeup, left)
        if not wakeup.is_set():
            asked = time.monotonic()
            await waiters.poll()


async def _write_as_completed(sup: Supervisor, job: TicketJob,
                              chunks: Iterator[list[Ticket]], run_id: str,
                              writer: _Writer) -> None:
    """Read the input a chunk at a time, submit each chunk's tasks while at most
    :data:`WINDOW_TICKETS` tickets are unwritten, and write each ticket as its triage task
    finishes; flush every 0.25 s."""
    room = _Window(WINDOW_TICKETS)
    full = anyio.Event()

    async def flusher() -> None:
        nonlocal full
        while True:
            with anyio.move_on_after(0.25):
                await full.wait()
            full = anyio.Event()
            room.give(await anyio.to_thread.run_sync(writer.flush))

    async def collect(handles: list[TaskHandle]) -> None:
        finished = (_settled_here(sup, handles) if sup.workers
                    else sup.as_completed(handles))
        async for handle in finished:
            task = await handle.wait()
            writer.finished(task)
            if task.status is not Status.COMPLETED:
                room.give()                   # DEAD: nothing to write
            elif len(writer.pending) >= FLUSH_TICKETS:
                full.set()

    async with anyio.create_task_group() as outer:
        outer.start_soon(flusher)
        async with anyio.create_task_group() as group:
            while True:
                chunk = await anyio.to_thread.run_sync(next, chunks, None)
                if chunk is None:
                    break
                todo = [t for t in chunk if t.id not in writer.outbox.sent]
                if not todo:
                    continue
                await room.take(len(todo))
                tasks = [task for t in todo for task in job.tasks(t, run_id)]
                group.start_soon(collect, (await sup.submit_many(tasks))[2::3])  # triage
        outer.cancel_scope.cancel()
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


async def run_job(tickets: Tickets, store: TaskStore, out: str | Path, *, workers: int,
                  job: TicketJob | None = None, model: Any = None, max_attempts: int = 3,
                  stale_after: float = DEFAULT_LEASE_S, exclusive_db: str | None = None,
                  progress: Callable[[JobProgress], None] | None = None,
                  worker_factory: Callable[[str], Worker] | None = None,
                  notice: Callable[[str], None] | None = None,
                  remote_hint: str = "", stalled_after_s: float = 30.0) -> JobReport:
    """Run the ticket job to the end and write one output line per ticket.

    Args:
        tickets: what :func:`~foreperson.tickets.reader.read_tickets` or
            :func:`~foreperson.tickets.reader.scan_tickets` returned. A stream is read
            :data:`CHUNK_TICKETS` at a time while the workers run, at most
            :data:`WINDOW_TICKETS` submitted and not yet finished, each ticket written
            as it finishes: memory does not grow with the input.
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

    A ticket whose task is DEAD because the language model's endpoint was not answering
    (its circuit breaker open: the task is not retried, the rest of the input fails
    fast) is named in the report's ``endpoints_down``, and the next run on the same
    store tries it again (:func:`~foreperson.tickets.rerun.revive_endpoint_down`).

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
        revived = revive_endpoint_down(tickets, store, job.kinds)
        run_id = job.run_id(tickets)
        app = job.app()
        sup = Supervisor(store, stale_after=stale_after, kinds=app.kinds)
        make = worker_factory or (lambda name: app.worker(name))
        for i in range(local_workers(job, workers)):
            sup.register(make(f"{JOB_WORKER}{host}:{os.getpid()}:w{i + 1}"))
        # the results file holds only this input's tickets (check_rerun): all count
        writer = _Writer(outbox, tickets.count, began, progress, earlier=len(outbox.sent))
        _tally_earlier(tickets, store, outbox.sent, writer.tally)
        watch = None if workers > 0 else _RemoteWatch(store, writer, job, notice, remote_hint,
                                                      stalled_after_s)
        try:
            counted = await _run(sup, job, tickets.chunks(CHUNK_TICKETS), run_id, writer,
                                 watch=watch)
        except BaseExceptionGroup as errors:      # the cause, not the group around it
            raise first_error(errors) from None
        report = _report(tickets, store, job, writer, counted, len(orphans), began)
        report.revived = len(revived)
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


async def _run(sup: Supervisor, job: TicketJob, chunks: Iterator[list[Ticket]], run_id: str,
               writer: _Writer, *, watch: _RemoteWatch | None) -> tuple[int, int]:
    """Submit the tickets' tasks a chunk at a time and write them as they complete;
    returns ``(retries, reclaimed)`` of this run."""
    if watch is None:
        async with sup.serving():
            await _write_as_completed(sup, job, chunks, run_id, writer)
    else:
        async with anyio.create_task_group() as group:
            group.start_soon(_sweep, sup)
            group.start_soon(watch.run)
            await _write_as_completed(sup, job, chunks, run_id, writer)
            group.cancel_scope.cancel()
    return sup.counters.retries, sup.counters.reclaimed


def _tally_earlier(tickets: Tickets, store: TaskStore, sent: set[str], tally: _Tally) -> None:
    """Count the tickets an earlier run wrote (their stored records, a chunk at a time;
    nothing is read when the results file is empty)."""
    if not sent:
        return
    for chunk in tickets.chunks(500):
        ids = [f"{t.id}/triage" for t in chunk if t.id in sent]
        if ids:
            for task in store.finished_among(ids).values():
                if task.status is Status.COMPLETED:
                    tally.add(task.result)


def _report(tickets: Tickets, store: TaskStore, job: TicketJob, writer: _Writer,
            counted: tuple[int, int], orphans: int, began: float) -> JobReport:
    """The job's report, from the tallies kept as tickets were written and one read of
    the DEAD tasks."""
    dead_tasks = [t for t in store.list_tasks(status=Status.DEAD)
                  if t.kind in job.kinds and tickets.has_id(str(t.payload.get("ticket_id")))]
    dead = [(t.id, t.error or "") for t in dead_tasks]
    retries, reclaimed = counted
    tally = writer.tally
    return JobReport(
        tickets=tickets.count, skipped=tickets.skipped,
        written=writer.earlier + writer.written, earlier=writer.earlier,
        categories=tally.categories, priorities=tally.priorities, languages=tally.languages,
        needs_human=tally.needs_human, reasons=tally.reasons,
        low_confidence_only=tally.low_confidence_only, priority_raised=tally.priority_raised,
        retries=retries, reclaimed=reclaimed + orphans, dead=dead,
        elapsed_s=time.monotonic() - began, endpoints_down=_endpoints_down(dead_tasks))


def _endpoints_down(dead: list[Task]) -> list[EndpointDown]:
    """The endpoints that ``dead`` tasks say were not answering, each with its tickets
    and the last failure recorded for it, the endpoint with the most tickets first."""
    found: dict[str, tuple[str, dict[str, None]]] = {}
    for task in dead:
        down = endpoint_down(task.error)
        if down is not None:
            endpoint, why = down
            found.setdefault(endpoint, (why, {}))[1][str(task.payload.get("ticket_id"))] = None
    return sorted((EndpointDown(endpoint, why, tuple(ids))
                   for endpoint, (why, ids) in found.items()),
                  key=lambda e: -len(e.tickets))
