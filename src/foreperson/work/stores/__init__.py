"""Task stores: in-memory, SQLite (the embedded default) and PostgreSQL.

``PostgresStore`` is resolved on first use (``from foreperson.work.stores import
PostgresStore``), so importing foreperson never imports psycopg; it needs
``pip install 'foreperson[postgres]'``.
"""

from typing import Any as _Any

from .memory import MemoryStore
from .sqlite import SqliteStore

__all__ = ["MemoryStore", "SqliteStore"]


def __getattr__(name: str) -> _Any:
    if name == "PostgresStore":
        from .postgres import PostgresStore
        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
