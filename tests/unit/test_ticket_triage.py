"""Triage signals a support lead can trust, in five languages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from foreperson.tickets.model import Classification, triage
from foreperson.tickets.triage import SIGNALS, SignalModel, ticket_signals

SHIPPED = Path(__file__).resolve().parents[2] / "src" / "foreperson" / "tickets" / "data" / "triage"
UNTUNED = Path(__file__).resolve().parents[1] / "fixtures" / "triage"
SURE = Classification("general", 0.99, "medium", "")


def names(text: str, language: str = "en", **options) -> set[str]:
    return {s.name for s in ticket_signals(text, language, **options)}


@pytest.mark.parametrize(("text", "language", "signal"), [
    ("We're experiencing intermittent outages with the API since this morning.", "en",
     "outage"),
    ("The website went down an hour ago.", "en", "outage"),
    ("Our servers are down.", "en", "outage"),
    ("Someone logged into my account from another country and changed my password.", "en",
     "security"),
    ("We will sue you if this is not fixed.", "en", "legal"),
    ("THIS IS THE THIRD TIME NOTHING WORKS", "en", "angry customer"),
    ("I need to talk to a person", "en", "asks for a person"),
    ("Seit heute Nacht kompletter Serverausfall.", "de", "outage"),
    ("Presentaré una demanda si no me devuelven el dinero.", "es", "legal"),
    ("Mon avocat va vous contacter.", "fr", "legal"),
    ("O sistema está fora do ar.", "pt", "outage"),
])
def test_inflected_forms_and_phrases_are_found(text, language, signal):
    assert signal in names(text, language)


@pytest.mark.parametrize(("text", "language"), [
    ("Je vous écris en demandant un remboursement de ma facture.", "fr"),
    ("Le délai de livraison est trop court pour nous.", "fr"),
    ("Tenemos una demanda muy alta este mes, necesitamos más licencias.", "es"),
    ("Sue from our accounting team asked me to forward this invoice.", "en"),
    ("YOU JUST MADE MY DAY!!! THANK YOU SO MUCH!!!", "en"),
    ("The price went down last month, will my invoice change?", "en"),
])
def test_words_that_mean_something_else_are_not_taken_for_signals(text, language):
    assert names(text, language) == set()


@pytest.mark.parametrize(("text", "language", "signal"), [
    ("Alguien entró en mi cuenta y cambió el correo.", "es", "security"),
    ("Ich sehe zwei Abbuchungen, die ich nie autorisiert habe.", "de", "security"),
    ("Apareceu uma compra no cartão que eu não fiz.", "pt", "security"),
    ("Können Sie mich heute noch zurückrufen?", "de", "asks for a person"),
    ("Podem me ligar amanhã de manhã?", "pt", "asks for a person"),
    ("Je veux qu'un conseiller m'appelle.", "fr", "asks for a person"),
    ("Oh great, another automated reply that answers nothing.", "en", "angry customer"),
    ("La plateforme est tombée et plus personne ne peut payer.", "fr", "outage"),
    ("Ya puse una reclamación ante Consumo por esto.", "es", "legal"),
])
def test_the_same_signal_in_other_words_is_found(text, language, signal):
    assert signal in names(text, language)


@pytest.mark.parametrize(("text", "language"), [
    ("Quanto tempo leva para processar o reembolso?", "pt"),        # process, not sue
    ("Je m'appelle Claire, j'ai une question sur ma facture.", "fr"),  # my name is
    ("Esto es una estafa, no vuelvo a comprar.", "es"),   # anger at the shop, not fraud
    ("Problemas con la llamada de Zoom: se corta el audio.", "es"),    # a video call
    ("Coupures d'appel fréquentes pendant nos réunions Zoom.", "fr"),   # a call drops
    ("I'm not going to sue anyone, relax, where is my parcel?", "en"),
    ("Thanks, that worked! See you!", "en"),
])
def test_everyday_words_close_to_a_signal_are_not_taken_for_it(text, language):
    assert names(text, language) - {"angry customer"} == set()


def test_impossible_is_a_fact_not_anger_unless_it_is_a_verdict():
    assert names("Der Treiberfehler macht eine Nutzung unmöglich.", "de") == set()
    assert "angry customer" in names("Das ist unmöglich! Seit Wochen keine Antwort.", "de")


@pytest.mark.parametrize(("text", "language"), [
    ("There is no outage, I just have a question about my invoice.", "en"),
    ("I was not hacked, I just forgot my password.", "en"),
    ("I'm not angry, just curious about the new plan.", "en"),
    ("I don't need a call back, email is fine.", "en"),
    ("Es gibt keinen Ausfall, nur eine Frage zur Rechnung.", "de"),
    ("No hace falta que me llamen, prefiero el correo.", "es"),
    ("Ce n'est pas une fraude, juste une erreur de ma part.", "fr"),
    ("Não preciso de ligação, obrigado.", "pt"),
])
def test_a_negated_signal_is_not_raised(text, language):
    assert names(text, language) == set()


@pytest.mark.parametrize(("text", "signal"), [
    ("No outage yesterday, but today the servers are down.", "outage"),   # next clause
    ("I have no internet since the outage this morning.", "outage"),      # too far back
    ("I have never been so angry in my life.", "angry customer"),         # "so": stronger
    ("I don't want to involve our lawyer, but I will.", "legal"),         # never cancelled
])
def test_a_negation_reaches_only_the_words_it_governs(text, signal):
    assert signal in names(text)


def test_every_reason_is_listed_with_its_evidence():
    verdict = triage("This is unacceptable! Our lawyer will sue you. The site is down.", SURE,
                     0.5)
    assert verdict.needs_human
    assert [r.split(" (")[0] for r in verdict.reasons] == ["outage", "legal", "angry customer"]
    assert "legal (our lawyer)" in verdict.reasons


def _scores(rows: list[dict], **options) -> dict[str, tuple[float, float, int]]:
    """Per signal: (precision, recall, lines with it) of ticket_signals on ``rows``."""
    found = [names(r["text"], r["language"], **options) for r in rows]
    out = {}
    for signal in SIGNALS:
        truth = [signal in r["signals"] for r in rows]
        got = [signal in f for f in found]
        tp = sum(g and t for g, t in zip(got, truth, strict=True))
        out[signal] = (tp / max(1, sum(got)), tp / max(1, sum(truth)), sum(truth))
    return out


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


@pytest.mark.parametrize("path", [*sorted(SHIPPED.glob("*.jsonl")),
                                  *sorted(UNTUNED.glob("*.jsonl"))],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_labelled_set_meets_the_targets_for_every_signal(path):
    """The shipped lines (the model learned from them) and the sets kept apart (it never
    did: ``tests/fixtures/triage``)."""
    rows = _lines(path)
    assert len(rows) >= 100 and {r["language"] for r in rows} == {"en", "de", "es", "fr", "pt"}
    for signal, (precision, recall, count) in _scores(rows).items():
        assert count >= 10, signal
        assert precision >= 0.9 and recall >= 0.8, (signal, precision, recall)


@pytest.mark.parametrize(("text", "language", "signal"), [
    ("Bin Anwalt und brauche für meine Kanzlei eine Rechnung mit MwSt.", "de", "legal"),
    ("Notre service juridique souhaiterait obtenir vos conditions générales.", "fr", "legal"),
    ("Nous voudrions vendre des avocats et des mangues avec votre caisse.", "fr", "legal"),
    ("How do I protect my account against SIM-swap fraud? Nothing happened yet.", "en",
     "security"),
    ("Will the payment API go down during the scheduled maintenance on Sunday?", "en",
     "outage"),
    ("We need the router reconfigured with minimal downtime.", "en", "outage"),
    ("Meine Stromrechnung ist diesmal höher ausgefallen als sonst.", "de", "outage"),
    ("Ein Rückruf ist nicht nötig, eine E-Mail genügt.", "de", "asks for a person"),
    ("Comment reconnaître une arnaque quand un acheteur paie par virement ?", "fr",
     "angry customer"),
])
def test_words_used_for_something_else_raise_nothing(text, language, signal):
    assert signal not in names(text, language)


@pytest.mark.parametrize(("text", "language", "signal"), [
    ("If this is not fixed I will hand the matter to my lawyer.", "en", "legal"),
    ("Ich schalte jetzt meinen Anwalt ein.", "de", "legal"),
    ("Yo no he autorizado esta transferencia a un destinatario que desconozco.", "es",
     "security"),
    ("Toutes nos VM sont injoignables depuis 10 h.", "fr", "outage"),
    ("Users cannot access the portal since the update this morning.", "en", "outage"),
])
def test_wordings_found_on_real_traffic_raise_their_signal(text, language, signal):
    assert signal in names(text, language, learned=False)


def test_the_learned_model_catches_wording_no_pattern_lists():
    text = "site's been throwing 502s for an hour, checkout completely broken, we lose sales"
    assert "outage" not in names("your website keeps giving 502s and nothing loads for us",
                                 learned=False)
    reasons = [s.reason for s in ticket_signals(
        "your website keeps giving 502s and nothing loads for us", "en")]
    assert any(r.startswith("outage (learned: ") for r in reasons), reasons
    assert "outage" in names(text)


@pytest.mark.parametrize(("text", "signal"), [
    ("I was not hacked, I just forgot my password and need a reset link.", "security"),
    ("Nothing is down on our side, I only want to know the price of the pro plan.", "outage"),
    ("Meine Telefonnummer für Rückfragen: 0171 2345678.", "asks for a person"),
])
def test_the_learned_model_respects_negations_and_contact_lines(text, signal):
    assert signal not in names(text, "de" if "Telefon" in text else "en")


def test_the_fast_scores_equal_scikit_learns():
    from scipy import sparse
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    rows = _lines(SHIPPED / "outside_1.jsonl")
    model = SignalModel(rows)
    texts = [r["text"] for r in rows]
    vectorizers = [TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=True,
                                   min_df=2),
                   TfidfVectorizer(analyzer="word", ngram_range=(1, 2), sublinear_tf=True)]
    features = sparse.hstack([v.fit_transform(texts) for v in vectorizers]).tocsr()
    probe = ["le site est en rade depuis ce matin", "Mein Konto wurde gehackt!!", "hello"]
    probe_features = sparse.hstack([v.transform(probe) for v in vectorizers]).tocsr()
    for signal in SIGNALS:
        reference = LogisticRegression(C=4.0, class_weight="balanced", solver="liblinear").fit(
            features, [signal in r["signals"] for r in rows])
        want = reference.predict_proba(probe_features)[:, 1]
        got = [model.probabilities(t)[signal] for t in probe]
        assert got == pytest.approx(want, abs=1e-5), signal


def test_a_model_read_back_from_its_state_scores_exactly_the_same(tmp_path):
    model = SignalModel(_lines(SHIPPED / "outside_2.jsonl"))
    path = tmp_path / "state.json"
    path.write_text(json.dumps(model.state()), encoding="utf-8")
    again = SignalModel.from_state(json.loads(path.read_text(encoding="utf-8")))
    for text in ["la web no carga para nadie", "I want a refund NOW, this is a scam!!!"]:
        assert again.probabilities(text) == model.probabilities(text)
    with pytest.raises(ValueError, match="not a triage model state"):
        SignalModel.from_state({**model.state(), "format": -1})


def test_training_lines_that_cannot_train_are_refused():
    rows = [{"text": "the site is down", "signals": ["outage"]},
            {"text": "hello", "signals": []}]
    with pytest.raises(ValueError, match="unknown signal"):
        SignalModel([*rows, {"text": "x", "signals": ["outrage"]}])
    with pytest.raises(ValueError, match="'security' needs lines with it"):
        SignalModel(rows)


@pytest.mark.slow
def test_the_bundled_model_is_cached_and_read_back_by_a_new_process(tmp_path):
    probe = "qqn a vidé mon compte cette nuit, je ne reconnais aucune opération"
    code = ("import json, sys; from foreperson.tickets.triage import SignalModel; "
            f"print(json.dumps(SignalModel.bundled().probabilities({probe!r})))")
    env = {**os.environ, "FOREPERSON_CACHE_DIR": str(tmp_path)}
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=120, check=True)
    [cached] = list(tmp_path.glob("triage-*.json"))
    cached.write_text(json.dumps({**json.loads(cached.read_text()), "bias": [0.0] * 5}))
    second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=120, check=True)
    assert json.loads(second.stdout) != json.loads(first.stdout)   # it read the cache
    cached.write_text("{not json")
    third = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=120, check=True)
    assert json.loads(third.stdout) == json.loads(first.stdout)    # a broken one: retrained




@pytest.mark.parametrize("text", [
    "The engine leak on the tarmac delayed us two hours.",
    "There was an oil leak under the plane and we waited.",
    "Fuel leak delayed departure",
    "My seat was leaky and wet.",
    "Someone took my bag from the carousel",
    "This is a breach of your own policy, you promised a meal voucher",
])
def test_leaks_of_oil_and_bags_taken_from_the_belt_are_not_security(text):
    # issue 23, item 4: neither the patterns nor the learned model call these security
    assert "security" not in {s.name for s in ticket_signals(text, "en")}


@pytest.mark.parametrize("text", [
    "Customer data leaked online", "our customer database was leaked",
    "someone leaked my password", "Credentials of our service account leaked on GitHub",
    "a data breach exposed our customers", "someone made purchases with my card",
])
def test_leaks_of_data_are_still_security(text):
    assert "security" in {s.name for s in ticket_signals(text, "en")}


@pytest.mark.parametrize("text", [
    "Thank you so much, your crew was wonderful and the landing was smooth!",
    "Great job keeping the site up during the sale!",
    "Flight was on time and staff were lovely",
])
def test_praise_raises_nothing(text):
    assert ticket_signals(text, "en") == []


# -- real complaints that raised a signal (issue 23, item 4) --------------------------

@pytest.mark.parametrize(("text", "language", "signal"), [
    ("Thanks for fixing the outage so quickly yesterday, I was back online before dinner.",
     "en", "outage"),
    ("Gracias por resolver la caída del servicio tan rápido ayer.", "es", "outage"),
    ("Obrigado por resolverem a queda do sistema tão rápido ontem.", "pt", "outage"),
    ("Houve um vazamento de óleo no motor e ficamos duas horas parados na pista.", "pt",
     "security"),
    ("There was an engine leak on the tarmac and we sat on the plane for two hours.", "en",
     "security"),
    ("O novo app está incrível, nunca cai e é super fácil de usar!!!", "pt", "angry customer"),
    ("The new app is AMAZING, never down once, thank you!!!", "en", "angry customer"),
])
def test_praise_a_past_fix_and_leaks_of_oil_raise_nothing(text, language, signal):
    assert signal not in names(text, language)


def _eager_legal_model() -> SignalModel:
    """A model taught that disappointment is legal: what the evidence rule must stop."""
    rows = ([{"text": f"I am very disappointed with your service {i}", "signals": ["legal"]}
             for i in range(6)]
            + [{"text": f"my lawyer will contact you about case {i}", "signals": ["legal"]}
               for i in range(6)]
            + [{"text": f"the website is down again {i}", "signals": ["outage"]}
               for i in range(6)]
            + [{"text": f"someone hacked my account {i}", "signals": ["security"]}
               for i in range(6)]
            + [{"text": f"this is outrageous {i}", "signals": ["angry customer"]}
               for i in range(6)]
            + [{"text": f"please let me talk to a manager {i}", "signals": ["asks for a person"]}
               for i in range(6)]
            + [{"text": f"thanks, the parcel arrived {i}", "signals": []} for i in range(12)])
    return SignalModel(rows)


def test_a_learned_legal_signal_needs_a_legal_act_or_actor():
    model = _eager_legal_model()
    plain = "I am very disappointed with your service."
    assert model.probabilities(plain)["legal"] >= 0.7           # the model alone would flag it
    assert model.signals(plain, "en", ["legal"]) == []          # no lawyer, court, regulator
    reported = "I am very disappointed with your service and reported you to the TIO."
    assert [s.name for s in model.signals(reported, "en", ["legal"])] == ["legal"]
    to_court = ("Estoy muy decepcionado; lo llevo a juicio. "
                "I am very disappointed with your service.")
    assert [s.name for s in model.signals(to_court, "es", ["legal"])] == ["legal"]


@pytest.mark.parametrize(("text", "language"), [
    ("I have now referred this to the Financial Ombudsman Service.", "en"),
    ("Ich habe den Fall an die Datenschutzbehörde gemeldet.", "de"),
    ("Vou entrar no Juizado de Pequenas Causas contra vocês.", "pt"),
])
def test_a_regulator_or_small_claims_court_is_legal(text, language):
    assert "legal" in names(text, language)
