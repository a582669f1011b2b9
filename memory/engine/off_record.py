"""Conversations off the record (/incognito): the character answers from what it already knows
(profile, summary, recall, the stored window), but nothing of the conversation is written: no
turn, no summary, no fact, no search entry, and usage rows with counts only. Its turns live in
RAM, in a session of their own, until `/incognito off`, /reset, or the inactivity timeout; a
message after that timeout is refused unstored (the user might still think they are off the
record) with a notice that says so.

That the thread is off the record (the flag and its expiry, never a word) is also kept in the
database (migrations/*/0015), so that a restart or a worker's death, which lose the RAM turns,
cannot end it silently: the next message, in whichever process, finds the flag without a
session and is refused unstored with the same notice, as after the timeout."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from cards.character import Character
from memory.engine.llm import TextSink
from memory.engine.session import Session, SessionCache
from memory.errors import UserFacingError
from memory.models import Conversation, Incoming, Reply, Thread, Turn, TurnRole, UsageRecord, User
from memory.store.protocols import ConversationStore

if TYPE_CHECKING:
    from memory.engine.bursts import Burst
    from memory.engine.companion import EngineSettings
    from memory.engine.responder import Responder

OFF_RECORD_KIND = "incognito"
# True in the context (the task, and the tasks it starts) of an off-record call to the model:
# the bot's logging drops what the model SDKs log of it (bot/logging_setup.py). Made once at
# module level, as contextvars require; it holds nothing outside a context.
_OFF_RECORD_CALL: ContextVar[bool] = ContextVar("off_record_call", default=False)


def in_off_record_call() -> bool:
    return _OFF_RECORD_CALL.get()


def ended_unseen() -> UserFacingError:
    """Off the record ended while the user was away (the timeout, a restart): the message that
    finds it so is not stored, and the user is told."""
    return UserFacingError(
        "The off-the-record conversation ended; that message was not stored.",
        code="incognito_expired",
    )


def counts_only(record: UsageRecord) -> UsageRecord:
    """A usage row that says what a call cost and nothing of what it was about."""
    return replace(
        record,
        kind=OFF_RECORD_KIND,
        conversation_id=None,
        turn_id=None,
        error="failed" if record.error else None,
    )


def ram_turn(session: Session, role: TurnRole, text: str, now: datetime) -> Turn:
    """A turn kept in the session's window only. Its id is negative, below every other: never a
    stored turn's, so it is never cited, looked up or excluded from recall by mistake."""
    turn_id = min((t.id for t in session.window), default=0)
    turn = Turn(min(turn_id, 0) - 1, session.conversation.id, role, text, now)
    session.window.append(turn)
    return turn


@dataclass
class _OffRecord:
    session: Session
    last_activity: datetime


class OffRecordSessions:
    """The threads whose conversation is off the record, in RAM only (a restart ends them)."""

    def __init__(self, timeout: timedelta, clock: Callable[[], datetime]) -> None:
        self._timeout = timeout
        self._clock = clock
        self._open: dict[Thread, _OffRecord] = {}

    def start(self, base: Session, now: datetime) -> None:
        session = replace(
            base,
            window=list(base.window),
            off_record=True,
            compacting=False,
            previous_activity=None,
            last_activity=now,
        )
        self._open[base.thread] = _OffRecord(session, now)

    def stop(self, thread: Thread) -> bool:
        return self._open.pop(thread, None) is not None

    def active(self, thread: Thread) -> bool:
        return thread in self._open

    def drop_where(self, matches: Callable[[Thread], bool]) -> None:
        for thread in [t for t in self._open if matches(t)]:
            del self._open[thread]

    def take_lapsed(self, thread: Thread, now: datetime) -> bool:
        """True, once, when the thread's off-record session ran past the timeout: it ends."""
        found = self._open.get(thread)
        if found is None or now - found.last_activity <= self._timeout:
            return False
        del self._open[thread]
        return True

    def session_for(self, thread: Thread) -> Session | None:
        """The thread's off-record session, or None when none is open in this process."""
        found = self._open.get(thread)
        if found is None:
            return None
        found.session.previous_activity = found.last_activity
        return found.session

    def add(self, session: Session, role: TurnRole, text: str, now: datetime) -> Turn:
        """A turn in RAM only, appended to the off-record window."""
        turn = ram_turn(session, role, text, now)
        session.last_activity = now
        found = self._open.get(session.thread)
        if found is not None:
            found.last_activity = now
        return turn

    def trim(self, session: Session, keep: int) -> None:
        """Nothing is ever compacted off the record: the oldest RAM turns just fall away."""
        if len(session.window) > keep:
            del session.window[: len(session.window) - keep]


