"""The interpreter of a state machine: ``_Run``, the mutable state of one run, and the loop
that drives it (entering states, summoning agents, choosing and taking transitions,
journaling summons results and checkpoints, finishing).

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
  one exchange is one model call of a summoned agent (at least one a summons): each
  summons carries what is left of both caps as its turn budget
  (``Summons.max_model_calls``) and is charged the model calls it made, journaled ones
  included on a resume;
* a guard or action that fails on the run's data, or would exceed its evaluation budget
  (:data:`~foreperson.fsm._cel.MAX_EVALUATION_STEPS`), ends the run with stop reason
  ``guard_error`` and the error as its detail (issue 20); with a store the run is not
  ended in the journal (a ``guard_error/<epoch>`` step notes the stop), so once the
  machine file is fixed :meth:`~foreperson.fsm.Machine.resume` continues it with the
  fixed file, replaying what the agents answered;
* with a store (any :class:`~foreperson.journal.Journal`), every summons' result is
  journaled before the next summons is sent (and before the run returns or raises), and
  a checkpoint is written every ``checkpointEvery`` transitions, so
  :meth:`~foreperson.fsm.Machine.resume` rebuilds the run from the latest checkpoint
  plus the summons journaled after it, and no agent is asked twice.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from functools import partial
from typing import Any, Literal

import anyio
import anyio.to_thread

from ..clock import Clock
from ..errors import GuardError, RunError
from ..journal import Journal, JournalDivergence, Step, request_digest
from ..models import Usage
from ._cel import CONTEXT
from ._fields import FieldSpec, context_block, is_set
from ._result import MachineResult, StopReason, Transition, Write
from ._spec import Action, Edge, MachineSpec, StateSpec
from ._summon import Summoner, SummonResult, Summons, usage_json

__all__ = ["CHECKPOINT_FORMAT"]

CHECKPOINT_FORMAT = 1
"""The format of the checkpoints and run records this foreperson writes."""

_KIND_START = "fsm.start"
_KIND_SUMMONS = "fsm.summons"
_KIND_CHECKPOINT = "fsm.checkpoint"
_KIND_END = "fsm.end"
_KIND_GUARD_ERROR = "fsm.guard_error"
_KIND_RESPEC = "fsm.respec"


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


def batch_of(store: Any) -> AbstractContextManager[Any]:
    """One transaction for the writes inside, where the journal can group them (a task
    store's ``batch()``), else each write on its own."""
    batch = getattr(store, "batch", None)
    return batch() if callable(batch) else nullcontext()


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

    def __init__(self, spec: MachineSpec, finite: frozenset[str], clock: Clock,
                 summoner: Summoner, store: Journal | None, run_id: str, request: str) -> None:
        self.spec = spec
        self.spec_finite = finite           # states whose guards read enums and booleans only
        self.clock = clock
        self.summoner = summoner
        self.store = store
        # a blocking call made in the journal's last write (the run's record says how it
        # ended in the same transaction as its end step)
        self.on_end: Callable[[MachineResult], None] | None = None
        self.run_id = run_id
        self.request = request
        self.epoch = 0          # times the run was resumed with a fixed machine file
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
        self._exchanges: dict[str, int] = {}     # model calls per agent in this visit
        self._asked: dict[str, int] = {}         # summons per agent in this visit (keys)
        self._entered_at = 0.0
        self._entered_wall = 0.0
        self._replayed = False

    # -- state -------------------------------------------------------------------------------
    def enter(self, name: str) -> None:
        self.state = self.spec.states[name]
        self._writes = []
        self._summoned = []
        self._exchanges = {}
        self._asked = {}
        self._entered_at = time.perf_counter()
        self._entered_wall = self.clock.now()
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
        except GuardError as error:
            return await self._halt(error)
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
            await self._flush(then=None if self.on_end is None else partial(self.on_end,
                                                                            result))
        return result

    async def _halt(self, error: GuardError) -> MachineResult:
        """End the run on a failed guard or action: a result with stop reason
        ``guard_error``; with a store, the run stays resumable (no end step) and a
        ``guard_error/<epoch>`` step lets a resume use a fixed machine file."""
        detail = str(error)
        if self.store is not None:
            detail += (f"; fix the machine file, then resume the run (machine.resume("
                       f"{self.run_id!r}, store=...)): what the agents wrote is kept")
        result = MachineResult(self.run_id, self.spec.name, self.request, _own(self.context),
                               self.state.name, "guard_error", detail, tuple(self.trace),
                               self.usage)
        if self.store is not None:
            self._pending.append(Step(
                self.run_id, f"guard_error/{self.epoch}", _KIND_GUARD_ERROR,
                request_digest([self.spec.digest, self.state.name]),
                {"digest": self.spec.digest, "state": self.state.name, "detail": detail}))
            await self._flush(then=None if self.on_end is None else partial(self.on_end,
                                                                            result))
        return result

    async def _flush(self, then: Callable[[], None] | None = None) -> None:
        """Write the pending steps (summons results, a checkpoint, the end) in one trip
        to a worker thread and one transaction, then ``then`` (in the same).

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
            if len(steps) == 1 and then is None:        # the common case: one summons
                return [store.put_step(steps[0])]
            with batch_of(store):
                written = [store.put_step(step) for step in steps]
                if then is not None:
                    then()
            return written

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
            # one exchange is one model call: the summons may spend what is left of both
            # caps, and is charged what it spent (at least one)
            budget = min(policy.max_exchanges_per_agent_per_stage - count,
                         policy.max_exchanges_per_stage - total)
            asked = self._asked[agent] = self._asked.get(agent, 0) + 1
            spent = await self._summon(agent, asked,
                                       tuple(r.field for r in missing if r.agent == agent),
                                       budget)
            self._exchanges[agent] = count + max(1, spent)

    async def _summon(self, agent: str, exchange: int, missing: tuple[str, ...],
                      budget: int) -> int:
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
            writable=writable, missing=missing, exchange=exchange, max_model_calls=budget)
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
        return used.model_calls

    async def _result_of(self, summons: Summons) -> SummonResult:
        if self.store is None:
            return await self.summoner.summon(summons)
        digest = request_digest(summons.digest_json())
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
            if all(g.evaluate(activation, state=state.name, context=self.context) is True
                   for g in edge.guards):
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
            value = action.expression.evaluate(self.activation(), state=self.state.name,
                                               context=self.context)
            try:
                value = (spec.coerce_items(value)[0] if action.kind == "append"
                         else spec.coerce(value, clear=True))
            except ValueError as exc:
                raise GuardError(f"state {self.state.name!r}: {by} action "
                                 f"{action.describe()} gave a value that does not fit: {exc}",
                                 expression=action.expression.source,
                                 state=self.state.name) from None
        self._set(action.field, value, by, action.kind)
