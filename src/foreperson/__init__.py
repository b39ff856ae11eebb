"""foreperson: the supervisor / worker pattern with durable task records.

The front door holds what a quickstart needs; everything else lives in subpackages.
``foreperson.Supervisor`` is the work layer's (tasks to workers); the agent-team
architecture of seed 001 is :class:`foreperson.teams.TeamSupervisor`, built by
``Team.supervisor``. The durable runtimes of seed 001 (``InMemoryRuntime``,
``SqliteRuntime``, ``PostgresRuntime``) come from :mod:`foreperson.runtime`.

A docstring that says a rule comes from "seed 000", "001", "003" or "004" states the rule
and names the specification it follows, summarised in docs/specifications.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from .agents import Agent, Guards, Limits, tool
    from .errors import ForepersonError, GiveUp, InvalidPlan, MachineSpecError, Retry
    from .fsm import Machine
    from .runtime import InMemoryRuntime, PostgresRuntime, SqliteRuntime
    from .teams import Team
    from .work import (
        App,
        MemoryStore,
        SqliteStore,
        Status,
        Supervisor,
        Task,
        TaskStore,
        Worker,
        current_task,
    )

__getattr__, __dir__ = _lazy_exports(__name__, globals(), {
    ".agents": ("Agent", "Guards", "Limits", "tool"),
    ".errors": ("ForepersonError", "GiveUp", "InvalidPlan", "MachineSpecError", "Retry"),
    ".fsm": ("Machine",),
    ".runtime": ("InMemoryRuntime", "PostgresRuntime", "SqliteRuntime"),
    ".teams": ("Team",),
    ".work": ("App", "MemoryStore", "SqliteStore", "Status", "Supervisor", "Task", "TaskStore",
              "Worker", "current_task"),
})

__all__ = [
    "Agent",
    "App",
    "ForepersonError",
    "GiveUp",
    "Guards",
    "InMemoryRuntime",
    "InvalidPlan",
    "Limits",
    "Machine",
    "MachineSpecError",
    "MemoryStore",
    "PostgresRuntime",
    "Retry",
    "SqliteRuntime",
    "SqliteStore",
    "Status",
    "Supervisor",
    "Task",
    "TaskStore",
    "Team",
    "Worker",
    "current_task",
    "tool",
]
__version__ = "0.1.0"
