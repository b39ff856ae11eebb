"""Durable runtimes: where an agent's run meets the work layer's store (the only place
work meets agents: see docs/architecture.md).

A runtime keeps, in one store (the tasks' database, same migrations), each durable run's
record (:class:`~foreperson.journal.RunRecord`: its user, its input, who runs it now,
how it ended), its step journal, and its delegations as tasks. ``agent.run(prompt,
runtime=rt, run_id=...)`` opens the run here: it is recorded (or found, and checked to
belong to the caller's user), owned by this process under a renewed lease, and run with
a journaled step runner, so running it again with the same id, or
``agent.resume(run_id, runtime=rt)``, replays every finished step and executes only the
unfinished ones.
"""

from __future__ import annotations

import contextlib
import logging
import time
import warnings
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from pydantic import BaseModel, TypeAdapter

from ..agents import Approval, PendingApproval, RunOptions, RunResult
from ..agents.steps import AgentView, JournaledSteps, RunSession
from ..errors import AccessDenied, ConfigurationError, RunNotFound, describe
from ..journal import Journal, RunLedger, RunRecord, Step, compact_request
from ..models import MESSAGES_ADAPTER, Message
from ..work import MemoryStore, TaskStore
from ..work.leases import DEFAULT_LEASE_S
from ..work.owners import drop_run, forget_owner, keep_run, new_owner, take_run
from ._tree import render_run

if TYPE_CHECKING:
    pass

__all__ = ["InMemoryRuntime", "PostgresRuntime", "Runtime", "SqliteRuntime"]

log = logging.getLogger("foreperson.runtime")

_APPROVAL: TypeAdapter[Approval] = TypeAdapter(Approval)


@dataclass(frozen=True)
class _Host:
    """What the teams layer reads from ``RunOptions.runtime``
    (:class:`foreperson.teams.DelegationHost`)."""

    runtime: Runtime
    run_id: str
    owner: str
    fresh: bool

    @property
    def store(self) -> TaskStore:
        return self.runtime.store

    @property
    def holder(self) -> str:
        return f"run:{self.run_id}@{self.owner}"

    def runs_remotely(self, worker: str) -> bool:
        return self.runtime.runs_remotely(worker)


def _json(output: Any) -> Any:
    if isinstance(output, BaseModel):
        return output.model_dump(mode="json")
    return output


def _summary(result: RunResult[Any]) -> dict[str, Any]:
    """How a run ended, for its record: small and JSON (its messages are in the
    journal, step by step)."""
    return {"output": _json(result.output), "text": result.text,
            "stop_reason": result.stop_reason, "detail": result.detail,
            "usage": asdict(result.usage),
            "pending": [asdict(p) for p in result.pending]}


def _describe(exc: BaseException) -> str:
    return describe(exc)


