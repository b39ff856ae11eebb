"""The offline classifier's linear models: trained with scikit-learn, kept as JSON, applied
with numpy alone.

:func:`train` fits the TF-IDF vocabularies (word uni- and bigrams, character 2-5-grams
within words) and, per target (the categories, the priorities when the examples have
two or more), chooses a linear SVM variant by cross-validation and fits it on every
example (see :mod:`~foreperson.tickets.model`). It returns the trained *state*, a JSON
object: vocabularies and idf, and per target the variant, classes, coefficients,
intercepts, softmax temperature and the out-of-fold figures the confidence threshold is
fitted on. :class:`Features` and :class:`LinearClassifier` read a state back and
classify with numpy (:mod:`._tfidf`), so the model is the same whether it was trained
in this process or read from the cache, and a process that reads it never imports
scikit-learn.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import MissingDependency
from ._tfidf import Similarities, TfidfBlock, load_numpy

__all__ = ["FEATURES", "FORMAT", "VARIANTS", "Features", "LinearClassifier", "softmax",
           "train"]

FORMAT = 1
"""The version of the trained state's layout; bump it when the features, the variants or
the training change (older cache files are then never read)."""

FEATURES = (("word", (1, 2), 200_000), ("char_wb", (2, 5), 300_000))
"""The TF-IDF blocks: analyzer, n-gram range, at most this many n-grams (sublinear tf,
unit rows)."""

VARIANTS = {"char balanced": ("char", "balanced"), "char": ("char", None),
            "word+char": ("both", None), "word+char balanced": ("both", "balanced")}
"""The classifier variants cross-validation chooses from: features and class weights."""

_FOLDS = 5
_HALF = 1 / math.sqrt(2)      # each block of ``both`` weighs half: its rows are unit length


def _sklearn() -> Any:
    try:
        import numpy
        from scipy import sparse
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.svm import LinearSVC
    except ImportError as exc:
        raise MissingDependency("the offline ticket model needs scikit-learn: "
                                "pip install 'foreperson[tickets]'") from exc
    return numpy, sparse, TfidfVectorizer, LinearSVC


class Features:
    """The word and character TF-IDF blocks of a trained state, applied with numpy.

    Args:
        state: the ``features`` of a state of :func:`train`: per block of
            :data:`FEATURES`, ``{"analyzer", "grams", "vocabulary", "idf"}``.

    Raises:
        ValueError: not the blocks of :data:`FEATURES`, or a vocabulary and its idf of
            different lengths.
        MissingDependency: numpy is not installed.
    """

    def __init__(self, state: Sequence[dict[str, Any]]) -> None:
        if [(b["analyzer"], tuple(b["grams"])) for b in state] != [
                (kind, grams) for kind, grams, _ in FEATURES]:
            raise ValueError("not the feature blocks of this version")
        self._np = load_numpy()
        self.words, self.chars = (TfidfBlock(b["analyzer"], tuple(b["grams"]),
                                             b["vocabulary"], b["idf"]) for b in state)
        self.width = {"char": len(self.chars), "both": len(self.words) + len(self.chars)}

    def rows(self, texts: Sequence[str]) -> dict[str, list[tuple[Any, Any]]]:
        """Per feature set (``char``, ``both``), each text's sparse row ``(columns,
        values)``: the ``both`` rows hold the word block, then the character block, each of
        unit length scaled by 1/sqrt(2) (so a dot product of two rows is a cosine)."""
        np = self._np
        chars, both = [], []
        for text in texts:
            word_columns, word_values = self.words.row(text)
            char_columns, char_values = self.chars.row(text)
            chars.append((char_columns, char_values))
            both.append((np.concatenate([word_columns, char_columns + len(self.words)]),
                         np.concatenate([word_values, char_values]) * _HALF))
        return {"char": chars, "both": both}

    def similarities(self, texts: Sequence[str]) -> Similarities:
        """The ``both`` rows of ``texts``, indexed for cosine similarities."""
        return Similarities(self.rows(texts)["both"], self.width["both"])


@dataclass
class LinearClassifier:
    """One target's classifier (the categories or the priorities) read from its state.

    Attributes:
        variant: the variant cross-validation chose (a key of :data:`VARIANTS`).
        classes: the labels, sorted (as scikit-learn orders them).
        weights: coefficients, a numpy array of features x (classes, or 1 for two).
        intercept: a numpy array of one intercept per column of ``weights``.
        temperature: the softmax temperature fitted on the out-of-fold scores.
        held_out: per example, ``(confidence, right)`` of its out-of-fold prediction.
        groups: per example, its text group (copies of one text share one).
        accuracy: accuracy (0..1) of the out-of-fold predictions.
    """

    variant: str
    classes: list[str]
    weights: Any
    intercept: Any
    temperature: float
    held_out: list[tuple[float, bool]] = field(default_factory=list)
    groups: list[int] = field(default_factory=list)
    accuracy: float = 0.0

    @property
    def labels(self) -> list[str]:
        """The labels it predicts (:attr:`classes`)."""
        return self.classes

    @classmethod
    def from_state(cls, state: dict[str, Any], widths: dict[str, int]) -> LinearClassifier:
        """A classifier from its part of a state of :func:`train`; ``widths`` are the
        column counts of the feature sets (:attr:`Features.width`).

        Raises:
            ValueError, KeyError, TypeError: not a classifier state of this version (an
                unknown variant, coefficients or intercepts of the wrong shape).
        """
        np = load_numpy()
        features, _ = VARIANTS[state["variant"]]
        classes = [str(c) for c in state["classes"]]
        weights = np.array(state["coef"], dtype=float).T       # features x columns
        intercept = np.array(state["intercept"], dtype=float)
        columns = len(classes) if len(classes) > 2 else 1
        if (len(classes) < 2 or weights.shape != (widths[features], columns)
                or intercept.shape != (columns,)):
            raise ValueError("not a classifier state of this version")
        held_out = [(float(p), bool(r)) for p, r in state["held_out"]]
        if state["groups"] and len(state["groups"]) != len(held_out):
            raise ValueError("not a classifier state of this version")
        return cls(state["variant"], classes, weights, intercept, float(state["temperature"]),
                   held_out, [int(g) for g in state["groups"]], float(state["accuracy"]))

    def scores(self, rows: dict[str, list[tuple[Any, Any]]]) -> Any:
        """The SVM's decision scores (texts x classes) of :meth:`Features.rows`."""
        np = load_numpy()
        features, _ = VARIANTS[self.variant]
        scores = np.array([values @ self.weights[columns] for columns, values
                           in rows[features]]).reshape(-1, self.weights.shape[1])
        return _two_columns(np, scores + self.intercept)

    def predict(self, rows: dict[str, list[tuple[Any, Any]]]) -> tuple[list[str], Any]:
        """Per text of :meth:`Features.rows`: the predicted label and its calibrated
        confidence (a numpy array of probabilities, 0..1)."""
        np = load_numpy()
        probs = softmax(np, self.scores(rows) / self.temperature)
        return [self.classes[i] for i in probs.argmax(1)], probs.max(1)


