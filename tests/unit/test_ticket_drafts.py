"""A copied answer answers this ticket: the same request, its slots filled, nothing
promised (issue 23, item 1). Small data written here; no real export."""

from __future__ import annotations

import pytest

from foreperson.errors import ConfigurationError
from foreperson.tickets.drafts import (
    borrowed_claims,
    complete_letter,
    fill_placeholders,
    informal_reply,
    load_never_send,
    loose_ends,
    never_send,
    placeholders,
    request_mismatches,
    swap_references,
    typed_references,
)
from foreperson.tickets.model import Example, TicketModel
from foreperson.tickets.triage import draft_promises


def _filler(n: int = 4) -> list[Example]:
    """A second label, so that the model has two to learn."""
    return [Example(f"The app {i} crashes when I open the report screen", "Technical",
                    "Please update the app and tell us the version you use.", language="en")
            for i in range(n)]


# -- placeholders of every common form ------------------------------------------------

@pytest.mark.parametrize("slot", ["{{Customer Support Phone Number}}", "{{Website Name}}",
                                  "[Customer Support Phone Number]", "<tel_num>",
                                  "<Your Company Name>", "%SUPPORT_EMAIL%", "{support_url}"])
def test_each_template_form_is_a_placeholder(slot):
    assert placeholders(f"Call us at {slot} for more help.") == [slot]


@pytest.mark.parametrize("text", [
    "Line one<br>line two", "Save 20% today and 10% tomorrow.", "See [the guide](http://x.y)",
    "Write to <help@example.com>.", "Settings [advanced] and {} are fine", "</p>",
])
def test_html_percentages_links_and_addresses_are_not_placeholders(text):
    assert placeholders(text) == []


def test_slots_are_filled_from_the_ticket_where_it_has_the_value():
    ticket = "Please cancel order 55-1234, it was a mistake.\n\nThanks, Dana Lee"
    answer = ("Hello {{Customer Name}},\n\nyour order {{Order Number}} is cancelled; "
              "for anything else call [Customer Support Phone Number].<br>Regards")
    text, unfilled = fill_placeholders(answer, ticket)
    assert "Hello Dana Lee," in text and "order 55-1234 is cancelled" in text
    assert unfilled == ["[Customer Support Phone Number]"]     # the ticket cannot know it
    assert "<br>" not in text and "\nRegards" in text


def test_a_greeting_slot_of_any_form_greets_this_customer_or_no_one():
    from foreperson.tickets.drafts import personal_greeting

    assert personal_greeting("Hello {{Customer Name}},\n\nit ships today.", "Where is it?",
                             "en") == "Hello,\n\nit ships today."
    assert personal_greeting("Dear [Customer Name],\n\nok", "Hola\n\nGracias, Ana",
                             "es") == "Hola, Ana:\n\nok"


def test_an_order_slot_stays_when_the_ticket_has_no_or_several_order_numbers():
    answer = "Your order {{Order Number}} has shipped."
    assert fill_placeholders(answer, "Where is my parcel?")[1] == ["{{Order Number}}"]
    two = "Order 55-1234 and order 55-9999 are late"
    assert fill_placeholders(answer, two)[1] == ["{{Order Number}}"]
    assert typed_references("Bestellnummer 12345, Rechnung RE-2024-77") == {
        "order": ["12345"], "invoice": ["RE-2024-77"]}


def test_the_examples_order_number_is_swapped_for_the_tickets():
    example = "Where is order ORD-99812? It has not arrived."
    answer = "Your order ORD-99812 left our warehouse."
    assert swap_references(answer, example, "My order ORD-11111 is late") == (
        "Your order ORD-11111 left our warehouse.")
    # no order number in the ticket: left as it is (and flagged as another's detail)
    assert swap_references(answer, example, "My parcel is late") == answer


# -- the request must match ------------------------------------------------------------

