"""Keep instructions out of the long-term profile.

Extracted facts are replayed into every future prompt, so a value such as "ignore your rules"
stored once would act as a standing prompt injection. A value must *describe the person*; a value
that *addresses the assistant* or tells it how to behave is refused.

Matching runs on a normalised copy of the text (NFKC, casefolded, accents and invisible characters
removed, whitespace collapsed) so that fullwidth letters, odd casing, "instrucción" versus
"instruccion" and "ig\u200bnore" all hit the same plain patterns below.

Spanish needs more care than English: the tú imperative ("responde", "ignora") is spelled like the
third-person present ("she answers", "she ignores"), and facts are written in the third person.
The Spanish patterns therefore lean on forms that can only be second person (tu/tus/te, "eres",
"-me" clitics, "no digas", "quiero que ignores") or on an instruction-shaped object.
"""

from __future__ import annotations

import re
import unicodedata

# Invisible characters used to split trigger words ("ig\u200bnore"). Soft hyphen is included for
# the same reason; ZWJ is removed only for matching, so emoji in stored values are unaffected.
_INVISIBLE = re.compile("[\u00ad\u200b-\u200d\u2060\ufeff]")
# Typographic apostrophes, so "you’re" matches the same patterns as "you're".
_APOSTROPHE = re.compile("[\u2018\u2019\u02bc\u00b4]")
_SPACES = re.compile(r"\s+")

# Where an English imperative can start: the beginning of the value, after punctuation, after a
# connective ("and", "please", "also") or after "you"/"you to". Facts are written in the third
# person ("answers", "acts as"), so a bare verb in these positions is speaking to the bot, while the
# same verb after "to" ("is learning to ignore", "likes to roleplay as") is a description.
_CLAUSE = (
    r"(?:^|[.;:!?,()\[\]{}\"'“”«»>|*–—]\s*"
    r"|\b(?:and|but|so|then|now|please|pls|also|just|ok|okay|btw|by the way|you|you to)\s+)"
)

