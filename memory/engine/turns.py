"""Taking a turn of the conversation: the user's messages into the turn log (read back when
another process changed the memory under the session), and the character's reply, stored with
what it was built from; a compaction is started when the window is due."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from cards.character import Character
from memory.budget.guard import BudgetExhausted
from memory.engine.bursts import Burst
from memory.engine.compaction import Compactor
from memory.engine.llm import TextSink
from memory.engine.off_record_answers import OffRecordAnswerer
from memory.engine.responder import Responder
from memory.engine.session import Session, SessionCache
from memory.engine.session_book import SessionBook
from memory.engine.settings import APOLOGY, EngineSettings
from memory.models import (
    Incoming,
    Reply,
    ReplySources,
    Speaker,
    Thread,
    Turn,
    User,
    UserTurn,
)
from memory.store import ConversationGone
from memory.store.protocols import ConversationStore

log = logging.getLogger(__name__)


class TurnTaker:
    def __init__(
        self,
        store: ConversationStore,
        book: SessionBook,
        sessions: SessionCache,
        responder: Responder,
        off_record_answers: OffRecordAnswerer,
        compactor: Compactor,
        settings: EngineSettings,
        clock: Callable[[], datetime],
    ) -> None:
        self._store = store
        self._book = book
        self._sessions = sessions
        self._responder = responder
        self._off_record_answers = off_record_answers
        self._compactor = compactor
        self._settings = settings
        self._clock = clock

    async def store_burst(
        self, user: User, thread: Thread, burst: Burst, now: datetime
    ) -> Session:
        """Append the burst's messages not yet stored, in arrival order (under the lock)."""
        off_record = await self._off_record_answers.session_for(thread, burst, now)
        if off_record is not None:
            return await self._off_record_answers.store_burst(off_record, burst, now)
        session = await self._book.session(user, thread, now)
        await self._book.refresh_profile_if_changed(session, now)
        while burst.stored < len(burst.messages):
            before = session
            session, stored = await self._add_user_turn(session, burst.messages[burst.stored], now)
            if burst.stored == 0 and session.conversation.id == before.conversation.id:
                session.previous_activity = before.last_activity
            session.last_activity = now
            burst.stored += 1
            burst.last_turn = stored.turn
            # Only the newest message's stored reply answers the burst: one that arrived after
            # it still needs the LLM.
            burst.stored_reply = stored.reply
        return session

    async def reply(
        self,
        session: Session,
        character: Character,
        turn: Turn,
        now: datetime,
        on_text: TextSink | None = None,
    ) -> Reply:
        """One LLM call answering the window up to `turn`, stored with what it was built from."""
        if session.off_record:
            apology = APOLOGY[character.language]
            return await self._off_record_answers.reply(
                session, character, turn, now, on_text, apology
            )
        try:
            generated = await self._responder.respond(session, character, now, turn.id, on_text)
        except BudgetExhausted as exc:  # the message is stored; no model was asked
            return Reply(exc.line(character.language), ok=False, turn_id=turn.id)
        if generated is None:
            return Reply(APOLOGY[character.language], ok=False, turn_id=turn.id)
        reply_turn = await self._store.add_reply(
            session.conversation,
            generated.text,
            self._clock(),
            ReplySources(
                turn_id=0,  # the store sets the reply's id
                fact_ids=session.profile.fact_ids,
                summary_id=session.summary.id if session.summary else None,
                window_turn_ids=tuple(t.id for t in session.window),
                journey_id=session.profile.journey_id,
                fragment_turn_ids=generated.fragment_turn_ids,
                created_at=now,
            ),
            generated.usage,
        )
        session.window.append(reply_turn)
        if self._compactor.due(session):
            self._compactor.start(session, character, keep=self._settings.window_keep_turns)
        return Reply(generated.text, turn_id=reply_turn.id)

    async def lines_after(self, thread: Thread, turn_id: int) -> list[Turn]:
        """The thread's lines stored after this turn, oldest first (tool turns left out)."""
        return [t for t in await self._store.turns_after(thread, turn_id) if t.role != "tool"]

    def compact_if_due(self, session: Session, character: Character) -> None:
        """Start the window's compaction when it is due: a scene's silent character grows its
        copy with what the others say, and folds it as its own replies would."""
        if self._compactor.due(session):
            self._compactor.start(session, character, keep=self._settings.window_keep_turns)

    async def _add_user_turn(
        self, session: Session, incoming: Incoming, now: datetime
    ) -> tuple[Session, UserTurn]:
        """Store the user's turn and end the window with it (see `add_line`)."""
        text, message_id, key = incoming.text, incoming.platform_message_id, incoming.source_key
        return await self.add_line(session, text, now, message_id, key)

    async def add_line(
        self,
        session: Session,
        text: str,
        now: datetime,
        message_id: str | None = None,
        key: str | None = None,
        speaker: Speaker | None = None,
    ) -> tuple[Session, UserTurn]:
        """Store a line on the user side of the thread (once: see TurnLog.add_user_turn) and
        end the window with it; in a scene, `speaker` says who said it. If another process
        wrote to the database since the session was read (the admin CLI: `companion memory
        import`, `forget`), the session is read again, so no reply is built from memory that
        was changed or deleted; a conversation deleted under it is begun anew."""
        try:
            stored = await self._store.add_user_turn(
                session.conversation, text, now, message_id, key, speaker
            )
        except ConversationGone:
            log.info("conversation %s was deleted by another process", session.conversation.id)
            self._sessions.drop(session.thread)
            # `memory forget` may have deleted the user's row too: it is written again.
            u = session.user
            user = await self._store.upsert_user(
                u.platform, u.platform_user_id, u.display_name, now
            )
            thread = replace(session.thread, user_id=user.id)
            session = await self._book.session(user, thread, now)
            stored = await self._store.add_user_turn(
                session.conversation, text, now, message_id, key, speaker
            )
        turn = stored.turn
        if stored.existed:
            # The message ran before (a process died after storing it): its turn, and the
            # reply if one was stored, are read back with the window instead of appended.
            log.info("message %s was stored before (turn %s): not stored again", key, turn.id)
        elif self._store.external_changes == session.store_changes or session.compacting:
            session.window.append(turn)  # (a compaction in flight finishes first; next time)
            return session, stored
        fresh = await self._book.restore(session.user, session.thread, session.conversation, now)
        self._sessions.put(fresh)
        return fresh, stored