@pytest.mark.parametrize(("example", "answer", "ticket", "words"), [
    ("I want to upgrade my account to gold", "To upgrade, open Plans and pick Gold.",
     "Please close my gold account", ("upgrading", "to close")),
    ("When will order 12345 arrive?", "Order 12345 will be delivered on Friday.",
     "I need to cancel my order 12345", ("something else", "to cancel")),
    ("Ich möchte mein Abo upgraden", "Zum Upgrade öffnen Sie Tarife.",
     "Bitte mein Konto löschen", ("upgrading", "to close or delete")),
    ("Quiero crear una cuenta", "Para crear una cuenta, pulse Registrarse.",
     "Quiero cancelar mi pedido", ("creating", "to cancel")),
])
def test_a_different_action_is_named_with_both_sides(example, answer, ticket, words):
    (reason,) = request_mismatches(example, answer, ticket, "de" if "Konto" in ticket else "en")
    assert all(w in reason for w in words), reason


def test_another_tier_product_or_place_is_a_mismatch():
    free = request_mismatches("I want to create a premium account",
                              "To sign up for Premium, enter your card details.",
                              "How do I create a free account?")
    assert free == ["the example is about the premium tier; the ticket is about the free one"]
    assert request_mismatches("upgrade me to business please",
                              "To upgrade to business, choose Business.",
                              "upgrade me to premium please") == [
        "the example is about the business tier; the ticket is about the premium one"]
    assert request_mismatches("Where is my parcel?", "It ships within 3 business days.",
                              "Where is my parcel now?") == []
    place = request_mismatches("Do you ship to Madrid?", "Yes, we ship to Madrid.",
                               "Do you ship to Lisbon?")
    assert place == ["the example is about Madrid; the ticket does not mention it"]
    product = request_mismatches("My Dell XPS 13 battery drains",
                                 "For your Dell XPS 13, update the BIOS.",
                                 "The battery of my HP Spectre drains")
    assert product and "Dell XPS 13" in product[0]


def test_the_same_request_in_other_words_agrees():
    assert request_mismatches("How can I cancel my subscription?",
                              "To cancel, open Settings > Subscription.",
                              "I'd like to cancel the subscription, please") == []
    assert request_mismatches("My Dell XPS 13 battery drains",
                              "For your Dell XPS 13, update the BIOS.",
                              "Battery problem with my Dell XPS 13 laptop") == []
    # German capitalises every noun: nouns are not names there
    assert request_mismatches("Mein Drucker druckt nicht", "Starten Sie den Drucker neu.",
                              "Mein Laptop startet nicht", "de") == []


def test_retrieval_takes_the_similar_example_that_asks_the_same():
    examples = _filler() + [
        Example("I want to upgrade my account to the gold tier", "Account",
                "To upgrade, open Plans and choose Gold.", language="en"),
        Example("I want to close my account, the gold tier one", "Account",
                "We are sorry to see you go: open Settings > Close account.", language="en"),
        Example("How do I change the e-mail of my account?", "Account",
                "Open Settings > Profile to change it.", language="en"),
    ]
    model = TicketModel(examples, min_similarity=0.1, cache=False)
    draft = model.draft("Please close my gold tier account", "Account", "en")
    assert "Close account" in draft["draft_reply"] and draft["flags"] == []


def test_a_draft_answering_another_request_is_flagged_naming_both():
    examples = _filler() + [
        Example(f"I want to upgrade my account {i} to the gold tier", "Account",
                "To upgrade, open Plans and choose Gold.", language="en") for i in range(3)]
    model = TicketModel(examples, min_similarity=0.1, cache=False)
    draft = model.draft("Please close my gold tier account", "Account", "en")
    assert ("draft answers another request (the example is about upgrading; the ticket "
            "asks to close or delete)") in draft["flags"]


