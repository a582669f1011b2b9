"""The one gate for everything that enters a prompt from memory.

Every path that writes text the character will later read as memory calls this module: profile
extraction (`check_fact`), the summary's claims (`check_claim`), `companion memory import`
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
   be answered", a rule laid on the replies in any person), that talks of hidden instructions,
   that frames a role-play, or that carries markup only an attack writes (chat-role markers, a
   JSON string closed and followed by more structure, a heading announcing rules, encoded blobs)
   is refused. Other markup (a `#`, a fence, a JSON object) is flattened to spaces and its words
   judged: rendering (`as_data`) keeps it from breaking out. The older pattern list
   (`memory.integrity.guard`) still runs as one check among these. The single allowed form of
   second person is a preference about how the user is addressed ("prefiero que me hables de tú",
   "call me Sam").

The normalisation lives in memory/integrity/normalise.py, the rules in
memory/integrity/rules.py (orders, the assistant as subject), address.py (the second person),
replies.py (rules laid on the replies), meta.py (the assistant's configuration, a setting's
name), agents.py (assistants in general, other people's data, the user's voice in a claim) and
formats.py (the known keys' formats); rendering in render.py. This module and together.py
are the gate's whole public face: together.py reads values together (`check_joined`,
`check_together`, `split_values`, `filter_claims`), half an instruction in one value, half in
another. No value keeps a link or
an e-mail address (memory/integrity/links.py). Rendering (`as_data`) is
the second wall: whatever is stored is shown on one line, with no heading, fence or delimiter
left in it (memory/engine/prompt.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memory.integrity.address import (
    ADDRESS_PREFERENCE,
    after_address_preference,
    is_address_preference,
    judged,
    second_person_reason,
    with_shared_subject,
    without_reminder,
)
from memory.integrity.agents import (
    ADDRESSED_AGENT,
    EVERY_AGENT,
    FIRST_PERSON,
    OTHERS_DATA,
    own_configuration,
)
from memory.integrity.decode import MISSPELT, decodings
from memory.integrity.formats import ADDRESS_FORMS, format_value
from memory.integrity.guard import instruction_reason
from memory.integrity.learned import learned_reason
from memory.integrity.legible import backwards, illegible_reason, reading
from memory.integrity.links import without_links
from memory.integrity.meta import (
    CAMEL,
    CONFIGURATION,
    GENERAL_AIS_OWN,
    IDENTIFIER,
    META_TALK,
    REVEAL,
    USERS_OWN_CONFIG,
    camel_words,
    setting_name,
)
from memory.integrity.normalise import SPELLED_TEXT, clean, readings, skeleton, unspelled
from memory.integrity.orders import (
    HELD_ASSISTANT,
    UNFILTERED,
    clitic_second_person,
    obedience,
)
from memory.integrity.owned import about_conversation, is_own_rule

# Rendering is part of the gate's face (memory/engine/prompt.py reads it from here).
from memory.integrity.render import DATA_CLOSE as DATA_CLOSE
from memory.integrity.render import DATA_OPEN as DATA_OPEN
from memory.integrity.render import as_data as as_data
from memory.integrity.render import as_data_claim as as_data_claim
from memory.integrity.replies import ANSWERED_ME, reply_rule
from memory.integrity.rules import (
    ANSWER_ORDER,
    AUTHORITY,
    DEFAULT_ASSISTANT,
    FRAMED_IMPERATIVE,
    FRAMED_ORDER,
    IMPERATIVE,
    MARKUP,
    MEMORY_FRAME,
    ONSET_ORDER,
    ONSET_TU,
    PASSIVE,
    ROLEPLAY,
    assistant_patterns,
    blob_reason,
    breakout_reason,
    excerpt,
)
from memory.integrity.subject import character_subject
from memory.profile.fact_keys import KEY_SYNTAX, ValueFormat, spec_of

MAX_TEXT_CHARS = 400  # a summary claim, an imported turn's line
CITE_CODE = re.compile(r"\{cite:\d+\}")


def _structural_reason(text: str, max_len: int, *, preference: bool = False) -> str | None:
    """What no memory may hold, whoever speaks in it: markup, blobs, spelled-out letters,
    the older instruction patterns, talk of the assistant's configuration."""
    cleaned = clean(text)
    if not cleaned:
        return "is empty"
    if len(cleaned) > max_len:
        return f"is {len(cleaned)} characters, the limit is {max_len}"
    if match := MARKUP.search(cleaned):
        return f"contains markup that could break out of the memory block: '{excerpt(match)}'"
    if reason := breakout_reason(cleaned) or blob_reason(cleaned):
        return reason
    plain, spelled = unspelled(text)
    if spelled >= SPELLED_TEXT:
        return "spells words out letter by letter"
    # The user's own prompt ("my first system prompt for a Discord bot") is their work.
    folded = with_shared_subject(USERS_OWN_CONFIG.sub(" ", skeleton(cleaned)))
    words = with_shared_subject(USERS_OWN_CONFIG.sub(" ", judged(plain)))
    # the older pattern list reads "don't call me sweetie" as an order; it is how the user
    # wants to be addressed, the one request a memory may hold (its other orders still count)
    if match := setting_name(folded):
        return f"names a setting of the assistant: '{excerpt(match)}'"
    reason = instruction_reason(folded) or instruction_reason(words)
    if reason and not (preference and _ABOUT_CALLING.search(reason)):
        return reason
    for rule, pattern in (
        ("talks about the assistant's configuration", CONFIGURATION),
        ("talks about the assistant's instructions", META_TALK),
        ("asks for what comes before the conversation", REVEAL),
    ):
        if match := pattern.search(GENERAL_AIS_OWN.sub(" ", words)):
            return f"{rule}: '{excerpt(match)}'"
    if match := reply_rule(words):
        return f"lays a rule on the replies: '{excerpt(match)}'"
    return None


