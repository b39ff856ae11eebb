"""Short texts keep the examples' language unless their words are clearly of another
(issue 23, item 3)."""

from __future__ import annotations

import pytest

from foreperson.tickets.language import detect_language, dominant_language
from foreperson.tickets.model import Example, TicketModel

SHORT = {   # a few words each, in the five languages
    "en": ["Ok", "Hotel", "Simple question", "Flight delayed again", "Refund not received"],
    "de": ["Konto gesperrt", "Danke für die Hilfe", "Paket fehlt", "Rechnung falsch"],
    "es": ["Gracias", "Maleta perdida", "Vuelo retrasado", "Servicio pésimo"],
    "fr": ["Colis perdu", "Merci beaucoup", "Problème de connexion", "Compte bloqué"],
    "pt": ["Obrigado pela ajuda", "Senha errada", "Voo atrasado", "Mala extraviada"],
}


@pytest.mark.parametrize("language", sorted(SHORT))
def test_a_short_line_of_the_files_language_keeps_it(language):
    for text in SHORT[language]:
        assert detect_language(text, language)[0] == language, text


@pytest.mark.parametrize(("text", "language"), [
    ("Ok", "en"), ("Hotel", "en"), ("Simple question", "en"),   # detected de / de / fr
])
def test_a_short_english_line_is_not_given_to_another_language(text, language):
    assert detect_language(text, "en")[0] == language


@pytest.mark.parametrize(("text", "fallback", "language"), [
    ("Gracias", "en", "es"), ("Danke für die Hilfe", "en", "de"),
    ("Problème de connexion", "en", "fr"), ("Obrigado pela ajuda", "en", "pt"),
    ("Flight delayed again", "de", "en"), ("Refund not received", "fr", "en"),
    ("Straße gesperrt", "en", "de"),                   # a letter only German writes
])
def test_words_clearly_of_another_language_win_over_the_fallback(text, fallback, language):
    assert detect_language(text, fallback)[0] == language


def test_a_long_text_is_decided_by_the_detector_not_the_fallback():
    text = ("Guten Tag, meine Bestellung ist seit zwei Wochen nicht angekommen und "
            "niemand antwortet auf meine Nachrichten.")
    assert detect_language(text, "en")[0] == "de"


def test_the_dominant_language_is_the_most_common_one():
    assert dominant_language(["de", "de", "en", "xx"]) == "de"
    assert dominant_language(["de", "en"]) == "en"           # a tie: the first of LANGUAGES
    assert dominant_language([]) is None


def test_the_model_falls_back_to_its_examples_language_for_short_tickets():
    examples = [Example(f"Meine Rechnung {i} ist zu hoch, bitte prüfen", "Billing",
                        "Wir prüfen die Rechnung.", language="de") for i in range(4)] + [
        Example(f"Die App {i} stürzt beim Start ab", "Technical",
                "Bitte aktualisieren Sie die App.", language="de") for i in range(4)]
    model = TicketModel(examples, cache=False)
    assert model.language == "de"
    # langid gives "Konto gesperrt" to English; the German examples keep it German
    assert [c.language for c in model.classify_many(["Konto gesperrt", "Hotel"])] == [
        "de", "de"]
    assert model.classify("Thank you for the quick help").language == "en"
