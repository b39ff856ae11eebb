"""``foreperson db``: retention, the PostgreSQL schema (migrations) and shared-resource
limits.

    foreperson db prune --db tasks.db --older-than 30d        # old finished work leaves
    foreperson db prune --dsn ... --older-than 30d --keep-dead 90d --archive old.jsonl.gz
    foreperson db migrate --dsn postgresql://user@host/db      # bring the schema up to date
    foreperson db version --dsn ...                            # applied / known versions
    foreperson db limit model-api --rate 10 --burst 10 --dsn ...   # 10 claims/s, all machines
    foreperson db limit kind:classify_ticket --max-active 4 --dsn ...
    foreperson db limit --dsn ...                              # list the limits
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ..errors import ConfigurationError
from ._common import DB_HELP, DSN_HELP, open_store, where

if TYPE_CHECKING:
    from ..work.stores.postgres import PostgresStore

SCHEMA_HELP = "PostgreSQL schema of the task tables (default: $FOREPERSON_PG_SCHEMA or foreperson)."

db_app = typer.Typer(help="Retention (old finished work leaves the store), the PostgreSQL "
                          "schema and shared-resource limits.", no_args_is_help=True)


def _store(dsn: str | None, schema: str | None, *, migrate: bool) -> PostgresStore:
    if not dsn:
        raise ConfigurationError("foreperson db needs --dsn (a PostgreSQL DSN)")
    from ..work.stores.postgres import PostgresStore
    return PostgresStore(dsn, schema=schema, migrate=migrate, pool_size=2)


@db_app.command()
def prune(
    older_than: Annotated[str, typer.Option(
        help="Remove finished work whose last task finished longer ago than this: `30d`, `12h`, "
             "`90m`, `2w`.")],
    keep_dead: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="Keep DEAD tasks this long instead (at least --older-than): they are the ones a "
             "person may still retry.")] = None,
    archive: Annotated[Optional[Path], typer.Option(  # noqa: UP045
        help="Append every removed record to this gzip'd JSON-lines file first "
             "(`.jsonl.gz`).")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run",
        help="Count what would go; remove nothing.")] = False,
    forget_after: Annotated[str, typer.Option(
        help="Keep the tombstone of each removed task this long: until then, adding its id again "
             "is refused instead of running it twice.")] = "365d",
    max_seconds: Annotated[Optional[float], typer.Option(  # noqa: UP045
        min=1.0,
        help="Stop after about this many seconds (run it again for the rest).")] = None,
    db: Annotated[Optional[str], typer.Option(help=DB_HELP)] = None,  # noqa: UP045
    dsn: Annotated[Optional[str], typer.Option(help=DSN_HELP)] = None,  # noqa: UP045
    schema: Annotated[Optional[str], typer.Option(help=SCHEMA_HELP)] = None,  # noqa: UP045
) -> None:
    """Remove old finished work, safely while workers run: whole runs whose every task
    is COMPLETED or DEAD (with their dependency edges, locks, side-effect records and
    journal), durable agent runs that completed or failed, state-machine journals that
    ended. Nothing unfinished goes, nor anything an unfinished task depends on, nor any
    part of a run that is waiting, parked on an approval or interrupted. Each transaction
    holds its locks about 5 ms, with a pause after it, so claims never wait long.

    Run it every night, e.g. from cron:
    `15 3 * * * foreperson db prune --db /srv/jobs/tasks.db --older-than 30d --archive
    /srv/archive/tasks-$(date +%F).jsonl.gz`."""
    from ..work.retention import Prunes, Retention, parse_age

    rule = Retention.parse(older_than, keep_dead,
                           forget_after_s=parse_age(forget_after, what="--forget-after"))
    store = open_store(db, dsn, must_exist=True, schema=schema)
    try:
        if not isinstance(store, Prunes):       # pragma: no cover - every bundled store is
            raise ConfigurationError(f"{type(store).__name__} cannot prune")
        report = store.prune(rule, archive=archive, dry_run=dry_run, max_seconds=max_seconds)
    finally:
        store.close()
    typer.echo(f"{where(store, db)}: {report.summary()}")


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
    from ..work.stores.postgres import SCHEMA_VERSION

    store = _store(dsn, schema, migrate=False)
    try:
        current = store.schema_version
    finally:
        store.close()
    typer.echo(f"schema {store.schema}: version {current} (this foreperson: {SCHEMA_VERSION})")


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
