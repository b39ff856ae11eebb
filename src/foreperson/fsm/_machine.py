"""``Machine``: load a YAML state machine, run it, resume it.

The run follows seed 003:

* entering a state whose requirements are unmet parks the machine and summons the
  agent each missing field is required from (one :class:`~foreperson.fsm.Summons` at a
  time, in the order the requirements are written); an agent that did not write
  everything is asked again, within the stage caps;
* once every requirement is present, the first transition whose guards all hold is
  taken: the state's ``exit`` actions run first, then the edge's ``onTransition``,
  then the target is entered. Requirements are satisfied by presence, so a field the
  edge consumed (``assign: {finding: ""}``) re-arms the state: a second visit asks the
  agent again;
* the policy caps (``maxIterations``, ``maxExchangesPerStage``,
  ``maxExchangesPerAgentPerStage``) end the run with a result and its ``stop_reason``;
* with a store (any :class:`~foreperson.journal.Journal`), every summons' result is
  journaled before the next summons is sent (and before the run returns or raises), and
  a checkpoint is written every ``checkpointEvery`` transitions, so
  :meth:`Machine.resume` rebuilds the run from the latest checkpoint plus the summons
  journaled after it, and no agent is asked twice.
"""

from __future__ import annotations

import asyncio
import copy
import os
import socket
import threading
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.to_thread

from ..agents import Agent
from ..clock import Clock, IdSource, SystemClock, new_id
from ..errors import ConfigurationError, GuardError, InputError, RunError
from ..journal import Journal, JournalDivergence, Step, request_digest
from ..models import Usage
from ..work.process import process_gone
from ..work.store import TaskStore
from ..work.supervisor import Supervisor
from ._cel import CONTEXT
from ._fields import FieldSpec, context_block, is_set
from ._ownership import RunOwner
from ._spec import Action, Edge, MachineSpec, StateSpec, load_spec
from ._summon import AgentSummoner, Summoner, SummonResult, Summons, usage_json
from ._tasks import SUMMONS_LEASE_S, TaskSummoner, app_for

__all__ = ["Machine", "MachineResult", "StopReason", "Transition", "Write"]

StopReason = Literal[
    "completed",
    "max_iterations",
    "max_exchanges_per_stage",
    "max_exchanges_per_agent_per_stage",
    "no_transition",
]
"""Why a run ended: ``"completed"`` (a terminal state was reached), a policy cap
(seed 003's ``maxIterations``, ``maxExchangesPerStage``, ``maxExchangesPerAgentPerStage``),
or ``"no_transition"`` (every requirement was met but no transition's guards held)."""

CHECKPOINT_FORMAT = 1
"""The format of the checkpoints and run records this foreperson writes."""

_KIND_START = "fsm.start"
_KIND_SUMMONS = "fsm.summons"
_KIND_CHECKPOINT = "fsm.checkpoint"
_KIND_END = "fsm.end"


@dataclass(frozen=True, slots=True)
class Write:
    """One value written into the context.

    Attributes:
        field: the field.
        value: the value assigned, or the item appended.
        by: who wrote it: the agent's name, ``"exit"`` or ``"onTransition"``.
        op: ``"assign"`` or ``"append"``.
    """

    field: str
    value: Any
    by: str
    op: Literal["assign", "append"] = "assign"


