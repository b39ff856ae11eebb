"""Retention: old finished work leaves the store, while workers run.

``store.prune(Retention(older_than_s=30 * 86400))`` (``foreperson db prune --older-than
30d``) removes, in short transactions:

* **task runs whose every task finished** (COMPLETED or DEAD) and whose last task
  finished before the cutoff, with their dependency edges, locks, effect records and
  journal steps; a task outside any run goes alone, once it is old and nothing
  unfinished depends on it. DEAD tasks may be kept longer (``keep_dead_s``): they are
  the ones a person may still want to look at or retry;
* **durable agent runs** that are completed or failed, with their steps, and state
  machine journals that ended (never a run that is running, waiting, parked on an
  approval or interrupted: it may be resumed);
* the history chart's changes older than a week, the counts of workers not seen since
  the cutoff, and tombstones older than ``forget_after_s``.

What is never removed: anything unfinished, anything something unfinished depends on,
any part of a run that is not over. A removed task leaves a **tombstone** (its id, run
and when): adding that id again raises :class:`~foreperson.errors.InvalidPlan` instead
of silently running the work a second time (after ``forget_after_s`` the tombstone goes
too, and the id may be reused).

Each transaction removes as many tasks as fit in ``transaction_s`` (5 ms of a write lock
on SQLite by default; 50 ms on PostgreSQL, where it locks finished rows only, which no
worker claims), with a pause between them so claims go first. ``archive`` writes every removed
record to a gzip'd JSON-lines file before it is removed (a crash in between leaves a
record in both: nothing is lost). SQLite files created by this version give the freed
space back to the file system in small steps (``auto_vacuum = INCREMENTAL``); older
files reuse it for new tasks. """

from __future__ import annotations

import dataclasses
import gzip
import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any, NamedTuple, Protocol, runtime_checkable

from ..errors import ConfigurationError
from .task import Task

__all__ = ["PruneCandidate", "PruneReport", "Prunes", "PrunesByPrimitives", "Retention",
           "drop_ended_runs", "parse_age", "prune_store", "task_record"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(text: str | float | int, *, what: str = "age") -> float:
    """Seconds in an age written as a number and a unit: ``90s``, ``15m``, ``12h``,
    ``30d``, ``2w`` (a bare number is seconds).

    Raises:
        ConfigurationError: not a positive age in one of those units.
    """
    if isinstance(text, (int, float)):
        seconds = float(text)
    else:
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text.lower())
        if match is None:
            raise ConfigurationError(
                f"{what} {text!r}: write a number and a unit, e.g. 30d, 12h, 90m, 3600s, 2w")
        seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    if not 0 < seconds < 1e10:
        raise ConfigurationError(f"{what} must be more than 0 seconds, got {text!r}")
    return seconds


@dataclass(frozen=True)
class Retention:
    """How long finished work stays in a store.

    Attributes:
        older_than_s: finished work whose last task finished more than this many seconds
            ago is removed.
        keep_dead_s: DEAD tasks are kept this long instead (None: as ``older_than_s``;
            never shorter than it).
        forget_after_s: tombstones of removed tasks are kept this long (default a year):
            until then an id added again is refused.
        every_s: for a long-lived process (``Supervisor(retention=...)``, ``foreperson
            worker --retain``): seconds between prunes.
        batch: tasks removed by the first transaction; later ones remove as many as fit
            in ``transaction_s``.
        transaction_s: how long one transaction may take, seconds (the number of tasks
            per transaction follows what the last one took); None: the store's choice
            (5 ms on SQLite, whose write lock claims wait for; 50 ms on PostgreSQL,
            where it locks finished rows only, which no claim waits for).
        pause_s: seconds between two transactions, so that claims waiting for the write
            lock go first.

    Raises:
        ConfigurationError: an age that is not positive, or ``keep_dead_s`` shorter than
            ``older_than_s``.
    """

    older_than_s: float
    keep_dead_s: float | None = None
    forget_after_s: float = 365 * 86400.0
    every_s: float = 3600.0
    batch: int = 100
    transaction_s: float | None = None
    pause_s: float = 0.005

    def __post_init__(self) -> None:
        for name in ("older_than_s", "forget_after_s", "every_s"):
            parse_age(getattr(self, name), what=name)
        if self.keep_dead_s is not None and self.keep_dead_s < self.older_than_s:
            raise ConfigurationError(
                f"keep_dead_s ({self.keep_dead_s:g} s) is shorter than older_than_s "
                f"({self.older_than_s:g} s): DEAD tasks can be kept longer, not less long")
        if self.batch < 1:
            raise ConfigurationError(f"batch must be >= 1, got {self.batch}")

    @classmethod
    def parse(cls, older_than: str, keep_dead: str | None = None, **options: Any
              ) -> Retention:
        """From ages as written on a command line (``"30d"``, ``"90d"``)."""
        return cls(parse_age(older_than, what="--older-than"),
                   None if keep_dead is None else parse_age(keep_dead, what="--keep-dead"),
                   **options)

    def cutoffs(self, now: float) -> tuple[float, float]:
        """``(finished before this: removed, DEAD finished before this: removed)``,
        epoch seconds."""
        return now - self.older_than_s, now - (self.keep_dead_s or self.older_than_s)


