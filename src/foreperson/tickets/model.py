"""The offline ticket model: classify, draft a reply, triage.

A small local classifier trained on labelled examples (TF-IDF over character n-grams,
which copes with several languages, and a logistic regression from scikit-learn). The
draft reply is the answer of the nearest answered example. Triage flags what needs a
human, with the reasons: low confidence, security or legal words, an outage, an angry
customer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import InputError, MissingDependency
from .reader import find_column, read_records

__all__ = ["Classification", "Example", "TicketModel", "Triage", "bundled_examples",
           "load_examples", "triage"]

TEXT_NAMES = ("text", "body", "message", "description", "content")
LABEL_NAMES = ("label", "category", "queue", "type", "class")
ANSWER_NAMES = ("answer", "reply", "response", "draft_reply")
PRIORITY_NAMES = ("priority", "urgency")

# Words that need a human, in the languages of the bundled examples (en, de, es, fr, pt).
# Matched as whole words (or word starts for stems ending in '*'), case-insensitively.
TRIGGERS: dict[str, tuple[str, ...]] = {
    "security": ("hack*", "breach*", "phishing", "malware", "ransomware", "unauthori*",
                 "data leak*", "stolen", "fraud*", "datenleck*", "sicherheitslücke*",
                 "gehackt", "betrug*", "no autorizad*", "hackead*", "fuite de données",
                 "piraté*", "violación de datos", "vazamento*", "fraude*", "não autorizad*"),
    "legal": ("lawyer*", "lawsuit*", "legal action", "sue", "gdpr", "attorney*", "court",
              "anwalt*", "klage*", "rechtliche schritte", "dsgvo", "abogad*", "demanda*",
              "avocat*", "poursuite*", "advogad*", "processo judicial", "rgpd", "lgpd"),
    "outage": ("outage", "is down", "are down", "service down", "production is down",
               "not reachable", "unreachable", "ausfall*", "nicht erreichbar", "caída",
               "está caída", "fuera de servicio", "panne*", "hors service", "fora do ar",
               "interrupção", "indisponível"),
    "angry customer": ("unacceptable", "ridiculous", "furious", "outrageous", "worst",
                       "disgusting", "fed up", "frechheit", "inakzeptabel", "unverschämt",
                       "inaceptable", "vergonzoso", "inadmissible", "inacceptable",
                       "scandaleux", "inaceitável", "absurdo", "vergonha"),
}


def _compile(words: Sequence[str]) -> re.Pattern[str]:
    parts = []
    for word in words:
        stem = re.escape(word.rstrip("*")).replace(r"\ ", r"\s+")
        parts.append(rf"\b{stem}\w*" if word.endswith("*") else rf"\b{stem}\b")
    return re.compile("|".join(parts), re.IGNORECASE)


_TRIGGER_PATTERNS = {reason: _compile(words) for reason, words in TRIGGERS.items()}
_HIGH_PRIORITY = _compile(("urgent*", "asap", "immediately", "critical", "dringend*",
                           "sofort", "urgente*", "inmediat*", "imediat*", "crític*"))


@dataclass(frozen=True)
class Example:
    """One labelled example: text, category, optional answer and priority."""

    text: str
    category: str
    answer: str = ""
    priority: str = ""


@dataclass(frozen=True)
class Classification:
    """The classifier's verdict.

    Attributes:
        category: the predicted category (a label of the training examples).
        confidence: the model's probability for it, 0..1.
        priority: ``high`` / ``medium`` / ``low`` (or the examples' own labels).
    """

    category: str
    confidence: float
    priority: str


@dataclass(frozen=True)
class Triage:
    """Whether a human must look, and why (empty reasons: no)."""

    needs_human: bool
    reasons: tuple[str, ...]

    @property
    def reason(self) -> str:
        """The reasons as one line ("" when none)."""
        return "; ".join(self.reasons)


def bundled_examples() -> list[Example]:
    """The small multilingual example set that ships with foreperson (52 tickets in
    English, German, Spanish, French and Portuguese, written for this project)."""
    text = resources.files(__package__).joinpath("data/examples.jsonl").read_text("utf-8")
    return [Example(r["text"], r["category"], r.get("answer", ""), r.get("priority", ""))
            for r in map(json.loads, text.splitlines()) if r]


def load_examples(path: str | Path, *, text_column: str | None = None,
                  label_column: str | None = None,
                  answer_column: str | None = None) -> list[Example]:
    """Labelled examples from a CSV / JSON / JSONL file.

    The text is ``subject`` + the text column when the file has a subject; the label
    column is found among ``label``, ``category``, ``queue``, ``type``; the answer among
    ``answer``, ``reply``, ``response``; the priority from ``priority`` when present.

    Raises:
        InputError: malformed file, no text or label column, or fewer than two labels.
    """
    where = str(path)
    records = read_records(path)
    columns: list[str] = []
    for _, record in records:
        columns.extend(k for k in record if k not in columns)
    text_col = find_column(columns, TEXT_NAMES, text_column, role="example text", path=where)
    label_col = find_column(columns, LABEL_NAMES, label_column, role="label", path=where)
    answer_col = find_column(columns, ANSWER_NAMES, answer_column, role="answer", path=where)
    subject_col = find_column(columns, ("subject", "title"), None, role="subject", path=where)
    priority_col = find_column(columns, PRIORITY_NAMES, None, role="priority", path=where)
    if text_col is None or label_col is None:
        raise InputError(f"examples need a text and a label column; found {columns} "
                         "(name them with --examples-text-column / --examples-label-column)",
                         path=where)
    out = []
    for line, record in records:
        parts = [str(record.get(subject_col) or "") if subject_col else "",
                 str(record.get(text_col) or "")]
        text = "\n".join(p for p in parts if p).strip()
        raw_label = record.get(label_col)
        if isinstance(raw_label, (list, dict)):
            raise InputError(f"label {json.dumps(raw_label)[:60]} is not a single value; "
                             "name a column of plain labels with --examples-label-column",
                             path=where, line=line)
        label = str(raw_label or "").strip()
        if not text or not label:
            continue
        out.append(Example(text, label,
                           str(record.get(answer_col) or "").strip() if answer_col else "",
                           str(record.get(priority_col) or "").strip().lower()
                           if priority_col else ""))
    if len({e.category for e in out}) < 2:
        raise InputError("examples need at least two different labels to learn from",
                         path=where)
    return out


class TicketModel:
    """Classifier, reply drafter and triage rules, trained on labelled examples.

    Args:
        examples: the training set (see :func:`bundled_examples`, :func:`load_examples`).
        min_confidence: below this probability (0..1) a ticket needs a human; default
            twice chance, ``2 / number of categories``, but at most halfway from chance
            to certain (0.75 with two categories).

    Raises:
        MissingDependency: scikit-learn is not installed.
        InputError: fewer than two categories among the examples.
    """

    def __init__(self, examples: Sequence[Example], *,
                 min_confidence: float | None = None) -> None:
        try:
            from sklearn.feature_extraction.text import TfidfVectorizer
            from sklearn.linear_model import LogisticRegression
        except ImportError as exc:
            raise MissingDependency("the offline ticket model needs scikit-learn: "
                                    "pip install 'foreperson[tickets]'") from exc
        if len({e.category for e in examples}) < 2:
            raise InputError("examples need at least two categories", path="<examples>")
        self.examples = list(examples)
        self.vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4),
                                          sublinear_tf=True, min_df=1, max_features=60000)
        matrix = self.vectorizer.fit_transform([e.text for e in self.examples])
        self.categories = LogisticRegression(max_iter=3000, C=100.0)
        self.categories.fit(matrix, [e.category for e in self.examples])
        labels = len(self.categories.classes_)
        self.min_confidence = (min_confidence if min_confidence is not None
                               else min(2.0 / labels, 0.5 + 0.5 / labels))
        prioritised = [(i, e.priority) for i, e in enumerate(self.examples) if e.priority]
        self.priorities = None
        if len({p for _, p in prioritised}) >= 2:
            self.priorities = LogisticRegression(max_iter=3000, C=100.0)
            self.priorities.fit(matrix[[i for i, _ in prioritised]], [p for _, p in prioritised])
        answered = [i for i, e in enumerate(self.examples) if e.answer]
        self._answered = answered
        self._answer_matrix = matrix[answered] if answered else None

    @property
    def labels(self) -> list[str]:
        """The categories the model can predict."""
        return [str(c) for c in self.categories.classes_]

    def classify(self, text: str) -> Classification:
        """Category, confidence (0..1) and priority of one ticket text."""
        features = self.vectorizer.transform([text])
        proba = self.categories.predict_proba(features)[0]
        best = int(proba.argmax())
        if self.priorities is not None:
            priority = str(self.priorities.predict(features)[0])
        else:
            priority = "high" if _HIGH_PRIORITY.search(text) else "medium"
        return Classification(str(self.categories.classes_[best]), float(proba[best]), priority)

    def draft(self, text: str, category: str) -> dict[str, Any]:
        """A draft reply: the answer of the most similar answered example, preferring
        examples of ``category``.

        Returns:
            ``{"draft_reply": str, "similarity": float, "example": int}`` (example is the
            index in the training set, -1 when no example has an answer).
        """
        if self._answer_matrix is None:
            return {"draft_reply": "", "similarity": 0.0, "example": -1}
        scores = (self._answer_matrix @ self.vectorizer.transform([text]).T).toarray().ravel()
        same = [k for k, i in enumerate(self._answered) if self.examples[i].category == category]
        pool = same or range(len(self._answered))
        k = max(pool, key=lambda j: scores[j])
        index = self._answered[k]
        return {"draft_reply": self.examples[index].answer, "similarity": float(scores[k]),
                "example": index}

    def triage(self, text: str, result: Classification) -> Triage:
        """Whether the ticket needs a human, with every reason found (see :func:`triage`)."""
        return triage(text, result, self.min_confidence)


def triage(text: str, result: Classification, min_confidence: float) -> Triage:
    """The triage rules: a human is needed for low confidence (below ``min_confidence``,
    0..1), security or legal words, an outage, or an angry customer (angry words, three
    or more exclamation marks, or shouting in capitals). Every reason found is listed."""
    reasons = []
    if result.confidence < min_confidence:
        reasons.append(f"low confidence ({result.confidence:.3f} < {min_confidence:.3f})")
    for reason, pattern in _TRIGGER_PATTERNS.items():
        match = pattern.search(text)
        if match:
            reasons.append(f"{reason} ({match.group(0).lower()})")
    if text.count("!") >= 3 or _shouting(text):
        reasons.append("angry customer (shouting)")
    return Triage(bool(reasons), tuple(dict.fromkeys(reasons)))


def _shouting(text: str) -> bool:
    words = [w for w in re.findall(r"[^\W\d_]{4,}", text)]
    loud = [w for w in words if w.isupper()]
    return len(loud) >= 3 and len(loud) >= 0.3 * len(words)
