"""Compaction of a session's window into its summary, in the background (the tasks are
memory/engine/background.py's), under a claim when several workers share one database."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Protocol

from cards.character import Character
from memory.engine.background import BackgroundTasks
from memory.engine.session import Session, SessionCache
from memory.engine.settings import EngineSettings
from memory.engine.tokens import TokenEstimator
from memory.store.protocols import ConversationStore
from memory.summary.rolling import CompactionInput, Summariser
from memory.summary.supersede import save_current

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


class Compactor:
    """Folds a session's window into its summary in the background, when the window is due."""

    def __init__(
        self,
        settings: EngineSettings,
        tokens: TokenEstimator,
        summariser: Summariser,
        sessions: SessionCache,
        store: ConversationStore,
        clock: Callable[[], datetime],
        tasks: BackgroundTasks,
    ) -> None:
        self._settings = settings
        self._tokens = tokens
        self._summariser = summariser
        self._sessions = sessions
        self._store = store
        self._clock = clock
        self._tasks = tasks
        self._compaction_claims: CompactionClaims = OwnCompactions()

    def claim_compactions(self, claims: CompactionClaims) -> None:
        """Compact only under `claims` (workers sharing one database: bot/inbox/)."""
        self._compaction_claims = claims

    # ---- compaction -------------------------------------------------------------------------

    def due(self, session: Session) -> bool:
        if session.compacting or len(session.window) < session.compaction_retry_at:
            return False
        if len(session.window) >= self._settings.window_trigger_turns:
            return True
        used = sum(self._tokens.count(turn.text) for turn in session.window)
        return used > self._settings.budgets.window

    def start(self, session: Session, character: Character, keep: int) -> None:
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
        self._tasks.spawn(self._compact(session, job), owner=owner)

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

