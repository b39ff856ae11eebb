"""The pattern tables of the triage rules and of the draft checks, one entry a line.

Per signal, a dict from language code (``en``, ``de``, ``es``, ``fr``, ``pt``) to one
compiled pattern (case-insensitive) that matches any of its entries: :data:`OUTAGE`,
:data:`SECURITY`, :data:`LEGAL`, :data:`ANGRY` (with :data:`NEGATIVE`, the milder words
that make anger only together with shouting), :data:`PERSON`; legal threats also by
:data:`LAWYER` and :data:`SUE`. :data:`NEGATED` (per language), :data:`CLAUSE_BREAK`
and :data:`STRONGER` say when the words before a match cancel it; the other single
patterns say when a match is not the signal after all (the customer's own availability,
downtime to avoid, a price that went down, a topic rather than an incident, a call
declined, contact details given; for the learned model, :data:`NOT_SECURITY`: a leak of
oil or a bag taken from the belt, unless :data:`SECURITY_ACT` is there too).
:data:`PROMISES` holds what a draft reply may promise
(money, a time, contact, availability such as "24/7", an outage), any language in one
pattern each.

Only tables live here; :mod:`~foreperson.tickets.triage` applies the signal tables and
:func:`~foreperson.tickets.drafts.draft_promises` the promise ones.
"""

from __future__ import annotations

import re

__all__ = ["ALREADY_DONE", "ANGRY", "AVAILABILITY", "AVOIDED", "CLAUSE_BREAK",
           "CONTACT_DETAILS", "CRASH", "FIRST_PERSON_BE", "GUARDING", "LAWYER", "LEGAL",
           "LEGAL_ACT", "LINK", "MINIMAL", "NEGATED", "NEGATIVE", "NOT_NEEDED",
           "NOT_SECURITY", "OUTAGE", "OUTAGE_PAST", "OUTAGE_SUBJECT", "PERSON", "PLANNED",
           "PRAISE", "PRICES", "PROMISES", "REGULATOR", "SECURITY", "SECURITY_ACT",
           "STRONGER", "SUE", "UNDER_WAY", "UNNAMED_PHONE", "UNNAMED_PLACES", "WHEN",
           "ACKNOWLEDGED", "ASKS_FOR_STEPS", "BACK_TO_US", "BASIC_TRIED", "CLAUSE_END", "HANDOFF",
           "STEPS", "STEP_LINE", "TRIED"]

_I = re.IGNORECASE


def _any(*patterns: str, flags: int = _I) -> re.Pattern[str]:
    """One pattern that matches where any of ``patterns`` does (tried in order)."""
    return re.compile("|".join(f"(?:{p})" for p in patterns), flags)


# -- ticket signals, per language -------------------------------------------------

_DOWN_SUBJECTS = (r"(?:servers?|site|website|web ?site|service|services|system|systems|"
                  r"platform|api|app|application|portal|network|dashboard|checkout|"
                  r"login|database|cloud|everything|production|email|e-mail)")

OUTAGE = {
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
               rf"{_DOWN_SUBJECTS}(?: \w+)? at all\b",
               r"\bcompletely down\b", r"\bwo(?:n'?t|uldn'?t) load at all\b", r"\b(?:wifi|wi-fi|broadband|line|connection) (?:has been |is |was )?(?:dead|out)\b",
               r"\b(?:throwing|returns?|returning|getting|gives?) (?:an? |us )?50[0234]s?\b",
               r"\bnone of (?:our|us|my)\b[^.!?]{0,60}\bcan (?:reach|access|connect|log ?in|get (?:in|on))\b",
               r"\b(?:users|employees|staff|customers|everyone|nobody|no one)\b[^.!?]{0,40}\b(?:can(?:no|')t|cannot|"
               r"(?:are )?unable to) (?:access|log ?in|reach|connect)", r"\b(?:instance|server|database|service|system|"
               r"application|api|gateway)s? (?:is |are |has been |have been |keeps? )?(?:not|stopped) responding\b",
               r"\b(?:frequent|intermittent|repeated|constant) (?:disconnections|(?:vpn |network )?(?:connectivity|connection|network) "
               r"(?:drops|losses|failures))\b", r"\bconnectivity drops\b", r"\bsystem crash\w*",
               r"\b(?:unable to|can(?:no|')t|cannot) (?:access|reach|connect to) (?:the|our|your) (?:servers?|systems?|"
               r"platform|portal|database|vpn|network)\b",
               r"\b(?:power|electricity|the lights|water|gas)(?:'s| is| has| has been| went| got)? (?:out|off|gone|cut off)\b(?! of (?:date|stock|warranty))",
               r"\bno (?:power|electricity|running water|mobile (?:signal|network|coverage)|phone signal)\b",
               r"\bpower cut\b"),
    "de": _any(r"\w*ausf[äa]ll\w*",
               # "die Rechnung ist höher ausgefallen": turned out higher, not down
               r"(?<!h[öo]her )(?<!niedriger )(?<!teurer )(?<!g[üu]nstiger )(?<!besser )(?<!schlechter )"
               r"(?<!anders )(?<!knapper )(?<!kleiner )(?<!gr[öo][ßs]er )\bausgefallen\b",
               r"\bnicht (?:mehr )?erreichbar\b",
               r"\b(?:netz|server|dienst|service|system|internet|strom)st[öo]rung\w*",
               r"\bst[öo]rung(?:en)? (?:des|der|im|beim|bei|am) (?:dienst\w*|server\w*|netz\w*|service|system\w*|"
               r"internet|portal\w*|plattform)", r"\b(?:gro[ßs]fl[äa]chige|allgemeine|bekannte) st[öo]rung\b",
               r"\bgibt es (?:gerade |aktuell |derzeit |momentan )?(?:wieder )?eine st[öo]rung\b",
               r"\bst[öo]rung (?:beim|bei der) (?:login|anmeldung)\b", r"\bst[öo]rung f[üu]r alle\b",
               r"\bserver (?:ist |sind )?down\b",
               r"\b(?:komplett|völlig|total) (?:down|offline)\b", r"\bnichts (?:lädt|geht) mehr\b",
               r"\bkein (?:internet|netz|empfang)\b", r"\bsystemabst[üu]rz\w*", r"\b(?:h[äa]ufige|st[äa]ndige|wiederholte) verbindungsabbr[üu]ch\w*", r"\b(?:instanz|server|datenbank|dienst|system|anwendung)\w*,? die nicht (?:mehr )?reagier",
               r"\b(?:benutzer|nutzer|mitarbeiter|kunden)\b[^.!?]{0,60}\bnicht (?:mehr )?(?:zugreifen|anmelden|einloggen)\b", r"\bgeht (?:gar|überhaupt|[üu]berhaupt) nichts(?: mehr)?\b",
               r"\b(?:internet|wlan|wifi|netz|festnetz|telefon|router|app|seite|webseite|portal|login) geht (?:\w+ ){0,3}(?:nicht|ned|net)(?: mehr)?\b",
               r"\bfehler 50[0234]\b", r"\b(?:dienst|service)unterbrechung\w*",
               r"\bnicht (?:mehr )?auf (?:den|die|das|unseren|unsere|unser) (?:server|system|plattform|portal|"
               r"dienst|datenbank)\w* zugreifen\b", r"\b(?:server|seite|webseite|app|portal|dienst|system|netz) "
               r"(?:ist |sind )?(?:down|offline|tot)\b",
               r"\bkein (?:strom|wasser|gas|mobilfunk|mobilfunknetz|handynetz)\b",
               r"\b(?:mobilfunk|mobilfunknetz|netz|strom|internet|wlan|empfang) (?:ist|sind) (?:\w+ )?weg\b",
               r"\bnur (?:noch )?notrufe\b"),
    "es": _any(r"\bca[íi]d[oa]s?\b(?! de (?:precios?|ventas|la demanda))", r"\bse (?:ha )?ca[íi]do\b", r"\bse cay[óo]\b", r"\binactividad (?:del|de la) (?:servidor|base de datos|sistema|servicio|plataforma)",
               r"\bproblema de inactividad\b", r"\btiempo de inactividad\b",
               r"\bno (?:puedo|podemos) acceder (?:al|a la|a los) (?:servidor|sistema|plataforma|portal|base de datos|vpn|red)\b", r"\bdesconexiones (?:frecuentes|constantes|repetidas)\b",
               r"\b(?:usuarios|empleados|clientes)\b[^.!?]{0,40}\bno (?:pueden|podemos) (?:acceder|conectar|iniciar sesi[óo]n)", r"\bno (?:carga|entra|funciona) (?:para )?(?:nadie|ninguno)\b", r"\bfuera de servicio\b",
               r"\bservicio no disponible\b", r"\bsin (?:internet|conexi[oó]n|se[ñn]al|l[íi]nea)\b",
               r"\b(?:servidor|sistema|plataforma|web|p[áa]gina|app|aplicaci[oó]n)(?: de \w+)? no responde\b", r"\b(?:servidor(?:es)?|sistema|plataforma|web|p[áa]gina|app) "
               r"(?:est[áa] |est[áa]n )?(?:ca[íi]d[oa]s?|inaccesible|fuera de l[íi]nea)\b",
               r"\binterrupci[oó]n(?:es)? (?:del? |en el |en la )?(?:servicio|red|sistema|servidor|conexi[oó]n|"
               r"internet|plataforma)", r"\binterrupci[oó]n (?:cr[íi]tica|general|total)\b", r"\bsin servicio\b", r"\bno (?:est[áa] )?disponible para nadie\b",
               r"\bno funciona para nadie\b",
               r"\bse (?:fue|ha ido|cort[óo]|ha cortado) (?:la luz|el agua|la electricidad|el gas|internet|la conexi[óo]n|la se[ñn]al)\b",
               r"\bno hay (?:luz|agua|gas|internet|cobertura|se[ñn]al|conexi[óo]n)\b",
               r"\bsin (?:cobertura|luz|agua|electricidad|gas)\b"),
    "fr": _any(r"\bpannes? (?:g[ée]n[ée]rales?|de (?:service|serveur|r[ée]seau|syst[èe]me))\b",
               r"\b(?:serveurs?|site|service|plateforme|syst[èe]me|r[ée]seau) (?:est |sont )?en panne\b",
               r"\bhors service\b", r"\bpanne (?:de |du )?r[ée]seau\b", r"\bplus de r[ée]seau\b", r"\binterruptions? (?:de|du) service\b", r"\bindisponibles?\b",
               r"\b(?:site|appli\w*|serveurs?|service|r[ée]seau|internet|plateforme|syst[èe]me|box) (?:ne )?r[ée]pond plus\b",
               r"\bcoupures? (?:internet|r[ée]seau|t[ée]l[ée]phone)\b", r"\bpertes? de connectivit[ée]\b", r"\btemps d'arr[êe]t\b", r"\bd[ée]connexions (?:fr[ée]quentes|r[ée]p[ée]t[ée]es)\b",
               r"\b(?:utilisateurs|employ[ée]s|clients|coll[èe]gues)\b[^.!?]{0,40}\bne (?:peuvent|pouvons) (?:plus |pas )(?:acc[ée]der|se connecter)", r"\bcoupures? (?:(?:de|du|d') ?(?:courant|service|r[ée]seau|internet|connexion|"
               r"[ée]lectricit[ée])|g[ée]n[ée]rales?)\b", r"\binaccessibles?\b", r"\binjoignables?\b", r"(?<!mode )\bhors ligne\b", r"\ben rade\b",
               r"\bpannes? (?:intermittentes?|fr[ée]quentes?|r[ée]p[ée]t[ée]es?)\b",
               r"\binterruptions? (?:inattendues?|du serveur|de serveur|du r[ée]seau)\b",
               r"\binternet coup[ée]\b", r"\bne (?:marche|fonctionne) plus du tout\b", r"\bplus d'internet\b",
               r"\b(?:serveurs?|site|service|plateforme|syst[èe]me|r[ée]seau|appli\w*) (?:est |sont )?"
               r"(?:tomb[ée]e?s?|plant[ée]e?s?)\b",
               r"\baucun r[ée]seau\b",
               r"\b(?:plus|pas) de (?:courant|[ée]lectricit[ée]|gaz|eau|r[ée]seau|connexion|internet)\b(?! (?:suppl[ée]mentaire|en plus))"),
    "pt": _any(r"\bfora do ar\b", r"\binterrup[çc](?:ão|ões) (?:d[oa]s? |de |no |na )?(?:servi[çc]o|rede|sistema|servidor|conex[ãa]o|internet|plataforma)",
               r"\binterrup[çc][ãa]o (?:cr[íi]tica|geral|total)\b", r"\bindispon[íi]ve(?:l|is)\b",
               r"\bqueda (?:do|dos|de) (?:servi[çc]o|sistema|servidor)",
               r"\b(?:servidor(?:es)?|sistema|site|servi[çc]o|plataforma|app|aplicativo|aplica[çc][ãa]o|rede)"
               r"(?: \w+){0,2} (?:caiu|ca[íi]ram|est[áa] (?:em baixo|fora|inacess[íi]vel|indispon[íi]vel)|"
               r"n[ãa]o est[áa] dispon[íi]vel)\b", r"\bsem (?:internet|sinal|conex[ãa]o|rede)\b",
               r"\bfora de servi[çc]o\b", r"\bdeixou de (?:responder|funcionar)\b", r"\bdesconex[õo]es (?:frequentes|constantes|repetidas)\b", r"\btempo de inatividade\b",
               r"\b(?:usu[áa]rios|funcion[áa]rios|clientes)\b[^.!?]{0,40}\bn[ãa]o (?:conseguem|podem) (?:acessar|entrar|conectar|fazer login)", r"\bn[ãa]o abre de jeito nenhum\b",
               r"\b(?:internet|net|wi-?fi|rede) (?:\w+ )?(?:caiu|ca[íi]da|t[áa] fora|est[áa] fora)\b",
               r"\b(?:acabou|caiu|faltou|falta|cortaram) (?:a )?(?:luz|energia|[áa]gua|internet|rede|sinal)\b",
               r"\bsem (?:luz|energia|[áa]gua|g[áa]s)\b"),
}

