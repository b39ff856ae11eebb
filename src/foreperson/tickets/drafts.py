"""Draft replies: written for the ticket's category in the ticket's language, carrying
over only what the ticket says.

A reply built here acknowledges the ticket, says what happens next and asks for what
is missing; it never promises a refund, a credit, a call-back, a date or an outage.
The facts it repeats come from the ticket itself: the customer's name from the sign-off
and reference numbers introduced as such ("order 55-1234", "Bestellnummer 12345").

Answers taken from labelled examples are checked by :func:`foreign_identifiers`: an
order number, e-mail address or phone number that is not in the ticket belongs to
another customer; by :func:`fill_placeholders`: a template slot (``{{Order Number}}``,
``[Customer Support Phone Number]``, ``<name>``, ``%NAME%``, ``{order_id}``) is filled
from the ticket where it has the value, and one left in cannot be sent; and by
:func:`request_mismatches`: an answer to another request (the example asks to upgrade
an account, the ticket to close one; another account tier, product or place) does not
answer this ticket. :func:`swap_references` puts the ticket's own order number where the
example's stood.

Every draft is checked by :func:`draft_promises`: a draft that promises money (a refund,
a credit, a price), a time ("within 5 business days", "tomorrow"), contact (a call, a
visit) or announces an outage must be read by a person before it is sent; and a copied
answer by :func:`borrowed_claims`: what held for the example's ticket and nobody checked
for this one, that work is under way ("our team is investigating"), that the request is
already carried out ("your refund has been processed"), a page or a phone line it sends
the customer to without giving it ("visit our website"); and every draft by
:func:`loose_ends`: what reviewers sent back, a step the customer already tried, an
ending that sends them back to us with nothing to send ("please contact support"), a
hand-off to someone else with no way to reach them, a few lines for a ticket that asks
for instructions. What the team itself has
found wrong in its own answers (a step for a product that has no such part) no rule can
know: :func:`never_send` flags a draft that says what a ``--never-send`` file lists.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from pathlib import Path

from ..errors import ConfigurationError
from ._patterns import (
    ACKNOWLEDGED,
    ALREADY_DONE,
    ASKS_FOR_STEPS,
    BACK_TO_US,
    BASIC_TRIED,
    CLAUSE_END,
    CONTACT_DETAILS,
    HANDOFF,
    INFORMAL,
    LINK,
    PROMISES,
    STEP_LINE,
    STEPS,
    TRIED,
    UNDER_WAY,
    UNNAMED_PHONE,
    UNNAMED_PLACES,
)

__all__ = ["MAX_NEVER_SEND", "TEMPLATE_CATEGORIES", "borrowed_claims", "complete_letter",
           "draft_promises", "fill_placeholders", "foreign_identifiers", "informal_reply",
           "load_never_send", "loose_ends", "never_send", "personal_greeting", "placeholders",
           "references", "request_mismatches", "signature_name", "swap_references",
           "template_reply", "typed_references"]

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
    r"senhora)\.?\s+)?(?:<[a-z_]+>|\{\{[^{}\n]{1,60}\}\}|\[[A-ZÀ-Ý][^\[\]\n]{0,40}\]|%[A-Za-z_]+%|"
    r"\{[A-Za-z_]+\}|[A-ZÀ-Ý][\w'’-]*(?:[ \t]+[A-ZÀ-Ý][\w'’-]*){0,3})"
    r"[ \t]*[,:!]")
_PLACEHOLDER = re.compile(   # the common template slots, one alternative per form
    r"\{\{[^{}\n]{1,60}\}\}"                       # {{Order Number}}
    r"|\[[A-ZÀ-Ý][^\[\]\n]{0,60}\](?!\()"           # [Customer Support Phone Number]
    r"|<(?![/!])[^<>\n@]{1,60}>"                     # <name>, <Your Company Name>
    r"|%[A-Za-z_][\w .-]{0,40}%"                     # %CUSTOMER_NAME%
    r"|\{[A-Za-z_][\w .-]{0,40}\}")                  # {order_id}
_HTML_TAG = re.compile(r"</?(?:br|p|b|i|u|em|strong|div|span|ul|ol|li|a|hr|h[1-6]|tr|td|table)"
                       r"(?:\s[^<>]*)?/?>", re.IGNORECASE)
_LINE_BREAK_TAG = re.compile(r"<br\s*/?>|</?p>", re.IGNORECASE)


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


_OPENS = re.compile(
    r"^\s*(?i:dear|hello|hi|good (?:morning|afternoon|evening)|greetings|sehr geehrte|liebe|"
    r"hallo|guten (?:tag|morgen|abend)|estimad[oa]s?|hola|querid[oa]|buen[oa]s (?:d[íi]as|tardes)|"
    r"bonjour|bonsoir|ch[eè]re?s?|madame|monsieur|caro|cara|prezad[oa]s?|ol[áa]|oi|bom dia|"
    r"boa tarde)\b")
_CLOSES = re.compile(
    r"(?i:regards|sincerely|best wishes|yours|thank you|thanks|cheers|gr[üu][ßs]+e|gr[üu][ßs]+en|"
    r"gru[ßs]|vielen dank|danke|saludos|atentamente|cordialmente|gracias|cordialement|"
    r"salutations|merci|bien [àa] vous|atenciosamente|abra[çc]os|obrigad[oa]|cumprimentos)")


def complete_letter(answer: str, ticket: str, language: str) -> str:
    """``answer`` as a letter: the greeting of ``language`` put first when it opens
    with none (this ticket's customer by name when the ticket's sign-off gives one),
    and its closing put last when none of its last three lines signs off. Reviewers
    send back a reply that starts or stops mid-conversation.

    Args:
        answer: the reply text.
        ticket: the ticket's text (for the customer's name).
        language: the reply's language code (``en``, ``de``, ``es``, ``fr``, ``pt``;
            another falls back to English words).

    Returns:
        the reply, unchanged when it has both.
    """
    words = _TEXT.get(language, _TEXT["en"])
    text = answer.strip()
    if not _OPENS.match(text):
        named, plain = (str(part) for part in words["hello"])  # type: ignore[attr-defined]
        name = signature_name(ticket)
        text = (named.format(name=name) if name else plain) + "\n\n" + text
    tail = [line for line in text.splitlines() if line.strip()][-3:]
    if not any(_CLOSES.search(line) for line in tail):
        text += "\n\n" + str(words["bye"])
    return text


def placeholders(text: str) -> list[str]:
    """Template placeholders left in a text, each once, in any of the common forms
    (``{{Order Number}}``, ``[Customer Support Phone Number]``, ``<tel_num>``,
    ``%NAME%``, ``{order_id}``; an HTML tag such as ``<br>`` is not one): a reply that
    still has them cannot be sent as it is."""
    return list(dict.fromkeys(m.group(0) for m in _PLACEHOLDER.finditer(text)
                              if not _HTML_TAG.fullmatch(m.group(0))))


# what a slot asks for, by the words of its name (any of the five languages): the
# ticket's reference numbers by kind, the customer's name, the customer's e-mail
_SLOT_KINDS = (
    ("order", r"order|bestell|auftrag|pedido|commande|encomenda"),
    ("invoice", r"invoice|rechnung|factura|facture|fatura"),
    ("tracking", r"tracking|sendung|seguimiento|suivi|rastreio"),
    ("account", r"acc(?:oun)?t?_?n|account|kunden|cuenta|compte|conta"),
    ("ticket", r"ticket|case|vorgang|dossier|protocolo|caso"),
    ("reference", r"ref"),
)
_SLOT_NUMBER = re.compile(r"num|nr|no\b|number|id\b|#|nummer|n[úu]mero|code|ref", re.IGNORECASE)
_SLOT_CUSTOMER = re.compile(r"(?:customer|client|kunde|cliente|user)(?:'?s)?[ _]?(?:full[ _]?)?"
                            r"(?:name|nombre|nom|nome)|^(?:full[ _]?)?name$|^nombre$|^nom$|^nome$",
                            re.IGNORECASE)
_SLOT_EMAIL = re.compile(r"(?:customer|client|your|user)?[ _]?e-?mail(?:[ _]address)?$|^correo",
                         re.IGNORECASE)
_REF_KINDS = {"order": "order", "bestellung": "order", "bestellnummer": "order",
              "auftrag": "order", "auftragsnummer": "order", "pedido": "order",
              "commande": "order", "encomenda": "order", "invoice": "invoice",
              "rechnung": "invoice", "rechnungsnummer": "invoice", "factura": "invoice",
              "facture": "invoice", "fatura": "invoice", "tracking": "tracking",
              "sendungsnummer": "tracking", "account": "account", "customer": "account",
              "kundennummer": "account", "contract": "account", "ticket": "ticket",
              "case": "ticket", "vorgang": "ticket", "dossier": "ticket",
              "protocolo": "ticket", "booking": "order"}


def typed_references(text: str) -> dict[str, list[str]]:
    """The reference numbers of ``text`` by kind (``order``, ``invoice``, ``tracking``,
    ``account``, ``ticket``; ``reference`` when the word before it names no kind), each
    once, in order."""
    out: dict[str, list[str]] = {}
    for match in _REFERENCE.finditer(text):
        value = match.group(1)
        if sum(c.isdigit() for c in value) < 3:
            continue
        word = re.match(r"\w+", match.group(0))
        kind = _REF_KINDS.get(word.group(0).lower() if word else "", "reference")
        if value not in out.setdefault(kind, []):
            out[kind].append(value)
    return out


def _slot_value(slot: str, ticket: str, refs: dict[str, list[str]]) -> str | None:
    """What the ticket says for ``slot`` (its name without brackets), or None: a
    reference of the slot's kind when the ticket has exactly one, the customer's name
    from the sign-off, the ticket's only e-mail address."""
    name = slot.strip().lower()
    if _SLOT_CUSTOMER.search(name):
        return signature_name(ticket) or None
    if _SLOT_EMAIL.search(name):
        emails = list(dict.fromkeys(_EMAIL.findall(ticket)))
        return emails[0] if len(emails) == 1 else None
    if not _SLOT_NUMBER.search(name) and "_" not in name:
        return None
    for kind, words in _SLOT_KINDS:
        if re.search(words, name, re.IGNORECASE):
            found = refs.get(kind, [])
            if kind == "reference":     # "reference number": the ticket's only number
                found = [v for values in refs.values() for v in values]
            return found[0] if len(found) == 1 else None
    return None


