"""Summoning an agent for a state: the one seam between the machine and whoever runs
the agent.

Seed 003: entering a state whose requirements are unmet parks the machine and summons
the agent they are required from; the agent contributes values through
``updateContext(field, value)``, and nothing else. A :class:`Summons` is plain JSON
(what the agent is asked, what it may write), and so is its :class:`SummonResult` (the
writes it made), so a summons can run anywhere: in this process
(:class:`AgentSummoner`, the default), or as a task on a worker of another machine.
:class:`ContextWriter` is the ``updateContext`` logic on both sides.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from ..agents import A2A_SUMMONS_KEY, Agent, RemoteA2A, RunContext, Tool
from ..errors import ConfigurationError, RunError
from ..models import Usage
from ._fields import FieldSpec, render_value

__all__ = [
    "UPDATE_CONTEXT",
    "AgentSummoner",
    "ContextWriter",
    "SummonResult",
    "Summoner",
    "Summons",
]

UPDATE_CONTEXT = "updateContext"
"""The name of the tool agents write the context with (seed 003)."""


@dataclass(frozen=True)
class Summons:
    """What the machine asks of one agent in one state.

    Attributes:
        run_id: the machine's run.
        key: the summons' step key, unique in the run and the same on replay
            (``summons/<transitions so far>/<state>/<agent>/<exchange>``).
        machine: the machine's name.
        state: the state the machine is parked in.
        agent: the agent summoned.
        objective: the state's description, rendered from the context in full.
        context: the CONTEXT block: every set field, its value as text capped at 300
            characters (seed 003).
        request: the request the run was started with.
        writable: the fields the agent may write here: those the state requires from it.
        missing: of those, the ones still unset (what the machine waits for).
        exchange: 1 for the agent's first summons in this visit of the state, 2 when it
            is asked again (it did not write everything), ...: the summons' ordinal (the
            last part of its key), not the number of exchanges used (one exchange is one
            model call, see ``max_model_calls``).
        max_model_calls: the most model calls the summoned agent may make in this
            summons (its run's turn budget), or None for the agent's own
            ``Limits.max_turns``. Seed 003's caps count exchanges, and one exchange is
            one model call of the agent (a summons answered without one counts as one):
            the machine sets it to what is left of ``maxExchangesPerAgentPerStage`` for
            this agent and of ``maxExchangesPerStage`` in this visit, so an agent that
            never writes what it is asked costs at most the cap's worth of model calls.
            :class:`AgentSummoner` runs the agent with ``max_turns`` lowered to it (never
            raised); a summoner of your own should honour it too. Default None.

    Raises:
        ValueError: ``max_model_calls`` is below 1.
    """

    run_id: str
    key: str
    machine: str
    state: str
    agent: str
    objective: str
    context: Mapping[str, str]
    request: str
    writable: tuple[FieldSpec, ...]
    missing: tuple[str, ...]
    exchange: int = 1
    max_model_calls: int | None = None

    def __post_init__(self) -> None:
        if self.max_model_calls is not None and self.max_model_calls < 1:
            raise ValueError(f"Summons.max_model_calls must be >= 1 (a summons needs one "
                             f"model call), got {self.max_model_calls}; None: no budget")

    def prompt(self) -> str:
        """The message the agent receives.

        Seed 003: the agent reads the CONTEXT block (set fields, values capped at 300
        characters) and its state's objective, never another agent's transcript. Only
        the CONTEXT block is capped: the objective is the state's description rendered
        in full, so it grows with a field it templates (seed 003's dispatch templates
        every note: its prompt grows by each report, 1,896 to 5,952 characters over 5
        hops of 1,000-character findings, while the CONTEXT block stays at 377).

        Returns:
            The objective, the request, the CONTEXT block, and the fields it may write
            with ``updateContext`` (the allowed values of each), as text.
        """
        lines = [f'You act as {self.agent} in state "{self.state}" of the state machine '
                 f'"{self.machine}".', "", "OBJECTIVE:", self.objective.strip() or "(none)",
                 "", "REQUEST:", self.request, "", "CONTEXT:"]
        lines += [f"- {name}: {value}" for name, value in self.context.items()] or \
            ["(nothing set yet)"]
        allowed = "; ".join(f"{f.name} ({f.allowed()})" for f in self.writable)
        lines += ["", f"Write with the {UPDATE_CONTEXT}(field, value) tool, one call per "
                      f"field. You may write: {allowed}.",
                  f"Still to write: {', '.join(self.missing)}." if self.missing else ""]
        if self.exchange > 1:
            lines.append(f"You were asked before and did not write {', '.join(self.missing)}"
                         f": call {UPDATE_CONTEXT} for it now.")
        return "\n".join(line for line in lines).rstrip() + "\n"

    def to_json(self) -> dict[str, Any]:
        """The summons as JSON, e.g. a task payload for a summons run elsewhere.

        Returns:
            A JSON object with every attribute (``writable`` as field specs);
            ``max_model_calls`` only when it is set, so a summons without a budget reads
            as it did before there was one.
        """
        data = self.digest_json()
        if self.max_model_calls is not None:
            data["max_model_calls"] = self.max_model_calls
        return data

    def digest_json(self) -> dict[str, Any]:
        """What the summons asks, for its journal digest: :meth:`to_json` without
        ``max_model_calls``.

        The budget is how the question is run, not the question: the machine derives it
        from the policy and the journaled results before it, so leaving it out keeps a
        summons journaled before budgets existed replayable.

        Returns:
            A JSON object.
        """
        return {"run_id": self.run_id, "key": self.key, "machine": self.machine,
                "state": self.state, "agent": self.agent, "objective": self.objective,
                "context": dict(self.context), "request": self.request,
                "writable": [f.to_json() for f in self.writable],
                "missing": list(self.missing), "exchange": self.exchange}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Summons:
        """Read a summons written by :meth:`to_json`.

        Args:
            data: the JSON object.

        Returns:
            The summons.

        Raises:
            KeyError, TypeError: ``data`` is not a summons.
            ValueError: its ``max_model_calls`` is below 1.
        """
        values = dict(data)
        values["writable"] = tuple(FieldSpec.from_json(f) for f in values["writable"])
        values["missing"] = tuple(values["missing"])
        values["context"] = dict(values["context"])
        return cls(**values)


@dataclass(frozen=True)
class SummonResult:
    """What a summoned agent did.

    Attributes:
        writes: ``(field, value)`` in the order written, values already coerced (a list
            field's value is the list of items to append).
        text: the agent's final text, or None.
        usage: model calls, tokens and tool calls of the summons.
        stop_reason: why the agent's run ended (``"completed"``, ``"max_turns"`` ...), or
            None when there was no agent run.
    """

    writes: tuple[tuple[str, Any], ...] = ()
    text: str | None = None
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The result as JSON (a task result, a journal step).

        Returns:
            ``{"writes": [[field, value], ...], "text", "usage", "stop_reason"}``.
        """
        return {"writes": [[name, value] for name, value in self.writes], "text": self.text,
                "usage": usage_json(self.usage), "stop_reason": self.stop_reason}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SummonResult:
        """Read a result written by :meth:`to_json`.

        Args:
            data: the JSON object (missing keys mean no writes, no text, no usage).

        Returns:
            The result.
        """
        return cls(tuple((name, value) for name, value in data.get("writes", ())),
                   data.get("text"), Usage(**data.get("usage", {})), data.get("stop_reason"))


@runtime_checkable
class Summoner(Protocol):
    """Runs the agent of a :class:`Summons` and reports its writes.

    The machine calls :meth:`summon` and awaits it; the default is
    :class:`AgentSummoner` (the agent runs in this process). An implementation that
    runs the summons elsewhere (a work-layer task, a remote worker) sends
    ``summons.to_json()`` and returns ``SummonResult.from_json(...)``; it should check
    the writes with :class:`ContextWriter` where the agent runs, so a wrong value goes
    back to the agent, not to the machine, and should make at most
    ``summons.max_model_calls`` model calls when it is set (the stage's caps count them).
    """

    async def summon(self, summons: Summons) -> SummonResult:
        """Run the agent for ``summons``.

        Args:
            summons: who, where, and what it may write.

        Returns:
            The writes it made.

        Raises:
            Exception: the agent failed for good (a model error): the run stops with it
                and may be resumed from its journal.
        """
        ...


class ContextWriter:
    """``updateContext(field, value)`` for one summons: coerces each value to its field's
    type and keeps the writes; refuses, with a message saying what is allowed, a field
    the agent may not write here or a value that does not fit.

    Args:
        writable: the fields the agent may write (``Summons.writable``).
    """

    def __init__(self, writable: Sequence[FieldSpec]) -> None:
        self._fields = {f.name: f for f in writable}
        self._writes: list[tuple[str, Any]] = []

    @property
    def writes(self) -> tuple[tuple[str, Any], ...]:
        """The accepted writes, in order."""
        return tuple(self._writes)

    def write(self, field: str, value: Any) -> str:
        """Accept one write.

        Args:
            field: the field.
            value: its value; for a list field, an item (or a list of items) to append.

        Returns:
            A confirmation for the agent (``"route = billing"``).

        Raises:
            ValueError: the field is not writable here, or the value does not fit; the
                message lists what is allowed, for the agent to correct itself.
        """
        spec = self._fields.get(field)
        if spec is None:
            allowed = "; ".join(f"{f.name} ({f.allowed()})" for f in self._fields.values())
            raise ValueError(f"you may not write {field!r} here; you may write: "
                             f"{allowed or 'nothing'}")
        if value is None or value == "" or value == []:
            raise ValueError(f"{field} needs a value: {spec.allowed()}")
        coerced = spec.coerce(value)
        self._writes.append((field, coerced))
        if spec.type == "list":
            return f"appended to {field}: {render_value(coerced)}"
        return f"{field} = {render_value(coerced)}"


class AgentSummoner:
    """The default :class:`Summoner`: each declared agent is an
    :class:`~foreperson.agents.Agent` run in this process, given an ``updateContext``
    tool and the summons' prompt (``Summons.prompt()``).

    The agents are used through their public API only (``clone`` to add the tool,
    ``run``); one agent may serve many summons at once. A summons with a budget
    (``Summons.max_model_calls``) runs a clone of its agent whose ``Limits.max_turns`` is
    the budget, when that is lower than the agent's own (one clone per agent and budget,
    kept); the agent's run then ends with stop reason ``"max_turns"`` once the budget is
    spent.

    Args:
        agents: ``{agent name in the YAML: Agent}``.

    Raises:
        ConfigurationError: an agent already has a tool named ``updateContext``.
    """

    def __init__(self, agents: Mapping[str, Agent[Any]]) -> None:
        self._writers: dict[str, ContextWriter] = {}
        tool = Tool.from_function(self._update_context, name=UPDATE_CONTEXT)
        self._agents: dict[str, Agent[Any]] = {}
        for name, agent in agents.items():
            if UPDATE_CONTEXT in agent.tools:
                raise ConfigurationError(f"agent {name!r} already has a tool named "
                                         f"{UPDATE_CONTEXT!r}; the machine adds its own")
            self._agents[name] = agent.clone(tools=[*agent.tools.values(), tool])
        self._budgeted: dict[tuple[str, int], Agent[Any]] = {}

    async def aclose(self) -> None:
        """Close the connections of the agents' models (each model once); they stay
        usable and reconnect when called again."""
        seen: set[int] = set()
        for agent in self._agents.values():
            if id(agent.model) in seen:
                continue
            seen.add(id(agent.model))
            close = getattr(agent.model, "aclose", None)
            if close is not None:
                await close()

    async def _update_context(self, field: str, value: Any, run: RunContext) -> str:
        """Write one field of the shared context. The fields you may write, and their
        allowed values, are listed in your message.

        Args:
            field: the field's name.
            value: its value (text, a number, true/false, or an object, as the field's
                type says).
        """
        writer = self._writers.get(run.run_id)
        if writer is None:
            raise ValueError("this agent run is not a summons of a state machine")
        return writer.write(field, value)

    async def summon(self, summons: Summons) -> SummonResult:
        """Run the summoned agent on ``summons.prompt()``, with ``updateContext``
        checking each write against ``summons.writable``.

        Args:
            summons: the agent, the state, what it may write.

        Returns:
            Its writes, final text, usage and stop reason (``"max_turns"`` when it spent
            ``summons.max_model_calls``).

        Raises:
            ConfigurationError: no agent of that name was given.
            ModelError, OutputValidationError: the agent's run failed.
        """
        agent = self._agents.get(summons.agent)
        if agent is None:
            raise ConfigurationError(f"no agent {summons.agent!r} was given; pass it in "
                                     f"agents= (given: {sorted(self._agents)})")
        if summons.max_model_calls is not None:
            agent = self._within(summons.agent, agent, summons.max_model_calls)
        if isinstance(agent.architecture, RemoteA2A):
            return await self._summon_remote(agent.architecture, summons)
        writer = ContextWriter(summons.writable)
        run_id = f"{summons.run_id}/{summons.key}"
        self._writers[run_id] = writer
        try:
            result = await agent.run(summons.prompt(), run_id=run_id)
        finally:
            del self._writers[run_id]
        return SummonResult(writer.writes, result.text, result.usage, result.stop_reason)

    async def _summon_remote(self, remote: RemoteA2A, summons: Summons) -> SummonResult:
        """A summons of a remote A2A agent (seed 003's A2A summon): one message whose text
        is the prompt and whose data part is the summons; each write of the answer goes
        through the same :class:`ContextWriter` checks as a local ``updateContext``. A
        refused write is left out (the machine asks again for what is missing)."""
        reply = await remote.send(summons.prompt(), data={A2A_SUMMONS_KEY: summons.to_json()})
        if reply.state not in ("completed", "message"):
            raise RunError(f"A2A agent {summons.agent!r} at {remote.url}: its task ended "
                           f"{reply.state}" + (f": {reply.text}" if reply.text else ""))
        writer = ContextWriter(summons.writable)
        refused: list[str] = []
        for name, value in reply.writes():
            try:
                writer.write(name, value)
            except ValueError as exc:
                refused.append(str(exc))
        text = "\n".join([reply.text, *(f"refused: {r}" for r in refused)]).strip()
        return SummonResult(writer.writes, text or None, Usage(model_calls=1), "completed")

    def _within(self, name: str, agent: Agent[Any], budget: int) -> Agent[Any]:
        """``agent``, or a clone of it whose ``Limits.max_turns`` is ``budget`` when that
        is lower than its own (the budget never raises an agent's cap)."""
        own = agent.guards.limits.max_turns
        if own is not None and own <= budget:
            return agent
        clone = self._budgeted.get((name, budget))
        if clone is None:
            limits = replace(agent.guards.limits, max_turns=budget)
            clone = self._budgeted[(name, budget)] = agent.clone(
                guards=agent.guards.replace(limits=limits))
        return clone


def usage_json(usage: Usage) -> dict[str, int]:
    """``usage`` as JSON: ``model_calls``, ``input_tokens``, ``output_tokens``,
    ``tool_calls``."""
    return {"model_calls": usage.model_calls, "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens, "tool_calls": usage.tool_calls}
