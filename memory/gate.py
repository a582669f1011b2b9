"""The one gate for everything that enters a prompt from memory.

Every path that writes text the character will later read as memory calls this module: profile
extraction (`check_fact`), the summary's claims (`filter_claims`), `companion memory import`
(facts, claims, assistant and tool turns), `/memoria corregir` (`check_fact`) and tool results
stored as turns (`check_text`). Nothing is written around it.

Two steps, always in this order:

1. Normalise. `clean` gives the form that is stored: NFKC, no control, format (Cf) or line and
   paragraph separator characters, one line. `skeleton` gives the form that is matched (never
   stored): `clean`, casefolded, accents, look-alike letters (Cyrillic, Greek) and leetspeak digits
   folded to plain Latin letters, and spaced-out letters ("i g n o r e") joined.
2. Check, on that skeleton. The rule is structural: a memory describes the USER. Text whose
   grammatical subject or target is the assistant (the second person, "the assistant", "la IA",
   the character's name), that gives an order (an imperative opening a clause, a passive "should
   be answered"), that frames a role-play, or that carries markup (headings, code fences, JSON,
   chat-role markers, encoded blobs) is refused. The older pattern list (`memory.guard`) still
   runs as one check among these. The single allowed form of second person is a preference
   about how the user is addressed ("prefiero que me hables de tú", "call me Sam").

Rendering (`as_data`) is the second wall: whatever is stored is shown on one line, with no
heading, fence or delimiter left in it (see memory/prompt.py).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from memory.fact_keys import KEY_SYNTAX, ValueFormat, spec_of
from memory.guard import instruction_reason
from memory.models import SummaryFields

MAX_TEXT_CHARS = 400  # a summary claim, an imported turn's line
_CITE = re.compile(r"\{cite:\d+\}")

# ---- normalisation ----------------------------------------------------------------------------

_HOMOGLYPHS = str.maketrans(
    {
        # Cyrillic
        "а": "a", "в": "b", "е": "e", "ё": "e", "з": "3", "і": "i", "ї": "i", "ј": "j",
        "к": "k", "м": "m", "н": "h", "о": "o", "р": "p", "с": "c", "т": "t", "у": "y",
        "х": "x", "ѕ": "s", "ԁ": "d", "ԛ": "q", "ԝ": "w", "ӏ": "l", "һ": "h", "ү": "y",
        "ь": "b", "п": "n", "г": "r", "л": "n", "и": "u", "д": "a",
        # Greek
        "α": "a", "β": "b", "γ": "y", "δ": "d", "ε": "e", "ζ": "z", "η": "n", "ι": "i",
        "κ": "k", "λ": "l", "μ": "u", "ν": "v", "ο": "o", "π": "n", "ρ": "p", "σ": "o",
        "ς": "s", "τ": "t", "υ": "u", "φ": "f", "χ": "x", "ω": "w", "ϲ": "c",
        # Latin look-alikes NFKC leaves alone
        "ı": "i", "ɩ": "i", "ʟ": "l", "ɑ": "a", "ɡ": "g", "ꞷ": "w",
    }
)  # fmt: skip
_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "8": "b",
                       "9": "g", "@": "a", "$": "s", "!": "i", "|": "l", "€": "e"})  # fmt: skip
_LEET_TOKEN = re.compile(r"[a-z0-9@$!|€]*[a-z][a-z0-9@$!|€]*")
_SPACED_RUN = re.compile(r"(?<![a-z])[a-z](?:(?: |[.\-_*·+~]{1,2} ?)[a-z](?![a-z])){2,}")
# Six or more letters spelled out one by one: no fact is written that way, a filter dodge is.
SPELLED_OUT = 6
_SEPARATORS = re.compile(r"[\s.\-_*·+~]")
_WS = re.compile(r"\s+")


def _is_dropped(ch: str) -> bool:
    category = unicodedata.category(ch)
    return category in ("Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn") and ch not in "\u200d"


def clean(text: str) -> str:
    """The stored form: NFKC, no control/format/separator characters, on one line.

    A zero-width joiner survives only between two symbols, where emoji sequences need it."""
    return _WS.sub(" ", _strip_invisible(text)).strip()


def _strip_invisible(text: str) -> str:
    text = unicodedata.normalize("NFKC", text)
    out: list[str] = []
    for index, ch in enumerate(text):
        if ch == "\u200d":
            before = text[index - 1] if index else ""
            after = text[index + 1] if index + 1 < len(text) else ""
            if (
                before
                and after
                and unicodedata.category(before) == "So"
                and (unicodedata.category(after) == "So")
            ):
                out.append(ch)
            continue
        if ch.isspace():
            out.append(" ")  # a newline or U+2028 separates words: keep them apart
        elif not _is_dropped(ch):
            out.append(ch)
    return "".join(out)


def _unleet(match: re.Match[str]) -> str:
    token = match.group(0)
    return token.translate(_LEET) if any(c in "0134578@$!|€9" for c in token) else token


def _join_spaced(match: re.Match[str]) -> str:
    joined = _SEPARATORS.sub("", match.group(0))
    # Marked so that the check can refuse letter-by-letter spelling as such.
    return f" {joined}\u2063 " if len(joined) >= SPELLED_OUT else joined


def skeleton(text: str) -> str:
    """The matching form of ``text`` (never stored): see the module's docstring."""
    text = _strip_invisible(text).casefold().replace("\u200d", "")
    text = "".join(ch for ch in unicodedata.normalize("NFD", text) if not unicodedata.combining(ch))
    text = text.translate(_HOMOGLYPHS)
    text = _LEET_TOKEN.sub(_unleet, text)
    text = _SPACED_RUN.sub(_join_spaced, text)
    text = re.sub("[\u2018\u2019\u02bc\u00b4`]", "'", text)
    return _WS.sub(" ", text).strip()


