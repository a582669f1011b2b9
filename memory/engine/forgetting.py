"""The engine's half of /memoria olvidar: everything of a user with a character held still
while it is deleted, so no background work computed from the old memory lands after it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from memory.engine.off_record import OffRecordSessions
from memory.engine.session import RecentUsers, SessionCache


class Forgetting:
    """What it needs of the engine is declared here and set by `Companion.__init__`."""

    _sessions: SessionCache
    _users: RecentUsers
    _off_record: OffRecordSessions
    _owned_tasks: dict[tuple[int, str], set[asyncio.Task[Any]]]
    _forget_listeners: list[Callable[[int, str], Awaitable[None]]]

    def forget_cached(self, user_id: int, character_id: str) -> None:
        """Drop the RAM sessions of a user with a character (after /memoria olvidar), and
        their cached row: a full forget cleared its display name, which the next message
        writes again."""
        self._users.drop(user_id)
        self._sessions.drop_where(lambda t: t.user_id == user_id and t.character_id == character_id)
        self._off_record.drop_where(
            lambda t: t.user_id == user_id and t.character_id == character_id
        )

    def on_forget(self, listener: Callable[[int, str], Awaitable[None]]) -> None:
        """Called before a user's memory with a character is deleted, to stop the work of
        theirs that runs outside the engine (profile extraction); returns once it stopped."""
        self._forget_listeners.append(listener)

    @contextlib.asynccontextmanager
    async def forgetting(self, user_id: int, character_id: str) -> AsyncIterator[None]:
        """Hold everything of this user with this character still while it is deleted: each
        thread's lock is taken (a reply under way ends first, none begins), the background
        work in flight is cancelled and waited for, and the sessions leave RAM afterwards.
        So no summary, fact or usage row computed from the old memory lands after the delete
        (and the store's conditional writes catch whatever raced past this)."""
        threads = sorted(
            (
                t
                for t in self._sessions.threads()
                if (t.user_id, t.character_id) == (user_id, character_id)
            ),
            key=lambda t: t.scope,
        )
        async with contextlib.AsyncExitStack() as held:
            for thread in threads:  # in one order: two forgets never wait on each other
                await held.enter_async_context(self._sessions.lock(thread))
            owned = list(self._owned_tasks.get((user_id, character_id), ()))
            for task in owned:
                task.cancel()
            await asyncio.gather(*owned, return_exceptions=True)
            for listener in self._forget_listeners:
                await listener(user_id, character_id)
            yield
            self.forget_cached(user_id, character_id)
