"""``foreperson tickets``: the nightly ticket job on a CSV / JSON / JSONL file.

Every usage error is found before the model is trained (which takes seconds): the
options, the input file, and whether ``--out`` and ``--db`` can be written.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import anyio
import typer

if TYPE_CHECKING:
    from ..tickets.job import JobProgress, JobReport, TicketJob
    from ..tickets.model import Example
    from ..tickets.reader import TicketFile

from ..errors import ConfigurationError
from ..work.leases import DEFAULT_LEASE_S
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

EXAMPLES_HELP = ("Your labelled tickets to train on (CSV/JSON/JSONL with text, label and "
                 "answer columns, e.g. a support export with its queue and the reply sent). "
                 "Default: the small demo set bundled with foreperson, for trying the job only.")


def default_names(input_file: Path) -> tuple[str, str]:
    """Default ``--db`` and ``--out`` for an input: its name and a hash of its full path,
    in the current folder, so two inputs of one name (day1/tickets.csv, day2/tickets.csv)
    never share a database or results file.

    Returns:
        ``(db, out)`` file names.
    """
    stem = input_file.name.rsplit(".", 1)[0] or "tickets"
    digest = hashlib.sha256(str(input_file.resolve()).encode()).hexdigest()[:8]
    return f"{stem}.{digest}.tasks.db", f"{stem}.{digest}.results.jsonl"


def _check_options(*, input_file: Path | None, evaluate: bool, workers: int, db: str | None,
                   dsn: str | None, schema: str | None, examples: Path | None,
                   example_columns: bool, model: str | None, base_url: str | None) -> None:
    """Every option combination that cannot work, before anything is read or trained.

    Raises:
        ConfigurationError: the first such combination, naming the options.
    """
    problems = [
        (evaluate and examples is None, "--evaluate needs --examples FILE (the labelled "
                                        "tickets to evaluate on)"),
        (evaluate and model is not None, "--evaluate evaluates the offline model: leave out "
                                         "--model"),
        (evaluate and input_file is not None,
         f"--evaluate scores --examples on its own held-out rows and does not read "
         f"{input_file}: leave INPUT out (or --evaluate out to run the job)"),
        (not evaluate and input_file is None, "give the tickets file: foreperson tickets "
                                              "INPUT (or --evaluate --examples FILE)"),
        (examples is None and example_columns, "--examples-text-column / "
                                               "--examples-label-column go with --examples FILE"),
        (bool(db) and bool(dsn), "give --db (SQLite) or --dsn (PostgreSQL), not both"),
        (workers == 0 and not dsn, "--workers 0 only makes sense with --dsn (remote workers)"),
        (bool(schema) and not dsn, "--schema goes with --dsn"),
        (base_url is not None and model is None, "--base-url goes with --model"),
    ]
    for wrong, message in problems:
        if wrong:
            raise ConfigurationError(message)
    for path, option in ((input_file, "INPUT"), (examples, "--examples")):
        if path is None:
            continue
        if str(path) == "-":
            raise ConfigurationError(f"{option}: reading from standard input is not "
                                     "supported; save the tickets to a file and give its path")
        if not path.is_file():
            raise ConfigurationError(f"{option} {path}: "
                                     + ("no such file" if not path.exists() else "not a file"))


def _check_paths(db: str | None, out: Path) -> None:
    """``--db`` and ``--out`` can be written and are not one file.

    Raises:
        ConfigurationError: naming the option.
    """
    from ..tickets.job import check_output_path, check_writable_path

    if db and Path(db).resolve() == out.resolve():
        raise ConfigurationError(f"--db and --out are the same file ({out}): the task "
                                 "database and the results need a file each")
    check_output_path(out)
    if db:
        check_writable_path(db, "--db", "the SQLite task database")


def _prune_earlier(age: str, *, db: str | None, dsn: str | None, schema: str | None) -> None:
    """``--prune-older-than``: delete earlier runs' task databases, saying which."""
    import time

    from ..tickets.retention import prune_earlier_runs
    from ..work.retention import parse_age

    gone = prune_earlier_runs(older_than_s=parse_age(age, what="--prune-older-than"),
                              now=time.time(), db=db, dsn=dsn, schema=schema)
    for run in gone:
        typer.echo(f"deleted the task database of an earlier run: {run.where} ({run.tasks} "
                   f"tasks, the last finished {run.last_s / 86400:.1f} days ago)")


