"""Which language a ticket is written in: English, German, Spanish, French or Portuguese.

Detection uses py3langid (a maintained fork of langid.py that ships its model inside
the package: nothing is downloaded at run time), restricted to the five languages the
drafts and triage rules know. A text too short to tell (a subject of two words) is
decided by its function words, and falls back to English when nothing points
elsewhere.

A text of a few words (:data:`SHORT_WORDS` or fewer) that the detector gives to another
language than the ``fallback`` (the dominant language of the examples the model was
trained on) keeps the fallback unless its words are clearly of the other language: more
of its function words or common support words ("Danke", "gracias", "commande") than of
the fallback's, or letters only that language writes (``ß``, ``ñ``, ``ã``). "Ok",
"Hotel" or "Simple question" in an English file stay English; "Konto gesperrt" in a
German one stays German.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Iterable
from typing import Any

from ..errors import MissingDependency

__all__ = ["LANGUAGES", "SHORT_WORDS", "detect_language", "detect_languages", "dominant_language"]

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

SHORT_WORDS = 8
"""A text of at most this many words is short: the fallback language decides it unless
its words are clearly of another (see the module docstring)."""

# words of support requests common enough to tell a short text's language by
_COMMON_WORDS = {
    "en": {"order", "refund", "delivery", "account", "password", "flight", "delayed", "cancel",
           "cancelled", "help", "payment", "charged", "login", "broken", "working", "received",
           "package", "invoice", "need", "want", "can't", "cannot", "why", "where", "how",
           "what", "still", "again", "no", "not", "missing", "lost", "wrong", "late", "great",
           "thanks", "problem", "issue", "error", "service", "bad", "good", "was", "are"},
    "de": {"bestellung", "rechnung", "konto", "passwort", "lieferung", "hilfe", "geht",
           "funktioniert", "kann", "nicht", "fehlt", "falsch", "gesperrt", "kaputt",
           "storniert", "stornieren", "paket", "zahlung", "anmeldung", "fehler", "danke",
           "dringend", "keine", "kein", "noch", "warum", "wo", "wie", "verspätet"},
    "es": {"pedido", "cuenta", "contraseña", "ayuda", "factura", "envío", "reembolso",
           "funciona", "perdida", "perdido", "retrasado", "cancelado", "maleta", "vuelo",
           "pago", "cobro", "error", "gracias", "urgente", "problema", "servicio", "no",
           "donde", "dónde", "cómo", "qué", "sigue", "todavía", "pésimo"},
    "fr": {"commande", "compte", "passe", "aide", "facture", "livraison", "remboursement",
           "marche", "colis", "perdu", "retard", "annulé", "vol", "paiement", "erreur",
           "merci", "urgent", "problème", "service", "pourquoi", "où", "comment", "toujours",
           "bloqué", "connexion", "ne", "plus"},
    "pt": {"pedido", "conta", "senha", "ajuda", "fatura", "entrega", "reembolso", "funciona",
           "atrasado", "cancelado", "mala", "voo", "pagamento", "cobrança", "erro", "obrigado",
           "obrigada", "urgente", "problema", "serviço", "não", "onde", "como", "ainda",
           "errada", "errado", "extraviada"},
}
# letters only one of the five languages writes (ç: French and Portuguese)
_OWN_LETTERS = {"de": "äöüß", "es": "ñ¿¡", "fr": "èêëœîûâ", "pt": "ãõ", "en": ""}

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
    votes = {lang: sum(w in vocabulary or w in _COMMON_WORDS[lang] for w in words)
             for lang, vocabulary in _FUNCTION_WORDS.items()}
    best = max(votes, key=lambda lang: votes[lang])
    tied = [lang for lang, n in votes.items() if n == votes[best]]
    return best if votes[best] and len(tied) == 1 else None


def _clearly(text: str, code: str, fallback: str) -> bool:
    """Whether the words of ``text`` are clearly of ``code`` rather than ``fallback``:
    more of its function and common words, or a letter only ``code`` writes."""
    lowered = text.lower()
    if any(c in lowered for c in _OWN_LETTERS.get(code, "")):
        return True
    words = re.findall(r"[^\W\d_]+(?:'[^\W\d_]+)?", lowered)

    def votes(lang: str) -> int:
        known = _FUNCTION_WORDS.get(lang, set()) | _COMMON_WORDS.get(lang, set())
        return sum(w in known for w in words)

    return votes(code) > votes(fallback)


def detect_language(text: str, fallback: str | None = None) -> tuple[str, float]:
    """The language of ``text``.

    Args:
        text: the ticket (subject and body).
        fallback: the language a short text keeps unless its words are clearly of
            another (the examples' dominant language, :func:`dominant_language`); None:
            English where nothing points elsewhere.

    Returns:
        ``(code, probability)``: a code of :data:`LANGUAGES` and the detector's
        probability for it (0..1; 0.0 when the text had no letters and the fallback or
        English was assumed).

    Raises:
        MissingDependency: py3langid is not installed.
    """
    default = fallback if fallback in LANGUAGES else "en"
    if not re.search(r"[^\W\d_]", text):
        return default, 0.0
    code, probability = _model().classify(text)
    if probability < _SURE:
        code = _by_function_words(text) or (code if probability >= 0.5 else default)
    if (fallback in LANGUAGES and code != fallback
            and len(re.findall(r"[^\W\d_]+", text)) <= SHORT_WORDS
            and not _clearly(text, str(code), fallback)):
        code = fallback
    return str(code), float(probability)


def detect_languages(texts: list[str], fallback: str | None = None) -> list[tuple[str, float]]:
    """:func:`detect_language` for each text, in order (``fallback`` for short ones)."""
    _model()
    return [detect_language(t, fallback) for t in texts]


def dominant_language(languages: Iterable[str]) -> str | None:
    """The most common of ``languages`` (codes of :data:`LANGUAGES`; a tie goes to the
    one first in :data:`LANGUAGES`), or None when there is none."""
    counts = Counter(code for code in languages if code in LANGUAGES)
    if not counts:
        return None
    return max(LANGUAGES, key=lambda code: (counts[code], -LANGUAGES.index(code)))