@dataclass
class PruneReport:
    """What one prune removed (or, with ``dry_run``, would remove).

    Attributes:
        tasks: tasks removed.
        runs: task runs removed whole (their last task went).
        agent_runs: durable agent runs removed (with their steps).
        journals: state-machine journals removed (runs with steps and no run record).
        steps: journal steps removed.
        edges: dependency edges removed.
        effects: side-effect records removed.
        history: history rows removed (older than a week).
        workers: per-worker counts and worker records removed (not seen since the
            cutoff).
        tombstones: tombstones forgotten.
        kept_dead: DEAD tasks old enough but kept for ``keep_dead_s``.
        freed_bytes: space given back to the file system (SQLite), bytes.
        seconds: wall time, seconds.
        complete: False when ``max_seconds`` ended it first (run it again).
        dry_run: nothing was removed.
        archive: the archive written, or None.
    """

    tasks: int = 0
    runs: int = 0
    agent_runs: int = 0
    journals: int = 0
    steps: int = 0
    edges: int = 0
    effects: int = 0
    history: int = 0
    workers: int = 0
    tombstones: int = 0
    kept_dead: int = 0
    freed_bytes: int = 0
    seconds: float = 0.0
    complete: bool = True
    dry_run: bool = False
    archive: str | None = None

    def summary(self) -> str:
        """One paragraph a person reads."""
        verb = "would remove" if self.dry_run else "removed"
        parts = [f"{self.tasks} task(s) ({self.runs} whole run(s))"]
        for count, name in ((self.agent_runs, "durable agent run(s)"),
                            (self.journals, "state-machine journal(s)"),
                            (self.steps, "journal step(s)"), (self.edges, "dependency edge(s)"),
                            (self.effects, "effect record(s)"),
                            (self.history, "history row(s) older than a week"),
                            (self.workers, "record(s) of workers gone"),
                            (self.tombstones, "expired tombstone(s)")):
            if count:
                parts.append(f"{count} {name}")
        text = f"{verb} " + ", ".join(parts) + f" in {self.seconds:.1f} s"
        if self.kept_dead:
            text += f"; kept {self.kept_dead} DEAD task(s) for --keep-dead"
        if self.freed_bytes:
            text += f"; gave {self.freed_bytes / 1e6:.1f} MB back to the file system"
        if self.archive:
            text += f"; archived to {self.archive}"
        if not self.complete:
            text += " (stopped at the time limit: run it again for the rest)"
        return text


class PruneCandidate(NamedTuple):
    """A finished task old enough to look at: ``finished_at`` (epoch seconds), ``seq``
    (insertion order), ``id``, ``run_id``, ``status`` (``"completed"`` or ``"dead"``)."""

    finished_at: float
    seq: int
    id: str
    run_id: str | None
    status: str


