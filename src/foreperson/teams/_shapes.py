"""The fixed team shapes of seed 004's hierarchy notebook: a pipeline (a fixed sequence,
no routing calls) and a parallel fan-out with one merging agent. Like the supervisor
and the router they are architectures of an :class:`~foreperson.agents.Agent`, so they
nest in any combination; every stage is a delegation (a journaled step and a work-layer
task).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio

from ..agents import Agent, AgentEvent, RunContext
from ..errors import ConfigurationError, first_error
from ..work import MemoryStore, TaskStore
from ..work.leases import DEFAULT_LEASE_S
from ._function import function_worker
from ._records import Delegation
from ._run import (
    TeamRun,
    TeamStore,
    check_roster,
    failure_message,
    output_message,
    work_prompt,
)
from ._supervisor import _positive, _seconds, _stale_after

__all__ = ["Parallel", "Pipeline"]


def _roster(shape: str, agents: Sequence[Agent[Any]]) -> dict[str, Agent[Any]]:
    if isinstance(agents, Agent) or not isinstance(agents, Sequence) or not agents:
        raise ConfigurationError(f"Team.{shape}([...]) takes a non-empty list of agents")
    named: dict[str, Agent[Any]] = {}
    for item in agents:
        if isinstance(item, Agent):
            agent = item
        elif callable(item) and not isinstance(item, type):
            agent = function_worker(item)
        else:
            raise ConfigurationError(
                f"Team.{shape}: {item!r} is not an Agent or a function (a team is an Agent "
                "too)")
        if agent.name in named:
            raise ConfigurationError(
                f"Team.{shape}: two agents are named {agent.name!r}; give each a name of "
                "its own (Agent(..., name=...)): the names are the tasks' kinds and the "
                "step keys")
        named[agent.name] = agent
    return check_roster(shape, named)


class _FixedShape(TeamStore):
    """What the pipeline and the parallel shape share: options, roster, store."""

    def __init__(self, *, store: TaskStore | None, max_attempts: int, retry_backoff_s: float,
                 worker_timeout_s: float | None, stale_after: float, lease_s: float | None,
                 steps: int) -> None:
        _positive("max_attempts", max_attempts, allow_none=False)
        _seconds("retry_backoff_s", retry_backoff_s, allow_none=False)
        _seconds("worker_timeout_s", worker_timeout_s)
        self.stale_after = _stale_after(type(self).__name__, stale_after, lease_s)
        self.max_attempts = max_attempts
        self.retry_backoff_s = float(retry_backoff_s)
        self.worker_timeout_s = worker_timeout_s
        self.recursion_limit = steps     # fixed by construction: never reached
        self._store = store
        self._default_store: MemoryStore | None = None
        self._roster: dict[str, Agent[Any]] = {}

    @property
    def roster(self) -> dict[str, Agent[Any]]:
        """The agents, by name, in order."""
        return dict(self._roster)


class Pipeline(_FixedShape):
    """A fixed sequence of agents: each runs once, in order, on the conversation so far
    (the request, then the earlier stages' outputs, labelled); the last one's output is
    the answer. No routing calls (seed 004: the analysis team "is a fixed pipeline").

    A stage that does not complete stops the pipeline: the run ends with
    ``stop_reason == "worker_failed"`` and the last completed output as its text.

    Args:
        stages: the agents, in order; their names must differ (they are the tasks'
            kinds).
        store: as :class:`~foreperson.teams.TeamSupervisor`.
        max_attempts: as :class:`~foreperson.teams.TeamSupervisor`.
        retry_backoff_s: as :class:`~foreperson.teams.TeamSupervisor`.
        worker_timeout_s: as :class:`~foreperson.teams.TeamSupervisor`.
        stale_after: as :class:`~foreperson.teams.TeamSupervisor`.
        lease_s: the deprecated name of ``stale_after``.

    Raises:
        ConfigurationError: no stages, a non-agent, or two stages with one name.
    """

    def __init__(self, stages: Sequence[Agent[Any]], *, store: TaskStore | None = None,
                 max_attempts: int = 1, retry_backoff_s: float = 2.0,
                 worker_timeout_s: float | None = None, stale_after: float = DEFAULT_LEASE_S,
                 lease_s: float | None = None) -> None:
        roster = _roster("pipeline", stages)
        super().__init__(store=store, max_attempts=max_attempts,
                         retry_backoff_s=retry_backoff_s, worker_timeout_s=worker_timeout_s,
                         stale_after=stale_after, lease_s=lease_s, steps=len(roster))
        self._roster = roster

    def __repr__(self) -> str:
        return f"Pipeline({list(self._roster)!r})"

    @property
    def stages(self) -> list[str]:
        """The stages' names, in order."""
        return list(self._roster)

    async def run(self, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        """See :meth:`~foreperson.agents.steps.Architecture.run`. Yields no events of its own
        (the stages' and the delegations' events go to the run's event sink)."""
        run = TeamRun(ctx, self, self.store_for(ctx))
        last: Delegation | None = None
        for index, (name, agent) in enumerate(self._roster.items(), 1):
            run.count_step(f"stage {index} ({name})")
            await run.route_step(str(index), {"next": name})
            run.count_call(name)
            delegation = await run.delegate(name, agent, work_prompt(ctx.messages),
                                            name=name, turn=0, index=index)
            if not delegation.completed:
                ctx.messages.append(failure_message(delegation))
                ctx.end("worker_failed",
                        detail=f"stage {index} ({name}) did not complete: {delegation.error}")
                return
            ctx.messages.append(output_message(delegation))
            last = delegation
        assert last is not None
        ctx.end("completed", output=last.output)
        return
        yield  # an async generator, like every architecture


class Parallel(_FixedShape):
    """A fan-out: every branch runs at the same time on the conversation so far, then
    one merging agent answers from their outputs (labelled by branch). Without
    ``merge`` the answer is the branches' outputs, each under its name.

    A branch that does not complete is shown to the merging agent as
    ``{"completed": false, ...}`` and listed in ``result.partial``; when no branch
    completes the merge does not run, and a merge that does not complete, or no branch
    at all completing, ends the run with ``stop_reason == "worker_failed"``.

    Args:
        branches: the agents run concurrently; names must differ.
        merge: the agent that writes the answer from their outputs, or None.
        store: as :class:`~foreperson.teams.TeamSupervisor`.
        max_attempts: as :class:`~foreperson.teams.TeamSupervisor`.
        retry_backoff_s: as :class:`~foreperson.teams.TeamSupervisor`.
        worker_timeout_s: as :class:`~foreperson.teams.TeamSupervisor`.
        stale_after: as :class:`~foreperson.teams.TeamSupervisor`.
        lease_s: the deprecated name of ``stale_after``.

    Raises:
        ConfigurationError: no branches, a non-agent, or two agents with one name.
    """

    def __init__(self, branches: Sequence[Agent[Any]], *, merge: Agent[Any] | None = None,
                 store: TaskStore | None = None, max_attempts: int = 1,
                 retry_backoff_s: float = 2.0, worker_timeout_s: float | None = None,
                 stale_after: float = DEFAULT_LEASE_S, lease_s: float | None = None) -> None:
        roster = _roster("parallel", list(branches) + ([merge] if merge is not None else []))
        super().__init__(store=store, max_attempts=max_attempts,
                         retry_backoff_s=retry_backoff_s, worker_timeout_s=worker_timeout_s,
                         stale_after=stale_after, lease_s=lease_s, steps=len(roster))
        self._roster = roster
        self.merge = merge.name if merge is not None else None
        self.branches = [n for n in roster if n != self.merge]

    def __repr__(self) -> str:
        return f"Parallel({self.branches!r}, merge={self.merge!r})"

    async def run(self, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        """See :meth:`~foreperson.agents.steps.Architecture.run`. Yields no events of its own."""
        run = TeamRun(ctx, self, self.store_for(ctx))
        prompt = work_prompt(ctx.messages)
        done: list[Delegation | None] = [None] * len(self.branches)

        async def branch(index: int, name: str) -> None:
            done[index] = await run.delegate(name, self._roster[name], prompt, name=name,
                                             turn=0, index=index + 1)

        await run.route_step("fan-out", {"branches": self.branches, "merge": self.merge})
        for name in self.branches:
            run.count_step(f"branch {name}")
            run.count_call(name)
        try:
            async with anyio.create_task_group() as group:
                for index, name in enumerate(self.branches):
                    group.start_soon(branch, index, name)
        except BaseExceptionGroup as errors:
            raise first_error(errors) from None
        for delegation in done:
            assert delegation is not None
            ctx.messages.append(output_message(delegation) if delegation.completed
                                else failure_message(delegation))
        if not run.has_work():
            reason, detail = run.nothing_to_answer()
            ctx.end(reason, detail=detail)
            return
        if self.merge is None:
            parts = [f"[{d.worker}] {d.answer if d.completed else '(did not complete)'}"
                     for d in done if d is not None]
            ctx.end("completed", output="\n\n".join(parts))
            return
        run.count_step(f"merge {self.merge}")
        run.count_call(self.merge)
        merged = await run.delegate(self.merge, self._roster[self.merge],
                                    work_prompt(ctx.messages), name=self.merge, turn=0,
                                    index=len(self.branches) + 1)
        if not merged.completed:
            ctx.messages.append(failure_message(merged))
            ctx.end("worker_failed", detail=f"the merge ({self.merge}) did not complete: "
                                            f"{merged.error}")
            return
        ctx.messages.append(output_message(merged))
        ctx.end("completed", output=merged.output)
        return
        yield  # an async generator, like every architecture
