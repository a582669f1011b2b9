"""Background work claimed, not broadcast, when several workers share one database.

The session-end sweep runs under one advisory lock (bot/roles.py); a conversation's profile
extraction, however it is reached (the sweep, a conversation ended by a message, the start-up
catch-up every worker runs), under that conversation's own lock, and only while it is still
owed: two workers never extract one conversation, and neither extracts it twice. A thread's
compaction runs under the thread's claim, and only while the summary it folds into is still
the newest: a user whose messages moved to another worker mid-compaction is compacted once.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from memory.canon.proposer import CanonProposer
from memory.journey.chronicler import Chronicler
from memory.models import Conversation
from memory.profile.extraction import ProfileExtractor
from memory.store.inbox import Inbox
from memory.store.protocols import Summaries
from memory.summary.rolling import CompactionInput

log = logging.getLogger(__name__)
CLAIMED_ELSEWHERE = "claimed elsewhere"
# How long a compaction's claim outlives a worker that died holding it: longer than any
# summary call with its retries; until then that thread is compacted by nobody (its window
# only grows a little).
COMPACTION_CLAIM_SECONDS = 600.0


class ClaimedCompactions:
    """The engine's CompactionClaims over the inbox's job claims (memory/engine/compaction.py)."""

    def __init__(self, inbox: Inbox, summaries: Summaries) -> None:
        self._inbox = inbox
        self._summaries = summaries

    @contextlib.asynccontextmanager
    async def claim(self, job: CompactionInput) -> AsyncIterator[bool]:
        thread = job.thread
        key = f"compaction:{thread.user_id}:{thread.character_id}:{thread.scope}"
        async with self._inbox.job_claim(key, COMPACTION_CLAIM_SECONDS) as held:
            if not held:
                yield False
                return
            # Another worker may have folded this window a moment ago: then the job's summary
            # is no longer the newest, and folding again would overwrite that worker's.
            newest = await self._summaries.latest_summary(thread)
            previous = job.previous.id if job.previous is not None else None
            yield (newest.id if newest is not None else None) == previous


def claim_extractions(extractor: ProfileExtractor, inbox: Inbox) -> None:
    """Route every extraction of this process through the conversation's claim. The extractor
    calls `self.extract` for each conversation (the sweep's catch-up included), so wrapping the
    instance's method covers every path, with the extractor's code unchanged. Must be called
    before the event loop next runs: the start-up catch-up is already spawned."""
    plain: Callable[[Conversation], Awaitable[str]] = extractor.extract

    async def extract(conversation: Conversation) -> str:
        async with inbox.extraction_claim(conversation.id) as mine:
            if not mine:
                log.debug("extraction of %s: claimed elsewhere or done", conversation.id)
                return CLAIMED_ELSEWHERE
            return await plain(conversation)

    extractor.extract = extract  # type: ignore[method-assign]


# Longer than a chronicle's call with its retries: a worker that died holding the claim delays
# that pair's journey by this much, no more.
JOURNEY_CLAIM_SECONDS = 600.0


def claim_journeys(chronicler: Chronicler, inbox: Inbox) -> None:
    """Route every chronicle of this process through its pair's claim, as extractions are: one
    worker at a time writes a user's journey with a character (each is built on the previous
    one), and the chronicler writes a conversation only while journey_runs says it is owed."""
    plain: Callable[[Conversation], Awaitable[str]] = chronicler.write

    async def write(conversation: Conversation) -> str:
        thread = conversation.thread
        key = f"journey:{thread.user_id}:{thread.character_id}"
        async with inbox.job_claim(key, JOURNEY_CLAIM_SECONDS) as mine:
            if not mine:
                log.debug("journey of %s: claimed elsewhere", conversation.id)
                return CLAIMED_ELSEWHERE
            return await plain(conversation)

    chronicler.write = write  # type: ignore[method-assign]


def claim_canon(proposer: CanonProposer, inbox: Inbox) -> None:
    """Route every canon read of this process through its conversation's claim, as the
    journey's: one worker calls the model for a conversation (canon_runs keeps the write
    once whichever worker saves first)."""
    plain: Callable[[Conversation], Awaitable[str]] = proposer.write

    async def write(conversation: Conversation) -> str:
        key = f"canon:{conversation.id}"
        async with inbox.job_claim(key, JOURNEY_CLAIM_SECONDS) as mine:
            if not mine:
                log.debug("canon of %s: claimed elsewhere", conversation.id)
                return CLAIMED_ELSEWHERE
            return await plain(conversation)

    proposer.write = write  # type: ignore[method-assign]
