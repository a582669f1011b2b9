"""The user owns their memory: view, correct, delete, forget, export/import, review, expire, why.

Every operation is scoped to (user, character) before it touches a row: a fact number that
belongs to anyone else is indistinguishable from one that does not exist.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Protocol

from memory.errors import UserFacingError
from memory.import_gate import gate_import, public_row
from memory.integrity.gate import check_fact
from memory.journey.model import JOURNEY_SCOPE, Journey
from memory.journey.source import JourneyReader, drop_citing, resolving_journey
from memory.models import (
    Fact,
    FactVersion,
    ReplySources,
    Summary,
    Thread,
    Turn,
    User,
)
from memory.profile.view import FactState, Lifetimes
from memory.scene.chronicle import exported_sentences, forget_with_character
from memory.store.protocols import Erasure, Export, Facts, Summaries
from memory.store.scene_journeys import SceneJourneys

EXPORT_FORMAT = "companion-memory"
EXPORT_VERSION = 1
_DURATION = re.compile(r"^(\d{1,4})\s*(d|w|m|y)$")
_DURATION_DAYS = {"d": 1, "w": 7, "m": 30, "y": 365}


@dataclass(frozen=True)
class FactView:
    fact: Fact
    state: FactState
    history: tuple[FactVersion, ...]


@dataclass(frozen=True)
class LearnedInGroup:
    """What another character learned of the user in the group the view is asked from."""

    character_id: str
    name: str
    facts: tuple[FactView, ...]


@dataclass(frozen=True)
class MemoryView:
    facts: tuple[FactView, ...]
    summary: Summary | None
    review_mode: bool
    journey: JourneyView | None = None  # a private thread's story (never a group's)
    summary_current: bool = False  # the summary covers the open conversation (not an ended one)
    # Asked from a group: the other characters' facts learned there, per character (each
    # fact of `facts` says its own scope: a group's is marked as learned there).
    others_in_group: tuple[LearnedInGroup, ...] = ()


@dataclass(frozen=True)
class JourneyView:
    """The journey as its owner reads it: each cited turn's moment, for dates instead of codes."""

    journey: Journey
    moments: dict[int, datetime]


@dataclass(frozen=True)
class WhyView:
    sources: ReplySources
    facts: tuple[Fact, ...]
    summary: Summary | None
    turns: tuple[Turn, ...]
    # The journey block 2 showed, as it reads now; `journey_rewritten` when that version was
    # since replaced by the next chronicle or deleted (its text is gone: delete means delete).
    journey: JourneyView | None = None
    journey_rewritten: bool = False


class MemoryServiceStore(
    Facts, Summaries, Export, Erasure, JourneyReader, SceneJourneys, Protocol
):  # fmt: skip
    """What /memoria reads and changes."""


def parse_duration(text: str) -> int | None:
    """'30d', '2w', '6m', '1y' -> days; 'never'/'nunca' -> None; anything else is an error."""
    cleaned = text.strip().lower()
    if cleaned in ("never", "nunca"):
        return None
    match = _DURATION.match(cleaned)
    if not match:
        raise UserFacingError(
            f"'{text}' is not a duration: use a number and d, w, m or y (30d, 2w, 6m, 1y), "
            "or 'nunca'/'never'.",
            code="bad_duration",
            given=text,
        )
    return int(match.group(1)) * _DURATION_DAYS[match.group(2)]


