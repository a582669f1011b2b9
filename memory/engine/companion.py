"""The platform-agnostic conversation engine: every adapter calls `Companion.handle`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from cards.character import Character, CharacterBook
from memory.engine.bursts import Burst, BurstAnswering, Bursts, CallGate
from memory.engine.compaction import BackgroundWork, OwnCompactions
from memory.engine.followups import FollowUpWriting
from memory.engine.forgetting import Forgetting
from memory.engine.llm import TextSink
from memory.engine.off_record import OffRecordAnswering, OffRecordSessions
from memory.engine.prompt import Budgets
from memory.engine.responder import ProbeResult, Responder
from memory.engine.session import RecentUsers, Session, SessionCache, last_activity
from memory.engine.tokens import TokenEstimator
from memory.errors import UserFacingError
from memory.models import (
    Conversation,
    Incoming,
    Reply,
    ReplySources,
    Thread,
    Turn,
    User,
    UserTurn,
)
from memory.profile.view import ProfileLines
from memory.store import ConversationGone
from memory.store.protocols import ConversationStore
from memory.summary.rolling import Summariser

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]

APOLOGY = {
    "es": "Perdona, se me ha ido el hilo un momento. ¿Me lo repites dentro de un rato?",
    "en": "Sorry, I lost my train of thought for a moment. Could you say that again in a bit?",
}


@dataclass(frozen=True)
class EngineSettings:
    budgets: Budgets = field(default_factory=Budgets)
    window_keep_turns: int = 12
    window_trigger_turns: int = 32
    inactivity_timeout: timedelta = timedelta(minutes=30)
    max_reply_tokens: int = 600
    max_sessions_in_ram: int = 2000
    lore_page_cap_tokens: int = 1500


class ProfileSource(Protocol):
    """What the engine needs of the long-term profile: its lines for a new session."""

    async def lines_for(self, thread: Thread, now: datetime) -> ProfileLines: ...


class Companion(BurstAnswering, BackgroundWork, OffRecordAnswering, FollowUpWriting, Forgetting):
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
        self._characters = characters
        self._responder = responder
        self._summariser = summariser
        self._settings = settings
        self._clock = clock
        self._tokens = tokens
        self._profile = profile
        self._sessions = SessionCache(settings.max_sessions_in_ram)
        self._off_record = OffRecordSessions(settings.inactivity_timeout, clock)
        self._users = RecentUsers(settings.max_sessions_in_ram)
        self._bursts = Bursts()
        self._profile_versions: dict[tuple[int, str], int] = {}
        self._profile_epoch = 0
        self._tasks: set[asyncio.Task[Any]] = set()
        # (user id, character id) -> its background work in flight: what a forget cancels
        self._owned_tasks: dict[tuple[int, str], set[asyncio.Task[Any]]] = {}
        self._end_listeners: list[Callable[[Conversation], Awaitable[None]]] = []
        self._forget_listeners: list[Callable[[int, str], Awaitable[None]]] = []
        self._unstored_listeners: list[Callable[[Incoming], None]] = []
        self._users_seen_at_changes = 0
        self._compaction_claims = OwnCompactions()

    @property
    def characters(self) -> CharacterBook:
        return self._characters

    @property
    def inactivity_timeout(self) -> timedelta:
        return self._settings.inactivity_timeout

    @property
    def sessions_in_ram(self) -> int:
        return len(self._sessions)

    def on_conversation_end(self, listener: Callable[[Conversation], Awaitable[None]]) -> None:
        """Called once per ended conversation; must be quick (spawn the real work)."""
        self._end_listeners.append(listener)

    def profile_changed(self, user_id: int, character_id: str) -> None:
        """New facts were stored for this user with this character. A session built before
        (its conversation began while the previous one's extraction still ran, as after a
        restart) rebuilds its profile at its next message, once, instead of a conversation
        later. A version, not a flag on the session: the session may be mid-build."""
        if len(self._profile_versions) > 4 * self._settings.max_sessions_in_ram:
            self._profile_versions.clear()  # costs each session one extra rebuild, no more
        # One counter for all, so that a version is never handed out twice, even after a clear.
        self._profile_epoch += 1
        self._profile_versions[(user_id, character_id)] = self._profile_epoch

    def character(self, character_id: str) -> Character:
        character = self._characters.get(character_id)
        if character is None:
            valid = ", ".join(self._characters.ids())
            raise UserFacingError(
                f"Unknown character '{character_id}'. Valid: {valid}.",
                code="unknown_character",
                given=character_id,
                valid=valid,
            )
        return character

    # ---- the conversation -------------------------------------------------------------------

    async def handle(
        self,
        incoming: Incoming,
        gate: CallGate | None = None,
        on_held: Callable[[float], Awaitable[None]] | None = None,
        on_text: TextSink | None = None,
    ) -> Reply:
        """ConversationStore the user's turn, answer it, and schedule compaction when due."""
        return await self.submit(incoming, gate, on_held, on_text)

    async def _store_burst(
        self, user: User, thread: Thread, burst: Burst, now: datetime
    ) -> Session:
        """Append the burst's messages not yet stored, in arrival order (under the lock)."""
        off_record = await self._off_record_session(thread, burst, now)
        if off_record is not None:
            return await self._store_off_record(off_record, burst, now)
        session = await self._session(user, thread, now)
        await self._refresh_profile_if_changed(session, now)
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

    async def _reply(
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
            return await self._reply_off_record(session, character, turn, now, on_text, apology)
        generated = await self._responder.respond(session, character, now, turn.id, on_text)
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
                fragment_turn_ids=generated.fragment_turn_ids,
                created_at=now,
            ),
            generated.usage,
        )
        session.window.append(reply_turn)
        if self._compaction_due(session):
            self._start_compaction(session, character, keep=self._settings.window_keep_turns)
        return Reply(generated.text, turn_id=reply_turn.id)

    # ---- sessions ---------------------------------------------------------------------------

    async def _session(self, user: User, thread: Thread, now: datetime) -> Session:
        session = self._sessions.get(thread)
        timeout = self._settings.inactivity_timeout
        if (
            session is not None
            and session.conversation.ended_at is None
            and (now - session.last_activity <= timeout)
        ):
            return session
        if session is not None and session.conversation.ended_at is None:
            await self._end(session.conversation, "inactivity", session.last_activity + timeout)
        conversation = await self._store.open_conversation(thread)
        if conversation is not None and now - conversation.last_activity_at > timeout:
            await self._end(conversation, "inactivity", conversation.last_activity_at + timeout)
            conversation = None
        if conversation is None:
            conversation = await self._store.start_conversation(thread, now)
        session = await self._restore(user, thread, conversation, now)
        self._sessions.put(session)
        return session

    async def _add_user_turn(
        self, session: Session, incoming: Incoming, now: datetime
    ) -> tuple[Session, UserTurn]:
        """Store the user's turn (once: see TurnLog.add_user_turn) and end the window with it.
        If another process wrote to the database since the session was read (the admin CLI:
        `companion memory import`, `forget`), the session is read again, so no reply is built
        from memory that was changed or deleted; a conversation deleted under it is begun
        anew."""
        text, message_id, key = incoming.text, incoming.platform_message_id, incoming.source_key
        try:
            stored = await self._store.add_user_turn(
                session.conversation, text, now, message_id, key
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
            session = await self._session(user, thread, now)
            stored = await self._store.add_user_turn(
                session.conversation, text, now, message_id, key
            )
        turn = stored.turn
        if stored.existed:
            # The message ran before (a process died after storing it): its turn, and the
            # reply if one was stored, are read back with the window instead of appended.
            log.info("message %s was stored before (turn %s): not stored again", key, turn.id)
        elif self._store.external_changes == session.store_changes or session.compacting:
            session.window.append(turn)  # (a compaction in flight finishes first; next time)
            return session, stored
        fresh = await self._restore(session.user, session.thread, session.conversation, now)
        self._sessions.put(fresh)
        return fresh, stored

    async def _refresh_profile_if_changed(self, session: Session, now: datetime) -> None:
        thread = session.thread
        version = self._profile_versions.get((thread.user_id, thread.character_id), 0)
        if version != session.profile_version and self._profile is not None:
            session.profile = await self._profile.lines_for(thread, now)
            session.profile_version = version
            if not session.compacting:  # a changed fact may have dated claims of the summary
                session.summary = await self._store.latest_summary(thread) or session.summary

    async def _restore(
        self, user: User, thread: Thread, conversation: Conversation, now: datetime
    ) -> Session:
        """Rebuild a session from the store: a restart loses nothing the user saw."""
        store_changes = self._store.external_changes  # before the reads, as the version below
        summary = await self._store.latest_summary(thread)
        after = summary.covers_up_to_turn_id if summary else 0
        window = await self._store.turns_after(thread, after)
        # Read before the facts: a change landing in between is then seen at the next message.
        version = self._profile_versions.get((thread.user_id, thread.character_id), 0)
        profile = await self._profile.lines_for(thread, now) if self._profile else ProfileLines()
        return Session(
            user=user,
            thread=thread,
            conversation=conversation,
            summary=summary,
            window=window,
            profile=profile,
            last_activity=await last_activity(self._store, thread, window, summary, now),
            profile_version=version,
            store_changes=store_changes,
            timezone=await self._store.user_timezone(user.id),
        )

    def timezone_changed(self, user_id: int, zone: str | None) -> None:
        """The user set their time zone (/zona): their sessions in RAM use it from now on."""
        for thread in self._sessions.threads():
            session = self._sessions.get(thread)
            if session is not None and thread.user_id == user_id:
                session.timezone = zone

    async def _end(self, conversation: Conversation, reason: str, when: datetime) -> None:
        if await self._store.end_conversation(conversation.id, reason, when):
            log.info("conversation %s ended (%s)", conversation.id, reason)
            for listener in self._end_listeners:
                await listener(conversation)

    async def probe(self, incoming: Incoming) -> ProbeResult:
        """A control question asked of the memory as it stands, without adding to it."""
        character, user, thread = await self._open_thread(incoming)
        async with self._sessions.lock(thread):
            now = self._clock()
            session = await self._session(user, thread, now)
            return await self._responder.probe(session, character, now, incoming.text)

    async def _open_thread(self, incoming: Incoming) -> tuple[Character, User, Thread]:
        """The character, the user (created on first contact) and their thread."""
        character = self.character(incoming.character_id)
        if self._store.external_changes != self._users_seen_at_changes:
            # Another process wrote (`companion memory forget` may have deleted a user's row):
            # the users cached here are read again, once each.
            self._users = RecentUsers(self._settings.max_sessions_in_ram)
            self._users_seen_at_changes = self._store.external_changes
        user = self._users.get(incoming.platform, incoming.platform_user_id)
        if user is None or user.display_name != incoming.display_name:
            user = await self._store.upsert_user(
                incoming.platform, incoming.platform_user_id, incoming.display_name, self._clock()
            )
            self._users.put(user)
        return character, user, Thread(user.id, character.id, incoming.scope)

    async def _known_thread(self, incoming: Incoming) -> tuple[User, Thread] | None:
        character = self.character(incoming.character_id)
        user = self._users.get(incoming.platform, incoming.platform_user_id)
        user = user or await self._store.find_user(incoming.platform, incoming.platform_user_id)
        return (user, Thread(user.id, character.id, incoming.scope)) if user else None

    async def is_new_thread(self, incoming: Incoming) -> bool:
        """True when this user has never talked with this character here."""
        known = await self._known_thread(incoming)
        return known is None or await self._store.count_turns(known[1]) == 0

    async def reset(self, incoming: Incoming) -> bool:
        """End the conversation now and fold the whole window into the summary."""
        return await self.end_conversation(incoming, reason="reset", fold_window=True)

    async def end_conversation(
        self, incoming: Incoming, reason: str, fold_window: bool = False
    ) -> bool:
        """End the open conversation, if any; with fold_window the next one starts clean."""
        known = await self._known_thread(incoming)
        if known is None:
            return False
        user, thread = known
        async with self._sessions.lock(thread):
            await self._end_off_record(thread)
            conversation = await self._store.open_conversation(thread)
            if conversation is None:
                return False
            now = self._clock()
            await self._end(conversation, reason, now)
            session = self._sessions.get(thread) or await self._restore(
                user, thread, conversation, now
            )
            if fold_window and session.window:
                character = self.character(thread.character_id)
                self._start_compaction(session, character, keep=0)
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
                await self._end(conversation, "inactivity", conversation.last_activity_at + timeout)
        return len(idle)
