"""The offline ticket model: labels, calibrated confidence, drafts a person can send."""

from __future__ import annotations

import json

import pytest

from foreperson.errors import InputError
from foreperson.tickets.drafts import TEMPLATE_CATEGORIES, foreign_identifiers, template_reply
from foreperson.tickets.job import Outbox
from foreperson.tickets.language import LANGUAGES, detect_language
from foreperson.tickets.model import (
    Classification,
    Example,
    TicketModel,
    bundled_examples,
    load_examples,
)
from foreperson.tickets.triage import draft_promises, ticket_signals


@pytest.fixture(scope="module")
def model():
    return TicketModel(bundled_examples())


BILLING_DE = "Danke. Die Positionen des Betrags stehen unter Konto > Rechnungen."


def labelled(n: int = 10) -> list[Example]:
    """Two well separated labels in English and German, each with answers."""
    out = []
    for i in range(n):
        out += [
            Example(f"My invoice {i} shows the wrong amount, please correct the invoice total",
                    "Billing", "Thank you, we are checking the invoice total for you.",
                    language="en"),
            Example(f"The app crashes when I open the report screen number {i}",
                    "Technical", "Please update the app and tell us the version you use.",
                    language="en"),
            Example(f"Meine Rechnung {i} hat einen falschen Betrag, bitte die Rechnung prüfen",
                    "Billing", BILLING_DE, language="de"),
            Example(f"Die App stürzt ab, wenn ich den Bericht {i} öffne", "Technical",
                    "Bitte aktualisieren Sie die App und nennen Sie uns die Version.",
                    language="de"),
        ]
    return out


def test_bundled_examples_cover_several_languages_and_categories():
    examples = bundled_examples()
    assert len({e.category for e in examples}) >= 6
    assert {e.language for e in examples} == set(LANGUAGES)
    assert {e.category for e in examples} <= TEMPLATE_CATEGORIES


@pytest.mark.parametrize(("text", "language"), [
    ("I need to talk to a person", "en"), ("Please update my phone number", "en"),
    ("Mein Konto ist gesperrt, bitte entsperren", "de"), ("Hola", "es"),
    ("Merci pour votre aide", "fr"), ("Obrigado pela ajuda", "pt"), ("12345", "en"),
])
def test_the_language_of_a_ticket_is_detected_even_when_short(text, language):
    assert detect_language(text)[0] == language


@pytest.mark.parametrize(("text", "category"), [
    ("I was charged twice, please refund the second payment", "billing"),
    ("Phishing-Mail mit Ihrem Logo erhalten, Sicherheitsproblem", "security"),
    ("El servicio está caído para todos los usuarios", "outage"),
])
def test_classifies_into_the_example_categories(model, text, category):
    verdict = model.classify(text)
    assert verdict.category == category and 0.0 <= verdict.confidence <= 1.0


@pytest.mark.parametrize("text", [
    "I need to talk to a person", "Where can I see the status of my refund?",
    "Please update my phone number", "Wo bleibt meine Erstattung?",
    "Mi pedido no ha llegado", "Je veux un remboursement", "Quero cancelar a minha conta",
])
def test_a_bundled_draft_is_in_the_tickets_language_and_promises_nothing(model, text):
    verdict = model.classify(text)
    draft = model.draft(text, verdict.category, verdict.language)
    assert detect_language(draft["draft_reply"])[0] == verdict.language == detect_language(
        text)[0]
    assert draft["flags"] == [] and draft_promises(draft["draft_reply"]) == []


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("category", sorted(TEMPLATE_CATEGORIES))
def test_every_written_reply_is_in_its_language_and_safe_to_send(category, language):
    reply = template_reply(category, language, "hello")
    assert detect_language(reply)[0] == language
    assert draft_promises(reply) == [] and ticket_signals(reply, language, learned=False) == []


def test_a_written_reply_carries_over_only_what_the_ticket_says():
    ticket = "Where is my parcel? Order 55-1234 has not moved for a week.\n\nThanks,\nDana"
    reply = template_reply("shipping", "en", ticket)
    assert reply.startswith("Hello Dana,") and "55-1234" in reply
    bare = template_reply("shipping", "en", "Where is my parcel?\n<name>")
    assert bare.startswith("Hello,") and "<name>" not in bare
    assert not any(ch.isdigit() for ch in bare)


def test_with_examples_the_draft_is_the_nearest_answer_of_the_same_label_and_language():
    model = TicketModel(labelled())
    draft = model.draft("Meine Rechnung hat einen falschen Betrag", "Billing", "de")
    example = model.examples[draft["example"]]
    assert (example.category, example.language) == ("Billing", "de")
    # the example's answer, as a letter: greeted, and "Danke." already signs off
    assert draft["draft_reply"] == "Guten Tag,\n\n" + BILLING_DE
    assert draft["flags"] == []