def fill_placeholders(answer: str, ticket: str) -> tuple[str, list[str]]:
    """``answer`` with its template slots filled from ``ticket`` where it has the value.

    A slot for an order, invoice, tracking, account or ticket number takes the ticket's
    number of that kind when it has exactly one (``{{Order Number}}`` -> ``55-1234``);
    a slot for the customer's name takes the name of the ticket's sign-off, one for the
    customer's e-mail the ticket's only address. Anything else (the company's phone
    number, its website, the agent's name) the ticket cannot supply. HTML line breaks
    (``<br>``) become line breaks.

    Args:
        answer: an example's answer.
        ticket: the ticket it is offered for.

    Returns:
        ``(text, unfilled)``: the answer with what could be filled, and the slots left
        in it (see :func:`placeholders`), each once.
    """
    text = _LINE_BREAK_TAG.sub("\n", answer)
    refs = typed_references(ticket)

    def fill(match: re.Match[str]) -> str:
        slot = match.group(0)
        if _HTML_TAG.fullmatch(slot):
            return slot
        value = _slot_value(slot.strip("{}[]<>%"), ticket, refs)
        return value if value else slot

    text = _PLACEHOLDER.sub(fill, text)
    return text, placeholders(text)


def swap_references(answer: str, example: str, ticket: str) -> str:
    """``answer`` with the example's own reference numbers (an order number the example
    gave, quoted back in its answer) replaced by the ticket's number of the same kind,
    when the ticket has exactly one of that kind; other numbers are left (and flagged
    by :func:`foreign_identifiers`)."""
    theirs = typed_references(example)
    ours = typed_references(ticket)
    for kind, values in theirs.items():
        mine = ours.get(kind, [])
        if len(values) == 1 and len(mine) == 1 and values[0] in answer:
            answer = re.sub(rf"(?<![\w-]){re.escape(values[0])}(?![\w-])", mine[0], answer)
    return answer


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


