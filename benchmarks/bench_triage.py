"""Precision and recall of each triage signal, on lines the model learned from and on
lines nobody tuned anything on.

Usage: python benchmarks/bench_triage.py [FILE ...] [--folds K]

A FILE holds one JSON object a line: ``{"language", "text", "signals": [...]}``, in
English, German, Spanish, French and Portuguese. Without FILEs:

* ``src/foreperson/tickets/data/triage/*.jsonl``, the lines the learned model is trained
  on (``written_with_rules`` was written beside the patterns; the ``outside_*`` sets by
  people who had seen neither the patterns nor the other sets, each measured first and
  only then used to widen the patterns and to train). Scored in-sample, and, the figure
  to trust, by K-fold cross-validation (default 5): the model of each fold never saw the
  lines it scores (the patterns did);
* ``tests/fixtures/triage/*.jsonl``, the sets kept untuned: written last, measured as
  they came, never trained on.

Prints one JSON line per set and signal, for the patterns alone and for the patterns
with the learned model (``ticket_signals``), and one line per set saying whether every
signal reaches the targets (precision >= 0.9, recall >= 0.8).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from foreperson.tickets.triage import LEARNED_AT, SIGNALS, SignalModel, ticket_signals

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "src" / "foreperson" / "tickets" / "data" / "triage"
UNTUNED = ROOT / "tests" / "fixtures" / "triage"


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def scores(rows: list[dict], found: list[set[str]]) -> dict[str, dict[str, float]]:
    """Per signal: true and false positives, misses, precision and recall."""
    out = {}
    for signal in SIGNALS:
        pairs = [(signal in f, signal in r["signals"]) for f, r in zip(found, rows, strict=True)]
        tp = sum(got and want for got, want in pairs)
        fp = sum(got and not want for got, want in pairs)
        fn = sum(want and not got for got, want in pairs)
        out[signal] = {"tp": tp, "fp": fp, "fn": fn,
                       "precision": round(tp / (tp + fp), 3) if tp + fp else 1.0,
                       "recall": round(tp / (tp + fn), 3) if tp + fn else 1.0}
    return out


def report(name: str, how: str, rows: list[dict], found: list[set[str]]) -> None:
    table = scores(rows, found)
    for signal, row in table.items():
        print(json.dumps({"bench": "triage", "set": name, "signals": how, "signal": signal,
                          **row}))
    ok = all(r["precision"] >= 0.9 and r["recall"] >= 0.8 for r in table.values())
    print(json.dumps({"bench": "triage", "set": name, "signals": how, "rows": len(rows),
                      "targets_met": ok}))


def names(rows: list[dict], learned: bool) -> list[set[str]]:
    return [{s.name for s in ticket_signals(r["text"], r["language"], learned=learned)}
            for r in rows]


def cross_validated(rows: list[dict], folds: int) -> list[set[str]]:
    """The patterns' signals plus those of a model trained without the line's fold."""
    found = names(rows, learned=False)
    for fold in range(folds):
        model = SignalModel([r for i, r in enumerate(rows) if i % folds != fold])
        for i in range(fold, len(rows), folds):
            missing = [s for s in SIGNALS if s not in found[i]]
            found[i] |= {s.name for s in model.signals(rows[i]["text"], rows[i]["language"],
                                                        missing)}
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args()
    shipped = [] if args.files else sorted(SHIPPED.glob("*.jsonl"))
    untuned = args.files or sorted(UNTUNED.glob("*.jsonl"))
    print(json.dumps({"bench": "triage", "learned_at": LEARNED_AT,
                      "training_lines": sum(len(lines(p)) for p in SHIPPED.glob("*.jsonl"))}))
    for path in untuned:
        rows = lines(path)
        report(path.name, "patterns", rows, names(rows, learned=False))
        report(path.name, "patterns+learned", rows, names(rows, learned=True))
    if shipped:
        rows = [r for path in shipped for r in lines(path)]
        report("shipped (in-sample)", "patterns+learned", rows, names(rows, learned=True))
        report(f"shipped ({args.folds}-fold cross-validation)", "patterns+learned", rows,
               cross_validated(rows, args.folds))


if __name__ == "__main__":
    main()