def test_a_far_nearest_example_needs_a_human():
    model = TicketModel(labelled())
    draft = model.draft("Do you sell gift cards for the holidays?", "Billing", "en")
    assert any(f.startswith("no similar answered example") for f in draft["flags"])
    # the far answer (about invoice totals) is not offered: a reply that asks instead
    answers = {e.answer for e in model.examples}
    assert draft["draft_reply"] not in answers
    assert detect_language(draft["draft_reply"])[0] == "en"
    assert draft_promises(draft["draft_reply"]) == []
    none = model.draft("Ma facture est fausse", "Billing", "fr")      # no French examples
    assert detect_language(none["draft_reply"])[0] == "fr"
    assert any(f.startswith("no similar answered example") for f in none["flags"])


def test_a_copied_answer_greets_this_ticket_s_customer_never_the_example_s():
    examples = [Example(f"Mein Drucker {i} druckt nicht mehr, bitte um Hilfe", "Technical",
                        "Sehr geehrte Frau Maria Schmidt,\n\nbitte installieren Sie den "
                        "Treiber neu.\n\nMit freundlichen Grüßen\nSupport", language="de")
                for i in range(3)] + [
        Example(f"Die Rechnung {i} ist falsch", "Billing", "Guten Tag,\n\nwir prüfen das.",
                language="de") for i in range(3)]
    model = TicketModel(examples)
    named = model.draft("Mein Drucker druckt nicht mehr.\n\nViele Grüße\nHans Becker",
                        "Technical", "de")
    assert named["draft_reply"].startswith("Guten Tag Hans Becker,\n")
    assert "Schmidt" not in named["draft_reply"]
    anonymous = model.draft("Mein Drucker druckt nicht mehr, Hilfe", "Technical", "de")
    assert anonymous["draft_reply"].startswith("Guten Tag,\n") and "Maria" not in anonymous[
        "draft_reply"]
    assert "bitte installieren Sie den Treiber neu." in anonymous["draft_reply"]
    # the example's customer named in the body of its answer: flagged as not this one's
    quoted = TicketModel([Example(f"Mein Konto {i} ist gesperrt.\n\nViele Grüße\nMaria Schmidt",
                                  "Account", "Guten Tag, wir haben das Konto von Maria Schmidt "
                                  "entsperrt.", language="de") for i in range(3)] + examples)
    draft = quoted.draft("Mein Konto ist gesperrt", "Account", "de")
    assert any("Maria Schmidt" in f for f in draft["flags"]
               if f.startswith("draft quotes details not in the ticket"))


def test_a_draft_with_placeholders_left_in_it_needs_a_human():
    examples = [Example(f"The app {i} crashes on start", "Technical",
                        "Hello <name>,\n\nplease call us at <tel_num>.", language="en")
                for i in range(3)] + [
        Example(f"Invoice {i} is wrong", "Billing", "Hello,\n\nwe are checking it.",
                language="en") for i in range(3)]
    draft = TicketModel(examples).draft("The app crashes on start", "Technical", "en")
    assert "<name>" not in draft["draft_reply"]            # the greeting is ours
    assert "draft has placeholders to fill in (<tel_num>)" in draft["flags"]


def test_an_answer_quoting_another_customers_details_is_flagged():
    examples = labelled(6) + [Example(
        "Where is my order, the tracking has not moved", "Shipping",
        "Your order ORD-99812 left our warehouse; write to jane@example.com for updates.",
        language="en")] * 3
    model = TicketModel(examples)
    draft = model.draft("Where is my order? the tracking has not moved", "Shipping", "en")
    reason = next(f for f in draft["flags"] if f.startswith("draft quotes details"))
    assert "ORD-99812" in reason and "jane@example.com" in reason
    assert foreign_identifiers("Your order ORD-99812 is ready", "my order ORD-99812") == []
    assert foreign_identifiers("Zoom 5.11.0 since 2023, call <tel_num>", "zoom") == []


