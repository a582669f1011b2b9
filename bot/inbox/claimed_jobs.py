"""Background work claimed, not broadcast, when several workers share one database.

The session-end sweep runs under one advisory lock (bot/roles.py); a conversation's profile
extraction, however it is reached (the sweep, a conversation ended by a message, the start-up
catch-up every worker runs), under that conversation's own lock, and only while it is still
owed: two workers never extract one conversation, and neither extracts it twice.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from memory.models import Conversation
from memory.profile.extraction import ProfileExtractor
from memory.store.inbox import Inbox

log = logging.getLogger(__name__)
CLAIMED_ELSEWHERE = "claimed elsewhere"


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
