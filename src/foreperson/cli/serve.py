"""``foreperson serve``: the live web page over a task store (see
:mod:`foreperson.observe.server`)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Optional

import typer

from ._common import DB_HELP, DSN_HELP, open_store

log = logging.getLogger("foreperson.cli.serve")

TOKEN_ENV = "FOREPERSON_SERVE_TOKEN"


def read_users(path: Path) -> dict[str, str]:
    """A users file: one ``name:token`` a line (``#`` comments and blank lines skipped).

    Raises:
        ConfigurationError: the file cannot be read, a line is not ``name:token``, a
            name comes twice, or a token is shorter than 16 characters.
    """
    from ..errors import ConfigurationError

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"cannot read the users file {path}: {exc}") from exc
    users: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, token = line.partition(":")
        name, token = name.strip(), token.strip()
        if not sep or not name or not token:
            raise ConfigurationError(f"{path}:{number}: write name:token")
        if name in users:
            raise ConfigurationError(f"{path}:{number}: user {name!r} is there twice")
        if len(token) < 16:
            raise ConfigurationError(f"{path}:{number}: {name}'s token is under 16 characters "
                                     "(python3 -c 'import secrets; print(secrets."
                                     "token_urlsafe(24))' makes one)")
        users[name] = token
    return users


def serve(
    db: Annotated[Optional[str], typer.Option(help=DB_HELP)] = None,  # noqa: UP045
    dsn: Annotated[Optional[str], typer.Option(help=DSN_HELP)] = None,  # noqa: UP045
    schema: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="PostgreSQL schema of the task tables (default: $FOREPERSON_PG_SCHEMA or "
             "foreperson).")] = None,
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port (0: any free one).")] = 8710,
    host: Annotated[str, typer.Option(
        help="Address to bind. The default serves this machine only; another address shows your "
             "tasks' payloads to whoever reaches it (give --token).")] = "127.0.0.1",
    allow_retry: Annotated[bool, typer.Option(
        "--allow-retry",
        help="Show buttons that put DEAD tasks back to PENDING (the rule of foreperson retry). "
             "Read-only without it.")] = False,
    allowed_host: Annotated[Optional[list[str]], typer.Option(  # noqa: UP045
        "--allowed-host",
        help="A Host name the page answers to (repeat it; e.g. the name behind a proxy). "
             "Default: localhost and the loopback addresses for a loopback --host, else also "
             "this machine's name, FQDN and addresses. Any other Host is refused (DNS "
             "rebinding).")] = None,
    token: Annotated[Optional[str], typer.Option(  # noqa: UP045
        envvar=TOKEN_ENV, show_envvar=True,
        help="A token every request must carry, reads included: a browser asks for it "
             "(the password; any user name), scripts send 'Authorization: Bearer TOKEN'. "
             "Prefer the environment variable (a command line is visible to other "
             "users).")] = None,
    users_file: Annotated[Optional[Path], typer.Option(  # noqa: UP045
        "--users-file",
        help="Per-user logins: a file of name:token lines. Each user logs in with their "
             "name and token and sees their own durable agent runs.")] = None,
    show_runs_of_all_users: Annotated[bool, typer.Option(
        "--show-runs-of-all-users",
        help="Show every user's durable agent runs (tool arguments and results "
             "included) to whoever can open the page. Without it a caller sees only their "
             "own runs: none when the page has no --users-file.")] = False,
) -> None:
    """Serve a live web page: tasks by status over time, active tasks per worker and the
    age of the oldest unfinished task as charts, the workers, DEAD and FAILED tasks with
    every attempt's error, each task's page, and agent runs as trees; /metrics for
    Prometheus. Works offline; stop with Ctrl-C."""
    from ..errors import ConfigurationError
    from ..observe import StatusServer, raise_open_file_limit
    from ._common import configure_logging
    configure_logging(logging.INFO)
    users = read_users(users_file) if users_file is not None else {}
    if token is not None and len(token) < 16:
        raise ConfigurationError("--token is under 16 characters (python3 -c 'import "
                                 "secrets; print(secrets.token_urlsafe(24))' makes one)")
    raise_open_file_limit()          # idle connections must not exhaust the 1,024 default
    store = open_store(db, dsn, must_exist=True, schema=schema)
    try:
        server = StatusServer(store, host=host, port=port, allow_retry=allow_retry,
                              allowed_hosts=allowed_host or None, access_token=token,
                              users=users, show_runs_of_all_users=show_runs_of_all_users)
    except OSError as exc:
        store.close()
        raise ConfigurationError(f"cannot serve on {host}:{port}: {exc}") from exc
    except BaseException:
        store.close()
        raise
    runs = ("every user's runs shown" if show_runs_of_all_users
            else "each user's own runs" if users else "durable runs hidden")
    guard = "token needed" if token or users else "no token"
    typer.echo(f"serving {server.url} ({'retry allowed' if allow_retry else 'read-only'}, "
               f"{guard}, {runs}); Ctrl-C to stop", err=True)
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
