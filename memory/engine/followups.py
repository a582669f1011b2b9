"""The engine's half of follow-ups: the character writes first, once, about a dated event the
user told it of. The message is built like a reply (same cached prompt, a note after the
window), stored as a turn with what it was built from (/memoria porque) and its cost (kind
"followup"), in the user's private thread. When and to whom is the scheduler's job
(bot/followups.py)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from cards.character import Character
from memory.engine.off_record import OffRecordSessions
from memory.engine.session import Session, SessionCache
from memory.integrity.gate import as_data
from memory.models import FollowUpCandidate, Incoming, ReplySources, Thread, User
from memory.store.protocols import ConversationStore, FollowUps

if TYPE_CHECKING:
    from memory.engine.responder import Responder


class FollowUpWriting:
    """Declared here, set by `Companion.__init__`."""

    _store: ConversationStore
    _sessions: SessionCache
    _responder: Responder
    _off_record: OffRecordSessions
    _clock: Callable[[], datetime]

    async def _open_thread(self, incoming: Incoming) -> tuple[Character, User, Thread]:
        raise NotImplementedError

    async def _session(self, user: User, thread: Thread, now: datetime) -> Session:
        raise NotImplementedError

    async def write_follow_up(self, due: FollowUpCandidate, store: FollowUps) -> str | None:
        """The follow-up's text, stored in the user's private thread; None when it could not
        be written (the model failed, or the conversation is off the record right now)."""
        fact = due.fact
        incoming = Incoming(
            due.platform,
            due.platform_user_id,
            due.display_name,
            "dm",
            due.platform_user_id,
            fact.character_id,
            "",
        )
        character, user, thread = await self._open_thread(incoming)
        async with self._sessions.lock(thread):
            # Off the record here, or in a process that is gone (its flag outlives it).
            if self._off_record.active(thread) or await self._store.off_record_until(thread):
                return None
            now = self._clock()
            session = await self._session(user, thread, now)
            event = as_data(f"{fact.value} ({fact.event_date})")
            generated = await self._responder.follow_up(session, character, now, event)
            if generated is None:
                return None
            turn = await self._store.add_reply(
                session.conversation,
                generated.text,
                now,
                ReplySources(
                    turn_id=0,
                    # The event it asks about is among them, profile or not: /memoria porque.
                    fact_ids=tuple(dict.fromkeys((*session.profile.fact_ids, fact.id))),
                    summary_id=session.summary.id if session.summary else None,
                    window_turn_ids=tuple(t.id for t in session.window),
                    fragment_turn_ids=(),
                    created_at=now,
                ),
                generated.usage,
            )
            session.window.append(turn)
            session.last_activity = now
            await store.record_followup(user.id, character.id, fact.id, turn.id, now)
        return generated.text
