"""``foreperson mcp serve``: an Agent, a Team or a Machine served over MCP (see
:mod:`foreperson.protocols.mcp`)."""

from __future__ import annotations

import logging
from typing import Annotated, Any, Optional

import typer

from ..errors import ConfigurationError
from ._common import DB_HELP, DSN_HELP, configure_logging, load_object, open_store

TOKEN_ENV = "FOREPERSON_MCP_TOKEN"

_EXAMPLES = """
Examples:

  foreperson mcp serve support.py:team                      # stdio (a client starts it)

  foreperson mcp serve support.py:team --db runs.db         # durable runs, a _resume tool

  FOREPERSON_MCP_TOKEN=... foreperson mcp serve support.py:team --http --port 8720

  foreperson mcp serve support.py:team --db tasks.db --work-kind classify_ticket
"""


def serve(  # noqa: PLR0913 - one option per thing a served endpoint needs told
    target: Annotated[str, typer.Argument(
        metavar="TARGET",
        help="What to serve: module:attr or file.py:attr naming an Agent, a Team or a "
             "Machine (or a function of no arguments returning one).")],
    http: Annotated[bool, typer.Option(
        "--http", help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio.")
    ] = False,
    host: Annotated[str, typer.Option(
        help="Address to bind with --http. The default serves this machine only; another "
             "address lets whoever reaches it run your agents (give --token).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535,
                                      help="TCP port with --http (0: any free one).")] = 8720,
    allowed_host: Annotated[Optional[list[str]], typer.Option(  # noqa: UP045
        "--allowed-host",
        help="A Host name the server answers to with --http (repeat it). Default: the "
             "loopback names, and for another --host also this machine's names and "
             "addresses; any other Host is refused (DNS rebinding).")] = None,
    token: Annotated[Optional[str], typer.Option(  # noqa: UP045
        envvar=TOKEN_ENV, show_envvar=True,
        help="With --http, a bearer token every request must carry ('Authorization: "
             "Bearer TOKEN'). Prefer the environment variable.")] = None,
    db: Annotated[Optional[str], typer.Option(help=DB_HELP + " Runs are durable in it "  # noqa: UP045
                                              "(resumable, approvals across restarts).")
                  ] = None,
    dsn: Annotated[Optional[str], typer.Option(help=DSN_HELP)] = None,  # noqa: UP045
    schema: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="PostgreSQL schema (default: $FOREPERSON_PG_SCHEMA or foreperson).")] = None,
    agents: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="A machine's agents: module:attr naming a dict {name: Agent} (or a function "
             "returning one).")] = None,
    work_kind: Annotated[Optional[list[str]], typer.Option(  # noqa: UP045
        "--work-kind",
        help="Also offer submit_task (for this task kind: repeat it) and task_status, on "
             "--db/--dsn. Off unless named.")] = None,
    user: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="The user every run is recorded for (default: anonymous runs).")] = None,
    run_timeout: Annotated[float, typer.Option(
        min=0.001, help="Seconds one call may run before it is stopped.")] = 900.0,
) -> None:
    """Serve an Agent, a Team or a Machine as an MCP server: one tool per entry point
    (NAME, and NAME_resume with a store), progress notifications from the run's events,
    cancellation that stops the run, the run id in every answer."""
    from ..agents import Agent
    from ..fsm import Machine
    from ..observe import is_loopback
    from ..protocols.mcp import WorkTools, mcp_server, serve_http, serve_stdio

    configure_logging(logging.WARNING if not http else logging.INFO)
    served = load_object(target, "TARGET", (Agent, Machine))
    roster: dict[str, Any] | None = None
    if agents is not None:
        roster = load_object(agents, "--agents", (dict,))
    _check(http=http, token=token, allowed_host=allowed_host, work_kind=work_kind,
           stored=bool(db or dsn))
    store = open_store(db, dsn, schema=schema) if (db or dsn) else None
    try:
        work = WorkTools(store, frozenset(work_kind)) if work_kind and store else None
        server = mcp_server(served, store=store, agents=roster, work=work, user_id=user,
                            run_timeout_s=run_timeout)
        if not http:
            import anyio

            anyio.run(serve_stdio, server)
            return
        if not is_loopback(host) and not token:
            typer.echo(f"warning: serving on {host} without --token: whoever reaches it can "
                       "run what it serves", err=True)

        def ready(bound: str, bound_port: int) -> None:
            typer.echo(f"serving http://{bound}:{bound_port}/mcp "
                       f"({'token needed' if token else 'no token'}); Ctrl-C to stop",
                       err=True)

        try:
            serve_http(server, host=host, port=port, token=token,
                       allowed_hosts=allowed_host or (), ready=ready)
        except OSError as exc:
            raise ConfigurationError(f"cannot serve on {host}:{port}: {exc}") from exc
        except KeyboardInterrupt:
            pass
    finally:
        if store is not None:
            store.close()


def _check(*, http: bool, token: str | None, allowed_host: list[str] | None,
           work_kind: list[str] | None, stored: bool) -> None:
    """Refuse options that do not fit together (before anything is opened)."""
    if token is not None and len(token) < 16:
        raise ConfigurationError("--token is under 16 characters (python3 -c 'import "
                                 "secrets; print(secrets.token_urlsafe(24))' makes one)")
    if not http and (token or allowed_host):
        raise ConfigurationError("--token and --allowed-host are for --http (a stdio server "
                                 "answers only the process that started it)")
    if work_kind and not stored:
        raise ConfigurationError("--work-kind needs the store the workers drain: --db or "
                                 "--dsn")


def register(app: typer.Typer) -> None:
    """Add the ``mcp`` command group to ``app``."""
    group = typer.Typer(help="Serve an Agent, a Team or a Machine over MCP (the mcp extra).",
                        no_args_is_help=True, epilog=_EXAMPLES)
    group.command("serve", epilog=_EXAMPLES)(serve)
    app.add_typer(group, name="mcp")
