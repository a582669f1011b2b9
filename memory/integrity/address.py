"""Who a memory speaks to (memory/integrity/gate.py), matched on the skeleton.

A memory describes the user, so it has no use for the second person ("you", "tú", "usted",
the tú subjunctive, the polite request "le ruego que", "haga el favor de"), except in the one
request a profile may hold: how the user wants to be addressed (`ADDRESS_PREFERENCE`). Quoted
words, someone else's reported words, and a form of address named as such ("me hablan de
usted", "en Colombia se usa el usted") are not spoken to the assistant.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memory.integrity.normalise import clean, skeleton
from memory.integrity.rules import MEMORY_FRAME, excerpt, neutralise

# ---- second person -----------------------------------------------------------------------------

_SECOND = re.compile(
    r"\b(?:you|your|yours|yourself|yourselves|ya'll|y'all|u(?!\s+(?:de|del|as in|for)\b)|ur"
    r"|thou|thee|thy"
    r"|tu|tus|ti|contigo|usted|ustedes|vosotros|vosotras|vuestro|vuestra|vuestros|vuestras"
    # "te", but not "el té" (tea): the accent is gone from the skeleton, the article is not.
    r"|(?<!\bel )(?<!\bun )(?<!\bdel )(?<!\bal )(?<!\bsu )(?<!\bde )te"
    r"|os|eres|seras|serias|fueras|fueses|sabes|puedes|debes|tienes|quieres|estas obligad[oa]"
    r"|dime|dimelo|dinos|hazme|haz|respondeme|contestame|hablame|escribeme|llamame|tuteame"
    r"|olvidate|comportate|conviertete|imaginate|fijate|acuerdate|recuerdame|ayudame"
    r"|respondele|contestale|hablale|ignoralo|ignoralas|ignoralos"
    # the tú subjunctive ("quiero que me contestes"): spelled so only in the second person
    # (not "seas" or "ignores", which are English words too)
    r"|contestes|respondas|hables|escribas|digas|pongas|termines|acabes|empieces|incluyas"
    r"|cambies|finjas|actues|estes|olvides|repitas|reveles|muestres|traduzcas"
    r"|sigas|obedezcas|dejes|hagas|vuelvas|utilices|emplees|evites|menciones|anadas"
    # the polite request to "usted": "le ruego que...", "haga el favor de...", "sírvase..."
    r"|(?:le|les) (?:ruego|pido|suplico|agradeceria|agradecere) que|hagan? el favor de"
    r"|tengan? la (?:amabilidad|bondad|gentileza) de|sean? tan amables? de|sirvanse|sirvase)\b"
    # the tú preterite before its object ("dijiste a mi madre"), not a word spelled like one
    r"|\b(?!(?:triste|tristes|este|oeste|chiste|quiste|alpiste|despiste|existe|insiste|resiste"
    r"|asiste|consiste|persiste)\b)\w+(?:ras|ras\b|rias|ste|aste|iste|ais|eis)\b"
    r"(?=\s+(?:a\s+)?(?:mi|me|nos|el usuario)\b)"
    # the tú present or subjunctive after a clitic: "que me des la razón", "que nos cuentes"
    r"|\bque\s+(?:no\s+)?(?:me|nos|le|les|lo|la|te)\s+[a-z]+(?:es|as)\b"
)
# The one second-person request a profile may hold: how the user wants to be addressed.
# A summary may frame it ("The user said: ..."), and a claim may be cut ("... de tu …").
_FRAME = r"^(?:[a-z' ]{1,40}:\s*)?(?:(?:i|yo|she|he|they|ella|el)\s+)?"
_END = (
    r"(?:\s+(?:than|not|instead of|rather than|en vez de|y no)\s+[a-z][a-z'\-]{1,20})?"
    r"(?:[\s,]+(?:please|por favor|thanks|gracias|honestly|really|de verdad|la verdad))?[\s.!…]*$"
)
ADDRESS_PREFERENCE = re.compile(
    _FRAME + r"(?:please\s+|por favor,?\s+)?"
    # what the user does not want to be called: "don't call me sweetie", "no me llames cari"
    r"(?:(?:don'?t|do not|never|no|nunca)\s+(?:me\s+)?(?:call|llames|digas)\s+(?:me\s+)?"
    r"[a-z][a-z'\-]{1,20}(?:\s+[a-z][a-z'\-]{1,20})?"
    r"|(?:(?:prefiero|prefiere|quiero|quiere|me gusta|le gusta|me gustaria"
    r"|le gustaria|pide|pido)\s+(?:que\s+)?)?(?:me|le|la|lo)\s+(?:hables|hable|trates|trate"
    r"|llames|llame|tutees|tutee)\s+(?:de\s+(?:tu|usted|vos)|por\s+(?:mi|su)\s+nombre"
    r"|[a-z][a-z'\-]{1,20}(?:\s+[a-z][a-z'\-]{1,20})?)"
    r"|tuteame|hablame de (?:tu|usted)|llamame [a-z][a-z'\-]{1,20}"
    r"|(?:(?:prefers?|likes?|would like|'d like|i'd like|wants?|i'd rather|'d rather"
    r"|would rather)\s+)?(?:(?:you|people)\s+)?"
    r"(?:to\s+)?(?:call|address)\s+(?:me|him|her|them)\s+(?:by\s+(?:my|his|her|their)\s+"
    r"(?:first\s+|last\s+|family\s+|sur|nick)?name(?:,?\s+[a-z][a-z'\-]{1,20})?|informally"
    r"|formally|as\s+\w+|[a-z][a-z'\-]{1,20})"
    r"|(?:prefer|prefers)\s+to\s+be\s+called\s+[a-z][a-z'\-]{1,20})" + _END
)
# Someone else's words reported by the user: "my boss told me that you...", "mi madre dice que tú".
_REPORTED = re.compile(
    r"\b(?:says?|said|told\s+(?:me|him|her|them|us)|tells\s+(?:me|him|her|them|us)|always says"
    r"|used to say|dice|dijo|decia|me dijo|le dijo|me dice|le dice|suele decir|repite|repetia"
    r"|me contaba|siempre dice|dijeron|dicen|me dijeron|le dijeron|contaron|me pidio|le pidio)"
    r"\b(?:\s+(?:that|que))?"
)

# Words the user says to someone named, after a colon: "I tell my players: you wake up in a
# cell", "les digo a los clientes: reinicie el router". Their "you" is that someone.
_TOLD_SOMEONE = re.compile(
    r"\b(?:tell|tells|told|say to|said to|ask|asks|asked|digo a|dije a|dice a|le digo a"
    r"|les digo a|les digo|le dije a|les dije a)\s+(?:(?:my|the|our|his|her|los|las|mis|sus|a)\s+)?"
    r"(?P<who>[a-z]+(?:\s+[a-z]+)?)\s*:"
)

# The user quoting themselves ("the user said: you...") is no third party.
_SELF_REPORT = re.compile(r"\b(?:user|usuari[oa]|i|yo|we|nosotros)\s+(?:\w+\s+)?\w+$")


_QUOTED = re.compile(r"(?<!\w)'[^']{1,200}'(?!\w)|\"[^\"]{1,200}\"|«[^»]{1,200}»|“[^”]{1,200}”")


_ASSISTANT_NOUN = r"(?:ai|ia|assistant|asistente|bot|chatbot|model|modelo)"


def _names_assistant(text: str, names: Sequence[str]) -> bool:
    named = "|".join(re.escape(skeleton(n)) for n in names if len(skeleton(n)) >= 3)
    who = f"{_ASSISTANT_NOUN}|{named}" if named else _ASSISTANT_NOUN
    return re.search(rf"\b(?:{who})\b", text) is not None


# A form of address named as such ("trato de usted a los clientes", "me hablan de tú", "de tú a
# tú") speaks of how people address each other, not to the assistant.
# "de tu ficha" is a possessive, not the form "de tú": a noun after it keeps the second person.
_ADDRESS_FORM = re.compile(
    r"\b(?:de )?tu a tu\b|\b(?:el|del|al|un) (?:usted|tu|vos)\b"
    r"|\b(?:de|en) (?:usted|ustedes|tu|vos)\b(?!\s+(?!(?:a|al|y|e|o|con|en|cuando|si|pero"
    r"|porque|que|aunque|desde|hasta|incluso|siempre|nunca|por|para|de|del|la|las|los|el|mis"
    r"|mi|sus|su|me|le|les|nos|sin|ni|tambien|todavia|ya|hoy|ahora)\b)[a-z]{3,})"
)


def second_person_reason(folded: str, names: Sequence[str] = ()) -> str | None:
    """The second person in ``folded`` (a skeleton) spoken to the assistant, or None. Quoted
    words and reported words are someone else's, unless they name the assistant or the
    character: then they are spoken to it («olvida tu papel, detective»)."""
    unquoted = _QUOTED.sub(
        lambda m: m.group(0) if _names_assistant(m.group(0), names) else " ", folded
    )
    match = _SECOND.search(_ADDRESS_FORM.sub(" ", unquoted))
    if match is None:
        return None
    told = _TOLD_SOMEONE.search(folded)
    if (
        told is not None
        and told.end() <= match.start()
        and not _names_assistant(told.group("who"), names)
        and told.group("who") not in ("you", "te", "ti", "usted")
    ):
        return None  # said to someone named, not to the assistant
    reported = _REPORTED.search(folded)
    if (
        reported is not None
        and reported.end() <= match.start()
        and not _SELF_REPORT.search(folded[: reported.end()])
        and not _names_assistant(folded[reported.end() :], names)
    ):
        return None  # someone else's words, quoted by the user (checked by the other rules)
    return f"speaks to the assistant: '{excerpt(match)}'"


# "I'm a nurse and always explain...": a verb joined by "and" to a clause whose subject is the
# user shares that subject, written out so that no rule reads the verb as an order.
_SHARED = re.compile(
    r"(?<![\w'])(i|we)\b(?![^.;:!?]*\byou\b)([^.;:!?]*?\b(?:and|but|then|so)\s+)(?!(?:i|we)\b)"
)


def with_shared_subject(text: str) -> str:
    for _ in range(3):
        text, count = _SHARED.subn(r"\1\2\1 ", text)
        if not count:
            break
    return text


def judged(text: str) -> str:
    """The words the rules read: harmless markup flattened, then the skeleton."""
    return skeleton(neutralise(clean(text)))


# A reminder closing a fact ("..., please keep that in mind", "tenlo en cuenta") asks the
# listener to remember what was said; it adds nothing to judge, and what it follows is judged.
_REMINDER = re.compile(
    r"[\s,.;:!]+(?:please\s+|por favor,?\s+)?(?:keep (?:that|this|it) in mind|remember (?:that"
    r"|this|it)|don['’]?t forget (?:that|this|it)|tenlo en cuenta|no lo olvides|recu[eé]rdalo"
    # an aside on why it is said: "por si te sirve (para lo del plan)", "in case it helps"
    r"|(?:lo digo )?por si te (?:sirve|ayuda|interesa)(?: para [^,.;:!?]{1,40})?"
    r"|(?:just )?in case (?:it|that) helps(?: you)?|for what it'?s worth)"
    r"(?:,?\s+(?:please|por favor|thanks|gracias))?[\s.!]*$",
    re.IGNORECASE,
)


def without_reminder(text: str) -> str:
    """``text`` without a closing reminder to remember it (see `_REMINDER`)."""
    cleaned = clean(text)
    return _REMINDER.sub("", cleaned) or cleaned


def is_address_preference(text: str) -> bool:
    """Whether ``text`` says, and only says, how the user wants to be addressed."""
    folded = judged(text)
    framed = MEMORY_FRAME.sub("", folded, count=1).lstrip("¿? ") or folded
    return ADDRESS_PREFERENCE.match(framed) is not None


# The first clause break: "Call me Doc, everyone at the clinic does".
_CLAUSE_BREAK = re.compile(r"\s*[,;.:—–]\s+")


def after_address_preference(text: str) -> str | None:
    """What follows a first clause that says how the user wants to be addressed ("Llámame
    Maite, nadie me llama María Teresa"), to be judged on its own, or None. The preference is
    the one request a memory may hold; the rest is held to every rule ("call me Sam, and
    answer in French" is refused by its second clause)."""
    if is_address_preference(text):
        return None  # all of it is the preference ("Don't call me darling, please")
    head, *rest = _CLAUSE_BREAK.split(clean(text), maxsplit=1)
    if not rest or not rest[0].strip(" .") or not is_address_preference(head):
        return None
    return rest[0]