def tickets(  # noqa: C901, PLR0915 - the command's options; a job entry point owning the checks comes next
    input_file: Annotated[Optional[Path], typer.Argument(  # noqa: UP045
        metavar="INPUT",
        help="Tickets: .csv, .json (a list) or .jsonl.")] = None,
    workers: Annotated[int, typer.Option(
        "--workers", "-w", min=0, max=1024,
        help="Local workers for --model (its calls wait on the network); the offline model is "
             "CPU-bound and works in batches on one local worker whatever this says. 0 = only "
             "supervise (with --dsn, remote `foreperson worker foreperson.tickets.job` processes "
             "do the work).")] = 8,
    db: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help=DB_HELP + " Created when missing; re-run with the same --db to continue after "
             "a crash. Default: INPUT's name, a hash of its full path and .tasks.db, in the "
             "current folder.")] = None,
    dsn: Annotated[Optional[str], typer.Option(help=DSN_HELP)] = None,  # noqa: UP045
    schema: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="PostgreSQL schema for this job's tasks (default: $FOREPERSON_PG_SCHEMA or "
             "foreperson); one per input, like --db. Remote workers need the same "
             "FOREPERSON_PG_SCHEMA.")] = None,
    out: Annotated[Optional[Path], typer.Option(  # noqa: UP045
        help="Results, one JSON line per ticket. Default: INPUT's name, a hash of its full path "
             "and .results.jsonl, in the current folder.")] = None,
    examples: Annotated[Optional[Path], typer.Option(help=EXAMPLES_HELP)] = None,  # noqa: UP045
    examples_text_column: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="Text column of --examples (default: text / body / message / description / content, "
             "with subject prepended when present).")] = None,
    examples_label_column: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="Label (category) column of --examples (default: label / category / queue / type / "
             "class).")] = None,
    id_column: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="Ticket id column (default: id / ticket_id; else the row number).")] = None,
    subject_column: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="Subject column (default: subject / title).")] = None,
    body_column: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="Body column (default: body / text / description / message).")] = None,
    target_precision: Annotated[float, typer.Option(
        min=0.5, max=1.0,
        help="Share of tickets NOT flagged for a human that should be classified right; the "
             "confidence threshold is fitted on held-out examples to reach it.")] = 0.9,
    min_confidence: Annotated[Optional[float], typer.Option(  # noqa: UP045
        min=0.0, max=1.0,
        help="A fixed confidence threshold (0-1) instead of the fitted one (0.5 with "
             "--model).")] = None,
    max_attempts: Annotated[int, typer.Option(
        min=1, max=100,
        help="Attempts per task before it is parked DEAD.")] = 3,
    stale_after: Annotated[float, typer.Option(
        min=0.1, max=7 * 86400.0,
        help="Seconds without a heartbeat before a task is reclaimed (3-5x the slowest "
             "task).")] = DEFAULT_LEASE_S,
    model: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="Use a language model instead of the offline classifier, e.g. gpt-4o-mini, claude-"
             "opus-4-7, openai:NAME (key from OPENAI_API_KEY / ANTHROPIC_API_KEY).")] = None,
    base_url: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="OpenAI-compatible server for --model (vLLM, llama.cpp, Ollama).")] = None,
    evaluate: Annotated[bool, typer.Option(
        "--evaluate",
        help="Do not run the job: hold out half of --examples, train on the rest and print "
             "accuracy, macro-F1, a per-label table, the fitted threshold and the precision of "
             "unflagged tickets, against baselines.")] = False,
    progress: Annotated[Optional[bool], typer.Option(  # noqa: UP045
        "--progress/--no-progress",
        help="Live progress display (default: on a terminal).")] = None,
    metrics_port: Annotated[Optional[int], typer.Option(  # noqa: UP045
        min=0, max=65535, help=METRICS_PORT_HELP)] = None,
    metrics_host: Annotated[str, typer.Option(help=METRICS_HOST_HELP)] = "127.0.0.1",
    prune_older_than: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="First delete the task databases of earlier runs (each input has its own: "
             "`*.tasks.db` in this run's folder, or with --dsn its schema) whose every task "
             "finished longer ago than this, e.g. `30d`; their results files stay.")] = None,
) -> None:
    """Classify every ticket, draft a reply and flag what needs a human.

    Each ticket becomes three durable tasks (classify -> draft -> triage) run by
    --workers workers; each ticket gets exactly one line in --out. Re-running the same
    command after a crash continues where it stopped: finished tickets are not redone
    and no line is written twice.

    Example: foreperson tickets tickets.csv --examples labelled.csv --out results.jsonl
    """
    _check_options(input_file=input_file, evaluate=evaluate, workers=workers, db=db, dsn=dsn,
                   schema=schema, examples=examples,
                   example_columns=bool(examples_text_column or examples_label_column),
                   model=model, base_url=base_url)
    if evaluate:
        assert examples is not None
        _evaluate(examples, examples_text_column, examples_label_column, target_precision,
                  min_confidence)
        return
    assert input_file is not None
    from ..tickets.reader import read_tickets

    default_db, default_out = default_names(input_file)
    if not dsn and not db:
        db = default_db
    out = out or Path(default_out)
    _check_paths(db if not dsn else None, out)                      # before any work
    if prune_older_than:
        _prune_earlier(prune_older_than, db=None if dsn else db, dsn=dsn, schema=schema)
    ticket_file = read_tickets(input_file, id_column=id_column, subject_column=subject_column,
                               body_column=body_column)             # fails before any work
    for line, ticket_id, reason in ticket_file.skipped:
        typer.echo(f"{input_file}:{line}: skipped ticket {ticket_id or '?'}: {reason}", err=True)
    if not ticket_file.tickets:
        raise ConfigurationError(f"{input_file}: no tickets with text to process")
    training = _training_set(examples, examples_text_column, examples_label_column)
    fresh_db = db is not None and not dsn and not Path(db).exists()
    store = open_store(db, dsn, schema=schema)
    try:      # a re-run with other examples, model or settings: refused before training
        written = _check_earlier_run(ticket_file, store, out, training, model,
                                     target_precision, min_confidence)
        if len(written) == len(ticket_file.tickets):
            typer.echo(f"nothing to do: all {len(written)} tickets of {input_file} are already "
                       f"in {out} (an earlier run finished them)", err=True)
            store.close()
            return
        _warn_thin_labels(examples, training)
        job = _make_job(training, model, base_url, max_attempts, target_precision,
                        min_confidence)
    except BaseException:
        store.close()
        if fresh_db:                 # refused before any work: leave no database behind
            for suffix in ("", "-wal", "-shm"):
                Path(f"{db}{suffix}").unlink(missing_ok=True)
        raise
    show = sys.stderr.isatty() if progress is None else progress
    total = len(ticket_file.tickets)
    typer.echo(f"{total} tickets from {input_file} -> {out} (tasks in "
               f"{db or redact(dsn or '') + (f', schema {schema}' if schema else '')}), "
               f"{_workers_line(job, workers)}, categories: {', '.join(job.model.labels)}",
               err=True)
    hint = _remote_hint(examples, model, base_url, schema)
    if workers == 0:
        typer.echo(f"remote workers: {hint}", err=True)
    stop_metrics = start_metrics(store, metrics_port, metrics_host)
    try:
        report = _run_with_display(ticket_file, store, out, workers, job, stale_after,
                                   None if dsn else db, show, total, hint)
    except KeyboardInterrupt:
        typer.echo(f"interrupted: finished tickets are in {out}; run the same command again "
                   "to continue", err=True)
        raise typer.Exit(130) from None
    finally:
        stop_metrics()
        store.close()
    _print_summary(report, out, job, bundled=examples is None and model is None)
    if report.dead:
        raise typer.Exit(1)


