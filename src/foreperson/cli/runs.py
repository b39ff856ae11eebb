"""``foreperson runs``: durable agent runs (``foreperson.runtime``) in a store.

    foreperson runs list --db runs.db --user ada           # ada's runs, newest first
    foreperson runs list --db runs.db                      # the anonymous runs
    foreperson runs list --dsn DSN --all-users --status waiting   # an operator's view
    foreperson runs show RUN_ID --db runs.db --user ada    # the run as a tree
    foreperson runs approve RUN_ID CALL_ID --db runs.db --user ada
    foreperson runs deny RUN_ID CALL_ID --reason "not this one" --db runs.db --user ada
    foreperson runs resume RUN_ID --agent myapp.agents:team --db runs.db --user ada

A run belongs to the user it was started for (seed 001, tenant pinning). Every command
acts as the caller given by ``--user`` (none: an anonymous caller, who owns the
anonymous runs): ``list`` lists that caller's runs only, unless the operator's flag
``--all-users`` is given; ``show``, ``approve``, ``deny`` and ``resume`` reach only that
caller's runs. Another user's run and a run that does not exist look the same to a
caller who does not own it: the same message (``no run 'r-1' for user 'bob'``, the owner
never named) and the same exit status (2), so ``runs`` cannot be used to learn which run
ids exist or whose they are.
"""

from __future__ import annotations

import json
import shlex
from typing import Annotated, Any, Optional

import typer

from ..errors import AccessDenied, ConfigurationError
from ._common import DB_HELP, DSN_HELP, load_object, open_store

runs_app = typer.Typer(help="Durable agent runs: list, show as a tree, approve, resume.",
                       no_args_is_help=True)

_USER_HELP = ("Who asks: the user the run belongs to (omit for an anonymous run). Another "
              "user's run is reported as missing.")
_ALL_USERS_HELP = ("An operator's flag: list every user's runs (and the anonymous ones), "
                   "not only the caller's.")
_SCHEMA_HELP = "PostgreSQL schema (default: $FOREPERSON_PG_SCHEMA or foreperson)."


def _runtime(db: str | None, dsn: str | None, schema: str | None) -> Any:
    from ..runtime import Runtime

    return Runtime(open_store(db, dsn, must_exist=True, schema=schema))


def _when(value: Any) -> str:
    return value.isoformat(timespec="seconds") if value is not None else "-"


def _caller(user: str | None) -> str:
    return "an anonymous caller (no --user)" if user is None else f"user {user!r}"


def _no_run(run_id: str, user: str | None) -> ConfigurationError:
    """The one error for a run ``user`` cannot reach: it does not exist, or it belongs to
    someone else. Both read the same, and never name the owner (seed 001, tenant
    pinning: a caller learns nothing of the runs that are not its own).

    Args:
        run_id: the run asked for.
        user: who asked (None: an anonymous caller).

    Returns:
        A :class:`~foreperson.errors.ConfigurationError` (the CLI exits 2 with it):
        ``no run 'r-1' for user 'bob': check the run id and --user ...``.
    """
    listing = ("foreperson runs list" if user is None
               else f"foreperson runs list --user {shlex.quote(user)}")
    return ConfigurationError(f"no run {run_id!r} for {_caller(user)}: check the run id and "
                              f"--user (`{listing}` lists the caller's runs)")


def _reach(runtime: Any, run_id: str, user: str | None) -> None:
    """Check that ``user`` may reach the run, before anything is read or written.

    Raises:
        ConfigurationError: :func:`_no_run`, whether the run is missing or another's.
    """
    try:
        runtime.get_run(run_id, user_id=user)
    except (AccessDenied, ConfigurationError):
        raise _no_run(run_id, user) from None


