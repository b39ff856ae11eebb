"""Triage: what in a ticket needs a human.

Ticket signals, each language-aware (English, German, Spanish, French, Portuguese):

* ``outage``: a service down for the customer ("outages", "went down", "servers are
  down", "Ausfall", "está caída", "panne générale", "fora do ar");
* ``security``: break-ins, fraud, leaks, account takeovers ("someone logged into my
  account", "gehackt", "acceso no autorizado", "fuite de données", "hackeado");
* ``legal``: threats of legal action ("our lawyer", "we will sue", "demanda judicial",
  "avocat"); a word that means something else in the ticket's language is not a threat
  (French "demande" is a request and "court" is short, Spanish "demanda" alone is
  demand), and "Sue" with a capital is a name;
* ``angry customer``: angry words ("unacceptable", "Frechheit"); shouting in capitals or
  a run of exclamation marks counts only together with a negative word, so a delighted
  "THANK YOU!!!" is not anger;
* ``asks for a person``: the customer wants a human, a manager or a phone call.

A signal just after a negation in the same clause ("there is no outage", "I was not
hacked", "I'm not angry", "I don't need a call back", "kein Ausfall", "ce n'est pas une
fraude", "não preciso de ligação") is not raised; legal threats are never cancelled that
way ("I don't want to involve our lawyer, but ...").

The patterns of the ticket's language are applied, and the English ones too (English
phrases such as "server down" turn up in tickets written in any language).

Wording no pattern lists ("throwing 502s", "someone made purchases with my card", bitter
sarcasm) is caught by a learned second opinion (:class:`SignalModel`): one class-balanced
logistic regression per signal on character and word n-grams, trained on the labelled
lines shipped in ``tickets/data/triage/``. It raises a signal the patterns missed when
its probability reaches :data:`LEARNED_AT` and the word that weighs most for it is not
negated; its reason says so ("outage (learned: 502s)").

The patterns themselves are tables of ``foreperson.tickets._patterns``. What in a draft
must not be sent unread (:func:`draft_promises`) is checked in
:mod:`~foreperson.tickets.drafts`; it is importable from here too.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from itertools import repeat
from typing import Any

from ..errors import MissingDependency
from . import _cache, _tfidf
from ._patterns import (
    ANGRY,
    AVAILABILITY,
    AVOIDED,
    CLAUSE_BREAK,
    CONTACT_DETAILS,
    CRASH,
    FIRST_PERSON_BE,
    GUARDING,
    LAWYER,
    LEGAL,
    LEGAL_ACT,
    MINIMAL,
    NEGATED,
    NEGATIVE,
    NOT_NEEDED,
    NOT_SECURITY,
    OUTAGE,
    OUTAGE_PAST,
    OUTAGE_SUBJECT,
    PERSON,
    PLANNED,
    PRAISE,
    PRICES,
    REGULATOR,
    SECURITY,
    SECURITY_ACT,
    STRONGER,
    SUE,
    WHEN,
)
from .drafts import draft_promises

__all__ = ["LEARNED_AT", "SIGNALS", "Signal", "SignalModel", "draft_promises",
           "ticket_signals"]

SIGNALS = ("outage", "security", "legal", "angry customer", "asks for a person")
"""The ticket signals, in the order their reasons are listed."""


def _negated(text: str, start: int, languages: Iterable[str]) -> bool:
    """Whether the words just before ``start`` cancel what follows (see NEGATED)."""
    before = text[max(0, start - 80):start]
    breaks = list(CLAUSE_BREAK.finditer(before))
    if breaks:
        before = before[breaks[-1].end():]
    for lang in languages:
        match = NEGATED[lang].search(before) if lang in NEGATED else None
        if match and not STRONGER.search(match.group(1)):
            return True
    return False


@dataclass(frozen=True)
class Signal:
    """One triage signal found in a ticket.

    Attributes:
        name: one of :data:`SIGNALS`.
        evidence: the words that raised it, as written (lower case).
    """

    name: str
    evidence: str

    @property
    def reason(self) -> str:
        """``name (evidence)``, as an output line's ``reason`` shows it."""
        return f"{self.name} ({self.evidence})"


