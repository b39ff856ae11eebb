"""Draft replies: written for the ticket's category in the ticket's language, carrying
over only what the ticket says.

A reply built here acknowledges the ticket, says what happens next and asks for what
is missing; it never promises a refund, a credit, a call-back, a date or an outage.
The facts it repeats come from the ticket itself: the customer's name from the sign-off
and reference numbers introduced as such ("order 55-1234", "Bestellnummer 12345").

Answers taken from labelled examples are checked by :func:`foreign_identifiers`: an
order number, e-mail address or phone number that is not in the ticket belongs to
another customer; and by :func:`placeholders`: a ``<name>`` left in cannot be sent.

Every draft is checked by :func:`draft_promises`: a draft that promises money (a refund,
a credit, a price), a time ("within 5 business days", "tomorrow"), contact (a call, a
visit) or announces an outage must be read by a person before it is sent.
"""

from __future__ import annotations

import re

from ._patterns import PROMISES

__all__ = ["TEMPLATE_CATEGORIES", "draft_promises", "foreign_identifiers", "personal_greeting",
           "placeholders", "references", "signature_name", "template_reply"]

# Per language: greeting with and without a name, the reference sentence, the closing,
# and per category (acknowledge, what happens next, what we need).
_TEXT: dict[str, dict[str, object]] = {
    "en": {
        "hello": ("Hello {name},", "Hello,"),
        "refs": "We have noted the reference {refs} from your message.",
        "bye": "Kind regards,\nCustomer Support",
        "other": ("Thank you for your message.",
                  "We have passed it to the team that handles it, who will answer it here.",
                  "If there is anything else we should know, such as an account or order "
                  "number, please add it in your reply."),
        "account": ("Thank you for contacting us about your account.",
                    "Our account team will review it.",
                    "To help you safely, please confirm the email address of the account and "
                    "describe what happens when you try to sign in, including any error "
                    "message."),
        "billing": ("Thank you for writing to us about your billing.",
                    "Our billing team will review the charges on your account.",
                    "Please send us the invoice number and the date and amount of the charge "
                    "in question, so that we can find it quickly."),
        "feature_request": ("Thank you for your suggestion.",
                            "We have passed it on to our product team, who review every "
                            "request.",
                            "If you can, tell us a little more about how you would use it; "
                            "that helps them judge it."),
        "general": ("Thank you for your message.",
                    "A member of our team will read it and answer your question here.",
                    "If there is anything else we should know, such as your account or "
                    "order number, please add it in your reply."),
        "outage": ("Thank you for letting us know that the service is not working for you.",
                   "We are checking what is causing it.",
                   "Please tell us since when it happens, which page or feature is affected "
                   "and any error message you see."),
        "security": ("Thank you for alerting us; we take this seriously.",
                     "Our security team will review the activity on your account.",
                     "Until then, please change your password and do not share any codes or "
                     "card details. Tell us when you first noticed the problem and what "
                     "looked wrong."),
        "shipping": ("Thank you for contacting us about your order.",
                     "We will look into where it stands.",
                     "Please send us the order number and, if the delivery arrived damaged "
                     "or incomplete, a photo of the parcel and its contents."),
        "technical": ("Thank you for reporting this problem.",
                      "Our technical team will look into it.",
                      "Please tell us which version and device you use, the steps that lead "
                      "to the problem and the exact error message; a screenshot helps."),
    },
    "de": {
        "hello": ("Guten Tag {name},", "Guten Tag,"),
        "refs": "Wir haben die Angabe {refs} aus Ihrer Nachricht notiert.",
        "bye": "Mit freundlichen Grüßen\nIhr Kundenservice",
        "other": ("vielen Dank für Ihre Nachricht.",
                  "Wir haben sie an das zuständige Team weitergegeben, das sie hier "
                  "beantwortet.",
                  "Falls wir noch etwas wissen sollten, etwa eine Kunden- oder Bestellnummer, "
                  "ergänzen Sie es bitte in Ihrer Antwort."),
        "account": ("vielen Dank für Ihre Nachricht zu Ihrem Konto.",
                    "Unser Kontoteam prüft den Vorgang.",
                    "Damit wir Ihnen sicher helfen können, bestätigen Sie bitte die "
                    "E-Mail-Adresse des Kontos und beschreiben Sie, was bei der Anmeldung "
                    "passiert, einschließlich einer eventuellen Fehlermeldung."),
        "billing": ("vielen Dank für Ihre Nachricht zu Ihrer Rechnung.",
                    "Unsere Buchhaltung prüft die Abbuchungen auf Ihrem Konto.",
                    "Bitte senden Sie uns die Rechnungsnummer sowie Datum und Betrag der "
                    "betreffenden Abbuchung, damit wir sie schnell finden."),
        "feature_request": ("vielen Dank für Ihren Vorschlag.",
                            "Wir haben ihn an unser Produktteam weitergegeben, das jede "
                            "Anfrage prüft.",
                            "Wenn Sie mögen, beschreiben Sie uns kurz, wie Sie die Funktion "
                            "nutzen würden; das hilft bei der Bewertung."),
        "general": ("vielen Dank für Ihre Nachricht.",
                    "Ein Mitglied unseres Teams liest sie und beantwortet Ihre Frage hier.",
                    "Falls wir noch etwas wissen sollten, etwa Ihre Kunden- oder "
                    "Bestellnummer, ergänzen Sie es bitte in Ihrer Antwort."),
        "outage": ("vielen Dank für den Hinweis, dass der Dienst bei Ihnen nicht "
                   "funktioniert.",
                   "Wir prüfen, woran es liegt.",
                   "Bitte teilen Sie uns mit, seit wann das Problem besteht, welche Seite "
                   "oder Funktion betroffen ist und welche Fehlermeldung Sie sehen."),
        "security": ("vielen Dank für Ihre Meldung; wir nehmen sie ernst.",
                     "Unser Sicherheitsteam prüft die Aktivitäten auf Ihrem Konto.",
                     "Bitte ändern Sie bis dahin Ihr Passwort und geben Sie keine Codes oder "
                     "Kartendaten weiter. Teilen Sie uns mit, wann Ihnen das Problem zuerst "
                     "aufgefallen ist und was ungewöhnlich war."),
        "shipping": ("vielen Dank für Ihre Nachricht zu Ihrer Bestellung.",
                     "Wir prüfen den Stand der Lieferung.",
                     "Bitte senden Sie uns die Bestellnummer und, falls die Sendung "
                     "beschädigt oder unvollständig ankam, ein Foto des Pakets und des "
                     "Inhalts."),
        "technical": ("vielen Dank für die Meldung des Problems.",
                      "Unser technisches Team sieht sich das an.",
                      "Bitte nennen Sie uns die verwendete Version und das Gerät, die "
                      "Schritte, die zum Problem führen, und die genaue Fehlermeldung; ein "
                      "Screenshot hilft."),
    },
    "es": {
        "hello": ("Hola, {name}:", "Hola:"),
        "refs": "Hemos anotado la referencia {refs} de su mensaje.",
        "bye": "Atentamente,\nAtención al cliente",
        "other": ("Gracias por su mensaje.",
                  "Lo hemos pasado al equipo responsable, que le responderá aquí.",
                  "Si hay algo más que debamos saber, como un número de cliente o de pedido, "
                  "añádalo en su respuesta."),
        "account": ("Gracias por escribirnos sobre su cuenta.",
                    "Nuestro equipo de cuentas revisará el caso.",
                    "Para ayudarle de forma segura, confirme la dirección de correo de la "
                    "cuenta y describa qué ocurre al iniciar sesión, incluido cualquier "
                    "mensaje de error."),
        "billing": ("Gracias por escribirnos sobre su facturación.",
                    "Nuestro equipo de facturación revisará los cargos de su cuenta.",
                    "Envíenos el número de factura y la fecha e importe del cargo en "
                    "cuestión para poder localizarlo rápidamente."),
        "feature_request": ("Gracias por su sugerencia.",
                            "La hemos transmitido a nuestro equipo de producto, que revisa "
                            "cada propuesta.",
                            "Si lo desea, cuéntenos cómo usaría esta función; eso les ayuda "
                            "a valorarla."),
        "general": ("Gracias por su mensaje.",
                    "Una persona de nuestro equipo lo leerá y responderá a su pregunta aquí.",
                    "Si hay algo más que debamos saber, como su número de cliente o de "
                    "pedido, añádalo en su respuesta."),
        "outage": ("Gracias por avisarnos de que el servicio no le funciona.",
                   "Estamos comprobando cuál es la causa.",
                   "Indíquenos desde cuándo ocurre, qué página o función se ve afectada y "
                   "qué mensaje de error aparece."),
        "security": ("Gracias por avisarnos; nos lo tomamos muy en serio.",
                     "Nuestro equipo de seguridad revisará la actividad de su cuenta.",
                     "Mientras tanto, cambie su contraseña y no comparta códigos ni datos de "
                     "tarjeta. Indíquenos cuándo notó el problema por primera vez y qué le "
                     "pareció extraño."),
        "shipping": ("Gracias por escribirnos sobre su pedido.",
                     "Vamos a comprobar en qué estado se encuentra.",
                     "Envíenos el número de pedido y, si el envío llegó dañado o incompleto, "
                     "una foto del paquete y de su contenido."),
        "technical": ("Gracias por informarnos del problema.",
                      "Nuestro equipo técnico lo revisará.",
                      "Indíquenos qué versión y dispositivo utiliza, los pasos que llevan al "
                      "problema y el mensaje de error exacto; una captura de pantalla ayuda."),
    },
    "fr": {
        "hello": ("Bonjour {name},", "Bonjour,"),
        "refs": "Nous avons noté la référence {refs} indiquée dans votre message.",
        "bye": "Cordialement,\nLe service client",
        "other": ("Merci pour votre message.",
                  "Nous l'avons transmis à l'équipe concernée, qui vous répondra ici.",
                  "S'il y a autre chose à savoir, comme un numéro de client ou de commande, "
                  "ajoutez-le dans votre réponse."),
        "account": ("Merci de nous avoir écrit au sujet de votre compte.",
                    "Notre équipe chargée des comptes va examiner la situation.",
                    "Pour vous aider en toute sécurité, confirmez l'adresse e-mail du compte "
                    "et décrivez ce qui se passe lors de la connexion, y compris tout message "
                    "d'erreur."),
        "billing": ("Merci de nous avoir écrit au sujet de votre facturation.",
                    "Notre service facturation va examiner les prélèvements sur votre compte.",
                    "Envoyez-nous le numéro de facture ainsi que la date et le montant du "
                    "prélèvement concerné, afin que nous le retrouvions rapidement."),
        "feature_request": ("Merci pour votre suggestion.",
                            "Nous l'avons transmise à notre équipe produit, qui étudie "
                            "chaque demande.",
                            "Si vous le souhaitez, dites-nous comment vous utiliseriez cette "
                            "fonction ; cela l'aide à l'évaluer."),
        "general": ("Merci pour votre message.",
                    "Un membre de notre équipe va le lire et répondre à votre question ici.",
                    "S'il y a autre chose à savoir, comme votre numéro de client ou de "
                    "commande, ajoutez-le dans votre réponse."),
        "outage": ("Merci de nous signaler que le service ne fonctionne pas pour vous.",
                   "Nous vérifions quelle en est la cause.",
                   "Indiquez-nous depuis quand cela se produit, quelle page ou fonction est "
                   "concernée et quel message d'erreur s'affiche."),
        "security": ("Merci de nous avoir alertés ; nous prenons cela très au sérieux.",
                     "Notre équipe sécurité va examiner l'activité de votre compte.",
                     "En attendant, changez votre mot de passe et ne communiquez aucun code "
                     "ni aucune donnée de carte. Dites-nous quand vous avez remarqué le "
                     "problème et ce qui vous a semblé anormal."),
        "shipping": ("Merci de nous avoir écrit au sujet de votre commande.",
                     "Nous allons vérifier où elle en est.",
                     "Envoyez-nous le numéro de commande et, si le colis est arrivé "
                     "endommagé ou incomplet, une photo du colis et de son contenu."),
        "technical": ("Merci de nous avoir signalé ce problème.",
                      "Notre équipe technique va l'examiner.",
                      "Indiquez-nous la version et l'appareil utilisés, les étapes qui mènent "
                      "au problème et le message d'erreur exact ; une capture d'écran aide."),
    },
    "pt": {
        "hello": ("Olá, {name},", "Olá,"),
        "refs": "Anotamos a referência {refs} da sua mensagem.",
        "bye": "Atenciosamente,\nAtendimento ao cliente",
        "other": ("Obrigado pela sua mensagem.",
                  "Nós a encaminhamos à equipe responsável, que vai respondê-la aqui.",
                  "Se houver mais alguma coisa que devamos saber, como um número de cliente "
                  "ou de pedido, acrescente-a na sua resposta."),
        "account": ("Obrigado por nos escrever sobre a sua conta.",
                    "A nossa equipe de contas vai analisar o caso.",
                    "Para ajudar com segurança, confirme o endereço de e-mail da conta e "
                    "descreva o que acontece ao entrar, incluindo qualquer mensagem de erro."),
        "billing": ("Obrigado por nos escrever sobre a sua cobrança.",
                    "A nossa equipe de faturamento vai analisar as cobranças da sua conta.",
                    "Envie-nos o número da fatura e a data e o valor da cobrança em questão, "
                    "para que possamos encontrá-la rapidamente."),
        "feature_request": ("Obrigado pela sua sugestão.",
                            "Nós a encaminhamos à nossa equipe de produto, que analisa cada "
                            "pedido.",
                            "Se quiser, conte-nos como usaria essa função; isso ajuda a "
                            "avaliá-la."),
        "general": ("Obrigado pela sua mensagem.",
                    "Uma pessoa da nossa equipe vai lê-la e responder à sua pergunta aqui.",
                    "Se houver mais alguma coisa que devamos saber, como o seu número de "
                    "cliente ou de pedido, acrescente-a na sua resposta."),
        "outage": ("Obrigado por nos avisar que o serviço não está funcionando para você.",
                   "Estamos verificando a causa.",
                   "Diga-nos desde quando isso acontece, qual página ou função é afetada e "
                   "qual mensagem de erro aparece."),
        "security": ("Obrigado pelo alerta; levamos isso muito a sério.",
                     "A nossa equipe de segurança vai analisar a atividade da sua conta.",
                     "Enquanto isso, altere a sua senha e não compartilhe códigos nem dados "
                     "de cartão. Diga-nos quando notou o problema pela primeira vez e o que "
                     "pareceu estranho."),
        "shipping": ("Obrigado por nos escrever sobre o seu pedido.",
                     "Vamos verificar a situação da entrega.",
                     "Envie-nos o número do pedido e, se a encomenda chegou danificada ou "
                     "incompleta, uma foto do pacote e do conteúdo."),
        "technical": ("Obrigado por relatar o problema.",
                      "A nossa equipe técnica vai analisá-lo.",
                      "Diga-nos qual versão e dispositivo usa, os passos que levam ao "
                      "problema e a mensagem de erro exata; uma captura de tela ajuda."),
    },
}