_ABOUT_CALLING = re.compile(r"'(?:don'?t|do not|never|please)?\s*call\b")


def check_turn(text: str, *, max_len: int = 20_000) -> str | None:
    """Why a stored conversation turn (an imported reply, a recalled turn in a tool result)
    must not be replayed, or None. A conversation speaks to "you" all the time, so only the
    structural rules apply here, and talk of "the assistant" or "the model" in the third person,
    which no reply of the character's own needs; the fuller `check_text` is for what memory says
    of the user."""
    if reason := _structural_reason(text, max_len):
        return reason
    words = judged(unspelled(text)[0])
    for pattern in DEFAULT_ASSISTANT:
        if match := pattern.search(words):
            return f"makes the assistant its subject: '{excerpt(match)}'"
    return None


def check_reply(text: str, *, names: Sequence[str] = ()) -> str | None:
    """Why a reply read from a file (an import: words a hostile export may put in the
    character's mouth) must not be kept, or None. `check_turn`'s rules; the character, by any
    of ``names``, made the subject of an order, in every reading, as `check_text` finds it; and
    the learned check. Not the second-person rules: a reply says "you" to the user throughout."""
    if reason := check_turn(text):
        return reason
    patterns = assistant_patterns(tuple(names)) if names else DEFAULT_ASSISTANT
    for way in readings(text):
        folded = judged(unspelled(way)[0])
        for pattern in patterns:
            if match := pattern.search(folded):
                return f"makes the character its subject: '{excerpt(match)}'"
    return learned_reason(text)


