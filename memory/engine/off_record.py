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
from contextvars import ContextVar, Token
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from memory.engine.session import Session
from memory.errors import UserFacingError
from memory.models import Thread, Turn, TurnRole, UsageRecord

OFF_RECORD_KIND = "incognito"
# True in the context (the task, and the tasks it starts) of an off-record call to the model:
# the bot's logging drops what the model SDKs log of it (bot/logging_setup.py). Made once at
# module level, as contextvars require; it holds nothing outside a context.
_OFF_RECORD_CALL: ContextVar[bool] = ContextVar("off_record_call", default=False)


def in_off_record_call() -> bool:
    return _OFF_RECORD_CALL.get()


def mark_off_record_call() -> Token[bool]:
    """From here on in this context the model's calls are off the record (reset the token)."""
    return _OFF_RECORD_CALL.set(True)


def reset_off_record_call(token: Token[bool]) -> None:
    _OFF_RECORD_CALL.reset(token)


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