def _training_set(examples: Path | None, text_column: str | None,
                  label_column: str | None) -> list[Example]:
    from ..tickets.model import bundled_examples, load_examples

    if examples is None:
        return bundled_examples()
    return load_examples(examples, text_column=text_column, label_column=label_column)


def _warn_thin_labels(examples: Path | None, training: list[Example]) -> None:
    if examples is None:
        return
    per_label = Counter(e.category for e in training)
    thin = sorted(label for label, n in per_label.items() if n < 3)
    if thin:
        typer.echo(f"warning: {examples}: {len(thin)} label(s) have fewer than 3 examples "
                   f"({', '.join(thin[:5])}{' ...' if len(thin) > 5 else ''}); the "
                   "classifier will be unsure about them", err=True)


def _check_earlier_run(ticket_file: Any, store: Any, out: Path, training: list[Example],
                       model: str | None, target_precision: float,
                       min_confidence: float | None) -> set[str]:
    from ..tickets.job import check_earlier_run, fingerprint_of, job_settings

    kind = "LlmTicketModel" if model is not None else "TicketModel"
    return check_earlier_run(ticket_file, store, out,
                             fingerprint=fingerprint_of(kind, model, training),
                             settings=job_settings(target_precision, min_confidence))


def _make_job(training: list[Example], model: str | None, base_url: str | None,
              max_attempts: int, target_precision: float,
              min_confidence: float | None) -> TicketJob:
    from ..tickets.job import TicketJob
    from ..tickets.model import TicketModel

    def say(line: str) -> None:
        typer.echo(line, err=True)

    if model is not None:
        from ..models import check_reachable, infer_model
        from ..tickets.llm import LlmTicketModel
        # before any work: a server that cannot be reached at all (no network, a typo,
        # nothing listening) is a configuration error, also for the providers' own APIs
        check_reachable(base_url or infer_model(model, max_attempts=1))
        llm: Any = LlmTicketModel(model, training, base_url=base_url,
                                  min_confidence=min_confidence)
        return TicketJob(llm, max_attempts, target_precision, min_confidence)
    offline = TicketModel(training, target_precision=target_precision,
                          min_confidence=min_confidence, progress=say)
    if offline.training_s > 3:
        say(f"trained on {len(training)} examples in {offline.training_s:.1f} s")
    return TicketJob(offline, max_attempts, target_precision, min_confidence)