@runs_app.command("list")
def list_runs(
    db: Annotated[Optional[str], typer.Option(help=DB_HELP)] = None,  # noqa: UP045
    dsn: Annotated[Optional[str], typer.Option(help=DSN_HELP)] = None,  # noqa: UP045
    schema: Annotated[Optional[str], typer.Option(help=_SCHEMA_HELP)] = None,  # noqa: UP045
    user: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="Whose runs: this user's (omit for the anonymous runs).")] = None,
    status: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="Only runs in this status: running, waiting, completed, failed, interrupted.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=100000, help="At most this many.")] = 50,
    all_users: Annotated[bool, typer.Option("--all-users", help=_ALL_USERS_HELP)] = False,
) -> None:
    """List the caller's runs, newest first: id, agent, user, status, stop reason, start,
    last change. The caller is ``--user`` (none: the anonymous runs); an operator lists
    every user's runs with ``--all-users``."""
    if all_users and user is not None:
        raise ConfigurationError("--all-users lists every user's runs; give it or --user, "
                                 "not both")
    runtime = _runtime(db, dsn, schema)
    try:
        records = runtime.list_runs(user_id=user, status=status, limit=limit,
                                    all_users=all_users)
    finally:
        runtime.close()
    if not records:
        typer.echo("no runs")
        return
    typer.echo(f"{'run':34} {'agent':16} {'user':12} {'status':11} {'stop_reason':18} "
               f"{'started':25} updated")
    for r in records:
        typer.echo(f"{r.run_id:34} {r.agent[:16]:16} {(r.user_id or '-')[:12]:12} "
                   f"{r.status:11} {(r.stop_reason or '-')[:18]:18} {_when(r.created_at):25} "
                   f"{_when(r.updated_at)}")


@runs_app.command()
def show(
    run_id: Annotated[str, typer.Argument(help="The run.")],
    db: Annotated[Optional[str], typer.Option(help=DB_HELP)] = None,  # noqa: UP045
    dsn: Annotated[Optional[str], typer.Option(help=DSN_HELP)] = None,  # noqa: UP045
    schema: Annotated[Optional[str], typer.Option(help=_SCHEMA_HELP)] = None,  # noqa: UP045
    user: Annotated[Optional[str], typer.Option(help=_USER_HELP)] = None,  # noqa: UP045
    as_json: Annotated[bool, typer.Option("--json", help="The journal as JSON lines.")] = False,
) -> None:
    """Print the run as a tree: its agents, supervisor turns, model calls (the tools they
    asked for, route decisions), tool calls, delegations, spawns and approvals, with
    status and timings; what it waits on."""
    runtime = _runtime(db, dsn, schema)
    try:
        _reach(runtime, run_id, user)
        if as_json:
            for step in runtime.steps(run_id, user_id=user):
                typer.echo(json.dumps({
                    "seq": step.seq, "key": step.key, "kind": step.kind,
                    "version": step.version, "created_at": _when(step.created_at),
                    "result": step.result}, ensure_ascii=False, default=str))
        else:
            typer.echo(runtime.show(run_id, user_id=user))
    finally:
        runtime.close()


@runs_app.command()
def approve(
    run_id: Annotated[str, typer.Argument(help="The run.")],
    call_id: Annotated[str, typer.Argument(
        help="The tool call's id (or its approval step key, as `runs show` prints it).")],
    db: Annotated[Optional[str], typer.Option(help=DB_HELP)] = None,  # noqa: UP045
    dsn: Annotated[Optional[str], typer.Option(help=DSN_HELP)] = None,  # noqa: UP045
    schema: Annotated[Optional[str], typer.Option(help=_SCHEMA_HELP)] = None,  # noqa: UP045
    user: Annotated[Optional[str], typer.Option(help=_USER_HELP)] = None,  # noqa: UP045
    arguments: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="Run the call with these arguments instead (a JSON object).")] = None,
    deny: Annotated[bool, typer.Option("--deny", help="Refuse the call instead.")] = False,
    reason: Annotated[str, typer.Option(help="Why it is denied (the model reads it).")]
        = "a human declined this call",
) -> None:
    """Record a human's decision on a tool call a parked run waits on; resume the run
    afterwards (`foreperson runs resume`, or agent.resume) to continue from that call."""
    edited: dict[str, Any] | None = None
    if arguments is not None:
        try:
            edited = json.loads(arguments)
        except ValueError as exc:
            raise ConfigurationError(f"--arguments is not JSON: {exc}") from None
        if not isinstance(edited, dict):
            raise ConfigurationError("--arguments must be a JSON object")
    runtime = _runtime(db, dsn, schema)
    try:
        _reach(runtime, run_id, user)
        if deny:
            decision = runtime.deny(run_id, call_id, reason=reason, user_id=user)
        else:
            decision = runtime.approve(run_id, call_id, user_id=user, arguments=edited)
    finally:
        runtime.close()
    asked = "deny" if deny else ("edit" if edited is not None else "approve")
    said = (f"{decision.decision}" + (f" ({decision.reason})" if decision.decision == "deny"
                                      else ""))
    if decision.decision != asked or (asked == "edit" and decision.arguments != edited):
        typer.echo(f"run {run_id}: call {call_id} was already decided: {said}; the first "
                   f"decision stands, this {asked} was not recorded", err=True)
        raise typer.Exit(1)
    typer.echo(f"run {run_id}: call {call_id}: {said}; resume the run to continue")


