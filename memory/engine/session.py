"""Short-term memory in RAM: one Session per thread, rebuilt from the store when missing.

Each thread has a FIFO lock (asyncio.Lock wakes waiters in arrival order), so one user's
messages to one character are handled strictly in order while other threads run concurrently.
Idle sessions are evicted past a size bound; the store holds everything needed to rebuild them.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime

from memory.models import Conversation, Summary, Thread, Turn, User
from memory.profile.view import ProfileLines
from memory.store.protocols import TurnLog


@dataclass
class Session:
    user: User
    thread: Thread
    conversation: Conversation
    summary: Summary | None
    window: list[Turn]
    profile: ProfileLines  # frozen for the whole session: the cached prefix survives
    last_activity: datetime
    previous_activity: datetime | None = None
    compacting: bool = False
    # After a failed compaction, the window length from which another may be tried.
    compaction_retry_at: int = 0
    # Which version of the user's facts `profile` was read from (Companion.profile_changed).
    profile_version: int = 0
    # Store.external_changes when it was read: another process has written since if it moved.
    store_changes: int = 0
    timezone: str | None = None  # the user's own (/zona); None: the deployment's
    off_record: bool = False  # /incognito: its turns and usage text are never written

    def has_turns_outside_window(self) -> bool:
        """The window is every turn after the summary's last, so turns lie outside it exactly
        when there is a summary; without one there is nothing to recall."""
        return self.summary is not None


async def last_activity(
    store: TurnLog, thread: Thread, window: list[Turn], summary: Summary | None, now: datetime
) -> datetime:
    """When the user's thread was last active: its newest turn, which is the summary's last
    when a reset folded the whole window (so a return weeks later is seen as one)."""
    if window:
        return window[-1].created_at
    if summary is not None and summary.covers_up_to_turn_id:
        covered = await store.thread_turns_by_ids(thread, [summary.covers_up_to_turn_id])
        if covered:
            return covered[-1].created_at
    return now


class RecentUsers:
    """Users by (platform, platform user id), least recently seen dropped past a bound: a
    user's row and id never change but for the display name, so most messages need no
    database trip to know who wrote."""

    def __init__(self, max_users: int) -> None:
        self._max = max_users
        self._users: OrderedDict[tuple[str, str], User] = OrderedDict()

    def get(self, platform: str, platform_user_id: str) -> User | None:
        user = self._users.get((platform, platform_user_id))
        if user is not None:
            self._users.move_to_end((platform, platform_user_id))
        return user

    def put(self, user: User) -> None:
        self._users[(user.platform, user.platform_user_id)] = user
        self._users.move_to_end((user.platform, user.platform_user_id))
        while len(self._users) > self._max:
            self._users.popitem(last=False)

    def drop(self, user_id: int) -> None:
        """Forget the cached row (its display name may have been cleared in the database)."""
        for key in [k for k, user in self._users.items() if user.id == user_id]:
            del self._users[key]


class SessionCache:
    def __init__(self, max_sessions: int) -> None:
        self._max = max_sessions
        self._sessions: OrderedDict[Thread, Session] = OrderedDict()
        self._locks: dict[Thread, asyncio.Lock] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    @asynccontextmanager
    async def lock(self, thread: Thread) -> AsyncIterator[None]:
        lock = self._locks.setdefault(thread, asyncio.Lock())
        async with lock:
            yield
        self._evict()

    def get(self, thread: Thread) -> Session | None:
        session = self._sessions.get(thread)
        if session is not None:
            self._sessions.move_to_end(thread)
        return session

    def put(self, session: Session) -> None:
        self._sessions[session.thread] = session
        self._sessions.move_to_end(session.thread)

    def threads(self) -> list[Thread]:
        """Every thread in RAM or with its lock in use (a message being answered)."""
        return list(self._sessions.keys() | self._locks.keys())

    def drop(self, thread: Thread) -> None:
        self._sessions.pop(thread, None)

    def drop_where(self, matches: Callable[[Thread], bool]) -> None:
        for thread in [t for t in self._sessions if matches(t)]:
            self._sessions.pop(thread, None)

    def _evict(self) -> None:
        """Drop the least recently used sessions nobody is working on, down to the bound."""
        if len(self._sessions) <= self._max:
            return
        for thread in list(self._sessions):
            if len(self._sessions) <= self._max:
                break
            lock = self._locks.get(thread)
            session = self._sessions[thread]
            if (lock is None or not lock.locked()) and not session.compacting:
                del self._sessions[thread]
                self._locks.pop(thread, None)
        # Locks of threads without a session and nobody waiting are dead weight too.
        for thread in [
            t for t, lk in self._locks.items() if t not in self._sessions and not lk.locked()
        ]:
            del self._locks[thread]
