"""The ticket job against a plain batch script doing the same work, in the same run.

Usage: python benchmarks/bench_tickets.py [INPUT] [--examples FILE] [--workers N]

The plain script (``--plain``, run in its own process) reads the tickets, trains the
same offline model and classifies, drafts and triages every ticket in one batch, with
no durability: nothing is stored, a crash loses everything. The job is the real
``foreperson tickets`` command (SQLite task database, three linked tasks per ticket,
exactly-once output). Both are timed from process start to exit, three times each,
alternating; the medians and their ratio are printed as one JSON line.

Default INPUT: a 990-ticket file like the public helpdesk export when it is there
(``shared/data/helpdesk/dataset-v3_27_3-big-release.json`` in a folder above the
repository),
else 1,000 tickets made from the bundled examples.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HELPDESK = next((p / "shared" / "data" / "helpdesk" / "dataset-v3_27_3-big-release.json"
                 for p in ROOT.parents
                 if (p / "shared" / "data" / "helpdesk").is_dir()), ROOT / "missing")


def plain(input_file: str, examples: str | None, out: str) -> None:
    """The batch script: no tasks, no store, one pass."""
    from foreperson.tickets.model import TicketModel, bundled_examples, load_examples
    from foreperson.tickets.reader import read_tickets

    tickets = read_tickets(input_file).tickets
    model = TicketModel(load_examples(examples) if examples else bundled_examples())
    texts = [t.text for t in tickets]
    verdicts = model.classify_many(texts)
    drafts = model.draft_many([(t, v.category, v.language) for t, v in zip(texts, verdicts,
                                                                         strict=True)])
    with open(out, "w", encoding="utf-8") as f:
        for ticket, text, verdict, draft in zip(tickets, texts, verdicts, drafts, strict=True):
            triage = model.triage(text, verdict, draft["flags"])
            f.write(json.dumps({"id": ticket.id, "category": verdict.category,
                                "needs_human": triage.needs_human, "reason": triage.reason,
                                "draft_reply": draft["draft_reply"]}) + "\n")


def _sample(path: Path, n: int) -> None:
    from foreperson.tickets.model import bundled_examples

    examples = bundled_examples()
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"T{i}", "subject": f"case {i}",
                                "body": examples[i % len(examples)].text}) + "\n")


def _timed(args: list[str], cwd: str) -> float:
    """Seconds ``args`` took in ``cwd``; a failing command stops the benchmark with its
    own error output."""
    began = time.perf_counter()
    done = subprocess.run(args, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    took = time.perf_counter() - began
    if done.returncode != 0:
        sys.exit(f"bench_tickets: {' '.join(args[1:4])} ... failed (exit {done.returncode}):\n"
                 f"{done.stderr.strip()}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("input", nargs="?")
    parser.add_argument("--examples")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--plain", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.plain:
        plain(args.input, args.examples, args.out)
        return
    if args.input and not os.path.isfile(args.input):
        sys.exit(f"bench_tickets: {args.input}: no such file")
    work = tempfile.mkdtemp(prefix="fp-bench-tickets-")
    # the commands run in a folder of their own: paths given relative to here are made
    # absolute first
    source = (os.path.abspath(args.input) if args.input
              else str(HELPDESK) if HELPDESK.exists() else None)
    if source is None:
        source = os.path.join(work, "tickets.jsonl")
        _sample(Path(source), 1000)
    extra = ["--examples", os.path.abspath(args.examples)] if args.examples else []
    job_s, plain_s = [], []
    for i in range(args.repeat):
        plain_s.append(_timed([sys.executable, __file__, "--plain", source, "--out",
                               f"plain{i}.jsonl", *extra], work))
        job_s.append(_timed([sys.executable, "-m", "foreperson.cli.main", "tickets", source,
                             "--workers", str(args.workers), "--db", f"job{i}.db", "--out",
                             f"job{i}.jsonl", "--no-progress", *extra], work))
    lines = len(Path(work, "job0.jsonl").read_text(encoding="utf-8").splitlines())
    job, script = statistics.median(job_s), statistics.median(plain_s)
    print(json.dumps({"bench": "tickets", "input": os.path.basename(source), "tickets": lines,
                      "examples": os.path.basename(args.examples or "") or "bundled",
                      "workers": args.workers, "job_s": round(job, 2),
                      "plain_script_s": round(script, 2), "ratio": round(job / script, 2)}))


if __name__ == "__main__":
    main()