def test_a_copied_answer_has_its_slots_filled_and_unfillable_ones_flagged():
    examples = _filler() + [
        Example(f"Please cancel my order {n}", "Orders",
                "Your order {{Order Number}} is cancelled. Questions? Call "
                "{{Customer Support Phone Number}}.", language="en")
        for n in ("11-1111", "22-2222", "33-3333")]
    model = TicketModel(examples, min_similarity=0.1, cache=False)
    draft = model.draft("Please cancel my order 55-1234", "Orders", "en")
    assert "Your order 55-1234 is cancelled" in draft["draft_reply"]
    assert ("draft has placeholders to fill in ({{Customer Support Phone Number}})"
            in draft["flags"])


# -- promises and availability, in the five languages ---------------------------------

@pytest.mark.parametrize(("draft", "kind"), [
    ("We will handle it promptly.", "a time"),
    ("Our support team will look at it right away.", "a time"),
    ("Lo revisaremos lo antes posible.", "a time"),       # was only inside a comment
    ("Le responderemos a la mayor brevedad.", "a time"),
    ("Wir bearbeiten das unverzüglich.", "a time"),
    ("Nous traiterons votre demande sans délai.", "a time"),
    ("Vamos resolver imediatamente.", "a time"),
    ("Proporcionaremos una solución de inmediato.", "a time"),
    ("We are escalating your case to our technical team for immediate resolution.", "a time"),
    ("Our support is available 24/7.", "availability"),
    ("We are here around the clock.", "availability"),
    ("Wir sind rund um die Uhr für Sie da.", "availability"),
    ("Nuestro equipo le atiende las 24 horas del día.", "availability"),
    ("Nous sommes joignables 24h/24 et 7j/7.", "availability"),
    ("Estamos disponíveis 24 horas por dia.", "availability"),
    ("Proporcionaremos una solución rápidamente.", "a time"),
    ("We will fix it quickly.", "a time"),
    ("Nous allons le corriger rapidement.", "a time"),
])
def test_promise_and_availability_wording_is_flagged_like_shortly(draft, kind):
    assert any(kind in reason for reason in draft_promises(draft)), draft_promises(draft)


@pytest.mark.parametrize("draft", [
    "Please change your password right away.", "Ändern Sie sofort Ihr Passwort.",
    "Cambie inmediatamente su contraseña.", "Save 24% on your next order.",
])
def test_advice_to_act_now_is_not_a_promise(draft):
    assert draft_promises(draft) == []


@pytest.mark.parametrize(("answer", "said"), [
    ("Our team is looking into it and will update you.", "our team is looking into"),
    ("We are currently investigating the crash.", "we are currently investigating"),
    ("Your case has been escalated to engineering.", "has been escalated"),
    ("Unser Team untersucht das Problem.", "unser team untersucht"),
    ("Estamos revisando su cuenta.", "estamos revisando"),
    ("Nuestro equipo está analizando el fallo.", "nuestro equipo está analizando"),
    ("Notre équipe examine votre demande.", "notre équipe examine"),
    ("Nossa equipe técnica está analisando isso.", "nossa equipe técnica está analisando"),
    ("We are working to resolve the issue. Please try again later.",
     "we are working to resolve"),
])
def test_a_copied_answer_claiming_work_under_way_is_flagged(answer, said):
    assert borrowed_claims(answer) == [f"draft says work is under way ({said})"]


@pytest.mark.parametrize(("answer", "said"), [
    ("For details, please visit our website.", "visit our website"),
    ("Book a repair on our service center website.", "on our service center website"),
    ("Follow the link below to reset it.", "the link below"),
    ("Weitere Informationen finden Sie auf unserer Website.", "unserer website"),
    ("Consulte nuestro centro de soporte.", "nuestro centro de soporte"),
    ("Rendez-vous sur notre site pour réserver.", "notre site"),
    ("Acesse nosso portal para agendar.", "nosso portal"),
])
def test_a_page_the_answer_does_not_give_is_flagged(answer, said):
    assert borrowed_claims(answer) == [f"draft points to a page it does not give ({said})"]


