"""Helpers shared by the commands: opening a store from ``--db`` / ``--dsn``, loading
``module:attr``, logging and printing task data."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import logging
import os
import re
import sys
from collections.abc import Callable
from typing import Any

from ..errors import ConfigurationError
from ..errors import redact as redact_secrets
from ..work.store import TaskStore

DB_HELP = "SQLite task database file."
DSN_HELP = "PostgreSQL DSN, e.g. postgresql://user@host/db (workers on many machines)."
SCHEMA_HELP = ("PostgreSQL schema of the job's tasks, as given to `foreperson tickets --schema` "
               "(default: $FOREPERSON_PG_SCHEMA or foreperson).")


class RedactingFormatter(logging.Formatter):
    """A log formatter whose every line, traceback included, passes through
    :func:`foreperson.errors.redact`: a key in an exception's message or a URL's
    password never reaches a log (issue 21 item 6)."""

    def format(self, record: logging.LogRecord) -> str:
        """The record formatted as :class:`logging.Formatter` does, then redacted."""
        return redact_secrets(super().format(record))


def configure_logging(level: str | int = logging.INFO) -> None:
    """Log to stderr as ``time LEVEL logger: message``, redacted, at ``level`` (a name
    such as ``"INFO"`` or a number); does nothing when the root logger has handlers already."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level.upper() if isinstance(level, str) else level,
                        handlers=[handler])


def open_store(db: str | None, dsn: str | None, *, must_exist: bool = False,
               schema: str | None = None) -> TaskStore:
    """Open the store named on the command line.

    Args:
        db: path of a SQLite file.
        dsn: a PostgreSQL DSN.
        must_exist: refuse a SQLite path that does not exist or holds no foreperson
            tasks, and create nothing in it (for the commands that read or act on a
            job's tasks).
        schema: the PostgreSQL schema (default ``$FOREPERSON_PG_SCHEMA`` or foreperson).

    Raises:
        ConfigurationError: both or neither given, or a missing file with must_exist.
    """
    if db and dsn:
        raise ConfigurationError("give --db (SQLite) or --dsn (PostgreSQL), not both")
    if schema and not dsn:
        raise ConfigurationError("--schema goes with --dsn (a SQLite --db holds one job)")
    if dsn:
        from ..work.stores.postgres import PostgresStore
        return PostgresStore(dsn, schema=schema)
    if not db:
        raise ConfigurationError("say where the tasks are: --db PATH (SQLite) or --dsn DSN")
    if must_exist and not os.path.exists(db):
        raise ConfigurationError(f"no task database at {db}")
    from ..work.stores.sqlite import SqliteStore
    return SqliteStore(db, create=not must_exist)


def where(store: TaskStore, db: str | None) -> str:
    """Which tasks a command reads: the SQLite file, or the PostgreSQL schema."""
    schema = getattr(store, "schema", None)
    return f"schema {schema}" if schema else f"{db}"


def redact(dsn: str) -> str:
    """``dsn`` with any password replaced by ``***`` (URL or key=value form)."""
    dsn = re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", dsn)
    return re.sub(r"(password\s*=\s*)(\S+)", r"\1***", dsn, flags=re.I)


METRICS_PORT_HELP = ("Serve Prometheus metrics on this port (http://HOST:PORT/metrics): this "
                     "process's task and model metrics and the store's gauges.")
METRICS_HOST_HELP = "Address the metrics server binds (default: this machine only)."


def start_metrics(store: TaskStore, port: int | None, host: str) -> Callable[[], None]:
    """With ``port``, serve ``/metrics`` for ``store`` and this process from a thread.

    Returns:
        a function that stops it (and removes the sink); a no-op without ``port``.

    Raises:
        MissingDependency: prometheus-client is not installed.
        ConfigurationError: the port cannot be bound.
    """
    if port is None:
        return lambda: None
    from .. import telemetry
    from ..observe.metrics import metrics_registry, serve_metrics

    registry, sink = metrics_registry(store)
    try:
        server: Any = serve_metrics(registry, port, host)
    except OSError as exc:
        if sink is not None:
            telemetry.remove_sink(sink)
        raise ConfigurationError(f"cannot serve metrics on {host}:{port}: {exc}") from exc

    def stop() -> None:
        server.shutdown()
        server.server_close()
        if sink is not None:
            telemetry.remove_sink(sink)

    return stop


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def shown(value: object) -> Any:
    """Text from task data, labels or model output as a terminal may show it: a
    ``rich.text.Text`` (so ``[/bold]`` is printed, never read as markup) with every
    control character but tab and newline written as an escape (``\\x1b``), so an ESC
    sequence in a task's error cannot move the cursor or recolour the terminal.

    Args:
        value: anything; None is shown as an empty text.

    Returns:
        A ``rich.text.Text``.
    """
    from rich.text import Text

    return Text(printable(value))


def printable(value: object) -> str:
    """``value`` as text with every control character but tab and newline written as an
    escape (``\\x1b``): what :func:`shown` shows, for plain ``typer.echo`` lines.

    Args:
        value: anything; None is an empty string.

    Returns:
        The text.
    """
    text = "" if value is None else str(value)
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def load_object(spec: str, option: str, kinds: tuple[type, ...]) -> Any:
    """The object named by ``spec`` on the command line: ``package.module:attr`` or
    ``path/to/file.py:attr`` (imported from the current folder); ``attr`` is an instance
    of one of ``kinds``, or a function of no arguments returning one.

    Args:
        spec: what the user wrote.
        option: the option or argument it came from, for the errors (``--agent``).
        kinds: the accepted classes.

    Returns:
        The object.

    Raises:
        ConfigurationError: ``spec`` is not ``module:attr``, cannot be imported, has no
            such attribute, or is none of ``kinds``.
    """
    target, _, attr = spec.rpartition(":")
    if not target or not attr:
        raise ConfigurationError(f"{option} {spec!r}: name it as module:attr or file.py:attr")
    try:
        if target.endswith(".py"):
            name = f"_foreperson_loaded_{abs(hash(os.path.abspath(target)))}"
            loader = importlib.util.spec_from_file_location(name, target)
            if loader is None or loader.loader is None:
                raise ImportError(f"cannot load {target}")
            module = importlib.util.module_from_spec(loader)
            sys.modules[name] = module
            loader.loader.exec_module(module)
        else:
            if os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(target)
    except (ImportError, OSError) as exc:
        raise ConfigurationError(f"{option} {spec!r}: cannot import {target}: {exc}") from exc
    if not hasattr(module, attr):
        raise ConfigurationError(f"{option} {spec!r}: {target} has no attribute {attr!r}")
    value = getattr(module, attr)
    if (inspect.isfunction(value) or inspect.ismethod(value)) and not any(
            p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
            for p in inspect.signature(value).parameters.values()):
        value = value()                          # a factory of no arguments
    if not isinstance(value, kinds):
        wanted = " or ".join(("an " if k.__name__[0] in "AEIOU" else "a ") + k.__name__
                             for k in kinds)
        what = "a class" if inspect.isclass(value) else type(value).__name__
        raise ConfigurationError(f"{option} {spec!r}: {attr} is {what}, not {wanted} (or a "
                                 "function of no arguments returning one)")
    return value