def borrowed_claims(answer: str) -> list[str]:
    """What a copied answer says that held for its own ticket and nobody has checked
    for this one: that work is under way ("our team is investigating", "estamos
    revisando") or already done ("your request has been processed", "wurde
    bearbeitet"), a page it sends the customer to without giving it ("visit our
    website", "the link below", no address in the answer), a phone call it asks for
    without a number ("call us"). A person must make it true or take it out.

    Args:
        answer: the copied reply text (any of the five languages).

    Returns:
        reasons such as ``"draft says work is under way (estamos revisando)"`` or
        ``"draft points to a page it does not give (visit our website)"`` (empty:
        nothing of the kind).
    """
    out = []
    under_way = UNDER_WAY.search(answer)
    if under_way:
        out.append(f"draft says work is under way ({_said(under_way)})")
    done = ALREADY_DONE.search(answer)
    if done:
        out.append(f"draft says it is already done ({_said(done)})")
    page = UNNAMED_PLACES.search(answer)
    if page and not LINK.search(answer):
        out.append(f"draft points to a page it does not give ({_said(page)})")
    phone = UNNAMED_PHONE.search(answer)
    if phone and not CONTACT_DETAILS.search(answer):
        out.append(f"draft asks for a call without a number ({_said(phone)})")
    return out