@pytest.mark.parametrize(("draft", "kind"), [
    ("We found the duplicate charge and started a refund.", "money"),
    ("Wir erstatten Ihnen den Betrag.", "money"),
    ("Le remboursement sera effectué.", "money"),
    ("It reaches your card within 5 business days.", "a time"),
    ("Recibirá el reemplazo en 3 días hábiles.", "a time"),
    ("A supervisor will call you tomorrow.", "contact"),
    ("Wir rufen Sie morgen zurück.", "contact"),
    ("Nous vous rappellerons.", "contact"),
    ("Entraremos em contato em breve.", "contact"),
    ("We are aware of an outage affecting all customers.", "an outage"),
    ("Our team will get back to you with a solution.", "contact"),
    ("We'll reach out via email or phone.", "contact"),
    ("Ein Mitarbeiter wird sich in Kürze mit Ihnen in Verbindung setzen.", "contact"),
    ("Wir werden Sie bald kontaktieren.", "contact"),
    ("The issue will be fixed shortly.", "a time"),
    ("Lo corregiremos de inmediato.", "a time"),
    ("O técnico chega em breve.", "a time"),
    ("The upgrade costs $29.99 for two years.", "money"),
    ("Das Paket kostet 49,90 €.", "money"),
    ("Wir werden uns bald bei Ihnen melden.", "contact"),
    ("We will keep you updated.", "contact"),
    ("We will send you further instructions via email.", "contact"),
    ("Je vous tiendrai informé de l'avancement.", "contact"),
    ("Wir halten Sie auf dem Laufenden.", "contact"),
    ("Espere más instrucciones pronto.", "a time"),
    ("Nous corrigerons cela dès que possible.", "a time"),
    ("Unser Team ist sich des Zugangsproblems bewusst.", "an outage"),
    ("We are aware of the login problems some customers see.", "an outage"),
])
def test_a_draft_that_promises_money_time_contact_or_an_outage_is_named(draft, kind):
    assert any(kind in reason for reason in draft_promises(draft))


@pytest.mark.parametrize("draft", [
    "Please change your password immediately and turn on two-step sign-in.",
    "Update to version 2.5 and restart the app; error 0x80070005 should be gone.",
    "Thank you for your patience. Please send us a screenshot of the error.",
    "Seu pedido está pronto para retirada na loja.",         # pt "pronto": ready
])
def test_advice_and_version_numbers_are_not_promises(draft):
    assert draft_promises(draft) == []


def test_the_threshold_is_fitted_for_the_target_precision_on_held_out_examples():
    model = TicketModel(labelled(12), target_precision=0.9)
    cal = model.calibration
    assert cal.reachable and not cal.fixed and cal.held_out == 48
    assert cal.precision >= 0.9 and 0 < cal.threshold <= 1
    assert model.calibrate(0.99).threshold >= model.calibrate(0.6).threshold
    fixed = TicketModel(labelled(4), min_confidence=0.3).calibration
    assert fixed.fixed and fixed.threshold == 0.3


def test_copies_of_a_few_texts_do_not_count_as_evidence_for_the_threshold():
    # 48 rows, 8 distinct texts: however right the held-out rows are, 8 pieces of
    # evidence cannot show 90 % precision (48 distinct rows can, as above)
    copies = labelled(2) * 6
    model = TicketModel(copies, target_precision=0.9)
    assert model.calibration.held_out == 48
    assert not model.calibration.reachable
    assert TicketModel(labelled(12), target_precision=0.9).calibration.reachable


def test_the_bundled_demo_set_cannot_reach_the_target_and_says_so(model):
    assert not model.calibration.reachable
    verdict = model.triage("thanks", Classification("general", 0.99, "low", "en"))
    assert verdict.needs_human and "model not trusted" in verdict.reason


def test_low_confidence_needs_a_human():
    model = TicketModel(labelled(), min_confidence=0.5)
    verdict = model.triage("hello", Classification("Billing", 0.2, "low", "en"))
    assert verdict.needs_human and verdict.reason.startswith("low confidence (0.20 < 0.50)")
    assert not model.triage("thanks", Classification("Billing", 0.99, "low", "en")).needs_human


def test_draft_flags_reach_the_triage_reasons():
    model = TicketModel(labelled(), min_confidence=0.1)
    verdict = model.triage("where is it", Classification("Billing", 0.99, "low", "en"),
                           ["draft promises money (refund)"])
    assert verdict.needs_human and verdict.reasons == ("draft promises money (refund)",)


def test_user_examples_set_the_labels_priorities_and_languages(tmp_path):
    path = tmp_path / "labelled.csv"
    rows = ["subject,body,queue,answer,priority,language"]
    for i in range(6):
        rows.append(f"Invoice {i},wrong amount on invoice {i},Billing and Payments,We fixed it,"
                    "low,en")
        rows.append(f"Crash {i},app crashes when opening file {i},Technical Support,Update it,"
                    "high,en")
    path.write_text("\n".join(rows) + "\n")
    examples = load_examples(path)
    assert {e.language for e in examples} == {"en"}
    model = TicketModel(examples)
    assert model.labels == ["Billing and Payments", "Technical Support"]
    got = model.classify("the app crashes on open")
    assert got.category == "Technical Support" and got.priority == "high"
    assert got.language == "en"