class MemoryService:
    def __init__(
        self,
        store: MemoryServiceStore,
        lifetimes: Lifetimes,
        clock: Callable[[], datetime],
        forgetting: Callable[[int, str], AbstractAsyncContextManager[None]],
        on_change: Callable[[int, str], None],
        names_of: Callable[[str], tuple[str, ...]] = lambda _character: (),
    ) -> None:
        self._store = store
        # What each character is called (Character.names_in_memory): the gate refuses an
        # imported or corrected memory that makes one of them its subject.
        self._names_of = names_of
        self._lifetimes = lifetimes
        self._clock = clock
        # Holds the engine still around a forget: the pair's background work stopped, its
        # sessions out of RAM (Companion.forgetting).
        self._forgetting = forgetting
        # Tells live sessions that the facts changed: a deleted or corrected fact leaves the
        # prompt at the user's next message, not when the conversation ends.
        self._on_change = on_change

    async def _owned(self, user: User, character_id: str, fact_id: int) -> Fact:
        fact = await self._store.fact(user.id, character_id, fact_id)
        if fact is None:
            raise UserFacingError(
                f"There is no fact #{fact_id} in your memory.", code="no_fact", id=fact_id
            )
        return fact

    async def view(self, user: User, character_id: str, scope: str) -> MemoryView:
        """This character's facts (every scope), and asked from a group (`group:...`), what
        every other character learned of the user there."""
        views = await self._fact_views(user, await self._store.facts(user.id, character_id))
        thread = Thread(user.id, character_id, scope)
        summary = await self._store.latest_summary(thread)
        journey = await self.journey(user, character_id) if scope == JOURNEY_SCOPE else None
        others: list[LearnedInGroup] = []
        if scope.startswith("group:"):
            for other in await self._store.characters_of(user.id):
                if other != character_id:
                    learned = await self._store.facts(user.id, other, scope)
                    if learned:
                        name = (self._names_of(other) or (other,))[0]
                        others.append(
                            LearnedInGroup(other, name, await self._fact_views(user, learned))
                        )
        review = await self._store.review_mode(user.id)
        current = await self._covers_open(thread, summary)
        return MemoryView(views, summary, review, journey, current, tuple(others))

    async def _fact_views(self, user: User, facts: list[Fact]) -> tuple[FactView, ...]:
        now = self._clock()
        views = []
        for fact in facts:
            history = await self._store.fact_history(user.id, fact.id)
            views.append(FactView(fact, self._lifetimes.state(fact, now), tuple(history)))
        return tuple(views)

    async def _covers_open(self, thread: Thread, summary: Summary | None) -> bool:
        """Whether the summary folds turns of the conversation still open: after /reset or a
        timeout it tells of one that ended."""
        conversation = await self._store.open_conversation(thread)
        if summary is None or conversation is None:
            return False
        turns = await self._store.conversation_turns(conversation.id)
        return any(t.id <= summary.covers_up_to_turn_id for t in turns)

    async def correct(self, user: User, character_id: str, fact_id: int, value: str) -> Fact:
        """The user's correction is stored as stated; the old value goes to the history."""
        old = await self._owned(user, character_id, fact_id)
        now = self._clock()
        verdict = check_fact(
            old.key, value, kind=old.kind, names=self._names_of(character_id), learned=True
        )
        if verdict.reason is not None:
            thread = Thread(user.id, character_id, old.scope)
            await self._store.record_rejection(thread, None, verdict.reason, now)
            raise UserFacingError(
                f"That value cannot be stored: {verdict.reason}.",
                code="bad_value",
                fact_key=old.key,
            )
        new = replace(
            old,
            value=verdict.value,
            origin="stated",
            confirmed_at=now,
            expires_at=self._lifetimes.expires_at(old.lifetime, now),
            status="active",
        )
        await self._store.apply_fact_changes(
            [], [(old, new, "corrected by the user")], [], [], None, now
        )
        self._on_change(user.id, character_id)
        return new

    async def delete(self, user: User, character_id: str, fact_id: int) -> None:
        fact = await self._owned(user, character_id, fact_id)
        await self._store.delete_fact(user.id, character_id, fact_id)
        # The journey's sentences resting on the same turns go with it: delete means delete.
        await drop_citing(self._store, user.id, character_id, set(fact.evidence))
        self._on_change(user.id, character_id)

    async def journey(self, user: User, character_id: str) -> JourneyView | None:
        """/memoria historia: the journey, without what cites a turn deleted since."""
        journey = await resolving_journey(self._store, Thread(user.id, character_id, "dm"))
        if journey is None:
            return None
        turns = await self._store.turns_by_ids(user.id, character_id, sorted(journey.cited_ids))
        return JourneyView(journey, {t.id: t.created_at for t in turns})

    async def delete_journey(self, user: User, character_id: str) -> bool:
        """/memoria historia borrar: the journey goes (its bytes purged, as a fact's)."""
        deleted = await self._store.delete_journey(user.id, character_id)
        self._on_change(user.id, character_id)
        return deleted

    async def expire(self, user: User, character_id: str, fact_id: int, duration: str) -> Fact:
        fact = await self._owned(user, character_id, fact_id)
        days = parse_duration(duration)
        lifetime = "never" if days is None else f"days:{days}"
        updated = replace(
            fact,
            lifetime=lifetime,
            expires_at=self._lifetimes.expires_at(lifetime, fact.confirmed_at),
        )
        await self._store.apply_fact_changes([], [], [], [updated], None, self._clock())
        self._on_change(user.id, character_id)
        return updated

    async def review(self, user: User, character_id: str, fact_id: int, accept: bool) -> None:
        fact = await self._owned(user, character_id, fact_id)
        if fact.status != "pending":
            raise UserFacingError(
                f"Fact #{fact_id} is not waiting for review.", code="not_pending", id=fact_id
            )
        if accept:
            now = self._clock()
            await self._store.apply_fact_changes(
                [], [], [], [replace(fact, status="active")], None, now
            )
        else:
            await self._store.delete_fact(user.id, character_id, fact_id)
        self._on_change(user.id, character_id)

    async def set_review_mode(self, user: User, on: bool) -> None:
        await self._store.set_review_mode(user.id, on)

    async def why(self, user: User, character_id: str) -> WhyView | None:
        sources = await self._store.last_reply_sources(user.id, character_id)
        if sources is None:
            return None
        facts = [
            f for f in await self._store.facts(user.id, character_id) if f.id in sources.fact_ids
        ]
        summary = (
            await self._store.summary_by_id(user.id, sources.summary_id)
            if sources.summary_id
            else None
        )
        cited = set(summary.cited_ids) if summary else set()
        turns = await self._store.turns_by_ids(
            user.id,
            character_id,
            sorted(cited | set(sources.window_turn_ids) | set(sources.fragment_turn_ids)),
        )
        journey = await self._shown_journey(user, character_id, sources.journey_id)
        return WhyView(
            sources,
            tuple(facts),
            summary,
            tuple(sorted(turns, key=lambda t: t.id)),
            journey=journey,
            journey_rewritten=sources.journey_id is not None and journey is None,
        )

    async def _shown_journey(
        self, user: User, character_id: str, journey_id: int | None
    ) -> JourneyView | None:
        """The journey a reply was built with, if it is still the stored one."""
        if journey_id is None:
            return None
        current = await self.journey(user, character_id)
        return current if current is not None and current.journey.id == journey_id else None

    async def forget(self, user: User, character_id: str) -> dict[str, int]:
        """Everything with this character, from every table and the search index, with the
        user's background work stopped first: nothing computed from it lands afterwards."""
        async with self._forgetting(user.id, character_id):
            # this character's stories of the scenes lose what cites the user's lines first
            await forget_with_character(self._store, user.id, character_id)
            return await self._store.forget(user.id, character_id)

    async def export(self, user: User, character_id: str) -> dict[str, Any]:
        rows = await self._store.export_rows(user.id, character_id)
        # A scene's story is the scene's: only its sentences citing this person's own lines
        # (an import brings none back, as it brings back no scene line).
        lines = {int(str(row["id"])) for row in rows.get("scene_lines", [])}
        stories = await self._store.scene_journeys(character_id) if lines else []
        return {
            "format": EXPORT_FORMAT,
            "version": EXPORT_VERSION,
            "exported_at": self._clock().isoformat(),
            "user": {
                "platform": user.platform,
                "id": user.platform_user_id,
                "display_name": user.display_name,
            },
            "character_id": character_id,
            **{table: [public_row(row) for row in items] for table, items in rows.items()},
            "scene_journeys": exported_sentences(stories, lines),
        }

    async def import_(self, user: User, character_id: str, data: dict[str, Any]) -> dict[str, int]:
        """Read an export back (the documented format) into this user's memory."""
        if data.get("format") != EXPORT_FORMAT or data.get("version") != EXPORT_VERSION:
            raise UserFacingError(
                f"not a {EXPORT_FORMAT} export of version {EXPORT_VERSION} (got format "
                f"{data.get('format')!r}, version {data.get('version')!r})"
            )
        now = self._clock()
        data, refusals = gate_import(data, self._names_of(character_id))
        counts = await self._store.import_rows(user.id, character_id, data, now)
        for scope, reason in refusals:
            thread = Thread(user.id, character_id, scope)
            await self._store.record_rejection(thread, None, f"import: {reason}", now)
        if refusals:
            counts["refused"] = len(refusals)
        self._on_change(user.id, character_id)
        return counts