# ---- markup: checked on the cleaned, case-preserving text -------------------------------------

_MARKUP = re.compile(
    r"```|~~~|#{2,}|(?:^|\s)#\s|<\s*/?\s*[A-Za-z|!][^>]{0,40}>|<\||\|>"
    r"|\[/?(?:INST|SYS|SYSTEM|inst|sys|system)\]"
    r"|[\"']\s*:\s*[\"'{\[]|[{\[]\s*[\"']\w+[\"']\s*:|[\"']\s*[}\]]\s*[,}\]]|\\[\"nrtu]"
    r"|(?:^|[.;!?\]}>\"']\s*)(?:system|assistant|developer|user|human|sistema|asistente"
    r"|usuario|instructions?|instrucciones)\s*:",
    re.IGNORECASE,
)
_BLOB = re.compile(r"[A-Za-z0-9+/_\-]{24,}={0,2}")
_HEX = re.compile(r"\b[0-9a-fA-F]{32,}\b")


def _blob_reason(text: str) -> str | None:
    for match in _BLOB.finditer(text):
        run = match.group(0)
        classes = sum(
            (
                any(c.islower() for c in run),
                any(c.isupper() for c in run),
                any(c.isdigit() for c in run),
            )
        )
        if classes >= 2 or run.endswith("="):
            return f"contains an encoded-looking blob: '{run[:24]}...'"
    if _HEX.search(text):
        return "contains an encoded-looking blob (hex)"
    return None


# ---- the assistant as subject or target: checked on the skeleton ------------------------------

