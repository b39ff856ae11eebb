"""``foreperson fsm``: check, draw and run a state machine declared in YAML (seed 003).

    foreperson fsm check router.yaml other.yaml     # every problem, file:line:column; exit 1
    foreperson fsm render router.yaml               # Mermaid state diagram, guards on edges
    foreperson fsm render router.yaml --format dot  # Graphviz
    foreperson fsm run router.yaml --request "I was charged twice" --model gpt-4o-mini
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Optional

import typer

from ..errors import ConfigurationError, MachineSpecError

fsm_app = typer.Typer(help="Check, draw and run state machines declared in YAML.",
                      no_args_is_help=True)

_INSTRUCTIONS = (
    "You are {agent}, one agent of the state machine {machine}. Each message gives you "
    "an objective, the request, and the CONTEXT (what is known so far). Do what the "
    "objective asks, then record your results with the updateContext(field, value) tool, "
    "one call per field, using only the fields and values the message allows. When a "
    "call returns an error, correct the value and call it again. Then reply briefly."
)


@fsm_app.command()
def check(
    files: Annotated[list[str], typer.Argument(help="Machine files (YAML).")],
) -> None:
    """Check machine files: every problem, or a one-line summary.

    Each problem is printed as file:line:column: what is wrong (exit 1); a good file
    gets one line with its states, agents and edges (exit 0).
    """
    from ..fsm import load_spec

    failed = False
    for path in files:
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except (OSError, UnicodeDecodeError) as exc:
            typer.echo(f"{path}: cannot read it: {exc}")
            failed = True
            continue
        try:
            spec = load_spec(text, path)
        except MachineSpecError as exc:
            for problem in exc.problems:
                typer.echo(str(problem))
            count = len(exc.problems)
            typer.echo(f"{path}: {count} problem{'s' if count != 1 else ''}")
            failed = True
            continue
        typer.echo(f"{path}: ok: {spec.summary()}")
    if failed:
        raise typer.Exit(1)


@fsm_app.command()
def render(
    file: Annotated[str, typer.Argument(help="Machine file (YAML).")],
    format: Annotated[str, typer.Option("--format", help="mermaid or dot.")] = "mermaid",  # noqa: A002
) -> None:
    """Print the machine as a diagram, each guard on its edge.

    A Mermaid state diagram (default), or Graphviz dot with --format dot.
    """
    from ..fsm import Machine

    if format not in ("mermaid", "dot"):
        raise ConfigurationError(f"--format {format!r}: use mermaid or dot")
    typer.echo(Machine.from_file(file).render(format), nl=False)  # type: ignore[arg-type]


@fsm_app.command()
def run(
    file: Annotated[str, typer.Argument(help="Machine file (YAML).")],
    request: Annotated[str, typer.Option(help="The request the run serves.")],
    model: Annotated[str, typer.Option(
        help="Model for every declared agent, e.g. gpt-4o-mini, claude-opus-4-7, openai:NAME (key"
             " from OPENAI_API_KEY / ANTHROPIC_API_KEY).")],
    base_url: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="OpenAI-compatible server for --model (vLLM, llama.cpp, Ollama).")] = None,
    db: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="SQLite file journaling the run (checkpoints, summons), so --resume can "
             "continue it.")] = None,
    resume: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="Continue this run id from --db instead of starting a new run.")] = None,
    as_json: Annotated[bool, typer.Option(
        "--json",
        help="Print the result as one JSON object.")] = False,
) -> None:
    """Run the machine on a request; print the trace and the answer.

    Each declared agent is an agent on --model, its objective the state's description.
    Exit 1 when the run ends on a cap rather than in a terminal state.
    """
    from ..agents import Agent
    from ..fsm import Machine
    from ..models import infer_model

    machine = Machine.from_file(file)
    if resume and not db:
        raise ConfigurationError("--resume needs the --db the run was journaled in")
    llm = infer_model(model, base_url=base_url)
    spec = machine.spec
    agents: dict[str, Agent[Any]] = {
        name: Agent(agent.instructions or _INSTRUCTIONS.format(agent=name, machine=spec.name),
                    model=llm, name=name)
        for name, agent in spec.agents.items()
    }
    store = _journal(db) if db else None
    try:
        if resume:
            assert store is not None
            result = machine.resume_sync(resume, store=store, agents=agents)
        else:
            result = machine.run_sync(request, agents=agents, store=store)
    finally:
        if store is not None:
            store.close()
    if as_json:
        typer.echo(json.dumps(result.to_json(), ensure_ascii=False, default=str))
        return
    typer.echo(f"run {result.run_id}: machine {result.machine}")
    for t in result.trace:
        guard = f"[{t.guard}]" if t.guard else "[always]"
        writers: dict[str, list[str]] = {}
        for w in t.writes:
            writers.setdefault(w.by, [])
            if w.field not in writers[w.by]:
                writers[w.by].append(w.field)
        wrote = "; ".join(f"{by}: {', '.join(names)}" for by, names in writers.items())
        typer.echo(f"{t.index:>3}  {t.from_state} -> {t.to_state}  {guard}  "
                   f"{wrote or '-'}  {t.duration_s:.2f} s")
    usage = result.usage
    typer.echo(f"{result.stop_reason} in state {result.state} after {len(result.trace)} "
               f"transitions ({usage.model_calls} model calls, {usage.total_tokens} tokens)"
               + (f": {result.detail}" if result.detail else ""))
    if "answer" in spec.fields:
        typer.echo(f"answer: {result.context.get('answer') or '(none)'}")
    else:
        typer.echo("context: " + json.dumps(result.context, ensure_ascii=False))
    if not result.completed:
        raise typer.Exit(1)


def _journal(path: str) -> Any:
    """The SQLite store at ``path``, when it can journal steps."""
    from ..journal import Journal
    from ..work.stores.sqlite import SqliteStore

    store = SqliteStore(path)
    if not isinstance(store, Journal):
        store.close()
        raise ConfigurationError("--db: this foreperson's SqliteStore cannot journal steps "
                                 "yet, so a run cannot be checkpointed in SQLite; run "
                                 "without --db")
    return store


def register(app: typer.Typer) -> None:
    """Add the ``fsm`` command group to ``app``."""
    app.add_typer(fsm_app, name="fsm")