class Runtime:
    """Durable agent runs over any store that keeps tasks, steps and runs (the work
    layer's :class:`~foreperson.work.MemoryStore`, :class:`~foreperson.work.SqliteStore`,
    ``PostgresStore``). Use :class:`InMemoryRuntime`, :class:`SqliteRuntime` or
    :class:`PostgresRuntime` (seed 001's names), or wrap a store you opened.

    * Every model call, tool call, approval, spawn and delegation of a run (and of the
      runs nested in it: workers, nested teams, spawned workers, which inherit the
      runtime) is a journaled step under a deterministic key; a step whose result was
      written is never executed again, a step that was running when its process died
      runs again.
    * Tenant pinning (seed 001): a run belongs to the ``user_id`` it was started with;
      running it again, resuming, approving or reading it as another user (or
      anonymously) raises :class:`~foreperson.errors.AccessDenied`.
    * One process owns a run at a time, under a lease of ``stale_after`` seconds renewed
      while it runs; a run whose owner died is taken over at once when the owner was on
      this machine, else when its lease lapses (:class:`~foreperson.errors.RunBusy`
      until then).
    * Human approval across processes: a tool call whose approval handler says
      :meth:`~foreperson.agents.Approval.pending` (see
      :func:`~foreperson.agents.ask_later`) parks the run; :meth:`approve` /
      :meth:`deny` record the decision from any process, and resuming the run
      continues from that call.
    * Workers in other processes: a worker named in ``remote_workers`` is not run here;
      its delegations are tasks in the store for ``foreperson worker`` processes
      serving :func:`~foreperson.runtime.agent_app`, claimed, leased, reclaimed and
      fenced like any task.

    The admin methods (:meth:`get_run`, :meth:`list_runs`, :meth:`steps`,
    :meth:`pending`, :meth:`approve`, :meth:`deny`, :meth:`show`) are blocking store
    calls, like the store's own (from async code, ``anyio.to_thread.run_sync``).

    Args:
        store: the store (tasks, journal and runs in one database).
        stale_after: seconds a run's owner holds it without renewing (renewed every
            third of it; default 90, :data:`~foreperson.work.leases.DEFAULT_LEASE_S`).
        lease_s: the deprecated name of ``stale_after``.
        remote_workers: names of workers whose delegations are left to worker processes
            (True: every worker's; default none).
        close_store: close ``store`` with the runtime (default True).

    Raises:
        ConfigurationError: the store keeps no runs or journal, or a bad ``stale_after``.
    """

    def __init__(self, store: TaskStore, *, stale_after: float = DEFAULT_LEASE_S,
                 remote_workers: Collection[str] | bool = (),
                 close_store: bool = True, lease_s: float | None = None) -> None:
        if not (isinstance(store, Journal) and isinstance(store, RunLedger)):
            raise ConfigurationError(
                f"{type(store).__name__} keeps no step journal and run records; use "
                "MemoryStore, SqliteStore or PostgresStore")
        if lease_s is not None:
            warnings.warn(f"{type(self).__name__}(lease_s=) is now stale_after= (the work "
                          "layer's name for the same lease); lease_s will be removed",
                          DeprecationWarning, stacklevel=2)
            stale_after = lease_s
        if not (isinstance(stale_after, int | float) and 1.0 <= stale_after <= 86400.0):
            raise ConfigurationError(f"{type(self).__name__}(stale_after={stale_after!r}): "
                                     "give seconds between 1 and 86,400")
        self._store = store
        self.stale_after = float(stale_after)
        self.remote_workers: frozenset[str] | bool = (
            remote_workers if isinstance(remote_workers, bool) else frozenset(remote_workers))
        self._close_store = close_store
        self._closed = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._store!r})"

    @property
    def store(self) -> TaskStore:
        """The store: tasks, steps and run records."""
        return self._store

    @property
    def _ledger(self) -> Any:
        return self._store

    def runs_remotely(self, worker: str) -> bool:
        """Whether ``worker``'s delegations are left to worker processes.

        Args:
            worker: a worker's name in its team's roster.
        """
        if isinstance(self.remote_workers, bool):
            return self.remote_workers
        return worker in self.remote_workers

    # --- opening a run (foreperson.agents.steps.DurableRuntime) -------------------------------

    @asynccontextmanager
    async def open_run(
        self,
        agent: AgentView,
        *,
        prompt: str | None,
        run_id: str | None,
        user_id: str | None,
        message_history: Sequence[Message] | None,
        options: RunOptions | None,
    ) -> AsyncIterator[RunSession]:
        """See :meth:`foreperson.agents.steps.DurableRuntime.open_run`. On exit the run's record
        says how it ended: ``completed`` (a result), ``waiting`` (parked on an
        approval), ``failed`` (it raised) or ``interrupted`` (cancelled); ownership is
        given up in every case (a SIGKILL leaves it to the lease).

        Raises:
            RunNotFound: no run of that id for this caller (missing, or another user's).
            RunBusy: another live process owns it.
            ConfigurationError: nothing to resume, another agent's run, a ``parent`` in
                ``options`` (a durable run is a top-level run), or a closed runtime.
        """
        caller = options if options is not None else RunOptions()
        if caller.parent is not None:
            raise ConfigurationError(
                "a durable run is a top-level run: a run nested in another inherits its "
                "runtime (use options=ctx.nested(), not runtime=)")
        if self._closed:
            raise ConfigurationError(f"{self!r} is closed")
        run_id = run_id or caller.ids()
        owner = new_owner()
        try:
            record, fresh = await anyio.to_thread.run_sync(
                self._begin, agent, prompt, run_id, user_id, message_history, owner)
        except BaseException:
            forget_owner(owner)
            raise
        recorded = record.input if isinstance(record.input, dict) else {}
        history = message_history
        if prompt is None:
            prompt = str(recorded.get("prompt", ""))
            dumped = recorded.get("message_history")
            history = MESSAGES_ADAPTER.validate_python(dumped) if dumped else None
        session = RunSession(
            prompt=prompt, run_id=run_id, user_id=record.user_id,
            message_history=list(history) if history else None,
            options=RunOptions(steps=JournaledSteps(self._store, write_behind=True),
                               clock=caller.clock,
                               ids=caller.ids, events=caller.events,
                               runtime=_Host(self, run_id, owner, fresh)))
        steps = session.options.steps
        assert isinstance(steps, JournaledSteps)
        if fresh:
            steps.prime(run_id)         # nothing is recorded: no need to read the journal
        keep_run(self._ledger, run_id, owner, self.stale_after)
        try:
            yield session
        except BaseException as exc:
            interrupted = isinstance(exc, (anyio.get_cancelled_exc_class(), KeyboardInterrupt,
                                           GeneratorExit))
            with contextlib.suppress(Exception):
                await steps.flush()         # what it did is recorded, as far as it can be
            await self._end(run_id, owner, "interrupted" if interrupted else "failed",
                            error=_describe(exc))
            raise
        else:
            await steps.flush()             # the record says how it ended: every step is in
            result = session.result
            if result is None:
                await self._end(run_id, owner, "interrupted",
                                error="the run's session closed before it returned")
            else:
                status = "waiting" if result.stop_reason == "awaiting_approval" else "completed"
                await self._end(run_id, owner, status, result=_summary(result),
                                stop_reason=result.stop_reason)
        finally:
            drop_run(self._ledger, run_id, owner)
            forget_owner(owner)

    async def _end(self, run_id: str, owner: str, status: str, **how: Any) -> None:
        with anyio.CancelScope(shield=True):
            try:
                ended = await anyio.to_thread.run_sync(
                    lambda: self._ledger.end_run(run_id, owner, status, **how))
            except Exception as exc:  # noqa: BLE001 - the run's own outcome matters more
                log.warning("run %s: cannot record that it ended (%s): %s", run_id, status,
                            exc)
                return
        if not ended:
            log.warning("run %s: %s lost it before it ended (taken over after its lease "
                        "lapsed); its end was not recorded", run_id, owner)

    def _begin(self, agent: AgentView, prompt: str | None, run_id: str,
               user_id: str | None, history: Sequence[Message] | None,
               owner: str) -> tuple[RunRecord, bool]:
        """Find or record the run, check it, and take it: (the record, whether it is new)."""
        ledger = self._ledger
        record: RunRecord | None
        if prompt is None:
            record = ledger.get_run(run_id)
            if record is None or record.user_id != user_id:
                raise RunNotFound(run_id, user_id=user_id)
        else:   # one round trip for a new run: recorded already owned by this process
            data = {"prompt": prompt, "message_history": MESSAGES_ADAPTER.dump_python(
                list(history), mode="json") if history else None}
            clock = getattr(self._store, "clock", None)
            now = clock.now() if clock is not None else time.time()
            record = ledger.create_run(RunRecord(
                run_id, agent.name, user_id, input=data, owner=owner,
                lease_expires_at=datetime.fromtimestamp(now + self.stale_after, UTC)))
            assert record is not None
            if record.owner == owner:
                return record, True
        action = "resume" if prompt is None else "run"
        if record.user_id != user_id:   # a new run under an id another user's run has
            raise AccessDenied(
                f"run {run_id}", user_id=user_id, owner=None, action=action,
                message=f"run id {run_id} is taken by a run that is not this caller's: "
                        "choose another run id (or pass the user_id the run was started for)")
        if record.agent != agent.name:
            raise ConfigurationError(
                f"run {run_id} is a run of agent {record.agent!r}, not {agent.name!r}: "
                f"{action} it with that agent (its steps are keyed by its name)")
        claimed = take_run(ledger, record, owner, self.stale_after)
        return claimed, False

    # --- reading runs (tenant-checked) --------------------------------------------------

    def _checked(self, run_id: str, user_id: str | None, action: str) -> RunRecord:
        record: RunRecord | None = self._ledger.get_run(run_id)
        if record is None or record.user_id != user_id:
            raise RunNotFound(run_id, user_id=user_id)
        return record

    def get_run(self, run_id: str, *, user_id: str | None = None) -> RunRecord:
        """The run's record.

        Args:
            run_id: the run.
            user_id: who asks: the user it belongs to (None for an anonymous run).

        Returns:
            Its :class:`~foreperson.journal.RunRecord`.

        Raises:
            RunNotFound: no run of that id for this caller (missing, or another user's).
            ConfigurationError: there is no such run.
        """
        return self._checked(run_id, user_id, "read")

    def list_runs(self, *, user_id: str | None = None, status: str | None = None,
                  limit: int = 100, all_users: bool = False) -> list[RunRecord]:
        """Runs, newest first: the caller's only (``user_id``'s, or the anonymous runs
        for ``user_id=None``), or, for an operator, every user's (``all_users=True``).

        Args:
            user_id: whose runs.
            status: only runs in this status (see :data:`~foreperson.journal.RUN_STATUSES`).
            limit: at most this many.
            all_users: every user's runs, whatever ``user_id``.

        Returns:
            The records.
        """
        if all_users:
            return list(self._ledger.list_runs(status=status, limit=limit))
        if user_id is not None:
            return list(self._ledger.list_runs(user_id=user_id, status=status, limit=limit))
        # the ledger filters by user, not by "no user": read more until enough anonymous
        # runs are found or every run was read (newer users' runs must not hide them)
        fetch = max(limit, 1) * 4
        while True:
            records = self._ledger.list_runs(status=status, limit=fetch)
            anonymous = [r for r in records if r.user_id is None]
            if len(anonymous) >= limit or len(records) < fetch:
                return anonymous[:limit]
            fetch *= 4

    def steps(self, run_id: str, *, user_id: str | None = None) -> list[Step]:
        """The run's journal, in order (every level of nesting).

        Raises:
            RunNotFound: no run of that id for this caller (missing, or another user's).
            ConfigurationError: there is no such run.
        """
        self._checked(run_id, user_id, "read")
        return list(self._store.list_steps(run_id))

    def show(self, run_id: str, *, user_id: str | None = None) -> str:
        """The run as a tree (what ``foreperson runs show`` prints): agents, turns,
        model calls, tool calls, delegations, spawns, approvals, route decisions, with
        status and timings.

        Raises:
            RunNotFound: no run of that id for this caller (missing, or another user's).
            ConfigurationError: there is no such run.
        """
        record = self._checked(run_id, user_id, "read")
        return render_run(record, self._store.list_steps(run_id))

    # --- approvals ----------------------------------------------------------------------

    def _requests(self, run_id: str) -> tuple[list[PendingApproval], dict[str, Step]]:
        steps = self._store.list_steps(run_id)
        decided = {s.key: s for s in steps if s.kind == "approval"}
        requests = [PendingApproval(**s.result) for s in steps
                    if s.kind == "approval_request" and isinstance(s.result, dict)]
        return requests, decided

    def pending(self, run_id: str, *, user_id: str | None = None) -> list[PendingApproval]:
        """The tool calls the run waits on (recorded, not yet decided), in order.

        Raises:
            RunNotFound: no run of that id for this caller (missing, or another user's).
            ConfigurationError: there is no such run.
        """
        self._checked(run_id, user_id, "read")
        requests, decided = self._requests(run_id)
        return [r for r in requests if r.key not in decided]

    def approve(self, run_id: str, call_id: str, *, user_id: str | None = None,
                arguments: dict[str, Any] | None = None) -> Approval:
        """Record a human's approval of a call the run waits on (from any process); the
        resumed run runs the call (with ``arguments`` instead, when given) and goes on.

        Args:
            run_id: the run.
            call_id: the tool call's id, or its approval step key (when two workers'
                calls share an id).
            user_id: who approves: the user the run belongs to.
            arguments: run the call with these arguments instead (``Approval.edit``).

        Returns:
            The decision recorded: this one, or an earlier one for the same call (the
            first decision wins).

        Raises:
            RunNotFound: no run of that id for this caller (missing, or another user's).
            ConfigurationError: no such run, or it waits on no such call (or the id is
                ambiguous: the message lists the keys).
        """
        decision = Approval.approve() if arguments is None else Approval.edit(arguments)
        return self._decide(run_id, call_id, decision, user_id, "approve")

    def deny(self, run_id: str, call_id: str, *, reason: str = "a human declined this call",
             user_id: str | None = None) -> Approval:
        """Record a human's refusal of a call the run waits on; the resumed run gives the
        model ``reason`` as the call's error result and goes on.

        Args:
            run_id: as :meth:`approve`.
            call_id: as :meth:`approve`.
            user_id: as :meth:`approve`.
            reason: why; the model reads it.

        Returns:
            The decision recorded (the first decision wins).

        Raises:
            AccessDenied, ConfigurationError: as :meth:`approve`.
        """
        return self._decide(run_id, call_id, Approval.deny(reason), user_id, "deny")

    def _decide(self, run_id: str, call_id: str, decision: Approval, user_id: str | None,
                action: str) -> Approval:
        self._checked(run_id, user_id, action)
        requests, decided = self._requests(run_id)
        matches = [r for r in requests if call_id in (r.call_id, r.key)]
        if not matches:
            waiting = ", ".join(f"{r.call_id} ({r.tool}, step {r.key})" for r in requests
                                if r.key not in decided) or "nothing"
            raise ConfigurationError(
                f"run {run_id} waits on no tool call {call_id!r}; it waits on: {waiting}")
        if len(matches) > 1:
            keys = ", ".join(r.key for r in matches)
            raise ConfigurationError(
                f"run {run_id}: call id {call_id!r} names {len(matches)} calls; give the "
                f"step key of the one you mean: {keys}")
        request = matches[0]
        earlier = decided.get(request.key)
        if earlier is None:
            step = Step(run_id, request.key, "approval", request.digest,
                        _APPROVAL.dump_python(decision, mode="json"),
                        request=compact_request({"tool": request.tool,
                                                 "arguments": request.arguments}))
            earlier = self._store.put_step(step)
        return _APPROVAL.validate_python(earlier.result)

    # --- life cycle ---------------------------------------------------------------------

    def close(self) -> None:
        """Close the store (when the runtime opened it, or ``close_store``). Idempotent."""
        if not self._closed:
            self._closed = True
            if self._close_store:
                self._store.close()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class InMemoryRuntime(Runtime):
    """A runtime in memory (seed 001's ``InMemoryRuntime``): the same journal, replay,
    tenant pinning and approvals as the durable ones, gone when the process exits; for
    tests, demos and the benchmark's baseline.

    Args:
        store: a :class:`~foreperson.work.MemoryStore` to use (default a new one).
        stale_after: as :class:`Runtime`.
        lease_s: the deprecated name of ``stale_after``.
        remote_workers: as :class:`Runtime`.
    """

    def __init__(self, store: MemoryStore | None = None, *,
                 stale_after: float = DEFAULT_LEASE_S,
                 remote_workers: Collection[str] | bool = (),
                 lease_s: float | None = None) -> None:
        super().__init__(store if store is not None else MemoryStore(),
                         stale_after=stale_after, remote_workers=remote_workers,
                         lease_s=lease_s)