_LEAKABLE = (r"(?:data|database|passwords?|credentials?|information|info|details|e-?mails?|"
             r"records|card (?:numbers?|details)|personal \w+|customer \w+|addresses|files)")

SECURITY = {
    "en": _any(r"\bhack(?:ed|er|ers|ing)?\b", r"\btrojans?\b", r"\bbreach(?:ed|es)?\b(?! of (?:your |the |our |my |their )?(?:own )?(?:policy|policies|contract|"
               r"promise|terms|trust|duty|agreement|warranty|rules|regulations?)\b)", r"\bphishing\b",
               r"\bmalware\b", r"\bransomware\b", r"\bunauthori[sz]ed\b", r"\bdata leak\w*",
               r"\bstolen\b", r"\bcompromised\b",
               r"\bfraud\w*(?! (?:prevention|detection|protection|team|department|checks?|screening|scor\w*|filters?|rules?))", r"\bidentity theft\b",
               r"\baccount takeover\b", r"\bsuspicious (?:log ?ins?|sign[- ]?ins?|activity|access)\b",
               r"\bsomeone (?:has )?(?:logged|signed|got|broke) in(?:to)?\b",
               r"\b(?:log ?ins?|sign[- ]?ins?) from (?:another|a different|an unknown|a foreign|other) "
               r"(?:country|location|device|ip)\b",
               r"\bvulnerabilit(?:y|ies)\b", r"\bsecurity (?:incident|breach|issue|flaw|hole)\b",
               r"\b(?:charges?|payments?|purchases?|transactions?|orders?) (?:that )?i (?:never|didn'?t|did not) "
               r"(?:make|made|authori[sz]e|place|recogni[sz]e)",
               # a leak of data, not of oil, fuel or a seat ("engine leak on the tarmac")
               rf"\b{_LEAKABLE} (?:\w+ ){{0,4}}(?:leak(?:ed|s)?|got out)\b", rf"\bleak(?:ed|s|ing)? (?:\w+ ){{0,3}}{_LEAKABLE}",
               r"(?<!oil )(?<!fuel )(?<!water )(?<!gas )(?<!coolant )(?<!engine )\b(?:was|were|got|been) leaked\b",
               r"\bcloned\b", r"\bis (?:this|it|that) (?:a )?scam\b",
               r"\b(?:charges?|payments?|purchases?|transactions?)\b(?: \S+){0,5} (?:that )?i (?:never|didn'?t|did not) "
               r"(?:make|made|authori[sz]e|place|recogni[sz]e)", r"\b(?:weird|strange|unusual|unknown) log ?in\b",
               r"\b(?:steal|stole|stolen) (?:my )?(?:password|card|identity|data)\b", r"\bsomeone (?:got|get|has got|has gotten) (?:into|access)\b",
               r"\bsomeone(?:'s| has| is)? (?:been )?using my (?:login|account|card|password|details)\b",
               r"\b(?:device|profile|log ?in)s? (?:in|on) my account (?:that )?i (?:don'?t|do not) recogni[sz]e\b",
               r"\bnever (?:signed up|ordered|bought|authori[sz]ed)\b"),
    "de": _any(r"\bgehackt\b", r"\bhacker\w*", r"\bunbefugt\w*", r"\bdatenleck\w*",
               r"\bdatenpanne\w*", r"\bsicherheitsl[üu]cke\w*", r"\bphishing\w*", r"\bbetrug(?!spr[äa]vention|sbek[äa]mpfung|sschutz|serkennung)\w*",
               r"\bbetr[üu]ger\w*", r"\bkompromittiert\b", r"\bverd[äa]chtige (?:anmeld\w*|zugriff\w*|aktivit\w*)",
               r"\bschadsoftware\b", r"\bmalware\b", r"\bidentit[äa]tsdiebstahl\b", r"\bgestohlen\b",
               r"\bgeleakt\b", r"\bleak\b", r"\bjemand hat sich\b.{0,60}\b(?:eingeloggt|angemeldet)\b",
               r"\bnie (?:autorisiert|get[äa]tigt|bestellt|freigegeben)\b", r"\bnicht (?:autorisiert|von mir)\b",
               r"\bgeklont\b", r"\bgeklaut\b", r"\banmeldeversuch\w*",
               r"\bsich jemand\b.{0,80}\b(?:eingeloggt|angemeldet|zugegriffen)\b", r"\b(?:das )?war ich (?:aber )?nicht\b",
               r"\bnie (?:was|etwas|irgendwas) (?:bestellt|gekauft|gebucht)\b", r"\babgeflossen\b",
               r"\b(?:abbuchung|[üu]berweisung|ueberweisung|buchung|lastschrift|zahlung|abhebung|kauf)\w*\b(?: \S+){0,8} "
               r"(?:die|den|das) ich (?:nie|nicht|NICHT) (?:gemacht|get[äa]tigt|veranlasst|autorisiert|war)\b",
               r"\btrojaner\w*"),
    "es": _any(r"\bhacke(?:ad[oa]s?|o|r|aron)\b", r"\bacceso no autorizado\b", r"\bno autorizad[oa]s?\b",
               r"\bviolaci[oó]n de (?:datos|seguridad)\b", r"\bbrecha de (?:seguridad|datos)\b",
               r"\bfraude\w*", r"\bphishing\b", r"\bmalware\b", r"\bcomprometid[oa]s?\b",
               r"\brobo de (?:identidad|datos|cuenta)\b", r"\bvulnerabilidad(?:es)?\b",
               r"\bfuga de datos\b", r"\brobad[oa]s?\b", r"\brobaron\b", r"\bfiltraci[oó]n\w*",
               r"\balguien (?:se )?(?:ha )?(?:entr[óo]|entrado|metido|meti[óo]|accedi[óo]|accedido) (?:a|en) mi (?:cuenta|perfil|correo)\b",
               r"\bno (?:fui|he sido) yo\b",
               r"\b(?:cargos?|cobros?|compras?|pagos?) (?:\w+ ){0,5}que no (?:reconozco|hice|autoric[ée])\b",
               r"\bclonad[oa]s?\b", r"\bes (?:una )?estafa\?", r"\benlace (?:falso|sospechoso|raro)\b",
               r"\bparece falso\b", r"\bsuplantaci[oó]n\b", r"\bclonaron\b", r"\bse filtraron\b",
               r"\b(?:cargos?|cobros?|compras?|pagos?) (?:\w+ ){0,5}que (?:yo )?nunca (?:hice|autoric[ée])\b",
               r"\bme hicieron una estafa\b", r"\balguien compr[óo] con mi (?:cuenta|tarjeta)\b",
               r"\b(?:transferencias?|cargos?|cobros?|compras?|pagos?|movimientos?)\b(?: \S+){0,8} (?:que|a un \w+ que) "
               r"(?:desconozco|no (?:he|hab[íi]a) autorizado|no reconozco)\b", r"\btroyano\w*"),
    "fr": _any(r"\bpirat[ée]e?s?\b", r"\bpiratage\b", r"\bfuite de donn[ée]es\b",
               r"\bacc[èe]s non autoris[ée]\b", r"\bnon autoris[ée]e?s?\b", r"\bhame[çc]onnage\b",
               r"\bphishing\b", r"\bfraude\w*", r"\bmalware\b", r"\blogiciel malveillant\b",
               r"\bviolation de (?:donn[ée]es|s[ée]curit[ée])\b", r"\bfaille de s[ée]curit[ée]\b",
               r"\busurpation d'identit[ée]\b", r"\bvol[ée]e?s? (?:de|mes|mon|ma)\b",
               r"\b(?:quelqu'un|qqn) (?:s'est connect[ée]|a acc[ée]d[ée]|est entr[ée]) (?:[àa]|sur|dans) mon (?:compte|profil)\b",
               r"\bc'est pas moi\b", r"\bce n'(?:est|[ée]tait) pas moi\b",
               r"\b(?:que je n'ai|que j'ai) (?:jamais|pas) (?:autoris[ée]|fait|effectu[ée]|command[ée])e?s?\b",
               r"\bclon[ée]e?\b", r"\bune arnaque\s*\?", r"\blien (?:suspect|bizarre|frauduleux)\b",
               r"\bcheval de troie\b"),
    "pt": _any(r"\bhackead[oa]s?\b", r"\bhacker\w*", r"\bn[ãa]o autorizad[oa]s?\b",
               r"\bvazamento\w*(?! (?:de |do |da )?(?:[óo]leo|combust[íi]vel|[áa]gua|g[áa]s|fluido|motor|querosene))",
               r"\bfraude\w*", r"\bphishing\b", r"\bmalware\b",
               r"\bviola[çc][ãa]o de (?:dados|seguran[çc]a)\b", r"\bcomprometid[oa]s?\b",
               r"\binvadid[oa]s?\b", r"\bsem (?:a )?minha autoriza[çc][ãa]o\b",
               r"\broubo de (?:identidade|dados|conta)\b", r"\bfalha de seguran[çc]a\b",
               r"\binvadi(?:ram|u)\b", r"\bclonad[oa]s?\b", r"\bclonaram\b", r"\b[ée] (?:um )?golpe\s*\?",
               r"\balgu[ée]m (?:entrou|acessou|invadiu|t[áa] usando|est[áa] usando) (?:n[oa]|[oa]) (?:minha|meu) (?:conta|perfil)\b",
               r"\bn[ãa]o (?:sou|fui) eu\b", r"\bn[ãa]o autorizei\b", r"\bvazaram\b",
               r"\broubaram (?:minha|meu|meus|minhas)\b", r"\bacesso estranho\b", r"\bgolpista\w*",
               r"\broubad[oa]s?\b", r"\bcavalo de tr[óo]ia\b",
               r"\b(?:compras?|cobran[çc]as?|pagamentos?|d[ée]bitos?|transfer[êe]ncias?|pix) (?:\S+ ){0,8}que (?:eu )?n[ãa]o "
               r"(?:fiz|reconhe[çc]o|autorizei)\b", r"\blink (?:estranho|suspeito|falso)\b"),
}