@runtime_checkable
class Prunes(Protocol):
    """A store whose old finished work can be removed while workers run (every bundled
    store)."""

    def prune(self, retention: Retention, *, archive: str | Path | None = None,
              dry_run: bool = False, max_seconds: float | None = None) -> PruneReport:
        """Remove old finished work (see :mod:`foreperson.work.retention`).

        Args:
            retention: what is old enough.
            archive: a ``.jsonl.gz`` file every removed record is appended to first.
            dry_run: count what would go, remove nothing.
            max_seconds: stop after about this long (``complete`` is then False).

        Returns:
            what was removed.

        Raises:
            StoreError: the database failed (what was removed before stays removed).
        """
        ...


class _Backend(Protocol):
    """What :func:`prune_store` needs of a store (each store's private primitives)."""

    def _prune_candidates(self, cutoff: float, after: tuple[float, int], limit: int
                          ) -> list[PruneCandidate]: ...

    def _prune_runs_over(self, run_ids: list[str], cutoff: float) -> set[str]: ...

    def _prune_needed(self, ids: list[str]) -> set[str]: ...

    def _prune_remove(self, ids: list[str], *, rows: bool) -> tuple[dict[str, int],
                                                                    list[dict[str, Any]]]: ...

    def _prune_ledger(self, cutoff: float, limit: int, *, rows: bool, dry_run: bool
                      ) -> tuple[dict[str, int], list[dict[str, Any]]]: ...

    def _prune_aggregates(self, history_before: float, workers_before: float,
                          tombstones_before: float, *, dry_run: bool) -> dict[str, int]: ...

    def _prune_space(self) -> int: ...

    prune_transaction_s: float

    @property
    def clock(self) -> Any: ...


class PrunesByPrimitives:
    """A store's ``prune()``: :func:`prune_store` over the store's own primitives (the
    bundled stores' base for :class:`Prunes`)."""

    def prune(self, retention: Retention, *, archive: str | Path | None = None,
              dry_run: bool = False, max_seconds: float | None = None) -> PruneReport:
        """See :meth:`Prunes.prune`."""
        return prune_store(self, retention, archive=archive,  # type: ignore[arg-type]
                           dry_run=dry_run, max_seconds=max_seconds)


def drop_ended_runs(run_ids: list[str], drop: Any, counts: dict[str, int]) -> None:
    """Remove each of ``run_ids`` with ``drop(run_id)`` (which counts what it removed in
    ``counts``); one that had no run record was a journal only (a state machine's)."""
    for run_id in run_ids:
        before = counts["agent_runs"]
        drop(run_id)
        counts["journals"] += counts["agent_runs"] == before


def prune_store(store: _Backend, retention: Retention, *, archive: str | Path | None = None,
                dry_run: bool = False, max_seconds: float | None = None) -> PruneReport:
    """The one retention algorithm, over a store's primitives (see the module docstring).

    Returns:
        the report.
    """
    return _Pruning(store, retention, archive, dry_run, max_seconds).run()