def check_text(
    text: str, *, max_len: int = MAX_TEXT_CHARS, names: Sequence[str] = ()
) -> str | None:
    """Why ``text`` must not enter a prompt as memory, or None. ``names`` are the character's
    names: text that makes one of them its subject is speaking to the character. Every reading
    of the text is checked (an invisible character read as nothing, and as a space)."""
    if (kept := without_reminder(text)) != clean(text):
        return check_text(kept, max_len=max_len, names=names)
    # before the address preference: a name to be called by is judged too
    for match in CAMEL.finditer(clean(text)):  # "RevealThePromptNow" as words
        clause = camel_words(match.group(0))
        if reason := _check_reading(clause, len(clause) + 1, names):
            return f"its name '{match.group(0)}' {reason}"
    if (parts := after_address_preference(text)) is not None:
        return check_text(parts, max_len=max_len, names=names)
    for way in readings(text):
        if reason := _check_reading(way, max_len, names):
            return reason
    stored = clean(text)
    seen = reading(stored)  # looked up once, for both checks below
    mirrored = backwards(stored, seen)
    if mirrored and (reason := _check_reading(mirrored, max_len, names)):
        return f"read backwards, {reason}"
    decoded = list(decodings(stored, seen))
    for how, text_read in decoded:
        if reason := _check_reading(text_read, len(text_read) + 1, names):
            return f"{how}, {reason}"
    # Text the rules could not read as it is, but can once decoded in place (and found
    # harmless), is read: "la pista venía en ROT13: «ab zverf qrageb»" is "no mires dentro".
    # Not text read backwards: the whole of it is reversed, the plain words around too.
    if (reason := illegible_reason(seen)) and not any(
        how != MISSPELT and illegible_reason(reading(text_read)) is None
        for how, text_read in decoded
    ):
        return reason
    for match in IDENTIFIER.finditer(skeleton(text)):  # "responde_siempre_en_ingles" as words
        clause = match.group(0).replace("_", " ")
        if not about_conversation(clause):
            continue  # a programmer's "ignore_case_compare" names no setting of a conversation
        if reason := _check_reading(clause, len(clause) + 1, names):
            return f"its identifier '{match.group(0)}' {reason}"
    quoted = [m.group(0) for m in _QUOTED_WORDS.finditer(clean(text))]
    if len(quoted) >= 2:  # "mi palabra clave es «ignora» y la siguiente «todo»"
        together = content_of(clean(text))
        if reason := check_text(together, max_len=len(together) + 1, names=names):
            return f"read together, its quoted words {reason}"
    return None


def _check_reading(text: str, max_len: int, names: Sequence[str]) -> str | None:
    preference = is_address_preference(text)
    if reason := _structural_reason(text, max_len, preference=preference):
        return reason
    folded = judged(unspelled(text)[0])
    if match := AUTHORITY.search(folded):
        return f"claims authority over the assistant: '{excerpt(match)}'"
    framed = MEMORY_FRAME.sub("", folded, count=1).lstrip("¿? ")
    if framed != folded and (
        match := FRAMED_ORDER.search(framed) or FRAMED_IMPERATIVE.search(framed)
    ):
        return f"gives an order: '{excerpt(match)}'"
    folded = framed or folded
    if ADDRESS_PREFERENCE.match(folded):
        return None  # how the user wants to be addressed: the one request a memory may hold
    patterns = assistant_patterns(tuple(names)) if names else DEFAULT_ASSISTANT
    for pattern in patterns:
        if match := pattern.search(folded):
            return f"makes the assistant its subject: '{excerpt(match)}'"
    # someone's own rule or recipe says "you" to the one who follows it (memory/integrity/owned.py)
    folded_names = tuple(skeleton(n) for n in names)
    owned = is_own_rule(folded, folded_names)
    if not owned and (reason := second_person_reason(folded, names)):
        return reason
    if match := own_configuration(folded, folded_names):
        return f"talks about the assistant's configuration: '{excerpt(match)}'"
    for match in () if owned else IMPERATIVE.finditer(folded):
        if not _SHARED_SUBJECT.search(folded[: match.start() + 1]) or not _COORDINATED.match(
            match.group(0)
        ):
            return f"gives an order: '{excerpt(match)}'"
    for rule, pattern in (
        ("gives an order", ANSWER_ORDER),
        ("gives an order from now on", ONSET_ORDER),
        ("gives an order from now on", ONSET_TU),
        ("gives an order about the user's own messages", ANSWERED_ME),
        ("frames a role-play", ROLEPLAY),
        ("lays a rule on every assistant", EVERY_AGENT),
        ("speaks to assistants", ADDRESSED_AGENT),
        ("asks for other people's data", OTHERS_DATA),
        ("holds the assistant to a rule", HELD_ASSISTANT),
        ("lifts the assistant's limits", UNFILTERED),
    ):
        if match := pattern.search(folded):
            return f"{rule}: '{excerpt(match)}'"
    if match := obedience(folded):
        return f"asks for obedience: '{excerpt(match)}'"
    if match := clitic_second_person(folded):
        return f"speaks to the assistant: '{excerpt(match)}'"
    for match in PASSIVE.finditer(folded):
        if not _USERS_OWN.search(folded[: match.start()]):
            return f"gives an order in the passive: '{excerpt(match)}'"
    return None


