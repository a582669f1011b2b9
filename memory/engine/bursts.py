"""Bursts: one user's messages to one character answered by one LLM call.

People write in bursts. The messages that arrive while a reply is being written, or while the
rate limit holds the call back, join the thread's open burst; one call answers them all, and
the answer is delivered once, on the burst's newest message. Every message is stored first
(`Companion._store_burst`), in arrival order, so none is ever lost.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from cards.character import Character
from memory.engine.llm import TextSink
from memory.engine.session import Session, SessionCache
from memory.errors import UserFacingError
from memory.models import Incoming, Reply, Thread, Turn, User


class CallGate(Protocol):
    """A cap on LLM calls per user (the chat platforms' rate limit). Messages are never refused
    by it: a call it holds back waits, and the messages that arrive meanwhile join that call."""

    async def take(self, key: str) -> float:
        """0 when a call may be made now (and is counted); else the seconds until one may."""
        ...

    async def wait(self, seconds: float) -> None: ...


BurstKey = tuple[str, str, str, str]  # platform, platform user id, character id, scope


@dataclass(eq=False)
class Burst:
    """One user's messages to one character that one LLM call will answer: those that arrive
    while the previous reply is being written, or while the rate limit holds the call back."""

    key: BurstKey
    messages: list[Incoming]
    done: asyncio.Future[Reply]
    stored: int = 0  # messages[:stored] are in the turn log
    last_turn: Turn | None = None
    # The character's reply to `last_turn`, already stored: the burst ran before, in a process
    # that died before the reply was sent. It is sent as it is, with no LLM call.
    stored_reply: Turn | None = None
    held: bool = False  # the rate limit holds the call: members store their own turns
    # The positions of the messages whose words were never written (off the record, or
    # refused unstored when it ended unseen): what a worker deletes from its inbox.
    unstored: set[int] = field(default_factory=set)
    closed: bool = False  # the call has begun: later messages start the next burst
    # Where the answer is shown while it is written: the newest message's, as the answer is
    # delivered on the newest message.
    on_text: TextSink | None = None


class Bursts:
    """The open burst of each thread. Joining is synchronous, so arrival order is kept."""

    def __init__(self) -> None:
        self._open: dict[BurstKey, Burst] = {}

    def join(self, incoming: Incoming, on_text: TextSink | None = None) -> tuple[Burst, bool]:
        """The thread's open burst with the message added, and whether this message leads it."""
        key = (
            incoming.platform,
            incoming.platform_user_id,
            incoming.character_id,
            incoming.scope,
        )
        burst = self._open.get(key)
        if burst is not None:
            burst.messages.append(incoming)
            burst.on_text = on_text
            return burst, False
        burst = Burst(key, [incoming], asyncio.get_running_loop().create_future())
        burst.on_text = on_text
        self._open[key] = burst
        return burst, True

    def close(self, burst: Burst) -> None:
        burst.closed = True
        if self._open.get(burst.key) is burst:
            del self._open[burst.key]

    def __len__(self) -> int:
        return len(self._open)

    def waiting(self) -> int:
        """Messages that joined a burst whose call has not begun yet."""
        return sum(len(burst.messages) for burst in self._open.values())


class BurstTurns(Protocol):
    """What answering a burst needs of the conversation (memory/engine/turns.py)."""

    async def store_burst(self, user: User, thread: Thread, burst: Burst, now: datetime) -> Session:
        """Append the burst's messages not yet stored, in arrival order (under the lock)."""
        ...

    async def reply(
        self,
        session: Session,
        character: Character,
        turn: Turn,
        now: datetime,
        on_text: TextSink | None = None,
    ) -> Reply:
        """One LLM call answering the window up to `turn`."""
        ...


class ThreadOpener(Protocol):
    async def open_thread(self, incoming: Incoming) -> tuple[Character, User, Thread]: ...


class BurstAnswerer:
    """Joining, the gate, and handing out the one answer of a burst."""

    def __init__(
        self,
        threads: ThreadOpener,
        sessions: SessionCache,
        turns: BurstTurns,
        clock: Callable[[], datetime],
    ) -> None:
        self._bursts = Bursts()
        self._threads = threads
        self._sessions = sessions
        self._turns = turns
        self._clock = clock
        self._unstored_listeners: list[Callable[[Incoming], None]] = []

    def waiting(self) -> int:
        return self._bursts.waiting()

    def on_unstored(self, listener: Callable[[Incoming], None]) -> None:
        """Called, in the message's own context (its task's context variables), for each
        message whose words were never written: off the record, or refused when it ended."""
        self._unstored_listeners.append(listener)

    def submit(
        self,
        incoming: Incoming,
        gate: CallGate | None = None,
        on_held: Callable[[float], Awaitable[None]] | None = None,
        on_text: TextSink | None = None,
    ) -> Awaitable[Reply]:
        """Join the message to its thread's burst now (so arrival order is the order of the
        calls to this method), and return the wait for its reply. Messages that arrive while a
        reply is being written, or while `gate` holds the call back (`on_held` is told for how
        long, once), are answered together by one LLM call. The reply comes back for the
        burst's newest message; the others get an empty Reply: nothing more to send. The
        newest message's `on_text`, when given, sees the answer while the model writes it."""
        if not incoming.text.strip():
            raise UserFacingError("There is no text in that message to answer.", code="empty")
        burst, leads = self._bursts.join(incoming, on_text)
        # A task, not a bare coroutine: the burst is answered even if this caller never awaits
        # (its handler failed or was cancelled), or the thread's later messages would wait on
        # it for ever.
        return asyncio.ensure_future(self._answer(burst, incoming, leads, gate, on_held))

    async def _answer(
        self,
        burst: Burst,
        incoming: Incoming,
        leads: bool,
        gate: CallGate | None,
        on_held: Callable[[float], Awaitable[None]] | None,
    ) -> Reply:
        try:
            return await self._answer_one(burst, incoming, leads, gate, on_held)
        finally:
            position = next(i for i, m in enumerate(burst.messages) if m is incoming)
            if position in burst.unstored:
                for listener in self._unstored_listeners:
                    listener(incoming)

    async def _answer_one(
        self,
        burst: Burst,
        incoming: Incoming,
        leads: bool,
        gate: CallGate | None,
        on_held: Callable[[float], Awaitable[None]] | None,
    ) -> Reply:
        if leads:
            try:
                burst.done.set_result(await self._lead(burst, gate, on_held))
            except asyncio.CancelledError:
                self._bursts.close(burst)
                burst.done.cancel()
                raise
            except Exception as exc:
                self._bursts.close(burst)
                burst.done.set_exception(exc)
        elif burst.held and not burst.closed:
            await self._store_held(burst)  # stored now, not after the wait
        try:
            reply = await asyncio.shield(burst.done)
        except Exception:
            if incoming is burst.messages[-1]:  # final once done: the burst closed before
                raise
            return Reply("", ok=False)
        if incoming is burst.messages[-1]:
            return reply
        return Reply("", ok=reply.ok, turn_id=reply.turn_id)

    async def _lead(
        self,
        burst: Burst,
        gate: CallGate | None,
        on_held: Callable[[float], Awaitable[None]] | None,
    ) -> Reply:
        """Store the burst's messages, wait for the gate, then answer them in one call."""
        first = burst.messages[0]
        character, user, thread = await self._threads.open_thread(first)
        notified = False
        while True:
            async with self._sessions.lock(thread):
                now = self._clock()
                session = await self._turns.store_burst(user, thread, burst, now)
                wait = 0.0
                if gate is not None and burst.stored_reply is None:
                    wait = await gate.take(f"{first.platform}:{first.platform_user_id}")
                    if wait <= 0:
                        # The gate may have waited on the database (workers count calls
                        # there): messages that joined meanwhile are stored too, or the
                        # answer would go on one whose turn is not in the window.
                        session = await self._turns.store_burst(user, thread, burst, now)
                if wait <= 0:
                    self._bursts.close(burst)  # no await since the last store: none is left
                    return await self._answer_stored(session, character, burst, now)
                burst.held = True
            if on_held is not None and not notified:
                notified = True
                await on_held(wait)
            assert gate is not None
            await gate.wait(wait)

    async def _answer_stored(
        self, session: Session, character: Character, burst: Burst, now: datetime
    ) -> Reply:
        """The reply to the burst's newest turn: the one already stored, when the burst ran
        before in a process that died before sending it; else one LLM call."""
        if burst.stored_reply is not None:
            return Reply(burst.stored_reply.text, turn_id=burst.stored_reply.id)
        assert burst.last_turn is not None
        return await self._turns.reply(session, character, burst.last_turn, now, burst.on_text)

    async def _store_held(self, burst: Burst) -> None:
        _, user, thread = await self._threads.open_thread(burst.messages[0])
        async with self._sessions.lock(thread):
            await self._turns.store_burst(user, thread, burst, self._clock())