class _Pruning:
    """One prune: the finished tasks by age, then the run records and journals left,
    then the aggregates."""

    def __init__(self, store: _Backend, retention: Retention, archive: str | Path | None,
                 dry_run: bool, max_seconds: float | None) -> None:
        self.store = store
        self.retention = retention
        self.archive = archive
        self.dry_run = dry_run
        self.max_seconds = max_seconds
        self.began = time.monotonic()
        self.now = store.clock.now()
        self.cutoff, self.dead_cutoff = retention.cutoffs(self.now)
        self.report = PruneReport(dry_run=dry_run,
                                  archive=None if archive is None else str(archive))
        self.runs_over: dict[str, bool] = {}

    def out_of_time(self) -> bool:
        return (self.max_seconds is not None
                and time.monotonic() - self.began > self.max_seconds)

    def run(self) -> PruneReport:
        from .metrics import HISTORY_KEPT_S

        with _archive(self.archive, self.dry_run) as sink:
            self.tasks(sink)
            if self.report.complete and not self.out_of_time():
                self.ledger(sink)
                _add(self.report, self.store._prune_aggregates(
                    min(self.cutoff, self.now - HISTORY_KEPT_S), self.cutoff,
                    self.now - self.retention.forget_after_s, dry_run=self.dry_run))
        if not self.dry_run and self.report.tasks + self.report.steps:
            self.report.freed_bytes = self.store._prune_space()
        self.report.seconds = time.monotonic() - self.began
        return self.report

    def tasks(self, sink: IO[str] | None) -> None:
        """Walk the old finished tasks (by finishing time) and remove those whose run is
        over, a batch per transaction."""
        after = (float("-inf"), -1)
        batch = self.retention.batch
        budget = self.retention.transaction_s or self.store.prune_transaction_s
        while self.report.complete:
            found = self.store._prune_candidates(self.cutoff, after, 1000)
            if not found:
                return
            after = (found[-1].finished_at, found[-1].seq)
            chosen = self.choose(found)
            if self.dry_run:
                self.report.tasks += len(chosen)
                continue
            while chosen:
                if self.out_of_time():
                    self.report.complete = False
                    return
                part, chosen = chosen[:batch], chosen[batch:]
                began = time.monotonic()
                counts, rows = self.store._prune_remove(part, rows=sink is not None)
                took = time.monotonic() - began
                _write(sink, rows)
                _add(self.report, counts)
                # as many as fit in transaction_s next time (at most double, and 1,000)
                batch = max(10, min(2 * batch, 1000,
                                    int(len(part) * budget / max(took, 1e-4))))
                time.sleep(self.retention.pause_s)

    def choose(self, found: list[PruneCandidate]) -> list[str]:
        """The candidates that may go: their run is over (or they have none), nothing
        unfinished depends on them, and a DEAD one is past ``keep_dead_s``."""
        fresh = sorted({c.run_id for c in found if c.run_id is not None} - set(self.runs_over))
        over = self.store._prune_runs_over(fresh, self.cutoff) if fresh else set()
        self.runs_over.update((r, r in over) for r in fresh)
        needed = self.store._prune_needed([c.id for c in found])
        chosen = []
        for c in found:
            if (c.run_id is not None and not self.runs_over[c.run_id]) or c.id in needed:
                continue
            if c.status == "dead" and c.finished_at >= self.dead_cutoff:
                self.report.kept_dead += 1
                continue
            chosen.append(c.id)
        return chosen

    def ledger(self, sink: IO[str] | None) -> None:
        """Durable runs that ended and state-machine journals, with no task left."""
        while True:
            counts, rows = self.store._prune_ledger(self.cutoff, self.retention.batch,
                                                    rows=sink is not None,
                                                    dry_run=self.dry_run)
            _write(sink, rows)
            _add(self.report, counts)
            if not counts.get("more") or self.dry_run or self.out_of_time():
                return
            time.sleep(self.retention.pause_s)


def _add(report: PruneReport, counts: dict[str, int]) -> None:
    for name, n in counts.items():
        if name != "more":
            setattr(report, name, getattr(report, name) + n)


@contextmanager
def _archive(path: str | Path | None, dry_run: bool) -> Iterator[IO[str] | None]:
    """The archive, appended to (a gzip file may hold many members: each prune adds one)."""
    if path is None or dry_run:
        yield None
        return
    target = Path(path)
    if target.parent and not target.parent.exists():
        raise ConfigurationError(f"--archive {path}: no folder {target.parent}")
    with gzip.open(target, "at", encoding="utf-8") as sink:
        yield sink


def _write(sink: IO[str] | None, rows: list[dict[str, Any]]) -> None:
    if sink is None or not rows:
        return
    for row in rows:
        sink.write(json.dumps(row, ensure_ascii=False, default=_json_default) + "\n")
    sink.flush()


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if hasattr(value, "value"):          # an enum (Status)
        return value.value
    raise TypeError(f"not JSON: {type(value).__name__}")


def task_record(task: Task) -> dict[str, Any]:
    """A task as an archive line (``{"record": "task", ...fields}``)."""
    return {"record": "task", **dataclasses.asdict(task)}
