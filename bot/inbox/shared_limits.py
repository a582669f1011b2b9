"""The per-user rate limit of workers sharing one database (bot.commands.RateLimiter counts in
one process's RAM: with N workers a user would get N times the limit). Each call is counted in
the database (Inbox.take_call), so every worker holds one user to one limit, and the wait it
returns (the notice that tells the user when the character will answer) is the same for all.
"""

from __future__ import annotations

import asyncio

from memory.store.inbox import Inbox


class SharedRateLimiter:
    """The engine's CallGate (memory/engine/bursts.py), counted in the database."""

    def __init__(self, inbox: Inbox, limit: int, window_seconds: float) -> None:
        self._inbox = inbox
        self._limit = limit
        self._window = window_seconds

    async def take(self, key: str) -> float:
        return await self._inbox.take_call(key, self._limit, self._window)

    async def wait(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
