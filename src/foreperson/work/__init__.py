"""The work layer: task records, stores, the supervisor and workers (seed 000)."""

from ..retry import backoff_seconds, is_retryable
from .app import App
from .handles import TaskHandle
from .policy import Reason
from .retention import PruneReport, Retention
from .store import StoreStats, TaskStore
from .stores import MemoryStore, SqliteStore
from .supervisor import RunReport, Supervisor
from .task import Status, Task
from .worker import TaskContext, Worker, current_task


def __getattr__(name: str) -> object:
    """``PostgresStore`` is resolved on first use, so importing foreperson never imports
    psycopg (``pip install 'foreperson[postgres]'``)."""
    if name == "PostgresStore":
        from .stores.postgres import PostgresStore
        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "App",
    "MemoryStore",
    "PruneReport",
    "Retention",
    "SqliteStore",
    "Reason",
    "RunReport",
    "Status",
    "StoreStats",
    "Supervisor",
    "Task",
    "TaskContext",
    "TaskHandle",
    "TaskStore",
    "Worker",
    "backoff_seconds",
    "current_task",
    "is_retryable",
]
