"""The scheduler's jobs: the sweep every minute, and profile extraction and the journey when
a session ends.

Built by the composition root (bot/app.py) from the services they drive; each job finds its
work in the database, so what was due when the process stopped is done at the next start.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Protocol

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from bot.followups import FollowUpJob
from bot.reload import CharacterReloader
from memory.canon.proposer import CanonProposer
from memory.engine.companion import Companion
from memory.journey.chronicler import Chronicler
from memory.models import Conversation
from memory.profile.extraction import ProfileExtractor
from memory.store.admin_protocols import Administration, DeadLetters

IDLE_SWEEP_SECONDS = 60


class SweptStore(Administration, DeadLetters, Protocol):
    """What the sweep finishes in the store: the purges owed, the dead letters expired."""


class BackgroundJobs:
    """What runs between messages, owned by no user's request."""

    def __init__(
        self,
        companion: Companion,
        extractor: ProfileExtractor,
        reloader: CharacterReloader,
        store: SweptStore,
        followups: FollowUpJob,
        followup_seconds: float,
        chronicler: Chronicler | None = None,
        *,
        clock: Callable[[], datetime],
        letters_kept: timedelta,
    ) -> None:
        self._companion = companion
        self._extractor = extractor
        self._reloader = reloader
        self._store = store
        self.followups = followups
        self._followup_seconds = followup_seconds
        self._chronicler = chronicler
        self._clock = clock
        self._letters_kept = letters_kept
        # Canon proposals after each conversation (memory/canon/), set by the composition root.
        self.canon: CanonProposer | None = None

    def wire(self) -> None:
        """Connect the engine's events to the jobs."""
        self._companion.on_conversation_end(self._extract_later)
        # A forget stops the user's extraction (and chronicle) first.
        self._companion.on_forget(self._extractor.cancel_for)
        if self._chronicler is not None:
            self._companion.on_forget(self._chronicler.cancel_for)
        if self.canon is not None:
            self._companion.on_forget(self.canon.cancel_for)

    def catch_up(self) -> None:
        """Start the work that was due when the process last stopped, found from the database:
        once whatever the jobs go through is connected (a worker's job claims, issue 35)."""
        self._companion.spawn(self._extractor.extract_pending())
        if self._chronicler is not None:
            self._companion.spawn(self._chronicler.write_pending())
        if self.canon is not None:
            self._companion.spawn(self.canon.write_pending())

    def schedule(self, scheduler: AsyncIOScheduler) -> None:
        scheduler.add_job(
            self.sweep,
            "interval",
            seconds=IDLE_SWEEP_SECONDS,
            id="end-idle-conversations",
            coalesce=True,
            max_instances=1,
        )
        scheduler.add_job(
            self.followups.run,
            "interval",
            seconds=self._followup_seconds,
            id="follow-ups",
            coalesce=True,
            max_instances=1,
        )

    async def sweep(self) -> None:
        """Reload changed characters, end idle sessions, extract their profiles, expire the dead
        letters nobody can forget, finish purges."""
        await self._reloader.check()
        await self._companion.end_idle_conversations()
        await self._extractor.extract_pending()
        if self._chronicler is not None:
            await self._chronicler.write_pending()
        if self.canon is not None:
            await self.canon.write_pending()
        await self._store.expire_dead_letters(self._clock() - self._letters_kept)
        await self._store.resume_purge()  # owed by a crash or by another process's forget

    async def _extract_and_refresh(self, conversation: Conversation) -> None:
        if await self._extractor.extract(conversation) == "done":
            thread = conversation.thread
            self._companion.profile_changed(thread.user_id, thread.character_id)

    async def _chronicle_and_refresh(self, conversation: Conversation) -> None:
        """The journey, beside the extraction and never on the reply path; a session that
        began meanwhile shows it from its next message (as a profile change)."""
        if self._chronicler is not None and await self._chronicler.write(conversation) == "done":
            thread = conversation.thread
            self._companion.profile_changed(thread.user_id, thread.character_id)

    async def _extract_later(self, conversation: Conversation) -> None:
        self._companion.spawn(self._extract_and_refresh(conversation))
        self._companion.spawn(self._chronicle_and_refresh(conversation))
        if self.canon is not None:
            self._companion.spawn(self.canon.write(conversation))