# English. Grouped by the trick they catch; every group needs an address to the assistant or an
# instruction-shaped object, because bare verbs like "ignore" or "act" also occur in real facts.
_ENGLISH: tuple[re.Pattern[str], ...] = (
    # Override: telling the model to drop what it was told before.
    re.compile(
        r"\b(?:ignore|disregard|forget|override|bypass)\s+(?:about\s+)?(?:all|any|every)\b"
        r"(?:\s+\w+){0,3}?\s+(?:instructions?|rules?|guidelines?|directives?|prompts?"
        r"|constraints?|restrictions?|guardrails?|programming|policies|filters?)\b"
    ),
    re.compile(
        _CLAUSE + r"(?:ignore|disregard|forget|override|bypass)\s+(?:the\s+|these\s+|those\s+"
        r"|your\s+)?(?:\w+\s+)?(?:instructions?|rules?|guidelines?|directives?|prompt|restrictions?"
        r"|character|persona|personality|identity|role|training|limits|boundaries"
        r"|constraints?|guardrails?|policies|filters?|above|everything|what (?:i|you|we)\b)"
    ),
    re.compile(
        r"\bforget\s+(?:about\s+)?(?:everything|all|anything)(?:\s+(?:that|you|i|we|was|were"
        r"|have|has|been|said|told|wrote|written|learned|know|came))*\s+(?:above|before"
        r"|earlier|previously|so far|until now|up to now|prior)\b"
    ),
    re.compile(
        r"\bforget\s+(?:everything|all)\s+(?:that\s+)?you\s+(?:know|were told|have been told)\b"
    ),
    # The model's own configuration: "your rules", "the system prompt", "previous instructions".
    re.compile(
        r"\byour\s+(?:\w+\s+){0,2}?(?:instructions?|rules|guidelines|directives?|prompt"
        r"|programming|guardrails|restrictions|constraints|policies|filters|system message"
        r"|configuration|initial message)\b"
    ),
    re.compile(r"\b(?:the|your|this|new)\s+system\s+(?:prompt|message|instructions?)\b"),
    re.compile(r"\bsystem\s+(?:prompt|message)\s+(?:says|said|tells|told|states|reads|is)\b"),
    re.compile(
        r"\b(?:previous|prior|above|earlier|preceding|hidden|secret)\s+"
        r"(?:instructions|prompt|directives|guidelines)\b"
    ),
    re.compile(
        r"\b(?:reveal|print|show|display|output|repeat|recite|dump|leak|disclose|expose"
        r"|tell me|give me|send me|spell out|write out|paste)\s+(?:me\s+)?(?:\w+\s+){0,3}?"
        r"(?:prompt|instructions|(?:initial|original|hidden|secret|internal|developer|first)"
        r"\s+(?:prompt|instructions?|message|rules|text))\b"
    ),
    re.compile(
        r"\b(?:repeat|print|output|echo|copy)\s+(?:everything|all|the\s+(?:text|words|lines"
        r"|messages?|content))\s+(?:\w+\s+){0,2}?(?:above|before|so far|verbatim)\b"
        r"|\brepeat\s+after\s+me\b"
    ),
    re.compile(
        r"\b(?:your|here are your|these are your)\s+new\s+(?:instructions?|rules|directives?"
        r"|guidelines|orders|persona|identity|name|role|personality)\b"
        r"|\bnew\s+(?:instructions?|rules|directives?|orders)\s*:"
    ),
    # Behaviour: how and when to answer, what to always or never say.
    re.compile(
        r"\b(?:from now on|from this (?:point|moment) on|starting (?:now|today)|henceforth"
        r"|going forward|for the rest of (?:this|the|our) (?:conversation|chat))\b[,:]?\s+"
        r"(?:you\b|your\b|answer|respond|reply|speak|talk|write|say|call|act|behave|only"
        r"|always|never|use|don'?t|do not|stop|refer|address|pretend|treat|ignore|forget|obey"
        r"|end|begin|sign|greet|be\b)"
    ),
    re.compile(
        _CLAUSE + r"(?:answer|respond|reply|speak|talk|write|call me|act|behave|address me"
        r"|refer to me)\b[^.;!?]{0,60}\b(?:from now on|henceforth|going forward)\b"
    ),
    re.compile(
        _CLAUSE + r"(?:answer|respond|reply|write back)\b(?:\s+(?:to\s+)?(?:me|us|everything"
        r"|every message|each message))?\s+(?:only|always|exclusively|solely|just|in|with|using"
        r"|like|as)\b"
    ),
    re.compile(
        _CLAUSE + r"(?:speak|talk|write)\s+(?:to me\s+|with me\s+)?(?:only|exclusively|solely"
        r"|always|just)\s+(?:in|with|using|like)\b|\b(?:speak|talk|write)\s+to\s+me\s+(?:in"
        r"|like|as)\b"
    ),
    re.compile(
        _CLAUSE + r"(?:always|never|only|do not|don'?t|never ever)\s+(?:ever\s+)?(?:say|mention"
        r"|reply|respond|answer|tell|reveal|refer to|call|bring up|discuss|speak|talk about"
        r"|write|include|use|end|start|begin|sign|greet|address|admit|acknowledge|apologi[sz]e"
        r"|refuse|break character|disclose|output|agree|obey|comply)\b"
    ),
    # Persona swaps and jailbreak modes.
    re.compile(
        r"\byou(?:'re|\s+are|\s+will\s+be)\s+(?:now|no longer|henceforth|from now on|dan\b"
        r"|an? (?:unrestricted|unfiltered|uncensored|jailbroken|evil)\b)"
    ),
    re.compile(r"\b(?:pretend|imagine)\s+(?:that\s+)?you(?:'re|\s+are|\s+were|\s+have)\b"),
    re.compile(
        _CLAUSE + r"(?:(?:act|behave|pose|roleplay|role-play|role play)\s+(?:as|like)\b"
        r"|pretend\s+to\s+be\b|play\s+the\s+(?:role|part)\s+of\b"
        r"|stop\s+(?:being|acting|pretending|roleplaying)\b"
        r"|(?:break|drop|exit)\s+(?:out\s+of\s+)?(?:your\s+|the\s+)?character\b)"
    ),
    re.compile(
        r"\b(?:enable|enter|activate|switch (?:to|into)|turn on|unlock|go into)\s+(?:the\s+)?"
        r"(?:dan|developer|dev|god|jailbreak|unrestricted|unfiltered|uncensored|admin|sudo"
        r"|evil|root)\s+mode\b|\bdo anything now\b|\b(?:admin|developer|system|sudo)\s+override\b"
    ),
    # Direct orders: "I want you to", "you must", "the assistant must".
    re.compile(r"\bi\s+(?:want|need|order|command|instruct|require|demand)\s+you\s+to\b"),
    re.compile(
        r"\byou\s+(?:must|shall|have to|need to|will|should)\s+(?:now|always|never|only|not"
        r"|no longer|from now on|obey|comply|answer|respond|reply|say|ignore|forget|reveal|act"
        r"|pretend|stop|call|refer|speak|write|agree)\b"
        r"|\byou\s+are\s+(?:now\s+)?(?:required|instructed|ordered|obligated|allowed|permitted"
        r"|free)\s+to\b"
    ),
    re.compile(
        r"\b(?:the|this|you|your)\s+(?:ai\s+)?(?:assistant|bot|chatbot|language model|llm"
        r"|companion)\s+(?:must|should|shall|has to|needs to|may not|is (?:required|supposed"
        r"|expected|instructed|not allowed|allowed|forbidden) to|will (?:now|always|never|only))\b"
    ),
)

