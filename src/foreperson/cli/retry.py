"""``foreperson retry``: put DEAD tasks back to PENDING."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ..errors import ConfigurationError
from ._common import DB_HELP, DSN_HELP, SCHEMA_HELP, open_store, where


def retry(
    ids: Annotated[Optional[list[str]], typer.Argument(help="Ids of DEAD tasks.")] = None,  # noqa: UP045
    all_dead: Annotated[bool, typer.Option("--all-dead", help="Every DEAD task.")] = False,
    db: Annotated[Optional[str], typer.Option(help=DB_HELP)] = None,  # noqa: UP045
    dsn: Annotated[Optional[str], typer.Option(help=DSN_HELP)] = None,  # noqa: UP045
    schema: Annotated[Optional[str], typer.Option(help=SCHEMA_HELP)] = None,  # noqa: UP045
) -> None:
    """Put DEAD tasks back to PENDING with fresh attempts (their error history is kept),
    together with the tasks that were parked because they depended on them. Run the job
    (or the workers) again afterwards to process them."""
    if ids and all_dead:
        raise ConfigurationError("name the task ids to retry or pass --all-dead, not both")
    if not ids and not all_dead:
        raise ConfigurationError("say which DEAD tasks to retry: their ids, or --all-dead "
                                 "(foreperson status lists them)")
    store = open_store(db, dsn, must_exist=True, schema=schema)
    source = where(store, db)
    try:
        revived = store.retry_dead(None if all_dead else ids)
    finally:
        store.close()
    missing = sorted(set(ids or ()) - set(revived))
    typer.echo(f"{len(revived)} task(s) back to pending in {source}")
    if missing:
        typer.echo(f"not DEAD or unknown, left alone: {', '.join(missing)}", err=True)
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
    app.command()(retry)
