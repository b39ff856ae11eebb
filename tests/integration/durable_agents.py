"""The agents and teams of the durable-run process tests (test_durable_sigkill.py), built
the same way in the process that is killed and in the one that resumes: function models
(deterministic replies from the conversation, every call recorded) and a side-effect tool
that appends a line to a file per real call.

A model function can be given a ``block`` coroutine: the killed process uses it to say
where it is (a line on stdout) and wait there until SIGKILL.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from foreperson import Agent, Team
from foreperson.agents import Guards, ask_later, tool
from foreperson.models import ModelResponse, ToolCall, ToolReturn
from foreperson.runtime import PostgresRuntime, Runtime, SqliteRuntime
from foreperson.testing import FunctionModel

Block = Callable[[], Awaitable[None]] | None


def open_runtime(spec: str) -> Runtime:
    """``sqlite:PATH`` or ``postgres:DSN|SCHEMA``."""
    kind, _, where = spec.partition(":")
    if kind == "sqlite":
        return SqliteRuntime(where)
    dsn, _, schema = where.partition("|")
    return PostgresRuntime(dsn, schema=schema, pool_size=4)


def cli_store_args(spec: str) -> list[str]:
    """``--db PATH`` or ``--dsn DSN --schema SCHEMA`` for the same store."""
    kind, _, where = spec.partition(":")
    if kind == "sqlite":
        return ["--db", where]
    dsn, _, schema = where.partition("|")
    return ["--dsn", dsn, "--schema", schema]


def counter(path: Path) -> Any:
    """A side-effect tool: one line in ``path`` per real call."""

    def count(who: str) -> str:
        """Count one unit of work.

        Args:
            who: who did it.
        """
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(who + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        return f"counted {who}"

    return tool(count, name="count")


def counted(path: Path) -> list[str]:
    """The lines the side-effect tool wrote."""
    return path.read_text().split() if path.exists() else []


def _last_tool_result(messages: Any) -> str | None:
    last = messages[-1]
    return last.content if isinstance(last, ToolReturn) else None


def _delegate(worker: str, instructions: str) -> ToolCall:
    return ToolCall("delegate", {"worker": worker, "instructions": instructions})


def counting_worker(name: str, path: Path, block: Block = None) -> Agent:
    """Counts once (the tool), then answers ``"<name> done"`` (after ``block``)."""

    async def reply(messages: Any, params: Any) -> Any:
        if _last_tool_result(messages) is None:
            return ToolCall("count", {"who": name})
        if block is not None:
            await block()
        return f"{name} done"

    return Agent(f"You are {name}.", model=FunctionModel(reply, name=name), name=name,
                 tools=[counter(path)])


def parallel_team(workdir: Path, block_slow: Block = None) -> Team:
    """A lead that delegates to ``fast`` and ``slow`` in one turn, then answers."""

    def lead(messages: Any, params: Any) -> Any:
        if _last_tool_result(messages) is None:
            return [_delegate("fast", "part a"), _delegate("slow", "part b")]
        return "both done"

    workers = {"fast": counting_worker("fast", workdir / "count.txt"),
               "slow": counting_worker("slow", workdir / "count.txt", block_slow)}
    return Team.supervisor(workers=workers, instructions="Lead the work.",
                           model=FunctionModel(lead, name="lead"), name="lead")


def routed_team(workdir: Path, order: tuple[str, ...] = ("fast", "slow"),
                block_slow: Block = None) -> Team:
    """A router whose rule sends the request to the workers in ``order``, one after the
    other, then finishes (no model: its decisions are code)."""

    def rule(state: Any) -> str:
        calls = state.specialist_calls
        return order[calls] if calls < len(order) else "FINISH"

    workers = {"fast": counting_worker("fast", workdir / "count.txt"),
               "slow": counting_worker("slow", workdir / "count.txt", block_slow),
               "audit": counting_worker("audit", workdir / "count.txt")}
    return Team.router(workers=workers, decide=rule, name="desk")


def spawn_team(block: Block = None) -> Team:
    """A lead that spawns a poet, then (after ``block``) delegates to it and answers."""

    async def lead(messages: Any, params: Any) -> Any:
        result = _last_tool_result(messages)
        if result is None:
            return ToolCall("spawn_worker", {"role": "poet",
                                             "instructions": "Write short poems."})
        if result.startswith("spawned worker"):
            if block is not None:
                await block()
            return _delegate("poet", "a poem about rain")
        return f"done: {result}"

    def poet(messages: Any, params: Any) -> Any:
        return "rain taps the roof"

    template = Agent("template", model=FunctionModel(poet, name="poet"), name="template")
    return Team.supervisor(workers={}, instructions="Spawn what you need.",
                           model=FunctionModel(lead, name="lead"), name="lead",
                           allow_spawn=True, spawn_template=template)


def nested_teams(workdir: Path, block_inner: Block = None) -> Team:
    """An office team whose worker is a desk team whose worker is an analyst (counts,
    then answers); the desk's second model call runs ``block_inner`` first."""

    async def desk_lead(messages: Any, params: Any) -> Any:
        result = _last_tool_result(messages)
        if result is None:
            return _delegate("analyst", "analyse the ledger")
        if block_inner is not None:
            await block_inner()
        return f"desk: {result}"

    def office_lead(messages: Any, params: Any) -> Any:
        result = _last_tool_result(messages)
        if result is None:
            return _delegate("desk", "handle the ledger")
        return f"office: {result}"

    analyst = counting_worker("analyst", workdir / "count.txt")
    desk = Team.supervisor(workers={"analyst": analyst}, instructions="Run the desk.",
                           model=FunctionModel(desk_lead, name="desk"), name="desk")
    return Team.supervisor(workers={"desk": desk}, instructions="Run the office.",
                           model=FunctionModel(office_lead, name="office"), name="office")


def clerk(workdir: Path, *, answer: str = "done") -> Agent:
    """Asks to refund A-7 (a side effect that needs a human's approval), then answers."""

    def reply(messages: Any, params: Any) -> Any:
        result = _last_tool_result(messages)
        if result is None:
            return ToolCall("count", {"who": "refund-A-7"})
        return f"{answer}: {result}"

    return Agent("Handle refunds.", model=FunctionModel(reply, name="clerk"), name="clerk",
                 tools=[counter(workdir / "count.txt")],
                 guards=Guards(approval=ask_later, approval_required={"count"}))


def model_calls(agent: Agent) -> int:
    """Calls its (function) model received."""
    return len(agent.model.calls)  # type: ignore[attr-defined]


def worker(team: Team, name: str) -> Agent:
    """A worker of a supervisor team's roster."""
    return team.architecture.roster[name]  # type: ignore[attr-defined]


def replies(agent: Agent) -> list[ModelResponse]:
    """What its model answered (for debugging a failure)."""
    return [c for c in agent.model.calls]  # type: ignore[attr-defined]