def _tables(language: str) -> list[str]:
    return [language] if language == "en" else [language, "en"]



def _guarding(text: str, start: int, words: str) -> bool:
    return bool(GUARDING.search(text[max(0, start - 40):start]))


def _not_needed(text: str, start: int, words: str) -> bool:
    return bool(NOT_NEEDED.match(text, start + len(words)))


def _sentence(text: str, at: int) -> str:
    """The sentence of ``text`` around offset ``at`` (up to ., !, ? or a line break)."""
    start = max(text.rfind(mark, 0, at) for mark in ".!?\n") + 1
    ends = [i for i in (text.find(mark, at) for mark in ".!?\n") if i >= 0]
    return text[start:min(ends) if ends else len(text)]


def _not_an_outage(text: str, start: int, words: str) -> bool:
    """Outage words that are about the customer's own availability ("I'm not reachable
    tomorrow"), about downtime to avoid or planned ("to minimise downtime"), or about
    one that is over and thanked for ("thanks for fixing the outage so quickly")."""
    if OUTAGE_PAST.search(_sentence(text, start)):
        return True         # "thanks for fixing the outage so quickly": over, and praised
    if (AVOIDED.search(text[max(0, start - 40):start])
            or MINIMAL.match(text, start + len(words)) or PLANNED.search(text)
            or (CRASH.search(words) and WHEN.match(text, start + len(words)))):
        return True
    clause = text[max(0, start - 60):start]
    breaks = list(CLAUSE_BREAK.finditer(clause))
    if re.search(r"\bdown\b", words, re.IGNORECASE) and PRICES.search(
            clause[breaks[-1].end():] if breaks else clause):
        return True
    if not AVAILABILITY.search(words):
        return False
    before = text[max(0, start - 60):start]
    breaks = list(CLAUSE_BREAK.finditer(before))
    return bool(FIRST_PERSON_BE.search(before[breaks[-1].end():] if breaks else before))


def _first(patterns: dict[str, re.Pattern[str]], text: str, languages: list[str], *,
           negatable: bool = True,
           exclude: Callable[[str, int, str], bool] | None = None) -> str:
    """The first match (as evidence) of the patterns of ``languages`` that is not
    negated (``negatable``) nor excluded (``exclude(text, start, words)``), or ""."""
    for lang in languages:
        pattern = patterns.get(lang)
        for match in pattern.finditer(text) if pattern is not None else ():
            if negatable and _negated(text, match.start(), languages):
                continue
            if exclude is not None and exclude(text, match.start(), match.group(0)):
                continue
            return " ".join(match.group(0).lower().split())
    return ""


def _shouting(text: str) -> bool:
    words = re.findall(r"[^\W\d_]{4,}", text)
    loud = [w for w in words if w.isupper()]
    return len(loud) >= 3 and len(loud) >= 0.3 * len(words)


def _anger(text: str, languages: list[str]) -> str:
    word = _first(ANGRY, text, languages)
    if word:
        return word
    loud = _shouting(text)
    exclaimed = text.count("!") >= 3
    # "the new app is amazing, never down!!!": delight, whatever the "never"
    if (loud or exclaimed) and _first(NEGATIVE, text, languages, negatable=False) and not (
            PRAISE.search(text)):
        return "shouting" if loud else "exclamation marks"
    return ""


LEARNED_AT = 0.7
"""Probability (0..1) from which :class:`SignalModel` raises a signal the patterns missed
(chosen by cross-validation on the shipped lines, see ``benchmarks/bench_triage.py``)."""

_SENTENCES = re.compile(r"[^.!?\n]*[^\W_][^.!?\n]*[.!?]*")

_FEATURES = (("char_wb", (2, 5), 2), ("word", (1, 2), 1))   # analyzer, n-gram range, min_df
_FORMAT = 2      # the version of SignalModel.state(); bump it when the features change


def _learning() -> tuple[Any, Any, Any, Any]:
    try:
        import numpy
        from scipy import sparse
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression
    except ImportError as exc:
        raise MissingDependency("triage's learned signals need scikit-learn: "
                                "pip install 'foreperson[tickets]'") from exc
    return numpy, sparse, TfidfVectorizer, LogisticRegression