def softmax(np: Any, scores: Any) -> Any:
    """Row-wise softmax of a numpy array of scores (rows: examples)."""
    shifted = scores - scores.max(1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(1, keepdims=True)


def _two_columns(np: Any, scores: Any) -> Any:
    """Decision scores with one column per label (a binary SVM has one)."""
    scores = np.asarray(scores, dtype=float)
    if scores.ndim == 2 and scores.shape[1] == 1:
        scores = scores[:, 0]
    return np.column_stack([-scores, scores]) if scores.ndim == 1 else scores


def train(texts: Sequence[str], categories: Sequence[str], priorities: Sequence[str],
          languages: Sequence[str]) -> dict[str, Any]:
    """Train the classifier on labelled texts (see the module docstring).

    Args:
        texts: the examples' texts.
        categories: each text's label.
        priorities: each text's priority label ("" when none); a priority classifier is
            trained when two or more distinct ones are given.
        languages: each text's language code, kept in the state as given.

    Returns:
        the trained state (a JSON object): ``{"format", "languages", "features",
        "categories", "priorities"}`` (``priorities`` None without a priority
        classifier).

    Raises:
        MissingDependency: scikit-learn is not installed.
    """
    np, sparse, tfidf, _ = _sklearn()
    vectorizers = [tfidf(analyzer=kind, ngram_range=grams, sublinear_tf=True, max_features=most)
                   for kind, grams, most in FEATURES]
    words, chars = (v.fit_transform(texts) for v in vectorizers)
    blocks = {"char": chars.tocsr(), "both": sparse.hstack([words, chars]).tocsr() * _HALF}
    same: dict[str, int] = {}
    groups = [same.setdefault(" ".join(t.split()).casefold(), len(same)) for t in texts]
    state: dict[str, Any] = {
        "format": FORMAT, "languages": list(languages),
        "features": [{"analyzer": kind, "grams": list(grams),
                      "vocabulary": sorted(v.vocabulary_, key=v.vocabulary_.__getitem__),
                      "idf": v.idf_.tolist()}
                     for (kind, grams, _), v in zip(FEATURES, vectorizers, strict=True)],
        "categories": _fit(list(categories), blocks, groups),
        "priorities": None}
    prioritised = [i for i, p in enumerate(priorities) if p]
    if len({priorities[i] for i in prioritised}) >= 2:
        sub = {k: v[prioritised] for k, v in blocks.items()}
        state["priorities"] = _fit([priorities[i] for i in prioritised], sub,
                                   [groups[i] for i in prioritised])
    return state


def _folds(np: Any, labels: Sequence[str], groups: Sequence[int]) -> list[tuple[Any, Any]]:
    """Cross-validation folds; rows of one text group (the same text, ignoring case
    and spacing) stay in one fold, so a repeated ticket is never scored on its own
    copy (the threshold would be fitted too confident)."""
    from sklearn.model_selection import GroupKFold, StratifiedGroupKFold

    smallest = min(Counter(labels).values())
    distinct = len(set(groups))
    if len(labels) < 4 or distinct < 2:
        return []
    splitter: Any = (StratifiedGroupKFold(min(_FOLDS, smallest, distinct), shuffle=True,
                                          random_state=0)
                     if smallest >= 2 else GroupKFold(min(_FOLDS, distinct)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(splitter.split(np.zeros(len(labels)), labels, groups))


def _svm(weights: str | None) -> Any:
    _, _, _, svc = _sklearn()
    return svc(C=1.0, class_weight=weights)


def _out_of_fold(np: Any, matrix: Any, y: Any, weights: str | None,
                 folds: list[tuple[Any, Any]]) -> tuple[Any, Any]:
    """Out-of-fold decision scores (rows: examples, columns: all labels)."""
    labels = np.unique(y)
    scores = np.full((len(y), len(labels)), -1e3)
    for train_rows, test_rows in folds:
        if len(np.unique(y[train_rows])) < 2:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = _svm(weights).fit(matrix[train_rows], y[train_rows])
        columns = np.searchsorted(labels, model.classes_)
        scores[np.ix_(test_rows, columns)] = _two_columns(np, model.decision_function(
            matrix[test_rows]))
    return labels, scores


def _fit(labels: Sequence[str], blocks: dict[str, Any], groups: Sequence[int]
         ) -> dict[str, Any]:
    """Choose a variant by cross-validation (folds by text group), calibrate it, fit
    it on everything; the classifier's state (:meth:`LinearClassifier.from_state`)."""
    np = load_numpy()
    y = np.asarray(labels)
    folds = _folds(np, labels, groups)
    best: tuple[float, str, Any, Any] | None = None
    for name, (features, weights) in VARIANTS.items():
        if not folds:
            break
        names, scores = _out_of_fold(np, blocks[features], y, weights, folds)
        predicted = names[scores.argmax(1)]
        score = _accuracy_and_macro_f1(np, y, predicted)
        if best is None or score > best[0] + 1e-9:
            best = (score, name, names, scores)
    variant = best[1] if best is not None else "word+char"
    features, weights = VARIANTS[variant]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = _svm(weights).fit(blocks[features], y)
    state: dict[str, Any] = {
        "variant": variant, "classes": [str(c) for c in model.classes_],
        "coef": model.coef_.tolist(), "intercept": model.intercept_.tolist(),
        "temperature": 1.0, "held_out": [], "groups": [], "accuracy": 0.0}
    if best is not None:
        _, _, names, scores = best
        temperature = _temperature(np, scores, np.searchsorted(names, y))
        probs = softmax(np, scores / temperature)
        right = names[probs.argmax(1)] == y
        state.update(temperature=temperature, accuracy=float(right.mean()), groups=list(groups),
                     held_out=[[float(p), bool(r)] for p, r in zip(probs.max(1), right,
                                                                  strict=True)])
    return state


def _temperature(np: Any, scores: Any, truth: Any) -> float:
    """The softmax temperature that makes the held-out scores most likely."""
    best, best_loss = 1.0, math.inf
    rows = np.arange(len(truth))
    for t in np.geomspace(0.02, 5.0, 40):
        probs = softmax(np, scores / t)
        loss = -np.log(np.clip(probs[rows, truth], 1e-12, 1.0)).mean()
        if loss < best_loss:
            best, best_loss = float(t), loss
    return best


def _accuracy_and_macro_f1(np: Any, y: Any, predicted: Any) -> float:
    """The mean of accuracy and macro-F1: what model selection maximises."""
    f1s = []
    for label in np.unique(y):
        tp = float(((predicted == label) & (y == label)).sum())
        fp = float(((predicted == label) & (y != label)).sum())
        fn = float(((predicted != label) & (y == label)).sum())
        f1s.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return (float((predicted == y).mean()) + sum(f1s) / len(f1s)) / 2