@runs_app.command("deny")
def deny_call(
    run_id: Annotated[str, typer.Argument(help="The run.")],
    call_id: Annotated[str, typer.Argument(help="The tool call's id (or step key).")],
    reason: Annotated[str, typer.Option(help="Why (the model reads it).")]
        = "a human declined this call",
    db: Annotated[Optional[str], typer.Option(help=DB_HELP)] = None,  # noqa: UP045
    dsn: Annotated[Optional[str], typer.Option(help=DSN_HELP)] = None,  # noqa: UP045
    schema: Annotated[Optional[str], typer.Option(help=_SCHEMA_HELP)] = None,  # noqa: UP045
    user: Annotated[Optional[str], typer.Option(help=_USER_HELP)] = None,  # noqa: UP045
) -> None:
    """Refuse a tool call a parked run waits on (as `approve --deny`)."""
    approve(run_id, call_id, db=db, dsn=dsn, schema=schema, user=user, arguments=None,
            deny=True, reason=reason)


def load_agent(spec: str) -> Any:
    """The agent named by ``spec``: ``package.module:attr`` or ``path/to/file.py:attr``;
    ``attr`` is an Agent (a Team is one) or a function of no arguments returning one.

    Raises:
        ConfigurationError: it cannot be imported, or is no Agent.
    """
    from ..agents import Agent

    return load_object(spec, "--agent", (Agent,))


@runs_app.command()
def resume(
    run_id: Annotated[str, typer.Argument(help="The run.")],
    agent: Annotated[str, typer.Option(
        help="The agent (or team) that runs it: module:attr or file.py:attr.")],
    db: Annotated[Optional[str], typer.Option(help=DB_HELP)] = None,  # noqa: UP045
    dsn: Annotated[Optional[str], typer.Option(help=DSN_HELP)] = None,  # noqa: UP045
    schema: Annotated[Optional[str], typer.Option(help=_SCHEMA_HELP)] = None,  # noqa: UP045
    user: Annotated[Optional[str], typer.Option(help=_USER_HELP)] = None,  # noqa: UP045
) -> None:
    """Continue a run from its journal: finished steps replay without calling a model or
    a tool again; only unfinished ones run. Prints how it ended."""
    chosen = load_agent(agent)
    runtime = _runtime(db, dsn, schema)
    try:
        _reach(runtime, run_id, user)
        result = chosen.resume_sync(run_id, runtime=runtime, user_id=user)
    finally:
        runtime.close()
    typer.echo(f"run {run_id}: {result.stop_reason}")
    for pending in result.pending:
        typer.echo(f"waiting for approval: call {pending.call_id} {pending.tool}"
                   f"({json.dumps(pending.arguments, ensure_ascii=False)}) by {pending.agent}")
    if result.text:
        typer.echo(result.text)


def register(app: typer.Typer) -> None:
    """Add the ``runs`` command group to ``app``."""
    app.add_typer(runs_app, name="runs")
