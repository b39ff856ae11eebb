"""Agent workers in other processes (``foreperson worker``): the task functions that run
a team's delegations, so that a supervisor's worker can run on another machine.

A team under a runtime with ``remote_workers`` records each delegation to such a worker
as a task (kind = the worker's name, payload = its instructions and where in the run it
sits) and awaits it. :func:`agent_app` builds the :class:`~foreperson.work.App` a worker
process serves: each task runs the worker nested under the supervisor's run (same step
keys, same journal, in the shared store), so a worker process killed mid-run is
reclaimed after its lease and the next one replays the dead one's finished steps; its
result goes back as the task's result, fenced by the task's lease like any other.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..agents import Agent, RunOptions
from ..agents.steps import JournaledSteps, ParentRun, RunParked, dump_run_result
from ..errors import ConfigurationError, GiveUp
from ..journal import Journal
from ..work import App, Task, TaskStore, current_task
from ..work.process import default_worker_name

__all__ = ["agent_app"]


@dataclass(frozen=True)
class _WorkerHost:
    """The teams layer's view of a worker process's runtime (a worker that is itself a
    team records its own delegations in the shared store, in process)."""

    store: TaskStore
    holder: str
    fresh: bool = False

    def runs_remotely(self, worker: str) -> bool:
        return False


def _named(agent: Agent[Any], name: str) -> Agent[Any]:
    if agent.name == name:
        return agent
    clone = copy.copy(agent)        # a Team stays a Team
    clone.name = name
    return clone


def _run_delegation(name: str, agent: Agent[Any]) -> Any:
    async def run_delegation(task: Task) -> Any:
        payload = task.payload
        store = current_task().store
        if not isinstance(store, Journal):
            raise GiveUp(f"the worker process's store ({type(store).__name__}) keeps no step "
                         "journal: serve agent workers from a SQLite or PostgreSQL store")
        try:
            parent = ParentRun(str(payload["parent_run_id"]), str(payload["delegation"]),
                               int(payload["level"]), str(payload["run_id"]),
                               payload.get("user_id"))
            prompt = str(payload["instructions"])
        except (KeyError, TypeError, ValueError) as exc:
            raise GiveUp(f"task {task.id} is no delegation of a durable team run "
                         f"(its payload lacks {exc})") from None
        host = _WorkerHost(store, f"run:{parent.root_run_id}@{default_worker_name()}")
        options = RunOptions(steps=JournaledSteps(store), parent=parent, runtime=host)
        try:
            result = await agent.run(prompt, options=options)
        except RunParked as parked:
            calls = ", ".join(f"{p.tool} (call {p.call_id})" for p in parked.pending)
            raise GiveUp(f"parked: worker {name!r} waits for a human decision on {calls}; "
                         "the supervisor's run parks, and its resume runs this again") from None
        return dump_run_result(result)

    run_delegation.__name__ = f"delegation_to_{name}"
    return run_delegation


def agent_app(workers: Mapping[str, Agent[Any]], *, app: App | None = None) -> App:
    """An :class:`~foreperson.work.App` whose task functions run team delegations to
    these workers, for ``foreperson worker MODULE:app --dsn ...`` on any machine.

    Example (``myteam/workers.py``)::

        from foreperson import Agent
        from foreperson.runtime import agent_app

        researcher = Agent("Find sources, summarise key claims.", model="gpt-4o")
        app = agent_app({"researcher": researcher})

    and the supervisor's side runs its team with
    ``PostgresRuntime(dsn, remote_workers={"researcher"})``.

    Each task runs its worker nested under the supervisor's run (the delegation's step
    path, the run's user, the shared journal), so its steps replay after a crash of the
    worker process, and returns the worker's run result as JSON. A worker that parks on
    an approval ends its task DEAD with the reason; the supervisor's run then parks too,
    and resuming it after the decision runs the task again, replaying what was done.

    Args:
        workers: the workers by their names in the supervisor's roster (the task
            kinds); an agent named otherwise runs under that name.
        app: an App to add them to (default a new one).

    Returns:
        The App.

    Raises:
        ConfigurationError: a worker that is not an Agent, or a kind the App has.
    """
    target = app if app is not None else App()
    for name, agent in workers.items():
        if not isinstance(agent, Agent):
            raise ConfigurationError(
                f"agent_app: worker {name!r} is {type(agent).__name__}, not an Agent")
        target.task(name)(_run_delegation(name, _named(agent, name)))
    return target