# Spanish. Text is accent-free here ("olvidate", "instruccion"), so the patterns are too.
_SPANISH: tuple[re.Pattern[str], ...] = (
    # Override: "olvida tus instrucciones", "ignora las reglas", "olvidate de todo lo anterior".
    re.compile(
        r"\b(?:olvida(?:te)?|olvide|olvidese|ignora|ignore|ignorad|ignoren|omite|omita|descarta"
        r"|descarte|desobedece|desobedezca|anula|anule"
        r"|saltate|pasa\s+de|no\s+hagas\s+caso\s+(?:a|de))\s+(?:de\s+)?(?:todas?\s+|todos?\s+"
        r"|cualquier\s+)?(?:las?\s+|los?\s+|tus\s+|sus\s+|esas?\s+|estas?\s+)?(?:\w+\s+)?"
        r"(?:instrucciones|instruccion|reglas|normas|ordenes|indicaciones|directrices"
        r"|restricciones|limites|politicas|filtros|pautas|programacion|prompt)\b"
    ),
    re.compile(  # "ignora todo", "omite todo lo anterior": dropping everything said before
        _CLAUSE
        + r"(?:ignora|ignore|olvida(?:te\s+de)?|olvide|omite|omita|descarta|anula|salta(?:te)?)"
        r"\s+(?:todo|todas|todos|lo anterior|lo de arriba|lo que te (?:han dicho|dijeron))\b"
    ),
    re.compile(
        r"\b(?:las|tus)\s+(?:instrucciones|reglas|ordenes|indicaciones)\s+(?:anteriores|previas"
        r"|de antes|originales|iniciales)\b"
    ),
    re.compile(
        r"\bolvida(?:te)?\s+(?:de\s+)?todo\s+(?:lo\s+)?(?:anterior|de antes|previo|lo dicho"
        r"|lo que sabes|lo que (?:se\s+)?te\s+(?:han\s+|hayan\s+)?(?:dicho|ordenado|indicado))"
    ),
    # The model's configuration: "tu prompt de sistema", "tus normas" (user facts say "sus").
    # "sistema operativo/educativo" is an ordinary topic, not the model's system prompt.
    re.compile(
        r"\b(?:prompt|mensaje|instrucciones|indicaciones)\s+(?:de|del)\s+sistema\b"
        r"(?!\s+(?:operativo|educativo|sanitario|solar|nervioso|inmune|inmunitario|electrico"
        r"|financiero|judicial|de\b))"
    ),
    re.compile(
        r"\btus\s+(?:\w+\s+)?(?:instrucciones|reglas|normas|directrices|ordenes|restricciones"
        r"|indicaciones|pautas|limites|filtros|politicas)\b"
        r"|\btu\s+(?:\w+\s+)?(?:prompt|programacion|configuracion|entrenamiento)\b"
    ),
    re.compile(
        r"\b(?:muestrame|revela|revelame|dime|repite|repiteme|imprime|ensename|copia)\s+"
        r"(?:\w+\s+){0,3}?(?:prompt|instrucciones|configuracion)\b"
    ),
    re.compile(
        r"\b(?:tus|estas son tus|aqui tienes tus)\s+nuevas\s+(?:instrucciones|reglas|normas"
        r"|ordenes|directrices)\b|\bnuevas\s+(?:instrucciones|reglas|ordenes|directrices)\s*:"
        r"|\btu\s+nuev[oa]\s+(?:nombre|identidad|personalidad|rol|papel)\b"
    ),
    # Behaviour from now on, restricted to unambiguously second-person continuations so that
    # "a partir de ahora trabaja de noche" (a fact) is kept.
    re.compile(
        r"\b(?:a partir de (?:ahora|este momento)|desde (?:ahora|este momento)(?: en adelante)?"
        r"|de ahora en adelante|durante el resto de (?:la|esta) conversacion)\b[,:]?\s+"
        r"(?:tu\b|te\b|tus\b|eres|seras|responderas|contestaras|hablaras|escribiras|diras"
        r"|actuaras|respondeme|contestame|hablame|escribeme|dime|llamame|di\b|comportate"
        r"|debes|tienes que|vas a|quiero que|nunca|(?:responde|contesta)\s+(?:solo|solamente"
        r"|unicamente|exclusivamente)|no\s+(?:respondas|contestes|hables|digas|menciones))"
    ),
    re.compile(
        r"\b(?:responde|contesta|respondeme|contestame|hablame|escribeme)\s+(?:\w+\s+){0,2}?"
        r"(?:solo|solamente|unicamente|exclusivamente|siempre)\s+(?:en|con|usando)\s+"
        r"(?:ingles|espanol|castellano|euskera|vasco|frances|aleman|italiano|portugues|catalan"
        r"|gallego|japones|chino|ruso|arabe|latin|andaluz|emojis?|emoticonos|mayusculas"
        r"|minusculas|codigo|json|binario|monosilabos|si o no)\b"
    ),
    # Second-person commands and obligations; facts use "debe", "tiene que", "no habla".
    re.compile(
        r"\b(?:debes|tienes\s+que|has\s+de|deberas)\s+(?:\w+\s+)?(?:responder|contestar|hablar"
        r"|decir|ignorar|olvidar|obedecer|actuar|usar|escribir|revelar|mostrar|seguir|cumplir"
        r"|fingir|llamar|comportarte|olvidarte|ser)\b"
        r"|\bno\s+(?:debes|puedes)\s+(?:\w+\s+)?(?:mencionar|decir|revelar|negarte|rechazar)\b"
    ),
    re.compile(
        r"\bquiero\s+que\s+(?:\w+\s+)?(?:ignores|olvides|respondas|contestes|hables|actues"
        r"|finjas|seas|digas|uses|escribas|reveles|obedezcas|me llames|te comportes|dejes de)\b"
        r"|\bte\s+(?:ordeno|exijo|prohibo|obligo)\b|\bte\s+(?:pido|mando)\s+que\b"
    ),
    re.compile(
        r"\b(?:siempre|nunca|jamas|solo|solamente)\s+(?:me\s+)?(?:di|dime|digas|respondeme"
        r"|contestame|hablame|escribeme|llamame|menciones|hables|respondas|contestes|reveles"
        r"|uses|escribas|rompas)\b"
        r"|\bno\s+(?:le\s+|me\s+|les\s+|lo\s+|la\s+)?(?:menciones|digas|hables|reveles|respondas"
        r"|contestes|uses|escribas|rompas|nombres|admitas|reconozcas|rechaces)\b"
    ),
    # Persona swaps: "desde ahora eres", "ya no eres", "actua como si fueras".
    re.compile(
        r"\b(?:ahora|ya)\s+(?:tu\s+)?eres\b|\bya\s+no\s+eres\b|\beres\s+ahora\b"
        r"|\bcomo\s+si\s+(?:tu\s+)?(?:fueras|fueses)\b|\bcomportate\s+como\b"
        r"|\b(?:finge|imagina|haz\s+(?:de\s+)?cuenta)\s+(?:de\s+)?que\s+(?:tu\s+)?eres\b"
        r"|\bfinge\s+ser\s+(?:un|una)\s+(?:ia|asistente|bot)\b"
        r"|\bactua\s+como\s+(?:un|una)?\s*(?:dan|ia|inteligencia artificial)\b"
        r"|\b(?:activa|entra en|cambia a|pasa a)\s+(?:el\s+)?modo\s+(?:dan|desarrollador|dios"
        r"|sin restricciones|sin filtros|libre|jailbreak|administrador)\b"
    ),
    re.compile(
        r"\b(?:el|este)\s+(?:asistente|bot|chatbot|modelo de lenguaje)\s+(?:debe|tiene\s+que"
        r"|ha\s+de|no\s+(?:debe|puede)|debera|siempre\s+debe)\b"
    ),
)