@dataclass(frozen=True, slots=True)
class Transition:
    """One transition of a run, with what happened in the state it left.

    Attributes:
        index: 1 for the run's first transition.
        from_state: the state left.
        to_state: the state entered.
        guard: the guard that fired (its CEL text), or None for an unguarded edge.
        writes: every write made while in ``from_state``: the agents', then ``exit``'s,
            then the edge's ``onTransition``.
        summoned: the agents summoned in ``from_state``, in order (one entry per
            summons).
        entered_at: when ``from_state`` was entered (UTC).
        duration_s: seconds spent in ``from_state`` (summons included).
        replayed: True when the summons results came from the journal (a resumed run).
    """

    index: int
    from_state: str
    to_state: str
    guard: str | None
    writes: tuple[Write, ...]
    summoned: tuple[str, ...]
    entered_at: datetime
    duration_s: float
    replayed: bool = False

    def to_json(self) -> dict[str, Any]:
        """The transition as JSON (checkpoints, ``fsm run --json``).

        Returns:
            Every attribute; ``entered_at`` in ISO 8601.
        """
        return {"index": self.index, "from_state": self.from_state,
                "to_state": self.to_state, "guard": self.guard,
                "writes": [{"field": w.field, "value": w.value, "by": w.by, "op": w.op}
                           for w in self.writes],
                "summoned": list(self.summoned), "entered_at": self.entered_at.isoformat(),
                "duration_s": self.duration_s, "replayed": self.replayed}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Transition:
        """Read a transition written by :meth:`to_json`.

        Args:
            data: the JSON object.

        Returns:
            The transition.
        """
        values = dict(data)
        values["writes"] = tuple(Write(**w) for w in values["writes"])
        values["summoned"] = tuple(values["summoned"])
        values["entered_at"] = datetime.fromisoformat(values["entered_at"])
        return cls(**values)