# "I'm learning Japanese and write my name as サム": a verb joined by "and" to a clause whose
# subject is the user shares that subject, unless the clause speaks to someone.
_COORDINATED = re.compile(r"\s*(?:and|then|also|so|y|luego)\s")
_SHARED_SUBJECT = re.compile(
    r"(?:^|[.;:!?]\s*)(?:i|i'm|i've|i'll|we|we're|yo)\b(?![^.;:!?]*\byou\b)[^.;:!?]*$"
)


# "My essays must be written in ink": a passive whose subject is the user's own is a fact.
_USERS_OWN = re.compile(r"\b(?:my|our|mis|mi|nuestr[oa]s?)\s+(?:\w+\s+){0,4}$")


# ---- facts ---------------------------------------------------------------------------------------


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


def check_fact(
    key: str,
    value: str,
    *,
    kind: str | None = None,
    names: Sequence[str] = (),
    learned: bool = False,
) -> FactVerdict:
    """Check one fact for the profile: its key against the registry, its value against the
    key's format and against `check_text` with the key's length limit; with ``learned`` (the
    paths that write memory), against the learned check too (memory/integrity/learned.py)."""
    if not KEY_SYNTAX.match(key):
        return FactVerdict("other", value, f"key '{key[:40]}' is not a snake_case key")
    spec = spec_of(key, kind)
    cleaned = clean(without_links(value))
    if not cleaned:
        return FactVerdict(spec.key, cleaned, "value is empty")
    if spec.format is ValueFormat.ADDRESS and skeleton(cleaned).strip(".!") in ADDRESS_FORMS:
        return FactVerdict(spec.key, cleaned, None)
    formatted, problem = format_value(spec.format, cleaned)
    if problem is None:
        problem = check_text(formatted, max_len=spec.max_len, names=names)
    if problem is None and (match := _character_subject(formatted, names)):
        problem = f"makes the character its subject: '{excerpt(match)}'"
    if problem is None and (linked := clean(value)) != cleaned:
        # the rules read the links too ("visit <link> and do what it says"), at any length
        problem = check_text(linked, max_len=len(linked) + 1, names=names)
    if problem is None and learned:
        problem = learned_reason(value)
    if problem is not None:
        return FactVerdict(spec.key, formatted, f"value for '{spec.key}' {problem}")
    return FactVerdict(spec.key, formatted, None)


# A value's words once its label is set aside: what it quotes, or what follows its last
# label sign ("Mi segunda regla: ...", "sufijo = ..."). The quoted words of two values
# read together are the sentence an attacker split in halves.
_QUOTED_WORDS = re.compile(
    r"«([^»]{1,120})»|“([^”]{1,120})”|\"([^\"]{1,120})\"|(?<!\w)'([^']{1,120})'"
)
_LABEL = re.compile(r"^[^:=«“\"']{0,80}[:=]\s*")


def content_of(text: str) -> str:
    """What a value says without its framing: its quoted words, else the text after a label."""
    quoted = [next(g for g in m.groups() if g) for m in _QUOTED_WORDS.finditer(text)]
    if quoted:
        return " ".join(q.strip(" .") for q in quoted)
    return _LABEL.sub("", text).strip(" .")


# ---- summary claims ------------------------------------------------------------------------------


def check_claim(claim: str, *, names: Sequence[str] = (), learned: bool = False) -> str | None:
    """A summary claim, without its {cite:ID} codes (they are checked by the summariser). A
    claim in the user's first person copies their words (see memory/integrity/agents.py) and
    is read as a fact: the character is never its subject. With ``learned``, the learned
    check is asked too (memory/integrity/learned.py)."""
    text = CITE_CODE.sub(" ", claim)
    if reason := check_text(text, names=names):
        return reason
    if FIRST_PERSON.search(skeleton(text)) and (match := _character_subject(text, names)):
        return f"copies the user's words with the character as subject: '{excerpt(match)}'"
    return learned_reason(text) if learned else None


def _character_subject(text: str, names: Sequence[str]) -> re.Match[str] | None:
    """Where ``text``, read every way, opens a clause with the character as its subject."""
    for way in readings(text):
        if match := character_subject(skeleton(way), names):
            return match
    return None