class SignalModel:
    """A learned second opinion on the ticket signals, for wording no pattern lists.

    One class-balanced logistic regression per signal (scikit-learn), on TF-IDF features:
    character n-grams of 2 to 5 within words, and word unigrams and bigrams.

    Args:
        rows: labelled lines, each ``{"text": str, "signals": [names from SIGNALS]}``;
            each signal needs lines with it and lines without it.
        c: inverse regularisation strength of each regression (scikit-learn's ``C``).

    Raises:
        MissingDependency: scikit-learn is not installed (``foreperson[tickets]``).
        ValueError: a line names a signal not in :data:`SIGNALS`, or a signal is on every
            line or on none.
    """

    def __init__(self, rows: Sequence[dict[str, Any]], c: float = 4.0) -> None:
        np, sparse, tfidf, regression = _learning()
        unknown = {s for r in rows for s in r["signals"]} - set(SIGNALS)
        if unknown:
            raise ValueError(f"unknown signal(s) {sorted(unknown)}; known: {list(SIGNALS)}")
        texts = [r["text"] for r in rows]
        vectorizers = [tfidf(analyzer=analyzer, ngram_range=grams, sublinear_tf=True,
                             min_df=min_df) for analyzer, grams, min_df in _FEATURES]
        features = sparse.hstack([v.fit_transform(texts) for v in vectorizers]).tocsr()
        weights, bias = [], []
        for signal in SIGNALS:
            labels = np.array([signal in r["signals"] for r in rows])
            if labels.all() or not labels.any():
                raise ValueError(f"signal {signal!r} needs lines with it and lines without it")
            model = regression(C=c, class_weight="balanced", solver="liblinear")
            model.fit(features, labels)
            weights.append(model.coef_[0])
            bias.append(model.intercept_[0])
        # rounded, so that a model read back from its JSON state scores exactly the same
        every = np.round(np.array(weights).T, 7)       # features x signals
        parts, first = [], 0
        for v in vectorizers:
            size = len(v.vocabulary_)
            grams = sorted(v.vocabulary_, key=v.vocabulary_.__getitem__)   # by column
            parts.append({"grams": grams, "idf": np.round(v.idf_, 7).tolist(),
                          "weights": every[first:first + size].ravel().tolist()})
            first += size
        self._load({"format": _FORMAT, "parts": parts,
                    "bias": np.round(np.array(bias), 7).tolist()})

    def _load(self, state: dict[str, Any]) -> None:
        np = _tfidf.load_numpy()
        if state.get("format") != _FORMAT or len(state["parts"]) != len(_FEATURES):
            raise ValueError("not a triage model state of this version")
        self._np = np
        self._state = state
        self._bias = np.array(state["bias"], dtype=float)
        # scoring one text through scikit-learn costs ~3 ms of call overhead; the same
        # sums by hand (sublinear tf x idf, l2 per part, dot the weights) a third of it,
        # with scikit-learn's analyzers redone in _tfidf (no scikit-learn import to read
        # a state back)
        self._parts = [
            (_tfidf.analyzer(analyzer, grams),
             dict(zip(part["grams"], range(len(part["grams"])), strict=True)),
             np.array(part["idf"], dtype=float),
             np.array(part["weights"], dtype=float).reshape(-1, len(SIGNALS)))
            for (analyzer, grams, _), part in zip(_FEATURES, state["parts"], strict=True)]

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> SignalModel:
        """A model from :meth:`state` (a JSON object); needs numpy, not scikit-learn.

        Raises:
            ValueError, KeyError, TypeError: ``state`` is not a state of this version.
            MissingDependency: numpy is not installed.
        """
        model = cls.__new__(cls)
        model._load(state)
        return model

    def state(self) -> dict[str, Any]:
        """Everything the model needs to score, as a JSON object (vocabularies, idf,
        weights): :meth:`from_state` reads it back and scores exactly the same."""
        return self._state

    def _score(self, text: str) -> Any:
        np = self._np
        total = self._bias.copy()
        for analyzer, vocabulary, idf, weights in self._parts:
            counts = Counter(analyzer(text))
            columns = np.fromiter(map(vocabulary.get, counts, repeat(-1)), dtype=np.intp,
                                  count=len(counts))
            known = columns >= 0
            if known.any():
                columns = columns[known]
                tf = np.fromiter(counts.values(), dtype=float, count=len(counts))[known]
                values = (1 + np.log(tf)) * idf[columns]
                total += values @ weights[columns] / math.sqrt(values @ values)
        return total

    @classmethod
    @functools.cache
    def bundled(cls) -> SignalModel:
        """The model trained on the lines shipped in ``tickets/data/triage/*.jsonl``.

        Training takes about two seconds; the trained state is kept as JSON in the
        cache folder (``$FOREPERSON_CACHE_DIR``, else ``$XDG_CACHE_HOME/foreperson``,
        else ``~/.cache/foreperson``) under a name derived from the lines and the
        scikit-learn version (read from its metadata: reading the state back imports
        numpy, not scikit-learn), and read back in a fraction of that by later
        processes. A cache that cannot be read or written is passed over.

        Raises:
            MissingDependency: no valid cache and scikit-learn is not installed.
        """
        folder = resources.files("foreperson.tickets") / "data" / "triage"
        files = sorted((f for f in folder.iterdir() if f.name.endswith(".jsonl")),
                       key=lambda f: f.name)
        texts = [f.read_text(encoding="utf-8") for f in files]
        key = _cache.cache_key(str(_FORMAT), _cache.library_version("scikit-learn"), *texts)
        path = _cache.cache_dir() / f"triage-{key}.json"
        cached = _cache.load(path, cls.from_state)
        if cached is not None:
            return cached
        model = cls([json.loads(line) for text in texts for line in text.splitlines()
                     if line.strip()])
        _cache.write(path, model.state())
        return model

    def _scores(self, texts: Sequence[str]) -> Any:
        return self._np.array([self._score(t) for t in texts]).reshape(len(texts), len(SIGNALS))

    def probabilities(self, text: str) -> dict[str, float]:
        """Per signal, the probability (0..1) that ``text`` carries it."""
        scores = self._scores([text])[0]
        return {signal: 1 / (1 + math.exp(-float(score)))
                for signal, score in zip(SIGNALS, scores, strict=True)}

    def evidence(self, text: str, signal: str) -> tuple[int, int, str] | None:
        """The sentence of ``text`` that carries ``signal`` on its own, as ``(start, end,
        words)`` (offsets in ``text``; words clipped to 80 characters), or None when no
        sentence alone reaches probability 0.5 (the signal came from words spread over
        the whole ticket)."""
        sentences = list(_SENTENCES.finditer(text))
        if not sentences:
            return None
        column = SIGNALS.index(signal)
        scores = self._scores([m.group(0) for m in sentences])[:, column]
        best = int(scores.argmax())
        if scores[best] < 0:
            return None
        sentence = sentences[best]
        words = " ".join(sentence.group(0).split())
        return (sentence.start(), sentence.end(),
                words if len(words) <= 80 else words[:79].rsplit(" ", 1)[0] + "…")

    def signals(self, text: str, language: str, missing: Iterable[str]) -> list[Signal]:
        """The signals among ``missing`` this model raises for ``text``: probability at
        least :data:`LEARNED_AT`, and a sentence that carries it (:meth:`evidence`) in
        which the patterns do not see that signal negated or ruled out ("no need to call
        me back", "to minimise downtime", a line of contact details), and which holds
        the evidence the patterns would need (:func:`_has_evidence`: a security act,
        a legal act or actor, something that can be down)."""
        languages = _tables(language)
        wanted = set(missing)
        found = []
        for signal, probability in self.probabilities(text).items():
            if signal not in wanted or probability < LEARNED_AT:
                continue
            where = self.evidence(text, signal)
            if where is None or _ruled_out(text, signal, *where, languages):
                continue
            if not _has_evidence(signal, text, text[where[0]:where[1]]):
                continue        # an oil leak, a plain complaint, cold food
            found.append(Signal(signal, f"learned: {where[2]}"))
        return found