@dataclass(frozen=True)
class MachineResult:
    """The outcome of a run.

    Attributes:
        run_id: the run (give it to :meth:`Machine.resume`).
        machine: the machine's name.
        request: the request the run was started with.
        context: the final context, every declared field.
        state: the state the run ended in (the terminal state when completed).
        stop_reason: why it ended.
        detail: a note on the stop (which cap, which guards did not hold), or None.
        trace: every transition, in order.
        usage: model calls, tokens and tool calls of every summons.
    """

    run_id: str
    machine: str
    request: str
    context: dict[str, Any]
    state: str
    stop_reason: StopReason
    detail: str | None
    trace: tuple[Transition, ...]
    usage: Usage = field(default_factory=Usage)

    @property
    def completed(self) -> bool:
        """True when a terminal state was reached."""
        return self.stop_reason == "completed"

    @property
    def path(self) -> list[str]:
        """The states visited, in order: the initial state, then each target."""
        if not self.trace:
            return [self.state]
        return [self.trace[0].from_state, *(t.to_state for t in self.trace)]

    def to_json(self) -> dict[str, Any]:
        """The result as JSON (the journal's ``end`` step, ``fsm run --json``).

        Returns:
            Every attribute; the trace as :meth:`Transition.to_json` objects.
        """
        return {"run_id": self.run_id, "machine": self.machine, "request": self.request,
                "context": self.context, "state": self.state,
                "stop_reason": self.stop_reason, "detail": self.detail,
                "trace": [t.to_json() for t in self.trace], "usage": usage_json(self.usage)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MachineResult:
        """Read a result written by :meth:`to_json`.

        Args:
            data: the JSON object.

        Returns:
            The result.
        """
        return cls(data["run_id"], data["machine"], data["request"], dict(data["context"]),
                   data["state"], data["stop_reason"], data["detail"],
                   tuple(Transition.from_json(t) for t in data["trace"]),
                   Usage(**data["usage"]))


class Machine:
    """A state machine declared in YAML (seed 003's format), checked at load, run with
    agents.

    Example::

        machine = Machine.from_file("support_router.yaml")
        result = machine.run_sync("I was charged twice", agents={
            "supervisor": supervisor, "billing_agent": billing, ...})
        print(result.stop_reason, result.context["answer"])

    Args:
        spec: a checked spec (see :meth:`from_file` / :meth:`from_text`).
        clock: where transition timestamps come from (default the system clock).
        ids: makes run ids (default random hex).
    """

    def __init__(self, spec: MachineSpec, *, clock: Clock | None = None,
                 ids: IdSource = new_id) -> None:
        self.spec = spec
        self._finite = _finite_states(spec)
        self.clock: Clock = clock or SystemClock()
        self.ids = ids

    def __repr__(self) -> str:
        return f"Machine({self.spec.name!r}, states={list(self.spec.states)!r})"

    @classmethod
    def from_text(cls, text: str, *, source: str = "<string>", clock: Clock | None = None,
                  ids: IdSource = new_id) -> Machine:
        """Load and check a machine from YAML text.

        Args:
            text: the YAML.
            source: the name problems are reported with (a file path).
            clock: as the constructor.
            ids: as the constructor.

        Returns:
            The machine.

        Raises:
            MachineSpecError: every problem of the text, each with its line and column.
        """
        return cls(load_spec(text, source), clock=clock, ids=ids)

    @classmethod
    def from_file(cls, path: str | Path, *, clock: Clock | None = None,
                  ids: IdSource = new_id) -> Machine:
        """Load and check a machine from a YAML file.

        Args:
            path: the file (UTF-8).
            clock: as the constructor.
            ids: as the constructor.

        Returns:
            The machine.

        Raises:
            MachineSpecError: every problem of the file, each as ``file:line:column``.
            InputError: the file cannot be read.
        """
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read the machine: {exc}", path=str(path)) from exc
        return cls.from_text(text, source=str(path), clock=clock, ids=ids)

    def render(self, format: Literal["mermaid", "dot"] = "mermaid") -> str:  # noqa: A002
        """The machine as a diagram, each guard on its edge.

        Args:
            format: ``"mermaid"`` (a ``stateDiagram-v2``) or ``"dot"`` (Graphviz).

        Returns:
            The diagram's source text.

        Raises:
            ValueError: another format.
        """
        from ._render import render_dot, render_mermaid

        if format == "mermaid":
            return render_mermaid(self.spec)
        if format == "dot":
            return render_dot(self.spec)
        raise ValueError(f"unknown diagram format {format!r}: use 'mermaid' or 'dot'")

    # -- running -------------------------------------------------------------------------
    async def run(
        self,
        request: str,
        *,
        agents: Mapping[str, Agent[Any]] | None = None,
        summoner: Summoner | None = None,
        store: Journal | None = None,
        run_id: str | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> MachineResult:
        """Run the machine from its initial state until a terminal state or a cap.

        Args:
            request: the request the run serves; every summoned agent reads it.
            agents: ``{agent name: Agent}``, run in this process; every agent a state
                requires something from must be there. Or give ``summoner``.
            summoner: runs the summons instead of ``agents`` (see :class:`Summoner`).
            store: a journal (e.g. :class:`~foreperson.work.MemoryStore`): summons
                results are journaled and checkpoints written every ``checkpointEvery``
                transitions, so the run can be resumed. None: nothing is persisted.
            run_id: the run's id (default a new one).
            context: initial values of context fields (coerced to their types).

        Returns:
            The result: final context, ``stop_reason``, trace. A cap ends the run with a
            result, never an exception.

        Raises:
            ConfigurationError: neither or both of ``agents`` / ``summoner``, an agent
                missing, an unknown or ill-typed initial context value, or a run id
                already used in ``store``.
            GuardError: a CEL expression failed on the run's data.
            RunError: a summoner returned a write its agent may not make, or another
                process driving the same run recorded a different summons result first.
            Exception: what the summoner raised (a model error); with a store, the run
                can be resumed.
        """
        run_id = run_id or self.ids()
        values = self._initial_context(context or {})
        async with self._summons(agents, summoner, store, run_id) as summoner:
            return await self._start(request, summoner, store, run_id, values)

    async def _start(self, request: str, summoner: Summoner, store: Journal | None,
                     run_id: str, values: dict[str, Any]) -> MachineResult:
        run = _Run(self, summoner, store, run_id, request)
        run.context = values
        if store is not None:
            nonce = new_id()
            start = Step(run_id, "start", _KIND_START, request_digest(self.spec.digest), {
                "format": CHECKPOINT_FORMAT, "machine": self.spec.name,
                "digest": self.spec.digest, "request": request, "context": values,
                "nonce": nonce})

            def begin() -> bool:
                """In one trip to a worker thread: False when the run id is taken."""
                if store.list_steps(run_id) or not owner.create(request):
                    return False
                return bool(store.put_step(start).result.get("nonce") == nonce)  # first wins

            owner = RunOwner(store, run_id, self.spec.name)
            if not await _call(begin):
                raise ConfigurationError(f"run {run_id} already exists in this store: "
                                         "resume it with machine.resume(run_id, store=...), "
                                         "or start with another run_id")
            run.enter(self.spec.initial_state)
            async with owner.holding():
                return owner.finished(await run.go())
        run.enter(self.spec.initial_state)
        return await run.go()

    def run_sync(self, request: str, **options: Any) -> MachineResult:
        """:meth:`run` for code without an event loop.

        Args:
            request: as :meth:`run`.
            **options: the keyword arguments of :meth:`run`.

        Returns:
            As :meth:`run`.

        Raises:
            RuntimeError: called inside a running event loop (``await machine.run``).
            As :meth:`run`.
        """
        _refuse_running_loop("run_sync", "run")

        out: list[MachineResult] = []

        async def run_and_release() -> None:
            summoner, owned = self._own_summoner(options)
            try:
                out.append(await self.run(request, **options, summoner=summoner))
            finally:
                if owned:
                    await summoner.aclose()

        anyio.run(run_and_release)      # returns None: see _sync_result
        return out[0]

    async def resume(
        self,
        run_id: str,
        *,
        store: Journal,
        agents: Mapping[str, Agent[Any]] | None = None,
        summoner: Summoner | None = None,
    ) -> MachineResult:
        """Continue a run from its journal: the latest checkpoint, then every summons
        journaled after it replayed from its recorded result (no agent is asked twice),
        then on with live summons. A finished run gives its recorded result.

        Args:
            run_id: the run.
            store: the journal the run was started with.
            agents: as :meth:`run`, for the summons not journaled yet.
            summoner: as :meth:`run`, for the summons not journaled yet.

        Returns:
            The result, as :meth:`run`.

        Raises:
            ConfigurationError: no such run in ``store``, or it was started with another
                version of the machine (its spec digest differs).
            JournalDivergence: a journaled summons does not match what the run asks now.
            UnknownStepVersion: the journal was written by a newer foreperson.
            As :meth:`run`.
        """
        steps = await _call(store.list_steps, run_id)
        by_key = {s.key: s for s in steps}
        start = by_key.get("start")
        if start is None or start.kind != _KIND_START:
            raise ConfigurationError(f"no run {run_id} of a state machine in this store")
        if start.result.get("digest") != self.spec.digest:
            raise ConfigurationError(
                f"run {run_id} was started by another version of machine "
                f"{start.result.get('machine')!r} (spec digest "
                f"{str(start.result.get('digest'))[:12]}, this file {self.spec.digest[:12]}): "
                "resume it with the same file, or start a new run")
        end = by_key.get("end")
        if end is not None:
            return MachineResult.from_json(end.result)
        owner = RunOwner(store, run_id, self.spec.name)
        await _call(owner.take, start.result["request"])     # RunBusy: another drives it
        async with owner.holding(), self._summons(agents, summoner, store, run_id) as live:
            return await self._continue(live, owner, store, run_id, start, steps)

    async def _continue(self, summoner: Summoner, owner: RunOwner, store: Journal,
                        run_id: str, start: Step, steps: list[Step]) -> MachineResult:
        run = _Run(self, summoner, store, run_id, start.result["request"])
        run.recorded = {s.key: s for s in steps if s.kind == _KIND_SUMMONS}
        checkpoints = [s.result for s in steps if s.kind == _KIND_CHECKPOINT]
        if checkpoints:
            run.restore(checkpoints)
        else:
            run.context = _own(start.result["context"])
            run.enter(self.spec.initial_state)
        return owner.finished(await run.go())

    def resume_sync(self, run_id: str, **options: Any) -> MachineResult:
        """:meth:`resume` for code without an event loop.

        Args:
            run_id: as :meth:`resume`.
            **options: the keyword arguments of :meth:`resume`.

        Returns:
            As :meth:`resume`.

        Raises:
            RuntimeError: called inside a running event loop.
            As :meth:`resume`.
        """
        _refuse_running_loop("resume_sync", "resume")

        out: list[MachineResult] = []

        async def resume_and_release() -> None:
            summoner, owned = self._own_summoner(options)
            try:
                out.append(await self.resume(run_id, **options, summoner=summoner))
            finally:
                if owned:
                    await summoner.aclose()

        anyio.run(resume_and_release)   # returns None: see _sync_result
        return out[0]

    # -- helpers ---------------------------------------------------------------------------
    # _sync_result: the ``_sync`` wrappers hand the result out through a list, not as the
    # main task's return value, because asyncio's runner formats that task (result
    # included) with repr() when it restores the SIGINT handler: a second for the repr of
    # a 20,000-transition trace.

    def _own_summoner(self, options: dict[str, Any]) -> tuple[Any, bool]:
        """For the ``_sync`` wrappers: the summoner, and whether it was made here from
        ``agents=`` (its models' connections belong to the wrapper's loop, so it closes
        them at the end, as ``Agent.run_sync`` does). Pops both options, except the
        agents of a run on a task store: the run turns those into task workers."""
        if isinstance(options.get("store"), TaskStore) and "summoner" not in options:
            return None, False
        agents = options.pop("agents", None)
        summoner = options.pop("summoner", None)
        made = self._summoner(agents, summoner)
        return made, summoner is None

    @asynccontextmanager
    async def _summons(self, agents: Mapping[str, Agent[Any]] | None,
                       summoner: Summoner | None, store: Journal | None,
                       run_id: str) -> AsyncIterator[Summoner]:
        """The summoner of a run: the one given; or, with a task store, one that makes
        every summons a task answered by this process's workers (and any
        ``foreperson worker`` running :func:`summons_app`); else the agents in process.
        """
        if summoner is not None or not isinstance(store, TaskStore):
            yield self._summoner(agents, summoner)
            return
        local = self._summoner(agents, None)
        assert isinstance(local, AgentSummoner)
        app = app_for(self.spec.name, local, agents or {})
        host = socket.gethostname()
        await _call(_reclaim_dead_local_holders, store, run_id, f"fsm@{host}:")
        sup = Supervisor(store, kinds=app.kinds, stale_after=SUMMONS_LEASE_S)
        sup.register(app.worker(f"fsm@{host}:{os.getpid()}:{self.spec.name}", concurrency=8))
        try:
            async with sup.serving():
                yield TaskSummoner(sup, self.spec.name)
        finally:
            await local.aclose()

    def _summoner(self, agents: Mapping[str, Agent[Any]] | None,
                  summoner: Summoner | None) -> Summoner:
        if (agents is None) == (summoner is None):
            raise ConfigurationError("give the agents (agents={name: Agent}) or a "
                                     "summoner=, one of the two")
        if summoner is not None:
            return summoner
        assert agents is not None
        needed = {r.agent for s in self.spec.states.values() for r in s.requires}
        missing = sorted(needed - set(agents))
        if missing:
            raise ConfigurationError(
                f"machine {self.spec.name!r} summons {', '.join(missing)}, not given in "
                f"agents= (given: {', '.join(sorted(agents)) or 'none'})")
        unknown = sorted(set(agents) - set(self.spec.agents))
        if unknown:
            raise ConfigurationError(
                f"agents= has {', '.join(unknown)}, not declared in machine "
                f"{self.spec.name!r} (declared: {', '.join(self.spec.agents)})")
        return AgentSummoner(agents)

    def _initial_context(self, given: Mapping[str, Any]) -> dict[str, Any]:
        values = {name: spec.empty() for name, spec in self.spec.fields.items()}
        for name, value in given.items():
            spec = self.spec.fields.get(name)
            if spec is None:
                raise ConfigurationError(f"context= names {name!r}, not a field of machine "
                                         f"{self.spec.name!r} (fields: "
                                         f"{', '.join(self.spec.fields)})")
            try:
                values[name] = spec.coerce(value, clear=True)
            except ValueError as exc:
                raise ConfigurationError(f"context= {exc}") from None
        return values


def _refuse_running_loop(name: str, async_name: str) -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError(f"Machine.{name}() cannot be called from a running event loop; use "
                       f"`await machine.{async_name}(...)` instead")


_finite_views = threading.local()
"""Per thread (a ``cel.Context`` is not thread-safe): the CEL contexts of the views made
only of enum and boolean fields, by state and values."""


def _cel_context(view: dict[str, Any]) -> Any:
    import cel

    return cel.Context(variables={CONTEXT: view})


def _finite_states(spec: MachineSpec) -> frozenset[str]:
    """The states whose expressions read only enum and boolean fields."""
    return frozenset(
        name for name, state in spec.states.items()
        if state.reads is not None
        and all(spec.fields[f].type in ("enum", "boolean") for f in state.reads))


def _own(context: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``context`` whose lists and objects are new (a journal may hand back
    the objects it stores; the run appends to its lists in place)."""
    return {k: copy.deepcopy(v) if isinstance(v, list | dict) else v
            for k, v in context.items()}


def _reclaim_dead_local_holders(store: TaskStore, run_id: str, prefix: str) -> list[str]:
    """Take back at once the run's summons held by a process of this host that is gone
    (a run killed and resumed here), instead of waiting for their leases."""
    dead = set()
    for task in store.list_tasks(run_id=run_id):
        holder = task.assigned_to or ""
        if not task.status.active or not holder.startswith(prefix):
            continue
        pid = holder[len(prefix):].split(":", 1)[0]
        if pid.isdigit() and process_gone(int(pid)):
            dead.add(f"{prefix}{pid}:")
    return [i for p in sorted(dead) for i in store.reclaim_stale(holder_prefix=p)]


async def _call(function: Any, *args: Any) -> Any:
    """A blocking journal call, in a worker thread (the Journal protocol is blocking)."""
    return await anyio.to_thread.run_sync(function, *args)


class _Stop(Exception):  # noqa: N818 - internal control flow
    def __init__(self, reason: StopReason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


class _Run:
    """The mutable state of one run."""

    def __init__(self, machine: Machine, summoner: Summoner, store: Journal | None,
                 run_id: str, request: str) -> None:
        self.machine = machine
        self.spec = machine.spec
        self.spec_finite = machine._finite
        self.summoner = summoner
        self.store = store
        self.run_id = run_id
        self.request = request
        self.context: dict[str, Any] = {}
        self.state: StateSpec = next(iter(self.spec.states.values()))
        self.iterations = 0
        self.trace: list[Transition] = []
        self._checkpointed = 0                  # transitions already in a checkpoint
        self.usage = Usage()
        self.recorded: dict[str, Step] = {}
        self._pending: list[Step] = []          # journal steps not written yet (_flush)
        self._writable: dict[tuple[str, str], tuple[tuple[FieldSpec, ...],
                                                    dict[str, FieldSpec]]] = {}
        self._activation: Any = None
        # the current visit
        self._writes: list[Write] = []
        self._summoned: list[str] = []
        self._exchanges: dict[str, int] = {}
        self._entered_at = 0.0
        self._entered_wall = 0.0
        self._replayed = False

    # -- state -------------------------------------------------------------------------------
    def enter(self, name: str) -> None:
        self.state = self.spec.states[name]
        self._writes = []
        self._summoned = []
        self._exchanges = {}
        self._entered_at = time.perf_counter()
        self._entered_wall = self.machine.clock.now()
        self._replayed = False
        self._activation = None

    def restore(self, checkpoints: list[Mapping[str, Any]]) -> None:
        """Continue from the last checkpoint; each holds the transitions since the one
        before it, so the trace is their concatenation."""
        last = checkpoints[-1]
        self.context = _own(last["context"])
        self.iterations = last["iterations"]
        self.trace = [Transition.from_json(t) for c in checkpoints for t in c["trace"]]
        self._checkpointed = len(self.trace)
        self.usage = Usage(**last["usage"])
        self.enter(last["state"])

    def snapshot(self) -> dict[str, Any]:
        """A checkpoint: where the run is parked, its context, and the transitions since
        the previous checkpoint (so each checkpoint costs the same, however long the
        run)."""
        since = self.trace[self._checkpointed:]
        self._checkpointed = len(self.trace)
        return {"format": CHECKPOINT_FORMAT, "state": self.state.name,
                "context": _own(self.context), "iterations": self.iterations,
                "trace": [t.to_json() for t in since], "usage": usage_json(self.usage)}

    def _set(self, name: str, value: Any, by: str, op: Literal["assign", "append"]) -> None:
        if op == "append":       # in place: the run owns its lists (see _own)
            self.context[name].append(value)
        else:
            self.context[name] = value
        self._writes.append(Write(name, value, by, op))
        self._activation = None

    def activation(self) -> Any:
        """The CEL variables of this moment, built once until the next write (only the
        fields the state's expressions read, unless one reads the whole context)."""
        if self._activation is None:
            state = self.state
            reads = state.reads
            if reads is None:
                self._activation = _cel_context(self.context)
            elif state.name in self.spec_finite:
                # only enum / boolean fields: few distinct views, each built once per thread
                key = (state.name, *(self.context[f] for f in reads))
                cache: dict[tuple[Any, ...], Any] | None = getattr(_finite_views, "cache", None)
                if cache is None:
                    cache = _finite_views.cache = {}
                found = cache.get(key)
                if found is None:
                    if len(cache) > 4096:
                        cache.clear()
                    found = cache[key] = _cel_context({f: self.context[f] for f in reads})
                self._activation = found
            else:
                self._activation = _cel_context({f: self.context[f] for f in reads})
        return self._activation

    # -- the loop ------------------------------------------------------------------------------
    async def go(self) -> MachineResult:
        policy = self.spec.policy
        try:
            while not self.state.terminal:
                if self.iterations >= policy.max_iterations:   # before anyone is summoned
                    raise _Stop("max_iterations",
                                f"maxIterations ({policy.max_iterations}) reached: "
                                f"{self.iterations} transitions taken, parked in state "
                                f"{self.state.name!r}")
                await self._satisfy()
                self._take(self._choose())
                if self.store is not None and self.iterations % policy.checkpoint_every == 0:
                    self._pending.append(Step(
                        self.run_id, f"checkpoint/{self.iterations}", _KIND_CHECKPOINT,
                        request_digest([self.state.name, self.iterations]), self.snapshot()))
        except _Stop as stop:
            return await self._finish(stop.reason, stop.detail)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._flush()      # what is known stays known: nobody is asked again
            raise
        return await self._finish("completed", None)

    async def _finish(self, reason: StopReason, detail: str | None) -> MachineResult:
        result = MachineResult(self.run_id, self.spec.name, self.request, _own(self.context),
                               self.state.name, reason, detail, tuple(self.trace), self.usage)
        if self.store is not None:
            self._pending.append(Step(self.run_id, "end", _KIND_END, request_digest(reason),
                                      result.to_json()))
            await self._flush()
        return result

    async def _flush(self) -> None:
        """Write the pending steps (summons results, a checkpoint, the end) in one trip
        to a worker thread.

        Seed 003: no agent is asked twice. A summons' result is pending only
        while the machine works in memory on it (writes, guards, actions, the
        transition); it is on the journal before the next summons is sent, and before
        the run returns or raises.

        Raises:
            RunError: another process recorded a different result for one of these
                summons first (two processes drove the same run).
        """
        if not self._pending or self.store is None:
            return
        steps, self._pending = self._pending, []
        store = self.store

        def write() -> list[Step]:
            return [store.put_step(step) for step in steps]

        for mine, stored in zip(steps, await _call(write), strict=True):
            if mine.kind == _KIND_SUMMONS and stored.result != mine.result:
                raise RunError(f"run {self.run_id}: summons {mine.key!r} has another result "
                               "in the journal, recorded first by another process driving "
                               "the same run; resume the run from the journal")

    async def _satisfy(self) -> None:
        """Summon agents until every requirement of the state is present."""
        state = self.state
        policy = self.spec.policy
        while True:
            missing = [r for r in state.requires if not is_set(self.context[r.field])]
            if not missing:
                return
            agent = missing[0].agent
            total = sum(self._exchanges.values())
            if total >= policy.max_exchanges_per_stage:
                raise _Stop("max_exchanges_per_stage",
                            f"maxExchangesPerStage ({policy.max_exchanges_per_stage}) reached "
                            f"in state {state.name!r}, still missing "
                            f"{', '.join(r.field for r in missing)}")
            count = self._exchanges.get(agent, 0)
            if count >= policy.max_exchanges_per_agent_per_stage:
                raise _Stop("max_exchanges_per_agent_per_stage",
                            f"maxExchangesPerAgentPerStage "
                            f"({policy.max_exchanges_per_agent_per_stage}) reached for "
                            f"{agent!r} in state {state.name!r}, still missing "
                            f"{', '.join(r.field for r in missing if r.agent == agent)}")
            self._exchanges[agent] = count + 1
            await self._summon(agent, count + 1,
                               tuple(r.field for r in missing if r.agent == agent))

    async def _summon(self, agent: str, exchange: int, missing: tuple[str, ...]) -> None:
        state = self.state
        fields = self.spec.fields
        known = self._writable.get((state.name, agent))
        if known is None:
            writable = tuple(fields[name] for name in state.fields_from(agent))
            known = self._writable[(state.name, agent)] = (
                writable, {f.name: f for f in writable})
        writable, allowed = known
        summons = Summons(
            run_id=self.run_id,
            key=f"summons/{self.iterations}/{state.name}/{agent}/{exchange}",
            machine=self.spec.name, state=state.name, agent=agent,
            objective=state.template.render(self.context),
            context=context_block(fields, self.context), request=self.request,
            writable=writable, missing=missing, exchange=exchange)
        self._summoned.append(agent)
        result = await self._result_of(summons)
        for name, value in result.writes:
            spec = allowed.get(name)
            if spec is None:
                raise RunError(f"run {self.run_id}: the summoner returned a write of "
                               f"{name!r} by {agent!r} in state {state.name!r}, which may "
                               f"write only {', '.join(allowed) or 'nothing'}")
            self._apply(spec, value, agent)
        used = result.usage
        if used.model_calls or used.tool_calls or used.input_tokens or used.output_tokens:
            self.usage = self.usage + used

    async def _result_of(self, summons: Summons) -> SummonResult:
        if self.store is None:
            return await self.summoner.summon(summons)
        digest = request_digest(summons.to_json())
        recorded = self.recorded.get(summons.key)
        if recorded is not None:
            if recorded.digest != digest:
                raise JournalDivergence(self.run_id, summons.key, recorded.digest, digest)
            self._replayed = True
            return SummonResult.from_json(recorded.result)
        await self._flush()                 # everything known so far, before asking anyone
        result = await self.summoner.summon(summons)
        data = result.to_json()
        self._pending.append(Step(self.run_id, summons.key, _KIND_SUMMONS, digest, data))
        return SummonResult.from_json(data)         # the result as the journal holds it

    def _apply(self, spec: FieldSpec, value: Any, by: str) -> None:
        try:
            if spec.type == "list":
                for item in spec.coerce_items(value):
                    self._set(spec.name, item, by, "append")
            else:
                self._set(spec.name, spec.coerce(value), by, "assign")
        except ValueError as exc:
            raise RunError(f"run {self.run_id}: the summoner returned a bad write by "
                           f"{by!r} in state {self.state.name!r}: {exc}") from None

    def _choose(self) -> Edge:
        state = self.state
        for edge in state.transitions:
            if not edge.guards:
                return edge
            activation = self.activation()
            if all(g.evaluate(activation, state=state.name) is True for g in edge.guards):
                return edge
        shown = ", ".join(f"{f}={self.context[f]!r}"
                          for f in sorted(state.reads or self.spec.fields))
        raise _Stop("no_transition", f"state {state.name!r}: every requirement is met but "
                                     f"no transition's guards hold ({shown})")

    def _take(self, edge: Edge) -> None:
        state = self.state
        for action in state.exit:
            self._act(action, "exit")
        for action in edge.on_transition:
            self._act(action, "onTransition")
        self.iterations += 1
        self.trace.append(Transition(
            index=self.iterations, from_state=state.name, to_state=edge.target,
            guard=edge.guard_text, writes=tuple(self._writes),
            summoned=tuple(self._summoned),
            entered_at=datetime.fromtimestamp(self._entered_wall, UTC),
            duration_s=time.perf_counter() - self._entered_at, replayed=self._replayed))
        self.enter(edge.target)

    def _act(self, action: Action, by: str) -> None:
        spec = self.spec.fields[action.field]
        value = action.value
        if action.expression is not None:
            value = action.expression.evaluate(self.activation(), state=self.state.name)
            try:
                value = (spec.coerce_items(value)[0] if action.kind == "append"
                         else spec.coerce(value, clear=True))
            except ValueError as exc:
                raise GuardError(f"state {self.state.name!r}: {by} action "
                                 f"{action.describe()} gave a value that does not fit: {exc}",
                                 expression=action.expression.source,
                                 state=self.state.name) from None
        self._set(action.field, value, by, action.kind)
