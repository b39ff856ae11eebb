"""``foreperson tickets``: the nightly ticket job on a CSV / JSON / JSONL file."""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import anyio
import typer

if TYPE_CHECKING:
    from ..tickets.job import JobProgress, JobReport, TicketJob
    from ..tickets.llm import LlmTicketModel
    from ..tickets.model import TicketModel
    from ..tickets.reader import TicketFile

from ..errors import ConfigurationError
from ..work.store import TaskStore
from ._common import (
    DB_HELP,
    DSN_HELP,
    METRICS_HOST_HELP,
    METRICS_PORT_HELP,
    open_store,
    redact,
    start_metrics,
)

EXAMPLES_HELP = ("Labelled tickets to train on (CSV/JSON/JSONL with text, label and answer "
                 "columns); default: the small multilingual set bundled with foreperson.")


def tickets(
    input_file: Annotated[Path, typer.Argument(metavar="INPUT", help="Tickets: .csv, .json (a list) or .jsonl.")],
    workers: Annotated[int, typer.Option("--workers", "-w", min=0, max=1024, help="Local workers; 0 = only supervise (with --dsn, remote `foreperson worker foreperson.tickets.job` processes do the work).")] = 8,
    db: Annotated[Optional[str], typer.Option(help=DB_HELP + " Created when missing; re-run with the same --db to continue after a crash. Default: INPUT's name + .tasks.db in the current folder.")] = None,  # noqa: UP045
    dsn: Annotated[Optional[str], typer.Option(help=DSN_HELP)] = None,  # noqa: UP045
    schema: Annotated[Optional[str], typer.Option(help="PostgreSQL schema for this job's tasks (default: $FOREPERSON_PG_SCHEMA or foreperson); one per input, like --db. Remote workers need the same FOREPERSON_PG_SCHEMA.")] = None,  # noqa: UP045
    out: Annotated[Optional[Path], typer.Option(help="Results, one JSON line per ticket. Default: INPUT's name + .results.jsonl in the current folder.")] = None,  # noqa: UP045
    examples: Annotated[Optional[Path], typer.Option(help=EXAMPLES_HELP)] = None,  # noqa: UP045
    examples_text_column: Annotated[Optional[str], typer.Option(help="Text column of --examples (default: text / body / message / description / content, with subject prepended when present).")] = None,  # noqa: UP045
    examples_label_column: Annotated[Optional[str], typer.Option(help="Label (category) column of --examples (default: label / category / queue / type / class).")] = None,  # noqa: UP045
    id_column: Annotated[Optional[str], typer.Option(help="Ticket id column (default: id / ticket_id; else the row number).")] = None,  # noqa: UP045
    subject_column: Annotated[Optional[str], typer.Option(help="Subject column (default: subject / title).")] = None,  # noqa: UP045
    body_column: Annotated[Optional[str], typer.Option(help="Body column (default: body / text / description / message).")] = None,  # noqa: UP045
    min_confidence: Annotated[Optional[float], typer.Option(min=0.0, max=1.0, help="Below this classifier probability a ticket needs a human (default: twice chance; 0.5 with --model).")] = None,  # noqa: UP045
    max_attempts: Annotated[int, typer.Option(min=1, max=100, help="Attempts per task before it is parked DEAD.")] = 3,
    stale_after: Annotated[float, typer.Option(min=0.1, max=7 * 86400.0, help="Seconds without a heartbeat before a task is reclaimed (3-5x the slowest task).")] = 90.0,
    model: Annotated[Optional[str], typer.Option(help="Use a language model instead of the offline classifier, e.g. gpt-4o-mini, claude-opus-4-7, openai:NAME (key from OPENAI_API_KEY / ANTHROPIC_API_KEY). The offline classifier is the default.")] = None,  # noqa: UP045
    base_url: Annotated[Optional[str], typer.Option(help="OpenAI-compatible server for --model (vLLM, llama.cpp, Ollama).")] = None,  # noqa: UP045
    progress: Annotated[Optional[bool], typer.Option("--progress/--no-progress", help="Live progress display (default: on a terminal).")] = None,  # noqa: UP045
    metrics_port: Annotated[Optional[int], typer.Option(min=0, max=65535, help=METRICS_PORT_HELP)] = None,  # noqa: UP045
    metrics_host: Annotated[str, typer.Option(help=METRICS_HOST_HELP)] = "127.0.0.1",
) -> None:
    """Classify every ticket, draft a reply and flag what needs a human.

    Each ticket becomes three durable tasks (classify -> draft -> triage) run by
    --workers workers; each ticket gets exactly one line in --out. Re-running the same
    command after a crash continues where it stopped: finished tickets are not redone
    and no line is written twice.

    Example: foreperson tickets tickets.csv --workers 8 --db tickets.db --out results.jsonl
    """
    from ..tickets.job import TicketJob, check_output_path
    from ..tickets.model import TicketModel, bundled_examples, load_examples
    from ..tickets.reader import read_tickets

    if examples is None and (examples_text_column or examples_label_column):
        raise ConfigurationError("--examples-text-column / --examples-label-column go with "
                                 "--examples FILE")
    stem = input_file.name.rsplit(".", 1)[0]
    if not dsn and not db:
        db = f"{stem}.tasks.db"
    out = check_output_path(out or Path(f"{stem}.results.jsonl"))   # before any work
    ticket_file = read_tickets(input_file, id_column=id_column, subject_column=subject_column,
                               body_column=body_column)        # fails before any work
    for line, ticket_id, reason in ticket_file.skipped:
        typer.echo(f"{input_file}:{line}: skipped ticket {ticket_id or '?'}: {reason}", err=True)
    if not ticket_file.tickets:
        raise ConfigurationError(f"{input_file}: no tickets with text to process")
    if examples is not None:
        training = load_examples(examples, text_column=examples_text_column,
                                 label_column=examples_label_column)
        per_label = Counter(e.category for e in training)
        thin = sorted(label for label, n in per_label.items() if n < 3)
        if thin:
            typer.echo(f"warning: {examples}: {len(thin)} label(s) have fewer than 3 examples "
                       f"({', '.join(thin[:5])}{' ...' if len(thin) > 5 else ''}); the "
                       "classifier will be unsure about them", err=True)
    else:
        training = bundled_examples()
    if model is not None:
        from ..models import check_reachable, infer_model
        from ..tickets.llm import LlmTicketModel
        # before any work: a server that cannot be reached at all (no network, a typo,
        # nothing listening) is a configuration error, also for the providers' own APIs
        check_reachable(base_url or infer_model(model, max_attempts=1))
        ticket_model: TicketModel | LlmTicketModel = LlmTicketModel(
            model, training, base_url=base_url, min_confidence=min_confidence)
    else:
        if base_url is not None:
            raise ConfigurationError("--base-url goes with --model")
        ticket_model = TicketModel(training, min_confidence=min_confidence)
    if workers == 0 and not dsn:
        raise ConfigurationError("--workers 0 only makes sense with --dsn (remote workers)")
    if schema and not dsn:
        raise ConfigurationError("--schema goes with --dsn")
    store = open_store(db, dsn, schema=schema)
    show = sys.stderr.isatty() if progress is None else progress
    total = len(ticket_file.tickets)
    typer.echo(f"{total} tickets from {input_file} -> {out} (tasks in "
               f"{db or redact(dsn or '')}), {workers} workers, categories: "
               f"{', '.join(ticket_model.labels)}", err=True)
    if workers == 0:
        typer.echo("remote workers: foreperson worker foreperson.tickets.job --dsn DSN, started "
                   "with the same FOREPERSON_TICKETS_EXAMPLES (and FOREPERSON_TICKETS_MODEL) "
                   "as this job's --examples / --model", err=True)
    stop_metrics = start_metrics(store, metrics_port, metrics_host)
    try:
        report = _run_with_display(ticket_file, store, out, workers,
                                   TicketJob(ticket_model, max_attempts), stale_after,
                                   None if dsn else db, show, total)
    except KeyboardInterrupt:
        typer.echo(f"interrupted: finished tickets are in {out}; run the same command again "
                   "to continue", err=True)
        raise typer.Exit(130) from None
    finally:
        stop_metrics()
        store.close()
    _print_summary(report, out)
    if report.dead:
        raise typer.Exit(1)


