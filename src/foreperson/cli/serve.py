"""``foreperson serve``: the live web page over a task store (see
:mod:`foreperson.observe.server`)."""

from __future__ import annotations

import logging
import sys
from typing import Annotated, Optional

import typer

from ._common import DB_HELP, DSN_HELP, open_store

log = logging.getLogger("foreperson.cli.serve")


def serve(
    db: Annotated[Optional[str], typer.Option(help=DB_HELP)] = None,  # noqa: UP045
    dsn: Annotated[Optional[str], typer.Option(help=DSN_HELP)] = None,  # noqa: UP045
    schema: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="PostgreSQL schema of the task tables (default: $FOREPERSON_PG_SCHEMA or "
             "foreperson).")] = None,
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port (0: any free one).")] = 8710,
    host: Annotated[str, typer.Option(
        help="Address to bind. The default serves this machine only; another address shows your "
             "tasks' payloads to whoever reaches it.")] = "127.0.0.1",
    allow_retry: Annotated[bool, typer.Option(
        "--allow-retry",
        help="Show buttons that put DEAD tasks back to PENDING (the rule of foreperson retry). "
             "Read-only without it.")] = False,
) -> None:
    """Serve a live web page: tasks by status over time, active tasks per worker and the
    age of the oldest unfinished task as charts, the workers, DEAD and FAILED tasks with
    every attempt's error, each task's page, and agent runs as trees; /metrics for
    Prometheus. Works offline; stop with Ctrl-C."""
    from ..observe.server import StatusServer

    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    store = open_store(db, dsn, must_exist=True, schema=schema)
    try:
        server = StatusServer(store, host=host, port=port, allow_retry=allow_retry)
    except OSError as exc:
        store.close()
        from ..errors import ConfigurationError
        raise ConfigurationError(f"cannot serve on {host}:{port}: {exc}") from exc
    typer.echo(f"serving {server.url} ({'retry allowed' if allow_retry else 'read-only'}); "
               "Ctrl-C to stop", err=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        store.close()


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
    app.command()(serve)
