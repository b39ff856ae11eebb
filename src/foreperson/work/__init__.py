"""The work layer: task records, stores, the supervisor and workers (seed 000)."""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from ..retry import backoff_seconds, is_retryable
    from .app import App
    from .handles import TaskHandle
    from .policy import Reason
    from .retention import PruneReport, Retention
    from .store import StoreStats, TaskStore
    from .stores import MemoryStore, SqliteStore
    from .stores.postgres import PostgresStore  # noqa: F401 - not in __all__: needs psycopg
    from .supervisor import RunReport, Supervisor
    from .task import Status, Task
    from .worker import TaskContext, Worker, current_task

# each name is imported on first use: ``foreperson.work.store`` does not pay for the
# supervisor, and ``PostgresStore`` (psycopg: ``pip install 'foreperson[postgres]'``) is
# imported only by a program that uses it
__getattr__, __dir__ = _lazy_exports(__name__, globals(), {
    "..retry": ("backoff_seconds", "is_retryable"),
    ".app": ("App",),
    ".handles": ("TaskHandle",),
    ".policy": ("Reason",),
    ".retention": ("PruneReport", "Retention"),
    ".store": ("StoreStats", "TaskStore"),
    ".stores": ("MemoryStore", "SqliteStore"),
    ".stores.postgres": ("PostgresStore",),
    ".supervisor": ("RunReport", "Supervisor"),
    ".task": ("Status", "Task"),
    ".worker": ("TaskContext", "Worker", "current_task"),
})

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