class OffRecordAnswering:
    """The off-the-record half of the Companion; what it needs of the engine is declared here
    and set by `Companion.__init__`."""

    _off_record: OffRecordSessions
    _sessions: SessionCache
    _store: ConversationStore
    _responder: Responder
    _settings: EngineSettings
    _clock: Callable[[], datetime]

    async def _open_thread(self, incoming: Incoming) -> tuple[Character, User, Thread]:
        raise NotImplementedError

    async def _known_thread(self, incoming: Incoming) -> tuple[User, Thread] | None:
        raise NotImplementedError

    async def _restore(
        self, user: User, thread: Thread, conversation: Conversation, now: datetime
    ) -> Session:
        raise NotImplementedError

    async def start_off_record(self, incoming: Incoming) -> None:
        """From now on this thread's conversation is off the record. It starts from what the
        character knows (the session as stored); no conversation row is opened for it."""
        _, user, thread = await self._open_thread(incoming)
        async with self._sessions.lock(thread):
            now = self._clock()
            base = self._sessions.get(thread)
            if base is None or base.conversation.ended_at is not None:
                conversation = await self._store.open_conversation(thread)
                base = await self._restore(
                    user, thread, conversation or Conversation(0, thread, now, now), now
                )
            self._off_record.start(base, now)
            await self._store.set_off_record(thread, now + self._settings.inactivity_timeout)

    async def stop_off_record(self, incoming: Incoming) -> bool:
        """Back on the record; False when the conversation was not off it (here, or in a
        process that is gone: its flag)."""
        known = await self._known_thread(incoming)
        if known is None:
            return False
        async with self._sessions.lock(known[1]):
            return await self._end_off_record(known[1])

    async def _end_off_record(self, thread: Thread) -> bool:
        stopped = self._off_record.stop(thread)
        flagged = await self._store.clear_off_record(thread)
        return stopped or flagged

    async def _off_record_session(
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

    def is_off_record(self, thread: Thread) -> bool:
        return self._off_record.active(thread)

    async def _store_off_record(self, session: Session, burst: Burst, now: datetime) -> Session:
        """The burst's messages into the RAM window; of them only the flag's new expiry is
        written."""
        while burst.stored < len(burst.messages):
            turn = self._off_record.add(session, "user", burst.messages[burst.stored].text, now)
            burst.unstored.add(burst.stored)
            burst.stored += 1
            burst.last_turn = turn
        await self._store.set_off_record(session.thread, now + self._settings.inactivity_timeout)
        return session

    async def _reply_off_record(
        self,
        session: Session,
        character: Character,
        turn: Turn,
        now: datetime,
        on_text: TextSink | None,
        apology: str,
    ) -> Reply:
        marked = _OFF_RECORD_CALL.set(True)
        try:
            generated = await self._responder.respond(session, character, now, turn.id, on_text)
        finally:
            _OFF_RECORD_CALL.reset(marked)
        if generated is None:
            return Reply(apology, ok=False)
        if generated.usage is not None:
            await self._responder.save_usage(session, generated.usage)
        self._off_record.add(session, "assistant", generated.text, self._clock())
        self._off_record.trim(session, self._settings.window_trigger_turns)
        return Reply(generated.text)