def _has_evidence(signal: str, text: str, sentence: str) -> bool:
    """Whether a ticket the learned model read ``signal`` in (``sentence`` the one that
    carries it) holds what the patterns would need too: for security a security act in
    that sentence, not only a leak of oil or a bag taken from the belt; for legal a
    legal act or actor in the ticket (a lawyer, a court, a regulator, the police), not
    a plain complaint; for outage something in the ticket that can be down (a service,
    a connection, power), and not in a sentence thanking for its fix."""
    if signal == "security":
        return not (NOT_SECURITY.search(sentence) and not SECURITY_ACT.search(sentence))
    if signal == "legal":
        return bool(LEGAL_ACT.search(text) or REGULATOR.search(text))
    if signal == "outage":
        return bool(OUTAGE_SUBJECT.search(text)) and not OUTAGE_PAST.search(sentence)
    return True


def _ruled_out(text: str, signal: str, start: int, end: int, words: str,
               languages: list[str]) -> bool:
    """Whether the sentence ``text[start:end]`` that carries ``signal`` for the learned
    model opens negated, or holds that signal's pattern negated or excluded."""
    if _negated(text, start, languages):
        return True
    if signal == "asks for a person" and (CONTACT_DETAILS.search(words)
                                          or NOT_NEEDED.search(words)):
        return True
    patterns, exclude = _PATTERNS[signal]
    for lang in languages:
        pattern = patterns.get(lang)
        for match in pattern.finditer(text, start, end) if pattern is not None else ():
            if _negated(text, match.start(), languages) or (
                    exclude is not None and exclude(text, match.start(), match.group(0))):
                return True
    return signal == "outage" and _not_an_outage(text, start, words)


