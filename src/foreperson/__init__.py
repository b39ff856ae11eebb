"""foreperson: the supervisor / worker pattern with durable task records.

The front door holds what a quickstart needs; everything else lives in subpackages.
"""

from .errors import ForepersonError, GiveUp, InvalidPlan, Retry
from .work import MemoryStore, SqliteStore, Status, Task, TaskStore

__all__ = [
    "ForepersonError",
    "GiveUp",
    "InvalidPlan",
    "MemoryStore",
    "Retry",
    "SqliteStore",
    "Status",
    "Task",
    "TaskStore",
]
__version__ = "0.1.0"
