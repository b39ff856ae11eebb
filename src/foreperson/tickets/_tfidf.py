"""TF-IDF features as scikit-learn's ``TfidfVectorizer`` computes them, with numpy alone.

A model trained with scikit-learn and read back from its JSON state scores texts here,
so that a process with a valid cache never imports scikit-learn (about 0.5 to 2.5 s).
:func:`analyzer` splits a text exactly as the vectorizer's default analyzers do (lower
case, then word 1..n-grams of ``(?u)\\b\\w\\w+\\b`` tokens, or character n-grams within
words padded with a space), in the same order; :class:`TfidfBlock` turns the n-gram
counts into the vectorizer's row (sublinear tf, times idf, unit length).
:class:`Similarities` holds unit rows for cosine similarities against many texts.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from itertools import repeat
from typing import Any

from ..errors import MissingDependency

__all__ = ["Similarities", "TfidfBlock", "analyzer", "load_numpy"]

_WHITE_SPACES = re.compile(r"\s\s+")
_TOKEN = re.compile(r"(?u)\b\w\w+\b")


def load_numpy() -> Any:
    """The numpy module.

    Raises:
        MissingDependency: numpy is not installed (it comes with ``foreperson[tickets]``).
    """
    try:
        import numpy
    except ImportError as exc:
        raise MissingDependency("the offline ticket model needs numpy: "
                                "pip install 'foreperson[tickets]'") from exc
    return numpy


def analyzer(kind: str, grams: tuple[int, int]) -> Callable[[str], list[str]]:
    """The n-grams of a text, as ``TfidfVectorizer(analyzer=kind, ngram_range=grams)``
    with its other options at their defaults gives them (same n-grams, same order).

    Args:
        kind: ``"word"`` or ``"char_wb"``.
        grams: the smallest and largest n (inclusive).

    Returns:
        a function from a text to its list of n-grams (repeats included).

    Raises:
        ValueError: another ``kind``.
    """
    low, high = grams
    if kind == "word":
        return lambda text: _word_grams(_TOKEN.findall(text.lower()), low, high)
    if kind == "char_wb":
        return lambda text: _char_wb_grams(text.lower(), low, high)
    raise ValueError(f"no analyzer {kind!r} (known: word, char_wb)")


def _word_grams(tokens: list[str], low: int, high: int) -> list[str]:
    if high == 1:
        return tokens
    out = list(tokens) if low == 1 else []
    for n in range(max(low, 2), min(high + 1, len(tokens) + 1)):
        out.extend(" ".join(tokens[i:i + n]) for i in range(len(tokens) - n + 1))
    return out


def _char_wb_grams(text: str, low: int, high: int) -> list[str]:
    out: list[str] = []
    for word in _WHITE_SPACES.sub(" ", text).split():
        padded = f" {word} "
        for n in range(low, high + 1):
            # every n-gram of the padded word; a word shorter than n counts once, whole
            out.extend(padded[i:i + n] for i in range(max(1, len(padded) - n + 1)))
            if len(padded) <= n:
                break
    return out


class TfidfBlock:
    """One TF-IDF feature block read back from its state.

    Args:
        kind / grams: the analyzer (:func:`analyzer`).
        vocabulary: the n-grams, in column order.
        idf: the inverse document frequency of each column (same length).

    Raises:
        ValueError: ``vocabulary`` and ``idf`` differ in length, or an unknown ``kind``.
        MissingDependency: numpy is not installed.
    """

    def __init__(self, kind: str, grams: tuple[int, int], vocabulary: Sequence[str],
                 idf: Sequence[float]) -> None:
        np = load_numpy()
        if len(vocabulary) != len(idf):
            raise ValueError(f"{len(vocabulary)} n-grams but {len(idf)} idf values")
        self._np = np
        self.analyze = analyzer(kind, grams)
        self.columns = dict(zip(vocabulary, range(len(vocabulary)), strict=True))
        self.idf = np.array(idf, dtype=float)

    def __len__(self) -> int:
        """The number of columns."""
        return len(self.columns)

    def row(self, text: str) -> tuple[Any, Any]:
        """The vectorizer's row for ``text``: ``(columns, values)``, numpy arrays of the
        columns present (in first-seen order) and their sublinear-tf x idf values scaled
        to unit length (all of them empty when no n-gram of ``text`` is known)."""
        np = self._np
        counts = Counter(self.analyze(text))
        columns = np.fromiter(map(self.columns.get, counts, repeat(-1)), dtype=np.intp,
                              count=len(counts))
        known = columns >= 0
        columns = columns[known]
        tf = np.fromiter(counts.values(), dtype=float, count=len(counts))[known]
        values = (1 + np.log(tf)) * self.idf[columns]
        norm = math.sqrt(float(values @ values))
        return columns, (values / norm if norm else values)


class Similarities:
    """Sparse rows (``(columns, values)`` pairs, e.g. :meth:`TfidfBlock.row`), indexed by
    column for dot products with other rows.

    Args:
        rows: the rows (of unit length, for the dot products to be cosines).
        width: the number of columns.

    Raises:
        MissingDependency: numpy is not installed.
    """

    def __init__(self, rows: Sequence[tuple[Any, Any]], width: int) -> None:
        np = load_numpy()
        self._np = np
        self.count = len(rows)
        columns = np.concatenate([c for c, _ in rows] or [np.zeros(0, np.intp)])
        values = np.concatenate([v for _, v in rows] or [np.zeros(0)])
        owners = np.repeat(np.arange(len(rows)), [len(c) for c, _ in rows])
        order = np.argsort(columns, kind="stable")
        self._owners, self._values = owners[order], values[order]
        self._starts = np.searchsorted(columns[order], np.arange(width + 1))

    def dot(self, columns: Any, values: Any) -> Any:
        """The dot product of the row ``(columns, values)`` with each indexed row: a
        numpy array of :attr:`count` floats."""
        np = self._np
        starts, ends = self._starts[columns], self._starts[columns + 1]
        sizes = ends - starts
        total = int(sizes.sum())
        if not total:
            return np.zeros(self.count)
        # the positions of every indexed entry of these columns, column after column
        offsets = np.repeat(starts - np.cumsum(sizes) + sizes, sizes) + np.arange(total)
        weights = self._values[offsets] * np.repeat(values, sizes)
        return np.bincount(self._owners[offsets], weights=weights, minlength=self.count)
