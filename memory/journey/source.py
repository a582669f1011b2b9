"""Block 2 with the journey: the profile's lines and, for a private thread, the journey, read
once at session start (frozen with the profile, so the cached prefix is unchanged)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Protocol

from cards.character import CharacterBook
from memory.journey import checks
from memory.journey.model import JOURNEY_SCOPE, Journey
from memory.models import Thread
from memory.profile.view import ProfileLines, ProfileSource
from memory.store.protocols import Journeys, TurnLog


class JourneyReader(Journeys, TurnLog, Protocol):
    """The journey and the turns its citations name."""


async def resolving_journey(store: JourneyReader, thread: Thread) -> Journey | None:
    """The pair's journey without the sentences citing a turn that is no longer this user's
    (deleted since): the stored copy is rewritten at once (delete means delete)."""
    journey = await store.journey(thread.user_id, thread.character_id)
    if journey is None:
        return None
    ids = sorted(journey.cited_ids)
    found = {t.id for t in await store.thread_turns_by_ids(thread, ids)} if ids else set()
    gone = set(ids) - found
    if not gone:
        return journey
    kept = replace(journey, paragraphs=checks.without_citing(journey.paragraphs, gone))
    await store.rewrite_journey(kept)
    return kept if kept.paragraphs else None


async def drop_citing(store: Journeys, user_id: int, character_id: str, ids: set[int]) -> bool:
    """Remove the journey's sentences that cite any of `ids` (a deleted fact's evidence, a
    deleted turn); True when something was removed."""
    journey = await store.journey(user_id, character_id)
    if journey is None or not (journey.cited_ids & ids):
        return False
    kept = replace(journey, paragraphs=checks.without_citing(journey.paragraphs, ids))
    return await store.rewrite_journey(kept)


class ProfileWithJourney:
    """A ProfileSource: the profile's lines, then the journey (private threads of characters
    that keep one)."""

    def __init__(
        self, profile: ProfileSource, store: JourneyReader, characters: CharacterBook
    ) -> None:
        self._profile = profile
        self._store = store
        self._characters = characters

    async def lines_for(self, thread: Thread, now: datetime) -> ProfileLines:
        lines = await self._profile.lines_for(thread, now)
        character = self._characters.get(thread.character_id)
        if thread.scope != JOURNEY_SCOPE or character is None or not character.journey:
            return lines
        journey = await resolving_journey(self._store, thread)
        if journey is None:
            return lines
        return replace(lines, journey=journey.paragraphs, journey_id=journey.id)
