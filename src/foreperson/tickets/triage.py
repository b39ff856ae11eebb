"""Triage: what in a ticket needs a human, and what in a draft must not be sent unread.

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

Draft promises (:func:`draft_promises`): a draft that promises money (a refund, a
credit), a time ("within 5 business days", "tomorrow"), contact (a call, a visit) or
announces an outage must be read by a person before it is sent.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["SIGNALS", "Signal", "draft_promises", "ticket_signals"]

SIGNALS = ("outage", "security", "legal", "angry customer", "asks for a person")
"""The ticket signals, in the order their reasons are listed."""

_I = re.IGNORECASE


def _any(*patterns: str, flags: int = _I) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns), flags)


_DOWN_SUBJECTS = (r"(?:servers?|site|website|web ?site|service|services|system|systems|"
                  r"platform|api|app|application|portal|network|dashboard|checkout|"
                  r"login|database|cloud|everything|production|email|e-mail)")

_OUTAGE = {
    "en": _any(r"\boutages?\b", r"\bdown ?time\b",
               r"(?<!price )(?<!prices )(?<!cost )(?<!costs )(?<!rate )"
               r"\b(?:went|goes|go|going|is|are|was|were|been|be) down\b",
               rf"\b{_DOWN_SUBJECTS}(?: \w+)? (?:is|are|was|were|has been|have been|keeps? going) "
               r"(?:completely |totally |still |all )?(?:down|offline|unreachable|unavailable)",
               rf"\b{_DOWN_SUBJECTS} down\b", r"\bnot (?:reachable|available) (?:at all|for (?:anyone|everyone|all))",
               r"\bunreachable\b", r"\bservice unavailable\b", r"\b50[23] errors?\b",
               r"\bdown for (?:everyone|all|us|our)\b",
               r"\bservice (?:disruption|interruption)s?\b", r"\bno (?:internet|connection|signal|service)\b",
               r"\binternet (?:has been |is |was )?(?:dead|out|down)\b", r"\bwhole (?:street|area|building|office) is out\b",
               rf"\b(?:can(?:no|')t|cannot|unable to) (?:reach|access|open|load) (?:your|the)(?: \w+)? "
               rf"{_DOWN_SUBJECTS}(?: \w+)? at all\b"),
    "de": _any(r"\w*ausf[äa]ll\w*", r"\bausgefallen\b",
               r"\bnicht (?:mehr )?erreichbar\b",
               r"\b(?:netz|server|dienst|service|system|internet|strom)st[öo]rung\w*",
               r"\bst[öo]rung(?:en)? (?:des|der|im|beim|bei|am) (?:dienst\w*|server\w*|netz\w*|service|system\w*|"
               r"internet|portal\w*|plattform)", r"\b(?:gro[ßs]fl[äa]chige|allgemeine|bekannte) st[öo]rung\b",
               r"\bgibt es (?:gerade |aktuell |derzeit |momentan )?(?:wieder )?eine st[öo]rung\b",
               r"\bst[öo]rung (?:beim|bei der) (?:login|anmeldung)\b", r"\bst[öo]rung f[üu]r alle\b",
               r"\bserver (?:ist |sind )?down\b",
               r"\b(?:komplett|völlig|total) (?:down|offline)\b", r"\bnichts (?:lädt|geht) mehr\b",
               r"\bkein (?:internet|netz|empfang)\b", r"\b(?:dienst|service)unterbrechung\w*",
               r"\bnicht (?:mehr )?auf (?:den|die|das|unseren|unsere|unser) (?:server|system|plattform|portal|"
               r"dienst|datenbank)\w* zugreifen\b", r"\b(?:server|seite|webseite|app|portal|dienst|system|netz) "
               r"(?:ist |sind )?(?:down|offline|tot)\b"),
    "es": _any(r"\bca[íi]d[oa]s?\b(?! de (?:precios?|ventas|la demanda))", r"\bse (?:ha )?ca[íi]do\b", r"\bfuera de servicio\b",
               r"\bservicio no disponible\b", r"\bsin (?:internet|conexi[oó]n|se[ñn]al|l[íi]nea)\b",
               r"\b(?:servidor|sistema|plataforma|web|p[áa]gina|app|aplicaci[oó]n)(?: de \w+)? no responde\b", r"\b(?:servidor(?:es)?|sistema|plataforma|web|p[áa]gina|app) "
               r"(?:est[áa] |est[áa]n )?(?:ca[íi]d[oa]s?|inaccesible|fuera de l[íi]nea)\b",
               r"\binterrupci[oó]n(?:es)? (?:del? |en el |en la )?(?:servicio|red|sistema|servidor|conexi[oó]n|"
               r"internet|plataforma)", r"\binterrupci[oó]n (?:cr[íi]tica|general|total)\b", r"\bsin servicio\b", r"\bno (?:est[áa] )?disponible para nadie\b",
               r"\bno funciona para nadie\b"),
    "fr": _any(r"\bpannes? (?:g[ée]n[ée]rales?|de (?:service|serveur|r[ée]seau|syst[èe]me))\b",
               r"\b(?:serveurs?|site|service|plateforme|syst[èe]me|r[ée]seau) (?:est |sont )?en panne\b",
               r"\bhors service\b", r"\binterruptions? (?:de|du) service\b", r"\bindisponibles?\b",
               r"\bne r[ée]pond plus\b", r"\bcoupures? (?:(?:de|du|d') ?(?:courant|service|r[ée]seau|internet|connexion|"
               r"[ée]lectricit[ée])|g[ée]n[ée]rales?)\b", r"\binaccessibles?\b", r"\bhors ligne\b", r"\ben rade\b",
               r"\bpannes? (?:intermittentes?|fr[ée]quentes?|r[ée]p[ée]t[ée]es?)\b",
               r"\binterruptions? (?:inattendues?|du serveur|de serveur|du r[ée]seau)\b",
               r"\binternet coup[ée]\b", r"\bne (?:marche|fonctionne) plus du tout\b", r"\bplus d'internet\b",
               r"\b(?:serveurs?|site|service|plateforme|syst[èe]me|r[ée]seau|appli\w*) (?:est |sont )?"
               r"(?:tomb[ée]e?s?|plant[ée]e?s?)\b"),
    "pt": _any(r"\bfora do ar\b", r"\binterrup[çc](?:ão|ões) (?:d[oa]s? |de |no |na )?(?:servi[çc]o|rede|sistema|servidor|conex[ãa]o|internet|plataforma)",
               r"\binterrup[çc][ãa]o (?:cr[íi]tica|geral|total)\b", r"\bindispon[íi]ve(?:l|is)\b",
               r"\bqueda (?:do|dos|de) (?:servi[çc]o|sistema|servidor)",
               r"\b(?:servidor(?:es)?|sistema|site|servi[çc]o|plataforma|app|aplicativo|aplica[çc][ãa]o|rede)"
               r"(?: \w+){0,2} (?:caiu|ca[íi]ram|est[áa] (?:em baixo|fora|inacess[íi]vel|indispon[íi]vel)|"
               r"n[ãa]o est[áa] dispon[íi]vel)\b", r"\bsem (?:internet|sinal|conex[ãa]o|rede)\b",
               r"\bfora de servi[çc]o\b"),
}

_SECURITY = {
    "en": _any(r"\bhack(?:ed|er|ers|ing)?\b", r"\bbreach(?:ed|es)?\b", r"\bphishing\b",
               r"\bmalware\b", r"\bransomware\b", r"\bunauthori[sz]ed\b", r"\bdata leak\w*",
               r"\bstolen\b", r"\bfraud\w*", r"\bcompromised\b", r"\bidentity theft\b",
               r"\baccount takeover\b", r"\bsuspicious (?:log ?ins?|sign[- ]?ins?|activity|access)\b",
               r"\bsomeone (?:has )?(?:logged|signed|got|broke) in(?:to)?\b",
               r"\b(?:log ?ins?|sign[- ]?ins?) from (?:another|a different|an unknown|a foreign|other) "
               r"(?:country|location|device|ip)\b",
               r"\bvulnerabilit(?:y|ies)\b", r"\bsecurity (?:incident|breach|issue|flaw|hole)\b",
               r"\b(?:charges?|payments?|purchases?|transactions?|orders?) (?:that )?i (?:never|didn'?t|did not) "
               r"(?:make|made|authori[sz]e|place|recogni[sz]e)", r"\bleak(?:ed|s)?\b",
               r"\bcloned\b", r"\bis (?:this|it|that) (?:a )?scam\b",
               r"\b(?:charges?|payments?|purchases?|transactions?)\b(?: \S+){0,5} (?:that )?i (?:never|didn'?t|did not) "
               r"(?:make|made|authori[sz]e|place|recogni[sz]e)", r"\b(?:weird|strange|unusual|unknown) log ?in\b",
               r"\b(?:steal|stole|stolen) (?:my )?(?:password|card|identity|data)\b", r"\bsomeone (?:got|get|has got|has gotten) (?:into|access)\b"),
    "de": _any(r"\bgehackt\b", r"\bhacker\w*", r"\bunbefugt\w*", r"\bdatenleck\w*",
               r"\bdatenpanne\w*", r"\bsicherheitsl[üu]cke\w*", r"\bphishing\w*", r"\bbetrug\w*",
               r"\bbetr[üu]ger\w*", r"\bkompromittiert\b", r"\bverd[äa]chtige (?:anmeld\w*|zugriff\w*|aktivit\w*)",
               r"\bschadsoftware\b", r"\bmalware\b", r"\bidentit[äa]tsdiebstahl\b", r"\bgestohlen\b",
               r"\bgeleakt\b", r"\bleak\b", r"\bjemand hat sich\b.{0,60}\b(?:eingeloggt|angemeldet)\b",
               r"\bnie (?:autorisiert|get[äa]tigt|bestellt|freigegeben)\b", r"\bnicht (?:autorisiert|von mir)\b",
               r"\bgeklont\b", r"\bgeklaut\b", r"\banmeldeversuch\w*"),
    "es": _any(r"\bhacke(?:ad[oa]s?|o|r|aron)\b", r"\bacceso no autorizado\b", r"\bno autorizad[oa]s?\b",
               r"\bviolaci[oó]n de (?:datos|seguridad)\b", r"\bbrecha de (?:seguridad|datos)\b",
               r"\bfraude\w*", r"\bphishing\b", r"\bmalware\b", r"\bcomprometid[oa]s?\b",
               r"\brobo de (?:identidad|datos|cuenta)\b", r"\bvulnerabilidad(?:es)?\b",
               r"\bfuga de datos\b", r"\brobad[oa]s?\b", r"\brobaron\b", r"\bfiltraci[oó]n\w*",
               r"\balguien (?:entr[óo]|ha entrado|accedi[óo]|ha accedido) (?:a|en) mi cuenta\b",
               r"\b(?:cargos?|cobros?|compras?|pagos?) (?:\w+ ){0,5}que no (?:reconozco|hice|autoric[ée])\b",
               r"\bclonad[oa]s?\b", r"\bes (?:una )?estafa\?", r"\benlace (?:falso|sospechoso|raro)\b",
               r"\bparece falso\b", r"\bsuplantaci[oó]n\b", r"\bclonaron\b", r"\bse filtraron\b",
               r"\b(?:cargos?|cobros?|compras?|pagos?) (?:\w+ ){0,5}que (?:yo )?nunca (?:hice|autoric[ée])\b",
               r"\bme hicieron una estafa\b", r"\balguien compr[óo] con mi (?:cuenta|tarjeta)\b"),
    "fr": _any(r"\bpirat[ée]e?s?\b", r"\bpiratage\b", r"\bfuite de donn[ée]es\b",
               r"\bacc[èe]s non autoris[ée]\b", r"\bnon autoris[ée]e?s?\b", r"\bhame[çc]onnage\b",
               r"\bphishing\b", r"\bfraude\w*", r"\bmalware\b", r"\blogiciel malveillant\b",
               r"\bviolation de (?:donn[ée]es|s[ée]curit[ée])\b", r"\bfaille de s[ée]curit[ée]\b",
               r"\busurpation d'identit[ée]\b", r"\bvol[ée]e?s? (?:de|mes|mon|ma)\b",
               r"\bquelqu'un (?:s'est connect[ée]|a acc[ée]d[ée]|est entr[ée]) (?:[àa]|sur|dans) mon compte\b",
               r"\b(?:que je n'ai|que j'ai) (?:jamais|pas) (?:autoris[ée]|fait|effectu[ée]|command[ée])e?s?\b",
               r"\bclon[ée]e?\b", r"\bune arnaque\s*\?", r"\blien (?:suspect|bizarre|frauduleux)\b"),
    "pt": _any(r"\bhackead[oa]s?\b", r"\bhacker\w*", r"\bn[ãa]o autorizad[oa]s?\b",
               r"\bvazamento\w*", r"\bfraude\w*", r"\bphishing\b", r"\bmalware\b",
               r"\bviola[çc][ãa]o de (?:dados|seguran[çc]a)\b", r"\bcomprometid[oa]s?\b",
               r"\binvadid[oa]s?\b", r"\bsem (?:a )?minha autoriza[çc][ãa]o\b",
               r"\broubo de (?:identidade|dados|conta)\b", r"\bfalha de seguran[çc]a\b",
               r"\binvadi(?:ram|u)\b", r"\bclonad[oa]s?\b", r"\bclonaram\b", r"\b[ée] (?:um )?golpe\s*\?",
               r"\balgu[ée]m (?:entrou|acessou|invadiu) (?:na|a) minha conta\b", r"\bvazaram\b",
               r"\broubaram (?:minha|meu|meus|minhas)\b", r"\bacesso estranho\b", r"\bgolpista\w*",
               r"\b(?:compras?|cobran[çc]as?|pagamentos?|d[ée]bitos?) (?:\w+ ){0,5}que (?:eu )?n[ãa]o "
               r"(?:fiz|reconhe[çc]o|autorizei)\b", r"\blink (?:estranho|suspeito|falso)\b"),
}

_LEGAL = {
    "en": _any(r"\blawyers?\b", r"\battorneys?\b", r"\blawsuits?\b", r"\blegal (?:action|steps|proceedings)\b",
               r"\bsmall[- ]claims\b", r"\b(?:take|taking|see) (?:you|them|this|the matter) to court\b",
               r"\bcourt (?:order|case|action)\b", r"\bclass action\b",
               r"\b(?:report|complain\w*) (?:you )?to the (?:regulator|ombudsman|authorities|data protection authority)\b",
               r"\bconsumer protection (?:agency|office|authority)\b",
               r"\b(?:complaint|complain) (?:with|to) the (?:fcc|ftc|cfpb|bbb|better business bureau|ombudsman|regulator)\b"),
    "de": _any(r"\banw[äa]lt\w*", r"\brechtsanw[äa]lt\w*", r"\bklage\b", r"\bverklagen\b",
               r"\bverklage\b", r"\bgericht\w*", r"\brechtliche schritte\b", r"\bjuristische schritte\b",
               r"\bverbraucherzentrale\b", r"\babmahnung\b", r"\bbundesnetzagentur\b",
               r"\bschlichtungsstelle\b"),
    "es": _any(r"\babogad[oa]s?\b", r"\bdemanda judicial\b",
               r"\b(?:presentar[ée]?|presentaremos|interponer|interpondr[ée]|pondr[ée]) (?:una )?demanda\b",
               r"\bdemandar(?:[ée]|emos|les|los)?\b", r"\bacciones? legal(?:es)?\b",
               r"\bmedidas legales\b", r"\btribunal(?:es)?\b", r"\bdenuncia\w*",
               r"\breclamaci[oó]n (?:en|ante) (?:la omic|consumo|la oficina del consumidor)\b",
               r"\b(?:omic|facua|ocu|profeco|sernac)\b", r"\bno se (?:queda|va a quedar) as[íi]\b"),
    "fr": _any(r"\bavocats?\b", r"\bpoursuites? (?:judiciaires?|en justice)\b", r"\baction en justice\b",
               r"\bporter plainte\b", r"\bd[ée]poser (?:une )?plainte\b", r"\btribunal\b",
               r"\bmise en demeure\b", r"\bmesures? l[ée]gales?\b", r"\bdgccrf\b",
               r"\bservice juridique\b", r"\bune action en justice\b", r"\b60 millions de consommateurs\b",
               r"\bassociation de consommateurs\b"),
    "pt": _any(r"\badvogad[oa]s?\b", r"\bprocesso judicial\b", r"\ba[çc][ãa]o judicial\b",
               r"\b(?:vou|vamos|irei|iremos) processar\b", r"\bprocessar (?:voc[êe]s|a empresa)\b",
               r"\bprocessarei\b", r"\bprocessaremos\b",
               r"\bmedidas (?:legais|judiciais)\b", r"\btribuna(?:l|is)\b",
               r"\bprocon\b", r"\bjusti[çc]a\b", r"\b(?:nosso|meu) jur[íi]dico\b", r"\ba[çc][ãa]o (?:judicial|legal|por)\b"),
}
# "sue" in lower case (or shouted), with what makes it a threat: never the name "Sue"
_SUE = re.compile(r"\b(?:will|going to|gonna|shall|to|could|may|might|would|we'll|i'll|and) "
                  r"(?:sue|SUE)\b|\b(?:sue|SUE) (?:you|your|them|the company|for)\b")

_ANGRY = {
    "en": _any(r"\bunacceptable\b", r"\bridiculous\b", r"\bfurious\b", r"\boutrageous\b",
               r"\bworst\b", r"\bdisgusting\b", r"\bfed up\b", r"\bpathetic\b",
               r"\bincompetent\b", r"\bscam\b", r"\bdisgrace\w*", r"\bfurious\b",
               r"\bsick and tired\b", r"\bshame on you\b", r"\bnever again\b", r"\bangry\b",
               r"\bterrible service\b", r"\bhorrible\b", r"\babsolute(?:ly)? (?:joke|useless)\b",
               r"\b(?:oh )?(?:great|wonderful|fantastic|brilliant|perfect), (?:another|yet another|again)\b",
               r"\breally impressive work\b", r"\bwhat a joke\b", r"\byou(?:'re| are) a joke\b",
               r"\b(?:absolute |complete |total )?garbage\b", r"\bunbelievable\b", r"\byou people are useless\b",
               r"\bgreat job,? guys\b"),
    "de": _any(r"\bfrechheit\b", r"\binakzeptabel\b", r"\bunversch[äa]mt\w*", r"\bskandal\w*",
               r"\b(?:das|sie|ihr|es) (?:ist|sind|seid) (?:ja |doch |einfach |wirklich )?unm[öo]glich\b", r"\bsauer\b", r"\bw[üu]tend\b", r"\bzumutung\b",
               r"\bl[äa]cherlich\b", r"\bstinksauer\b", r"\bsehr entt[äa]uscht\b", r"\bna (?:super|toll|klasse),",
               r"\bdanke f[üu]r nix\b", r"\bweiter so\.", r"\bwirklich gro[ßs]artig wie\b",
               r"\btoll, wie\b", r"\binkompetent\w*"),
    "es": _any(r"\binaceptable\b", r"\bvergonzos[oa]\b", r"\bindignad[oa]\b", r"\bfuriose?[oa]?\b",
               r"\bharto\b", r"\bharta\b", r"\b(?:es|esto es|son) una estafa\b", r"\bestafadores\b", r"\bp[ée]sim[oa]\b", r"\brid[íi]cul[oa]\b",
               r"\bes una verg[üu]enza\b", r"\bincompetentes?\b",
               r"\bqu[ée] (?:maravilla|bien|genial), (?:otra vez|otro|otra)\b", r"\bse nota que les importan\b",
               r"\bgenial, otra vez\b", r"\besto es una burla\b", r"\bque buen servicio, de verdad\b",
               r"\bque verg[üu]enza\b"),
    "fr": _any(r"\binadmissible\b", r"\binacceptable\b", r"\bscandaleu(?:x|se)\b", r"\bhonteu(?:x|se)\b",
               r"\bfurieu(?:x|se)\b", r"\bras le bol\b", r"\bridicule\b", r"\barnaque\b",
               r"\bc'est une honte\b", r"\bexasp[ée]r[ée]e?\b", r"\bincomp[ée]tents?\b",
               r"\bbravo, (?:encore|une fois de plus)\b", r"\bvous vous moquez de moi\b",
               r"\bquel professionnalisme\b"),
    "pt": _any(r"\binaceit[áa]vel\b", r"\babsurdo\b", r"\bvergonha\b", r"\bfurios[oa]\b",
               r"\brid[íi]cul[oa]\b", r"\bp[ée]ssim[oa]\b", r"\bcansad[oa] de\b",
               r"\bindignad[oa]\b", r"\brevoltad[oa]\b", r"\buma piada\b", r"\bum golpe\b(?!\s*\?)", r"\bincompetentes?\b",
               r"\bparab[ée]ns, mais (?:uma|um) vez\b", r"\bparab[ée]ns, mais uma\b", r"\bfart[oa] dis(?:to|so)\b",
               r"\bservi[çc]o de primeira, h[ea]in\b"),
}
# milder negative words: together with shouting or "!!!" they make anger
_NEGATIVE = {
    "en": _any(r"\bnot\b", r"\bno\b", r"\bnever\b", r"\bnothing\b", r"\bnobody\b", r"\bno one\b",
               r"\w+n't\b", r"\bcannot\b", r"\bbroken\b", r"\bwrong\b", r"\bfail\w*", r"\berrors?\b",
               r"\bstill\b", r"\bagain\b", r"\bbad\b", r"\bwaste\w*", r"\bworst\b", r"\bangry\b",
               r"\bdown\b", r"\blosing\b", r"\blost\b", r"\bwhy\b", r"\bwaiting\b", r"\bcharged\b"),
    "de": _any(r"\bnicht\b", r"\bnichts\b", r"\bkein\w*", r"\bnie\b", r"\bniemand\b",
               r"\bimmer noch\b", r"\bschon wieder\b", r"\bkaputt\b", r"\bfalsch\b", r"\bfehler\w*",
               r"\bwarum\b"),
    "es": _any(r"\bno\b", r"\bnada\b", r"\bnadie\b", r"\bnunca\b", r"\btodav[íi]a\b",
               r"\botra vez\b", r"\berror\w*", r"\bmal\b", r"\bpor qu[ée]\b"),
    "fr": _any(r"\bne\b", r"\bn'", r"\bpas\b", r"\brien\b", r"\bjamais\b", r"\btoujours pas\b",
               r"\bencore\b", r"\berreurs?\b", r"\bpourquoi\b"),
    "pt": _any(r"\bn[ãa]o\b", r"\bnada\b", r"\bningu[ée]m\b", r"\bnunca\b", r"\bainda\b",
               r"\bde novo\b", r"\berros?\b", r"\bpor que\b"),
}

_PERSON = {
    "en": _any(r"\b(?:talk|speak|chat) (?:to|with) (?:a|an|your|some|the)? ?(?:real )?(?:person|human|"
               r"manager|supervisor|agent|representative|someone|somebody|people)\b",
               r"\breal (?:person|human)\b", r"\bhuman (?:agent|being|support)\b",
               r"\b(?:call|phone|ring) me(?: back)?\b", r"\b(?:a|your) call ?back\b",
               r"\bescalate\b", r"\b(?:not|no) (?:a )?(?:bot|robot|chatbot|automated (?:reply|answer))\b",
               r"\bgive me a call\b", r"\b(?:actual|live) (?:human|person|agent)\b",
               r"\bsomeone (?:to )?(?:call|phone|ring)(?:ed|s)? me\b", r"\b(?:can|could) (?:a|your) (?:supervisor|manager)\b",
               r"\b(?:your|a) (?:supervisor|manager|boss)\b", r"\bput me through to\b"),
    "de": _any(r"\bmit einem (?:menschen|mitarbeiter|vorgesetzten|verantwortlichen)\b",
               r"\bpers[öo]nlich sprechen\b", r"\bvorgesetzt\w*", r"\br[üu]ckruf\b",
               r"\brufen sie (?:mich|uns)\b", r"\bechte[nrm]? (?:mensch|person)\w*", r"\bkein(?:en)? bot\b",
               r"\bzur[üu]ckrufen\b", r"\beinen menschen\b", r"\bam telefon\b", r"\bruft (?:mich|uns) an\b",
               r"\b(?:ihren|ihrem|einen|einem|euren|eurem) (?:chef|vorgesetzten)\b",
               r"\btelefonisch kontaktieren\b"),
    "es": _any(r"\bhablar con (?:una persona|un agente|un humano|alguien|un supervisor|un responsable|"
               r"un encargado|el encargado|el responsable|un ser humano)\b",
               r"\bll[áa]menme\b", r"\bme (?:llamen|llame)\b", r"\bpersona real\b",
               r"\b(?:una|por) llamada\b(?! de (?:zoom|teams|video|skype|meet))", r"\bllamada telef[óo]nica\b",
               r"\bp[áa]s(?:en|e)me con\b", r"\bpasar con una persona\b", r"\bpersona de verdad\b", r"\b(?:el|un|su) (?:encargado|supervisor|jefe|responsable)\b"),
    "fr": _any(r"\bparler (?:[àa]|avec) (?:une personne|un humain|quelqu'un|un conseiller|un responsable|"
               r"un (?:vrai )?interlocuteur|un superviseur)\b",
               r"\brappelez[- ]moi\b", r"\b[êe]tre rappel[ée]e?\b", r"\bme rappeler\b",
               r"\bpersonne r[ée]elle\b", r"\bappelez[- ]moi\b", r"\bqu'(?:on|un \w+|une \w+|quelqu'un) m'appelle\b",  # not "je m'appelle"
               r"\bm'appeler\b",
               r"\bau t[ée]l[ée]phone\b", r"\b(?:votre|un) (?:sup[ée]rieur|responsable|manager)\b"),
    "pt": _any(r"\bfalar com (?:uma pessoa|um atendente|um humano|algu[ée]m|um supervisor|o gerente|"
               r"um gerente|um respons[áa]vel)\b", r"\bme liguem?\b", r"\bpessoa real\b",
               r"\b(?:uma|por) liga[çc][ãa]o\b(?! (?:ao|de|do|com o) (?:servidor|rede|internet))",
               r"\bretorno por telefone\b", r"\b(?:o )?vosso (?:gerente|supervisor|respons[áa]vel)\b", r"\b(?:podem|pode|possam) me ligar\b",
               r"\bpor telefone\b", r"\bme ligar\b", r"\b(?:o|um|seu) (?:gerente|supervisor|respons[áa]vel)\b"),
}


# what cancels a signal just before it ("there is no outage", "I was not hacked", "kein
# Ausfall", "ce n'est pas une fraude"), with at most two words in between; a break in the
# clause (punctuation, "but") ends its reach, and "so" / "more" make it stronger instead
# ("never been so angry")
_NEGATORS = {
    "en": r"no need (?:to|for)|no one|nobody|nothing|no|not|never|without|nor|cannot|"
          r"\w+n[’']t",
    "de": r"nicht|kein\w*|nie|niemals|niemand|nichts|ohne",
    "es": r"no (?:hace falta|es necesario|necesito|quiero)(?: que)?|no|ning[uú]n\w*|nunca|nadie|"
          r"nada|sin|tampoco",
    "fr": r"pas besoin (?:de|d'|qu'on|que)|inutile de|pas|aucun\w*|jamais|sans|ni",
    "pt": r"n[ãa]o (?:precis[ao]m?|[ée] necess[áa]rio|quero)(?: que)?|n[ãa]o|nenhum\w*|nunca|"
          r"ningu[ée]m|nada|sem|nem",
}
_CLAUSE_BREAK = re.compile(r"[.,;:!?\n]|\b(?:but|aber|pero|mais|mas|however|sondern)\b", _I)
_STRONGER = re.compile(r"\b(?:so|more|this|that|ever|as|such|too|so\s+much)\b", _I)
_NEGATED = {lang: re.compile(rf"\b(?:{neg})\b((?:\s+[\w'’-]+){{0,2}})\s*$", _I)
            for lang, neg in _NEGATORS.items()}


def _negated(text: str, start: int, languages: Iterable[str]) -> bool:
    """Whether the words just before ``start`` cancel what follows (see _NEGATORS)."""
    before = text[max(0, start - 80):start]
    breaks = list(_CLAUSE_BREAK.finditer(before))
    if breaks:
        before = before[breaks[-1].end():]
    for lang in languages:
        match = _NEGATED[lang].search(before) if lang in _NEGATED else None
        if match and not _STRONGER.search(match.group(1)):
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


# "I'm not reachable tomorrow", "ich bin tagsüber nicht erreichbar": the customer is
# unavailable, not the service
_AVAILABILITY = re.compile(r"unreachable|unavailable|not (?:reachable|available)|erreichbar|"
                           r"indisponi|no disponible|inaccessible|inacess", _I)
_FIRST_PERSON_BE = re.compile(r"\b(?:i am|i'm|i will be|i'll be|ich bin|bin ich|wir sind|je suis|"
                              r"je serai|estoy|estar[ée]|estou|estarei)\b", _I)


def _about_the_customer(text: str, match: re.Match[str]) -> bool:
    if not _AVAILABILITY.search(match.group(0)):
        return False
    before = text[max(0, match.start() - 60):match.start()]
    breaks = list(_CLAUSE_BREAK.finditer(before))
    return bool(_FIRST_PERSON_BE.search(before[breaks[-1].end():] if breaks else before))


def _first(patterns: dict[str, re.Pattern[str]], text: str, languages: list[str], *,
           negatable: bool = True,
           exclude: Callable[[str, re.Match[str]], bool] | None = None) -> str:
    """The first match (as evidence) of the patterns of ``languages`` that is not
    negated (``negatable``) nor excluded (``exclude(text, match)``), or ""."""
    for lang in languages:
        pattern = patterns.get(lang)
        for match in pattern.finditer(text) if pattern is not None else ():
            if negatable and _negated(text, match.start(), languages):
                continue
            if exclude is not None and exclude(text, match):
                continue
            return " ".join(match.group(0).lower().split())
    return ""


def _shouting(text: str) -> bool:
    words = re.findall(r"[^\W\d_]{4,}", text)
    loud = [w for w in words if w.isupper()]
    return len(loud) >= 3 and len(loud) >= 0.3 * len(words)


def _anger(text: str, languages: list[str]) -> str:
    word = _first(_ANGRY, text, languages)
    if word:
        return word
    loud = _shouting(text)
    exclaimed = text.count("!") >= 3
    if (loud or exclaimed) and _first(_NEGATIVE, text, languages, negatable=False):
        return "shouting" if loud else "exclamation marks"
    return ""


def ticket_signals(text: str, language: str = "en") -> list[Signal]:
    """Every signal in a ticket, in the order of :data:`SIGNALS`.

    Args:
        text: the ticket (subject and body).
        language: its language (a code of :data:`~foreperson.tickets.language.LANGUAGES`);
            that language's patterns and the English ones are applied.

    Returns:
        the signals found (empty: nothing needs a human).
    """
    languages = _tables(language)
    found = []
    outage = _first(_OUTAGE, text, languages, exclude=_about_the_customer)
    if outage:
        found.append(Signal("outage", outage))
    security = _first(_SECURITY, text, languages)
    if security:
        found.append(Signal("security", security))
    # "I don't want to involve our lawyer, but ..." is still a threat: never cancelled
    legal = _first(_LEGAL, text, languages, negatable=False)
    if not legal:
        sue = _SUE.search(text)
        legal = (sue.group(0).lower() if sue and not _negated(text, sue.start(), languages)
                 else "")
    if legal:
        found.append(Signal("legal", legal))
    anger = _anger(text, languages)
    if anger:
        found.append(Signal("angry customer", anger))
    person = _first(_PERSON, text, languages)
    if person:
        found.append(Signal("asks for a person", person))
    return found


_WEEKDAYS = (r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|montag|dienstag|"
             r"mittwoch|donnerstag|freitag|samstag|sonntag|lunes|martes|mi[ée]rcoles|jueves|"
             r"viernes|s[áa]bado|domingo|lundi|mardi|mercredi|jeudi|vendredi|samedi|dimanche|"
             r"segunda|ter[çc]a|quarta|quinta|sexta")

_PROMISES = {
    "money": _any(
        r"\brefund\w*", r"\breimburs\w*", r"\bmoney back\b", r"\bcompensat\w*",
        r"\bcredit(?:ed)? (?:to |on )?(?:your|the) (?:account|card|invoice)\b", r"\ba credit (?:note|of)\b",
        r"\berstatt\w*", r"\br[üu]ckerstatt\w*", r"\bgutschrift\w*", r"\bgutgeschrieben\b",
        r"\bgeld zur[üu]ck\b", r"\bentsch[äa]dig\w*",
        r"\breembols\w*", r"\bdevoluci[oó]n del (?:dinero|importe|pago|cobro)\b",
        r"\bdevolver(?:emos|le)? (?:el|su) (?:dinero|importe)\b", r"\babon(?:o|aremos|ar) ", r"\bcompensaci[oó]n\b",
        r"\brembours\w*", r"\bun avoir\b", r"\bd[ée]dommag\w*", r"\bcr[ée]dit(?:[ée]|erons)\b",
        r"\bestorn\w*", r"\bdevolu[çc][ãa]o (?:do|de) (?:dinheiro|valor|pagamento)\b",
        r"\bcompensa[çc][ãa]o\b",
        # a quoted price is a commitment too
        r"(?:[$€£]\s?\d[\d.,]*|\b\d[\d.,]*\s?(?:€|\$|£|eur|euros?|usd|dollars?|reais|r\$)(?!\w))"),
    "a time": _any(
        r"\bwithin (?:the next )?(?:\d+|one|two|three|four|five|a few|24|48|72)[- ](?:business |working )?"
        r"(?:hours?|days?|weeks?)\b", r"\bin the next \d+ (?:hours?|days?)\b",
        rf"\bby (?:tomorrow|tonight|the end of (?:the )?(?:day|week|month)|{_WEEKDAYS})\b",
        r"\b(?:today|tomorrow|tonight)\b", r"\b\d+[- ](?:business|working) days?\b",
        r"\binnerhalb (?:von |der n[äa]chsten )?(?:\d+|zwei|drei|f[üu]nf|einem|einer|24|48)\b",
        r"\bbis (?:morgen|heute abend|ende der woche)\b", r"\b(?<!guten )morgen\b", r"\bheute\b",
        r"\bwerktag\w*", r"\bin den n[äa]chsten \d+\b",
        r"\ben (?:un plazo de |los pr[óo]ximos )?\d+ (?:d[íi]as|horas)\b", r"\bdentro de (?:\d+|dos|tres|cinco|24|48)\b",
        r"\bhoy\b", r"\b(?<!esta )(?<!la )ma[ñn]ana\b", r"\bd[íi]as h[áa]biles\b",
        r"\bsous \d+ (?:jours|heures)\b", r"\bdans les \d+ (?:jours|heures|prochain)", r"\baujourd'hui\b",
        r"\bdemain\b", r"\bjours? ouvr[ée]s\b", r"\bjours? ouvrables\b",
        r"\bem at[ée] \d+\b", r"\bhoje\b", r"\bamanh[ãa]\b", r"\bdias [úu]teis\b",
        r"\bnas pr[óo]ximas \d+ horas\b",
        # "soon" is a promise; "immediately" is as often advice ("change your password
        # immediately") and counts only after "we"
        r"\b(?:shortly|soon|as soon as possible|asap)\b",
        r"\b(?:we|we'll|we will|our team)\b[^.!?]{0,40}\b(?:immediately|right away)\b",
        r"\bin k[üu]rze\b", r"\bumgehend\b", r"\bschnellstm[öo]glich\b", r"\bbald\b",
        r"\bso schnell wie m[öo]glich\b", r"(?<!est[áa] )(?<!estão )(?<!ficou )(?<!ficará )\bpronto\b",   # pt "pronto": ready r"\blo antes posible\b",
        r"\bd[èe]s que possible\b", r"\bo mais r[áa]pido poss[íi]vel\b",
        r"\ben breve\b", r"\bcuanto antes\b", r"\b\w+(?:emos|remos) de inmediato\b",
        r"\bsous peu\b", r"\bdans les plus brefs d[ée]lais\b",
        r"\bem breve\b", r"\bo quanto antes\b", r"\bbrevemente\b"),
    "contact": _any(
        r"\b(?:we|i|someone|somebody|they|he|she|a (?:technician|colleague|supervisor|specialist|manager|"
        r"member of our team|team member|representative)|our (?:team|technician|specialist|manager))"
        r"(?: will|'ll| shall| is going to| are going to)(?: \w+){0,3} (?:call|phone|ring|contact|visit|"
        r"reach out|get back|follow up|get in touch|be in touch)\b",
        r"\b(?:get|getting) back to you\b", r"\breach(?:ing)? out to you\b", r"\bfollow up with you\b",
        r"\bkeep you (?:updated|informed|posted)\b", r"\b(?:we|i)(?:'ll| will) (?:notify|update|inform) you\b",
        r"\b(?:we|i)(?:'ll| will) send you (?:further |more |the )?(?:instructions|details|an? (?:email|update))\b",
        r"\bhalten (?:wir )?sie (?:\w+ ){0,3}auf dem laufenden\b", r"\bbenachrichtigen sie\b",
        r"\b(?:werden|wird) (?:wir )?(?:sie|ihnen) (?:\w+ ){0,4}(?:informieren|benachrichtigen|schicken|senden)\b",
        r"\b(?:wir )?(?:werden|wird) uns (?:\w+ ){0,3}bei ihnen melden\b",
        r"\b(?:le|lo|la) mantendremos informad[oa]\b", r"\ble (?:avisaremos|notificaremos|enviaremos)\b",
        r"\bvous tiendr(?:ai|ons|a) inform[ée]e?s?\b", r"\bvous (?:informerons|enverrons|pr[ée]viendrons)\b",
        r"\bmanteremos (?:voc[êe]|o senhor|a senhora) informad[oa]\b", r"\b(?:vamos|iremos) (?:avis[áa]-lo|inform[áa]-lo|enviar)\b",
        r"\bcall you(?: back)?\b", r"\bcall-?back\b", r"\bgive you a call\b",
        r"\b(?:will|'ll) be in touch\b", r"\btechnician will (?:visit|come)\b",
        r"\b(?:rufen|ruft) (?:sie|ihnen) (?:\w+ )?(?:an|zur[üu]ck)\b", r"\br[üu]ckruf\w*",
        r"\b(?:werden|wird) (?:sie|ihnen) (?:\w+ )?(?:kontaktieren|anrufen)\b", r"\bmelden (?:uns|sich) (?:\w+ )?bei ihnen\b",
        r"\bsetzen uns (?:\w+ )?mit ihnen in verbindung\b",
        r"\b(?:wird|werden) sich (?:\w+ ){0,3}(?:mit ihnen in verbindung setzen|bei ihnen melden)\b",
        r"\b(?:werden|wird) (?:wir )?sie (?:\w+ ){0,3}(?:kontaktieren|anrufen|zur[üu]ckrufen)\b",
        r"\b(?:le|te|lo|la) (?:llamaremos|llamar[áa]|contactaremos|contactar[áa])\b",
        r"\bnos pondremos en contacto\b", r"\bse pondr[áa] en contacto\b",
        r"\ble (?:responderemos|escribiremos|informaremos)\b",
        r"\bvous rappell?er(?:ons|a|ai)?\b", r"\bvous (?:contacterons|contactera|appellerons|appellera)\b",
        r"\bprendr(?:ons|a) contact avec vous\b", r"\breviendr(?:ons|a) vers vous\b",
        r"\b(?:entraremos|entrar[áa]) em contato\b", r"\b(?:vamos|iremos|vai) (?:ligar|contatar|retornar)\b",
        r"\bligaremos\b"),
    "an outage": _any(
        r"\b(?:we are|we're) (?:aware of|experiencing|investigating) (?:an?|the) (?:outage|disruption|incident)\b",
        r"\bknown (?:outage|incident)\b", r"\b(?:an|the) outage\b", r"\bongoing (?:outage|incident|disruption)\b",
        r"\bst[öo]rung bekannt\b", r"\bbekannte st[öo]rung\b", r"\bausf[äa]ll\w*",
        r"\b(?:we are|we're) aware of\b", r"\bsind uns (?:\w+ ){0,6}bewusst\b", r"\bist sich (?:\w+ ){0,6}bewusst\b",
        r"\bdienstunterbrechung\w*", r"\bestamos al tanto de\b", r"\bsomos conscientes de\b",
        r"\bnous sommes (?:au courant|conscients)\b", r"\bestamos cientes\b",
        r"\binterrupci[oó]n (?:conocida|general)\b", r"\bca[íi]da (?:general|del servicio)\b",
        r"\bpanne g[ée]n[ée]rale\b", r"\bincident en cours\b",
        r"\binterrup[çc][ãa]o (?:conhecida|geral)\b", r"\bfora do ar\b"),
}


def draft_promises(draft: str) -> list[str]:
    """What a draft promises that a person must confirm before it is sent.

    Args:
        draft: the reply text (any of the five languages).

    Returns:
        reasons such as ``"draft promises money (refund)"`` (empty: nothing promised).
    """
    out = []
    for what, pattern in _PROMISES.items():
        match = pattern.search(draft)
        if match:
            verb = "announces" if what == "an outage" else "promises"
            out.append(f"draft {verb} {what} ({' '.join(match.group(0).lower().split())})")
    return out
