"""``foreperson db``: the PostgreSQL schema (migrations) and shared-resource limits.

    foreperson db migrate --dsn postgresql://user@host/db      # bring the schema up to date
    foreperson db version --dsn ...                            # applied / known versions
    foreperson db limit model-api --rate 10 --burst 10 --dsn ...   # 10 claims/s, all machines
    foreperson db limit kind:classify_ticket --max-active 4 --dsn ...
    foreperson db limit --dsn ...                              # list the limits
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ..errors import ConfigurationError
from ._common import DSN_HELP

if TYPE_CHECKING:
    from ..work.stores.postgres import PostgresStore

SCHEMA_HELP = "PostgreSQL schema of the task tables (default: $FOREPERSON_PG_SCHEMA or foreperson)."

db_app = typer.Typer(help="The PostgreSQL schema and shared-resource limits.",
                     no_args_is_help=True)


def _store(dsn: str | None, schema: str | None, *, migrate: bool) -> PostgresStore:
    if not dsn:
        raise ConfigurationError("foreperson db needs --dsn (a PostgreSQL DSN)")
    from ..work.stores.postgres import PostgresStore
    return PostgresStore(dsn, schema=schema, migrate=migrate, pool_size=2)


@db_app.command()
def migrate(
    dsn: Annotated[Optional[str], typer.Option(help=DSN_HELP)] = None,  # noqa: UP045
    schema: Annotated[Optional[str], typer.Option(help=SCHEMA_HELP)] = None,  # noqa: UP045
    to: Annotated[Optional[int], typer.Option(  # noqa: UP045
        help="Stop at this version (default: the latest).")] = None,
) -> None:
    """Create the schema, or apply the numbered migrations it lacks. Safe to run while
    workers are starting (an advisory lock serialises concurrent migrations)."""
    if not dsn:
        raise ConfigurationError("foreperson db migrate needs --dsn (a PostgreSQL DSN)")
    from ..work.stores.postgres import DEFAULT_SCHEMA, migrate_schema

    before, after = migrate_schema(dsn, schema=schema, target=to)
    name = schema or os.environ.get("FOREPERSON_PG_SCHEMA") or DEFAULT_SCHEMA
    if after == before:
        typer.echo(f"schema {name} is at version {after}: nothing to do")
    else:
        typer.echo(f"schema {name}: version {before} -> {after}")


@db_app.command()
def version(
    dsn: Annotated[Optional[str], typer.Option(help=DSN_HELP)] = None,  # noqa: UP045
    schema: Annotated[Optional[str], typer.Option(help=SCHEMA_HELP)] = None,  # noqa: UP045
) -> None:
    """Print the schema's version and the latest this foreperson knows."""
    from ..work.stores._pg_schema import LATEST

    store = _store(dsn, schema, migrate=False)
    try:
        current = store.schema_version
    finally:
        store.close()
    typer.echo(f"schema {store.schema}: version {current} (this foreperson: {LATEST})")


@db_app.command()
def limit(
    name: Annotated[Optional[str], typer.Argument(  # noqa: UP045
        help="Resource name as tasks give it in `locks`, or kind:KIND.")] = None,
    max_active: Annotated[Optional[int], typer.Option(  # noqa: UP045
        min=0, help="Most tasks holding the resource at once, on all machines.")] = None,
    rate: Annotated[Optional[float], typer.Option(  # noqa: UP045
        min=0.001, max=1e6, help="Most claims per second, on all machines.")] = None,
    burst: Annotated[int, typer.Option(min=1, help="Claims allowed back to back.")] = 1,
    remove: Annotated[bool, typer.Option("--remove", help="Drop the limit.")] = False,
    dsn: Annotated[Optional[str], typer.Option(help=DSN_HELP)] = None,  # noqa: UP045
    schema: Annotated[Optional[str], typer.Option(help=SCHEMA_HELP)] = None,  # noqa: UP045
) -> None:
    """Set, remove or (without NAME) list the limits on shared resources."""
    store = _store(dsn, schema, migrate=True)
    try:
        if name is None:
            if not store.limits():
                typer.echo("no limits set (foreperson db limit NAME --max-active N / --rate R)")
            for lim in store.limits().values():
                typer.echo(f"{lim.name}: max_active={lim.max_active} rate_per_s={lim.rate_per_s} "
                           f"burst={lim.burst}")
            return
        if remove:
            store.remove_limit(name)
            typer.echo(f"{name}: limit removed")
            return
        if max_active is None and rate is None:
            raise ConfigurationError("give --max-active and/or --rate (or --remove)")
        store.set_limit(name, max_active=max_active, rate_per_s=rate, burst=burst)
        typer.echo(f"{name}: max_active={max_active} rate_per_s={rate} burst={burst}")
    finally:
        store.close()


def register(app: typer.Typer) -> None:
    """Add the ``db`` command group to ``app``."""
    app.add_typer(db_app, name="db")
