"""``foreperson worker``: run an App's task functions against a shared store, on any machine.

Start as many as you like, on as many machines as you like, against one PostgreSQL
database (``--dsn``); each claims only the kinds it can do, only into its free slots:

    foreperson worker mypackage.jobs --dsn postgresql://user@db/jobs --concurrency 8
    foreperson worker mypackage.jobs:app --dsn ... --kinds classify_ticket,draft_reply

How work is placed: there is no central dispatcher. Each worker process claims ready
tasks (``FOR UPDATE SKIP LOCKED``) only into its free slots (``--concurrency``, plus a
look-ahead of ``--prefetch`` tasks so a finishing slot starts the next one at once), so
a busy process claims nothing and an idle one takes the next task: load goes to the
least-loaded processes by construction, and a process that can do only some kinds
(``--kinds``) is never handed the others. A prefetched task stuck more than 2 s behind
a long one is given back for another process.

Every process also sweeps: a task whose lease expired (``--stale-after`` seconds
without a heartbeat, or the task's own ``stale_after``; judged by the database's clock)
goes back to PENDING, or DEAD once its attempts are used up; tasks whose dependency is
DEAD are parked. So a killed worker (even ``kill -9``) strands nothing, with no separate
sweeper to run.

Retention: with ``--retain 30d`` (and ``--keep-dead 90d``) the process also prunes old
finished work every hour, a few seconds at a time (as ``foreperson db prune``); one
worker doing it is enough, and several are harmless.

Stopping: SIGTERM or SIGINT stops claiming, lets in-flight tasks finish for up to
``--grace`` seconds, then gives back (releases, attempt not counted) whatever is still
held and exits. A second signal skips the wait.
"""

from __future__ import annotations

import logging
import threading
from typing import Annotated, Optional

import anyio
import typer

from ..errors import ConfigurationError
from ..work.leases import DEFAULT_LEASE_S
from ._common import (
    DB_HELP,
    DSN_HELP,
    METRICS_HOST_HELP,
    METRICS_PORT_HELP,
    open_store,
    start_metrics,
)

log = logging.getLogger("foreperson.cli.worker")


def worker(
    app_spec: Annotated[str, typer.Argument(
        metavar="APP", help="The App: package.module (its `app`) or package.module:attr.")],
    dsn: Annotated[Optional[str], typer.Option(help=DSN_HELP)] = None,  # noqa: UP045
    db: Annotated[Optional[str], typer.Option(help=DB_HELP)] = None,  # noqa: UP045
    schema: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="PostgreSQL schema of the task tables (default: $FOREPERSON_PG_SCHEMA "
             "or foreperson).")] = None,
    kinds: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="Comma-separated kinds to take (default: every kind the app has).")] = None,
    concurrency: Annotated[int, typer.Option(min=1, max=1024, help="Tasks run at once.")] = 1,
    prefetch: Annotated[Optional[int], typer.Option(  # noqa: UP045
        min=0, max=1024, help="Tasks claimed ahead of free slots, so the next starts at once "
                    "(default: 16, or the concurrency when more; beyond one per slot, only "
                    "as many as the slots finish in 0.1 s).")] = None,
    grace: Annotated[float, typer.Option(
        min=0, max=86400.0,
        help="Seconds in-flight tasks may take to finish after SIGTERM/SIGINT.")] = 30.0,
    stale_after: Annotated[float, typer.Option(
        min=0.1, max=7 * 86400.0, help="Seconds without a heartbeat before a task is reclaimed "
                      "(3-5x the p99 task duration).")] = DEFAULT_LEASE_S,
    name: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="Worker name (default host:pid).")] = None,
    retain: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="Prune finished work older than this while serving (`30d`; see `foreperson db "
             "prune`): every hour, a few seconds at a time. Default: keep everything.")] = None,
    keep_dead: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="With --retain: keep DEAD tasks this long instead (`90d`).")] = None,
    log_level: Annotated[str, typer.Option(help="Logging level.")] = "INFO",
    metrics_port: Annotated[Optional[int], typer.Option(  # noqa: UP045
        min=0, max=65535, help=METRICS_PORT_HELP)] = None,
    metrics_host: Annotated[str, typer.Option(help=METRICS_HOST_HELP)] = "127.0.0.1",
) -> None:
    """Run an App's task functions as one worker process (start one per core, on any
    number of machines). Claims only the kinds it can do, only into free slots; sweeps
    stale tasks; drains gracefully on SIGTERM/SIGINT.

    The ticket job's workers: foreperson worker foreperson.tickets.job --dsn DSN
    (they read FOREPERSON_TICKETS_EXAMPLES with its _TEXT_COLUMN / _LABEL_COLUMN /
    _ANSWER_COLUMN, FOREPERSON_TICKETS_MODEL and FOREPERSON_TICKETS_BASE_URL, which must
    match the job's --examples, --examples-*-column and --model)."""
    from ._common import configure_logging
    configure_logging(log_level)
    from ..work.process import AppWorker, default_worker_name, load_app, process_supervisor, serve
    from ..work.retention import Retention

    app = load_app(app_spec)
    chosen = [k.strip() for k in kinds.split(",") if k.strip()] if kinds else None
    process_worker = AppWorker(app, name or default_worker_name(), kinds=chosen,
                               concurrency=concurrency)
    if keep_dead and not retain:
        raise ConfigurationError("--keep-dead goes with --retain (how long finished work stays)")
    retention = Retention.parse(retain, keep_dead) if retain else None
    store = open_store(db, dsn, schema=schema)
    stop_metrics = start_metrics(store, metrics_port, metrics_host)
    try:
        supervisor = process_supervisor(store, process_worker, stale_after=stale_after,
                                        prefetch=prefetch, retention=retention)
        log.info("worker %s: kinds %s, concurrency %d, stale_after %g s",
                 process_worker.name, sorted(process_worker.can_do), concurrency, stale_after)
        drained = anyio.run(lambda: serve(supervisor, grace_s=grace,
                                          signals=threading.current_thread()
                                          is threading.main_thread()))
        log.info("worker %s stopped (%s)", process_worker.name,
                 "drained" if drained else "held tasks released")
    finally:
        stop_metrics()
        store.close()


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
    app.command()(worker)
