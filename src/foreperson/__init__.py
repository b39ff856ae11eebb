"""foreperson: the supervisor / worker pattern with durable task records.

The front door holds what a quickstart needs; everything else lives in subpackages.
"""

from .agents import Agent, Guards, Limits, tool
from .errors import ForepersonError, GiveUp, InvalidPlan, MachineSpecError, Retry
from .fsm import Machine
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

__all__ = [
    "Agent",
    "App",
    "ForepersonError",
    "GiveUp",
    "Guards",
    "InvalidPlan",
    "Limits",
    "Machine",
    "MachineSpecError",
    "MemoryStore",
    "Retry",
    "SqliteStore",
    "Status",
    "Supervisor",
    "Task",
    "TaskStore",
    "Worker",
    "current_task",
    "tool",
]
__version__ = "0.1.0"