_REF = (
    r"(?:(?:the|this|that|your)\s+(?:ai|a\.i\.?|assistant|bot|chatbot|chat bot"
    r"|language model|llm|model|companion|character|persona|narrator)"
    r"|(?:el|la|al|del|este|esta|ese|esa|tu)\s+(?:ia|i\.a\.?"
    r"|inteligencia artificial|asistente|bot|chatbot|modelo|personaje|narrador)"
    r"|chatgpt|gpt-?\d*|claude|gemini|copilot)"
)
_WISH = (
    r"(?:wants?|wanted|wish(?:es)?|would like|'d like|asks?|asked|tells?|told|orders?|expects?"
    r"|needs?|prefers?|requires?|instructs?|insists?|demands?|likes? (?:it )?when"
    r"|loves? (?:it )?when"
    r"|quiere|quiero|queria|prefiere|prefiero|pide|pido|pidio|desea|deseo|espera|espero"
    r"|exige|exijo|manda|mando|ordena|ordeno|insiste|insisto|necesita|necesito|le gusta"
    r"|me gusta|le gustaria|me gustaria|le encanta|me encanta)"
)
_MODAL = (
    r"(?:must|should|shall|will|would|has to|have to|needs? to|is to|are to|is (?:supposed|required"
    r"|expected|instructed|allowed|not allowed|forbidden|meant|going) to|may|can'?t|cannot|can"
    r"|always|never|only|no longer|from now on|does not|doesn'?t|won'?t|is not to|do not"
    r"|debe|deben|debera|deberia|tiene que|tendra que|ha de|siempre|nunca|jamas|solo|solamente"
    r"|ya no|no debe|no puede|puede|podra|va a|esta obligad[oa] a|tiene prohibido|no)"
)
_ACTION = (
    r"(?:answer|respond|reply|speak|talk|say|write|call|ignore|forget|obey|reveal|act|pretend"
    r"|follow|use|address|treat|refer|greet|sign|end|start|begin|agree|refuse|stop|keep|become"
    r"|play|remember|mention|tell|behave|switch|drop|break|be (?!\w+(?:ed|en)\b)"
    r"|responder|contestar|hablar|decir|escribir|llamar|ignorar|olvidar|obedecer|revelar|actuar"
    r"|fingir|seguir|usar|tratar|saludar|firmar|terminar|empezar|aceptar|dejar|recordar|jugar"
    r"|comportarse|convertirse|dirigirse|mencionar|tutear|interpretar|negarse|romper|salir"
    r"|ser (?!\w+(?:ad|id)[oa]s?\b)|le |me |nos )"
)
_ACT_3SG = (
    r"(?:answers|responds|replies|speaks|talks|says|writes|calls|ignores|forgets|obeys|reveals"
    r"|acts|pretends|follows|addresses|treats|refers|greets|signs|ends|starts|begins|agrees"
    r"|refuses|stops|keeps|becomes|plays|responde|contesta|habla|dice|escribe"
    r"|llama|ignora|olvida|obedece|revela|actua|finge|sigue|trata|saluda|firma|termina|empieza"
    r"|acepta|deja|se convierte|interpreta|se comporta|se dirige|se llama)"
)
_IS_NOW = (
    r"(?:is|are|es|sera|will be|is now|es ahora|ahora es)\s+(?:now\s+|ahora\s+)?"
    r"(?:a|an|un|una|no longer|ya no|my|mi|called|named|llamad[oa])\b"
)


def _assistant_patterns(names: Sequence[str]) -> list[re.Pattern[str]]:
    ref = _REF
    folded = [re.escape(skeleton(n)) for n in names if len(skeleton(n)) >= 3]
    subject = f"(?:\\w+\\s+)?(?:(?:{_MODAL})\\s+(?:\\w+\\s+)?{_ACTION}|{_ACT_3SG}\\b|{_IS_NOW})"
    parts = [f"\\b{_WISH}\\s+(?:that\\s+|que\\s+|for\\s+|a\\s+|al\\s+|le\\s+)?{ref}\\b"]
    parts.append(f"\\b(?:para que|so that|in order for)\\s+{ref}\\b")
    parts.append(f"\\b{ref}\\s+{subject}")
    parts.append(
        f"\\b{ref}'s\\s+(?:\\w+\\s+)?(?:answers|replies|responses|rules|instructions|name"
        "|job|task|role|behaviou?r|personality|prompt)\\b"
    )
    if folded:
        name = "(?:" + "|".join(folded) + ")"
        parts.append(f"\\b{_WISH}\\s+(?:that\\s+|que\\s+|for\\s+|a\\s+)?{name}\\b")
        parts.append(f"\\b{name}\\s+{subject}")
        parts.append(f"^{name}\\s*[,:]\\s")  # "Koldo, ..." speaks to the character
    return [re.compile(p) for p in parts]


_DEFAULT_ASSISTANT = _assistant_patterns(())

# ---- second person -----------------------------------------------------------------------------

