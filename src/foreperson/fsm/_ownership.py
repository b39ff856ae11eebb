"""Who drives a journaled state-machine run: one process at a time, like a durable
agent run (:mod:`foreperson.work.owners`).

A run started with a store that keeps run records (a
:class:`~foreperson.journal.RunLedger`: the memory, SQLite and PostgreSQL stores) is
recorded as a run of agent ``fsm:<machine>``, owned by the process that drives it under
a lease renewed by the process's lease keeper. A second process that resumes it while
the owner lives gets :class:`~foreperson.errors.RunBusy`; an owner that died on this
machine is taken over at once, one on another machine once its lease lapses. On exit
the record says how the run ended (``completed`` with the result's stop reason,
``failed`` or ``interrupted``). A journal without run records is driven without an
owner, as before.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

import anyio
import anyio.to_thread

from ..errors import describe
from ..journal import Journal, RunLedger, RunRecord
from ..work.leases import DEFAULT_LEASE_S
from ..work.owners import drop_run, forget_owner, keep_run, new_owner, take_run

__all__ = ["RunOwner", "machine_agent"]


class _Result(Protocol):
    @property
    def state(self) -> str: ...
    @property
    def stop_reason(self) -> str: ...
    @property
    def detail(self) -> str | None: ...
    @property
    def trace(self) -> tuple[Any, ...]: ...


R = TypeVar("R", bound=_Result)


def machine_agent(machine: str) -> str:
    """The agent name a state machine's run is recorded under: ``"fsm:<machine>"``."""
    return f"fsm:{machine}"


class RunOwner:
    """This process's ownership of one state-machine run.

    Args:
        store: the run's journal; ownership is kept only when it is a
            :class:`~foreperson.journal.RunLedger` too.
        run_id: the run.
        machine: the machine's name.
        lease_s: the ownership lease, seconds.
    """

    def __init__(self, store: Journal | None, run_id: str, machine: str, *,
                 lease_s: float = DEFAULT_LEASE_S) -> None:
        self.ledger = store if isinstance(store, RunLedger) else None
        self.run_id = run_id
        self.agent = machine_agent(machine)
        self.lease_s = lease_s
        self.owner = new_owner()
        self._ended: dict[str, Any] | None = None
        self._end_written = False

    def create(self, request: str) -> bool:
        """Record the new run, owned here (blocking).

        Returns:
            False when the run id is recorded already (by anyone).
        """
        if self.ledger is None:
            return True
        stored = self.ledger.create_run(self._record(request))
        return stored.owner == self.owner

    def take(self, request: str) -> None:
        """Own an existing run (blocking): recorded by a version that kept no run
        records, it is recorded now.

        Raises:
            RunBusy: another live process drives it.
        """
        if self.ledger is None:
            return
        record = self.ledger.get_run(self.run_id)
        if record is None:
            record = self.ledger.create_run(self._record(request))
            if record.owner == self.owner:
                return
        take_run(self.ledger, record, self.owner, self.lease_s)

    def _record(self, request: str) -> RunRecord:
        clock = getattr(self.ledger, "clock", None)
        now = clock.now() if clock is not None else time.time()
        return RunRecord(self.run_id, self.agent, input={"prompt": request},
                         owner=self.owner,
                         lease_expires_at=datetime.fromtimestamp(now + self.lease_s, UTC))

    @asynccontextmanager
    async def holding(self) -> AsyncIterator[RunOwner]:
        """Keep the lease renewed while the run goes on; record how it ended on exit
        (``completed`` once :meth:`finished` was called, else ``failed`` or
        ``interrupted``) and let the run go."""
        ledger = self.ledger
        if ledger is None:
            yield self
            return
        keep_run(ledger, self.run_id, self.owner, self.lease_s)
        self._ended = None
        try:
            yield self
        except BaseException as exc:
            cancelled = isinstance(exc, anyio.get_cancelled_exc_class() | KeyboardInterrupt)
            await self._end("interrupted" if cancelled else "failed",
                            error=describe(exc))
            raise
        else:
            if self._end_written:
                pass                    # recorded with the run's end step
            elif self._ended is not None:
                await self._end("completed", **self._ended)
            else:
                await self._end("interrupted", error="the run ended without a result")
        finally:
            drop_run(ledger, self.run_id, self.owner)
            forget_owner(self.owner)

    def record_end(self, result: _Result) -> None:
        """Record that the run returned ``result``, now (a blocking call, made in the
        journal's write of the run's end step: one transaction)."""
        self.finished(result)
        if self.ledger is not None and self._ended is not None:
            self._end_written = self.ledger.end_run(self.run_id, self.owner, "completed",
                                                    **self._ended)

    def finished(self, result: R) -> R:
        """Note that the run returned ``result`` (a
        :class:`~foreperson.fsm.MachineResult`), for its record.

        Returns:
            ``result``.
        """
        self._ended = {"stop_reason": result.stop_reason, "result": {
            "state": result.state, "stop_reason": result.stop_reason,
            "detail": result.detail, "transitions": len(result.trace)}}
        return result

    async def _end(self, status: str, **how: Any) -> None:
        ledger = self.ledger
        assert ledger is not None
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(
                lambda: ledger.end_run(self.run_id, self.owner, status, **how))
