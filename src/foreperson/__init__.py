"""foreperson: the supervisor / worker pattern with durable task records.

The front door holds what a quickstart needs; everything else lives in subpackages.
"""

from .errors import ForepersonError, GiveUp, InvalidPlan, Retry
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
    "App",
    "ForepersonError",
    "GiveUp",
    "InvalidPlan",
    "MemoryStore",
    "Retry",
    "SqliteStore",
    "Status",
    "Supervisor",
    "Task",
    "TaskStore",
    "Worker",
    "current_task",
]
__version__ = "0.1.0"
