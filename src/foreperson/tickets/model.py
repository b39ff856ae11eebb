"""The offline ticket model: classify, draft a reply, triage.

Classification: TF-IDF over word uni- and bigrams and character 2-5-grams (which cope
with five languages and with typos), and a linear SVM from scikit-learn. The variant
(character n-grams alone or with words, class weights) is chosen by cross-validation
on the training examples, so the model is at least as good on them as the simple
baselines it is chosen from. The same out-of-fold predictions calibrate the confidence
(a softmax of the SVM's scores with a fitted temperature) and fit the threshold below
which a ticket goes to a human: the lowest one at which the held-out tickets above it
were right at least ``target_precision`` of the time (a lower confidence bound of it,
counting the copies of one text once, so that a lucky handful does not count).

Drafts: with the bundled demo examples, a reply written for the predicted category in
the ticket's language (:mod:`~foreperson.tickets.drafts`); with your own examples, the
answer of the most similar answered example of the same label and language whose
request agrees with the ticket's (the same action asked, no other account tier, product
or place: :func:`~foreperson.tickets.drafts.request_mismatches`; of the five most
similar, the first that agrees), its template slots filled from the ticket and the
example's order number swapped for the ticket's; flagged for a human when no example
is similar enough, when none of them asks for the same, when a slot cannot be filled
or when the answer quotes details the ticket does not have.
Triage: :mod:`~foreperson.tickets.triage`.

Training takes a second on the bundled examples (importing scikit-learn about as long
again) and minutes on large exports, so the trained classifier is kept: its state
(vocabularies, idf, coefficients, intercepts, classes, temperatures, the out-of-fold
figures the threshold is fitted on, the examples' languages) is written as JSON to the
cache folder (``$FOREPERSON_CACHE_DIR``, else ``$XDG_CACHE_HOME/foreperson``, else
``~/.cache/foreperson``) as ``classifier-<key>.json``, the key a hash of every example
and of the versions of scikit-learn, scipy, numpy and py3langid. A later process with
the same examples reads it back and classifies with numpy alone, never importing
scikit-learn; a model trained here classifies from the same state, so both predict
exactly the same. The eight most recently used states are kept.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError, InputError
from . import _cache, _classifier
from ._classifier import Features, LinearClassifier
from ._tfidf import Similarities
from .drafts import (
    TEMPLATE_CATEGORIES,
    borrowed_claims,
    complete_letter,
    fill_placeholders,
    foreign_identifiers,
    informal_reply,
    loose_ends,
    personal_greeting,
    request_mismatches,
    signature_name,
    swap_references,
    template_reply,
)
from .language import LANGUAGES, detect_language, detect_languages, dominant_language
from .reader import find_column, read_records
from .triage import draft_promises, ticket_signals

__all__ = ["ANSWER_NAMES", "DEFAULT_MIN_SIMILARITY", "DEFAULT_TARGET_PRECISION", "LABEL_NAMES",
           "LANGUAGE_NAMES", "PRIORITY_NAMES", "TEXT_NAMES", "Calibration", "Classification",
           "Example", "TicketModel", "Triage", "bundled_examples", "load_examples",
           "raised_priority", "training_estimate_s", "triage"]

TEXT_NAMES = ("text", "body", "message", "description", "content")
LABEL_NAMES = ("label", "category", "queue", "type", "class")
ANSWER_NAMES = ("answer", "reply", "response", "draft_reply")
PRIORITY_NAMES = ("priority", "urgency")
LANGUAGE_NAMES = ("language", "lang", "locale")

DEFAULT_TARGET_PRECISION = 0.9
"""Default share (0..1) of unflagged tickets the classifier should get right."""

DEFAULT_MIN_SIMILARITY = 0.45
"""Below this cosine similarity (0..1) the nearest answered example is "far": its
answer is not offered as the draft without a human."""

_HIGH_PRIORITY = re.compile(
    r"\b(?:urgent\w*|asap|immediately|critical|dringend\w*|sofort|urgente\w*|inmediat\w*|"
    r"imediat\w*|cr[íi]tic\w*|critique)\b", re.IGNORECASE)
_CANDIDATES = 5         # similar examples of the label tried for one that asks the same
_CACHE_KEEP = 8         # classifier states kept in the cache folder, most recently used
_LIBRARIES = ("scikit-learn", "scipy", "numpy", "py3langid")   # what the state depends on


@dataclass(frozen=True)
class Example:
    """One labelled example.

    Attributes:
        text: the ticket text (subject and body).
        category: its label.
        answer: the reply that was sent ("" when none).
        priority: its priority label ("" when none).
        language: its language code ("" = detect it).
    """

    text: str
    category: str
    answer: str = ""
    priority: str = ""
    language: str = ""


@dataclass(frozen=True)
class Classification:
    """The classifier's verdict.

    Attributes:
        category: the predicted category (a label of the training examples).
        confidence: the calibrated probability that it is right, 0..1.
        priority: ``high`` / ``medium`` / ``low`` (or the examples' own labels).
        language: the ticket's language code ("" when not detected).
    """

    category: str
    confidence: float
    priority: str
    language: str = ""


@dataclass(frozen=True)
class Triage:
    """Whether a human must look, and why (empty reasons: no).

    Attributes:
        needs_human: True when any reason was found.
        reasons: every reason, e.g. ``"low confidence (0.41 < 0.63)"``, ``"legal
            (lawyer)"``, ``"draft promises money (refund)"``.
    """

    needs_human: bool
    reasons: tuple[str, ...]

    @property
    def reason(self) -> str:
        """The reasons as one line ("" when none)."""
        return "; ".join(self.reasons)


@dataclass(frozen=True)
class Calibration:
    """How the confidence threshold was fitted on held-out examples.

    Attributes:
        target_precision: the precision (0..1) asked for among unflagged tickets.
        threshold: confidence (0..1) below which a ticket needs a human; above 1 when
            no threshold reaches the target (every ticket goes to a human).
        held_out: examples the fit was made on (out-of-fold predictions).
        precision: precision (0..1) of the held-out examples at or above the threshold.
        coverage: share (0..1) of held-out examples at or above it.
        accuracy: accuracy (0..1) of the out-of-fold predictions.
        fixed: True when the threshold was given (``min_confidence``), not fitted.
    """

    target_precision: float
    threshold: float
    held_out: int
    precision: float
    coverage: float
    accuracy: float
    fixed: bool = False

    @property
    def reachable(self) -> bool:
        """Whether some threshold reaches the target on the held-out examples."""
        return self.threshold <= 1.0


def bundled_examples() -> list[Example]:
    """The small multilingual demo set that ships with foreperson (52 tickets in
    English, German, Spanish, French and Portuguese, written for this project): enough
    to try the job, not to run it on real traffic."""
    text = resources.files(__package__).joinpath("data/examples.jsonl").read_text("utf-8")
    return [Example(r["text"], r["category"], r.get("answer", ""), r.get("priority", ""),
                    r.get("language", ""))
            for r in map(json.loads, text.splitlines()) if r]


def load_examples(path: str | Path, *, text_column: str | None = None,
                  label_column: str | None = None,
                  answer_column: str | None = None) -> list[Example]:
    """Labelled examples from a CSV / JSON / JSONL file.

    The text is ``subject`` + the text column when the file has a subject; the label
    column is found among ``label``, ``category``, ``queue``, ``type``; the answer among
    ``answer``, ``reply``, ``response``; the priority from ``priority`` and the language
    from ``language`` when present.

    Args:
        path: the file.
        text_column / label_column / answer_column: override the detected columns.

    Returns:
        the examples with text and label, in file order.

    Raises:
        InputError: malformed file, no text or label column, a label that is not a
            single value, or fewer than two labels.
    """
    where = str(path)
    records = read_records(path)
    columns: list[str] = []
    for _, record in records:
        columns.extend(k for k in record if k not in columns)

    def column(names: Sequence[str], override: str | None, role: str) -> str | None:
        return find_column(columns, names, override, role=role, path=where)

    text_col = column(TEXT_NAMES, text_column, "example text")
    label_col = column(LABEL_NAMES, label_column, "label")
    answer_col = column(ANSWER_NAMES, answer_column, "answer")
    subject_col = column(("subject", "title"), None, "subject")
    priority_col = column(PRIORITY_NAMES, None, "priority")
    language_col = column(LANGUAGE_NAMES, None, "language")
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

        def cell(col: str | None, record: dict[str, Any] = record) -> str:
            return str(record.get(col) or "").strip() if col else ""

        language = cell(language_col).lower()[:2]
        out.append(Example(text, label, cell(answer_col), cell(priority_col).lower(),
                           language if language in LANGUAGES else ""))
    if len({e.category for e in out}) < 2:
        raise InputError("examples need at least two different labels to learn from",
                         path=where)
    return out


def training_estimate_s(examples: Sequence[Example]) -> float:
    """About how many seconds :class:`TicketModel` takes to train on ``examples`` on an
    idle 2-core machine: the cross-validation grows with the text (characters) and with
    the number of labels (measured on the public helpdesk exports: 12 to 23 µs per
    character for 3 to 10 labels)."""
    labels = len({e.category for e in examples})
    return sum(len(e.text) for e in examples) * (10 + labels) * 1e-6


class TicketModel:
    """Classifier, reply drafter and triage rules, trained on labelled examples.

    Args:
        examples: the training set (see :func:`bundled_examples`, :func:`load_examples`).
        target_precision: the share (0..1) of unflagged tickets that should be
            classified right; the confidence threshold is fitted on held-out examples
            to reach it (default 0.9).
        min_confidence: a fixed threshold (0..1) instead of the fitted one.
        min_similarity: below this similarity (0..1) of the nearest answered example
            the draft needs a human (default 0.45; examples only).
        templates: draft replies written per category (the bundled demo set) instead
            of the nearest example's answer; default: when every category has one.
        progress: called with a line of text before a training that takes a while.
        cache: read the trained classifier from the cache folder when it holds one of
            these examples, and write it there after training (see the module
            docstring); False: always train, write nothing.

    Attributes:
        cached: True when the classifier was read from the cache (nothing trained).
        training_s: seconds the constructor took (training, or reading the cache).
        categories: the category classifier (``variant``, ``labels``, ``held_out``:
            ``(confidence, right)`` per out-of-fold prediction, ``accuracy``).
        calibration: the :class:`Calibration` in force.
        language: the examples' dominant language: a short ticket keeps it unless its
            words are clearly of another (:func:`~foreperson.tickets.language.detect_language`).

    Raises:
        MissingDependency: scikit-learn (to train: without a cached classifier), numpy
            or py3langid is not installed.
        InputError: fewer than two categories among the examples.
        ConfigurationError: a target or threshold outside 0..1.
    """

    batch_size = 64
    """Tickets per call of the job's batch functions."""

    def __init__(self, examples: Sequence[Example], *,
                 target_precision: float = DEFAULT_TARGET_PRECISION,
                 min_confidence: float | None = None,
                 min_similarity: float = DEFAULT_MIN_SIMILARITY,
                 templates: bool | None = None,
                 progress: Callable[[str], None] | None = None,
                 cache: bool = True) -> None:
        for name, value in (("target_precision", target_precision),
                            ("min_confidence", min_confidence),
                            ("min_similarity", min_similarity)):
            if value is not None and not 0.0 <= value <= 1.0:
                raise ConfigurationError(f"{name} must be between 0 and 1, got {value}")
        if len({e.category for e in examples}) < 2:
            raise InputError("examples need at least two categories", path="<examples>")
        began = time.monotonic()
        # the model is CPU-bound Python (the TF-IDF analyzers hold the GIL): calls from
        # many worker threads at once only slow each other down, so they take turns
        self._lock = threading.Lock()
        self.examples = list(examples)
        self.target_precision = target_precision
        self.min_similarity = min_similarity
        path = _cache_path(self.examples) if cache else None
        trained = _cache.load(path, self._read) if path is not None else None
        self.cached = trained is not None
        if trained is None:
            state = self._train(progress)
            trained = self._read(state)
            if path is not None and _cache.write(path, state):
                _cache.keep_newest(path.parent, "classifier-*.json", _CACHE_KEEP)
        elif path is not None:
            _cache.touch(path)
        self._features, self.categories, self.priorities, self.example_languages = trained
        self.language = dominant_language(self.example_languages)
        self.templates = (templates if templates is not None
                          else set(self.labels) <= TEMPLATE_CATEGORIES)
        self._answered = [i for i, e in enumerate(self.examples) if e.answer]
        self._answers: Similarities | None = None
        self.calibration = self.calibrate(target_precision, min_confidence)
        self.training_s = time.monotonic() - began

    # -- training ----------------------------------------------------------------
    def _train(self, progress: Callable[[str], None] | None) -> dict[str, Any]:
        """The trained state of the examples (:func:`~._classifier.train`)."""
        estimate = training_estimate_s(self.examples)
        if progress is not None and estimate >= 2:
            progress(f"training on {len(self.examples)} examples (about {estimate:.0f} s) ...")
        texts = [e.text for e in self.examples]
        guesses = iter(detect_languages([e.text for e in self.examples if not e.language]))
        languages = [e.language or next(guesses)[0] for e in self.examples]
        return _classifier.train(texts, [e.category for e in self.examples],
                                 [e.priority for e in self.examples], languages)

    def _read(self, state: dict[str, Any]) -> tuple[Features, LinearClassifier,
                                                     LinearClassifier | None, list[str]]:
        """The classifier a state holds: features, categories, priorities, languages.

        Raises:
            ValueError, KeyError, TypeError: not a state of these examples and version.
        """
        if state.get("format") != _classifier.FORMAT:
            raise ValueError("not a classifier state of this version")
        languages = [str(language) for language in state["languages"]]
        if len(languages) != len(self.examples):
            raise ValueError("not a classifier state of these examples")
        features = Features(state["features"])
        categories = LinearClassifier.from_state(state["categories"], features.width)
        priorities = (LinearClassifier.from_state(state["priorities"], features.width)
                      if state["priorities"] is not None else None)
        if categories.classes != sorted({e.category for e in self.examples}) or (
                priorities is not None and priorities.classes != sorted(
                    {e.priority for e in self.examples if e.priority})):
            raise ValueError("not a classifier state of these examples")
        return features, categories, priorities, languages

    def calibrate(self, target_precision: float,
                  min_confidence: float | None = None) -> Calibration:
        """The threshold for ``target_precision`` (0..1), fitted on the held-out
        (out-of-fold) predictions, or ``min_confidence`` as given.

        Returns:
            a :class:`Calibration` (cheap: no training).
        """
        pairs = sorted(self.categories.held_out, reverse=True)
        accuracy = self.categories.accuracy
        if min_confidence is not None or not pairs:
            threshold = min_confidence if min_confidence is not None else 0.0
            above = [r for p, r in pairs if p >= threshold]
            return Calibration(target_precision, threshold, len(pairs),
                               sum(above) / len(above) if above else 0.0,
                               len(above) / len(pairs) if pairs else 1.0, accuracy,
                               fixed=min_confidence is not None)
        order = sorted(range(len(pairs)), key=lambda i: -self.categories.held_out[i][0])
        groups = self.categories.groups or list(range(len(pairs)))
        right, seen = 0, set()
        chosen: tuple[float, float, float] | None = None
        for k, i in enumerate(order, start=1):
            probability, ok = self.categories.held_out[i]
            right += ok
            seen.add(groups[i])
            tie = k < len(order) and self.categories.held_out[order[k]][0] == probability
            # copies of one text are one piece of evidence: the bound counts distinct
            # texts, at the precision of the rows
            if not tie and _wilson_lower(right * len(seen) / k, len(seen)) >= target_precision:
                chosen = (probability, right / k, k / len(pairs))
        if chosen is None:
            return Calibration(target_precision, 1.01, len(pairs), 0.0, 0.0, accuracy)
        return Calibration(target_precision, round(chosen[0], 4), len(pairs), chosen[1],
                           chosen[2], accuracy)

    def reachable_target(self, targets: Sequence[float] = (0.85, 0.8, 0.75, 0.7)
                         ) -> Calibration | None:
        """The calibration for the highest of ``targets`` (precisions, 0..1) that some
        threshold reaches on the held-out examples, or None: what to suggest when the
        target asked for is out of reach."""
        for target in sorted(targets, reverse=True):
            calibration = self.calibrate(target)
            if calibration.reachable:
                return calibration
        return None

    # -- use -----------------------------------------------------------------------
    @property
    def labels(self) -> list[str]:
        """The categories the model can predict."""
        return self.categories.labels

    @property
    def min_confidence(self) -> float:
        """The confidence threshold in force (0..1; above 1: every ticket)."""
        return self.calibration.threshold

    def classify_many(self, texts: Sequence[str]) -> list[Classification]:
        """:meth:`classify` for many texts in one pass (much cheaper per ticket)."""
        if not texts:
            return []
        with self._lock:
            rows = self._features.rows(texts)
            categories, confidences = self.categories.predict(rows)
            languages = detect_languages(list(texts), self.language)
            if self.priorities is not None:
                priorities, _ = self.priorities.predict(rows)
            else:
                priorities = ["high" if _HIGH_PRIORITY.search(t) else "medium" for t in texts]
        return [Classification(c, round(float(p), 4), pr, lang)
                for c, p, pr, (lang, _) in zip(categories, confidences, priorities, languages,
                                               strict=True)]

    def classify(self, text: str) -> Classification:
        """Category, calibrated confidence (0..1), priority and language of one text."""
        return self.classify_many([text])[0]

    def draft_many(self, items: Sequence[tuple[str, str, str]]) -> list[dict[str, Any]]:
        """:meth:`draft` for many ``(text, category, language)`` in one pass."""
        if not items:
            return []
        with self._lock:
            if self.templates or not self._answered:
                return [self._template(text, category, language)
                        for text, category, language in items]
            if self._answers is None:       # the answered examples' rows, on first use
                self._answers = self._features.similarities(
                    [self.examples[i].text for i in self._answered])
            rows = self._features.rows([text for text, _, _ in items])["both"]
            return [self._nearest(text, category, language, self._answers.dot(*rows[row]))
                    for row, (text, category, language) in enumerate(items)]

    def draft(self, text: str, category: str, language: str = "") -> dict[str, Any]:
        """A draft reply in the ticket's language.

        Args:
            text: the ticket.
            category: its predicted category.
            language: its language (detected when "").

        Returns:
            ``{"draft_reply", "similarity", "example", "language", "flags"}``: the
            example's index in the training set (-1 for a written reply), the
            similarity (0..1) of that example, and the reasons the draft needs a human
            (empty when it is safe to send as it is).
        """
        return self.draft_many([(text, category,
                                 language or detect_language(text, self.language)[0])])[0]

    def _template(self, text: str, category: str, language: str) -> dict[str, Any]:
        reply = template_reply(category, language, text)
        return {"draft_reply": reply, "similarity": None, "example": -1,
                "language": language, "flags": draft_promises(reply)}

    def _nearest(self, text: str, category: str, language: str,
                 scores: Any) -> dict[str, Any]:
        pool = [k for k, i in enumerate(self._answered)
                if self.examples[i].category == category
                and self.example_languages[i] == language]
        if not pool:
            reply = template_reply("", language, text)
            return {"draft_reply": reply, "similarity": 0.0, "example": -1,
                    "language": language, "flags": ["no similar answered example (none of "
                                                    f"this label in language {language})"]}
        # the most similar examples first; the first whose request agrees with this
        # ticket's (the action asked, the tier, product or place named) is copied
        ranked = sorted(pool, key=lambda j: -scores[j])
        similarity = float(scores[ranked[0]])
        if similarity < self.min_similarity:
            # the nearest answer is about something else (another product, another
            # problem): a reply that acknowledges and asks is a better start for a person
            return {"draft_reply": template_reply("", language, text),
                    "similarity": round(similarity, 4), "example": self._answered[ranked[0]],
                    "language": language,
                    "flags": [f"no similar answered example (similarity {similarity:.3f} < "
                              f"{self.min_similarity:.3f})"]}
        best: tuple[int, str, list[str]] | None = None
        for k in ranked[:_CANDIDATES]:
            if float(scores[k]) < self.min_similarity:
                break
            index = self._answered[k]
            example = self.examples[index]
            answer = complete_letter(personal_greeting(example.answer, text, language),
                                     text, language)     # never another's name
            answer = swap_references(answer, example.text, text)       # the ticket's order number
            mismatch = request_mismatches(example.text, answer, text, language)
            if best is None or not mismatch:
                best = (k, answer, mismatch)
            if not mismatch:
                break
        assert best is not None
        k, answer, mismatch = best
        index = self._answered[k]
        similarity = float(scores[k])
        flags = [f"draft answers another request ({reason})" for reason in mismatch]
        answer, unfilled = fill_placeholders(answer, text)
        foreign = foreign_identifiers(answer, text)
        theirs = signature_name(self.examples[index].text)    # the example's customer
        if theirs and theirs in answer and theirs not in text:
            foreign.append(theirs)
        if foreign:
            flags.append("draft quotes details not in the ticket (" + ", ".join(foreign[:3])
                         + ")")
        if unfilled:
            flags.append("draft has placeholders to fill in (" + ", ".join(unfilled[:3]) + ")")
        flags += (draft_promises(answer) + borrowed_claims(answer)
                  + informal_reply(answer, text, language) + loose_ends(answer, text))
        return {"draft_reply": answer, "similarity": round(similarity, 4), "example": index,
                "language": language, "flags": flags}

    def triage(self, text: str, result: Classification,
               draft_flags: Sequence[str] = (), *,
               min_confidence: float | None = None) -> Triage:
        """Whether the ticket needs a human, with every reason found (see
        :func:`triage`); ``min_confidence`` overrides the calibrated threshold."""
        threshold = self.min_confidence if min_confidence is None else min_confidence
        return triage(text, result, threshold, draft_flags,
                      accuracy=self.categories.accuracy if self.categories.held_out else None)


def _cache_path(examples: Sequence[Example]) -> Path:
    """Where the classifier of ``examples`` is cached: ``classifier-<key>.json``, the key
    a hash of every example (in order) and of the libraries the state depends on."""
    digest = hashlib.sha256()
    for e in examples:
        digest.update(json.dumps([e.text, e.category, e.answer, e.priority,
                                  e.language]).encode())
    key = _cache.cache_key("classifier", str(_classifier.FORMAT), digest.hexdigest(),
                           *(f"{name}={_cache.library_version(name)}" for name in _LIBRARIES))
    return _cache.cache_dir() / f"classifier-{key}.json"


def triage(text: str, result: Classification, min_confidence: float,
           draft_flags: Sequence[str] = (), *, accuracy: float | None = None) -> Triage:
    """The triage rules: a human is needed for a confidence below ``min_confidence``
    (0..1), a ticket signal (outage, security, legal, angry customer, asks for a person;
    :func:`~foreperson.tickets.triage.ticket_signals`) or a reason the draft gave
    (``draft_flags``: promises, no similar example, foreign details). Every reason found
    is listed, low confidence first. ``accuracy`` (0..1): how often the model was right
    on held-out examples, named when no threshold can be trusted (so that a high score
    is not read as a high chance of being right)."""
    reasons = []
    if result.confidence < min_confidence:
        if min_confidence <= 1:
            reasons.append(f"low confidence ({result.confidence:.2f} < {min_confidence:.2f})")
        elif accuracy is not None:
            reasons.append(f"model not trusted (right {accuracy:.0%} of the time on held-out "
                           f"examples, whatever its score; this ticket's score "
                           f"{result.confidence:.2f})")
        else:
            reasons.append(f"model not trusted (on held-out examples it never reaches the "
                           f"target precision; this ticket {result.confidence:.2f})")
    language = result.language or detect_language(text)[0]
    reasons += [s.reason for s in ticket_signals(text, language)]
    reasons += list(draft_flags)
    return Triage(bool(reasons), tuple(dict.fromkeys(reasons)))


def raised_priority(priority: str, reasons: Sequence[str],
                    signals: Sequence[str]) -> tuple[str, str]:
    """The priority after triage: ``high`` when a reason is one of ``signals`` (say
    ``security``, ``legal``, ``outage``) and the priority was lower.

    Args:
        priority: the classifier's priority (``high`` / ``medium`` / ``low`` or the
            examples' own labels).
        reasons: the triage reasons (``"security (hacked)"`` ...).
        signals: the signal names that raise it.

    Returns:
        ``(priority, reason)``: the reason is ``"priority raised to high (security,
        was medium)"``, or "" when nothing was raised.
    """
    found = [r.split(" (", 1)[0] for r in reasons]
    raising = list(dict.fromkeys(s for s in found if s in signals))
    if not raising or priority.lower() in ("high", "urgent", "critical"):
        return priority, ""
    return "high", (f"priority raised to high ({' and '.join(raising)}, "
                    f"was {priority or 'none'})")


def _wilson_lower(right: float, n: int, z: float = 1.5) -> float:
    """A lower bound (about 93 % one-sided) of the precision behind ``right`` of ``n``:
    the threshold must reach the target with room to spare, since the model trained on
    every example is a little more confident than the held-out folds it was fitted on."""
    p = right / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - spread) / (1 + z * z / n)
