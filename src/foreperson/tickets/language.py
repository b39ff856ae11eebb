"""Which language a ticket is written in: English, German, Spanish, French or Portuguese.

Detection uses py3langid (a maintained fork of langid.py that ships its model inside
the package: nothing is downloaded at run time), restricted to the five languages the
drafts and triage rules know. A text too short to tell (a subject of two words) is
decided by its function words, and falls back to English when nothing points
elsewhere.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from ..errors import MissingDependency

__all__ = ["LANGUAGES", "detect_language", "detect_languages"]

LANGUAGES = ("en", "de", "es", "fr", "pt")
"""The languages of the drafts and triage rules (ISO 639-1)."""

_SURE = 0.9
"""Below this probability (0..1) the function words decide."""

_FUNCTION_WORDS = {
    "en": {"the", "and", "is", "my", "you", "your", "please", "thanks", "thank", "with",
           "not", "have", "it", "i", "we", "this", "for", "to", "of", "hello", "hi"},
    "de": {"der", "die", "das", "und", "ist", "nicht", "ich", "mein", "meine", "sie",
           "bitte", "danke", "mit", "ein", "eine", "wir", "hallo", "für", "auf"},
    "es": {"el", "la", "los", "las", "y", "es", "mi", "por", "favor", "gracias", "con",
           "una", "un", "hola", "que", "para", "del", "está", "tengo", "necesito"},
    "fr": {"le", "la", "les", "et", "est", "mon", "ma", "vous", "merci", "avec", "une",
           "un", "bonjour", "je", "pas", "pour", "des", "du", "votre", "sur"},
    "pt": {"o", "a", "os", "as", "e", "é", "meu", "minha", "você", "vocês", "obrigado",
           "obrigada", "com", "uma", "um", "olá", "não", "para", "do", "da", "está"},
}

_lock = threading.Lock()
_identifier: Any = None


def _model() -> Any:
    """The language identifier, loaded once per process (about a second)."""
    global _identifier
    with _lock:
        if _identifier is None:
            try:
                from py3langid.langid import MODEL_FILE, LanguageIdentifier
            except ImportError as exc:
                raise MissingDependency("the ticket job detects languages with py3langid: "
                                        "pip install 'foreperson[tickets]'") from exc
            identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
            identifier.set_languages(list(LANGUAGES))
            _identifier = identifier
        return _identifier


def _by_function_words(text: str) -> str | None:
    words = re.findall(r"[^\W\d_]+", text.lower())
    votes = {lang: sum(w in vocabulary for w in words)
             for lang, vocabulary in _FUNCTION_WORDS.items()}
    best = max(votes, key=lambda lang: votes[lang])
    tied = [lang for lang, n in votes.items() if n == votes[best]]
    return best if votes[best] and len(tied) == 1 else None


def detect_language(text: str) -> tuple[str, float]:
    """The language of ``text``.

    Args:
        text: the ticket (subject and body).

    Returns:
        ``(code, probability)``: a code of :data:`LANGUAGES` and the detector's
        probability for it (0..1; 0.0 when the text had no letters and English was
        assumed).

    Raises:
        MissingDependency: py3langid is not installed.
    """
    if not re.search(r"[^\W\d_]", text):
        return "en", 0.0
    code, probability = _model().classify(text)
    if probability < _SURE:
        code = _by_function_words(text) or (code if probability >= 0.5 else "en")
    return str(code), float(probability)


def detect_languages(texts: list[str]) -> list[tuple[str, float]]:
    """:func:`detect_language` for each text, in order."""
    _model()
    return [detect_language(t) for t in texts]
