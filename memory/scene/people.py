"""Block 2 of a character in a scene: what it knows of the people present, learned in this
group only, each line labelled with the person it is about.

The people present are those who speak in the character's recent window (what it witnessed
since its summary). Their facts are their own (user id, this character, the group's scope):
never a fact learned in a private chat, never one about someone who is not in the window.
The profile's budget is shared between them; each person's facts are ranked and read by the
gate as a private profile's are (memory/profile/view.py)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime
from typing import Protocol

from cards.character import CharacterBook
from memory.engine.tokens import TokenEstimator
from memory.journey.source import JourneyReader, resolving_journey
from memory.models import Fact, Summary, Thread, Turn
from memory.profile.view import Lifetimes, ProfileLines, ProfileSource, profile_lines

MAX_PEOPLE = 8  # the most recent speakers; a crowd's oldest voices wait for their next line


class PeopleStore(Protocol):
    async def latest_summary(self, thread: Thread) -> Summary | None: ...

    async def turns_after(self, thread: Thread, after_turn_id: int) -> list[Turn]: ...

    async def facts(
        self, user_id: int, character_id: str, scope: str | None = None
    ) -> list[Fact]: ...


def people_in(window: list[Turn]) -> list[tuple[int, str]]:
    """(person id, name) of those who speak in the window, the most recent speaker last."""
    order: dict[int, str] = {}
    for turn in window:
        speaker = turn.speaker
        if speaker is not None and speaker.person_id is not None:
            order.pop(speaker.person_id, None)
            order[speaker.person_id] = speaker.name
    return list(order.items())[-MAX_PEOPLE:]


class ScenePeople:
    """A ProfileSource: a scene's threads get the people present; others go to `inner`."""

    def __init__(
        self,
        inner: ProfileSource,
        store: PeopleStore,
        lifetimes: Lifetimes,
        budget: int,
        tokens: TokenEstimator,
        characters: CharacterBook,
        chronicles: JourneyReader | None = None,
    ) -> None:
        """`chronicles`: where each character's story of the scene is read (None: scenes
        keep none)."""
        self._inner = inner
        self._store = store
        self._lifetimes = lifetimes
        self._budget = budget
        self._tokens = tokens
        self._characters = characters
        self._chronicles = chronicles

    async def lines_for(self, thread: Thread, now: datetime) -> ProfileLines:
        if not thread.is_scene:
            return await self._inner.lines_for(thread, now)
        lines = await self._people_lines(thread, now)
        character = self._characters.get(thread.character_id)
        if self._chronicles is None or character is None or not character.journey:
            return lines
        # The character's own story of the scene, from its own copy (memory/scene/chronicle.py)
        story = await resolving_journey(self._chronicles, thread)
        if story is None:
            return lines
        return replace(lines, journey=story.paragraphs, journey_id=story.id)

    async def _people_lines(self, thread: Thread, now: datetime) -> ProfileLines:
        summary = await self._store.latest_summary(thread)
        after = summary.covers_up_to_turn_id if summary else 0
        window = await self._store.turns_after(thread, after)
        people = people_in(window)
        if not people:
            return ProfileLines()
        language = self._characters.language_of(thread.character_id)
        share = max(self._budget // len(people), 60)
        lines: list[str] = []
        fact_ids: list[int] = []
        for person_id, name in people:
            facts = await self._store.facts(person_id, thread.character_id, thread.fact_scope)
            found = await asyncio.to_thread(
                profile_lines, facts, now, self._lifetimes, language, share, self._tokens
            )
            label = f"{name} (p{person_id})"  # the ref of their lines in the window
            lines += [f"- {label} · {line[2:]}" for line in found.lines if line.startswith("- ")]
            fact_ids += found.fact_ids
        return ProfileLines(
            tuple(lines), tuple(fact_ids), people=tuple(person for person, _ in people)
        )