def _workers_line(job: TicketJob, workers: int) -> str:
    from ..tickets.job import local_workers

    local = local_workers(job, workers)
    if workers and local != workers:
        return (f"batches of {job.model.batch_size} tickets on one local worker (the offline "
                "model is CPU-bound; --workers counts with --model)")
    return f"{workers} workers"


def _remote_hint(examples: Path | None, model: str | None, base_url: str | None,
                 schema: str | None) -> str:
    """How to start workers that run this job's model."""
    env = []
    if examples is not None:
        env.append(f"FOREPERSON_TICKETS_EXAMPLES={examples.resolve()}")
    if model is not None:
        env.append(f"FOREPERSON_TICKETS_MODEL={model}")
    if base_url is not None:
        env.append(f"FOREPERSON_TICKETS_BASE_URL={base_url}")
    if schema:
        env.append(f"FOREPERSON_PG_SCHEMA={schema}")
    return ("start them with: " + " ".join(env + ["foreperson worker foreperson.tickets.job "
                                                  "--dsn DSN --concurrency 8"])
            + " (the same examples and model as this job, on every machine)")


def _evaluate(examples: Path, text_column: str | None, label_column: str | None,
              target_precision: float, min_confidence: float | None) -> None:
    from ..tickets.evaluate import evaluate, format_evaluation
    from ..tickets.model import load_examples

    rows = load_examples(examples, text_column=text_column, label_column=label_column)
    typer.echo(f"evaluating on {len(rows)} labelled rows of {examples} ...", err=True)
    result = evaluate(rows, target_precision=target_precision, min_confidence=min_confidence)
    typer.echo(format_evaluation(result, source=str(examples)))
    options = [f"--examples {examples}"]
    if label_column:
        options.append(f"--examples-label-column {label_column}")
    if text_column:
        options.append(f"--examples-text-column {text_column}")
    if result.suggested is not None:
        options.append(f"--target-precision {result.suggested.target_precision:g}")
    typer.echo(f"\nto run the job with this model: foreperson tickets TICKETS.csv "
               f"{' '.join(options)}")


def _run_with_display(ticket_file: TicketFile, store: TaskStore, out: Path, workers: int,
                      job: TicketJob, stale_after: float, exclusive_db: str | None,
                      show: bool, total: int, hint: str) -> JobReport:
    from ..tickets.job import run_job

    last_plain = [0.0]
    first_written: list[int] = []

    def describe(p: JobProgress) -> str:
        first_written[:] = first_written or [p.written]    # done by an earlier run
        rate = (p.written - first_written[0]) / max(p.elapsed_s, 1e-9)
        return (f"{p.written}/{total} tickets" + (f", {rate:.1f}/s" if rate > 0 else "")
                + (f", {p.dead} cannot be written (DEAD tasks)" if p.dead else ""))

    def notice(line: str) -> None:
        typer.echo(f"warning: {line}", err=True)

    async def go(callback: Callable[[JobProgress], None]) -> JobReport:
        return await run_job(ticket_file, store, out, workers=workers, job=job,
                             stale_after=stale_after, exclusive_db=exclusive_db,
                             progress=callback, notice=notice, remote_hint=hint)

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


