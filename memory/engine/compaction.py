"""The background half of the Companion: compaction of a session's window into its summary,
and the tasks that run after a reply (tracked, so that shutdown and tests can wait for them,
and owned by a user and character, so that a forget can cancel them)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from cards.character import Character
from memory.engine.session import Session, SessionCache
from memory.engine.tokens import TokenEstimator
from memory.store.protocols import ConversationStore
from memory.summary.rolling import CompactionInput, Summariser
from memory.summary.supersede import save_current

if TYPE_CHECKING:
    from memory.engine.companion import EngineSettings

log = logging.getLogger(__name__)


class CompactionClaims(Protocol):
    """Who may fold a thread's window now. Several workers on one database may each hold a
    session of one user (their messages moved between workers mid-compaction): the claim
    lets one of them compact, and only while the job is still owed."""

    def claim(self, job: CompactionInput) -> AbstractAsyncContextManager[bool]: ...


class OwnCompactions:
    """One process (`--role all`): every compaction is its own."""

    @contextlib.asynccontextmanager
    async def claim(self, job: CompactionInput) -> AsyncIterator[bool]:
        yield True


class BackgroundWork:
    """What it needs of the engine is declared here and set by `Companion.__init__`."""

    _settings: EngineSettings
    _tokens: TokenEstimator
    _summariser: Summariser
    _sessions: SessionCache
    _store: ConversationStore
    _clock: Callable[[], datetime]
    _tasks: set[asyncio.Task[Any]]
    _owned_tasks: dict[tuple[int, str], set[asyncio.Task[Any]]]
    _compaction_claims: CompactionClaims

    def claim_compactions(self, claims: CompactionClaims) -> None:
        """Compact only under `claims` (workers sharing one database: bot/inbox/)."""
        self._compaction_claims = claims

    # ---- compaction -------------------------------------------------------------------------

    def _compaction_due(self, session: Session) -> bool:
        if session.compacting or len(session.window) < session.compaction_retry_at:
            return False
        if len(session.window) >= self._settings.window_trigger_turns:
            return True
        used = sum(self._tokens.count(turn.text) for turn in session.window)
        return used > self._settings.budgets.window

    def _start_compaction(self, session: Session, character: Character, keep: int) -> None:
        fold = tuple(session.window[: len(session.window) - keep] if keep else session.window)
        if not fold:
            return
        session.compacting = True
        job = CompactionInput(
            session.thread,
            character.name,
            character.language,
            session.summary,
            fold,
            conversation_id=session.conversation.id,
            names=character.names_in_memory(),
        )
        owner = (session.thread.user_id, session.thread.character_id)
        self.spawn(self._compact(session, job), owner=owner)

    async def _compact(self, session: Session, job: CompactionInput) -> None:
        folded = False
        try:
            async with self._compaction_claims.claim(job) as mine:
                if not mine:
                    # Another worker folds it (or did): its summary reaches this session
                    # through the change feed, at the next message.
                    log.debug("compaction of %s: claimed elsewhere or done", session.thread)
                    return
                folded = await self._fold(session, job)
        finally:
            session.compacting = False
            # A failure waits for `window_keep_turns` more turns: while the summary model
            # keeps failing, each message must not pay for another round of attempts.
            keep = self._settings.window_keep_turns
            session.compaction_retry_at = 0 if folded else len(session.window) + keep

    async def _fold(self, session: Session, job: CompactionInput) -> bool:
        summary = await self._summariser.compact(job, self._clock())
        if summary is None:
            return False
        # The session may be busy answering (the user wrote right after a reset): meanwhile the
        # conversation's extraction can change facts and date the summary's claims. Saved over
        # whatever is newest then, against the history read then (memory/summary/supersede.py).
        log.debug("compaction of %s: summary written, saving when the session is free", job.thread)
        async with self._sessions.lock(session.thread):
            saved = await save_current(
                self._store, session.thread, summary, job.language, job.conversation_id
            )
            if saved is None:  # forgotten meanwhile: nothing was written
                return False
            session.summary = saved
            # Turns that arrived during the call stay: the window is append-only.
            session.window = [t for t in session.window if t.id > summary.covers_up_to_turn_id]
        return True

    # ---- background work --------------------------------------------------------------------

    def spawn(
        self, coroutine: Coroutine[Any, Any, None], owner: tuple[int, str] | None = None
    ) -> None:
        """Run after the reply; tracked so that shutdown and tests can wait for it, and by
        `owner` (user id, character id) so that a forget can cancel it."""
        task = asyncio.create_task(coroutine)
        self._tasks.add(task)
        if owner is not None:
            self._owned_tasks.setdefault(owner, set()).add(task)
            task.add_done_callback(lambda done: self._disown(owner, done))
        task.add_done_callback(self._task_done)

    def _disown(self, owner: tuple[int, str], task: asyncio.Task[Any]) -> None:
        tasks = self._owned_tasks.get(owner, set())
        tasks.discard(task)
        if not tasks:
            self._owned_tasks.pop(owner, None)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background job failed", exc_info=task.exception())

    async def drain(self) -> None:
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
