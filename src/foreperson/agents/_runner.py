"""Step runners: how each step of a run (a model call, a tool call, an approval, a spawn,
a delegation) is executed. The default runs it inline and records nothing; a journaled
runner records each step's result under a deterministic key and, on replay, returns it
without executing the step again (a step is a journal record,
never a claimable task: see docs/architecture.md).

The agent layer takes a runner by injection (``RunOptions(steps=...)``) and never
imports the work layer: :class:`JournaledSteps` is built on the
:class:`~foreperson.journal.Journal` protocol, which the work layer's stores implement.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import anyio
import anyio.to_thread

from ..errors import StoreError
from ..journal import (
    Journal,
    JournalDivergence,
    Step,
    compact_request,
    describe_divergence,
    request_digest,
)

__all__ = [
    "JSON_CODEC",
    "InlineSteps",
    "JournaledSteps",
    "StepCodec",
    "StepOutcome",
    "StepRunner",
    "StepSpec",
]

T = TypeVar("T")


@dataclass(frozen=True)
class StepCodec(Generic[T]):
    """How a step's result becomes JSON for a journal, and back.

    Attributes:
        encode: the result as JSON values (dicts, lists, strings, numbers, None).
        decode: the result from what ``encode`` wrote.
    """

    encode: Callable[[T], Any]
    decode: Callable[[Any], T]


def _same(value: Any) -> Any:
    return value


JSON_CODEC: StepCodec[Any] = StepCodec(_same, _same)
"""For results that already are JSON values."""


@dataclass(frozen=True)
class StepSpec(Generic[T]):
    """One step about to be run.

    Attributes:
        run_id: the journal's run: the outermost run (a nested run journals under it).
        key: the step path, unique within that run and the same on every replay, e.g.
            ``"agent:lead/turn:2/tool:1/agent:researcher/turn:1/model"``.
        kind: ``"model_call"``, ``"tool_call"``, ``"approval"``, ``"spawn"``, or a kind of
            the layers above (``"delegation"``).
        request: returns the JSON of what the step asks (the messages and tools of a
            model call, a tool's name and arguments); a journaling runner digests it to
            detect a replay that asks something else. Only called by runners that
            journal, so the default runner pays nothing for it.
        codec: turns the result into JSON and back.
    """

    run_id: str
    key: str
    kind: str
    request: Callable[[], Any]
    codec: StepCodec[T]


@dataclass(frozen=True)
class StepOutcome(Generic[T]):
    """A step's result.

    Attributes:
        value: the result.
        replayed: True when it came from the journal and the step was not executed
            (when another process recorded the step while this one executed it too,
            the recorded result wins and ``replayed`` is False: the work was done here).
    """

    value: T
    replayed: bool = False


@runtime_checkable
class StepRunner(Protocol):
    """Executes the steps of runs; one runner may serve many concurrent runs."""

    async def run(self, step: StepSpec[T], execute: Callable[[], Awaitable[T]]) -> StepOutcome[T]:
        """Run one step, or give back its recorded result.

        Args:
            step: which step, and how to digest and encode it.
            execute: produces the result (calls the model, runs the tool).

        Returns:
            The result, and whether it was replayed.

        Raises:
            JournalDivergence: a recorded step under ``step.key`` asked for something
                else (journaling runners).
            Exception: what ``execute`` raised.
        """
        ...


class InlineSteps:
    """The default runner: executes every step, records nothing."""

    async def run(self, step: StepSpec[T], execute: Callable[[], Awaitable[T]]) -> StepOutcome[T]:
        """See :meth:`StepRunner.run`."""
        return StepOutcome(await execute())

    def __repr__(self) -> str:
        return "InlineSteps()"


class JournaledSteps:
    """Records every step in a :class:`~foreperson.journal.Journal` and replays recorded
    ones.

    For each step: a result recorded under the run id and key is returned at once (the
    model or the tool is not called again), after checking that the replay asks the
    same thing (its request digest); otherwise the step executes and its result is
    recorded before the run goes on, first write wins (when two processes replay one
    run, both go on with the result recorded first). The journal is blocking, so it is
    called through ``anyio.to_thread``; the write is shielded from cancellation (a step
    that ran is recorded even when the run is being cancelled).

    A run's recorded steps are read once, at its first step (one ``list_steps``), and
    kept for the runs this runner served last (``cached_runs``); a step another process
    records meanwhile is caught by the first-write-wins rule of the write.

    With ``write_behind`` (what the durable runtimes use), a step's record is handed to
    a writer thread that records the queued steps in order, several in one transaction,
    while the run goes on, so a model call's record is written while the next model call
    runs instead of before it starts. The rule that keeps this safe is the database's
    output commit: before any step that acts on the world (a tool call, an approval,
    anything but a model call, a delegation or a spawn) executes, every record queued
    before it is on disk (:meth:`flush`), so no effect ever happens for a decision a
    crash could still forget, and its own record is on disk before the run goes on; a
    crash loses at most a suffix of model calls, delegations and spawns, which run
    again. A step another process recorded first (two processes running one run at
    once, which a runtime's ownership prevents) raises at the next flush. The runtimes
    flush when a run ends; code that uses ``write_behind`` itself calls :meth:`flush`
    before it reads the journal or reports the run done.

    A step that raised is not recorded: it runs again on replay.

    Each record keeps the step's result and a compact summary of its request
    (:func:`~foreperson.journal.compact_request`: digests in place of anything long), never
    the conversation before it, so the journal grows linearly in the run's steps; a
    divergent replay compares the summaries to say how the step differs
    (:class:`~foreperson.journal.JournalDivergence` ``detail``).

    Example::

        from foreperson.agents import Agent, JournaledSteps, RunOptions
        from foreperson.work import MemoryStore

        options = RunOptions(steps=JournaledSteps(MemoryStore()))
        first = await agent.run("hi", run_id="run-1", options=options)
        again = await agent.run("hi", run_id="run-1", options=options)  # no model call

    Args:
        journal: where steps are recorded (``MemoryStore``, ``SqliteStore``,
            ``PostgresStore`` implement it).
        cached_runs: how many runs' recorded steps to keep in memory (default 64).
        write_behind: record steps on a writer thread, in order, with the output-commit
            rule above (default False: each record is written before the run goes on).
    """

    def __init__(self, journal: Journal, *, cached_runs: int = 64,
                 write_behind: bool = False) -> None:
        self.journal = journal
        self.cached_runs = max(1, cached_runs)
        self._runs: OrderedDict[str, dict[str, Step]] = OrderedDict()
        self._lock = threading.Lock()
        self._writer = _Writer(journal) if write_behind else None

    async def flush(self) -> None:
        """Wait until every step recorded so far is in the journal (with
        ``write_behind``; at once otherwise). Not cancellable once started.

        Raises:
            JournalDivergence: another process recorded one of them first.
            StoreError: the journal failed to record one of them.
        """
        writer = self._writer
        if writer is None:
            return
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(writer.wait, writer.submitted)
        writer.raise_conflict()

    def defer(self, call: Callable[[], Any]) -> bool:
        """With ``write_behind``: run the blocking ``call`` (a store write of the layers
        above, such as a delegation task's completion) on the writer thread, in order
        with the step records (in the same transaction as those queued with it), so a
        crash loses a suffix of both, never one without the other.

        Args:
            call: the write; an exception it raises is raised by the next :meth:`flush`.

        Returns:
            False (and nothing is done) without ``write_behind``: the caller writes
            itself.
        """
        if self._writer is None:
            return False
        self._writer.submit(call)
        return True

    def prime(self, run_id: str) -> None:
        """Say that ``run_id`` has no recorded step yet (a run just created), so its
        first step does not read the journal.

        Args:
            run_id: the run.
        """
        with self._lock:
            self._runs[run_id] = {}
            while len(self._runs) > self.cached_runs:
                self._runs.popitem(last=False)

    async def _recorded(self, run_id: str, key: str) -> Step | None:
        with self._lock:
            steps = self._runs.get(run_id)
            if steps is not None:
                self._runs.move_to_end(run_id)
                return steps.get(key)
        listed = await anyio.to_thread.run_sync(self.journal.list_steps, run_id)
        with self._lock:
            steps = self._runs.setdefault(run_id, {})
            for recorded in listed:
                steps.setdefault(recorded.key, recorded)
            while len(self._runs) > self.cached_runs:
                self._runs.popitem(last=False)
            return steps.get(key)

    def _remember(self, step: Step) -> None:
        with self._lock:
            steps = self._runs.get(step.run_id)
            if steps is not None:
                steps[step.key] = step

    async def run(self, step: StepSpec[T], execute: Callable[[], Awaitable[T]]) -> StepOutcome[T]:
        """See :meth:`StepRunner.run`.

        Raises:
            JournalDivergence: the recorded step under this key has another request
                digest (the code or the inputs changed since it was recorded).
            UnknownStepVersion: the recorded step's format is unknown.
            TypeError: the request or the encoded result is not JSON.
            StoreError: the journal failed.
        """
        request = step.request()
        digest = request_digest(request)
        recorded = await self._recorded(step.run_id, step.key)
        if recorded is not None:
            if recorded.digest != digest:
                raise _diverged(step, recorded, digest, request)
            return StepOutcome(step.codec.decode(recorded.result), replayed=True)
        writer = self._writer
        if writer is not None and step.kind not in PURE_KINDS:
            await self.flush()      # output commit: what led to this effect is on disk first
        value = await execute()
        encoded = step.codec.encode(value)
        new = Step(step.run_id, step.key, step.kind, digest, encoded,
                   request=compact_request(request))
        if writer is not None:
            self._remember(new)
            writer.submit(new)
            if step.kind not in PURE_KINDS:
                await self.flush()  # an effect's record is written before the run goes on
            return StepOutcome(value)
        with anyio.CancelScope(shield=True):
            stored = await anyio.to_thread.run_sync(self.journal.put_step, new)
        self._remember(stored)
        if stored.digest != digest:
            raise _diverged(step, stored, digest, request)
        if stored.result != encoded:  # another writer recorded this step first: theirs wins
            return StepOutcome(step.codec.decode(stored.result))
        return StepOutcome(value)

    def __repr__(self) -> str:
        return f"JournaledSteps({self.journal!r})"


PURE_KINDS = frozenset({"model_call", "delegation", "spawn", "route"})
"""Step kinds that act on nothing outside the run (a model's reply, a worker run whose
own effects are steps of their own, a new worker's id, a team's routing decision): with
``write_behind`` they run without waiting for earlier records to be written."""


class _Writer:
    """Records queued steps in order on one thread, all that queued meanwhile in one
    transaction (``journal.batch()``); exits when idle."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.submitted = 0
        self.written = 0
        self._queue: deque[Step | Callable[[], Any]] = deque()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._conflict: JournalDivergence | None = None

    def submit(self, step: Step | Callable[[], Any]) -> None:
        with self._cond:
            self._queue.append(step)
            self.submitted += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="foreperson-journal")
                self._thread.start()
            else:
                self._cond.notify_all()

    def wait(self, upto: int) -> None:
        with self._cond:
            while self.written < upto and self._error is None:
                self._cond.wait()
            if self._error is not None:
                raise self._error

    def raise_conflict(self) -> None:
        if self._conflict is not None:
            raise self._conflict

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._queue:
                    self._cond.wait(timeout=5.0)
                    if not self._queue:
                        self._thread = None
                        return
                batch = list(self._queue)
                self._queue.clear()
            try:
                try:
                    stored = self._write(batch)
                except StoreError as exc:
                    if not exc.transient:
                        raise
                    # the transaction was rolled back whole (a connection lost mid-batch:
                    # a server restart): write it again once; the store's own retry makes
                    # the new transaction wait for the server. Writing a step twice is
                    # safe (first write wins), and so is a deferred task completion (its
                    # lease token fences it).
                    stored = self._write(batch)
            except BaseException as exc:  # noqa: BLE001 - raised to every waiter
                with self._cond:
                    self._error = exc
                    self._thread = None
                    self._cond.notify_all()
                return
            with self._cond:
                for ours, theirs in stored:
                    if (theirs.digest != ours.digest or theirs.result != ours.result) and (
                            self._conflict is None):
                        self._conflict = JournalDivergence(
                            ours.run_id, ours.key, theirs.digest, ours.digest,
                            "another process recorded this step first (two processes ran "
                            "the run at once)")
                self.written += len(batch)
                self._cond.notify_all()

    def _write(self, batch: list[Step | Callable[[], Any]]) -> list[tuple[Step, Step]]:
        """Record ``batch`` in one transaction: (each step queued, the step stored)."""
        stored: list[tuple[Step, Step]] = []
        group = getattr(self.journal, "batch", None)
        with group() if callable(group) else contextlib.nullcontext():
            for item in batch:
                if isinstance(item, Step):
                    stored.append((item, self.journal.put_step(item)))
                else:
                    item()
        return stored


def _diverged(step: StepSpec[Any], recorded: Step, digest: str, request: Any
              ) -> JournalDivergence:
    detail = describe_divergence(recorded.request, compact_request(request))
    return JournalDivergence(step.run_id, step.key, recorded.digest, digest, detail)