# Chat-template and markup tokens: a stored fact has no reason to contain a role marker or to open
# a "system" block, and models give these tokens special weight.
_MARKUP: tuple[re.Pattern[str], ...] = (
    re.compile(r"<\|[^|>]{1,30}\|>|<</?sys>>|</?s>|\[/?(?:inst|sys|system|sistema|admin)\]"),
    re.compile(r"#{1,6}\s*(?:instructions?|instrucciones|system|sistema|response|new rules)\b"),
    re.compile(
        r"(?:^|[.;!?\])>\"'|}]\s*)(?:system|assistant|developer|user|human|sistema|asistente"
        r"|usuario|desarrollador)\s*:"
    ),
    re.compile(
        r"<\s*/?\s*(?:system|sys|instructions?|instrucciones|prompt|admin|developer|assistant"
        r"|sistema|rules)\b[^>]*>|<!--|`{3,}\s*(?:system|sistema|instructions?|instrucciones"
        r"|prompt|sys)\b|\brole[\"']?\s*[:=]\s*[\"']?(?:system|developer|assistant)\b"
        r"|\{\{\s*(?:system|sys|prompt)\b"
    ),
)

# A long run of base64/hex-like characters containing digits: real words have no digits, and an
# encoded payload is an instruction the profile reader cannot see.
_BLOB = re.compile(r"(?<![a-z0-9+/])(?=[a-z0-9+/]{40})[a-z+/]*[0-9][a-z0-9+/]*={0,2}")