def _said(match: re.Match[str]) -> str:
    """The matched words, lower case, clipped to 60 characters for a reason."""
    words = " ".join(match.group(0).lower().split()).rstrip(".!")
    return words if len(words) <= 60 else words[:59].rsplit(" ", 1)[0] + "…"


# -- does the example's request match the ticket's? ------------------------------------

# what a request asks to do, per action, in the five languages (stems; case-insensitive)
_ACTIONS: dict[str, re.Pattern[str]] = {name: re.compile(pattern, re.IGNORECASE)
                                         for name, pattern in {
    "cancel": r"\bcancel\w*|\bstorn\w*|\bk[üu]ndig\w*|\bcancela\w*|\banul(?:ar|e|o|a)\w*|"
              r"\bannul\w*|\br[ée]sili\w*|\bdesist\w*",
    "close": r"\bclos(?:e|ed|ing)\b(?! to\b)|\bdelet\w*|\bdeactivat\w*|\bremove my\b|"
             r"\bschlie[ßs]\w*|\bl[öo]sch\w*|\bdeaktivier\w*|\bcerra\w*|\belimin\w*|\bborra\w*|"
             r"\bdar de baja\b|\bfermer?\b|\bferm(?:ez|ons|é|ée)\b|\bsupprim\w*|\bd[ée]sactiv\w*|"
             r"\bencerra\w*|\bexclu(?:ir|a|am|ído)\b|\bapaga(?:r|e)\b|\bfecha(?:r|e)\b|\bdesativ\w*",
    "create": r"\bcreat(?:e|ing)\b|\bsign(?:ing)? up\b|\bregist(?:er|ering|rieren|rar|rer|ar)\b|"
              r"\bopen(?:ing)? (?:an?|new|my) (?:new )?account\b|\bnew account\b|\banleg\w*|"
              r"\berstell\w*|\bneues konto\b|\bcrear\b|\bnueva cuenta\b|\babrir una cuenta\b|"
              r"\bcr[ée]er\b|\bouvrir un compte\b|\bnouveau compte\b|\bcriar\b|\bcadastr\w*|"
              r"\bnova conta\b|\babrir uma conta\b",
    "upgrade": r"\bupgrad\w*|\bhochstuf\w*|\bmejorar (?:mi|el|la) (?:plan|cuenta|suscripci[óo]n)\b|"
               r"\bpasar al plan\b|\bsurclass\w*|\bmise [àa] niveau\b",
    "downgrade": r"\bdowngrad\w*|\bherabstuf\w*|\brebaj\w* (?:mi|el) plan\b|"
                 r"\bbaixar (?:o|meu) plano\b",
    "switch": r"\bswitch\w*|\bchange (?:my |the )?(?:plan|tier|subscription) to\b|\bwechsel\w*|"
              r"\bumstell\w*|\bcambiar(?:me)? (?:a|de plan)\b|\bchanger (?:de|pour)\b|"
              r"\bpasser [àa]\b|"
              r"\bmudar (?:para|de plano)\b|\btrocar\b",
    "refund": r"\brefund\w*|\bmoney back\b|\berstatt\w*|\bgeld zur[üu]ck\b|\breembols\w*|"
              r"\brembours\w*|\breembolso\b|\bestorn\w*",
    "return": r"\breturn(?:ing)? (?:the|my|an?|this|it)\b|\bexchange\b|"
              r"\bzur[üu]ck(?:send|schick)\w*|"
              r"\bumtausch\w*|\bretoure\w*|\bdevol(?:ver|uci[óo]n)\b|"
              r"\bcambio de (?:producto|art[íi]culo)\b|"
              r"\bretourn\w*|\brenvoy\w*|\b[ée]change\w*|\bdevolu[çc][ãa]o\b|\btroca\b",
    "track": r"\btrack\w*|\bwhere is my (?:order|parcel|package|delivery)\b|\bdelivery date\b|"
             r"\bverfolg\w*|\bwo ist meine? (?:bestellung|paket|lieferung)\b|\brastre\w*|"
             r"\bseguimiento\b|\bd[óo]nde est[áa] mi pedido\b|\bsuivi\b|\bsuivre\b|"
             r"\bo[uù] est (?:ma commande|mon colis)\b|\bonde est[áa] (?:o )?meu\b",
    "reset": r"\breset\w*|\bforgot(?:ten)? (?:my )?password\b|\brecover\w*|\bzur[üu]cksetz\w*|"
             r"\bpasswort vergessen\b|\brestablec\w*|\brecuperar\b|\bolvid[ée] mi contrase[ñn]a\b|"
             r"\br[ée]initialis\w*|\bmot de passe oubli[ée]\b|\bredefini\w*|"
             r"\besqueci a (?:minha )?senha\b",
}.items()}
_ACTION_WORDS = {"cancel": "cancelling", "close": "closing or deleting", "create": "creating",
                 "upgrade": "upgrading", "downgrade": "downgrading", "switch": "switching",
                 "refund": "a refund", "return": "a return or exchange", "track": "tracking",
                 "reset": "resetting a password"}
