"""The per-user cap on LLM calls: exact at both edges of its window, and no memory of idle
users. It never refuses a message: it says how long the call must wait."""

from __future__ import annotations

import asyncio

from bot.commands import RateLimiter


def test_the_cap_is_exact_at_both_edges_of_the_window() -> None:
    now = [0.0]
    limiter = RateLimiter(limit=3, window=60, clock=lambda: now[0])
    for at in (0.0, 1.0, 2.0):  # exactly `limit` calls pass...
        now[0] = at
        assert limiter.reserve("ana") == 0.0
    now[0] = 3.0
    assert limiter.reserve("ana") == 57.0  # ...the next waits until the oldest is 60 s old
    assert limiter.reserve("bea") == 0.0  # per user
    now[0] = 59.5
    assert limiter.reserve("ana") == 0.5  # still inside the window
    now[0] = 60.0
    assert limiter.reserve("ana") == 0.0  # the oldest call has just left it
    assert limiter.reserve("ana") == 1.0  # and the call at 1 s leaves it at 61 s


def test_a_held_call_is_not_counted() -> None:
    now = [0.0]
    limiter = RateLimiter(limit=1, window=10, clock=lambda: now[0])
    assert limiter.reserve("ana") == 0.0
    for at in (1.0, 2.0, 3.0):
        now[0] = at
        assert limiter.reserve("ana") == 10.0 - at  # asking again does not push it further
    now[0] = 10.0
    assert limiter.reserve("ana") == 0.0


async def test_the_wait_uses_the_injected_sleep() -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        await asyncio.sleep(0)

    limiter = RateLimiter(limit=1, window=10, clock=lambda: 0.0, sleep=sleep)
    await limiter.wait(4.0)
    assert slept == [4.0]


def test_the_rate_limiter_forgets_idle_users() -> None:
    now = [0.0]
    limiter = RateLimiter(limit=2, window=60, clock=lambda: now[0])
    for user in range(3000):
        assert limiter.reserve(f"u{user}") == 0.0
    now[0] = 120.0
    for _ in range(1024):  # the periodic clean-up runs among ordinary checks
        limiter.reserve("busy")
    assert len(limiter) == 1
    assert limiter.reserve("busy") == 60.0  # the limit itself still holds