class SqliteRuntime(Runtime):
    """A runtime in one SQLite file (seed 001's ``SqliteRuntime``): runs survive a crash
    of their process (even ``kill -9``) and resume from their journal in any process
    that opens the file.

    Args:
        path: the database file (created with its schema when missing; the same file
            as a ticket job's or a supervisor's tasks works).
        synchronous: SQLite's ``synchronous`` pragma: ``"FULL"`` (default: each commit
            on disk, survives a power cut) or ``"NORMAL"`` (survives a killed process, not
            a power cut). Steps are written behind the run (see
            :class:`~foreperson.agents.steps.JournaledSteps` ``write_behind``), so the fsync of
            ``FULL`` is not on the run's path.
        stale_after: as :class:`Runtime`.
        lease_s: the deprecated name of ``stale_after``.
        remote_workers: as :class:`Runtime`.

    Raises:
        StoreError: the file cannot be opened, or has a newer schema.
    """

    def __init__(self, path: str, *, synchronous: str = "FULL",
                 stale_after: float = DEFAULT_LEASE_S,
                 remote_workers: Collection[str] | bool = (),
                 lease_s: float | None = None) -> None:
        from ..work import SqliteStore

        self.path = str(path)
        super().__init__(SqliteStore(path, synchronous=synchronous), stale_after=stale_after,
                         remote_workers=remote_workers, lease_s=lease_s)