_ACTION_ASKS = {"cancel": "to cancel", "close": "to close or delete", "create": "to create",
                "upgrade": "to upgrade", "downgrade": "to downgrade", "switch": "to switch",
                "refund": "for a refund", "return": "to return or exchange",
                "track": "where an order is", "reset": "to reset a password"}
# an account tier or plan, per canonical name (its words in the five languages)
_TIERS: dict[str, re.Pattern[str]] = {name: re.compile(pattern, re.IGNORECASE)
                                       for name, pattern in {
    "free": r"\bfree (?:account|plan|tier|version|trial|membership)\b|\bkostenlos\w*|\bgratis\b|"
            r"\bgratuit\w*",
    "paid": r"\bpaid (?:account|plan|tier|version|membership)\b|\bkostenpflichtig\w*|\bde pago\b|"
            r"\bpayant\w*|\bpago\b(?= (?:plan|conta))",
    "basic": r"\bbasic\b|\bbasis\b|\bb[áa]sic[oa]\b|\bbasique\b",
    "standard": r"\bstandard\b|\best[áa]ndar\b|\bpadr[ãa]o\b",
    "premium": r"\bpremium\b",
    "pro": r"\bpro (?:account|plan|tier|version|subscription|membership)\b|"
           r"\b(?:plan|tier|version) pro\b|\b(?:to|the|choose|pick) pro\b(?= plan|[.,!]|$)",
    "plus": r"\bplus (?:account|plan|tier|membership)\b|\b(?:plan|tier) plus\b",
    "business": r"\bbusiness (?:account|plan|tier)\b|\bgesch[äa]ftskonto\b|"
                r"\b(?:to|the|a|my|your|choose|pick) business\b(?! (?:days?|hours?|needs?)\b)|"
                r"\bcuenta (?:de )?empresa\b|"
                r"\bcompte (?:pro|entreprise)\b|\bconta empresarial\b",
    "enterprise": r"\benterprise\b",
    "gold": r"\bgold\b|\boro\b|\bor\b(?= (?:plan|compte))|\bouro\b",
    "silver": r"\bsilver\b|\bsilber\b|\bplata\b|\bargent\b(?= (?:plan|compte))|\bprata\b",
    "platinum": r"\bplatin\w*",
    "family": r"\bfamily (?:account|plan)\b|\bfamilien\w*|\bplan familiar\b|\bplano fam[íi]lia\b",
    "student": r"\bstudent (?:account|plan|discount)\b|\bstudenten\w*|\bestudiante\b|"
               r"\b[ée]tudiant\b",
}.items()}
# a name written in capitals inside a sentence (a product, a brand, a place): "Dell XPS",
# "Surface Pro", "Madrid"; with digits, a model ("9310", "iPhone 14")
_NAMED = re.compile(r"(?<=[a-zà-ÿ,;:] )[A-ZÀ-Ý][\w-]*[A-Za-zÀ-ÿ0-9](?:[ -][A-Z0-9][\w-]*)*"
                    r"|\b[A-Za-z]*\d+[A-Za-z]+\w*\b|\b[A-Za-z]+\d+\w*\b")


