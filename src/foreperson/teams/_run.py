"""One team run's state, shared by the four team shapes: the route log, the counters,
the store, and the delegation itself.

A delegation is one journaled step (``<position>/delegation:<name>``, kind
``"delegation"``) whose result is a :class:`Delegation`; inside it, the worker runs
nested in the team's run (``ctx.nested()``: its steps journal under the team's, its
usage flows up once, its events stream live) and a work-layer :class:`Task` records it
(kind = the worker, payload = the instructions, result = the output, error = the
failure): added and claimed RUNNING in one store transaction, heartbeated while the
worker runs, then completed, or failed and retried or parked DEAD by the work layer's
rules. A replayed delegation touches neither the worker nor the store.

Durable runs (``foreperson.runtime``): the runtime hands the teams layer a
:class:`DelegationHost` through ``RunOptions.runtime``: the store delegations are
recorded in, the holder name of this run's incarnation, and which workers run in other
processes. A journaled delegation's task id is derived from the run and the step key,
so re-executing it after a crash finds the same task: a task an earlier incarnation of
the run held is taken over (given back and claimed again, its attempt not counted), a
DEAD one is revived, a COMPLETED one is left as it is while the worker replays its own
journal, and one a worker process holds is awaited. A worker of ``runs_remotely`` is
not run here at all: its delegation is a task for ``foreperson worker`` processes
(claimed, leased, reclaimed and fenced like any task), awaited until it finishes.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import math
import re
import time
import weakref
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, Protocol, TypeVar, runtime_checkable

import anyio
from pydantic import BaseModel

from ..agents import Agent, PendingApproval, RunContext, RunResult
from ..agents.steps import InlineSteps, RunParked, load_run_result, unfinished_usage
from ..errors import AccessDenied, ConfigurationError, RecursionLimitExceeded, first_error
from ..journal import Journal, JournalDivergence, UnknownStepVersion, request_digest
from ..models import Message, ModelResponse, SystemMessage, Usage, UserMessage
from ..work import MemoryStore, Status, Task, TaskStore
from ..work.hold import Failed, Hold, await_elsewhere, store_call
from ._events import (
    CapReachedEvent,
    DelegationFinishedEvent,
    DelegationStartedEvent,
    RouteDecisionEvent,
)
from ._function import as_worker
from ._records import DELEGATION_CODEC, Delegation, RouteRecord, TeamResult

__all__ = ["DelegationHost", "TeamArchitecture", "TeamRun", "resolve_worker", "work_prompt"]

T = TypeVar("T")

log = logging.getLogger("foreperson.teams")

# Errors a worker run raises that are the program's, not the worker's: they end the
# team's run too instead of reaching the supervisor's model as a failed delegation
# (AssertionError: a failed check, such as a test model's UnexpectedModelCall).
_PROPAGATE = (JournalDivergence, UnknownStepVersion, ConfigurationError,
              RecursionLimitExceeded, AssertionError, AccessDenied)

_RUNS: weakref.WeakKeyDictionary[RunContext, TeamRun] = weakref.WeakKeyDictionary()
_RETRY_SUFFIX = re.compile(r"/run:\d+$")


class TeamArchitecture(Protocol):
    """What every team shape offers (``TeamSupervisor``, ``Router``, ``Pipeline``,
    ``Parallel``): a roster and a store. :func:`~foreperson.teams.mermaid` and the
    ping-pong check read it."""

    @property
    def roster(self) -> Mapping[str, Agent[Any]]:
        """The fixed workers, by name."""
        ...

    def store_for(self, ctx: RunContext) -> TaskStore:
        """The store a run of this team records its delegations in."""
        ...


@runtime_checkable
class DelegationHost(Protocol):
    """What a durable runtime offers the teams layer, as ``RunOptions.runtime`` (see
    the module docstring); ``foreperson.runtime`` implements it."""

    @property
    def store(self) -> TaskStore:
        """The store delegations are recorded in (it is the run's journal too)."""
        ...

    @property
    def holder(self) -> str:
        """The holder name of this run's in-process delegation tasks:
        ``run:<run id>@<owner>``, unique to this incarnation of the run."""
        ...

    @property
    def fresh(self) -> bool:
        """True when the run never ran before this incarnation (so no delegation task
        of it can exist yet)."""
        ...

    def runs_remotely(self, worker: str) -> bool:
        """Whether ``worker``'s delegations are left to worker processes."""
        ...


def host_of(ctx: RunContext) -> DelegationHost | None:
    """The durable runtime's services for ``ctx``'s run, or None."""
    host = ctx.options.runtime
    if host is None:              # the common case; a protocol isinstance costs ~10 µs
        return None
    return host if isinstance(host, DelegationHost) else None


class DelegationSettings(Protocol):
    """The knobs of a delegation, read from the architecture."""

    max_attempts: int
    retry_backoff_s: float
    worker_timeout_s: float | None
    stale_after: float
    recursion_limit: int


def team_run_of(ctx: RunContext) -> TeamRun | None:
    """The team run state of ``ctx``, if it is a team's run."""
    return _RUNS.get(ctx)


def enclosing_runs(ctx: RunContext) -> Iterator[tuple[RunContext, str]]:
    """The runs ``ctx`` is nested in, innermost first, each with the step path the
    nested run runs under (only those in this process, on this event loop)."""
    parent = ctx.parent
    while parent is not None and parent.context is not None:
        yield parent.context, parent.path
        parent = parent.context.parent


def resolve_worker(name: object, roster: Sequence[str]) -> tuple[str | None, str]:
    """The roster name a model meant, or why none.

    Exact names win. Otherwise case and surrounding whitespace are forgiven only when
    exactly one roster name matches, so the same input always resolves the
    same way and a near miss never becomes a silent default.

    Args:
        name: what the model wrote.
        roster: the workers' names.

    Returns:
        ``(name, "")`` when it resolves, else ``(None, what is wrong)``, naming the
        valid names.
    """
    valid = ", ".join(roster) or "(none)"
    if not isinstance(name, str):
        return None, f"worker must be one of the names {valid}, got {name!r}"
    if name in roster:
        return name, ""
    wanted = name.strip().casefold()
    matches = [n for n in roster if n.casefold() == wanted]
    if len(matches) == 1:
        return matches[0], ""
    if len(matches) > 1:
        return None, (f"worker {name!r} matches several workers ({', '.join(matches)}) "
                      f"when case is ignored; use the exact name, one of: {valid}")
    return None, f"there is no worker named {name!r}; the workers are: {valid}"


def work_prompt(messages: Sequence[Message]) -> str:
    """What a worker of a router, pipeline or parallel team is asked: the request alone,
    or, once there is work or an earlier exchange, the conversation so far with each
    worker's output labelled by its name (the shared contract: the request in).

    Args:
        messages: the team's transcript (system message first).

    Returns:
        The prompt text.
    """
    shown = [m for m in messages if not isinstance(m, SystemMessage)]
    if len(shown) == 1 and isinstance(shown[0], UserMessage):
        return shown[0].content
    lines = ["The conversation so far (user requests and each worker's output):", ""]
    for message in shown:
        if isinstance(message, UserMessage):
            lines.append(f"[user] {message.content}")
        elif isinstance(message, ModelResponse) and message.text:
            lines.append(f"[{message.model_name or 'assistant'}] {message.text}")
    lines += ["", "Do your part for the last user request."]
    return "\n".join(lines)


def output_message(delegation: Delegation) -> ModelResponse:
    """A worker's answer as the team transcript records it: its text, attributed to the
    worker (``model_name``), with no usage of its own (the worker's run counted it)."""
    return ModelResponse(text=delegation.answer, model_name=delegation.worker,
                         usage=Usage(), finish_reason="stop")


def failure_report(delegation: Delegation) -> str:
    """A delegation that did not complete, as the team's model reads it: JSON saying so,
    why, and what the worker produced (at most 2,000 characters), never text that reads
    like an answer (a failure is a status, not text)."""
    produced = delegation.text
    if produced is not None and len(produced) > 2000:
        produced = produced[:2000] + "..."
    return json.dumps({"completed": False, "worker": delegation.worker,
                       "reason": delegation.error or delegation.stop_reason,
                       "produced": produced}, ensure_ascii=False)


def failure_message(delegation: Delegation) -> ModelResponse:
    """:func:`failure_report` as the team transcript records it, attributed to the
    worker."""
    return ModelResponse(text=failure_report(delegation), model_name=delegation.worker,
                         usage=Usage(), finish_reason="stop")


def appended_messages(result: RunResult[Any], prompt: str) -> list[Message]:
    """The messages a run added after its prompt."""
    for i, message in enumerate(result.messages):
        if isinstance(message, UserMessage) and message.content == prompt:
            return list(result.messages[i + 1:])
    return list(result.messages)


def _as_json(output: Any) -> Any:
    if isinstance(output, BaseModel):
        return output.model_dump(mode="json")
    return output


class TeamRun:
    """The state of one team run: counters, route log, delegations, store.

    Architectures create one at the start of a run (it registers itself, so nested
    team runs find their enclosing team, and sets the run's ``result_hook`` so the
    result is a :class:`TeamResult`).

    Args:
        ctx: the team's run.
        settings: the architecture (attempts, backoff, timeout, lease, recursion limit).
        store: where delegations are recorded.
    """

    def __init__(self, ctx: RunContext, settings: DelegationSettings, store: TaskStore) -> None:
        self.ctx = ctx
        self.team = ctx.agent_name
        self.settings = settings
        self.store = store
        self.route_log: list[RouteRecord] = []
        self.delegations: list[Delegation] = []
        self.asked: list[str] = []
        self.specialist_calls = 0
        self.calls_by_worker: dict[str, int] = {}
        self.cap: str | None = None
        self.steps = 0
        self.task_by_path: dict[str, str] = {}
        self.parent_task_id = self._parent_task()
        self.host = host_of(ctx)
        self.holder = self.host.holder if self.host is not None else f"team:{self.team}"
        _RUNS[ctx] = self
        ctx.result_hook = self.shape_result

    def _parent_task(self) -> str | None:
        for run, path in enclosing_runs(self.ctx):
            team = _RUNS.get(run)
            if team is not None:
                return team.task_by_path.get(_RETRY_SUFFIX.sub("", path))
        return None

    # --- counting ----------------------------------------------------------------------

    def count_step(self, what: str) -> None:
        """Count one step (a decision or a worker run) against ``recursion_limit``.

        Args:
            what: the step, for the error message.

        Raises:
            RecursionLimitExceeded: the backstop: more steps than ``recursion_limit``.
        """
        self.steps += 1
        limit = self.settings.recursion_limit
        if self.steps > limit:
            raise RecursionLimitExceeded(
                f"team {self.team!r} run {self.ctx.run_id}: step {self.steps} ({what}) is "
                f"past recursion_limit={limit}; the caps (max_specialist_calls, max_turns) "
                "should have ended the run first: lower them or raise recursion_limit",
                agent=self.team, run_id=self.ctx.run_id, limit=limit)

    def count_call(self, worker: str) -> None:
        """Count a worker run on the team's own counters (never on a parent's: seed 004,
        counters stay at their level)."""
        self.specialist_calls += 1
        self.calls_by_worker[worker] = self.calls_by_worker.get(worker, 0) + 1

    def ask(self, worker: str) -> None:
        """Note that the team asked ``worker`` for work (for ``partial``)."""
        if worker not in self.asked:
            self.asked.append(worker)

    # --- records and events ------------------------------------------------------------

    async def record(self, record: RouteRecord) -> None:
        """Add a route log entry: kept in the result, audited, and published live."""
        self.route_log.append(record)
        ctx = self.ctx
        ctx.audit("route", turn=record.turn, route=record.kind, decision=record.decision,
                  specialist_calls=record.specialist_calls, routed_to=record.routed_to,
                  overridden_by=record.overridden_by)
        if ctx.events is not None:
            await ctx.publish(RouteDecisionEvent(ctx.run_id, self.team, record, **ctx.tags,
                                                 replayed=ctx.replayed))

    async def publish(self, make: Callable[..., Any], **fields: Any) -> None:
        """Publish a team event built with the run's id, the team's name and tags."""
        ctx = self.ctx
        if ctx.events is not None:
            await ctx.publish(make(run_id=ctx.run_id, agent=self.team, **fields, **ctx.tags))

    async def hit_cap(self, cap: str, limit: int | None, detail: str) -> None:
        """Note that ``cap`` (an option's name, e.g. ``"max_specialist_calls"``) refused
        more work (the first one is the result's ``cap``) and publish it."""
        if self.cap is None:
            self.cap = cap
        await self.publish(CapReachedEvent, cap=cap, limit=limit, detail=detail)

    def has_work(self) -> bool:
        """Whether any worker run gave the team something to answer with: a completed
        output, or the text of a worker that stopped on its own cap or limit (a nested
        team's best effort); a worker that raised or timed out gave nothing."""
        return TeamRun.best_effort(self, None) is not None

    def nothing_to_answer(self) -> tuple[str, str]:
        """Why a team that is about to end has no answer, as ``(stop reason, detail)``:
        ``"no_answer"`` when no worker ran (or the ones that completed gave the finalize
        step nothing), ``"worker_failed"`` when every worker run failed."""
        if not self.delegations:
            return "no_answer", "the team finished before any worker ran"
        if self.completed_workers():
            return "no_answer", "the finalize step returned no answer"
        failures = "; ".join(f"{d.worker}: {d.error or d.stop_reason}"
                             for d in self.delegations)
        return "worker_failed", f"no worker run completed ({failures})"

    # --- delegation ----------------------------------------------------------------------

    async def delegate(
        self, worker: str, agent: Agent[Any], prompt: str, *, name: str, turn: int, index: int
    ) -> Delegation:
        """Run ``agent`` on ``prompt`` for the team: one journaled step whose result is
        the :class:`Delegation`, recorded as a work-layer task.

        The caller has counted it (:meth:`count_call`) and checked the caps. A worker
        that raises (other than the program errors below), stops on one of its own
        limits or times out gives a Delegation with ``completed=False``; its task is
        retried while the work layer's rules allow (a retryable error,
        ``max_attempts``), else parked DEAD.

        Args:
            worker: its name in the roster (the task's kind).
            agent: the worker.
            prompt: what it is asked.
            name: the step key's last part (unique at this position).
            turn: the team's model call that asked for it.
            index: its position in that turn (or stage).

        Returns:
            The delegation (replayed from the journal when recorded).

        Raises:
            JournalDivergence, UnknownStepVersion: the journal disagrees.
            ConfigurationError, RecursionLimitExceeded: raised by the worker's run
                (bugs to fix and backstops, not failures for the model to read).
        """
        ctx = self.ctx
        self.ask(worker)
        digest = worker_digest(agent)

        async def execute() -> Delegation:
            done = await self._execute(worker, agent, prompt, turn=turn, index=index)
            return replace(done, worker_digest=digest)

        outcome = await ctx.step("delegation", execute, name=name, codec=DELEGATION_CODEC,
                                 request={"worker": worker, "prompt": prompt})
        delegation = outcome.value
        if outcome.replayed:
            recorded = delegation.worker_digest
            if recorded is not None and recorded != digest:
                raise JournalDivergence(
                    ctx.journal_run_id, delegation.delegation_id, recorded, digest,
                    f"the instructions of worker {worker!r} changed since this delegation "
                    "was recorded")
            ctx.add_usage(delegation.usage)
            await self._replayed(delegation)
        self.delegations.append(delegation)
        return delegation

    async def route_step(self, name: str, choice: dict[str, Any]) -> None:
        """Journal a routing decision, whoever made it (a model, a rule, a pipeline's
        order, a parallel's roster), as a step ``.../route:<name>`` whose request is the
        choice: a replay that chooses otherwise stops there.

        Args:
            name: the step key's last part (the decision's number, the stage...).
            choice: the decision, as JSON (``{"next": "billing"}``).

        Raises:
            JournalDivergence: a replay chose otherwise; it names the step and both
                choices.
        """
        async def chosen() -> dict[str, Any]:
            return choice

        await self.ctx.step("route", chosen, name=name, request=choice)

    async def _replayed(self, delegation: Delegation) -> None:
        """A delegation that came from the journal: in the events and the audit log,
        marked replayed (not dropped, not reported as new work)."""
        self.ctx.audit("delegation", worker=delegation.worker, task_id=delegation.task_id,
                       completed=delegation.completed, stop_reason=delegation.stop_reason,
                       error=delegation.error, duration_s=delegation.duration_s,
                       replayed=True)
        await self.publish(DelegationStartedEvent, worker=delegation.worker,
                           delegation_id=delegation.delegation_id, task_id=delegation.task_id,
                           instructions=delegation.instructions, attempt=delegation.attempts,
                           replayed=True)
        await self.publish(
            DelegationFinishedEvent, worker=delegation.worker,
            delegation_id=delegation.delegation_id, task_id=delegation.task_id,
            completed=delegation.completed, text=delegation.text,
            stop_reason=delegation.stop_reason, error=delegation.error,
            worker_run_id=delegation.worker_run_id, duration_s=delegation.duration_s,
            replayed=True)

    def _task_id(self, key: str) -> str:
        """A journaled delegation's task id follows from the run and the step key, so a
        re-execution after a crash finds its task; an unjournaled one draws a new id."""
        ctx = self.ctx
        if self.host is None and isinstance(ctx.steps, InlineSteps):
            return ctx.ids()
        return hashlib.sha256(f"{ctx.journal_run_id}/{key}".encode()).hexdigest()[:32]

    def _overlaps_claim(self) -> bool:
        """Whether the first claim may run beside the worker's start: only where the
        task cannot exist yet (a fresh durable run, or an unjournaled run), and the
        store is behind a thread hop."""
        if not getattr(self.store, "blocking", True):
            return False
        if self.host is not None:
            return self.host.fresh
        return isinstance(self.ctx.steps, InlineSteps)

    def _takes_over(self, holder: str | None) -> bool:
        """Whether a task held by ``holder`` was held by an earlier incarnation of this
        run (in process, now dead: the runtime gave this one the run), not by a worker
        process."""
        if holder is None:
            return True
        return holder.startswith((f"run:{self.ctx.journal_run_id}@", "team:"))

    async def _execute(
        self, worker: str, agent: Agent[Any], prompt: str, *, turn: int, index: int
    ) -> Delegation:
        """The delegation's work: its task held (:class:`~foreperson.work.hold.Hold`)
        while the worker runs, under the work layer's retry rules; the events, the
        audit entry and the :class:`Delegation` are the team's."""
        ctx = self.ctx
        settings = self.settings
        key = ctx.position()
        # the payload says all a worker process needs to run the worker (the same whether
        # it runs here or there, so the task may be claimed by either after a crash)
        task = Task(worker, {"instructions": prompt, "team": self.team, "delegation": key,
                             "agent": worker, "run_id": ctx.journal_run_id,
                             "parent_run_id": ctx.run_id, "level": ctx.level + 1,
                             "user_id": ctx.user_id},
                    id=self._task_id(key), run_id=ctx.journal_run_id,
                    parent_id=self.parent_task_id, max_attempts=settings.max_attempts,
                    stale_after=settings.stale_after)
        self.task_by_path[key] = task.id
        if self.host is not None and self.host.runs_remotely(worker):
            return await self._elsewhere(worker, agent, prompt, task, turn=turn, index=index)
        held: Hold[RunResult[Any]] = Hold(
            self.store, task, holder=self.holder, lease_s=settings.stale_after,
            backoff_base_s=settings.retry_backoff_s, takes_over=self._takes_over)
        overlap = self._overlaps_claim()
        # the task may exist (an earlier incarnation's): take it over before the work
        if not overlap and not await held.claim():
            return await self._elsewhere(worker, agent, prompt, task, turn=turn, index=index)
        began = time.perf_counter()
        spent: list[Usage] = []      # what attempts that ended without a result used

        async def attempt(number: int, beside: Callable[[], Coroutine[Any, Any, None]] | None
                          ) -> RunResult[Any]:
            await self.publish(DelegationStartedEvent, worker=worker, delegation_id=key,
                               task_id=task.id, instructions=prompt, attempt=number)
            return await self._run_worker(agent, prompt, beside, spent)

        outcome = await held.run(attempt, propagate=_PROPAGATE, release_on=(RunParked,),
                                 first_claims=overlap)
        if isinstance(outcome, Failed):
            delegation = Delegation(
                worker, prompt, key, task.id, completed=False, error=outcome.error,
                attempts=outcome.attempts, usage=sum(spent, Usage()),
                duration_s=round(time.perf_counter() - began, 6), turn=turn, index=index)
        else:
            delegation = await self._settle(held, worker, prompt, key, outcome, began,
                                            turn, index)
            if spent:
                delegation = replace(delegation, usage=sum(spent, delegation.usage))
        ctx.audit("delegation", worker=worker, task_id=task.id, completed=delegation.completed,
                  stop_reason=delegation.stop_reason, error=delegation.error,
                  duration_s=delegation.duration_s)
        await self.publish(
            DelegationFinishedEvent, worker=worker, delegation_id=key, task_id=task.id,
            completed=delegation.completed, text=delegation.text,
            stop_reason=delegation.stop_reason, error=delegation.error,
            worker_run_id=delegation.worker_run_id, duration_s=delegation.duration_s)
        return delegation

    async def _run_worker(
        self, agent: Agent[Any], prompt: str,
        claim: Callable[[], Coroutine[Any, Any, None]] | None, spent: list[Usage],
    ) -> RunResult[Any]:
        """The worker's run, nested in the team's, bounded by ``worker_timeout_s``.
        ``claim`` (the first attempt's task record) runs beside it, so the store write
        overlaps the worker's first model call instead of delaying it; a failed claim
        cancels the worker and raises. What a run that ends without a result used is
        appended to ``spent``."""
        timeout = self.settings.worker_timeout_s
        options = self.ctx.nested()
        try:
            return await self._attempt(agent, prompt, claim, options, timeout)
        finally:
            used = unfinished_usage(options)
            if used is not None:
                spent.append(used)

    async def _attempt(
        self, agent: Agent[Any], prompt: str,
        claim: Callable[[], Coroutine[Any, Any, None]] | None, options: Any,
        timeout: float | None,
    ) -> RunResult[Any]:
        result: RunResult[Any] | None = None
        failure: Exception | None = None

        async def work() -> None:
            nonlocal result, failure
            try:
                with anyio.move_on_after(timeout if timeout is not None else math.inf):
                    result = await agent.run(prompt, options=options)
            except Exception as exc:  # noqa: BLE001 - raised below, outside the group
                failure = exc

        if claim is None:
            await work()
        else:
            try:
                async with anyio.create_task_group() as group:
                    group.start_soon(claim)
                    await work()
            except BaseExceptionGroup as errors:
                raise first_error(errors) from None
        if failure is not None:
            raise failure
        if result is None:
            raise TimeoutError(f"the worker did not finish within worker_timeout_s={timeout} s "
                               "and was cancelled")
        return result

    async def _settle(
        self, held: Hold[RunResult[Any]], worker: str, prompt: str, key: str,
        result: RunResult[Any], began: float, turn: int, index: int,
    ) -> Delegation:
        """The task of a worker run that returned, settled: completed with its output,
        or, when the worker stopped on one of its limits, DEAD (a stop would repeat).
        A task found COMPLETED before a crash (``held.finished``) is left as it is."""
        completed = result.completed
        output = _as_json(result.output) if completed else None
        error = None if completed else f"stopped: {result.stop_reason}" + (
            f" ({result.detail})" if result.detail else "")
        defer = getattr(self.ctx.steps, "defer", None)
        if held.finished:
            stored = True
        elif completed and self.host is not None and callable(defer) and defer(
                held.complete_later(output)):
            # in the journal's write order (a durable run owns its tasks, so the lease
            # cannot be lost meanwhile): off the run's critical path
            stored = True
        elif completed:
            stored = await held.complete(output)
        else:
            assert error is not None
            stored = await held.give_up(error)
        if not stored:
            error = (error + "; " if error else "") + (
                "its task's lease was lost (reclaimed by another process), the record "
                "was not updated")
        return Delegation(
            worker, prompt, key, held.task.id, completed=completed, output=output,
            text=result.text, stop_reason=result.stop_reason, error=error,
            worker_run_id=result.run_id, attempts=held.attempts, usage=result.usage,
            duration_s=round(time.perf_counter() - began, 6),
            messages=appended_messages(result, prompt), turn=turn, index=index)

    async def _elsewhere(self, worker: str, agent: Agent[Any], prompt: str, task: Task, *,
                         turn: int, index: int) -> Delegation:
        """A delegation that a worker process runs (``runs_remotely``, or a worker
        process claimed the task after this run's earlier incarnation died): the task is
        submitted (a DEAD one revived), awaited, and read back. Its usage is counted here
        (it did not flow up); its worker's events stay in its process."""
        ctx = self.ctx
        store = self.store
        settings = self.settings
        key = task.payload["delegation"]
        task.awaited = True
        began = time.perf_counter()
        await self.publish(DelegationStartedEvent, worker=worker, delegation_id=key,
                           task_id=task.id, instructions=prompt, attempt=1)
        flush = getattr(ctx.steps, "flush", None)
        if flush is not None:       # output commit: the decision is on disk before others act
            await flush()
        timeout = settings.worker_timeout_s
        try:
            done = await await_elsewhere(store, task, timeout)
        except TimeoutError:
            delegation = Delegation(
                worker, prompt, key, task.id, completed=False,
                error=f"TimeoutError: the worker process did not finish within "
                      f"worker_timeout_s={timeout} s", duration_s=round(
                          time.perf_counter() - began, 6), turn=turn, index=index)
        else:
            delegation = await self._read_back(worker, agent, prompt, done, began, turn, index)
        ctx.add_usage(delegation.usage)
        ctx.audit("delegation", worker=worker, task_id=task.id, completed=delegation.completed,
                  stop_reason=delegation.stop_reason, error=delegation.error,
                  duration_s=delegation.duration_s, remote=True)
        await self.publish(
            DelegationFinishedEvent, worker=worker, delegation_id=key, task_id=task.id,
            completed=delegation.completed, text=delegation.text,
            stop_reason=delegation.stop_reason, error=delegation.error,
            worker_run_id=delegation.worker_run_id, duration_s=delegation.duration_s)
        return delegation

    async def _read_back(self, worker: str, agent: Agent[Any], prompt: str, done: Task,
                         began: float, turn: int, index: int) -> Delegation:
        key = done.payload.get("delegation", "") if isinstance(done.payload, dict) else ""
        duration = round(time.perf_counter() - began, 6)
        if done.status is Status.DEAD:
            parked = await self._parked_below(key)
            if parked:
                raise RunParked(parked)
            return Delegation(worker, prompt, key, done.id, completed=False, error=done.error,
                              attempts=done.attempts, duration_s=duration, turn=turn,
                              index=index)
        result = load_run_result(done.result, agent.output_type)
        error = None if result.completed else f"stopped: {result.stop_reason}" + (
            f" ({result.detail})" if result.detail else "")
        return Delegation(
            worker, prompt, key, done.id, completed=result.completed,
            output=_as_json(result.output) if result.completed else None, text=result.text,
            stop_reason=result.stop_reason, error=error, worker_run_id=result.run_id,
            attempts=done.attempts, usage=result.usage, duration_s=duration,
            messages=appended_messages(result, prompt), turn=turn, index=index)

    async def _parked_below(self, key: str) -> list[PendingApproval]:
        """The approvals a worker process's run under ``key`` parked on (journaled by
        it in this run's journal), still undecided."""
        store = self.store
        if not isinstance(store, Journal):
            return []
        steps = await store_call(store, partial(store.list_steps, self.ctx.journal_run_id))
        decided = {s.key for s in steps if s.kind == "approval"}
        return [PendingApproval(**s.result) for s in steps
                if s.kind == "approval_request" and s.key.startswith(key + "/")
                and s.key.removesuffix("/request") not in decided]

    # --- the result ----------------------------------------------------------------------

    def completed_workers(self) -> set[str]:
        """Workers with at least one completed delegation in this run."""
        return {d.worker for d in self.delegations if d.completed}

    def last_output(self) -> str | None:
        """The latest completed worker output, as text, or None."""
        for delegation in reversed(self.delegations):
            answer = delegation.answer
            if answer is not None:
                return answer
        return None

    def best_effort(self, result: RunResult[Any] | None) -> str | None:
        """The final answer of a run a cap, a loop or a limit ended: the last completed
        worker output, else what the last worker that stopped had produced (a nested
        team's own best effort), else None (nothing to show; never a tool error or a
        decision dressed as an answer). Architectures refine it."""
        last = self.last_output()
        if last is not None:
            return last
        for delegation in reversed(self.delegations):
            if delegation.text is not None and delegation.stop_reason is not None:
                return delegation.text
        return None

    def shape_result(self, result: RunResult[Any]) -> TeamResult[Any]:
        """The run's result as a :class:`TeamResult` (the run's ``result_hook``)."""
        _RUNS.pop(self.ctx, None)
        if result.completed:
            output = result.output
            if isinstance(output, str):
                text: str | None = output
            elif isinstance(output, BaseModel):
                text = output.model_dump_json()
            elif output is not None:
                text = json.dumps(output, ensure_ascii=False)
            else:
                text = result.text
        else:
            text = self.best_effort(result)
        done = self.completed_workers()
        return TeamResult.from_run(
            result, text=text, route_log=list(self.route_log),
            delegations=sorted(self.delegations, key=lambda d: (d.turn, d.index)),
            partial=[w for w in self.asked if w not in done],
            specialist_calls=self.specialist_calls,
            cap=self.cap if result.stop_reason == "cap" else None)


class TeamStore:
    """Where a team architecture records its delegations (mixed into every shape): the
    store it was given (``_store``), else one in-memory store of its own, made on first
    use (``_default_store``)."""

    _store: TaskStore | None
    _default_store: MemoryStore | None

    @property
    def store(self) -> TaskStore:
        """The store given, else this team's own in-memory store."""
        if self._store is not None:
            return self._store
        if self._default_store is None:
            self._default_store = MemoryStore()
        return self._default_store

    def store_for(self, ctx: RunContext) -> TaskStore:
        """The store a run records its delegations in: the one given, else the enclosing
        team's, else the durable runtime's, else :attr:`store`."""
        return find_store(ctx, self._store, lambda: self.store)


def find_store(ctx: RunContext, own: TaskStore | None, default: Callable[[], TaskStore]
               ) -> TaskStore:
    """The store of a team run: its own, else the nearest enclosing team run's (so a
    hierarchy records every level in one store), else the durable runtime's (the run's
    journal), else the team's default."""
    if own is not None:
        return own
    for run, _ in enclosing_runs(ctx):
        team = _RUNS.get(run)
        if team is not None:
            return team.store
    host = host_of(ctx)
    if host is not None:
        return host.store
    return default()


def is_running_above(ctx: RunContext, agent: Agent[Any]) -> bool:
    """Whether ``agent``'s team (its architecture) is already running in this run or one
    it is nested in: delegating to it would be ping-pong between nested teams."""
    target = agent.architecture
    if ctx.agent.architecture is target:
        return True
    return any(run.agent.architecture is target for run, _ in enclosing_runs(ctx))


def worker_digest(agent: Agent[Any]) -> str:
    """The digest of a worker's instructions, recorded with each of its delegations and
    compared when one replays (24 hex digits): editing a worker blocks resuming only
    the parked runs that used it, and the divergence names it."""
    return request_digest({"instructions": agent.instructions})[:24]


def check_roster(team: str, workers: Mapping[str, Any]) -> dict[str, Agent[Any]]:
    """The roster, checked: names are identifiers-like strings, values are agents (or
    plain functions, made function workers under their roster names); an agent whose
    name differs from its roster name is cloned under that name, so its
    events, results and audit entries say which worker it is.

    Raises:
        ConfigurationError: a name or a worker that cannot be used.
    """
    roster: dict[str, Agent[Any]] = {}
    for name, agent in workers.items():
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", name):
            raise ConfigurationError(
                f"team {team!r}: worker name {name!r}: use 1-64 letters, digits, '_', '-' "
                "or '.' (the names are an enum the model picks from)")
        if name == "FINISH":
            raise ConfigurationError(
                f"team {team!r}: 'FINISH' is the router's choice to end the run; rename "
                "that worker")
        agent = as_worker(team, name, agent)
        roster[name] = agent if agent.name == name else _renamed(agent, name)
    return roster


def _renamed(agent: Agent[Any], name: str) -> Agent[Any]:
    """A shallow copy under another name: same model, tools, architecture and guards
    (a Team stays a Team)."""
    clone = copy.copy(agent)
    clone.name = name
    return clone