def _run_with_display(ticket_file: TicketFile, store: TaskStore, out: Path, workers: int,
                      job: TicketJob, stale_after: float, exclusive_db: str | None,
                      show: bool, total: int) -> JobReport:
    from ..tickets.job import run_job

    last_plain = [0.0]
    first_written: list[int] = []

    def describe(p: JobProgress) -> str:
        first_written[:] = first_written or [p.written]    # done by an earlier run
        rate = (p.written - first_written[0]) / max(p.elapsed_s, 1e-9)
        return (f"{p.written}/{total} tickets, {rate:.1f}/s"
                + (f", {p.dead} cannot be written (DEAD tasks)" if p.dead else ""))

    async def go(callback: Callable[[JobProgress], None]) -> JobReport:
        return await run_job(ticket_file, store, out, workers=workers, job=job,
                             stale_after=stale_after, exclusive_db=exclusive_db,
                             progress=callback)

    if not show:
        def plain(p: JobProgress) -> None:
            now = time.monotonic()
            if now - last_plain[0] >= 5.0 or p.written + p.dead == total:
                last_plain[0] = now
                typer.echo(describe(p), err=True)
        return anyio.run(go, plain)

    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("[bold]tickets"), BarColumn(), TextColumn("{task.description}"),
                  TimeElapsedColumn(), console=Console(stderr=True), transient=False) as bar:
        handle = bar.add_task("starting", total=total)

        def live(p: JobProgress) -> None:
            bar.update(handle, completed=p.written, description=describe(p))

        return anyio.run(go, live)


def _print_summary(report: JobReport, out: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(f"{report.written}/{report.tickets} tickets written to {out} "
                  f"in {report.elapsed_s:.1f} s")
    table = Table()
    table.add_column("category")
    table.add_column("tickets", justify="right")
    for category, n in report.categories.most_common():
        table.add_row(category, str(n))
    console.print(table)
    console.print("priority: " + ", ".join(f"{p} {n}" for p, n in report.priorities.most_common()))
    console.print(f"needs a human: {report.needs_human}; retries: {report.retries}; "
                  f"reclaimed: {report.reclaimed}; skipped rows: {len(report.skipped)}")
    if report.dead:
        console.print(f"[red]{len(report.dead)} DEAD task(s)[/red] "
                      "(fix the cause, then: foreperson retry --all-dead --db ...):")
        for task_id, error in report.dead[:20]:
            console.print(f"  {task_id}: {error}")


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
    app.command()(tickets)