LEGAL = {
    "en": _any(r"\blawsuits?\b", r"\blegal (?:action|steps|proceedings)\b",
               r"\bsmall[- ]claims\b", r"\b(?:take|taking|see) (?:you|them|this|the matter) to court\b",
               r"\bcourt (?:order|case|action)\b", r"\bclass action\b",
               r"\b(?:report|complain\w*) (?:you )?to the (?:regulator|ombudsman|authorities|data protection authority)\b",
               r"\bconsumer protection (?:agency|office|authority)\b",
               r"\breport\w* (?:it|this|you|the matter) to (?:the )?(?:ico|ofcom|ofgem|fca|cma|ftc|fcc|trading standards|ombudsman|regulator)\b",
               r"\b(?:complaint|complain) (?:with|to) the (?:fcc|ftc|cfpb|bbb|better business bureau|ombudsman|regulator)\b",
               r"\b(?:referred|reported|escalated|taken|sent|forwarded) (?:it |this |the (?:matter|case|complaint) |my complaint )?"
               r"to (?:the )?(?:\w+ ){0,2}(?:ombudsman|regulator|authorit(?:y|ies))\b"),
    "de": _any(r"\bklage\b", r"\bverklagen\b",
               r"\bverklage\b", r"\b(?:vor|zum|ans|zu|das) gericht\b", r"\bgerichtlich\w*",
               r"\bgerichtsverfahren\b", r"\bamtsgericht\b", r"\brechtliche schritte\b", r"\bjuristische schritte\b",
               r"\bverbraucherzentrale\b", r"\babmahnung\b", r"\bbundesnetzagentur\b",
               r"\bschlichtungsstelle\b",
               r"\b(?:an|bei) (?:die|der) (?:\w+ )?\w*beh[öo]rde (?:\w+ ){0,3}(?:gemeldet|melden|beschwer\w*|"
               r"eingereicht|einschalten|eingeschaltet)",
               r"\bstrafanzeige\b",
               r"\banzeige (?:bei der polizei|erstattet|gestellt|erstatten|aufgegeben)\b"),
    "es": _any(r"\bdemanda judicial\b",
               r"\b(?:presentar[ée]?|presentaremos|interponer|interpondr[ée]|pondr[ée]) (?:una )?demanda\b",
               r"\bdemandar(?:[ée]|emos|les|los)?\b", r"\bacciones? legal(?:es)?\b",
               r"\bmedidas legales\b", r"\btribunal(?:es)?\b", r"\bdenunci[oa]\w*",
               r"\breclamaci[oó]n (?:en|ante) (?:la omic|consumo|la oficina del consumidor)\b",
               r"\b(?:omic|facua|ocu|profeco|sernac)\b", r"\barbitraje de consumo\b", r"\bhoja de reclamaciones\b", r"\bno se (?:queda|va a quedar) as[íi]\b"),
    "fr": _any(r"\bpoursuites? (?:judiciaires?|en justice)\b", r"\baction en justice\b",
               r"\bporter plainte\b", r"\bd[ée]poser (?:une )?plainte\b", r"\btribunal\b",
               r"\bmise en demeure\b", r"\bmesures? l[ée]gales?\b", r"\bdgccrf\b",
               r"\bune action en justice\b", r"\b60 millions de consommateurs\b",
               r"\bassociation de consommateurs\b",
               r"\bport[ée]e? plainte\b",
               r"\bplainte (?:au commissariat|[àa] la gendarmerie|aupr[èe]s de)\b"),
    "pt": _any(r"\bprocesso judicial\b", r"\ba[çc][ãa]o judicial\b",
               r"\bjuizado\b", r"\bpequenas causas\b",
               r"\b(?:vou|vamos|irei|iremos) processar\b", r"\bprocessar (?:voc[êe]s|a empresa)\b",
               r"\bprocessarei\b", r"\bprocessaremos\b",
               r"\bmedidas (?:legais|judiciais)\b", r"\btribuna(?:l|is)\b",
               r"\bprocon\b", r"\bjusti[çc]a\b", r"\ba[çc][ãa]o (?:judicial|legal|por)\b",
               r"\bboletim de ocorr[êe]ncia\b",
               r"\b(?:registrei|registramos|fiz|fizemos|abri|apresentei|vou (?:fazer|abrir|registrar|apresentar)) (?:uma )?(?:reclama[çc][ãa]o|queixa|den[úu]ncia) (?:n[oa]|[àa]|ao|junto (?:[àa]|ao))\b"),
}
# A lawyer is a threat only when the customer brings one in: "my lawyer", "I'll contact an
# attorney", "ich schalte meinen Anwalt ein", "hablaré con un abogado", "je prends un
# avocat"; not a lawyer writing as a customer ("Bin Anwalt", "sou advogado"), a law firm
# buying licences, a legal department asking for terms, or French avocados.
_LAWYERS = r"(?:lawyers?|attorneys?|solicitors?|(?:rechts)?anw[äa]lt\w*|abogad[oa]s?|avocats?|advogad[oa]s?)"
_DEPARTMENTS = (r"(?:legal (?:team|department|counsel)|rechtsabteilung|(?:departamento|equipo) (?:legal|"
                r"jur[íi]dico)|service (?:juridique|contentieux)|juristes?|(?:departamento |setor )?jur[íi]dico)")
_THEIRS = (r"(?:my|our|mein\w*|unser\w*|zum|mi|mis|nuestr[oa]s?|mon|notre|nos|mes|meu|minha|nosso|nossa|"
           r"meus|nossos)")
_BRINGING = (r"(?:(?:contact|consult|hire|involve|get|call|pass \w+ to|hand \w+ to|forward \w+ to|"
             r"talk to|speak to|speak with|go to)\w* (?:an?|the|with an?)?|"
             r"(?:einschalt|hinzuzieh|hinzuzuzieh|nehm|geh|übergeb|[üu]bergeb|weiterleit|kontaktier|beauftrag)\w* "
             r"(?:einen|ein|den|dem)?|(?:consult|contact|contrat|habl|llam|pas|acud|busc)ar[ée]?(?:mos)? "
             r"(?:con |a |al )?(?:un|una|el|los|mis)?|(?:consulter|contacter|saisir|transmettre|prendre|voir)"
             r"(?:ai|ons|a)? (?:un|une|l'|le|mon|notre)?|(?:acionar|procurar|contratar|consultar|"
             r"falar com|passar para)(?:ei|emos)? (?:um|uma|o|meu|nosso)?)")
LAWYER = re.compile(rf"\b{_THEIRS} {_LAWYERS}\b(?! (?:needs|requires|asked|asks|braucht|ben[öo]tigt|bittet|"
                    rf"necesita|requiere|pide|a besoin|demande|precisa|pede|pediu))|\b{_BRINGING}\s*(?:{_THEIRS} )?(?:{_LAWYERS}|{_DEPARTMENTS})\b|"
                    rf"\b(?:{_LAWYERS}|{_DEPARTMENTS}) (?:will|is going to|wird|werden|va|van|"
                    rf"vont|vai|v[ãa]o) (?:\w+ ){{0,2}}(?:contact|be in touch|hear|receive|kontaktier|"
                    rf"contactar|contacter|entrar)", _I)
# "sue" in lower case (or shouted), with what makes it a threat: never the name "Sue"
SUE = re.compile(r"\b(?:will|going to|gonna|shall|to|could|may|might|would|we'll|i'll|and) "
                 r"(?:sue|SUE)\b|\b(?:sue|SUE) (?:you|your|them|the company|for)\b")

