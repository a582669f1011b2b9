"""Answering off the record (/incognito): the burst's messages go to the RAM window, the reply
is built as any other but kept in RAM too, and its usage row holds counts only. What is off the
record, and until when, is memory/engine/off_record.py's."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from cards.character import Character
from memory.budget.guard import BudgetExhausted
from memory.engine.bursts import Burst
from memory.engine.llm import TextSink
from memory.engine.off_record import (
    OffRecordSessions,
    ended_unseen,
    mark_off_record_call,
    reset_off_record_call,
)
from memory.engine.responder import Responder
from memory.engine.session import Session, SessionCache
from memory.engine.session_book import SessionBook
from memory.engine.settings import EngineSettings
from memory.models import Conversation, Incoming, Reply, Thread, Turn
from memory.store.protocols import ConversationStore


class OffRecordAnswerer:
    """The off-the-record half of the conversation: its sessions start from what the character
    knows, its turns stay in RAM, and its usage rows hold counts only."""

    def __init__(
        self,
        off_record: OffRecordSessions,
        book: SessionBook,
        sessions: SessionCache,
        store: ConversationStore,
        responder: Responder,
        settings: EngineSettings,
        clock: Callable[[], datetime],
    ) -> None:
        self._off_record = off_record
        self._book = book
        self._sessions = sessions
        self._store = store
        self._responder = responder
        self._settings = settings
        self._clock = clock

    async def start(self, incoming: Incoming) -> None:
        """From now on this thread's conversation is off the record. It starts from what the
        character knows (the session as stored); no conversation row is opened for it."""
        _, user, thread = await self._book.open_thread(incoming)
        async with self._sessions.lock(thread):
            now = self._clock()
            base = self._sessions.get(thread)
            if base is None or base.conversation.ended_at is not None:
                conversation = await self._store.open_conversation(thread)
                base = await self._book.restore(
                    user, thread, conversation or Conversation(0, thread, now, now), now
                )
            self._off_record.start(base, now)
            await self._store.set_off_record(thread, now + self._settings.inactivity_timeout)

    async def stop(self, incoming: Incoming) -> bool:
        """Back on the record; False when the conversation was not off it (here, or in a
        process that is gone: its flag)."""
        known = await self._book.known_thread(incoming)
        if known is None:
            return False
        async with self._sessions.lock(known[1]):
            return await self.end(known[1])

    async def end(self, thread: Thread) -> bool:
        stopped = self._off_record.stop(thread)
        flagged = await self._store.clear_off_record(thread)
        return stopped or flagged

    async def session_for(
        self, thread: Thread, burst: Burst, now: datetime
    ) -> Session | None:
        """The thread's off-record session (under its lock), or None on the record. A message
        that finds off the record ended unseen is refused unstored, once: after the timeout,
        or after a restart or a worker's death (the flag without a session here)."""
        lapsed = self._off_record.take_lapsed(thread, now)
        session = None if lapsed else self._off_record.session_for(thread)
        if session is not None:
            return session
        # Read at every message on the record: one primary-key lookup, and the only way a
        # process that never saw the /incognito (a restart, another worker) can know of it.
        if lapsed or await self._store.off_record_until(thread) is not None:
            await self._store.clear_off_record(thread)
            burst.unstored.update(range(burst.stored, len(burst.messages)))
            raise ended_unseen()
        return None

    async def store_burst(self, session: Session, burst: Burst, now: datetime) -> Session:
        """The burst's messages into the RAM window; of them only the flag's new expiry is
        written."""
        while burst.stored < len(burst.messages):
            turn = self._off_record.add(session, "user", burst.messages[burst.stored].text, now)
            burst.unstored.add(burst.stored)
            burst.stored += 1
            burst.last_turn = turn
        await self._store.set_off_record(session.thread, now + self._settings.inactivity_timeout)
        return session

    async def reply(
        self,
        session: Session,
        character: Character,
        turn: Turn,
        now: datetime,
        on_text: TextSink | None,
        apology: str,
    ) -> Reply:
        marked = mark_off_record_call()
        try:
            generated = await self._responder.respond(session, character, now, turn.id, on_text)
        except BudgetExhausted as exc:
            return Reply(exc.line(character.language), ok=False)
        finally:
            reset_off_record_call(marked)
        if generated is None:
            return Reply(apology, ok=False)
        if generated.usage is not None:
            await self._responder.save_usage(session, generated.usage)
        self._off_record.add(session, "assistant", generated.text, self._clock())
        self._off_record.trim(session, self._settings.window_trigger_turns)
        return Reply(generated.text)
