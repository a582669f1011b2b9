"""Who is talking with whom, and their sessions: the characters, the users seen lately, each
thread's session (read back from the store after a restart, ended after the inactivity
timeout) and the versions of their profiles. Every other part of the engine finds a thread's
session through this book."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime

from cards.character import Character, CharacterBook
from memory.engine.session import RecentUsers, Session, SessionCache, last_activity
from memory.engine.settings import EngineSettings
from memory.errors import UserFacingError
from memory.models import Conversation, Incoming, Thread, User
from memory.profile.view import ProfileLines, ProfileSource
from memory.store.protocols import ConversationStore

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]


class SessionBook:
    def __init__(
        self,
        store: ConversationStore,
        characters: CharacterBook,
        sessions: SessionCache,
        settings: EngineSettings,
        clock: Clock,
        profile: ProfileSource | None,
    ) -> None:
        self._store = store
        self._characters = characters
        self._sessions = sessions
        self._settings = settings
        self._clock = clock
        self._profile = profile
        self._users = RecentUsers(settings.max_sessions_in_ram)
        self._users_seen_at_changes = 0
        self._profile_versions: dict[tuple[int, str], int] = {}
        self._profile_epoch = 0
        self._end_listeners: list[Callable[[Conversation], Awaitable[None]]] = []

    @property
    def characters(self) -> CharacterBook:
        return self._characters

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

    # ---- threads ----------------------------------------------------------------------------

    async def open_thread(self, incoming: Incoming) -> tuple[Character, User, Thread]:
        """The character, the user (created on first contact) and their thread."""
        character = self.character(incoming.character_id)
        user = await self.user(incoming.platform, incoming.platform_user_id, incoming.display_name)
        return character, user, Thread(user.id, character.id, incoming.scope)

    async def user(self, platform: str, platform_user_id: str, display_name: str) -> User:
        """The user's row (created on first contact, its name kept current), cached."""
        if self._store.external_changes != self._users_seen_at_changes:
            # Another process wrote (`companion memory forget` may have deleted a user's row):
            # the users cached here are read again, once each.
            self._users = RecentUsers(self._settings.max_sessions_in_ram)
            self._users_seen_at_changes = self._store.external_changes
        user = self._users.get(platform, platform_user_id)
        if user is None or user.display_name != display_name:
            user = await self._store.upsert_user(
                platform, platform_user_id, display_name, self._clock()
            )
            self._users.put(user)
        return user

    def drop_user(self, user_id: int) -> None:
        """Forget the cached row of a user (its display name may have been cleared)."""
        self._users.drop(user_id)

    async def known_thread(self, incoming: Incoming) -> tuple[User, Thread] | None:
        """The user and thread of a message, when the user is known; never creates one."""
        character = self.character(incoming.character_id)
        user = self._users.get(incoming.platform, incoming.platform_user_id)
        user = user or await self._store.find_user(incoming.platform, incoming.platform_user_id)
        return (user, Thread(user.id, character.id, incoming.scope)) if user else None

    # ---- sessions ---------------------------------------------------------------------------

    async def session(self, user: User, thread: Thread, now: datetime) -> Session:
        """The thread's open session; a new conversation after the inactivity timeout."""
        session = self._sessions.get(thread)
        timeout = self._settings.inactivity_timeout
        if (
            session is not None
            and session.conversation.ended_at is None
            and (now - session.last_activity <= timeout)
        ):
            return session
        if session is not None and session.conversation.ended_at is None:
            await self.end(session.conversation, "inactivity", session.last_activity + timeout)
        conversation = await self._store.open_conversation(thread)
        if conversation is not None and now - conversation.last_activity_at > timeout:
            await self.end(conversation, "inactivity", conversation.last_activity_at + timeout)
            conversation = None
        if conversation is None:
            conversation = await self._store.start_conversation(thread, now)
        session = await self.restore(user, thread, conversation, now)
        self._sessions.put(session)
        return session

    async def restore(
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

    def on_end(self, listener: Callable[[Conversation], Awaitable[None]]) -> None:
        """Called once per ended conversation; must be quick (spawn the real work)."""
        self._end_listeners.append(listener)

    async def end(self, conversation: Conversation, reason: str, when: datetime) -> None:
        if await self._store.end_conversation(conversation.id, reason, when):
            log.info("conversation %s ended (%s)", conversation.id, reason)
            for listener in self._end_listeners:
                await listener(conversation)

    # ---- what changed under a session --------------------------------------------------------

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

    async def refresh_profile_if_changed(self, session: Session, now: datetime) -> None:
        thread = session.thread
        version = self._profile_versions.get((thread.user_id, thread.character_id), 0)
        if version != session.profile_version and self._profile is not None:
            session.profile = await self._profile.lines_for(thread, now)
            session.profile_version = version
            if not session.compacting:  # a changed fact may have dated claims of the summary
                session.summary = await self._store.latest_summary(thread) or session.summary

    async def reread_profile(self, session: Session, now: datetime) -> None:
        """Block 2 read again now: in a scene, someone new spoke and their facts belong in it
        (one cache miss, once per newcomer, rather than a character blind to who talks)."""
        if self._profile is not None:
            session.profile = await self._profile.lines_for(session.thread, now)

    def timezone_changed(self, user_id: int, zone: str | None) -> None:
        """The user set their time zone (/zona): their sessions in RAM use it from now on."""
        for thread in self._sessions.threads():
            session = self._sessions.get(thread)
            if session is not None and thread.user_id == user_id:
                session.timezone = zone
