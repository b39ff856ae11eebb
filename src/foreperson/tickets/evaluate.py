"""How good the offline model is on your labelled tickets, before you trust it.

:func:`evaluate` holds out a fixed share of the labelled rows (shuffled with a fixed
seed, so every run holds out the same rows), trains on the rest exactly as the job
does, and scores the held-out rows: accuracy, macro-F1, a per-label table, the
confidence threshold fitted for the target precision and the precision of the tickets
it leaves unflagged, next to baselines trained and scored on the same split in the same
run (the majority class, and TF-IDF with a linear SVM or a logistic regression).
"""

from __future__ import annotations

import random
import time
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError
from .model import DEFAULT_TARGET_PRECISION, Calibration, Example, TicketModel

__all__ = ["Evaluation", "LabelScore", "evaluate", "format_evaluation", "split_examples"]


@dataclass(frozen=True)
class LabelScore:
    """One label's scores on the held-out rows.

    Attributes:
        label: the label.
        support: held-out rows with this label.
        precision / recall / f1: 0..1.
    """

    label: str
    support: int
    precision: float
    recall: float
    f1: float


@dataclass
class Evaluation:
    """The scores of one evaluation.

    Attributes:
        train / test: rows trained on and held out.
        accuracy / macro_f1: the model's, on the held-out rows (0..1).
        variant: the classifier variant cross-validation chose.
        per_label: per-label scores, most frequent label first.
        calibration: the threshold fitted on the training rows.
        unflagged: held-out rows at or above the threshold.
        unflagged_precision: share of those classified right (0..1; 0 when none).
        baselines: name -> ``(accuracy, macro_f1)`` on the same split.
        training_s: seconds the model took to train.
        suggested: when the target is out of reach, the calibration of the highest
            lower target that is not (None otherwise).
    """

    train: int
    test: int
    accuracy: float
    macro_f1: float
    variant: str
    per_label: list[LabelScore]
    calibration: Calibration
    unflagged: int
    unflagged_precision: float
    baselines: dict[str, tuple[float, float]] = field(default_factory=dict)
    training_s: float = 0.0
    suggested: Calibration | None = None


def _same_text(text: str) -> str:
    return " ".join(text.split()).casefold()


def split_examples(examples: Sequence[Example], holdout: float = 0.5,
                   seed: int = 0) -> tuple[list[Example], list[Example]]:
    """``(train, test)``: about ``holdout`` (0..1) of the rows, shuffled with ``seed``,
    are held out. Rows with the same text (ignoring case and spacing) stay together on
    one side, so a repeated ticket cannot be scored on a copy of itself it was trained
    on.

    Raises:
        InputError: too few rows, or a split without two labels to train on.
    """
    if not 0.0 < holdout < 1.0:
        raise InputError(f"the held-out share must be between 0 and 1, got {holdout}",
                         path="<examples>")
    groups: dict[str, list[Example]] = {}
    for example in examples:
        groups.setdefault(_same_text(example.text), []).append(example)
    order = list(groups.values())
    random.Random(seed).shuffle(order)
    total = sum(len(g) for g in order)
    cut = round(total * holdout)
    test: list[Example] = []
    train: list[Example] = []
    for group in order:
        (test if len(test) < cut else train).extend(group)
    if len(test) < 2 or len({e.category for e in train}) < 2:
        raise InputError(f"{total} labelled rows are too few to hold {holdout:.0%} out "
                         "and still train on two labels", path="<examples>")
    return train, test


def _scores(truth: Sequence[str], predicted: Sequence[str]) -> tuple[float, float,
                                                                     list[LabelScore]]:
    labels = Counter(truth)
    per_label = []
    for label, support in labels.most_common():
        tp = sum(t == label == p for t, p in zip(truth, predicted, strict=True))
        fp = sum(p == label != t for t, p in zip(truth, predicted, strict=True))
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / support
        f1 = 2 * precision * recall / (precision + recall) if tp else 0.0
        per_label.append(LabelScore(label, support, precision, recall, f1))
    accuracy = sum(t == p for t, p in zip(truth, predicted, strict=True)) / len(truth)
    return accuracy, sum(s.f1 for s in per_label) / len(per_label), per_label


def _baselines(train: Sequence[Example], test: Sequence[Example]) -> dict[str,
                                                                        tuple[float, float]]:
    """The simple baselines, trained and scored on the same split."""
    from scipy import sparse
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import LinearSVC

    truth = [e.category for e in test]
    y = [e.category for e in train]
    majority = Counter(y).most_common(1)[0][0]
    out = {"majority class": _scores(truth, [majority] * len(test))[:2]}

    def features(kinds: tuple[str, ...]) -> tuple[Any, Any]:
        made = []
        for kind in kinds:
            vectorizer = (TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
                          if kind == "word" else
                          TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5),
                                          sublinear_tf=True))
            made.append((vectorizer.fit_transform([e.text for e in train]),
                         vectorizer.transform([e.text for e in test])))
        return (sparse.hstack([m[0] for m in made]).tocsr(),
                sparse.hstack([m[1] for m in made]).tocsr())

    makers: dict[str, tuple[tuple[str, ...], Callable[[], Any]]] = {
        "char n-gram TF-IDF + linear SVM": (("char",), lambda: LinearSVC()),
        "word + char TF-IDF + linear SVM": (("word", "char"), lambda: LinearSVC()),
        "word + char TF-IDF + logistic regression": (
            ("word", "char"), lambda: LogisticRegression(C=10.0, max_iter=2000)),
    }
    cache: dict[tuple[str, ...], tuple[Any, Any]] = {}
    for name, (kinds, make) in makers.items():
        if kinds not in cache:
            cache[kinds] = features(kinds)
        fit, held = cache[kinds]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            predicted = [str(p) for p in make().fit(fit, y).predict(held)]
        out[name] = _scores(truth, predicted)[:2]
    return out