TEMPLATE_CATEGORIES = frozenset(k for k in _TEXT["en"] if k not in ("hello", "refs", "bye",
                                                                     "other"))
"""The categories with a reply of their own (those of the bundled examples)."""

_REF_WORDS = (r"order|invoice|ticket|case|reference|ref|tracking|booking|account|customer|"
              r"contract|bestellung|bestellnummer|rechnung|rechnungsnummer|auftrag|"
              r"auftragsnummer|kundennummer|sendungsnummer|vorgang|pedido|factura|referencia|"
              r"n[úu]mero|commande|facture|dossier|r[ée]f[ée]rence|encomenda|fatura|protocolo")
_REFERENCE = re.compile(
    rf"\b(?:{_REF_WORDS})\b\.?\s*(?:(?:number|no|nr|num|n[°º]|#|nummer|de|do|da)\.?\s*)?[:#]?\s*"
    r"((?:[A-Za-z]{1,6}[-#]?)?\d[\w-]*\d)(?![\w])", re.IGNORECASE)
_IDENTIFIER = re.compile(r"(?<![\w.@/-])(?:[A-Za-z]{1,6}[-#]?)?\d[\w-]*\d(?![\w@/-]|\.\w)")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_PHONE = re.compile(r"(?<![\w])\+?\d[\d ()/-]{6,}\d(?![\w])")
_YEAR = re.compile(r"(?:19|20)\d\d")
_SIGN_OFF = re.compile(
    r"^(?:thanks|thank you|many thanks|regards|best regards|kind regards|best|cheers|"
    r"sincerely|yours|viele grüße|mit freundlichen grüßen|freundliche grüße|grüße|lg|"
    r"saludos|un saludo|atentamente|gracias|cordialement|bien à vous|merci|"
    r"atenciosamente|obrigad[oa]|abraços|cumprimentos)\b[,.!]?\s*(.*)$", re.IGNORECASE)
