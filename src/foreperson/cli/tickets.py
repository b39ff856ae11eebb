"""``foreperson tickets``: the nightly ticket job on a CSV / JSON / JSONL file.

The command parses its options, refuses the combinations that cannot work, and calls the
job's entry point (:func:`foreperson.tickets.job.run_tickets`), which finds every other
usage error before the model is trained (which takes seconds): the input file, whether
``--out`` and ``--db`` can be written, a re-run that does not match the earlier one. The
command prints what the job tells it as it goes, its progress and the summary.
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import sys
import time
from array import array
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from typer.core import TyperCommand

if TYPE_CHECKING:
    from ..tickets.job import JobProgress, JobReport, JobStart, TicketJob
    from ..tickets.retention import EarlierRun

from ..errors import ConfigurationError
from ..work.leases import DEFAULT_LEASE_S
from ._common import (
    DB_HELP,
    DSN_HELP,
    METRICS_HOST_HELP,
    METRICS_PORT_HELP,
    printable,
    redact,
    shown,
    start_metrics,
)

EXAMPLES_HELP = ("Your labelled tickets to train on (CSV/JSON/JSONL with text, label and "
                 "answer columns, e.g. a support export with its queue and the reply sent). "
                 "Default: the small demo set bundled with foreperson, for trying the job only.")


def _check_options(*, input_file: Path | None, evaluate: bool, workers: int, db: str | None,
                   dsn: str | None, schema: str | None, examples: Path | None,
                   example_columns: bool, model: str | None, base_url: str | None,
                   timeout: float | None = None, never_send: bool = False) -> None:
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
        (timeout is not None and model is None, "--timeout goes with --model (the offline "
                                                "model makes no requests)"),
        (evaluate and never_send, "--evaluate scores the classifier and writes no drafts: "
                                  "leave out --never-send"),
    ]
    for wrong, message in problems:
        if wrong:
            raise ConfigurationError(message)


def tickets(
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
    examples_answer_column: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="Answer column of --examples: the reply a draft copies (default: answer / reply / "
             "response / draft_reply; without one, drafts are templates).")] = None,
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
    timeout: Annotated[Optional[float], typer.Option(  # noqa: UP045
        min=0.1, max=3600.0,
        help="Seconds one --model request may take before it fails (default 30). A server "
             "that stops answering costs the calls in flight this long once; then its calls "
             "fail at once, the run ends naming the server, and running the same command "
             "again once it answers does the tickets it left.")] = None,
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
    raise_priority: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="Triage signals that raise a ticket's priority to high, separated by commas "
             "(outage, security, legal, 'angry customer', 'asks for a person'; 'none' for "
             "none). Default: outage,security,legal.")] = None,
    never_send: Annotated[Optional[Path], typer.Option(  # noqa: UP045
        help="A UTF-8 text file of phrases your team never wants sent, one per line (lines "
             "starting with '#' are comments), e.g. a step your past answers got wrong: a "
             "draft that says one (as whole words, any case) is flagged for a person, naming "
             "the phrase and its line. A re-run on the same --db needs the same phrases.")] = None,
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
                   example_columns=bool(examples_text_column or examples_label_column
                                        or examples_answer_column),
                   model=model, base_url=base_url, timeout=timeout,
                   never_send=never_send is not None)
    if evaluate:
        assert examples is not None
        _evaluate(examples, examples_text_column, examples_label_column, target_precision,
                  min_confidence)
        return
    assert input_file is not None
    from ..tickets.job import JobInterrupted, JobListener, JobOptions, run_tickets
    from ..tickets.tasks import parse_raise_priority

    options = JobOptions(
        input_file, workers=workers, db=db, dsn=dsn, schema=schema, out=out, examples=examples,
        examples_text_column=examples_text_column, examples_label_column=examples_label_column,
        examples_answer_column=examples_answer_column,
        id_column=id_column, subject_column=subject_column, body_column=body_column,
        target_precision=target_precision, min_confidence=min_confidence,
        max_attempts=max_attempts, stale_after=stale_after, model=model, base_url=base_url,
        model_timeout_s=timeout, prune_older_than=prune_older_than, never_send=never_send,
        raise_priority=None if raise_priority is None else parse_raise_priority(
            raise_priority, "--raise-priority"))
    show = sys.stderr.isatty() if progress is None else progress
    listener = JobListener(
        note=_say, deleted=_say_deleted,
        starting=lambda start: _say_starting(start, metrics_port, metrics_host),
        progress=lambda total: _display(show, total))
    try:
        done = run_tickets(options, listener)
    except JobInterrupted:               # it said how to continue
        raise typer.Exit(130) from None
    if done is None:                     # nothing to do: it said so
        return
    _print_summary(done.report, done.out, done.job, bundled=examples is None and model is None)
    if done.report.dead:
        raise typer.Exit(1)


def _say(line: str) -> None:
    """A line of the job's, on standard error (control characters from the input
    escaped)."""
    typer.echo(printable(line), err=True)


def _say_deleted(run: EarlierRun) -> None:
    typer.echo(f"deleted the task database of an earlier run: {run.where} ({run.tasks} "
               f"tasks, the last finished {run.last_s / 86400:.1f} days ago)")


def _say_starting(start: JobStart, metrics_port: int | None,
                  metrics_host: str) -> Callable[[], None]:
    """Say what the job is about to do and start the metrics server (returns its stop)."""
    options, job = start.options, start.job
    tasks = options.db or (redact(options.dsn or "")
                           + (f", schema {options.schema}" if options.schema else ""))
    typer.echo(f"{start.tickets} tickets from {options.input_file} -> {options.out} (tasks in "
               f"{tasks}), {_workers_line(job, options.workers)}, categories: "
               f"{', '.join(job.model.labels)}", err=True)
    if options.workers == 0:
        typer.echo(f"remote workers: {start.hint}", err=True)
    return start_metrics(start.store, metrics_port, metrics_host)


def _workers_line(job: TicketJob, workers: int) -> str:
    from ..tickets.job import local_workers

    local = local_workers(job, workers)
    if workers and local != workers:
        return (f"batches of {job.model.batch_size} tickets on one local worker (the offline "
                "model is CPU-bound; --workers counts with --model)")
    return f"{workers} workers"


def _evaluate(examples: Path, text_column: str | None, label_column: str | None,
              target_precision: float, min_confidence: float | None) -> None:
    from ..tickets.evaluate import format_evaluation
    from ..tickets.job import JobListener, evaluate_examples

    result = evaluate_examples(examples, text_column=text_column, label_column=label_column,
                               target_precision=target_precision,
                               min_confidence=min_confidence, listener=JobListener(note=_say))
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


@contextmanager
def _display(show: bool, total: int) -> Iterator[Callable[[JobProgress], None]]:
    """The progress of the run: a live bar (``show``), else a line every 5 s and at the
    end, on standard error."""
    first_written: list[int] = []

    def describe(p: JobProgress) -> str:
        first_written[:] = first_written or [p.written]    # done by an earlier run
        rate = (p.written - first_written[0]) / max(p.elapsed_s, 1e-9)
        return (f"{p.written}/{total} tickets" + (f", {rate:.1f}/s" if rate > 0 else "")
                + (f", {p.dead} cannot be written (DEAD tasks)" if p.dead else ""))

    if not show:
        last_plain = [0.0]

        def plain(p: JobProgress) -> None:
            now = time.monotonic()
            if now - last_plain[0] >= 5.0 or p.written + p.dead == total:
                last_plain[0] = now
                typer.echo(describe(p), err=True)
        yield plain
        return

    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("[bold]tickets"), BarColumn(), TextColumn("{task.description}"),
                  TimeElapsedColumn(), console=Console(stderr=True), transient=False) as bar:
        handle = bar.add_task("starting", total=total)

        def live(p: JobProgress) -> None:
            bar.update(handle, completed=p.written, description=describe(p))

        yield live


def _seconds(s: float) -> str:
    """A duration a person reads: ``0.35 s``, ``12.4 s``."""
    return f"{s:.2f} s" if s < 1 else f"{s:.1f} s"


def _share(n: int, total: int) -> str:
    return f"{n} ({n / total:.0%})" if total else str(n)


def _threshold_lines(report: JobReport, job: TicketJob, bundled: bool,
                     out: Path) -> list[str]:
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
        lines.append(_untrusted_line(calibration, job, out, bundled))
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
    if bundled and (calibration is None or calibration.reachable
                    or job.min_confidence is not None):
        lines.append("note: the bundled model is a 52-ticket demo set for trying the job, not "
                     "for real traffic: train on your own labelled tickets with --examples FILE "
                     "(see --evaluate) or use a language model with --model")
    return lines


def _untrusted_line(calibration: Any, job: TicketJob, out: Path, bundled: bool) -> str:
    """One line for a model no threshold can be trusted with: why every ticket went to a
    human, what its scores mean beside its held-out accuracy, and what to do
    (``--examples``, or ``--min-confidence`` with how many tickets it would let through,
    counted in the results file ``out``)."""
    held_out = [p for p, _ in getattr(job.model.categories, "held_out", ())]
    only = array("d")           # tickets flagged for the untrusted model and nothing else
    low, high, count = math.inf, -math.inf, 0
    for record in _results(out):       # a line at a time: 8 bytes a ticket kept, at most
        score = float(record.get("confidence") or 0.0)
        low, high, count = min(low, score), max(high, score), count + 1
        if _UNTRUSTED_ONLY.fullmatch(str(record.get("reason") or "")):
            only.append(score)
    what = ("the bundled model is a 52-ticket demo set" if bundled
            else f"the model trained on {calibration.held_out} examples")
    seen = (f" and never scored above {max(held_out):.2f}" if held_out else "")
    spread = (f" (its scores here, {low:.2f}-{high:.2f}, rank tickets; they "
              "are not chances of being right)" if count else "")
    if only:
        cut = math.floor(statistics.median(only) * 20) / 20
        through = sum(c >= cut for c in only)
        instead = (f", or --min-confidence {cut:.2f} lets {through} of these {count} "
                   f"tickets through unflagged (expect about {calibration.accuracy:.0%} of "
                   "them right)")
    else:
        instead = ("; --min-confidence would let none through: every ticket has another "
                   "reason too")
    return (f"every ticket went to a human: {what}, right {calibration.accuracy:.0%} of the "
            f"time on examples it had not trained on{seen}, so no confidence threshold "
            f"reaches {calibration.target_precision:.0%} precision{spread}; train on your own "
            f"labelled tickets with --examples FILE{instead}")


_UNTRUSTED_ONLY = re.compile(r"model not trusted \([^()]*\)")


def _results(out: Path) -> Iterator[dict[str, Any]]:
    """The records of the results file, read a line at a time (unreadable lines, those
    nested too deeply included, left out)."""
    try:
        with out.open(encoding="utf-8") as f:
            for line in f:
                try:
                    record = json.loads(line)
                except (ValueError, RecursionError):
                    continue
                if isinstance(record, dict):
                    yield record
    except OSError:
        return


def _print_summary(report: JobReport, out: Path, job: TicketJob, *, bundled: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    # task data (ids, labels, errors) is text: no markup read in it, control characters
    # escaped (rich would raise on a '[/bold]' in a label)
    console = Console(highlight=False, soft_wrap=True, markup=False)

    def say(text: str) -> None:
        console.print(shown(text))

    earlier = (f" ({report.earlier} of them by an earlier run on this task database)"
               if report.earlier else "")
    say(f"{report.written}/{report.tickets} tickets written to {out} "
        f"in {_seconds(report.elapsed_s)}{earlier}")
    done = sum(report.categories.values())
    if done:          # nothing written in this run: no table of nothing
        table = Table()
        table.add_column("category")
        table.add_column("tickets", justify="right")
        for category, n in report.categories.most_common():
            table.add_row(shown(category), str(n))
        console.print(table)
        raised = (f" ({report.priority_raised} raised to high by triage: "
                  f"{', '.join(job.raise_priority)})" if report.priority_raised else "")
        say("priority: " + ", ".join(f"{p} {n}" for p, n in report.priorities.most_common())
            + raised)
        say("language: " + ", ".join(f"{p} {n}" for p, n in report.languages.most_common()))
        why = ", ".join(f"{kind} {n}" for kind, n in report.reasons.most_common())
        say(f"needs a human: {_share(report.needs_human, done)}" + (f" ({why})" if why else ""))
        for line in _threshold_lines(report, job, bundled, out):
            say(line)
    revived = (f"; {report.revived} ticket(s) left by an earlier run while the model's "
               "endpoint was not answering, tried again" if report.revived else "")
    say(f"retries: {report.retries}; reclaimed: {report.reclaimed}; skipped rows: "
        f"{len(report.skipped)}{revived}")
    for down in report.endpoints_down:
        say(f"the model endpoint {down.endpoint} is not answering ({down.why}): "
            f"{len(down.tickets)} ticket(s) not done; check that the server is up and "
            "answers, then run the same command again to do them")
    # the tickets named above are not listed again, task by task
    undone = {ticket for down in report.endpoints_down for ticket in down.tickets}
    dead = [(task_id, error) for task_id, error in report.dead
            if task_id.rsplit("/", 1)[0] not in undone]
    if dead:
        from rich.text import Text

        where = "--dsn ... --schema ..." if os.environ.get("FOREPERSON_PG_SCHEMA") else "--db ..."
        console.print(Text(f"{len(dead)} DEAD task(s)", style="red")
                      + shown(f" (fix the cause, then: foreperson retry --all-dead {where}):"))
        for task_id, error in dead[:20]:
            say(f"  {task_id}: {error}")


class _PlainHelp(TyperCommand):
    """``tickets --help`` as plain text: its many long option names made rich's table
    cut words at 80 columns; click's layout wraps every line and cuts nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rich_markup_mode = None


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
    app.command(cls=_PlainHelp)(tickets)
