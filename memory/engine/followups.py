"""The engine's half of follow-ups: the character writes first, once, about a dated event the
user told it of. The message is built like a reply (same cached prompt, a note after the
window), stored as a turn with what it was built from (/memoria porque) and its cost (kind
"followup"), in the user's private thread. When and to whom is the scheduler's job
(bot/followups.py)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from memory.engine.off_record import OffRecordSessions
from memory.engine.responder import Responder
from memory.engine.session import SessionCache
from memory.engine.session_book import SessionBook
from memory.integrity.gate import as_data
from memory.models import FollowUpCandidate, Incoming, ReplySources
from memory.store.protocols import ConversationStore, FollowUps


class FollowUpWriter:
    def __init__(
        self,
        book: SessionBook,
        sessions: SessionCache,
        store: ConversationStore,
        responder: Responder,
        off_record: OffRecordSessions,
        clock: Callable[[], datetime],
    ) -> None:
        self._book = book
        self._sessions = sessions
        self._store = store
        self._responder = responder
        self._off_record = off_record
        self._clock = clock

    async def write(self, due: FollowUpCandidate, store: FollowUps) -> str | None:
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
        character, user, thread = await self._book.open_thread(incoming)
        async with self._sessions.lock(thread):
            if self._off_record.active(thread):
                return None
            now = self._clock()
            session = await self._book.session(user, thread, now)
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
