"""The ``Team`` facade: one constructor per team shape, each returning an
:class:`~foreperson.agents.Agent` whose architecture is that shape (seed 001: "the two
forms are interchangeable"), plus conversation threads and a Mermaid drawing."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from ..agents import Agent, Guards, RunResult, Tool
from ..errors import ConfigurationError
from ..models import (
    Model,
    ModelSettings,
)
from ..work import TaskStore
from ._function import NoModel
from ._mermaid import mermaid
from ._records import TeamResult
from ._router import Decide, Finalize, Router
from ._shapes import Parallel, Pipeline
from ._supervisor import TeamSupervisor

__all__ = ["Team"]

OutputT = TypeVar("OutputT")

_SUPERVISOR_OPTIONS = frozenset({
    "allow_spawn", "max_spawned", "spawn_template", "max_specialist_calls",
    "max_calls_per_worker", "max_fan_out", "max_turns", "min_delegations", "context",
    "context_chars", "store", "max_attempts", "retry_backoff_s", "worker_timeout_s",
    "stale_after", "lease_s", "recursion_limit"})


class Team(Agent[OutputT, TeamResult[OutputT]]):
    """A team of agents that is itself an agent: it runs with ``run`` / ``run_sync`` /
    ``stream`` and can be a worker of another team.

    Build one with :meth:`supervisor` (a model delegating through tools, seed 001),
    :meth:`router` (a model returning a typed :class:`~foreperson.teams.RouteDecision`,
    seed 004), :meth:`pipeline` (a fixed sequence) or :meth:`parallel` (a fan-out and a
    merge). ``Team.supervisor(workers=..., instructions=..., model=...)`` is exactly
    ``Agent(instructions, model=..., architecture=TeamSupervisor(workers=...))``; a Team
    adds only its result type (:meth:`shape_result`: every entry point returns a
    :class:`~foreperson.teams.TeamResult`) and :meth:`mermaid`. Every follow-up on a
    conversation :class:`~foreperson.agents.Thread` starts at the supervisor again.

    Example::

        from foreperson import Agent, Team

        researcher = Agent("Find sources, summarise key claims.", model="gpt-4o")
        writer = Agent("Draft the article.", model="gpt-4o")
        team = Team.supervisor(workers={"researcher": researcher, "writer": writer},
                               instructions="Research first, then write.", model="gpt-4o")
        result = team.run_sync("Write about agent harnesses.")
        print(result.text, result.stop_reason, result.route_log)

    Runs return a :class:`~foreperson.teams.TeamResult`.
    """

    # --- the four shapes ----------------------------------------------------------------

    @classmethod
    def supervisor(
        cls,
        workers: Mapping[str, Agent[Any]],
        *,
        instructions: str,
        model: Model | str,
        name: str = "supervisor",
        tools: Iterable[Tool | Any] = (),
        output_type: type[OutputT] | None = None,
        guards: Guards | None = None,
        settings: ModelSettings | None = None,
        **options: Any,
    ) -> Team[OutputT]:
        """A manager model that delegates to workers through tools (seed 001).

        Args:
            workers: name -> worker agent (a team is an agent).
            instructions: the manager's system prompt.
            model: the manager's model.
            name: the team's name (default ``"supervisor"``).
            tools: the manager's own tools, besides the team tools.
            output_type: a pydantic model the final answer must match (None: text).
            guards: the manager's guards (its ``Limits`` bound its own run).
            settings: the manager's sampling settings.
            **options: :class:`~foreperson.teams.TeamSupervisor`'s options (``allow_spawn``,
                ``max_spawned``, ``spawn_template``, ``max_specialist_calls``,
                ``max_calls_per_worker``, ``max_fan_out``, ``max_turns``,
                ``min_delegations``, ``context``, ``store``, ...).

        Returns:
            The team.

        Raises:
            ConfigurationError: an unknown option, a bad roster or option.
        """
        unknown = set(options) - _SUPERVISOR_OPTIONS
        if unknown:
            raise ConfigurationError(
                f"Team.supervisor got unknown options {sorted(unknown)}; it takes "
                f"{sorted(_SUPERVISOR_OPTIONS)}")
        return cls(instructions, model=model, tools=tools, output_type=output_type,
                   name=name, guards=guards, settings=settings,
                   architecture=TeamSupervisor(workers, **options))

    @classmethod
    def router(
        cls,
        workers: Mapping[str, Agent[Any]],
        *,
        model: Model | str | None = None,
        instructions: str = "",
        decide: Decide | None = None,
        finalize: Finalize | None = None,
        name: str = "router",
        max_specialist_calls: int | None = 6,
        max_turns: int | None = None,
        min_delegations: int = 0,
        store: TaskStore | None = None,
        guards: Guards | None = None,
        settings: ModelSettings | None = None,
        **options: Any,
    ) -> Team[Any]:
        """A typed router (seed 004): after each worker, the model returns a
        ``RouteDecision``; the counter is read first.

        Args:
            workers: name -> worker agent.
            model: the router's model (not needed with ``decide``).
            instructions: what the router is for (default: route until every part of
                the request is answered); the roster and the decision format are added.
            decide: a routing rule instead of a model.
            finalize: the answer on FINISH (default: the last worker output).
            name: the team's name (default ``"router"``).
            max_specialist_calls: worker runs per run (default 6).
            max_turns: decisions per run (default None).
            min_delegations: worker runs before FINISH is followed (default 0).
            store: where delegations are recorded.
            guards: the router's guards.
            settings: the router's sampling settings.
            **options: ``max_attempts``, ``retry_backoff_s``, ``worker_timeout_s``,
                ``stale_after``, ``recursion_limit`` (see :class:`~foreperson.teams.Router`).

        Returns:
            The team.

        Raises:
            ConfigurationError: neither a model nor a rule, a bad roster or option.
        """
        if model is None and decide is None:
            raise ConfigurationError(
                f"Team.router({name!r}): give it a model (it returns a RouteDecision) or a "
                "routing rule (decide=)")
        architecture = Router(workers, max_specialist_calls=max_specialist_calls,
                              max_turns=max_turns, min_delegations=min_delegations,
                              decide=decide, finalize=finalize, store=store, **options)
        return cls(instructions, model=model if model is not None else NoModel(name),
                   name=name, guards=guards, settings=settings, architecture=architecture)

    @classmethod
    def pipeline(cls, agents: Sequence[Agent[Any]], *, name: str = "pipeline",
                 store: TaskStore | None = None, **options: Any) -> Team[Any]:
        """A fixed sequence: each agent once, in order, on the conversation so far; no
        routing calls.

        Args:
            agents: the stages, in order (their names must differ).
            name: the team's name (default ``"pipeline"``).
            store: where the stages are recorded.
            **options: ``max_attempts``, ``retry_backoff_s``, ``worker_timeout_s``,
                ``stale_after`` (see :class:`~foreperson.teams.Pipeline`).

        Returns:
            The team.

        Raises:
            ConfigurationError: no stages, or two with one name.
        """
        return cls("", model=NoModel(name), name=name,
                   architecture=Pipeline(agents, store=store, **options))

    @classmethod
    def parallel(cls, agents: Sequence[Agent[Any]], *, merge: Agent[Any] | None = None,
                 name: str = "parallel", store: TaskStore | None = None,
                 **options: Any) -> Team[Any]:
        """A fan-out: every agent at once on the request, then ``merge`` answers from
        their outputs.

        Args:
            agents: the branches (their names must differ).
            merge: the merging agent (None: the outputs, each under its name).
            name: the team's name (default ``"parallel"``).
            store: where the branches are recorded.
            **options: as :meth:`pipeline`.

        Returns:
            The team.

        Raises:
            ConfigurationError: no branches, or two agents with one name.
        """
        return cls("", model=NoModel(name), name=name,
                   architecture=Parallel(agents, merge=merge, store=store, **options))

    # --- runs with threads ----------------------------------------------------------------

    def shape_result(self, result: RunResult[Any]) -> TeamResult[Any]:
        """A team run's result as a :class:`~foreperson.teams.TeamResult` (its route
        log, delegations and counters), so ``run``, ``run_sync``, ``stream``, ``resume``
        and ``resume_sync`` return one.

        Args:
            result: what the run returned.

        Returns:
            The team result.
        """
        return _team_result(result)

    # --- drawing --------------------------------------------------------------------------

    def mermaid(self) -> str:
        """The team's roster and nesting as a Mermaid flowchart (see
        :func:`~foreperson.teams.mermaid`)."""
        return mermaid(self)


def _team_result(result: RunResult[Any]) -> TeamResult[Any]:
    if isinstance(result, TeamResult):
        return result
    return TeamResult.from_run(result)