_NAME = re.compile(r"^[A-ZÀ-Ý][a-zà-ÿ'-]+(?: [A-ZÀ-Ý][a-zà-ÿ'-]+){0,2}$")


def references(text: str) -> list[str]:
    """Reference numbers a ticket introduces as such ("order 55-1234", "Rechnung
    RE-2024-77", "pedido nº 12345"), in order, each once."""
    found = [m.group(1) for m in _REFERENCE.finditer(text)]
    return list(dict.fromkeys(r for r in found if sum(c.isdigit() for c in r) >= 3))


def signature_name(text: str) -> str:
    """The customer's name from the sign-off ("Thanks, Dana" or a closing line followed
    by a name line); "" when there is none (placeholders like ``<name>`` are not
    names)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    for i in range(len(lines) - 1, max(-1, len(lines) - 4), -1):
        match = _SIGN_OFF.match(lines[i])
        if not match:
            continue
        rest = match.group(1).strip(" ,.")
        candidate = rest or (lines[i + 1] if i + 1 < len(lines) else "")
        return candidate if _NAME.match(candidate) else ""
    return ""


def template_reply(category: str, language: str, text: str) -> str:
    """A reply for ``category`` in ``language`` that repeats only facts of ``text``.

    Args:
        category: the predicted category; one of :data:`TEMPLATE_CATEGORIES`, else a
            neutral reply (it names no team: the category may be wrong, and a label
            such as "Billing and Payments" is not in the customer's language).
        language: a code of :data:`~foreperson.tickets.language.LANGUAGES` (English when
            unknown).
        text: the ticket, for the customer's name and reference numbers.

    Returns:
        the reply: greeting, acknowledgement, next step, what we need, closing.
    """
    words = _TEXT.get(language, _TEXT["en"])
    key = category if category in TEMPLATE_CATEGORIES else "other"
    ack, then, need = (str(part) for part in words[key])  # type: ignore[attr-defined]
    name = signature_name(text)
    named, plain = (str(part) for part in words["hello"])  # type: ignore[attr-defined]
    lines = [named.format(name=name) if name else plain, ""]
    body = [ack, then]
    refs = references(text)
    if refs:
        body.append(str(words["refs"]).format(refs=", ".join(refs)))
    body.append(need)
    lines += [" ".join(body), "", str(words["bye"])]
    return "\n".join(lines)


_GREETING = re.compile(   # a greeting, whom it greets (a placeholder or a name), its comma
    r"^\s*(?i:dear|hello|hi|good (?:morning|afternoon|evening)|sehr geehrte[rs]?|liebe[rs]?|"
    r"hallo|guten tag|estimad[oa]|hola|querid[oa]|bonjour|ch[eè]re?|caro|cara|prezad[oa]|"
    r"ol[áa]|oi)\b(?:\(\w{1,2}\)|/\w{1,2})?[ ,]+"
    r"(?:(?i:mr|mrs|ms|dr|herr|frau|sr|sra|se[ñn]or|se[ñn]ora|mme|madame|monsieur|senhor|"
    r"senhora)\.?\s+)?(?:<[a-z_]+>|[A-ZÀ-Ý][\w'’-]*(?:[ \t]+[A-ZÀ-Ý][\w'’-]*){0,3})"
    r"[ \t]*[,:!]")
_PLACEHOLDER = re.compile(r"<[a-z_]+>")


def personal_greeting(answer: str, ticket: str, language: str) -> str:
    """``answer`` (another customer's reply) with its greeting addressed to this ticket's
    customer: "Dear Maria Schmidt," becomes "Hello Dana," (the name from the ticket's
    sign-off) or the plain greeting of ``language`` when the ticket gives no name. An
    answer that greets nobody by name is returned as it is."""
    match = _GREETING.match(answer)
    if not match:
        return answer          # no greeting, or one that greets nobody by name
    words = _TEXT.get(language, _TEXT["en"])
    named, plain = (str(part) for part in words["hello"])  # type: ignore[attr-defined]
    name = signature_name(ticket)
    return (named.format(name=name) if name else plain) + answer[match.end():]


def placeholders(text: str) -> list[str]:
    """Template placeholders left in a text (``<tel_num>``, ``<name>``), each once: a
    reply that still has them cannot be sent as it is."""
    return list(dict.fromkeys(_PLACEHOLDER.findall(text)))


def foreign_identifiers(answer: str, ticket: str) -> list[str]:
    """Order numbers, e-mail addresses and phone numbers in ``answer`` that ``ticket``
    does not contain (another customer's details, copied with an example's answer).
    Years, versions (``5.11.0``) and placeholders such as ``<tel_num>`` are not
    identifiers."""
    seen = ticket.lower()
    found = []
    for pattern in (_EMAIL, _PHONE, _IDENTIFIER):
        for match in pattern.finditer(answer):
            token = match.group(0).strip()
            digits = sum(c.isdigit() for c in token)
            if pattern is not _EMAIL and (digits < 3 or _YEAR.fullmatch(token)):
                continue
            if token.lower() not in seen and token not in found:
                found.append(token)
    return found


def draft_promises(draft: str) -> list[str]:
    """What a draft promises that a person must confirm before it is sent.

    Args:
        draft: the reply text (any of the five languages).

    Returns:
        reasons such as ``"draft promises money (refund)"`` (empty: nothing promised).
    """
    out = []
    for what, pattern in PROMISES.items():
        match = pattern.search(draft)
        if match:
            verb = "announces" if what == "an outage" else "promises"
            out.append(f"draft {verb} {what} ({' '.join(match.group(0).lower().split())})")
    return out
