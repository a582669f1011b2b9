"""The story of each scene (issue 37 A) after it is written: what a person's forget in the group
takes out of every character's chronicle, and what a person's export carries of them.

A chronicle is a journeys row owned by the scene's row in `users`, one per character, written
by the journey's chronicler from that character's copy only (memory/journey/chronicler.py,
memory/journey/scene_prompting.py) and shown in that character's block 2 (ScenePeople).
A forget removes every sentence that cites one of the person's lines or names them: by the
names the data holds for them (their display name, the names their lines were said under, a
`name` fact learned in the group), never by a list of words."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Iterable, Sequence
from dataclasses import replace
from typing import Any, Protocol

from memory.journey.model import Journey, cited_in, sentences_of
from memory.store.protocols import Facts, Journeys
from memory.store.scene_journeys import SceneJourneys

_NAME_KEYS = ("name", "preferred_name")


class ChronicleStore(Journeys, SceneJourneys, Facts, Protocol):
    """The chronicles, the person's lines and their names."""


def _folded(text: str) -> str:
    """Case and accents aside: "Ána" and "ana" are one name to a forget."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def name_forms(names: Iterable[str]) -> frozenset[str]:
    """Each name as it may be written in a sentence: whole, and its first word ("Ana García"
    is also "Ana"); one letter alone names nobody."""
    forms: set[str] = set()
    for name in names:
        words = _folded(" ".join(name.split()))
        if len(words) > 1:
            forms.add(words)
        first = words.split(" ")[0] if words else ""
        if len(first) > 1:
            forms.add(first)
    return frozenset(forms)


def names_any(sentence: str, forms: Collection[str]) -> bool:
    folded = _folded(sentence)
    return any(re.search(rf"(?<!\w){re.escape(form)}(?!\w)", folded) for form in forms)


def without_person(
    paragraphs: Sequence[str], line_ids: Collection[int], forms: Collection[str]
) -> tuple[str, ...]:
    """The chronicle without every sentence that cites one of `line_ids` or names the person;
    a paragraph left empty goes."""
    gone = set(line_ids)
    out = []
    for paragraph in paragraphs:
        kept = [
            s
            for s in sentences_of(paragraph)
            if not (cited_in(s) & gone) and not names_any(s, forms)
        ]
        if kept:
            out.append(" ".join(kept))
    return tuple(out)


async def known_names(
    store: ChronicleStore, person_id: int, display_names: Iterable[str], said_as: Iterable[str],
    characters: Iterable[str], fact_scope: str,
) -> frozenset[str]:  # fmt: skip
    """Every name the data holds for the person in this group."""
    names = {*display_names, *said_as}
    for character_id in characters:
        for fact in await store.facts(person_id, character_id, fact_scope):
            if re.sub(r"_\d+$", "", fact.key) in _NAME_KEYS:
                names.add(fact.value)
    return frozenset(n for n in names if n and n.strip())


async def forget_in_chronicles(
    store: ChronicleStore,
    owner_id: int,
    characters: Sequence[str],
    person_id: int,
    display_names: Iterable[str],
    scene_scope: str,
) -> int:
    """A person's forget in the group: every character's chronicle of the scene loses each
    sentence that cites the person's lines or names them (the bytes purged as a rewritten
    journey's are). Run before their lines are deleted (their ids are read from them).
    The sentences removed."""
    speech = await store.scene_speech(person_id, scene_scope)
    fact_scope = "group:" + scene_scope.removeprefix("scene:")
    names = await known_names(store, person_id, display_names, speech.names, characters,
                              fact_scope)  # fmt: skip
    forms = name_forms(names)
    removed = 0
    for character_id in characters:
        journey = await store.journey(owner_id, character_id)
        if journey is None:
            continue
        kept = without_person(journey.paragraphs, speech.line_ids, forms)
        if kept != journey.paragraphs:
            removed += _sentences(journey.paragraphs) - _sentences(kept)
            await store.rewrite_journey(replace(journey, paragraphs=kept))
    return removed


async def forget_with_character(store: ChronicleStore, person_id: int, character_id: str) -> None:
    """A person's private forget with one character takes that character's copies of their
    scene lines: its story of each scene loses the sentences citing them (the lines are gone,
    and the bytes of those sentences go now, not at the story's next read)."""
    for scope, journey in await store.scene_journeys(character_id):
        speech = await store.scene_speech(person_id, scope)
        kept = without_person(journey.paragraphs, speech.line_ids, ())
        if kept != journey.paragraphs:
            await store.rewrite_journey(replace(journey, paragraphs=kept))


def _sentences(paragraphs: Sequence[str]) -> int:
    return sum(len(sentences_of(p)) for p in paragraphs)


def exported_sentences(
    chronicles: Sequence[tuple[str, Journey]], line_ids: Collection[int]
) -> list[dict[str, Any]]:
    """A person's export: of each scene's chronicle, only the sentences citing their own
    lines (a scene's chronicle is the scene's, not a person's)."""
    theirs = set(line_ids)
    out = []
    for scope, journey in chronicles:
        sentences = [s for p in journey.paragraphs for s in sentences_of(p) if cited_in(s) & theirs]
        if sentences:
            out.append({"scope": scope, "sentences": sentences})
    return out
