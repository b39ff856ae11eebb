"""Are the drafts the job leaves unflagged sendable? A review sheet and its score.

The job copies the answer of a similar labelled example and flags a draft that needs a
person (issue 23, item 1). This script splits a labelled export into examples and two
held-out sets of tickets, runs ``foreperson tickets`` on one of them with the rest as
``--examples``, and writes the drafts it left unflagged as a review sheet: each ticket's
subject and body beside its draft, nothing of the rules or flags. A reviewer who has not
seen the rules marks every draft ``send`` (sendable as it is), ``edit`` (needs edits) or
``never`` (must not be sent); ``score`` counts the marks.

    python benchmarks/eval_drafts.py sheet \\
        ../shared/data/helpdesk/dataset-v3_27_3-big-release.json \\
        --split test --limit 40 --out review/
    # the reviewer fills review/verdicts.jsonl: {"n": 1, "verdict": "send", "why": "..."}
    # (--never-send benchmarks/helpdesk_never_send.txt: what a support lead wrote after
    # a review found the team's own answers wrong)
    python benchmarks/eval_drafts.py score review/

Rows are split into ten folds by a hash of their id (the same on every machine). Each
fold's tickets are drafted with the other nine folds as examples. ``dev`` is fold 8, the
one looked at while working on the rules; ``test`` is the nine others, for the reviewer
only (``--limit`` draws a random sample of their unflagged drafts). Output: the unflagged
share, and with verdicts the share of unflagged drafts in each mark. Targets (issue 23):
0 ``never``, >= 70 % ``send``. With ``--with-team-answers`` each sampled ticket is on the
sheet twice, once with the draft and once with the answer the team itself sent, shuffled
and unmarked; ``score`` then counts the team's answers apart: the ceiling for drafts that
copy them, judged by the same reviewer in the same sitting.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

VERDICTS = ("send", "edit", "never")


def fold_of(row_id: Any) -> int:
    """The fold (0..9) of a row id: by a hash, so the same on every machine."""
    return int(hashlib.sha256(str(row_id).encode()).hexdigest()[:8], 16) % 10


DEV_FOLD = 8
"""The fold looked at while working on the rules; ``test`` never includes it."""


def write_fold(rows: list[dict[str, Any]], fold: int, folder: Path) -> dict[str, Path]:
    """``examples.json`` (every row outside ``fold``, with answers) and
    ``tickets.json`` (the fold's rows without answers) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    held = [{"id": r["id"], "subject": r.get("subject") or "", "body": r["body"]}
            for r in rows if fold_of(r["id"]) == fold]
    paths = {"examples": folder / "examples.json", "tickets": folder / "tickets.json"}
    paths["examples"].write_text(json.dumps([r for r in rows if fold_of(r["id"]) != fold],
                                            ensure_ascii=False), encoding="utf-8")
    paths["tickets"].write_text(json.dumps(held, ensure_ascii=False), encoding="utf-8")
    return paths


