"""The engine's half of follow-ups: the character writes first, once, about a dated event the
user told it of. The message is built like a reply (same cached prompt, a note after the
window), stored as a turn with what it was built from (/memoria porque) and its cost (kind
"followup"), in the user's private thread, then delivered. When and to whom is the scheduler's
job (bot/followups.py).

A follow-up is the user's work like a compaction: owned by the user and character, so that a
forget cancels it wherever it is (its model call, its send). Under the thread's lock it checks,
right before it is written and right before it is sent, that no forget is under way and that
the store still owes it (a forget in another process, /avisos off, off the record)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Literal

from memory.engine.background import BackgroundTasks
from memory.engine.forgetting import ForgetsUnderWay
from memory.engine.off_record import OffRecordSessions
from memory.engine.responder import Generated, Responder
from memory.engine.session import Session, SessionCache
from memory.engine.session_book import SessionBook
from memory.integrity.gate import as_data
from memory.models import Fact, FollowUpCandidate, Incoming, ReplySources, Thread, Turn
from memory.store.protocols import ConversationStore, FollowUps

Deliver = Callable[[str], Awaitable[bool]]  # the message to the user's private chat; sent?
# sent; written but refused by the platform; not written (not owed any more, or failed)
FollowUpOutcome = Literal["sent", "refused", "not_written"]


class FollowUpWriter:
    def __init__(
        self,
        book: SessionBook,
        sessions: SessionCache,
        store: ConversationStore,
        responder: Responder,
        off_record: OffRecordSessions,
        forgets: ForgetsUnderWay,
        tasks: BackgroundTasks,
        clock: Callable[[], datetime],
    ) -> None:
        self._book = book
        self._sessions = sessions
        self._store = store
        self._responder = responder
        self._off_record = off_record
        self._forgets = forgets
        self._tasks = tasks
        self._clock = clock

    async def follow_up(
        self, due: FollowUpCandidate, store: FollowUps, deliver: Deliver
    ) -> FollowUpOutcome:
        """Write the follow-up, store it in the user's private thread, and deliver it, as work
        of the user's that a forget cancels ("not_written" then, or when it was not owed any
        more, or the model failed)."""
        fact = due.fact
        task = self._tasks.spawn(
            self._follow_up(due, store, deliver), owner=(fact.user_id, fact.character_id)
        )
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError:  # the job itself is stopped: so is its follow-up
            task.cancel()
            raise
        if task.cancelled() or task.exception() is not None:  # (logged by spawn)
            return "not_written"
        return task.result()

    async def _follow_up(
        self, due: FollowUpCandidate, store: FollowUps, deliver: Deliver
    ) -> FollowUpOutcome:
        fact = due.fact
        character, user, thread = await self._book.open_thread(_private(due))
        async with self._sessions.lock(thread):
            if not await self._may_write(thread, fact, store):
                return "not_written"
            now = self._clock()
            session = await self._book.session(user, thread, now)
            event = as_data(f"{fact.value} ({fact.event_date})")
            generated = await self._responder.follow_up(session, character, now, event)
            # A forget in another process during the call is seen here; one in this process
            # cancelled the call.
            if generated is None or not await self._may_write(thread, fact, store):
                return "not_written"
            turn = await self._store_follow_up(session, fact, generated, now, store)
            if turn is None or not await self._may_send(fact, turn, store):
                return "not_written"
            return "sent" if await deliver(generated.text) else "refused"

    async def _may_write(self, thread: Thread, fact: Fact, store: FollowUps) -> bool:
        if (fact.user_id, fact.character_id) in self._forgets:
            return False
        # Nothing is written off the record, here or in a process that is gone (its flag).
        if self._off_record.active(thread) or await self._store.off_record_until(thread):
            return False
        return await store.followup_owed(fact.user_id, fact.character_id, fact.id)

    async def _may_send(self, fact: Fact, turn: Turn, store: FollowUps) -> bool:
        if (fact.user_id, fact.character_id) in self._forgets:
            return False
        return await store.followup_recorded(fact.user_id, fact.character_id, fact.id, turn.id)

    async def _store_follow_up(
        self,
        session: Session,
        fact: Fact,
        generated: Generated,
        now: datetime,
        store: FollowUps,
    ) -> Turn | None:
        """The follow-up as the character's turn, with its sources and cost, recorded as sent
        about `fact`; None when the fact went meanwhile (a forget in another process)."""
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
                journey_id=session.profile.journey_id,
                fragment_turn_ids=(),
                created_at=now,
            ),
            generated.usage,
        )
        session.window.append(turn)
        session.last_activity = now
        thread = session.thread
        if not await store.record_followup(
            thread.user_id, thread.character_id, fact.id, turn.id, now
        ):
            return None
        return turn


def _private(due: FollowUpCandidate) -> Incoming:
    """The user's private chat with the fact's character, as if they had written there."""
    return Incoming(
        due.platform,
        due.platform_user_id,
        due.display_name,
        "dm",
        due.platform_user_id,
        due.fact.character_id,
        "",
    )
