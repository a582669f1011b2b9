"""The rules a canon proposal must keep before it is stored, each a function of its own.

The output's shape (`parse`) rejects the whole answer, with a reason the model is shown at its
next attempt: no proposals list, a proposal without text, more proposals than allowed, or a
`contradicts` that names no field of the sheet. The content rules drop one proposal alone:
`cites_own_turns` (only the character's own assistant turns of this conversation),
`no_personal_data` (no person's name, fact or words, compared against what we hold of the
people: memory/canon/people.py), `gated` (the memory gate, as the journey's sentences pass it,
and no credential), `adds_something` (not what the sheet already says). `contradiction` marks
a proposal with the sheet line it contradicts: the field the model named, verified to exist and
to be said otherwise, or the field code finds itself (memory/canon/sheet.py).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from cards.character import Character
from memory.canon.people import NGRAM, PeopleData
from memory.canon.sheet import SheetField, confirms, contradicted_field, own_names
from memory.canon.words import names_in, ngrams, words
from memory.engine.forced_tool import OutputRejected
from memory.integrity.credentials import holds_credential
from memory.integrity.gate import CITE_CODE
from memory.journey.checks import gate_sentences, normalise_citations
from memory.journey.model import cited_in

MAX_PROPOSALS = 5
MAX_CHARS = 300


class CanonRejected(OutputRejected):
    """The answer broke a whole-output rule."""


@dataclass(frozen=True)
class Raw:
    """One proposal as the model wrote it (citations inline)."""

    text: str
    contradicts: str | None


@dataclass(frozen=True)
class Context:
    """What the content rules compare a proposal with."""

    character: Character
    own_turns: frozenset[int]
    people: PeopleData
    fields: dict[str, SheetField]
    world: frozenset[str]  # the sheet's and lore's words, folded: the character's own
    credentials: frozenset[str] = frozenset()


# ---- the whole output ---------------------------------------------------------------------------


def parse(arguments: object, fields: Collection[str]) -> list[Raw]:
    """Rule `shape`: the proposals as written, or CanonRejected."""
    items = arguments.get("proposals") if isinstance(arguments, dict) else None
    if not isinstance(items, list):
        raise CanonRejected("no propose_canon call with a 'proposals' list")
    if len(items) > MAX_PROPOSALS:
        raise CanonRejected(f"{len(items)} proposals; give at most {MAX_PROPOSALS}, the surest")
    out = []
    for item in items:
        text = item.get("text") if isinstance(item, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise CanonRejected("a proposal without a non-empty 'text' string")
        named = item.get("contradicts")
        if named is not None and (not isinstance(named, str) or named not in fields):
            raise CanonRejected(
                f"'contradicts' names {str(named)[:40]!r}, which is no field of the sheet; "
                f"use one of {', '.join(fields)} or null"
            )
        out.append(Raw(normalise_citations(" ".join(text.split())), named))
    return out


# ---- one proposal: a reason to drop it, or None -------------------------------------------------


def bare(text: str) -> str:
    """The proposal as it is stored: without its citations."""
    return " ".join(CITE_CODE.sub(" ", text).split()).replace(" .", ".")


def cites_own_turns(text: str, own_turns: Collection[int]) -> str | None:
    """Rule `cites_own_turns`: at least one citation, each of the character's own assistant
    turns in this conversation (never a person's line, another character's, or an unknown id)."""
    cited = cited_in(text)
    if not cited:
        return "cites no turn of the character's"
    others = sorted(cited - set(own_turns))
    if others:
        return f"cites {others}, not the character's own lines in this conversation"
    return None


def no_personal_data(text: str, people: PeopleData, world: Collection[str]) -> str | None:
    """Rule `no_personal_data`: none of the people's names, fact values or runs of words is in
    the proposal (what the character's own sheet and lore hold is its own world, not theirs)."""
    said = words(bare(text))
    mine = set(world)
    if named := sorted((set(said) & people.names) - mine):
        return f"holds a person's name ({len(named)} word(s))"
    if named := sorted(names_in(bare(text)) & people.names - mine):
        return f"holds a person's name ({len(named)} word(s))"
    said_set = set(said)
    for value in people.fact_values:
        value_words = {w for w in words(value) if len(w) >= 3} - mine
        if value_words and value_words <= said_set:
            return "holds a fact of a person's profile"
    copied = [r for r in ngrams(said, NGRAM) & people.runs if not set(r) <= mine]
    if copied:
        return "copies a person's words"
    return None


def gated(text: str, character: Character, credentials: Collection[str]) -> str | None:
    """Rule `gated`: through the memory gate as a journey's sentence (no order, no rule on how
    the character must behave, nothing that binds it), and no password, PIN or card number."""
    _, refused = gate_sentences((bare(text),), character.names_in_memory())
    if refused:
        return f"refused by the memory gate: {refused[0].reason}"
    if holds_credential(bare(text), credentials):
        return "holds a credential"
    return None


def adds_something(text: str, context: Context) -> str | None:
    """Rule `adds_something`: a word the sheet and lore do not hold (else it is the sheet)."""
    own = own_names(context.character)
    new = {w for w in words(bare(text)) if len(w) >= 4 or w.isdigit()} - context.world - own
    return None if new else "says only what the sheet already says"


def contradiction(raw: Raw, context: Context) -> str | None:
    """Rule `contradiction`: the sheet line the proposal contradicts. The field the model
    named exists (`parse`) and is checked: the proposal speaks of its subject and says it
    otherwise (memory/canon/sheet.py `confirms`); else, or when the model named none, the
    field code finds itself."""
    text = bare(raw.text)
    if raw.contradicts is not None:
        field = context.fields[raw.contradicts]
        if confirms(text, field, context.character):
            return field.line
    found = contradicted_field(text, context.fields, context.character)
    return found.line if found is not None else None


def refusal(raw: Raw, context: Context) -> str | None:
    """Every content rule, in order: why the proposal is dropped, or None."""
    if len(bare(raw.text)) > MAX_CHARS:
        return f"longer than {MAX_CHARS} characters"
    return (
        cites_own_turns(raw.text, context.own_turns)
        or no_personal_data(raw.text, context.people, context.world)
        or gated(raw.text, context.character, context.credentials)
        or adds_something(raw.text, context)
    )


@dataclass(frozen=True)
class Sorted:
    kept: tuple[tuple[Raw, str | None], ...]  # each with the sheet line it contradicts
    refused: tuple[str, ...]  # the reasons, never the proposal's text


def sort(raws: Sequence[Raw], context: Context) -> Sorted:
    kept: list[tuple[Raw, str | None]] = []
    refused: list[str] = []
    for raw in raws:
        if reason := refusal(raw, context):
            refused.append(reason)
        else:
            kept.append((raw, contradiction(raw, context)))
    return Sorted(tuple(kept), tuple(refused))
