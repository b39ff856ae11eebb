"""``foreperson a2a serve``: an Agent, a Team or a Machine published as an A2A agent (see
:mod:`foreperson.protocols.a2a`)."""

from __future__ import annotations

import logging
from typing import Annotated, Any, Optional

import typer

from ..errors import ConfigurationError
from ._common import DB_HELP, DSN_HELP, configure_logging, load_object, open_store

TOKEN_ENV = "FOREPERSON_A2A_TOKEN"

_EXAMPLES = """
Examples:

  foreperson a2a serve support.py:team                          # http://127.0.0.1:8730/

  foreperson a2a serve support.py:team --db runs.db --port 9000 # durable runs

  FOREPERSON_A2A_TOKEN=... foreperson a2a serve support.py:team --host 0.0.0.0

  foreperson a2a serve router.py:machine --agents router.py:agents
"""


def serve(
    target: Annotated[str, typer.Argument(
        metavar="TARGET",
        help="What to serve: module:attr or file.py:attr naming an Agent, a Team or a "
             "Machine (or a function of no arguments returning one).")],
    host: Annotated[str, typer.Option(
        help="Address to bind. The default serves this machine only; another address "
             "lets whoever reaches it run what it serves (give --token).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535,
                                      help="TCP port (0: any free one).")] = 8730,
    public_url: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="The URL the agent card gives (default http://HOST:PORT/; behind a proxy, "
             "its URL).")] = None,
    allowed_host: Annotated[Optional[list[str]], typer.Option(  # noqa: UP045
        "--allowed-host",
        help="A Host name the server answers to (repeat it). Default: the loopback names, "
             "and for another --host also this machine's names and addresses; any other "
             "Host is refused (DNS rebinding).")] = None,
    token: Annotated[Optional[str], typer.Option(  # noqa: UP045
        envvar=TOKEN_ENV, show_envvar=True,
        help="A bearer token every request must carry ('Authorization: Bearer TOKEN'), "
             "the card included. Prefer the environment variable.")] = None,
    db: Annotated[Optional[str], typer.Option(help=DB_HELP + " Runs are durable in it.")  # noqa: UP045
                  ] = None,
    dsn: Annotated[Optional[str], typer.Option(help=DSN_HELP)] = None,  # noqa: UP045
    schema: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="PostgreSQL schema (default: $FOREPERSON_PG_SCHEMA or foreperson).")] = None,
    agents: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="A machine's agents: module:attr naming a dict {name: Agent} (or a function "
             "returning one).")] = None,
    user: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="The user every run is recorded for (default: anonymous runs).")] = None,
    run_timeout: Annotated[float, typer.Option(
        min=0.001, help="Seconds one message may run before it is stopped.")] = 900.0,
) -> None:
    """Serve an Agent, a Team or a Machine as an A2A agent: its card at
    /.well-known/agent-card.json (from its name, instructions and tools), JSON-RPC at /,
    the run's events as streamed status updates, tasks/cancel that stops the run."""
    from ..agents import Agent
    from ..fsm import Machine
    from ..observe import is_loopback
    from ..protocols.a2a import serve_a2a

    configure_logging(logging.INFO)
    served = load_object(target, "TARGET", (Agent, Machine))
    roster: dict[str, Any] | None = None
    if agents is not None:
        roster = load_object(agents, "--agents", (dict,))
    if token is not None and len(token) < 16:
        raise ConfigurationError("--token is under 16 characters (python3 -c 'import "
                                 "secrets; print(secrets.token_urlsafe(24))' makes one)")
    if not is_loopback(host) and not token:
        typer.echo(f"warning: serving on {host} without --token: whoever reaches it can "
                   "run what it serves", err=True)
    store = open_store(db, dsn, schema=schema) if (db or dsn) else None

    def ready(bound: str, bound_port: int, url: str) -> None:
        typer.echo(f"serving {url} (card: {url}.well-known/agent-card.json, "
                   f"{'token needed' if token else 'no token'}); Ctrl-C to stop", err=True)

    try:
        serve_a2a(served, host=host, port=port, token=token, allowed_hosts=allowed_host or (),
                  public_url=public_url, ready=ready, store=store, agents=roster,
                  user_id=user, run_timeout_s=run_timeout)
    except OSError as exc:
        raise ConfigurationError(f"cannot serve on {host}:{port}: {exc}") from exc
    except KeyboardInterrupt:
        pass
    finally:
        if store is not None:
            store.close()


def register(app: typer.Typer) -> None:
    """Add the ``a2a`` command group to ``app``."""
    group = typer.Typer(help="Serve an Agent, a Team or a Machine as an A2A agent (the a2a "
                             "extra).", no_args_is_help=True, epilog=_EXAMPLES)
    group.command("serve", epilog=_EXAMPLES)(serve)
    app.add_typer(group, name="a2a")