_SECOND = re.compile(
    r"\b(?:you|your|yours|yourself|yourselves|ya'll|y'all|u|ur|thou|thee|thy"
    r"|tu|tus|ti|contigo|usted|ustedes|vosotros|vosotras|vuestro|vuestra|vuestros|vuestras"
    # "te", but not "el té" (tea): the accent is gone from the skeleton, the article is not.
    r"|(?<!\bel )(?<!\bun )(?<!\bdel )(?<!\bal )(?<!\bsu )(?<!\bde )te"
    r"|os|eres|seras|serias|fueras|fueses|sabes|puedes|debes|tienes|quieres|estas obligad[oa]"
    r"|dime|dimelo|dinos|hazme|haz|respondeme|contestame|hablame|escribeme|llamame|tuteame"
    r"|olvidate|comportate|conviertete|imaginate|fijate|acuerdate|recuerdame|ayudame"
    r"|respondele|contestale|hablale|ignoralo|ignoralas|ignoralos)\b"
    r"|\b\w+(?:ras|ras\b|rias|ste|aste|iste|ais|eis)\b(?=\s+(?:a\s+)?(?:mi|me|nos|el usuario))"
)
# The one second-person request a profile may hold: how the user wants to be addressed.
_ADDRESS_PREFERENCE = re.compile(
    r"^(?:(?:yo\s+)?(?:prefiero|prefiere|quiero|quiere|me gusta|le gusta|me gustaria|le gustaria"
    r"|pide|pido)\s+(?:que\s+)?)?(?:me|le|la|lo)\s+(?:hables|hable|trates|trate|llames|llame"
    r"|tutees|tutee)\s+(?:de\s+(?:tu|usted|vos)|por\s+(?:mi|su)\s+nombre"
    r"|[a-z][a-z'\-]{1,20}(?:\s+[a-z][a-z'\-]{1,20})?)[.!]?$"
    r"|^(?:tuteame|hablame de (?:tu|usted)|llamame [a-z][a-z'\-]{1,20})[.!]?$"
    r"|^(?:i\s+|she\s+|he\s+|they\s+)?(?:(?:prefers?|likes?|would like|'d like|wants?)\s+)?"
    r"(?:(?:you|people)\s+)?(?:to\s+)?(?:call|address)\s+(?:me|him|her|them)\s+(?:by\s+"
    r"(?:my|his|her|their)\s+(?:first\s+|last\s+)?name|informally|formally|as\s+\w+"
    r"|[a-z][a-z'\-]{1,20})[.!]?$"
    r"|^(?:i\s+)?(?:prefer|prefers)\s+to\s+be\s+called\s+[a-z][a-z'\-]{1,20}[.!]?$"
)
# Someone else's words reported by the user: "my boss told me that you...", "mi madre dice que tú".
_REPORTED = re.compile(
    r"\b(?:says?|said|told\s+(?:me|him|her|them|us)|tells\s+(?:me|him|her|them|us)|always says"
    r"|used to say|dice|dijo|decia|me dijo|le dijo|me dice|le dice|suele decir|repite|repetia"
    r"|me contaba|siempre dice|dijeron|dicen|me dijeron|le dijeron|contaron|me pidio|le pidio)"
    r"\b(?:\s+(?:that|que))?"
)

# The user quoting themselves ("the user said: you...") is no third party.
_SELF_REPORT = re.compile(r"\b(?:user|usuari[oa]|i|yo|we|nosotros)\s+(?:\w+\s+)?\w+$")

# ---- orders without an explicit addressee ----------------------------------------------

