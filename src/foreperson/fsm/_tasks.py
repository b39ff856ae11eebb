"""Summons as work-layer tasks: durable, retried, and visible in ``foreperson status``.

Seed 003: entering a state whose requirements are unmet parks the machine and summons
the required agent. With a store, that summons is a :class:`~foreperson.work.Task` of
kind ``<machine>:<agent>`` (payload: the summons as JSON; result: what the agent wrote)
with a deterministic id, ``<run id>/<step key>``: a resumed run that summons again
submits the same task, which is skipped when it is already there and awaited (a
finished summons is not asked again; one whose process died is reclaimed when its lease
expires and run again). Any process running :func:`summons_app` for the machine's agents
(``foreperson worker``) can answer it.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from ..errors import RunError, TaskFailed
from ..work.app import App
from ..work.hold import revive_dead
from ..work.leases import DEFAULT_LEASE_S
from ..work.task import Task
from ._summon import AgentSummoner, SummonResult, Summons

if TYPE_CHECKING:
    from ..agents import Agent
    from ..work.supervisor import Supervisor

__all__ = ["SUMMONS_LEASE_S", "TaskSummoner", "app_for", "summons_app", "summons_kind"]

SUMMONS_LEASE_S = DEFAULT_LEASE_S
"""Lease of a summons task, seconds: the work layer's default lease
(:data:`~foreperson.work.leases.DEFAULT_LEASE_S`); a summons whose process died on
another machine is run again after it, one whose process on this machine died at once."""


def summons_kind(machine: str, agent: str) -> str:
    """The task kind of ``agent``'s summons in ``machine``: ``"<machine>:<agent>"``."""
    return f"{machine}:{agent}"


def summons_app(machine: str, agents: Mapping[str, Agent[Any]]) -> App:
    """The task functions that answer ``machine``'s summons with ``agents`` (each
    ``Agent`` given an ``updateContext`` tool, as in-process runs do, and run within the
    summons' turn budget, ``Summons.max_model_calls``, which travels in the payload).

    Args:
        machine: the machine's name (``fsm.name`` in the YAML).
        agents: ``{agent name in the YAML: Agent}``.

    Returns:
        an :class:`~foreperson.work.App` with one kind per agent
        (:func:`summons_kind`), for a supervisor here or ``foreperson worker`` elsewhere.
    """
    return app_for(machine, AgentSummoner(agents), agents)


def app_for(machine: str, summoner: AgentSummoner, names: Iterable[str]) -> App:
    """:func:`summons_app` over an existing :class:`AgentSummoner` (its owner closes
    the agents' models)."""
    app = App()
    for name in names:
        async def answer(task: Task) -> dict[str, Any]:
            result = await summoner.summon(Summons.from_json(task.payload))
            return result.to_json()

        app.task(summons_kind(machine, name))(answer)
    return app


class TaskSummoner:
    """A :class:`~foreperson.fsm.Summoner` that makes each summons a task and awaits it.

    Args:
        supervisor: where the tasks go; something must run their kinds (its own
            workers from :func:`summons_app`, or worker processes on the same store).
        machine: the machine's name.
        max_attempts: attempts per summons before it is DEAD (default 3; model errors
            are already retried inside each attempt by the model's retry wrapper).
        stale_after: each summons task's lease, seconds (default 90).
        lease_s: the deprecated name of ``stale_after``.
    """

    def __init__(self, supervisor: Supervisor, machine: str, *, max_attempts: int = 3,
                 stale_after: float = SUMMONS_LEASE_S, lease_s: float | None = None) -> None:
        if lease_s is not None:
            warnings.warn("TaskSummoner(lease_s=) is now stale_after=; lease_s will be "
                          "removed", DeprecationWarning, stacklevel=2)
            stale_after = lease_s
        self.supervisor = supervisor
        self.machine = machine
        self.max_attempts = max_attempts
        self.stale_after = stale_after

    async def summon(self, summons: Summons) -> SummonResult:
        """Submit ``summons`` as a task and return its result.

        The payload is ``summons.to_json()``, its turn budget (``max_model_calls``)
        included, so the worker that answers it spends at most that many model calls.

        Args:
            summons: who, where, what it may write, and its turn budget.

        Returns:
            What the agent wrote, as the task's result holds it.

        Raises:
            RunError: the summons task ended DEAD (its error is kept); resuming the run
                once the cause is fixed revives it (as ``foreperson retry`` would) and
                asks again.
        """
        task = Task(summons_kind(self.machine, summons.agent), summons.to_json(),
                    id=f"{summons.run_id}/{summons.key}", run_id=summons.run_id,
                    max_attempts=self.max_attempts, stale_after=self.stale_after)
        # a summons that is DEAD was left by an earlier attempt of this run (a key is
        # summoned once per run): resuming the run asks for it again
        await anyio.to_thread.run_sync(revive_dead, self.supervisor.store, task.id)
        handle = await self.supervisor.submit(task)
        try:
            result = await handle.result()
        except TaskFailed as exc:
            raise RunError(f"summons of {summons.agent} in state {summons.state} failed: "
                           f"{exc.error}; fix the cause and resume the run (the summons is "
                           "asked again)") from exc
        return SummonResult.from_json(result)