def _found(table: dict[str, re.Pattern[str]], text: str) -> list[str]:
    return [name for name, pattern in table.items() if pattern.search(text)]


def _names(text: str, language: str) -> dict[str, str]:
    """The capitalised names and model numbers inside sentences of ``text``: lower case
    word -> the name as written (placeholders left out). German capitalises every noun,
    so there only a word with a digit or a capital inside (``XPS``, ``iPhone``) counts."""
    text = _PLACEHOLDER.sub(" ", text)
    out: dict[str, str] = {}
    for match in _NAMED.finditer(text):
        for word in re.split(r"[ -]+", match.group(0)):
            if len(word) < 2 or (word.isdigit() and (_YEAR.fullmatch(word) or len(word) < 2)):
                continue
            if language == "de" and not (any(c.isdigit() for c in word)
                                         or any(c.isupper() for c in word[1:])):
                continue
            out.setdefault(word.lower(), match.group(0))
    return out


def request_mismatches(example: str, answer: str, ticket: str,
                       language: str = "en") -> list[str]:
    """Why the answer to ``example`` does not answer ``ticket``: they ask for different
    things, or the answer names another account tier, product or place.

    * the action: the ticket asks to cancel, close or delete, create, upgrade, downgrade,
      switch, refund, return, track or reset, and the example asks for another of them
      (or for none, and the answer does not mention it either);
    * the tier: the example or its answer is about an account tier or plan (free, paid,
      premium, gold, business ...) that the ticket does not name, while the ticket names
      another (or, answered in the reply, none);
    * the named things: a product, brand or place (a capitalised name or a model number)
      that the example asks about and its answer repeats, and the ticket never mentions.

    Args:
        example: the example's request (its ticket text).
        answer: the example's answer, as it would be sent.
        ticket: the ticket the answer is offered for.
        language: their language (German nouns are capitalised: not names there).

    Returns:
        reasons naming both sides, such as ``"the example is about upgrading; the ticket
        asks to close or delete"`` (empty: nothing seen that disagrees).
    """
    reasons = []
    theirs, ours = _found(_ACTIONS, example), _found(_ACTIONS, ticket)
    missing = [a for a in ours if a not in theirs
               and not (not theirs and _ACTIONS[a].search(answer))]
    if missing:
        about = (" and ".join(_ACTION_WORDS[a] for a in theirs) if theirs
                 else "something else")
        reasons.append(f"the example is about {about}; the ticket asks "
                       + " and ".join(_ACTION_ASKS[a] for a in missing))
    their_tiers = [t for t in _found(_TIERS, example + "\n" + answer) if t]
    our_tiers = _found(_TIERS, ticket)
    other = [t for t in their_tiers if t not in our_tiers]
    if other and (our_tiers or any(_TIERS[t].search(answer) for t in other)):
        reasons.append(f"the example is about the {'/'.join(other)} tier; the ticket "
                       + (f"is about the {'/'.join(our_tiers)} one" if our_tiers
                          else "names no tier"))
    seen = ticket.lower()
    asked, answered = _names(example, language), _names(answer, language)
    named = list(dict.fromkeys(asked[n] for n in asked if n in answered
                               and not re.search(rf"(?<!\w){re.escape(n)}(?!\w)", seen)))
    if named:
        reasons.append(f"the example is about {', '.join(named[:3])}; the ticket does not "
                       "mention it")
    return reasons