_CLAUSE_START = (
    r"(?:^|[.;:!?,()\[\]–—]\s*"
    r"|\b(?:and|then|now|please|pls|also|so|y|luego|ahora|por favor|pues|asi que)\s+)"
)
_IMPERATIVE = re.compile(
    _CLAUSE_START
    + r"(?:answer|respond|reply|speak|talk|write|say|tell|call|ignore|disregard|forget|override"
    r"|bypass|reveal|print|show|repeat|output|act|pretend|behave|roleplay|role-play|become|stop"
    r"|obey|follow|use|switch|enter|enable|translate|keep|remember|treat|address|refer|greet"
    r"|sign|end|begin|start|drop|break|simulate|imagine|assume|be|never|always|do not|don'?t"
    r"|make sure|ensure|from now on|note|store|save|record|add|update|set|include)\s+"
    r"(?:me|us|him|her|them|it|the|all|any|every|everything|only|always|never|in|with|like|as"
    r"|to|your|my|this|that|these|those|a|an|no|nothing|yes|ever|from|each|rude|polite|short"
    r"|brief|formal|informal|casual|sarcastic|mean|nice|honest|quiet|silent|more|less|just"
    r"|again|instead|now|that)\b"
    r"|"
    + _CLAUSE_START
    + r"(?:responda|conteste|hable|escriba|diga|digame|llame|llameme|ignore|olvide|olvidese|omita"
    r"|revele|muestre|repita|imprima|actue|finja|comportese|juegue|conviertase|obedezca"
    r"|traduzca|recuerde|salude|firme|sea|deje de|empiece a|respondan|contesten|hablen|digan"
    r"|ignoren|olviden|revelen|responded|contestad|hablad|decid|ignorad|olvidad|revelad)\b"
)
_PASSIVE = re.compile(
    r"\b(?:should|must|shall|has to|have to|needs? to|is to|are to|will|ought to|is meant to"
    r"|are meant to|has got to|is expected to|are expected to)\s+(?:always\s+|only\s+|never\s+"
    r"|not\s+)?be\s+(?:\w+\s+)?(?:answered|responded|replied|written|addressed|ignored|disregarded"
    r"|revealed|obeyed|followed|treated|spoken|told|said|called|greeted|forgotten|overridden"
    r"|shown|printed|repeated|kept secret|done)\b"
    r"|\b(?:debe|deben|debera|deberan|deberia|deberian|tiene que|tienen que|ha de|han de"
    r"|hay que|habra que)\s+(?:siempre\s+|solo\s+|nunca\s+)?(?:ser\s+)?(?:respondid|contestad"
    r"|ignorad|olvidad|revelad|obedecid|seguid|tratad|escrit|llamad|dich|mostrad)[oa]s?\b"
    r"|\bse\s+(?:le\s+|les\s+|me\s+)?(?:debe|deben|debera|deberia|tiene que|tendra que|ha de"
    r"|va a|puede)\s+(?:siempre\s+|solo\s+|nunca\s+)?(?:responder|contestar|hablar|escribir"
    r"|decir|ignorar|olvidar|revelar|obedecer|tratar|llamar|dirigir|mostrar)\b"
    r"|\bhay que\s+(?:responder|contestar|hablar|decir|ignorar|olvidar|revelar|obedecer"
    r"|tratar|llamar)(?:le|les|me)?\b"
    r"|\b(?:responses|answers|replies|messages|mensajes|respuestas)\s+(?:\w+\s+){0,3}?"
    r"(?:must|should|shall|will|are to|deben|tienen que|han de|seran)\b"
)
_ROLEPLAY = re.compile(
    r"\blet'?s\s+(?:play|pretend|roleplay|role-play|role play|imagine|simulate|do a|start a)\b"
    r"|\b(?:in|for|during)\s+(?:this|our|the following|the next)\s+(?:role-?play|role play"
    r"|game|scenario|story|simulation|fiction|exercise|scene)\b"
    r"|\b(?:stay|remain|keep)\s+in\s+character\b|\bout of character\b|\booc\b"
    r"|\b(?:juguemos|vamos a jugar|hagamos como que|hagamos que|finjamos|simulemos|imaginemos)\b"
    r"|\ben\s+(?:este|nuestro|el siguiente|esta|nuestra|la siguiente)\s+(?:juego|rol|escenario"
    r"|relato|historia|simulacion|ficcion|escena|partida)\b"
    r"|\b(?:imagine|imagina|imagine que|supon|suponga|suppose)\s+(?:that\s+|que\s+)"
    r"|\b(?:the|el|la)\s+(?:scene|escena|roleplay|rol)\s+(?:is|es)\b"
    r"|\b(?:character|personaje)\s+(?:mode|modo)\b|\bmodo\s+(?:personaje|rol)\b"
)


def _excerpt(match: re.Match[str]) -> str:
    text = match.group(0).strip(" .,;:!?()\"'«»–—")
    return text if len(text) <= 60 else text[:57] + "..."


_QUOTED = re.compile(r"(?<!\w)'[^']{1,40}'(?!\w)|\"[^\"]{1,40}\"|«[^»]{1,40}»|“[^”]{1,40}”")
_CONFIGURATION = re.compile(
    r"\b(?:character sheet|character card|ficha (?:del |de )?personaje|hoja de personaje"
    r"|system prompt|prompt (?:del|de) sistema|the prompt|el prompt|jailbreak|guardrails?"
    r"|overrides?|takes? precedence|prevalece(?:n)? sobre|tiene(?:n)? prioridad sobre"
    r"|manda(?:n)? sobre)\b"
)


def _second_person_reason(folded: str) -> str | None:
    match = _SECOND.search(_QUOTED.sub(" ", folded))
    if match is None:
        return None
    reported = _REPORTED.search(folded)
    if (
        reported is not None
        and reported.end() <= match.start()
        and not _SELF_REPORT.search(folded[: reported.end()])
    ):
        return None  # someone else's words, quoted by the user (checked by the other rules)
    return f"speaks to the assistant: '{_excerpt(match)}'"


