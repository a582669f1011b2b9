"""The engine's half of /memoria olvidar: everything of a user with a character held still
while it is deleted, so no background work computed from the old memory lands after it."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

from memory.engine.background import BackgroundTasks, Owner
from memory.engine.off_record import OffRecordSessions
from memory.engine.session import SessionCache
from memory.engine.session_book import SessionBook


class ForgetsUnderWay:
    """The users (with a character) whose forget has begun and not ended. Work that begins
    meanwhile on a thread the forget does not hold (it was not in RAM when the forget began: a
    follow-up) asks here, under the thread's lock, and writes and sends nothing."""

    def __init__(self) -> None:
        self._under_way: Counter[Owner] = Counter()  # two forgets of one user may overlap

    def __contains__(self, owner: object) -> bool:
        return owner in self._under_way

    @contextlib.contextmanager
    def hold(self, owner: Owner) -> Iterator[None]:
        self._under_way[owner] += 1
        try:
            yield
        finally:
            self._under_way[owner] -= 1
            if not self._under_way[owner]:
                del self._under_way[owner]


class Forgetter:
    def __init__(
        self,
        sessions: SessionCache,
        book: SessionBook,
        off_record: OffRecordSessions,
        tasks: BackgroundTasks,
        forgets: ForgetsUnderWay,
    ) -> None:
        self._sessions = sessions
        self._book = book
        self._off_record = off_record
        self._tasks = tasks
        self._forgets = forgets
        self._listeners: list[Callable[[int, str], Awaitable[None]]] = []

    def forget_cached(self, user_id: int, character_id: str) -> None:
        """Drop the RAM sessions of a user with a character (after /memoria olvidar), and
        their cached row: a full forget cleared its display name, which the next message
        writes again."""
        self._book.drop_user(user_id)
        self._sessions.drop_where(lambda t: t.user_id == user_id and t.character_id == character_id)
        self._off_record.drop_where(
            lambda t: t.user_id == user_id and t.character_id == character_id
        )

    def on_forget(self, listener: Callable[[int, str], Awaitable[None]]) -> None:
        """Called before a user's memory with a character is deleted, to stop the work of
        theirs that runs outside the engine (profile extraction); returns once it stopped."""
        self._listeners.append(listener)

    @contextlib.asynccontextmanager
    async def forgetting(self, user_id: int, character_id: str) -> AsyncIterator[None]:
        """Hold everything of this user with this character still while it is deleted: the
        work in flight is cancelled (a follow-up too, which holds its thread's lock through
        its model call and its send), each thread's lock is taken (a reply under way ends
        first, none begins), the work its replies started is cancelled too, and the sessions
        leave RAM afterwards. Work that begins meanwhile sees the forget under way. So no
        turn, summary, fact or usage row computed from the old memory lands after the delete,
        and no follow-up about it is sent (the store's conditional writes catch whatever
        raced past this, from another process)."""
        owner = (user_id, character_id)
        with self._forgets.hold(owner):
            await self._tasks.cancel_owned(owner)
            threads = sorted(
                (t for t in self._sessions.threads() if (t.user_id, t.character_id) == owner),
                key=lambda t: t.scope,
            )
            async with contextlib.AsyncExitStack() as held:
                for thread in threads:  # in one order: two forgets never wait on each other
                    await held.enter_async_context(self._sessions.lock(thread))
                await self._tasks.cancel_owned(owner)
                for listener in self._listeners:
                    await listener(user_id, character_id)
                yield
                self.forget_cached(user_id, character_id)