def _seconds(s: float) -> str:
    """A duration a person reads: ``0.35 s``, ``12.4 s``."""
    return f"{s:.2f} s" if s < 1 else f"{s:.1f} s"


def _share(n: int, total: int) -> str:
    return f"{n} ({n / total:.0%})" if total else str(n)


def _threshold_lines(report: JobReport, job: TicketJob, bundled: bool) -> list[str]:
    """What the confidence threshold is and what it did."""
    done = sum(report.categories.values())
    low = report.reasons.get("low confidence", 0)
    calibration = getattr(job.model, "calibration", None)
    lines = []
    if calibration is None or job.min_confidence is not None:
        lines.append(f"confidence threshold {job.threshold(None):.2f} (fixed): "
                     f"{_share(low, done)} of the tickets were below it")
    elif calibration.reachable:
        lines.append(f"confidence threshold {calibration.threshold:.2f}, fitted on the "
                     f"cross-validated predictions of {calibration.held_out} examples for "
                     f"{calibration.target_precision:.0%} precision of unflagged tickets: "
                     f"{_share(low, done)} of the tickets went to a human for it "
                     f"({report.low_confidence_only} for that reason alone)")
    else:
        lines.append(f"no confidence threshold reaches {calibration.target_precision:.0%} "
                     f"precision on the cross-validated predictions of the "
                     f"{calibration.held_out} examples (right {calibration.accuracy:.0%} of "
                     "the time): every ticket "
                     "went to a human for low confidence")
        lower = job.model.reachable_target() if not bundled else None
        if lower is not None:
            lines.append(f"--target-precision {lower.target_precision:g} would let about "
                         f"{lower.coverage:.0%} of tickets through unflagged "
                         f"({lower.precision:.0%} of those right in cross-validation); "
                         "more labelled examples raise both")
    far = report.reasons.get("no similar answered example", 0)
    if not bundled and done and far >= 0.3 * done and far == max(report.reasons.values()):
        lines.append(f"{_share(far, done)} of the tickets had no similar answered example, the "
                     "most common reason: answered tickets like them added to --examples let "
                     "more drafts through")
    if bundled:
        lines.append("note: the bundled model is a 52-ticket demo set for trying the job, not "
                     "for real traffic: train on your own labelled tickets with --examples FILE "
                     "(see --evaluate) or use a language model with --model")
    return lines


def _print_summary(report: JobReport, out: Path, job: TicketJob, *, bundled: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, soft_wrap=True)
    earlier = (f" ({report.earlier} of them by an earlier run on this task database)"
               if report.earlier else "")
    console.print(f"{report.written}/{report.tickets} tickets written to {out} "
                  f"in {_seconds(report.elapsed_s)}{earlier}")
    table = Table()
    table.add_column("category")
    table.add_column("tickets", justify="right")
    for category, n in report.categories.most_common():
        table.add_row(category, str(n))
    console.print(table)
    console.print("priority: " + ", ".join(f"{p} {n}" for p, n in report.priorities.most_common()))
    console.print("language: " + ", ".join(f"{p} {n}" for p, n in report.languages.most_common()))
    done = sum(report.categories.values())
    why = ", ".join(f"{kind} {n}" for kind, n in report.reasons.most_common())
    console.print(f"needs a human: {_share(report.needs_human, done)}"
                  + (f" ({why})" if why else ""))
    for line in _threshold_lines(report, job, bundled):
        console.print(line)
    console.print(f"retries: {report.retries}; reclaimed: {report.reclaimed}; skipped rows: "
                  f"{len(report.skipped)}")
    if report.dead:
        where = "--dsn ... --schema ..." if os.environ.get("FOREPERSON_PG_SCHEMA") else "--db ..."
        console.print(f"[red]{len(report.dead)} DEAD task(s)[/red] "
                      f"(fix the cause, then: foreperson retry --all-dead {where}):")
        for task_id, error in report.dead[:20]:
            console.print(f"  {task_id}: {error}")


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
    app.command()(tickets)