ANGRY = {
    "en": _any(r"\bunacceptable\b", r"\bridiculous\b", r"\bfurious\b", r"\boutrageous\b",
               r"\bworst\b", r"\bdisgusting\b", r"\bfed up\b", r"\bpathetic\b",
               r"\bincompetent\b", r"\bdisgrace\w*",
               # "scam" aimed at the company; a scam by someone else is a security matter
               r"\b(?:this|you|your company|that|it) (?:is|are|'re|'s) (?:a |such a |an absolute |a total |a complete )?scam\b(?!\s*\?)",
               r"\bscammers\b", r"\bwhat a scam\b", r"\bthanks for nothing\b", r"\b(?:complete|total|absolute) lie\b", r"\bfurious\b",
               r"\bsick and tired\b", r"\bshame on you\b", r"\bnever again\b", r"\bangry\b",
               r"\bterrible service\b", r"\bhorrible\b", r"\b(?:absolute(?:ly)?|total|complete) (?:joke|useless)\b",
               r"\b(?:oh )?(?:great|wonderful|fantastic|brilliant|perfect), (?:another|yet another|again)\b",
               r"\breally impressive work\b", r"\bwhat a joke\b", r"\byou(?:'re| are) a joke\b",
               r"\b(?:absolute |complete |total )?garbage\b", r"\bunbelievable\b", r"\byou people are useless\b",
               r"\bgreat job,? guys\b", r"\bappalling\b", r"\brubbish\b", r"\bsick of\b"),
    "de": _any(r"\bfrechheit\b", r"\binakzeptabel\b", r"\bunversch[äa]mt\w*", r"\bskandal\w*",
               r"\b(?:das|sie|ihr|es) (?:ist|sind|seid) (?:ja |doch |einfach |wirklich )?unm[öo]glich\b", r"\bsauer\b", r"\bw[üu]tend\b", r"\bzumutung\b",
               r"\bl[äa]cherlich\b", r"\bstinksauer\b", r"\bsehr entt[äa]uscht\b", r"\bna (?:super|toll|klasse),",
               r"\bdanke f[üu]r nix\b", r"\bweiter so\.", r"\bwirklich gro[ßs]artig wie\b",
               r"\btoll, wie\b", r"\binkompetent\w*", r"\b(?:schnauze|nase) (?:gestrichen )?voll\b",
               r"\bzum kotzen\b", r"\b(?:seid|ist|sind) (?:ja )?(?:der|ein) witz\b",
               r"\bunfassbar\b",
               r"\bnie wieder\b"),
    "es": _any(r"\binaceptable\b", r"\bvergonzos[oa]\b", r"\bindignad[oa]\b", r"\bfuriose?[oa]?\b",
               r"\bharto\b", r"\bharta\b", r"\b(?:es|esto es|son) una estafa\b(?!\s*\?)", r"\bestafadores\b", r"\bp[ée]sim[oa]\b", r"\brid[íi]cul[oa]\b",
               r"\bes una verg[üu]enza\b", r"\bincompetentes?\b",
               r"\bqu[ée] (?:maravilla|bien|genial), (?:otra vez|otro|otra)\b", r"\bse nota que les importan\b",
               r"\bgenial, otra vez\b", r"\besto es una burla\b", r"\bque buen servicio, de verdad\b",
               r"\bque verg[üu]enza\b", r"\bhasta las narices\b", r"\bsinverg[üu]enzas?\b",
               r"\btomadura de pelo\b", r"\bintolerable\b", r"\b(?:son|sois|es) un desastre\b", r"\bpodrid[oa]s?\b", r"\bindignante\b", r"\bde chiste\b", r"\bvaya tela\b"),
    "fr": _any(r"\binadmissible\b", r"\binacceptable\b", r"\bscandaleu(?:x|se)\b", r"\bhonteu(?:x|se)\b",
               r"\bfurieu(?:x|se)\b", r"\bras le bol\b", r"\bridicule\b",
               r"\b(?:c'est|quelle|vous [êe]tes|une vraie) (?:une |de l')?arnaque\b(?!\s*\?)", r"\barnaqueurs?\b",
               r"\bde la marde\b", r"\btabarnak\b", r"\bincomp[ée]tence\b",
               r"\bc'est une honte\b", r"\bexasp[ée]r[ée]e?\b", r"\bincomp[ée]tents?\b",
               r"\bbravo, (?:encore|une fois de plus)\b", r"\bvous vous moquez de moi\b",
               r"\bquel professionnalisme\b", r"\bfoutez de (?:ma gueule|moi)\b", r"\bj'en ai marre\b",
               r"\bn'importe quoi\b", r"\bprofond m[ée]contentement\b", r"\bm[ée]pris\b",
               r"\bvous vous foutez de (?:nous|moi)\b"),
    "pt": _any(r"\binaceit[áa]vel\b", r"\babsurdo\b", r"\bvergonha\b", r"\bfurios[oa]\b",
               r"\brid[íi]cul[oa]\b", r"\bp[ée]ssim[oa]\b", r"\bcansad[oa] de\b",
               r"\bindignad[oa]\b", r"\brevoltad[oa]\b", r"\buma piada\b", r"\bum golpe\b(?!\s*\?)", r"\bincompetentes?\b",
               r"\bparab[ée]ns, mais (?:uma|um) vez\b", r"\bparab[ée]ns, mais uma\b", r"\bfart[oa] dis(?:to|so)\b",
               r"\bservi[çc]o de primeira, h[ea]in\b", r"\bsacanagem\b", r"\b(?:um|uns|s[ãa]o um) lixo\b",
               r"\bn[ãa]o aguento mais\b", r"\bsaco cheio\b", r"\b(?:um|s[ãa]o um) insulto\b", r"\bpicaretas?\b", r"\b[ée] (?:uma )?brincadeira\b", r"\bpalha[çc]ada\b"),
}
# milder negative words: together with shouting or "!!!" they make anger
NEGATIVE = {
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

PERSON = {
    "en": _any(r"\b(?:talk|speak|chat) (?:to|with) (?:a|an|your|some|the)? ?(?:real )?(?:person|human|"
               r"manager|supervisor|agent|representative|someone|somebody|people)\b",
               r"\breal (?:person|human)\b", r"\bhuman (?:agent|being|support)\b",
               r"\b(?:call|phone|ring) me(?: back)?\b", r"\b(?:a|your) call ?back\b",
               r"\bescalate\b", r"\b(?:not|no) (?:a )?(?:bot|robot|chatbot|automated (?:reply|answer))\b",
               r"\bgive me a call\b", r"\b(?:actual|live) (?:human|person|agent)\b",
               r"\bsomeone (?:to )?(?:call|phone|ring)(?:ed|s)? me\b",
               r"\b(?:somebody|someone|anyone|you) (?:could|can|would|to) (?:please )?(?:telephone|phone|call|ring) (?:me|her|him|us)\b", r"\b(?:can|could) (?:a|your) (?:supervisor|manager)\b",
               r"\b(?:your|a) (?:supervisor|manager|boss)\b", r"\bput me through to\b"),
    "de": _any(r"\bmit einem (?:menschen|mitarbeiter|vorgesetzten|verantwortlichen)\b",
               r"\bpers[öo]nlich sprechen\b", r"\bvorgesetzt\w*", r"\br[üu]ckruf\b",
               r"\brufen sie (?:mich|uns)\b", r"\bechte[nrm]? (?:mensch|person)\w*", r"\bkein(?:en)? bot\b",
               r"\bzur[üu]ckrufen\b", r"\beinen menschen\b", r"\b(?:lieber|gerne?|kurz|pers[öo]nlich) am telefon\b", r"\bam telefon (?:sprechen|besprechen|kl[äa]ren|erkl[äa]ren)\b", r"\bruft (?:mich|uns) an\b",
               r"\b(?:ihren|ihrem|einen|einem|euren|eurem) (?:chef|vorgesetzten)\b",
               r"\btelefonisch kontaktieren\b", r"\b(?:mich|uns) (?:\w+ ){0,3}anrufen\b", r"\btelefontermin\w*",
               r"\b(?:meeting|termin|gespr[äa]ch|telefonat|r[üu]ckruf)\w* (?:\w+ ){0,5}vereinbaren\b",
               r"\bmit (?:eurem|ihrem|dem|einem) (?:chef|vorgesetzten|verantwortlichen|ansprechpartner)\b"),
    "es": _any(r"\bhablar con (?:una persona|un agente|un humano|alguien|un supervisor|un responsable|"
               r"un encargado|el encargado|el responsable|un ser humano)\b",
               r"\bll[áa]menme\b", r"\bme (?:llamen|llame)\b", r"\bpersona real\b",
               r"\b(?:una|por) llamada\b(?! de (?:zoom|teams|video|skype|meet))", r"\bllamada telef[óo]nica\b",
               r"\bp[áa]s(?:en|e)me con\b", r"\bpasar con una persona\b", r"\bpersona de verdad\b", r"\b(?:el|un|su) (?:encargado|supervisor|jefe|responsable)\b",
               r"\b(?:concertar|agendar|programar|tener) una (?:reuni[óo]n|llamada|videollamada|cita telef[óo]nica)\b",
               r"\bcontacto conmigo por tel[ée]fono\b", r"\b(?:quiero|quisiera|necesito|me gustar[íi]a|puedo) hablar (?:directamente |personalmente )?con\b"),
    "fr": _any(r"\bparler (?:[àa]|avec) (?:une personne|un humain|quelqu'un|un conseiller|un responsable|"
               r"un (?:vrai )?interlocuteur|un superviseur)\b",
               r"\brappelez[- ]moi\b", r"\b[êe]tre rappel[ée]e?\b", r"\bme rappeler\b",
               r"\bpersonne r[ée]elle\b", r"\bappelez[- ]moi\b", r"\bqu'(?:on|un \w+|une \w+|quelqu'un) m'appelle\b",  # not "je m'appelle"
               r"\bm'appeler\b",
               r"\bau t[ée]l[ée]phone\b", r"\b(?:votre|un) (?:sup[ée]rieur|responsable|manager)\b",
               r"\brendez-vous t[ée]l[ée]phonique\b", r"\b[êe]tre contact[ée]e?s? par t[ée]l[ée]phone\b"),
    "pt": _any(r"\bfalar com (?:uma pessoa|um atendente|um humano|algu[ée]m|um supervisor|o gerente|"
               r"um gerente|um respons[áa]vel)\b", r"\bme liguem?\b", r"\bpessoa real\b",
               r"\b(?:uma|por) liga[çc][ãa]o\b(?! (?:ao|de|do|com o) (?:servidor|rede|internet))",
               r"\bretorno por telefone\b", r"\b(?:o )?vosso (?:gerente|supervisor|respons[áa]vel)\b", r"\b(?:podem|pode|possam) me ligar\b",
               r"\bpor telefone\b", r"\bme ligar\b", r"\b(?:o|um|seu) (?:gerente|supervisor|respons[áa]vel)\b",
               r"\bagendar uma (?:reuni[ãa]o|liga[çc][ãa]o|chamada|call|conversa)\b", r"\bme ligasse\b",
               r"\bpasse-me (?:a|ao|para) (?:o |a )?(?:gerente|supervisor\w*|respons[áa]vel|atendente|algu[ée]m)\b"),
}


# -- what a learned signal is not ------------------------------------------------

# the learned model leans on words ("leak", "someone took", "stolen") that also name
# things that are no security matter: a leak of oil, fuel or water, a leaky seat, a bag
# taken from the belt. A sentence with one of these and no security act is passed over.
NOT_SECURITY = _any(
    r"\b(?:oil|fuel|water|engine|hydraulic|coolant|gas|roof|pipe|tap|seat|window|tank|tyre|tire)s? "
    r"(?:\w+ ){0,2}leak\w*", r"\bleak\w* (?:\w+ ){0,2}(?:oil|fuel|water|engine|roof|pipe|seat)s?\b",
    r"\bleaky\b", r"\bleaking (?:roof|pipe|tap|window|seat|bottle|bag)\b",
    r"\b(?:took|taken|grabbed|picked up) (?:my|our|the) (?:bag|bags|luggage|suitcase|seat|parcel|"
    r"package|spot|place)\b", r"\bfrom the (?:carousel|belt|baggage claim)\b")
# what a learned legal signal needs in its ticket, as the patterns do: a legal act or
# actor (a lawyer, a court, a judge, a regulator or ombudsman, a formal complaint, the
# police); a plain complaint or a demand for compensation is not a legal matter
LEGAL_ACT = _any(
    r"\b(?:lawyers?|attorneys?|solicitors?|counsel|legal\w*|law(?:suits?)?|courts?|judges?|sue|suing|"
    r"sued|litigat\w*|tribunals?|ombuds\w*|regulat\w*|authorit(?:y|ies)|commission\w*|commissioner\w*|"
    r"trading standards|small[- ]claims|police|consumer (?:protection|rights|council|association|body)|"
    r"formal complaint|lodged a complaint|complaint with|dispute)\b",
    r"\b(?:\w*anw[äa]lt\w*|gericht\w*|richter\w*|klage\w*|verklag\w*|recht\w*|juristisch\w*|"
    r"schlichtung\w*|beh[öo]rde\w*|\w*beauftragt\w*|\w*ombuds\w*|verbraucherzentrale|"
    r"bundesnetzagentur|bafin|datenschutz\w*|dsgvo|polizei|anzeige|abmahnung|beschwerde (?:bei|eingereicht)|"
    r"s[öo]p)\b",
    r"\b(?:abogad\w*|tribunal\w*|juzgado\w*|juez\w*|juicio\w*|demanda\w*|demandar\w*|denuncia\w*|"
    r"legal\w*|jur[íi]dic\w*|consumo|omic|ocu|facua|condusef|profeco|sernac|autoridad\w*|agencia\w*|"
    r"oficina de atenci[óo]n|polic[íi]a|reclamaci[óo]n (?:formal|ante)|queja (?:en|ante)|hoja de "
    r"reclamaciones|arbitraje)\b",
    r"\b(?:avocats?|tribunal\w*|juges?|justice|juridique\w*|judiciaire\w*|l[ée]ga\w*|plainte|"
    r"proc[èe]s|m[ée]diat\w*|poursui\w*|saisir\w*|signalement|dgccrf|cnil|arcep|police|gendarmerie|"
    r"mise en demeure|associations? de consommateurs)\b",
    r"\b(?:advogad\w*|processo\w*|processar\w*|justi[çc]a|ju[íi]z\w*|jur[íi]dic\w*|judicia\w*|"
    r"tribuna\w*|legais|legal|procon|anpd|anacom|anatel|erse|deco|juizado|pequenas causas|reclame aqui|"
    r"pol[íi]cia|den[úu]ncia|queixa|livro de reclama[çc][õo]es|comiss[ãa]o nacional|consumidor)\b")

# a regulator by its short name ("reported you to the TIO", "escalate my complaint to
# Ofcom", "the CAA will be hearing about it"): case-sensitive, after a word of reporting
REGULATOR = re.compile(
    r"\b(?:to|with|bei|an|à|ante|na|no|at|saisir(?:ai|ons)?) (?:the |die |der |den |l'|la |a |o )?"
    r"(?:[A-Z]{2,8}|[A-Z][a-z]+[A-Z]\w*|Of[a-z]{3})\b(?![ .-]?\d)|\b[A-Z]{2,8} will be hearing\b")

# what a learned outage signal needs in its ticket: something that can be down or out (a
# service, a system, a connection, power or water); the food or a seat cannot
OUTAGE_SUBJECT = _any(
    r"\b(?:apps?|application|site|website|web|page|portal|servers?|system\w*|services?|network|internet|"
    r"wi-?fi|broadband|fib(?:re|er)|router|connection|connectivity|signal|coverage|data|login|log in|"
    r"sign in|platform|api|database|email|e-mail|cloud|vpn|dashboard|checkout|online|offline|outage|"
    r"down|dead|line|lines|phones?|mobile|payments?|pay|atm|banking|power|electricity|lights|gas|water|"
    r"files?|ransomware)\b",
    r"\b(?:seite|webseite|server|dienst\w*|netz\w*|internet\w*|verbindung|empfang|anmeldung|plattform|"
    r"datenbank|system\w*|st[öo]rung\w*|ausfall\w*|leitung\w*|telefon\w*|festnetz|handy|router|"
    r"zahlung\w*|online|erreichbar|strom|wasser|gas|tot|nix geht|nichts geht|\w*shop|startseite)\b",
    r"\b(?:aplicaci[óo]n|app|p[áa]gina|sitio|web|servidor\w*|sistema\w*|servicio\w*|red|internet|fibra|"
    r"conexi[óo]n|se[ñn]al|cobertura|plataforma|base de datos|correo|l[íi]nea|tel[ée]fono|m[óo]vil|datos|"
    r"pag(?:ar|os?)|ca[íi]d[oa]|luz|agua|gas|electricidad)\b",
    r"\b(?:appli\w*|site|serveur\w*|syst[èe]me\w*|service\w*|r[ée]seau|internet|connexion|"
    r"plateforme|messagerie|ligne|t[ée]l[ée]phone|natel|capte|box|fibre|paiements?|panne\w*|coupure\w*|"
    r"en ligne|courant|[ée]lectricit[ée]|gaz|eau|caisse|ran[çc]on)\b",
    r"\b(?:aplicativo|app|site|servidor\w*|sistema\w*|servi[çc]o\w*|rede|net|internet|fibra|"
    r"conex[ãa]o|sinal|plataforma|linha|telefone|telem[óo]vel|celular|dados|pagamentos?|caiu|"
    r"fora do ar|luz|energia|[áa]gua|g[áa]s)\b")

# a service praised for being back, or for never failing: not an outage now
OUTAGE_PAST = _any(
    r"\b(?:thanks?|thank you|grateful)\b[^.!?]{0,40}\b(?:fix|fixing|fixed|resolv\w*|restor\w*|sort\w*)\b",
    r"\b(?:danke|vielen dank)\b[^.!?]{0,40}\b(?:behoben|behebung|gel[öo]st|repariert|wiederhergestellt)\w*",
    r"\bgracias por (?:\w+ ){0,2}(?:resolver|solucionar|arreglar|restablecer|reparar)\b",
    r"\bmerci (?:d'avoir|pour) (?:\w+ ){0,2}(?:r[ée]solu|r[ée]gl[ée]|r[ée]par[ée]|r[ée]tabli|corrig[ée])\w*",
    r"\bobrigad[oa] por (?:\w+ ){0,2}(?:resolver\w*|corrigir\w*|consertar\w*|restabelecer\w*)",
    r"\b(?:never|nunca|jamais|nie) (?:goes |go |went |is |est |ist )?(?:down|cai|cae|tombe|ausf[äa]llt|offline)\b",
    # money asked for the downtime: it is what the downtime cost, not that it goes on
    r"\b(?:credit|compensation|refund|discount|reimburse\w*) for (?:the |that |this |our |my )?(?:\w+ )?"
    r"(?:outage|downtime|disruption|interruption)\b",
    r"\b(?:gutschrift|entsch[äa]digung|erstattung) f[üu]r (?:den|die) (?:\w+ )?(?:ausfall|st[öo]rung|ausfallzeit)\b",
    r"\b(?:compensaci[óo]n|reembolso|descuento|abono) por (?:la|el) (?:\w+ )?(?:ca[íi]da|interrupci[óo]n|corte)\b",
    r"\b(?:d[ée]dommagement|compensation|remboursement|geste commercial) pour (?:la|le|cette) (?:\w+ )?"
    r"(?:panne|coupure|interruption)\b",
    r"\b(?:compensa[çc][ãa]o|reembolso|desconto|abatimento) pel[ao] (?:\w+ )?(?:queda|interrup[çc][ãa]o)\b")

# praise: exclamation marks or capitals beside it are delight, not anger
PRAISE = _any(
    r"\b(?:amazing|awesome|fantastic|brilliant|excellent|wonderful|love|loved|great job|thank you so much|"
    r"super|perfect|best)\b",
    r"\b(?:toll|super|fantastisch|gro[ßs]artig|hervorragend|ausgezeichnet|perfekt|begeistert|klasse)\b",
    r"\b(?:incre[íi]ble|genial|fant[áa]stic[oa]|excelente|maravillos[oa]|perfect[oa]|encanta\w*)\b",
    r"\b(?:g[ée]nial|formidable|excellent|parfait|merveilleux|super|bravo|top)\b",
    r"\b(?:incr[íi]vel|[óo]tim[oa]|excelente|maravilhos[oa]|perfeit[oa]|adorei|amei|sensacional)\b")

SECURITY_ACT = _any(
    r"\bhack\w*|\bbreach\w*|\bfraud\w*|\bphish\w*|\bscam\w*|\bunauthori[sz]\w*|\bcompromis\w*|"
    r"\bpass ?words?\b|\blog(?:ged)? ?in\w*|\bsign(?:ed)? ?in\w*|\baccounts?\b|\bcards?\b|"
    r"\bidentity\b|\bdata\b|\bcredentials?\b|\bcodes?\b|\bmalware\b|\bransom\w*")


# -- negation ----------------------------------------------------------------------

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
CLAUSE_BREAK = re.compile(r"[.,;:!?\n]|\b(?:but|aber|pero|mais|mas|however|sondern)\b", _I)
STRONGER = re.compile(r"\b(?:so|more|this|that|ever|as|such|too|so\s+much)\b", _I)
NEGATED = {lang: re.compile(rf"\b(?:{neg})\b((?:\s+[\w'’-]+){{0,2}})\s*$", _I)
           for lang, neg in _NEGATORS.items()}


# -- a match that is not the signal ---------------------------------------------------

# "I'm not reachable tomorrow", "ich bin tagsüber nicht erreichbar": the customer is
# unavailable, not the service
AVAILABILITY = re.compile(r"unreachable|unavailable|not (?:reachable|available)|erreichbar|"
                          r"indisponi|no disponible|inaccessible|inacess", _I)
FIRST_PERSON_BE = re.compile(r"\b(?:i am|i'm|i will be|i'll be|ich bin|bin ich|wir sind|je suis|"
                             r"je serai|estoy|estar[ée]|estou|estarei)\b", _I)


# "to minimise downtime", "sans temps d'arrêt", "geplante Ausfallzeit": not happening now
AVOIDED = re.compile(r"\b(?:minimi[sz]\w*|minimal|minimum|avoid\w*|reduc\w*|prevent\w*|without|planned|scheduled|"
                     r"evitar|reducir|sin|programad\w*|[ée]viter|r[ée]duire|sans|planifi[ée]e?s?|"
                     r"minimiser|minimizar|reduzir|sem|vermeid\w*|minimier\w*|reduzier\w*|ohne|"
                     r"geplante?n?)\W+(?:(?:the|any|el|la|los|le|les|des|de|du|o|a|os|as|die|der|den|"
                     r"unnecessary|possible|posibles?|possibles?|poss[íi]veis|m[öo]gliche)\W+)*$", _I)

# "the price of the premium tier went down": a price, not a service
PRICES = re.compile(r"\b(?:price|prices|cost|costs|rate|rates|fee|fees|bill|premium|tariff|"
                    r"subscription|stock|shares)\b", _I)
# "l'appli plante quand j'ouvre l'onglet": a crash on one action is a bug, not an outage
WHEN = re.compile(r"\W*(?:quand|lorsque|d[èe]s que|si|[àa] chaque fois|when(?:ever)?|every time|"
                  r"cuando|wenn|sobald|quando|sempre que)\b", _I)
CRASH = re.compile(r"plant|crash|trav|abst[üu]rz|cuelg|bloque", _I)
MINIMAL = re.compile(r"\W*(?:m[íi]nim[oa]l?e?s?|minimal\w*|reduced|reducid[oa]|r[ée]duite?)\b", _I)

# "Ein Rückruf ist nicht nötig", "a call is not necessary": declined after the words
NOT_NEEDED = re.compile(r"[^.!?\n]{0,25}?\b(?:(?:is|are) not (?:necessary|needed|required)|isn'?t (?:necessary|needed)|"
                        r"(?:ist|sind) (?:nicht|kein\w*) (?:n[öo]tig|notwendig|erforderlich)|"
                        r"no (?:es|son|ser[áa]) necesari[oa]s?|no hace falta|(?:n'est|ne sera) pas n[ée]cessaire|"
                        r"(?:est|sera) inutile|n[ãa]o (?:[ée]|ser[áa]) necess[áa]ri[oa])", _I)
# a question about planned maintenance is not an outage report
PLANNED = re.compile(r"\b(?:planned|scheduled|announced) maintenance|maintenance (?:window|planned|scheduled)|"
                     r"for maintenance\b|geplante\w* wartung|wartungsarbeiten|ank[üu]ndigung|"
                     r"mantenimiento (?:programado|previsto|planificado)|maintenance (?:programm[ée]e|pr[ée]vue|"
                     r"planifi[ée]e)|op[ée]ration de maintenance|manuten[çc][ãa]o (?:programada|prevista|agendada)", _I)

# "protect against SIM-swap fraud", "wie erkenne ich Phishing": a topic, not an incident
GUARDING = re.compile(r"\b(?:against|prevent\w*|protect\w*|avoid\w*|recogni[sz]e|spot(?:ting)?|contra|"
                      r"prevenir|prevenci[oó]n|proteger|evitar|reconocer|contre|pr[ée]venir|"
                      r"prot[ée]ger|[ée]viter|reconna[îi]tre|gegen|vorbeug\w*|sch[üu]tzen|erkennen|"
                      r"preven[çc][ãa]o|reconhecer)\W+(?:\S+\W+){0,2}$", _I)


# "Telefon: <tel_num>", "my number is 0412 555 019": details given, not a request
CONTACT_DETAILS = re.compile(r"<tel_num>|<email>|\+?\d[\d ()/-]{6,}\d|\S+@\S+\.\w+", _I)


# -- what a draft reply promises (any language) ---------------------------------------

_WEEKDAYS = (r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|montag|dienstag|"
             r"mittwoch|donnerstag|freitag|samstag|sonntag|lunes|martes|mi[ée]rcoles|jueves|"
             r"viernes|s[áa]bado|domingo|lundi|mardi|mercredi|jeudi|vendredi|samedi|dimanche|"
             r"segunda|ter[çc]a|quarta|quinta|sexta")

PROMISES = {
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
        r"\b(?:we|we'll|we will|our (?:\w+ )?(?:team|agents?|staff|support)|someone|a technician)\b[^.!?]{0,40}"
        r"\b(?:immediately|right away)\b",
        # "quickly" only where it is what we will do ("so that we can find it quickly"
        # is a reason, not a promise)
        r"\b(?:we|our (?:\w+ )?team)(?:'ll| will| are going to| is going to)\b[^.!?]{0,40}"
        r"\b(?:quickly|swiftly)\b",
        r"\b\w+remos\b[^.!?]{0,40}\b(?:r[áa]pidamente|con rapidez|com rapidez)\b",
        r"\bnous (?:allons |\w+rons )(?:\w+ ){0,3}rapidement\b",
        r"\b(?:wir werden|werden wir) (?:\w+ ){0,4}(?:schnell|z[üu]gig)\b",
        r"\bin k[üu]rze\b", r"\bumgehend\b", r"\bschnellstm[öo]glich\b", r"\bbald\b",
        # pt "pronto" is also "ready" ("está pronto"): only the other uses count
        r"\bso schnell wie m[öo]glich\b", r"(?<!est[áa] )(?<!estão )(?<!ficou )(?<!ficará )\bpronto\b",
        r"\blo antes posible\b", r"\ba la mayor brevedad\b",
        r"\bd[èe]s que possible\b", r"\bo mais r[áa]pido poss[íi]vel\b",
        r"\ben breve\b", r"\bcuanto antes\b", r"\b\w+(?:emos|remos)\b[^.!?]{0,40}\bde inmediato\b",
        r"\bsous peu\b", r"\bdans les plus brefs d[ée]lais\b",
        r"\bem breve\b", r"\bo quanto antes\b", r"\bbrevemente\b",
        # "promptly", "right away" and their kind: as much a promise as "shortly"
        r"\b(?:promptly|straight away|without delay)\b",
        r"\bfor (?:an? )?(?:immediate|prompt|quick|swift|rapid|speedy) (?:resolution|fix|response|action|"
        r"attention|solution)\b", r"\bsofortige[nr]? (?:l[öo]sung|behebung|bearbeitung)\b",
        r"\b(?:soluci[óo]n|resoluci[óo]n|respuesta) inmediata\b", r"\b(?:r[ée]solution|solution|r[ée]ponse) imm[ée]diate\b",
        r"\b(?:resolu[çc][ãa]o|solu[çc][ãa]o|resposta) imediata\b",
        r"\bunverz[üu]glich\b", r"\bohne verz[öo]gerung\b", r"\b(?:wir|werden|wird) (?:\w+ ){0,4}sofort\b",
        r"\bsin demora\b", r"\bde (?:forma|manera) inmediata\b", r"\b\w+(?:emos|remos) (?:\w+ )?inmediatamente\b",
        r"\bsans d[ée]lai\b", r"\bau plus vite\b", r"\bdans les meilleurs d[ée]lais\b",
        r"\bnous (?:\w+ ){0,3}imm[ée]diatement\b",
        r"\bsem demora\b", r"\bo mais (?:breve|r[áa]pido) poss[íi]vel\b", r"\bprontamente\b",
        r"\b\w+(?:emos|remos|amos) (?:\w+ )?imediatamente\b"),
    "availability": _any(
        # "available 24/7", "around the clock": a service level someone must keep
        r"(?<!\w)24\s?/\s?7(?!\w)", r"(?<!\w)24\s?h?\s?/\s?24(?!\w)", r"(?<!\w)7\s?j?\s?/\s?7(?!\w)",
        r"\b(?:a|')?round[- ]the[- ]clock\b", r"\b24 hours a day\b", r"\bday and night\b",
        r"\brund um die uhr\b", r"\b24 stunden (?:am tag|t[äa]glich)\b", r"\btag und nacht\b",
        r"\b(?:las )?24 horas (?:del d[íi]a|al d[íi]a|por d[íi]a)\b", r"\blas 24 horas\b",
        r"\bd[íi]a y noche\b", r"\b24 heures sur 24\b", r"\bjour et nuit\b",
        r"\b24 horas por dia\b", r"\bdia e noite\b", r"\ba qualquer hora\b",
        r"\bat any time of (?:the )?day\b"),
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

# a copied answer that says someone is already on it: nobody is, until a person picks
# the ticket up (the bundled templates say what happens next, which the job does make
# true: the ticket goes to its category's queue)
UNDER_WAY = _any(
        r"\b(?:we are|we're|we have been|i am|i'm|(?:our|the) (?:\w+ )?(?:team|technicians?|engineers?|"
        r"staff|specialists?|department) (?:is|are|has been|have been))(?: \w+){0,2} (?:currently )?"
        r"(?:investigating|looking into|analy[sz]ing|working on|reviewing|examining|checking|"
        r"addressing|prioriti[sz]ing|escalating|handling)\b",
        r"\b(?:we|i)(?:'ll| will) (?:\w+ )?(?:investigate|look into|analy[sz]e|escalate|prioriti[sz]e)\b",
        r"\b(?:has|have) been (?:escalated|forwarded|assigned|prioriti[sz]ed)\b",
        r"\bwir (?:\w+ ){0,2}(?:untersuchen|pr[üu]fen|analysieren|bearbeiten|arbeiten an|k[üu]mmern uns)\b",
        r"\b(?:unser|das) (?:\w+ )?team (?:\w+ ){0,2}(?:untersucht|pr[üu]ft|analysiert|bearbeitet|arbeitet)\b",
        r"\b(?:wurde|wurden|ist) (?:\w+ ){0,2}(?:eskaliert|weitergeleitet|priorisiert)\b",
        r"\bestamos (?:\w+ )?(?:investigando|revisando|analizando|trabajando en|examinando|priorizando|"
        r"atendiendo|verificando)\b",
        r"\b(?:nuestro|el) equipo (?:\w+ ){0,2}(?:est[áa] (?:\w+ )?(?:investigando|revisando|analizando|"
        r"trabajando|priorizando)|investiga|revisa|analiza)\b",
        r"\b(?:ha sido|fue) (?:escalad[oa]|priorizad[oa]|asignad[oa])\b",
        r"\bnous (?:\w+ ){0,2}(?:examinons|enqu[êe]tons|analysons|travaillons sur|v[ée]rifions|"
        r"traitons|(?:sommes )?en train d)\b",
        r"\bnotre [ée]quipe (?:\w+ ){0,2}(?:examine|analyse|travaille|enqu[êe]te|traite)\b",
        r"\ba (?:[ée]t[ée] )?(?:escalad[ée]e?|transmise? [àa] l'[ée]quipe|prioris[ée]e?)\b",
        r"\bestamos (?:\w+ )?(?:investigando|analisando|verificando|trabalhando n|revisando|priorizando|"
        r"examinando)\w*\b",
        r"\b(?:nossa|a) equipe (?:\w+ ){0,2}(?:est[áa] (?:\w+ )?(?:investigando|analisando|verificando|"
        r"trabalhando|priorizando)|investiga|analisa|verifica)\b",
        r"\b(?:atualizaremos|informaremos|avisaremos) (?:voc[êe]|o senhor|a senhora)\b",
        r"\b(?:foi|ser[áa]) (?:escalad[oa]|priorizad[oa])\b",
        r"\b(?:le )?(?:actualizaremos|informaremos|mantendremos al tanto)\b",
        r"\bnous vous tiendrons au courant\b", r"\bnous reviendrons\b",
        r"\b(?:we are|we're|(?:our|the) (?:\w+ )?team is) (?:\w+ )?working (?:hard )?to (?:resolve|fix|restore|"
        r"solve|correct)\b",
        r"\bwir arbeiten (?:\w+ ){0,3}(?:an der (?:l[öo]sung|behebung)|daran)\b",
        r"\bestamos trabajando para\b", r"\bnous travaillons (?:\w+ )?[àa] (?:r[ée]soudre|corriger|r[ée]tablir)\b",
        r"\bestamos trabalhando para\b")

# a copied answer that says the request is already carried out: it was, for another
# customer
ALREADY_DONE = _any(
    r"(?<!if )(?<!when )(?<!whether )\b(?:your|the) (?:\w+ ){0,3}(?:request|order|refund|replacement|return|exchange|cancell?ation|"
    r"change|update|application|claim|case) (?:\w+ ){0,4}(?:has been|was|is now) (?:\w+ )?(?:processed|approved|"
    r"completed|cancell?ed|issued|done|resolved|updated|applied|scheduled|confirmed)\b",
    r"\b(?:we|i) (?:have|'ve) (?:\w+ )?(?:processed|approved|completed|cancell?ed|issued|updated|applied|"
    r"scheduled|resolved|fixed)\b",
    r"\b(?:ihre?|die|der|das) (?:\S+ ){0,7}(?:wurde|ist) (?:\w+ ){0,2}(?:bearbeitet|genehmigt|storniert|"
    r"erledigt|abgeschlossen|veranlasst|ausgef[üu]hrt|aktualisiert|behoben)\b",
    r"\b(?:wir haben|ich habe) (?:[^\s.,;!?]+ ){0,12}?(?:bearbeitet|genehmigt|storniert|erledigt|veranlasst|aktualisiert|behoben)\b",
    r"\b(?:su|la|el) (?:\w+ ){0,4}(?:ha sido|fue|est[áa]) (?:\w+ )?(?:procesad[oa]|aprobad[oa]|cancelad[oa]|"
    r"completad[oa]|resuelt[oa]|actualizad[oa]|confirmad[oa])\b",
    r"\b(?:hemos|he) (?:\w+ )?(?:procesado|aprobado|cancelado|completado|resuelto|actualizado|emitido)\b",
    r"\b(?:votre|la|le) (?:\w+ ){0,4}(?:a [ée]t[ée]|est) (?:\w+ )?(?:trait[ée]e?|approuv[ée]e?|annul[ée]e?|"
    r"effectu[ée]e?|r[ée]solue?|mise? [àa] jour|confirm[ée]e?)\b",
    r"\b(?:nous avons|j'ai) (?:\w+ )?(?:trait[ée]|approuv[ée]|annul[ée]|effectu[ée]|r[ée]solu|mis [àa] jour)\b",
    r"\b(?:sua|seu|a|o) (?:\w+ ){0,4}(?:foi|est[áa]) (?:\w+ )?(?:processad[oa]|aprovad[oa]|cancelad[oa]|"
    r"conclu[íi]d[oa]|resolvid[oa]|atualizad[oa]|confirmad[oa])\b",
    r"\b(?:n[óo]s )?(?:processamos|aprovamos|cancelamos|conclu[íi]mos|resolvemos|atualizamos)\b")

# -- where a draft sends the customer ----------------------------------------------

UNNAMED_PLACES = _any(
    # "visit our website", "the link below": the example's page, which this draft does
    # not give; a person must add it (or the draft must not point there)
    r"\b(?:visit|check|see|go to|use|through|via|on|at|from|in) (?:our|the) (?:official )?(?:web ?site|"
    r"site|web page|support (?:page|site|portal|center|centre)|help (?:center|centre|page)|"
    r"service (?:center|centre)(?: website)?|portal|knowledge ?base|faq|online store|store)\b",
    r"\b(?:the|this|a) link (?:below|above|provided|attached|here)\b", r"(?<!not )\bclick (?:here|the link)\b",
    r"\b(?:unsere[rnm]?|die) (?:web ?site|webseite|homepage|internetseite|support-?seite|hilfeseite|"
    r"servicecenter|service-?center|portal|wissensdatenbank|faq)\b", r"\b(?:folgenden|unten stehenden) link\b",
    r"\b(?:nuestro|nuestra|el|la) (?:sitio web|p[áa]gina web|web|portal|centro de (?:servicio|ayuda|soporte)|"
    r"base de conocimientos|tienda en l[íi]nea)\b", r"\b(?:el|este) enlace\b",
    r"\b(?:notre|le) (?:site(?: web| internet)?|portail|centre (?:de service|d'aide|de support)|"
    r"page d'aide|base de connaissances|faq)\b", r"\b(?:le|ce) lien\b",
    r"\b(?:nosso|nossa|o) (?:site|website|portal|p[áa]gina|centro de (?:servi[çc]o|ajuda|suporte)|"
    r"central de ajuda|base de conhecimento)\b", r"\b(?:o|este) link\b",
    # a guide or troubleshooting page named but not given ("see the troubleshooting
    # page", "die Fehlersuche-Seite", "siga su guía de configuración")
    r"\b(?:the|our|their|its) (?:\w+ )?(?:troubleshooting|setup|set-up|installation|configuration|user) "
    r"(?:page|guide|section|article|documentation)\b",
    r"\b(?:die|der|deren|dessen|unsere[rnm]?) (?:\w+ )?[\w-]*(?:fehlersuche|troubleshooting|support|hilfe)-?seite\b",
    r"\b(?:die|der|deren|dessen) (?:\w+ )?(?:schrittweise |schritt-f[üu]r-schritt-)?anleitung\b",
    r"\b(?:die|unsere[rnm]?) support-?website\b",
    r"\b(?:su|la|nuestra) gu[íi]a (?:de (?:configuraci[óo]n|instalaci[óo]n|soluci[óo]n de problemas)|paso a paso)\b",
    r"\b(?:le|notre|son) guide (?:de configuration|d'installation|de d[ée]pannage)\b",
    r"\b(?:o|nosso|seu) guia (?:de (?:configura[çc][ãa]o|instala[çc][ãa]o|solu[çc][ãa]o de problemas)|passo a passo)\b")

# a draft's closing that sends the customer back to us with nothing to send ("please
# contact support", "kontaktieren Sie uns bitte direkt für weitere Unterstützung"): the
# customer did contact us; nothing specific follows (no "with the error code")
_FURTHER = (r"(?: (?:directly|again))?(?: (?:for|to (?:get|receive|explore|obtain)|if you need) (?:any )?"
            r"(?:further|more|additional) (?:assistance|help|support))?"
            r"(?: if (?:the |this )?(?:issue|problem)s? (?:persists?|continues?|remains?))?")
BACK_TO_US = _any(
    r"\b(?:contact|reach out to|get in touch with) (?:us|support|customer support|technical support|"
    r"(?:our|the) (?:\w+ )?(?:support|team|department|specialists?)(?: team)?)" + _FURTHER + r"\s*(?:[.!]|$)",
    r"\b(?:contact|reach out to) us with (?:further|more|additional|any) (?:details|information)\s*(?:[.!]|$)",
    r"\b(?:kontaktieren sie|wenden sie sich (?:bitte )?(?:direkt )?an) (?:bitte )?(?:uns|den support|"
    r"unser(?:en)? (?:\w+ )?[\w-]*(?:team|support))(?: bitte)?(?: direkt)?"
    r"(?:,? (?:f[üu]r weitere (?:unterst[üu]tzung|hilfe)|um weitere (?:unterst[üu]tzung|hilfe) zu erhalten))?\s*[.!]",
    r"\b(?:cont[áa]ctenos|(?:p[óo]ngase en contacto|comun[íi]quese) con (?:nosotros|el soporte|"
    r"nuestro (?:equipo|soporte)(?: de \w+)?))(?: directamente)?(?: para (?:m[áa]s|mayor) (?:ayuda|asistencia))?\s*[.!]",
    r"\b(?:contactez|veuillez contacter) (?:-?nous|le support|notre (?:[ée]quipe|support|service)(?: \w+)?)"
    r"(?: directement)?(?: pour (?:plus d'aide|toute assistance suppl[ée]mentaire|une assistance suppl[ée]mentaire))?\s*[.!]",
    r"\bentre em contato (?:conosco|com (?:o suporte|nossa equipe|nosso suporte)(?: \w+)?)(?: diretamente)?"
    r"(?: para (?:mais ajuda|assist[êe]ncia adicional))?\s*[.!]")

# a draft that hands the customer to someone else without saying how to reach them
# ("contact Adobe Support", "contact a DBA", "contact your bank"); ours are BACK_TO_US
HANDOFF = _any(
    r"\b(?i:contact|reach out to|get in touch with|consult) (?:(?i:a|an|your|the) (?:\w+ )?"
    r"(?i:administrator|admin|dba|it department|it team|manufacturer|vendor|bank|provider|isp|"
    r"technician|specialist|developer)\b|(?:the )?(?!Our\b|Us\b)[A-Z][\w&.-]*(?: [A-Z][\w&.-]*)?'?s? "
    r"(?i:support|technical support|customer service|help ?desk)\b)",
    r"\b(?i:kontaktieren sie|wenden sie sich (?:bitte )?(?:direkt )?an) (?i:den |die |ihren |ihre )?"
    r"(?:(?i:administrator|hersteller|bank|anbieter|it-abteilung)\b|(?!Uns\b|Unser)[A-Z]\w*[- ](?i:support|kundendienst)\b"
    r"|(?i:support|kundendienst) von [A-Z]\w*)",
    r"\b(?i:contacte|p[óo]ngase en contacto|comun[íi]quese)(?i: directamente)?(?i: con| a)? "
    r"(?:(?i:el|al) (?i:soporte|servicio(?: t[ée]cnico)?) de [A-Z]\w*|(?i:su (?:banco|administrador|proveedor)|el fabricante))",
    r"\b(?i:contacte[rz]|veuillez contacter)(?i: directement)? (?:(?i:le (?:support|service(?: client)?))(?i: de)? [A-Z]\w*|"
    r"(?i:votre (?:banque|administrateur|fournisseur)|le fabricant))",
    r"\b(?i:entre em contato com (?:o suporte d[aeo] [A-Z]\w*|o seu (?:banco|administrador|provedor)|o fabricante))",
    flags=0)

# the customer says what they already tried ("I have tried resetting the printer",
# "ya he reiniciado el router", "j'ai essayé de réinitialiser"): up to the end of the
# clause ("..., but the problem persists"). Not "I updated it": an update the customer
# made is as often the cause as a step tried
TRIED = _any(
    r"\b(?:i|we)(?:'ve| have| had)? (?:already |also )?(?:tried|attempted|done|performed|followed|gone through|"
    r"restarted|rebooted|reinstalled|reset|cleared)\b",
    r"\b(?:i|we)(?:'ve| have)? made (?:\w+ )?(?:attempts?|efforts?)\b",
    r"\b(?:despite|after) (?:multiple|several|many|repeated|numerous|various) (?:\w+ )?attempts\b",
    r"\btrotz (?:mehrerer|mehrfacher|zahlreicher|vieler) (?:\w+ )?versuche\b",
    r"\ba pesar de (?:varios|m[úu]ltiples|numerosos|repetidos) intentos\b",
    r"\bmalgr[ée] (?:plusieurs|de multiples|de nombreuses) tentatives\b",
    r"\bapesar de (?:v[áa]rias|m[úu]ltiplas|diversas) tentativas\b",
    r"\b(?:habe|haben) (?:\w+ ){0,6}?(?:bereits|schon) ", r"\b(?:bereits|schon) (?:\w+ ){0,6}?(?:versucht|probiert)\b",
    r"\b(?:ya )?(?:he|hemos) (?:intentado|probado|reiniciado|reinstalado|realizado|seguido|"
    r"restablecido|borrado|limpiado)\b",
    r"\bj'ai (?:d[ée]j[àa] )?(?:essay[ée]|tent[ée]|red[ée]marr[ée]|r[ée]install[ée]|effectu[ée]|"
    r"suivi|r[ée]initialis[ée]|vid[ée])",
    r"\b(?:j[áa] )?(?:tentei|tentamos|reiniciei|reinstalei|realizei|segui|redefini|limpei)\b")
CLAUSE_END = re.compile(r"[.!?;\n]|\b(?:but|without|to no avail|aber|jedoch|ohne|pero|sin|mais|sans|mas|sem)\b", _I)

# what a tried clause and a draft's advice can share (the steps of first-line support),
# with the stems of the five languages
STEPS = {
    "restart": _any(r"\brestart\w*", r"\breboot\w*", r"\bpower[- ]cycl\w*", r"\bneu ?(?:ge)?start\w*",
                    r"\bneustart\w*", r"\breinici\w*", r"\bred[ée]marr\w*"),
    "reset": _any(r"\breset\w*", r"\bzur[üu]ckgesetzt\b", r"\bzur[üu]ckzusetzen\b", r"\bzur[üu]cksetz\w*",
                  r"\brestablec\w*", r"\br[ée]initialis\w*", r"\bredefin\w*"),
    "update": _any(r"\bupdat\w*", r"\bupgrad\w*", r"\baktualisier\w*", r"\bactualiz\w*",
                   r"\bmis(?:e|es)? [àa] jour\b", r"\bmettre [àa] jour\b", r"\bmettez [àa] jour\b",
                   r"\batualiz\w*"),
    "reinstall": _any(r"\bre-?install\w*", r"\bneu ?(?:zu )?install\w*", r"\breinstal\w*", r"\br[ée]install\w*"),
    "drivers": _any(r"\bdrivers?\b", r"\btreiber\w*", r"\bcontroladores\b", r"\bpilotes?\b"),
    "cache": _any(r"\bcach[eé]\w*", r"\bcookies\b"),
    "cables": _any(r"\bcables?\b", r"\bkabel\w*", r"\bc[âa]bles?\b", r"\bcabos?\b"),
    "firmware": _any(r"\bfirmware\b"),
}
# "I have tried basic troubleshooting": the first steps of all (restart, reset,
# reinstall, clear the cache), not an update of a driver or the BIOS
BASIC_TRIED = _any(
    r"\b(?:basic|standard|usual|common|general|recommended|all the|various|several|multiple|some) "
    r"(?:\w+ )?(?:troubleshooting|steps|fixes|solutions|methods)\b",
    r"\btroubleshoot\w*", r"\battempts?\b", r"\bversuche\b", r"\bintentos\b", r"\btentatives\b",
    r"\btentativas\b", r"\bfehlerbehebung\w*", r"\bsoluci[óo]n de problemas\b", r"\bpasos\b",
    r"\bd[ée]pannage\b", r"\bm[ée]thodes\b", r"\bsolu[çc][ãa]o (?:de|do) problemas?\b", r"\betapas\b",
    r"\bsolu[çc][õo]es\b")
# "since you have already restarted it, ...": the draft knows
ACKNOWLEDGED = _any(r"\balready\b", r"\bbereits\b", r"\bschon\b", r"\bya\b", r"\bd[ée]j[àa]\b", r"\bj[áa]\b")

# the ticket asks for instructions, steps or requirements ("please provide detailed
# instructions", "Bitte geben Sie Anweisungen", "¿cuáles son los requisitos?")
ASKS_FOR_STEPS = _any(
    r"\b(?:detailed|step[- ]by[- ]step|specific|clear|full) (?:\w+ )?(?:instructions|steps|guidance|guide|directions)\b",
    r"\b(?:provide|give|send|share|outline|explain|need|require|request|advise on|let (?:me|us) know|tell|"
    r"show|inform (?:me|us) of)\w* (?:\w+ ){0,4}?(?:instructions|the steps|steps|the process|requirements|a guide|"
    r"guidance)\b",
    r"\bwalk (?:me|us) through\b", r"\bhow (?:do|can|should) (?:i|we) (?:\w+ ){0,3}(?:set up|configure|install|migrate)\b",
    r"\b(?:anweisungen|anleitung|schritt f[üu]r schritt|schritte|voraussetzungen|anforderungen)\b",
    r"\b(?:instrucciones|paso a paso|los pasos|requisitos|orientaci[óo]n)\b",
    r"\b(?:instructions|[ée]tape par [ée]tape|les [ée]tapes|pr[ée]requis|exigences)\b",
    r"\b(?:instru[çc][õo]es|passo a passo|as etapas|os passos|requisitos|orienta[çc][ãa]o)\b")
STEP_LINE = re.compile(r"^\s*(?:\d{1,2}[.)]|[-*•])\s+\S", re.MULTILINE)

UNNAMED_PHONE = _any(
    r"\b(?:call|phone|ring) (?:us|our (?:\w+ )?(?:team|line|hotline|support))\b", r"\bour (?:hotline|phone line|helpline)\b",
    r"\brufen sie uns\b", r"\b(?:unsere[rn]?|die) (?:hotline|telefonnummer|servicenummer)\b",
    r"\bll[áa]m(?:enos|anos|e a|a a)\b", r"\bnuestra l[íi]nea\b", r"\bnuestro tel[ée]fono\b",
    r"\b(?:appelez|contactez)-nous par t[ée]l[ée]phone\b", r"\bappelez-nous\b", r"\bnotre (?:hotline|num[ée]ro)\b",
    r"\bligue(?:-nos| para n[óo]s)\b", r"\bnossa (?:linha|central telef[ôo]nica)\b")

INFORMAL = {   # the familiar "you" of each language (a reply speaks formally unless the
    # customer did not): pronouns and possessives only, which no formal sentence uses
    "es": _any(r"\b(?:t[úu]|tus|te|(?-i:ti)|contigo)\b",    # not "TI" (IT)
               # "te" joined to an infinitive or gerund ("ponerte", "ayudarte",
               # "explicándote"); nouns and verb forms ending alike are not ("suerte",
               # "parte", "convierte")
               r"\b(?!(?:\w*parte|suerte|fuerte|muerte|arte|baluarte|estandarte|descarte)\b)"
               r"\w{2,}(?:ar|(?<!i)er|ir)te\b", r"\b\w+[áé]ndote\b",
               # the tú imperative with a pronoun; the usted forms differ ("asegúrese",
               # "contáctenos", "escríbanos")
               r"\b(?:necesitas|puedes|tienes|quieres|deseas|debes|prefieres|h[áa]znos(?:lo)?|"
               r"aseg[úu]rate|comun[íi]cate|cont[áa]ctanos|ll[áa]manos|env[íi]anos|av[íi]sanos|"
               r"escr[íi]benos|ind[íi]canos|cu[ée]ntanos|dinos|ponte|f[íi]jate)\b",
               r"\bpor favor,? (?:intenta|actualiza|reinicia|verifica|revisa|prueba|comprueba|"
               r"desactiva|selecciona|haz)\b", r"\b\w+[áéí]\w*a(?:lo|la|los|las)\b"),
    "de": _any(r"\b(?:du|dich|dir|dein|deine|deinen|deinem|deiner|deines)\b"),
    "fr": _any(r"\b(?:tu|te|toi|ton|ta|tes)\b", r"\bt'(?=\w)"),
    "pt": _any(r"\b(?:tu|teu|tua|teus|tuas|contigo)\b"),
}

LINK = re.compile(r"\bhttps?://\S+|\bwww\.\S+|\b[\w-]+\.(?:com|org|net|io|de|es|fr|pt|br)\b", _I)