def evaluate(examples: Sequence[Example], *, holdout: float = 0.5, seed: int = 0,
             target_precision: float = DEFAULT_TARGET_PRECISION,
             min_confidence: float | None = None, baselines: bool = True) -> Evaluation:
    """Train on part of ``examples`` and score the rest (see the module docstring).

    Args:
        examples: labelled rows (:func:`~foreperson.tickets.model.load_examples`).
        holdout: share (0..1) held out for scoring (default half).
        seed: the shuffle's seed (the same rows are held out on every run).
        target_precision: the precision (0..1) the threshold is fitted for.
        min_confidence: a fixed threshold (0..1) instead.
        baselines: also train and score the baselines.

    Returns:
        an :class:`Evaluation`.

    Raises:
        InputError: too few rows or labels.
    """
    train, test = split_examples(examples, holdout, seed)
    began = time.monotonic()
    model = TicketModel(train, target_precision=target_precision,
                        min_confidence=min_confidence, templates=False,
                        cache=False)      # the time measured is training's
    training_s = time.monotonic() - began
    verdicts = model.classify_many([e.text for e in test])
    truth = [e.category for e in test]
    predicted = [v.category for v in verdicts]
    accuracy, macro_f1, per_label = _scores(truth, predicted)
    above = [t == v.category for t, v in zip(truth, verdicts, strict=True)
             if v.confidence >= model.min_confidence]
    return Evaluation(
        train=len(train), test=len(test), accuracy=accuracy, macro_f1=macro_f1,
        variant=model.categories.variant, per_label=per_label,
        calibration=model.calibration, unflagged=len(above),
        unflagged_precision=sum(above) / len(above) if above else 0.0,
        baselines=_baselines(train, test) if baselines else {}, training_s=training_s,
        suggested=(model.reachable_target()
                   if not model.calibration.reachable and min_confidence is None else None))


def format_evaluation(result: Evaluation, *, source: str = "") -> str:
    """The evaluation as the text ``foreperson tickets --evaluate`` prints."""
    cal = result.calibration
    width = max([10] + [len("baseline: " + name) for name in result.baselines])
    lines = [f"{source}: " if source else "",
             f"trained on {result.train} rows, scored on {result.test} held-out rows "
             f"(training {result.training_s:.1f} s; variant: {result.variant})", "",
             f"{'':{width}} {'accuracy':>9} {'macro-F1':>9}",
             f"{'foreperson':{width}} {result.accuracy:9.3f} {result.macro_f1:9.3f}"]
    lines[0:2] = ["".join(lines[0:2])]
    for name, (accuracy, macro_f1) in result.baselines.items():
        lines.append(f"{'baseline: ' + name:{width}} {accuracy:9.3f} {macro_f1:9.3f}")
    label_width = min(60, max([5] + [len(s.label) for s in result.per_label]))
    lines += ["", f"{'label':{label_width}} {'held out':>8} {'precision':>9} {'recall':>7} "
                  f"{'F1':>6}"]
    for s in result.per_label:
        lines.append(f"{s.label[:label_width]:{label_width}} {s.support:8d} {s.precision:9.3f} "
                     f"{s.recall:7.3f} {s.f1:6.3f}")
    lines.append("")
    if cal.fixed:
        lines.append(f"confidence threshold {cal.threshold:.2f} (given with --min-confidence)")
    elif cal.reachable:
        lines.append(f"confidence threshold {cal.threshold:.2f}: fitted on the training rows "
                     f"for {cal.target_precision:.0%} precision of unflagged tickets")
    else:
        lines.append(f"no confidence threshold reaches {cal.target_precision:.0%} precision "
                     "on the training rows: every ticket would go to a human")
        if result.suggested is not None:
            lines.append(f"--target-precision {result.suggested.target_precision:g} is within "
                         f"reach: its threshold passes {result.suggested.coverage:.0%} of the "
                         "training rows' cross-validated predictions "
                         f"({result.suggested.precision:.0%} of them right)")
    share = result.unflagged / result.test
    right = f"{result.unflagged_precision:.3f}" if result.unflagged else "n/a"
    lines.append(f"held-out rows left unflagged: {result.unflagged} of {result.test} "
                 f"({share:.0%}), classified right: {right}")
    if result.unflagged:
        lines.append(f"in the job, about {share:.0%} of tickets would go through without a "
                     "human on confidence alone (triage and draft checks flag more)")
    return "\n".join(lines)
