"""Order and pace of messages: each caller's messages kept in arrival order up to the engine,
and the cap on LLM calls per user (bot/commands.py uses both; workers count the cap in the
database instead: bot/inbox/shared_limits.py)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable


class RateLimiter:
    """Caps LLM calls per user in a sliding window. It never refuses a message: a call past the
    cap waits until the window allows it (the engine stores the messages first, tells the user
    when the character will answer, and answers everything that arrived meanwhile in one call)."""

    def __init__(
        self,
        limit: int,
        window: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ):
        self._limit = limit
        self._window = window
        self._clock = clock
        self._sleep = sleep
        self._hits: dict[str, deque[float]] = {}
        self._checks = 0

    def __len__(self) -> int:
        return len(self._hits)

    def _forget_idle(self, now: float) -> None:
        """Drop users with no hit in the window: otherwise every user ever seen stays in RAM."""
        for key in [
            k for k, hits in self._hits.items() if not hits or now - hits[-1] >= self._window
        ]:
            del self._hits[key]

    def reserve(self, key: str) -> float:
        """0 when a call may be made now (it is counted); else the seconds until one may."""
        now = self._clock()
        self._checks += 1
        if self._checks % 1024 == 0:
            self._forget_idle(now)
        hits = self._hits.setdefault(key, deque())
        while hits and now - hits[0] >= self._window:
            hits.popleft()
        if len(hits) < self._limit:
            hits.append(now)
            return 0.0
        return self._window - (now - hits[0])

    async def take(self, key: str) -> float:
        """The engine's gate (memory.engine.bursts.CallGate): `reserve`, counted in RAM."""
        return self.reserve(key)

    async def wait(self, seconds: float) -> None:
        await self._sleep(seconds)


class ArrivalOrder:
    """One FIFO gate per caller, taken before any await, so a user's messages keep their order
    even through the look-ups that come before the engine's own per-session lock."""

    def __init__(self) -> None:
        self._gates: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        lock, users = self._gates.get(key, (asyncio.Lock(), 0))
        self._gates[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._gates[key]
            if users == 1:
                del self._gates[key]
            else:
                self._gates[key] = (lock, users - 1)
