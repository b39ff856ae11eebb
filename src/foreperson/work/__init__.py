"""The work layer: task records, stores, the supervisor and workers (seed 000)."""

from .retry import backoff_seconds, is_retryable
from .store import StoreStats, TaskStore
from .stores import MemoryStore, SqliteStore
from .task import Status, Task

__all__ = [
    "MemoryStore",
    "SqliteStore",
    "Status",
    "StoreStats",
    "Task",
    "TaskStore",
    "backoff_seconds",
    "is_retryable",
]