MAX_NEVER_SEND = 10_000
"""Phrases a ``--never-send`` file may list."""


def load_never_send(path: str | Path) -> list[tuple[str, str]]:
    """The phrases of a never-send file: what the team has found wrong in its own
    answers and never wants sent again ("reset the SMC" for a machine that has none),
    one phrase per line, in any language; blank lines and lines starting with ``#`` are
    skipped (a ``#`` later in a line is part of the phrase: "ticket #123").

    Args:
        path: the file (UTF-8 text, a byte-order mark allowed).

    Returns:
        ``[(phrase, "file:line"), ...]`` in the file's order, each phrase in Unicode NFC
        with its whitespace collapsed, a phrase listed again (in any case) left out.

    Raises:
        ConfigurationError: the file cannot be read or is not UTF-8 text, a phrase has
            fewer than 2 characters (one is enough in a script written without spaces,
            such as Chinese), or it has more than :data:`MAX_NEVER_SEND` phrases
            (``file:line``).
    """
    where = Path(path)
    try:
        text = where.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigurationError(f"{where}: a never-send file must be UTF-8 text "
                                 f"(byte {exc.start} is not)") from None
    except OSError as exc:
        raise ConfigurationError(f"{where}: cannot read the never-send file "
                                 f"({exc.strerror or exc})") from None
    phrases: list[tuple[str, str]] = []
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), 1):
        phrase = unicodedata.normalize("NFC", " ".join(line.split()))
        if not phrase or phrase.startswith("#") or phrase.casefold() in seen:
            continue
        if len(phrase) < 2 and not _unspaced(phrase):
            raise ConfigurationError(f"{where}:{number}: {line.strip()!r} is too short to "
                                     "match as a phrase (write the words the drafts must not "
                                     "say, at least 2 characters)")
        if len(phrases) == MAX_NEVER_SEND:
            raise ConfigurationError(f"{where}:{number}: more than {MAX_NEVER_SEND:,} "
                                     "phrases; keep the ones your drafts could say")
        seen.add(phrase.casefold())
        phrases.append((phrase, f"{where.name}:{number}"))
    return phrases


_UNSPACED = ("CJK", "HIRAGANA", "KATAKANA", "THAI", "LAO", "KHMER", "MYANMAR", "TIBETAN")
"""Scripts written without spaces between words: no word boundary to look for."""


def _unspaced(char: str) -> bool:
    return unicodedata.name(char[:1], "").startswith(_UNSPACED)


@functools.lru_cache(maxsize=4096)
def _phrase_pattern(phrase: str) -> re.Pattern[str]:
    words = [re.escape(w) for w in phrase.split()]
    head = r"\b" if re.match(r"\w", phrase) and not _unspaced(phrase[0]) else ""
    tail = r"\b" if re.search(r"\w$", phrase) and not _unspaced(phrase[-1]) else ""
    return re.compile(head + r"\s+".join(words) + tail, re.IGNORECASE)


def never_send(draft: str, phrases: list[tuple[str, str]] | list[list[str]]) -> list[str]:
    """What a draft says that the team listed as never to be sent (:func:`load_never_send`):
    each phrase matched as whole words (within a line of Chinese or Thai, as written),
    whatever the case, the spacing and the Unicode form of accents.

    Args:
        draft: the draft reply.
        phrases: ``[(phrase, where), ...]`` (``where``: ``file:line``).

    Returns:
        one reason naming every phrase found, such as ``"draft says what the team marked
        never to send: 'reset the SMC' (never.txt:3), 'PRAM' (never.txt:4)"``; empty
        when it says none.
    """
    if not phrases:
        return []
    text = unicodedata.normalize("NFC", draft)
    found = [f"{phrase!r} ({where})" for phrase, where in phrases
             if _phrase_pattern(phrase).search(text)]
    return [f"draft says what the team marked never to send: {', '.join(found)}"] if found else []


