"""/escena historia [personaje] (/scene story): a character's story of the group's scene, read
by anyone in the group (issue 37 A). Each character present keeps its own, written from what
it witnessed (memory/scene/chronicle.py); its citations are shown as the dates of the lines."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from bot.answers import Answer, Caller
from bot.memoria import dated_paragraphs
from bot.texts import text
from cards.character import Character, CharacterBook
from memory.journey.source import JourneyReader, resolving_journey
from memory.models import Thread
from memory.privacy import JourneyView
from memory.scene.engine import scene_owner_id, scene_scope
from memory.store.protocols import Users


class StoryStore(JourneyReader, Users, Protocol):
    """The scene's row and its characters' chronicles."""


def named(name: str, cast: Sequence[Character], book: CharacterBook) -> Character | None:
    """The character asked for: by id, name, first name or alias (one present first, then any
    other of the book: a character that left keeps its story); none named: the first present."""
    wanted = " ".join(name.split()).casefold()
    if not wanted:
        return cast[0]
    ids = {c.id for c in cast}
    present = [*cast, *(c for c in book.all() if c.id not in ids)]
    for character in present:
        words = {character.id.casefold(), *(n.casefold() for n in character.names_in_scene())}
        if wanted in words:
            return character
    return None


async def story(
    store: StoryStore,
    book: CharacterBook,
    caller: Caller,
    cast: Sequence[Character],
    name: str,
    language: str,
) -> Answer:
    """The named character's story of this scene, as people read it."""
    character = named(name, cast, book)
    if character is None:
        valid = ", ".join(f"{c.name} ({c.id})" for c in cast)
        return Answer(text(language, "unknown_character", given=name.strip(), valid=valid),
                      ok=False)  # fmt: skip
    owner = await store.find_user(caller.platform, scene_owner_id(caller.channel_id))
    scope = scene_scope(caller.platform, caller.channel_id)
    thread = Thread(owner.id, character.id, scope) if owner is not None else None
    journey = await resolving_journey(store, thread) if thread is not None else None
    if journey is None or thread is None:
        return Answer(text(language, "scene_story_none", name=character.name))
    turns = await store.thread_turns_by_ids(thread, sorted(journey.cited_ids))
    view = JourneyView(journey, {t.id: t.created_at for t in turns})
    title = text(language, "scene_story_title", name=character.name)
    return Answer("\n\n".join([f"{title}:", *dated_paragraphs(view, language)]))
