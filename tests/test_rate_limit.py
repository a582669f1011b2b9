"""The per-user rate limit: a bounded window, and no memory of idle users."""

from __future__ import annotations

from bot.commands import RateLimiter


def test_the_rate_limiter_forgets_idle_users() -> None:
    now = [0.0]
    limiter = RateLimiter(limit=2, window=60, clock=lambda: now[0])
    for user in range(3000):
        assert limiter.check(f"u{user}") == (True, 0.0)
    now[0] = 120.0
    for _ in range(1024):  # the periodic clean-up runs among ordinary checks
        limiter.check("busy")
    assert len(limiter) == 1
    assert limiter.check("busy")[0] is False  # the limit itself still holds
