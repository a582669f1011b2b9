"""Follow-ups, the scheduler's half: which dated events are due a message, at what local hour,
how many a week, and through which platform. The engine writes and stores the message
(memory/engine/followups.py); an adapter delivers it to the user's private chat. Never in a
group: only facts learned in a private chat (scope 'dm') are followed up, and only there."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Protocol

from bot.texts import text
from memory.engine.clock_context import local_moment
from memory.engine.companion import Companion
from memory.models import FollowUpCandidate, FollowUpState
from memory.store.protocols import FollowUps

log = logging.getLogger(__name__)
WEEK = timedelta(days=7)


class PrivateSender(Protocol):
    name: str

    async def send_private(self, platform_user_id: str, message: str) -> bool: ...


@dataclass(frozen=True)
class FollowUpPolicy:
    per_week: int = 2
    quiet_start_hour: int = 21  # no follow-up from this local hour...
    quiet_end_hour: int = 10  # ...until this one
    window_days: int = 3  # days after the event it may still be asked about

    def quiet(self, hour: int) -> bool:
        start, end = self.quiet_start_hour, self.quiet_end_hour
        if start > end:
            return hour >= start or hour < end
        return start <= hour < end

    def allows(self, due: FollowUpCandidate, state: FollowUpState, now: datetime) -> bool:
        """Past the event's day (the user's), within the window, in waking hours, under the
        weekly cap, and not while the previous follow-up waits for an answer."""
        local = local_moment(now, due.timezone)
        event = due.fact.event_date
        if event is None or not (event < local.date() <= event + timedelta(self.window_days)):
            return False
        if self.quiet(local.hour) or state.awaiting_answer:
            return False
        return sum(1 for sent in state.sent_at if now - sent < WEEK) < self.per_week


class FollowUpJob:
    """Finds the follow-ups due in the database (so none is lost to a restart) and sends them."""

    def __init__(
        self,
        companion: Companion,
        store: FollowUps,
        policy: FollowUpPolicy,
        clock: Callable[[], datetime],
        mature_dms: bool = False,
    ) -> None:
        self._companion = companion
        self._mature_dms = mature_dms
        self._store = store
        self._policy = policy
        self._clock = clock
        self._senders: dict[str, PrivateSender] = {}

    def use(self, sender: PrivateSender) -> None:
        """An adapter that can write to private chats (registered once it has started)."""
        self._senders[sender.name] = sender

    async def tell(self, person: str, message: str) -> bool:
        """A private message to one person named 'platform:id' (an operator's notice), through
        the same adapters as the follow-ups; False when their platform is not running here."""
        platform, _, user_id = person.partition(":")
        sender = self._senders.get(platform)
        return sender is not None and await sender.send_private(user_id, message)

    async def offer(self) -> int:
        """Offer follow-ups once to each user with a first dated event learned in private."""
        offered = 0
        for due in await self._store.followup_offers_due():
            sender = self._senders.get(due.platform)
            fact = due.fact
            if sender is None or not self._may_write(fact.character_id):
                continue
            if not await self._store.offer_followups_once(
                fact.user_id, fact.character_id, self._clock()
            ):
                continue
            character = self._companion.characters.get(fact.character_id)
            language = character.language if character is not None else "en"
            name = character.name if character is not None else fact.character_id
            await sender.send_private(
                due.platform_user_id, text(language, "followups_offer", name=name)
            )
            offered += 1
        return offered

    def _may_write(self, character_id: str) -> bool:
        """A character rated mature writes in private only when MATURE_DMS allows it."""
        character = self._companion.characters.get(character_id)
        return character is None or character.rating != "mature" or self._mature_dms

    async def run(self) -> int:
        """Offer follow-ups where owed, then write and send every follow-up due now; how many
        follow-ups were sent. What is due is read once; the engine checks each one again
        right before it writes it and right before it sends it (a forget or /avisos off
        meanwhile)."""
        await self.offer()
        now = self._clock()
        # A day of slack each side: "today" depends on each user's zone, checked one by one.
        today = now.date()
        earliest: date = today - timedelta(days=self._policy.window_days + 1)
        sent = 0
        done: set[tuple[int, str]] = set()  # one per user and character per run
        for due in await self._store.followup_candidates(earliest, today):
            owner = (due.fact.user_id, due.fact.character_id)
            sender = self._senders.get(due.platform)
            if sender is None or owner in done or not self._may_write(owner[1]):
                continue
            state = await self._store.followup_state(*owner)
            if not self._policy.allows(due, state, now):
                continue
            outcome = await self._companion.follow_up(
                due, self._store, functools.partial(sender.send_private, due.platform_user_id)
            )
            if outcome != "not_written":
                done.add(owner)
            sent += outcome == "sent"
        return sent
