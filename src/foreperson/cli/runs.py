"""``foreperson runs``: durable agent runs (``foreperson.runtime``) in a store.

    foreperson runs list --db runs.db                      # every user's, newest first
    foreperson runs list --dsn DSN --user ada --status waiting
    foreperson runs show RUN_ID --db runs.db --user ada    # the run as a tree
    foreperson runs approve RUN_ID CALL_ID --db runs.db --user ada
    foreperson runs deny RUN_ID CALL_ID --reason "not this one" --db runs.db --user ada
    foreperson runs resume RUN_ID --agent myapp.agents:team --db runs.db --user ada

A run belongs to the user it was started for: ``show``, ``approve``, ``deny`` and
``resume`` take that user's id (``--user``; none for an anonymous run) and refuse any
other. ``list`` is the operator's view: every user's runs (ids, users, status, times),
or one user's with ``--user``.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
from typing import Annotated, Any, Optional

import typer

from ..errors import ConfigurationError
from ._common import DB_HELP, DSN_HELP, open_store

runs_app = typer.Typer(help="Durable agent runs: list, show as a tree, approve, resume.",
                       no_args_is_help=True)

_USER_HELP = "The user the run belongs to (omit for an anonymous run)."
_SCHEMA_HELP = "PostgreSQL schema (default: $FOREPERSON_PG_SCHEMA or foreperson)."


def _runtime(db: str | None, dsn: str | None, schema: str | None) -> Any:
    from ..runtime import Runtime

    return Runtime(open_store(db, dsn, must_exist=True, schema=schema))


def _when(value: Any) -> str:
    return value.isoformat(timespec="seconds") if value is not None else "-"


@runs_app.command("list")
def list_runs(
    db: Annotated[Optional[str], typer.Option(help=DB_HELP)] = None,  # noqa: UP045
    dsn: Annotated[Optional[str], typer.Option(help=DSN_HELP)] = None,  # noqa: UP045
    schema: Annotated[Optional[str], typer.Option(help=_SCHEMA_HELP)] = None,  # noqa: UP045
    user: Annotated[Optional[str], typer.Option(help="Only this user's runs.")] = None,  # noqa: UP045
    status: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="Only runs in this status: running, waiting, completed, failed, interrupted.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=100000, help="At most this many.")] = 50,
) -> None:
    """List runs, newest first: id, agent, user, status, stop reason, start, last change."""
    runtime = _runtime(db, dsn, schema)
    try:
        records = runtime.list_runs(user_id=user, status=status, limit=limit,
                                    all_users=user is None)
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

    target, _, attr = spec.rpartition(":")
    if not target or not attr:
        raise ConfigurationError(f"--agent {spec!r}: name it as module:attr or file.py:attr")
    try:
        if target.endswith(".py"):
            name = f"_foreperson_agent_{abs(hash(os.path.abspath(target)))}"
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
        raise ConfigurationError(f"--agent {spec!r}: cannot import {target}: {exc}") from exc
    if not hasattr(module, attr):
        raise ConfigurationError(f"--agent {spec!r}: {target} has no attribute {attr!r}")
    value = getattr(module, attr)
    if value is not None and not isinstance(value, Agent) and callable(value):
        value = value()
    if not isinstance(value, Agent):
        raise ConfigurationError(f"--agent {spec!r}: {attr} is {type(value).__name__}, not an "
                                 "Agent (or a function returning one)")
    return value


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