def _structural_reason(cleaned: str, max_len: int) -> str | None:
    """What no memory may hold, whoever speaks in it: markup, blobs, spelled-out letters,
    the older instruction patterns, talk of the assistant's configuration."""
    if not cleaned:
        return "is empty"
    if len(cleaned) > max_len:
        return f"is {len(cleaned)} characters, the limit is {max_len}"
    if match := _MARKUP.search(cleaned):
        return f"contains markup that could break out of the memory block: '{_excerpt(match)}'"
    if reason := _blob_reason(cleaned):
        return reason
    folded = skeleton(cleaned)
    if "\u2063" in folded:
        return "spells words out letter by letter"
    if reason := instruction_reason(folded):
        return reason
    if match := _CONFIGURATION.search(folded):
        return f"talks about the assistant's configuration: '{_excerpt(match)}'"
    return None


def check_turn(text: str, *, max_len: int = 20_000) -> str | None:
    """Why a stored conversation turn (an imported reply, a recalled turn in a tool result)
    must not be replayed, or None. A conversation speaks to "you" all the time, so only the
    structural rules apply here; the fuller `check_text` is for what memory says of the user."""
    return _structural_reason(clean(text), max_len)


def check_text(
    text: str, *, max_len: int = MAX_TEXT_CHARS, names: Sequence[str] = ()
) -> str | None:
    """Why ``text`` must not enter a prompt as memory, or None. ``names`` are the character's
    names: text that makes one of them its subject is speaking to the character."""
    cleaned = clean(text)
    if reason := _structural_reason(cleaned, max_len):
        return reason
    folded = skeleton(cleaned)
    if _ADDRESS_PREFERENCE.match(folded):
        return None  # how the user wants to be addressed: the one request a memory may hold
    patterns = _assistant_patterns(names) if names else _DEFAULT_ASSISTANT
    for pattern in patterns:
        if match := pattern.search(folded):
            return f"makes the assistant its subject: '{_excerpt(match)}'"
    if reason := _second_person_reason(folded):
        return reason
    for rule, pattern in (
        ("gives an order", _IMPERATIVE),
        ("gives an order in the passive", _PASSIVE),
        ("frames a role-play", _ROLEPLAY),
    ):
        if match := pattern.search(folded):
            return f"{rule}: '{_excerpt(match)}'"
    return None


# ---- facts ---------------------------------------------------------------------------------------

_NAME_LEAD = re.compile(
    r"^(?:(?:yo\s+)?me\s+llamo|mi\s+nombre\s+es|se\s+llama|soy|ll[aá]mame|my\s+name\s+is"
    r"|call\s+me|i'?m|i\s+am|(?:she|he|they)\s+(?:is|are)\s+called|goes\s+by"
    r"|(?:prefers?|likes?)\s+to\s+be\s+called|(?:prefiero|prefiere)\s+que\s+(?:me|le)\s+llamen"
    r"|is\s+called)\s+",
    re.IGNORECASE,
)
_NAME = re.compile(r"^[^\W\d_]+(?:[ '’.\-][^\W\d_]+){0,3}\.?$")
_PRONOUNS = re.compile(r"^[^\W\d_]+(?:\s*/\s*[^\W\d_]+){0,3}$")
_AGE = re.compile(
    r"^(?:tiene|tengo|is|i\s+am|i'm|edad:?)?\s*(\d{1,3})\s*(?:años|anos|years?(?:\s+old)?|yo)?"
    r"\.?$",
    re.IGNORECASE,
)
_DATE = re.compile(r"^[\w ,./\-ºª°]+$")
_PLACE = re.compile(r"^[^\W_][\w .,'’()\-/]*$")


@dataclass(frozen=True)
class FactVerdict:
    """The gate's answer for one fact: the value to store (cleaned, in its key's format) and
    the reason it is refused, if it is."""

    key: str  # the registry key the value was checked against (`other` when unknown)
    value: str
    reason: str | None

    @property
    def ok(self) -> bool:
        return self.reason is None