def run_job(paths: dict[str, Path], folder: Path,
            never_send: str | None = None) -> list[dict[str, Any]]:
    """Run the ticket job on the fold's tickets with the examples (and ``--never-send``
    when given); its result lines."""
    out = folder / "results.jsonl"
    for stale in (out, folder / "tasks.db"):
        stale.unlink(missing_ok=True)
    command = ["foreperson", "tickets", str(paths["tickets"]), "--examples",
               str(paths["examples"]), "--out", str(out), "--db", str(folder / "tasks.db"),
               "--no-progress"]
    if never_send:
        command += ["--never-send", str(Path(never_send).resolve())]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"the job failed (exit {done.returncode}):\n{done.stderr or done.stdout}")
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def sheet(args: argparse.Namespace) -> None:
    """Write ``review.md`` (for the reviewer) and ``key.json`` (ticket ids) to --out."""
    folder = Path(args.out)
    rows = json.loads(Path(args.source).read_text(encoding="utf-8"))
    tickets = {str(r["id"]): r for r in rows}
    folds = [DEV_FOLD] if args.split == "dev" else [f for f in range(10) if f != DEV_FOLD]
    results: list[dict[str, Any]] = []
    for fold in folds:
        results += run_job(write_fold(rows, fold, folder / f"fold-{fold}"),
                           folder / f"fold-{fold}", args.never_send)
    unflagged = [r for r in results if not r["needs_human"]]
    random.Random(args.seed).shuffle(unflagged)
    # tickets an earlier sheet already put before a reviewer are not drawn again, so a
    # rule written from that review's reasons is judged on tickets nobody read for it
    seen = {str(k["id"]) for earlier in args.exclude
            for k in json.loads((Path(earlier) / "key.json").read_text("utf-8"))}
    fresh = [r for r in unflagged if str(r["id"]) not in seen]
    chosen = fresh[:args.limit] if args.limit else fresh
    lines = ["# Drafts to review", "",
             "For each ticket below, read the customer's message and the reply drafted for "
             "it, and judge the reply as a support lead would before it goes out unchanged:",
             "", "- `send`: correct and complete enough to send as it is;",
             "- `edit`: on the right subject but needs changes before sending (vague, "
             "incomplete, an unsupported claim, a detail to fix);",
             "- `never`: must not be sent (answers another request, wrong facts, misleading, "
             "could cause harm).", "",
             "Write one JSON line per ticket to `verdicts.jsonl` in this folder: "
             '`{"n": 1, "verdict": "send", "why": "one sentence"}`.', ""]
    # with --with-team-answers each ticket comes twice, once with our draft and once with
    # the answer the team itself sent (the export's), in a shuffled order and never said
    # which: the team's answers are the ceiling a draft copied from them can reach
    entries = [(r, "draft", r["draft_reply"]) for r in chosen]
    if args.with_team_answers:
        entries += [(r, "team", tickets[str(r["id"])]["answer"]) for r in chosen]
        random.Random(args.seed + 1).shuffle(entries)
    for n, (result, _, reply) in enumerate(entries, 1):
        ticket = tickets[str(result["id"])]
        lines += [f"## {n}", "", f"**Subject:** {ticket['subject'] or '(none)'}", "",
                  "**Customer:**", "", _quoted(ticket["body"]), "", "**Drafted reply:**", "",
                  _quoted(reply), ""]
    (folder / "review.md").write_text("\n".join(lines), encoding="utf-8")
    (folder / "key.json").write_text(json.dumps(
        [{"n": n, "id": r["id"], "category": r["category"], "source": source}
         for n, (r, source, _) in enumerate(entries, 1)], indent=1), encoding="utf-8")
    print(json.dumps({"split": args.split, "tickets": len(results),
                      "unflagged": len(unflagged),
                      "unflagged_share": round(len(unflagged) / max(len(results), 1), 3),
                      "to_review": len(chosen), "sheet": str(folder / "review.md")}))


def _quoted(text: str) -> str:
    return "\n".join("> " + line for line in text.splitlines())


def score(args: argparse.Namespace) -> None:
    """Count the reviewer's verdicts in ``verdicts.jsonl``."""
    folder = Path(args.folder)
    key = json.loads((folder / "key.json").read_text("utf-8"))
    verdicts = {}
    for number, line in enumerate((folder / "verdicts.jsonl").read_text("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        if row.get("verdict") not in VERDICTS:
            sys.exit(f"verdicts.jsonl:{number}: verdict must be one of {', '.join(VERDICTS)}")
        verdicts[int(row["n"])] = row
    missing = [k["n"] for k in key if k["n"] not in verdicts]
    for source in sorted({k.get("source", "draft") for k in key}):
        numbers = {k["n"] for k in key if k.get("source", "draft") == source}
        counts = Counter(v["verdict"] for n, v in verdicts.items() if n in numbers)
        total = sum(counts.values())
        report = {"replies": source, "judged": total, "missing": missing,
                  **{v: counts[v] for v in VERDICTS},
                  **{f"{v}_share": round(counts[v] / max(total, 1), 3) for v in VERDICTS}}
        if source == "draft":
            report["met"] = (counts["never"] == 0 and counts["send"] >= 0.7 * total
                             and not missing)
        print(json.dumps(report))
    for n in sorted(verdicts):
        if verdicts[n]["verdict"] != "send":
            ticket = next(k for k in key if k["n"] == n)
            print(f"  {n} ({ticket.get('source', 'draft')}, id {ticket['id']}): "
                  f"{verdicts[n]['verdict']}: "
                  f"{verdicts[n].get('why', '')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("sheet", help="run the job and write the review sheet")
    make.add_argument("source", help="a labelled export: a JSON list with id, subject, body, "
                                     "answer and a label column")
    make.add_argument("--split", choices=("dev", "test"), default="dev")
    make.add_argument("--out", required=True, help="folder for the split, results and sheet")
    make.add_argument("--limit", type=int, default=0, help="review at most this many (0: all)")
    make.add_argument("--seed", type=int, default=23)
    make.add_argument("--never-send", help="the job's --never-send file (phrases the team "
                      "marked as wrong in its own answers)")
    make.add_argument("--with-team-answers", action="store_true",
                      help="also put each ticket's own answer from the export on the sheet, "
                           "shuffled among the drafts and not marked (the ceiling)")
    make.add_argument("--exclude", nargs="*", default=[], metavar="FOLDER",
                      help="earlier sheets' folders: their tickets are not drawn again")
    make.set_defaults(run=sheet)
    judge = commands.add_parser("score", help="count verdicts.jsonl in a sheet's folder")
    judge.add_argument("folder")
    judge.set_defaults(run=score)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
