"""Task stores: in-memory, SQLite (the embedded default) and PostgreSQL."""

from .memory import MemoryStore
from .sqlite import SqliteStore

__all__ = ["MemoryStore", "SqliteStore"]