def _format_value(fmt: ValueFormat, value: str) -> tuple[str, str | None]:
    """The value in its key's format, or why it is not one."""
    if fmt is ValueFormat.NAME:
        value = _NAME_LEAD.sub("", value).strip(" .!")
        if not _NAME.match(value):
            return value, f"expects {fmt.value} (1-4 words of letters)"
    elif fmt is ValueFormat.PRONOUNS and not _PRONOUNS.match(value):
        return value, f"expects {fmt.value} such as she/her"
    elif fmt is ValueFormat.NUMBER:
        match = _AGE.match(value)
        if not match:
            return value, f"expects {fmt.value}"
        value = match.group(1)
    elif fmt is ValueFormat.DATE and (
        not _DATE.match(value) or not any(c.isdigit() for c in value) or len(value.split()) > 5
    ):
        return value, f"expects {fmt.value} such as 1990-05-14 or 14 de mayo"
    elif fmt is ValueFormat.PLACE and (not _PLACE.match(value) or len(value.split()) > 6):
        return value, f"expects {fmt.value}"
    return value, None


def check_fact(
    key: str, value: str, *, kind: str | None = None, names: Sequence[str] = ()
) -> FactVerdict:
    """Check one fact for the profile: its key against the registry, its value against the
    key's format and against `check_text` with the key's length limit."""
    if not KEY_SYNTAX.match(key):
        return FactVerdict("other", value, f"key '{key[:40]}' is not a snake_case key")
    spec = spec_of(key, kind)
    cleaned = clean(value)
    if not cleaned:
        return FactVerdict(spec.key, cleaned, "value is empty")
    formatted, problem = _format_value(spec.format, cleaned)
    if problem is None:
        problem = check_text(formatted, max_len=spec.max_len, names=names)
    if problem is not None:
        return FactVerdict(spec.key, formatted, f"value for '{spec.key}' {problem}")
    return FactVerdict(spec.key, formatted, None)


def check_joined(texts: Iterable[str], *, names: Sequence[str] = ()) -> str | None:
    """An instruction split over several values ("answer only" + "in French from now on"):
    the values are checked once more side by side, in order."""
    parts = [clean(t) for t in texts if t and t.strip()]
    if len(parts) < 2:
        return None
    joined = " ".join(parts)
    reason = check_text(joined, max_len=len(joined) + 1, names=names)
    return f"read together, the values {reason}" if reason else None


# ---- summary claims ------------------------------------------------------------------------------


def check_claim(claim: str, *, names: Sequence[str] = ()) -> str | None:
    """A summary claim, without its {cite:ID} codes (they are checked by the summariser)."""
    return check_text(_CITE.sub(" ", claim), names=names)


@dataclass(frozen=True)
class ClaimRefusal:
    field: str
    claim: str
    reason: str


def filter_claims(
    fields: SummaryFields, *, names: Sequence[str] = ()
) -> tuple[SummaryFields, tuple[ClaimRefusal, ...]]:
    """The summary without the claims the gate refuses, and what was refused: a hostile claim
    is dropped alone, the rest of the summary stays."""
    refused: list[ClaimRefusal] = []
    for name, claims in fields.items():
        kept = []
        for claim in claims:
            reason = check_claim(claim, names=names)
            if reason is None:
                kept.append(clean(claim))
            else:
                refused.append(ClaimRefusal(name, claim, reason))
        fields = fields.with_field(name, tuple(kept))
    return fields, tuple(refused)


# ---- rendering ------------------------------------------------------------------------------

DATA_OPEN = "⟦"
DATA_CLOSE = "⟧"
_RENDER_STRIP = re.compile(r"[`⟦⟧<>{}\[\]|\\]|#{2,}|^\s*[#>*\-=+]+\s*")


def as_data_claim(claim: str) -> str:
    """A summary claim as data: like `as_data`, but its {cite:ID} codes stay readable."""
    pieces = _CITE.split(claim)
    codes = _CITE.findall(claim)
    out = as_data(pieces[0])
    for code, piece in zip(codes, pieces[1:], strict=True):
        out = f"{out} {code} {as_data(piece)}"
    return _WS.sub(" ", out).strip()


def as_data(text: str) -> str:
    """Stored text as it may appear inside the memory block: one line, and no heading, code
    fence, markup bracket or block delimiter left in it, whatever was stored."""
    line = clean(text)
    previous = None
    while previous != line:
        previous = line
        line = _RENDER_STRIP.sub(" ", line)
        line = _WS.sub(" ", line).strip()
    return line
