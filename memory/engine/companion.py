"""The platform-agnostic conversation engine: every adapter calls `Companion.handle`.

The Companion is the engine's one face. Its parts are collaborators it builds and holds, each
given what it uses: the session book (who talks with whom, their sessions), the turn taker
(storing a message, writing the reply), the burst answerer, the compactor and the background
tasks, the off-the-record answerer, the follow-up writer and the forgetter."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from datetime import datetime, timedelta
from typing import Any

from cards.character import Character, CharacterBook
from memory.engine.background import BackgroundTasks
from memory.engine.bursts import BurstAnswerer, CallGate
from memory.engine.compaction import CompactionClaims, Compactor
from memory.engine.followups import Deliver, FollowUpOutcome, FollowUpWriter
from memory.engine.forgetting import ForgetsUnderWay, Forgetter
from memory.engine.llm import TextSink
from memory.engine.off_record import OffRecordSessions
from memory.engine.off_record_answers import OffRecordAnswerer
from memory.engine.responder import ProbeResult, Responder
from memory.engine.session import SessionCache
from memory.engine.session_book import SessionBook
from memory.engine.settings import APOLOGY, EngineSettings
from memory.engine.tokens import TokenEstimator
from memory.engine.turns import TurnTaker
from memory.models import (
    Conversation,
    FollowUpCandidate,
    Incoming,
    Reply,
    Thread,
    Turn,
    User,
)
from memory.profile.view import ProfileSource
from memory.scene.engine import LineSink, SceneEngine, SceneLine, SceneMessage
from memory.store.protocols import ConversationStore, FollowUps
from memory.summary.rolling import Summariser

Clock = Callable[[], datetime]

__all__ = ["APOLOGY", "Companion", "EngineSettings", "ProfileSource"]


class Companion:
    def __init__(
        self,
        store: ConversationStore,
        characters: CharacterBook,
        responder: Responder,
        summariser: Summariser,
        settings: EngineSettings,
        clock: Clock,
        tokens: TokenEstimator,
        profile: ProfileSource | None = None,
    ) -> None:
        self._store = store
        self._settings = settings
        self._clock = clock
        self._responder = responder
        self._sessions = SessionCache(settings.max_sessions_in_ram)
        self._off_record = OffRecordSessions(settings.inactivity_timeout, clock)
        self._tasks = BackgroundTasks()
        self._book = SessionBook(store, characters, self._sessions, settings, clock, profile)
        self._compactor = Compactor(
            settings, tokens, summariser, self._sessions, store, clock, self._tasks
        )
        self._off_record_answers = OffRecordAnswerer(
            self._off_record, self._book, self._sessions, store, responder, settings, clock
        )
        self._turns = TurnTaker(
            store,
            self._book,
            self._sessions,
            responder,
            self._off_record_answers,
            self._compactor,
            settings,
            clock,
        )
        self._bursts = BurstAnswerer(self._book, self._sessions, self._turns, clock)
        forgets = ForgetsUnderWay()
        self._follow_ups = FollowUpWriter(
            self._book,
            self._sessions,
            store,
            responder,
            self._off_record,
            forgets,
            self._tasks,
            clock,
        )
        self._forgetter = Forgetter(
            self._sessions, self._book, self._off_record, self._tasks, forgets
        )
        self._scenes = SceneEngine(
            self._book,
            self._sessions,
            self._turns,
            clock,
            settings.scene_max_replies,
            settings.scene_seed,
        )

    @property
    def characters(self) -> CharacterBook:
        return self._book.characters

    @property
    def inactivity_timeout(self) -> timedelta:
        return self._settings.inactivity_timeout

    @property
    def sessions_in_ram(self) -> int:
        return len(self._sessions)

    def messages_waiting(self) -> int:
        """Messages received whose burst's LLM call has not begun (they wait for a reply in
        flight, or for the rate limit): what a test or an operator can wait on."""
        return self._bursts.waiting() + self._scenes.waiting()

    def character(self, character_id: str) -> Character:
        return self._book.character(character_id)

    def on_conversation_end(self, listener: Callable[[Conversation], Awaitable[None]]) -> None:
        """Called once per ended conversation; must be quick (spawn the real work)."""
        self._book.on_end(listener)

    def profile_changed(self, user_id: int, character_id: str) -> None:
        """New facts were stored for this user with this character (see SessionBook)."""
        self._book.profile_changed(user_id, character_id)

    def timezone_changed(self, user_id: int, zone: str | None) -> None:
        """The user set their time zone (/zona): their sessions in RAM use it from now on."""
        self._book.timezone_changed(user_id, zone)

    # ---- the conversation -------------------------------------------------------------------

    async def handle(
        self,
        incoming: Incoming,
        gate: CallGate | None = None,
        on_held: Callable[[float], Awaitable[None]] | None = None,
        on_text: TextSink | None = None,
    ) -> Reply:
        """Store the user's turn, answer it, and schedule compaction when due."""
        return await self.submit(incoming, gate, on_held, on_text)

    def submit(
        self,
        incoming: Incoming,
        gate: CallGate | None = None,
        on_held: Callable[[float], Awaitable[None]] | None = None,
        on_text: TextSink | None = None,
    ) -> Awaitable[Reply]:
        """Join the message to its thread's burst now, and return the wait for its reply
        (memory/engine/bursts.py)."""
        return self._bursts.submit(incoming, gate, on_held, on_text)

    def scene(
        self,
        message: SceneMessage,
        sink: LineSink,
        gate: CallGate | None = None,
        on_held: Callable[[float], Awaitable[None]] | None = None,
    ) -> Awaitable[tuple[SceneLine, ...]]:
        """A person's message to a group's scene: stored in every present character's copy,
        answered by the characters memory/scene/routing.py chooses (memory/scene/engine.py)."""
        return self._scenes.submit(message, sink, gate, on_held)

    # ---- off the record, follow-ups, forgetting ---------------------------------------------

    async def start_off_record(self, incoming: Incoming) -> None:
        """From now on this thread's conversation is off the record."""
        await self._off_record_answers.start(incoming)

    async def stop_off_record(self, incoming: Incoming) -> bool:
        """Back on the record; False when the conversation was not off it."""
        return await self._off_record_answers.stop(incoming)

    def is_off_record(self, thread: Thread) -> bool:
        return self._off_record.active(thread)

    def on_unstored(self, listener: Callable[[Incoming], None]) -> None:
        """Called, in the message's own context, for each message whose words were never
        written (off the record, or refused when it ended): what a worker's inbox deletes."""
        self._bursts.on_unstored(listener)

    async def follow_up(
        self, due: FollowUpCandidate, store: FollowUps, deliver: Deliver
    ) -> FollowUpOutcome:
        """Write, store and deliver a follow-up, as work a forget cancels (engine/followups.py)."""
        return await self._follow_ups.follow_up(due, store, deliver)

    def forget_cached(self, user_id: int, character_id: str) -> None:
        """Drop the RAM sessions of a user with a character (after /memoria olvidar)."""
        self._forgetter.forget_cached(user_id, character_id)

    def reread_scene(self, platform: str, channel_id: str) -> None:
        """Another worker answered this group's scene since this one did."""
        self._scenes.reread(platform, channel_id)

    def on_forget(self, listener: Callable[[int, str], Awaitable[None]]) -> None:
        """Called before a user's memory with a character is deleted (engine/forgetting.py)."""
        self._forgetter.on_forget(listener)

    def forgetting(
        self, user_id: int, character_id: str
    ) -> contextlib.AbstractAsyncContextManager[None]:
        """Hold everything of this user with this character still while it is deleted."""
        return self._forgetter.forgetting(user_id, character_id)

    @contextlib.asynccontextmanager
    async def holding_scene(
        self, owner: User | None, witnesses: list[str], scope: str
    ) -> AsyncIterator[None]:
        """Hold every character's copy of a scene still while a participant's lines are taken
        out of it (as `forgetting` holds a user's threads): no reply, compaction or extraction
        computed from those lines lands afterwards, and the copies are read again."""
        if owner is None:  # the scene never stored a line
            yield
            return
        async with contextlib.AsyncExitStack() as held:
            for character_id in sorted(witnesses):  # in one order: two holds never cross
                await held.enter_async_context(self.forgetting(owner.id, character_id))
            yield

    # ---- background work --------------------------------------------------------------------

    def claim_compactions(self, claims: CompactionClaims) -> None:
        """Compact only under `claims` (workers sharing one database: bot/inbox/)."""
        self._compactor.claim_compactions(claims)

    def spawn(
        self, coroutine: Coroutine[Any, Any, None], owner: tuple[int, str] | None = None
    ) -> None:
        """Run after the reply; tracked, and cancelled by a forget of `owner`."""
        self._tasks.spawn(coroutine, owner)

    async def drain(self) -> None:
        await self._tasks.drain()

    # ---- sessions ---------------------------------------------------------------------------

    async def probe(self, incoming: Incoming) -> ProbeResult:
        """A control question asked of the memory as it stands, without adding to it."""
        character, user, thread = await self._book.open_thread(incoming)
        async with self._sessions.lock(thread):
            now = self._clock()
            session = await self._book.session(user, thread, now)
            return await self._responder.probe(session, character, now, incoming.text)

    async def is_new_thread(self, incoming: Incoming) -> bool:
        """True when this user has never talked with this character here."""
        known = await self._book.known_thread(incoming)
        return known is None or await self._store.count_turns(known[1]) == 0

    async def turn_count(self, incoming: Incoming) -> int:
        """How many turns this user's thread with the character holds (0 for none yet)."""
        known = await self._book.known_thread(incoming)
        return 0 if known is None else await self._store.count_turns(known[1])

    async def turns_since(self, incoming: Incoming, count_before: int) -> list[Turn]:
        """The turns stored since the thread held `count_before`, from its open conversation:
        what a cancelled reply really left behind (its user turn, maybe the reply too)."""
        known = await self._book.known_thread(incoming)
        if known is None:
            return []
        added = await self._store.count_turns(known[1]) - count_before
        conversation = await self._store.open_conversation(known[1]) if added > 0 else None
        if conversation is None:
            return []
        return (await self._store.conversation_turns(conversation.id))[-added:]

    async def reset(self, incoming: Incoming) -> bool:
        """End the conversation now and fold the whole window into the summary."""
        return await self.end_conversation(incoming, reason="reset", fold_window=True)

    async def end_conversation(
        self, incoming: Incoming, reason: str, fold_window: bool = False
    ) -> bool:
        """End the open conversation, if any; with fold_window the next one starts clean."""
        known = await self._book.known_thread(incoming)
        if known is None:
            return False
        user, thread = known
        return await self._end_thread(user, thread, reason, fold_window)

    async def end_thread(self, owner: User, character_id: str, scope: str) -> bool:
        """/reset of a scene's copy kept by one character (bot/scenes.py): as a private
        thread's, its window folded into its summary."""
        return await self._end_thread(owner, Thread(owner.id, character_id, scope), "reset", True)

    async def _end_thread(self, user: User, thread: Thread, reason: str, fold_window: bool) -> bool:
        async with self._sessions.lock(thread):
            await self._off_record_answers.end(thread)
            conversation = await self._store.open_conversation(thread)
            if conversation is None:
                return False
            now = self._clock()
            await self._book.end(conversation, reason, now)
            session = self._sessions.get(thread) or await self._book.restore(
                user, thread, conversation, now
            )
            if fold_window and session.window:
                character = self.character(thread.character_id)
                self._compactor.start(session, character, keep=0)
            self._sessions.drop(thread)
        return True

    async def end_idle_conversations(self) -> int:
        """End every conversation idle past the timeout; run by the scheduler's timer."""
        now = self._clock()
        timeout = self._settings.inactivity_timeout
        idle = await self._store.conversations_idle_since(now - timeout)
        for conversation in idle:
            async with self._sessions.lock(conversation.thread):
                self._sessions.drop(conversation.thread)
                ended_at = conversation.last_activity_at + timeout
                await self._book.end(conversation, "inactivity", ended_at)
        return len(idle)