def informal_reply(answer: str, ticket: str, language: str) -> list[str]:
    """Whether a copied answer speaks to the customer with the familiar "you" (tú, du,
    tu) when the customer did not write so: the example's customer may have, this one
    did not, and a support reply is formal unless the customer set the tone.

    Args:
        answer: the reply text.
        ticket: the ticket's text (subject and body).
        language: the reply's language code (``es``, ``de``, ``fr``, ``pt``; English
            has one "you": nothing to check).

    Returns:
        ``["draft speaks informally ('tu'), as the customer did not"]`` or empty.
    """
    pattern = INFORMAL.get(language)
    if pattern is None:
        return []
    found = pattern.search(answer)
    if found is None or pattern.search(ticket):
        return []
    return [f"draft speaks informally ({found.group(0).lower()!r}), as the customer did not"]


def loose_ends(answer: str, ticket: str) -> list[str]:
    """What a reply leaves for the customer to chase, as support leads reviewing
    drafts sent back: steps the customer says they already tried, an ending that sends
    them back to us with nothing to send ("please contact support": they did), a
    hand-off to someone else with no way to reach them ("contact Adobe Support", "a
    DBA"), and a few lines for a ticket that asks for instructions or requirements.

    Args:
        answer: the reply text (any of the five languages).
        ticket: the ticket's text (subject and body).

    Returns:
        reasons such as ``"draft suggests what the customer already tried (drivers:
        'i have attempted troubleshooting the graphics drivers')"`` (empty: none).
    """
    out = []
    tried = _tried_steps(ticket)
    if tried:
        for sentence in re.split(r"(?<=[.!?])\s+|\n+", answer):
            if ACKNOWLEDGED.search(sentence):
                continue
            again = [step for step in tried[0] if STEPS[step].search(sentence)]
            if again:
                out.append(f"draft suggests what the customer already tried "
                           f"({', '.join(again)}: {tried[1]!r})")
                break
    back = BACK_TO_US.search(answer)
    if back:
        out.append(f"draft sends the customer back to us with nothing to send ({_said(back)})")
    handoff = HANDOFF.search(answer)
    if handoff and not LINK.search(answer) and not CONTACT_DETAILS.search(answer):
        out.append(f"draft hands the customer to someone else without saying how to reach "
                   f"them ({_said(handoff)})")
    asks = ASKS_FOR_STEPS.search(ticket)
    if asks and len(STEP_LINE.findall(answer)) < 3 and _advice_sentences(answer) < 4:
        out.append(f"the ticket asks for {_said(asks)!r}; the draft gives a few lines")
    return out


def _tried_steps(ticket: str) -> tuple[list[str], str] | None:
    """The first-line steps (``restart``, ``drivers`` …, keys of ``STEPS``) the ticket
    says were tried, with the words that say so; ``None`` when it says none."""
    for match in TRIED.finditer(ticket):
        rest = ticket[match.start():]
        end = CLAUSE_END.search(rest, match.end() - match.start())
        clause = rest[:end.start() if end else 200]
        steps = [step for step, pattern in STEPS.items() if pattern.search(clause)]
        if not steps and BASIC_TRIED.search(clause):
            steps = ["restart", "reset", "reinstall", "cache"]
        if steps:
            return steps, " ".join(clause.lower().split()).rstrip(",: ")[:80]
    return None


def _advice_sentences(answer: str) -> int:
    """How many sentences of ``answer`` say something: four words or more, not the
    greeting, thanks, an apology, an offer of more help or the sign-off."""
    small_talk = re.compile(
        r"^(?:hello|hi|dear|thank|sorry|we(?:'re| are) sorry|we understand|best|kind|regards|"
        r"sincerely|if you (?:need|have|require)|let us know|please let us know|feel free|"
        r"guten tag|hallo|vielen dank|danke|es tut uns leid|mit freundlichen|wenn sie weitere|"
        r"hola|gracias|lamentamos|saludos|si necesita|bonjour|merci|nous sommes d[ée]sol|"
        r"cordialement|si vous avez besoin|ol[áa]|obrigad|lamentamos|atenciosamente|se precisar)",
        re.IGNORECASE)
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", answer) if s.strip()]
    return sum(1 for s in sentences if len(s.split()) >= 4 and not small_talk.match(s))