def test_examples_need_two_labels(tmp_path):
    path = tmp_path / "one.csv"
    path.write_text("text,label\na,x\nb,x\n")
    with pytest.raises(InputError, match="two different labels"):
        load_examples(path)


def test_outbox_writes_each_ticket_once_and_cuts_a_torn_line(tmp_path):
    path = tmp_path / "out.jsonl"
    path.write_text(json.dumps({"id": "1"}) + "\n" + '{"id": "2", "categ')
    box = Outbox(path)
    assert box.sent == {"1"}
    assert box.send([{"id": "1"}, {"id": "2", "category": "x"}, {"id": "2"}]) == 1
    box.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["id"] for line in lines] == ["1", "2"]
    assert lines[1]["category"] == "x"


def test_a_second_writer_of_the_same_output_is_refused(tmp_path):
    from foreperson.errors import ConfigurationError
    first = Outbox(tmp_path / "out.jsonl")
    try:
        with pytest.raises(ConfigurationError, match="another foreperson job"):
            Outbox(tmp_path / "out.jsonl")
    finally:
        first.close()
    Outbox(tmp_path / "out.jsonl").close()     # free again once the first is closed


def test_outbox_never_changes_a_file_that_is_not_its_own(tmp_path):
    precious = tmp_path / "precious.json"
    precious.write_bytes(b'{"important": "config"}')          # no newline at the end
    with pytest.raises(InputError, match="not a foreperson results file"):
        Outbox(precious)
    assert precious.read_bytes() == b'{"important": "config"}'
    binary = tmp_path / "blob.bin"
    binary.write_bytes(bytes(range(256)) * 20)
    with pytest.raises(InputError, match="not a foreperson results file"):
        Outbox(binary)
    assert binary.read_bytes() == bytes(range(256)) * 20


def test_outbox_refuses_directories_and_devices(tmp_path):
    from foreperson.errors import ConfigurationError
    with pytest.raises(ConfigurationError, match="not a regular file"):
        Outbox(tmp_path)
    with pytest.raises(ConfigurationError, match="not a regular file"):
        Outbox("/dev/null")


def test_a_worker_with_another_model_never_claims_the_jobs_tasks(model):
    from foreperson.tickets.job import model_fingerprint, ticket_app, ticket_tasks
    from foreperson.tickets.reader import Ticket
    from foreperson.work import MemoryStore

    other = TicketModel([Example("refund", "money"), Example("crash", "bugs")] * 3)
    store = MemoryStore()
    store.add(ticket_tasks(Ticket("1", "Refund", "charged twice", 2),
                           model=model_fingerprint(model)))
    wrong = ticket_app(other).worker("misconfigured")
    right = ticket_app(model).worker("configured")
    assert store.claim(wrong.name, wrong.can_do, 10) == []
    assert [t.id for t in store.claim(right.name, right.can_do, 10)] == ["1/classify"]


def test_the_fingerprint_is_known_before_the_model_is_trained(model):
    # the CLI refuses a re-run with other examples before training, from fingerprint_of
    from foreperson.tickets.job import fingerprint_of, model_fingerprint
    from foreperson.tickets.llm import LlmTicketModel

    examples = bundled_examples()
    assert fingerprint_of("TicketModel", None, examples) == model_fingerprint(model)
    llm = LlmTicketModel("local-model", examples[::8], base_url="http://127.0.0.1:9/v1")
    assert (fingerprint_of("LlmTicketModel", "local-model", examples[::8])
            == model_fingerprint(llm))
    assert fingerprint_of("TicketModel", None, examples[::8]) != model_fingerprint(model)


def test_a_long_training_is_announced_with_its_estimate(monkeypatch, tmp_path):
    import foreperson.tickets.model as module
    from foreperson.tickets.model import training_estimate_s

    monkeypatch.setenv("FOREPERSON_CACHE_DIR", str(tmp_path))
    lines: list[str] = []
    TicketModel(labelled(3), progress=lines.append)
    assert lines == []                                     # a second's work: no line
    assert training_estimate_s(labelled(3)) < 2
    # the estimate grows with the text and the labels
    assert training_estimate_s(labelled(30)) > 9 * training_estimate_s(labelled(3))
    monkeypatch.setattr(module, "training_estimate_s", lambda examples: 7.4)
    TicketModel(labelled(3), progress=lines.append, cache=False)
    assert lines == ["training on 12 examples (about 7 s) ..."]
    # read back from the cache the first model wrote: nothing trained, nothing announced
    assert TicketModel(labelled(3), progress=lines.append).cached
    assert lines == ["training on 12 examples (about 7 s) ..."]
