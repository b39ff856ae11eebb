"""``Machine``: load a YAML state machine, run it, resume it.

The facade: :meth:`Machine.from_file` / :meth:`Machine.from_text` load and check the spec
(:func:`~foreperson.fsm.load_spec`); :meth:`Machine.run` and :meth:`Machine.resume` (and
their ``_sync`` forms) set up the summoner (the agents in process, a given summoner, or
summons tasks on a task store), write the run's ``start`` step or read its journal, hold
the run's ownership (:mod:`foreperson.fsm._ownership`), and hand the run to the
interpreter (:mod:`foreperson.fsm._interpreter`, which says how a run follows seed 003).
What a run returns is in :mod:`foreperson.fsm._result`.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import anyio

from ..agents import Agent
from ..clock import Clock, IdSource, SystemClock, new_id
from ..errors import ConfigurationError, InputError
from ..journal import Journal, Step, request_digest
from ..work.process import process_gone
from ..work.store import TaskStore
from ..work.supervisor import Supervisor
from ._check import load_spec
from ._interpreter import (
    _KIND_CHECKPOINT,
    _KIND_RESPEC,
    _KIND_START,
    _KIND_SUMMONS,
    CHECKPOINT_FORMAT,
    _call,
    _finite_states,
    _own,
    _Run,
    batch_of,
)
from ._ownership import RunOwner
from ._result import MachineResult
from ._spec import MachineSpec
from ._summon import AgentSummoner, Summoner
from ._tasks import SUMMONS_LEASE_S, TaskSummoner, app_for

__all__ = ["Machine"]


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
            result, never an exception; so does a CEL guard or action failing on the
            run's data (or over its evaluation budget): ``stop_reason ==
            "guard_error"``, the error in ``detail``.

        Raises:
            ConfigurationError: neither or both of ``agents`` / ``summoner``, an agent
                missing, an unknown or ill-typed initial context value, or a run id
                already used in ``store``.
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
        run = _Run(self.spec, self._finite, self.clock, summoner, store, run_id, request)
        run.context = values
        if store is not None:
            nonce = new_id()
            start = Step(run_id, "start", _KIND_START, request_digest(self.spec.digest), {
                "format": CHECKPOINT_FORMAT, "machine": self.spec.name,
                "digest": self.spec.digest, "request": request, "context": values,
                "nonce": nonce})

            def begin() -> bool:
                """In one trip to a worker thread and one transaction (the run's record
                and its start): False when the run id is taken."""
                with batch_of(store):
                    if store.list_steps(run_id) or not owner.create(request):
                        return False
                    return bool(store.put_step(start).result.get("nonce") == nonce)

            owner = RunOwner(store, run_id, self.spec.name)
            if not await _call(begin):
                raise ConfigurationError(f"run {run_id} already exists in this store: "
                                         "resume it with machine.resume(run_id, store=...), "
                                         "or start with another run_id")
            run.enter(self.spec.initial_state)
            run.on_end = owner.record_end
            async with owner.holding():
                return await run.go()
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

        A run that stopped on a guard error (``stop_reason == "guard_error"``) may be
        resumed with a fixed machine file (another spec digest): the run goes on from its
        latest checkpoint with the new file, the journaled summons replayed (a summons the
        fix changed is a :class:`~foreperson.journal.JournalDivergence`), and the new
        digest is journaled, so later resumes need the fixed file.

        Args:
            run_id: the run.
            store: the journal the run was started with.
            agents: as :meth:`run`, for the summons not journaled yet.
            summoner: as :meth:`run`, for the summons not journaled yet.

        Returns:
            The result, as :meth:`run`.

        Raises:
            ConfigurationError: no such run in ``store``; or it was started with another
                version of the machine (its spec digest differs) and did not stop on a
                guard error; or the fixed file lacks the state or a field the run's
                checkpoint holds.
            JournalDivergence: a journaled summons does not match what the run asks now.
            UnknownStepVersion: the journal was written by a newer foreperson.
            As :meth:`run`.
        """
        steps = await _call(store.list_steps, run_id)
        by_key = {s.key: s for s in steps}
        start = by_key.get("start")
        if start is None or start.kind != _KIND_START:
            raise ConfigurationError(f"no run {run_id} of a state machine in this store")
        epoch = sum(1 for s in steps if s.kind == _KIND_RESPEC)
        digest = (by_key[f"respec/{epoch}"].result["digest"] if epoch
                  else start.result.get("digest"))
        fixed = digest != self.spec.digest
        if fixed and f"guard_error/{epoch}" not in by_key:
            raise ConfigurationError(
                f"run {run_id} was started by another version of machine "
                f"{start.result.get('machine')!r} (spec digest "
                f"{str(digest)[:12]}, this file {self.spec.digest[:12]}): "
                "resume it with the same file, or start a new run")
        if fixed:
            self._fits(run_id, by_key[f"guard_error/{epoch}"].result["state"], {})
        end = by_key.get("end")
        if end is not None:
            return MachineResult.from_json(end.result)
        owner = RunOwner(store, run_id, self.spec.name)
        await _call(owner.take, start.result["request"])     # RunBusy: another drives it
        async with owner.holding(), self._summons(agents, summoner, store, run_id) as live:
            return await self._continue(live, owner, store, run_id, start, steps,
                                        epoch + 1 if fixed else epoch)

    async def _continue(self, summoner: Summoner, owner: RunOwner, store: Journal,
                        run_id: str, start: Step, steps: list[Step],
                        epoch: int) -> MachineResult:
        run = _Run(self.spec, self._finite, self.clock, summoner, store, run_id,
                   start.result["request"])
        run.epoch = epoch
        run.recorded = {s.key: s for s in steps if s.kind == _KIND_SUMMONS}
        checkpoints = [s.result for s in steps if s.kind == _KIND_CHECKPOINT]
        if checkpoints:
            self._fits(run_id, checkpoints[-1]["state"], checkpoints[-1]["context"])
            run.restore(checkpoints)
        else:
            self._fits(run_id, self.spec.initial_state, start.result["context"])
            run.context = _own(start.result["context"])
            run.enter(self.spec.initial_state)
        for name, spec in self.spec.fields.items():     # a field the fixed file added
            run.context.setdefault(name, spec.empty())
        key = f"respec/{epoch}"
        if epoch and key not in {s.key for s in steps}:
            await _call(store.put_step, Step(run_id, key, _KIND_RESPEC,
                                             request_digest(self.spec.digest),
                                             {"digest": self.spec.digest}))
        run.on_end = owner.record_end
        return await run.go()

    def _fits(self, run_id: str, state: str, context: Mapping[str, Any]) -> None:
        """Refuse to continue a run whose checkpoint this file cannot hold (a machine file
        fixed after a guard error that renamed a state or a field).

        Raises:
            ConfigurationError: the state or a field of the checkpoint is not in the spec.
        """
        if state not in self.spec.states:
            raise ConfigurationError(f"run {run_id} is parked in state {state!r}, which this "
                                     "machine file does not have: keep the state to resume")
        extra = sorted(set(context) - set(self.spec.fields))
        if extra:
            raise ConfigurationError(f"run {run_id} holds context field(s) "
                                     f"{', '.join(extra)}, which this machine file does not "
                                     "declare: keep them to resume")

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