_PATTERNS: dict[str, tuple[dict[str, re.Pattern[str]],
                           Callable[[str, int, str], bool] | None]] = {
    "outage": (OUTAGE, _not_an_outage), "security": (SECURITY, _guarding),
    "legal": (LEGAL, None), "angry customer": (ANGRY, None),
    "asks for a person": (PERSON, _not_needed)}


def ticket_signals(text: str, language: str = "en", *, learned: bool = True) -> list[Signal]:
    """Every signal in a ticket, in the order of :data:`SIGNALS`.

    Args:
        text: the ticket (subject and body).
        language: its language (a code of :data:`~foreperson.tickets.language.LANGUAGES`);
            that language's patterns and the English ones are applied.
        learned: also ask :meth:`SignalModel.bundled` about the signals the patterns did
            not raise (False: the patterns alone).

    Returns:
        the signals found (empty: nothing needs a human).

    Raises:
        MissingDependency: ``learned`` and scikit-learn is not installed.
    """
    found = _pattern_signals(text, language)
    if learned:
        missing = [s for s in SIGNALS if s not in {f.name for f in found}]
        found += SignalModel.bundled().signals(text, language, missing)
        found.sort(key=lambda s: SIGNALS.index(s.name))
    return found


def _pattern_signals(text: str, language: str) -> list[Signal]:
    languages = _tables(language)
    found = []
    outage = _first(OUTAGE, text, languages, exclude=_not_an_outage)
    if outage:
        found.append(Signal("outage", outage))
    security = _first(SECURITY, text, languages, exclude=_guarding)
    if security:
        found.append(Signal("security", security))
    # "I don't want to involve our lawyer, but ..." is still a threat: never cancelled
    legal = _first(LEGAL, text, languages, negatable=False)
    if not legal:
        lawyer = LAWYER.search(text)
        legal = " ".join(lawyer.group(0).lower().split()) if lawyer else ""
    if not legal:
        sue = SUE.search(text)
        legal = (sue.group(0).lower() if sue and not _negated(text, sue.start(), languages)
                 else "")
    if legal:
        found.append(Signal("legal", legal))
    anger = _anger(text, languages)
    if anger:
        found.append(Signal("angry customer", anger))
    person = _first(PERSON, text, languages, exclude=_not_needed)
    if person:
        found.append(Signal("asks for a person", person))
    return found