@pytest.mark.parametrize("answer", [
    "Please visit our website at https://example.com/help for the steps.",
    "Call us on +1 555 010 2030 if it persists.",
    "We never ask for card details; please do not click the link.",
    "Restart the printer and check the cable. If it persists, reply to this message.",
    "Update the drivers from Dell's support website.",          # a page anyone can find
])
def test_an_answer_that_gives_its_page_or_number_or_points_nowhere_passes(answer):
    assert borrowed_claims(answer) == []


@pytest.mark.parametrize(("answer", "said"), [
    ("Your refund has been processed.", "your refund has been processed"),
    ("Ihre Anfrage zum Austausch wurde bearbeitet.", "ihre anfrage zum austausch wurde bearbeitet"),
    ("Hemos procesado su solicitud.", "hemos procesado"),
    ("Votre commande a été annulée.", "votre commande a été annulée"),
    ("Sua solicitação foi aprovada.", "sua solicitação foi aprovada"),
    ("Ich habe die Lieferadresse für Ihre Bestellung wie gewünscht aktualisiert.",
     "ich habe die lieferadresse für ihre bestellung wie…"),     # clipped at 60
    ("I have updated the shipping address as requested.", "i have updated"),
])
def test_a_copied_answer_saying_the_request_is_done_is_flagged(answer, said):
    assert borrowed_claims(answer) == [f"draft says it is already done ({said})"]


def test_a_condition_is_not_a_claim_that_it_is_done():
    assert borrowed_claims("If your order was cancelled by mistake, reply here.") == []


def test_a_call_without_a_number_is_flagged():
    assert borrowed_claims("If it persists, call us.") == [
        "draft asks for a call without a number (call us)"]


def test_a_copied_answer_with_a_borrowed_claim_needs_a_person():
    examples = _filler() + [
        Example(f"My invoice {n} shows the wrong amount", "Billing",
                "Thanks. Our billing team is reviewing the charge.", language="en")
        for n in ("11-1111", "22-2222", "33-3333")]
    model = TicketModel(examples, min_similarity=0.1, cache=False)
    draft = model.draft("My invoice shows the wrong amount", "Billing", "en")
    assert draft["example"] >= 0
    assert "draft says work is under way (our billing team is reviewing)" in draft["flags"]


def test_a_language_models_draft_has_its_slots_filled_and_the_rest_flagged():
    from foreperson.testing import FunctionModel
    from foreperson.tickets.llm import LlmTicketModel

    def reply(messages, params):
        return ("Hello {{Customer Name}}, order {{Order Number}} is cancelled; call "
                "[Customer Support Phone Number] with questions.")

    examples = [Example("Please cancel my order", "Orders"), Example("App crash", "Technical")]
    llm = LlmTicketModel(FunctionModel(reply), examples)
    draft = llm.draft("Cancel order 55-1234 please.\n\nThanks, Dana Lee", "Orders", "en")
    assert draft["draft_reply"].startswith("Hello Dana Lee, order 55-1234 is cancelled")
    assert draft["flags"] == [
        "draft has placeholders to fill in ([Customer Support Phone Number])"]


def test_never_send_matches_whole_phrases_in_any_case_and_spacing(tmp_path):
    listed = tmp_path / "never.txt"
    listed.write_text("# comment\nreset the SMC\n\n  PRAM  \nC++ tips\n", encoding="utf-8")
    phrases = load_never_send(listed)
    assert phrases == [("reset the SMC", "never.txt:2"), ("PRAM", "never.txt:4"),
                       ("C++ tips", "never.txt:5")]
    said = never_send("Please RESET the\n smc and then the pram. Our C++ tips help.", phrases)
    assert said == ["draft says what the team marked never to send: 'reset the SMC' "
                    "(never.txt:2), 'PRAM' (never.txt:4), 'C++ tips' (never.txt:5)"]
    assert never_send("Try resetting the SMCs and the PRAMS, or a programme.", phrases) == []


