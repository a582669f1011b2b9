"""What every chat adapter shares: the start/stop contract and the replies in flight."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Protocol

log = logging.getLogger(__name__)


class Adapter(Protocol):
    name: str

    async def start(self) -> None:
        """Connect and start taking messages; returns once running."""

    async def stop(self) -> None:
        """Stop taking messages, let the replies in flight finish (bounded), disconnect."""

    async def send_private(self, platform_user_id: str, message: str) -> bool:
        """An unprompted message (a follow-up) to the user's private chat; False when the
        platform refuses it (the user blocked the bot, never opened a private chat)."""


class InFlight:
    """Counts the replies being generated, so shutdown can wait for them and refuse new ones."""

    def __init__(self) -> None:
        self.accepting = True
        self._count = 0
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def count(self) -> int:
        return self._count

    @asynccontextmanager
    async def track(self) -> AsyncIterator[None]:
        self._count += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._count -= 1
            if self._count == 0:
                self._idle.set()

    async def drain(self, grace_seconds: float) -> bool:
        """Stop accepting and wait for the replies in flight; False if some did not finish."""
        self.accepting = False
        try:
            await asyncio.wait_for(self._idle.wait(), grace_seconds)
        except TimeoutError:
            log.warning(
                "%s replies still in flight after %.0f s; giving up on them",
                self._count,
                grace_seconds,
            )
            return False
        return True