class PostgresRuntime(Runtime):
    """A runtime in PostgreSQL (seed 001's ``PostgresRuntime``): runs resume from any
    machine, and workers named in ``remote_workers`` run under ``foreperson worker`` on
    other machines (their delegations are tasks in the shared database).

    Args:
        dsn: a libpq connection string or URL.
        schema: the PostgreSQL schema (default ``$FOREPERSON_PG_SCHEMA`` or
            ``foreperson``).
        pool_size: connections kept open (default 8).
        stale_after: as :class:`Runtime`.
        lease_s: the deprecated name of ``stale_after``.
        remote_workers: as :class:`Runtime`.

    Raises:
        MissingDependency: psycopg is not installed (``pip install 'foreperson[postgres]'``).
        StoreError: the database cannot be reached or migrated.
    """

    def __init__(self, dsn: str, *, schema: str | None = None, pool_size: int = 8,
                 stale_after: float = DEFAULT_LEASE_S,
                 remote_workers: Collection[str] | bool = (),
                 lease_s: float | None = None) -> None:
        from ..work.stores.postgres import PostgresStore

        super().__init__(PostgresStore(dsn, schema=schema, pool_size=pool_size),
                         stale_after=stale_after, remote_workers=remote_workers,
                         lease_s=lease_s)