def test_a_never_send_file_that_cannot_be_used_is_named(tmp_path):
    with pytest.raises(ConfigurationError, match=r"missing.txt: cannot read"):
        load_never_send(tmp_path / "missing.txt")
    short = tmp_path / "short.txt"
    short.write_text("SMC\n-\n", encoding="utf-8")
    with pytest.raises(ConfigurationError, match=r"short.txt:2: '-' is too short"):
        load_never_send(short)
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"SMC\n\xff\xfe\n")
    with pytest.raises(ConfigurationError, match=r"binary.txt: a never-send file must be UTF-8"):
        load_never_send(binary)


@pytest.mark.parametrize(("answer", "ticket", "language", "said"), [
    ("Hola: reinicia tu Surface y escríbenos.", "Mi Surface no arranca. ¿Pueden ayudarme?",
     "es", "'tu'"),
    ("Hallo, starte dein Gerät neu.", "Mein Gerät startet nicht. Können Sie helfen?", "de",
     "'dein'"),
    ("Bonjour, nous allons t'aider.", "Mon écran reste noir, pouvez-vous m'aider ?", "fr",
     '"t\'"'),
    ("Olá, reinicie o teu aparelho.", "O meu aparelho não liga.", "pt", "'teu'"),
    # "te" joined to the verb, and the tú imperative with a pronoun
    ("Hola: Gracias por ponerte en contacto.", "Estimado soporte, mi Surface no arranca.",
     "es", "'ponerte'"),
    ("Hola: asegúrate de que el cable esté conectado.", "Mi impresora no imprime.", "es",
     "'asegúrate'"),
    ("Por favor, intenta reparar Office. Háznos saber si necesitas ayuda.",
     "Mi Outlook se bloquea.", "es", "'por favor, intenta'"),
    ("Si el problema persiste, reinstálalo.", "Mi Outlook se bloquea.", "es",
     "'reinstálalo'"),
])
def test_an_informal_reply_to_a_customer_who_did_not_write_so_is_flagged(
        answer, ticket, language, said):
    assert informal_reply(answer, ticket, language) == [
        f"draft speaks informally ({said}), as the customer did not"]


@pytest.mark.parametrize(("answer", "ticket", "language"), [
    ("Hola: reinicia tu Surface.", "¿Me ayudas? Tu app no abre.", "es"),   # they set the tone
    ("Por favor, reinicie su dispositivo.", "Mi dispositivo no arranca.", "es"),
    ("Bitte starten Sie Ihr Gerät neu.", "Mein Gerät startet nicht.", "de"),
    ("Veuillez redémarrer votre appareil. Merci de votre patience.", "Écran noir.", "fr"),
    ("Please restart your phone.", "My phone is frozen.", "en"),     # one "you" in English
    # "TI" is IT; nouns and usted forms that end like a pronoun are not one
    ("Nuestro equipo de TI le ayudará. Asegúrese de guardar su trabajo.", "Necesito ayuda.",
     "es"),
    ("Es parte del servicio; con suerte se convierte en rutina. Háganos saber.",
     "¿Está incluido?", "es"),
    ("Por favor, reinstálelo. Si necesita ayuda, el sábado la atendemos.", "Outlook falla.",
     "es"),
])
def test_a_formal_reply_or_one_in_the_customers_own_tone_is_not(answer, ticket, language):
    assert informal_reply(answer, ticket, language) == []


def test_a_never_send_file_from_any_editor_matches_as_written(tmp_path):
    listed = tmp_path / "never.txt"    # Notepad's byte-order mark and line ends, macOS's
    # decomposed accents, a phrase listed twice, Chinese (no spaces between words)
    listed.write_bytes("\ufeffSMC\r\nde\u0301ja\u0300 vu\r\nsmc\r\n支付失败\r\n退\r\n".encode())
    phrases = load_never_send(listed)
    assert [p for p, _ in phrases] == ["SMC", "déjà vu", "支付失败", "退"]
    assert never_send("Reset the SMC.", phrases) != []
    assert never_send("C'est du déjà vu.", phrases) != []
    assert never_send("支付失败请重试", phrases) != []
    assert never_send("Nothing here.", phrases) == []