# A link with a request to go there: the profile is read by a model that may have tools.
_URL = re.compile(
    r"\b(?:visit|open|go to|check out|click|fetch|browse|navigate to|download|follow|access"
    r"|visita|abre|entra\s+(?:en|a)|haz\s+clic\s+en|pincha\s+en|descarga|accede\s+a|ve\s+a"
    r"|navega\s+a)\b(?:\s+\S+){0,4}?\s+(?:https?://|www\.|\S+\.(?:com|org|net|io|xyz|ru|info"
    r"|es|eus|me|co|ly|link)\b)|\bclick\s+(?:here|this link|the link)\b"
    r"|\bhaz\s+clic\s+aqui\b"
)

_CHECKS: tuple[tuple[str, tuple[re.Pattern[str], ...]], ...] = (
    ("contains a chat-role or prompt-format marker", _MARKUP),
    ("addresses the assistant", _ENGLISH),
    ("addresses the assistant", _SPANISH),
    ("contains a long encoded-looking blob", (_BLOB,)),
    ("asks for a link to be visited", (_URL,)),
)


def normalise(text: str) -> str:
    """Fold ``text`` to the form the patterns are written against."""
    text = _INVISIBLE.sub("", text)
    text = unicodedata.normalize("NFKC", text).casefold()
    decomposed = unicodedata.normalize("NFD", text)
    text = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    text = _APOSTROPHE.sub("'", text)
    return _SPACES.sub(" ", text).strip()


def instruction_reason(text: str) -> str | None:
    """Return why ``text`` reads as an instruction to the assistant, or None for a plain fact.

    The quoted excerpt is taken from the normalised text, so it is lower-case and accent-free.
    """
    folded = normalise(text)
    for reason, patterns in _CHECKS:
        for pattern in patterns:
            match = pattern.search(folded)
            if match:
                # Drop the clause punctuation some patterns anchor on, keep markup intact.
                excerpt = match.group(0).lstrip(" .,;:!?)–—").rstrip()
                if len(excerpt) > 60:
                    excerpt = excerpt[:57] + "..."
                return f"{reason}: '{excerpt}'"
    return None