# -- loose ends a support lead sends back -----------------------------------------------

@pytest.mark.parametrize(("ticket", "answer", "step", "tried"), [
    ("My monitor is not detected. I have attempted troubleshooting the graphics drivers, but "
     "the issue persists.", "Please update the BIOS and graphics drivers.", "drivers",
     "i have attempted troubleshooting the graphics drivers"),
    ("I have made several attempts at troubleshooting; however, the connection drops.",
     "1. Restart both the router and the printer.", "restart",
     "i have made several attempts at troubleshooting"),
    ("Mi impresora no imprime. Ya he reiniciado la impresora, pero sigue igual.",
     "Por favor, reinicie la impresora y el router.", "restart",
     "ya he reiniciado la impresora"),
    ("Despite multiple attempts at troubleshooting; the printer fails to connect.",
     "Restart both the router and the printer.", "restart",
     "despite multiple attempts at troubleshooting"),
    ("J'ai essayé de réinitialiser l'imprimante sans succès.",
     "Veuillez réinitialiser l'imprimante.", "reset", "j'ai essayé de réinitialiser l'imprimante"),
])
def test_a_step_the_customer_already_tried_is_flagged_with_their_words(
        ticket, answer, step, tried):
    assert loose_ends(answer, ticket) == [
        f"draft suggests what the customer already tried ({step}: {tried!r})"]


@pytest.mark.parametrize(("ticket", "answer"), [
    # an update the customer made is not a step they tried: it may be the cause
    ("I updated Windows and now the screen flickers.", "Please update the display driver."),
    # the draft knows they restarted and goes further
    ("I have restarted the router twice, but nothing changed.",
     "Since you have already restarted it, please check the firmware version."),
    # basic troubleshooting tried: a driver or BIOS update is the next step, not a repeat
    ("I have done basic troubleshooting but the crashes persist.",
     "Please make sure your BIOS and drivers are up to date and run a diagnostic."),
])
def test_advice_beyond_what_was_tried_is_not_a_loose_end(ticket, answer):
    assert loose_ends(answer, ticket) == []


@pytest.mark.parametrize(("answer", "said"), [
    ("Restart it. If the problem persists, please contact support.", "contact support"),
    ("Wenn das Problem weiterhin besteht, kontaktieren Sie uns bitte direkt für weitere "
     "Unterstützung.", "kontaktieren sie uns bitte direkt für weitere unterstützung"),
    ("If the issue persists, contact us with further details.",
     "contact us with further details"),
    ("Si el problema persiste, comuníquese con nuestro equipo de soporte.",
     "comuníquese con nuestro equipo de soporte"),
    ("Please contact our support team to explore further assistance.",
     "contact our support team to explore further assistance"),
    ("Contact support if the issue persists.", "contact support if the issue persists"),
    ("Wenden Sie sich direkt an unser Abrechnungssupport-Team.",
     "wenden sie sich direkt an unser abrechnungssupport-team"),
])
def test_an_ending_that_sends_the_customer_back_to_us_is_flagged(answer, said):
    assert loose_ends(answer, "My tablet screen does not respond.") == [
        f"draft sends the customer back to us with nothing to send ({said})"]


@pytest.mark.parametrize("answer", [
    "If it persists, please contact us with the error code and your Windows version.",
    "If the problem persists, let us know and we will arrange a replacement.",
    "Wenn das Problem weiterhin besteht, lassen Sie es uns bitte wissen.",
    "Contact us with the results of the diagnostic so that we can discuss a replacement.",
])
def test_an_ending_that_asks_for_something_or_offers_help_passes(answer):
    assert loose_ends(answer, "My tablet screen does not respond.") == []


@pytest.mark.parametrize(("answer", "said"), [
    ("Try reinstalling it. If the issue persists, contact Adobe Support directly.",
     "contact adobe support"),
    ("For detailed guidance, refer to the documentation or contact a DBA.", "contact a dba"),
    ("Please contact your bank about the charge.", "contact your bank"),
    ("Si los problemas persisten, contacte directamente con el soporte de Zoom.",
     "contacte directamente con el soporte de zoom"),
    ("Vous devrez peut-être contacter directement le support Canon.",
     "contacter directement le support canon"),
])
def test_a_hand_off_without_a_way_to_reach_them_is_flagged(answer, said):
    assert loose_ends(answer, "Photoshop crashes.") == [
        f"draft hands the customer to someone else without saying how to reach them ({said})"]


def test_a_hand_off_that_gives_the_address_passes():
    assert loose_ends("Please contact Adobe Support at https://helpx.adobe.com/contact.html.",
                      "Photoshop crashes.") == []


def test_a_few_lines_for_a_ticket_asking_for_instructions_is_flagged():
    ticket = ("Sehr geehrtes Support-Team, bitte geben Sie Anweisungen zur Einrichtung von "
              "E-Mail-Konten mit Office 365 auf einer neuen Domain.")
    assert loose_ends("Guten Tag, besuchen Sie das Admin-Center. Wenn Sie weitere Hilfe "
                      "benötigen, lassen Sie es uns wissen.", ticket) == [
        "the ticket asks for 'anweisungen'; the draft gives a few lines"]
    steps = ("Guten Tag,\n1. Fügen Sie die Domain hinzu.\n2. Bestätigen Sie sie per TXT-Eintrag."
             "\n3. Legen Sie die Postfächer an.\n4. Setzen Sie den MX-Eintrag.")
    assert loose_ends(steps, ticket) == []


def test_a_page_or_guide_named_but_not_given_is_flagged():
    assert borrowed_claims("Für detaillierte Schritte besuchen Sie die Fehlersuche-Seite.") == [
        "draft points to a page it does not give (die fehlersuche-seite)"]
    assert borrowed_claims("Visite el centro de administración y siga su guía de "
                           "configuración.") == [
        "draft points to a page it does not give (su guía de configuración)"]


def test_a_copied_answer_with_a_loose_end_needs_a_person():
    examples = _filler() + [
        Example(f"My tablet {n} screen does not respond to touch", "Hardware",
                "Hello, please restart the tablet. If it persists, please contact support.",
                language="en") for n in ("A1", "B2", "C3")]
    model = TicketModel(examples, min_similarity=0.1, cache=False)
    draft = model.draft("My tablet screen does not respond to touch", "Hardware", "en")
    assert draft["example"] >= 0
    assert ("draft sends the customer back to us with nothing to send (contact support)"
            in draft["flags"])


def test_a_copied_answer_without_greeting_or_closing_becomes_a_letter():
    assert complete_letter("Restart the printer and the router.", "Printer offline.",
                           "en") == ("Hello,\n\nRestart the printer and the router.\n\n"
                                     "Kind regards,\nCustomer Support")
    assert complete_letter("Guten Tag,\nstarten Sie den Drucker neu.", "Drucker offline.",
                           "de").endswith("Mit freundlichen Grüßen\nIhr Kundenservice")
    assert complete_letter("Reinicie la impresora.\n\nSaludos,\nSoporte", "Impresora.",
                           "es") == "Hola:\n\nReinicie la impresora.\n\nSaludos,\nSoporte"


def test_a_letter_with_both_is_left_as_it_is():
    letter = "Hello,\n\nRestart it.\n\nBest regards,\nSupport Team"
    assert complete_letter(letter, "It is offline.", "en") == letter
