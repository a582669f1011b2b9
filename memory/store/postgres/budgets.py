"""Budget counters on PostgreSQL (migration 0024). A reservation locks its counters' rows
(in one order, so two reservations cannot deadlock) and checks and writes them in one
transaction: workers that reserve at once are served one after the other."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import asyncpg

from memory.store.budgets import BudgetCounter, Counter, Limit
from memory.store.postgres.base import PostgresStoreBase

# The counters' rows locked in one order (so two calls cannot deadlock), read after the lock
# (READ COMMITTED reads the newest version of a row it waited for), and written only when the
# call fits every one of them: the check and the write are one statement, so a counter is held
# for one round trip.
_RESERVE = """
WITH k AS (SELECT * FROM unnest($1::text[], $2::text[], $3::float8[]) AS k(scope, period, lim)),
locked AS (
    SELECT c.scope, c.period, c.spent + c.reserved + $4 <= k.lim AS fits
    FROM budget_counters c JOIN k ON c.scope = k.scope AND c.period = k.period
    ORDER BY c.scope, c.period FOR UPDATE OF c
)
UPDATE budget_counters c SET reserved = c.reserved + $4
FROM k
WHERE c.scope = k.scope AND c.period = k.period
    AND (SELECT count(*) FILTER (WHERE fits) = cardinality($1::text[]) FROM locked)
RETURNING c.scope
"""
_SETTLE = """
WITH k AS (SELECT * FROM unnest($1::text[], $2::text[]) AS k(scope, period)),
locked AS (
    SELECT c.scope, c.period FROM budget_counters c
    JOIN k ON c.scope = k.scope AND c.period = k.period
    ORDER BY c.scope, c.period FOR UPDATE OF c
)
UPDATE budget_counters c SET reserved = greatest(c.reserved - $3, 0), spent = c.spent + $4,
    calls = c.calls + 1
FROM locked
WHERE c.scope = locked.scope AND c.period = locked.period
RETURNING c.scope, c.period, c.spent
"""
_CREATE = (
    "INSERT INTO budget_counters (scope, period)"
    " SELECT * FROM unnest($1::text[], $2::text[]) AS k(scope, period) ORDER BY scope, period"
    " ON CONFLICT DO NOTHING"
)
# Two statements that lock the same rows in different orders are answered by PostgreSQL with
# a deadlock error for one of them; it is asked again (nothing was written).
_ATTEMPTS = 5


class PgBudgetsMixin(PostgresStoreBase):
    async def reserve_budget(self, limits: Sequence[Limit], amount: float) -> int | None:
        """See memory/store/budgets.py."""
        scopes, periods = [s for s, _, _ in limits], [p for _, p, _ in limits]
        caps = [limit for _, _, limit in limits]
        def reserve() -> Awaitable[list[asyncpg.Record]]:
            return self._pool.fetch(_RESERVE, scopes, periods, caps, amount)

        # Counters mostly exist already: the reservation is tried first, and only when it
        # reserved nothing are missing counters created (which takes no lock on an existing
        # one) and the reservation tried again; one round trip per call, not two.
        if await _retried(reserve):
            return None
        await self._pool.execute(_CREATE, scopes, periods)
        if await _retried(reserve):
            return None
        async with self._transaction() as con:
            rows = await con.fetch(
                "SELECT scope, period, spent + reserved FROM budget_counters"
                " WHERE (scope, period) IN (SELECT * FROM unnest($1::text[], $2::text[]))",
                scopes,
                periods,
            )
            held = {(r[0], r[1]): r[2] for r in rows}
            index = next(
                (i for i, (s, p, cap) in enumerate(limits) if held[(s, p)] + amount > cap), 0
            )
            await con.execute(
                "UPDATE budget_counters SET refused = refused + 1 WHERE scope = $1 AND period = $2",
                limits[index][0],
                limits[index][1],
            )
        return index

    async def settle_budget(
        self, counters: Sequence[Counter], reserved: float, spent: float
    ) -> list[float]:
        """See memory/store/budgets.py."""
        scopes, periods = [s for s, _ in counters], [p for _, p in counters]
        rows = await _retried(lambda: self._pool.fetch(_SETTLE, scopes, periods, reserved,
                                                       spent))  # fmt: skip
        after = {(r[0], r[1]): r[2] for r in rows}
        return [after.get(counter, 0.0) for counter in counters]

    async def claim_budget_notice(self, scope: str, period: str, level: int) -> bool:
        status = await self._pool.execute(
            "UPDATE budget_counters SET notified = $3 WHERE scope = $1 AND period = $2"
            " AND notified < $3",
            scope,
            period,
            level,
        )
        return status.endswith(" 1")

    async def budget_total(self, scopes: Sequence[str], period: str) -> float:
        total = await self._pool.fetchval(
            "SELECT coalesce(sum(spent), 0) FROM budget_counters"
            " WHERE period = $1 AND scope = ANY($2::text[])",
            period,
            list(scopes),
        )
        return float(total)

    async def budget_counters(self, period: str) -> list[BudgetCounter]:
        rows = await self._pool.fetch(
            "SELECT scope, period, spent, reserved, calls, refused FROM budget_counters"
            " WHERE period = $1 ORDER BY scope",
            period,
        )
        return [BudgetCounter(*row) for row in rows]

    async def platform_identity(self, user_id: int) -> str | None:
        row = await self._pool.fetchrow(
            "SELECT platform, platform_user_id FROM users WHERE id = $1", user_id
        )
        return f"{row[0]}:{row[1]}" if row else None

    async def channel_community(self, channel: str) -> str | None:
        row = await self._pool.fetchrow(
            "SELECT community FROM channel_communities WHERE channel = $1", channel
        )
        return str(row[0]) if row else None

    async def record_channel_community(self, channel: str, community: str) -> None:
        await self._pool.execute(
            "INSERT INTO channel_communities (channel, community) VALUES ($1, $2)"
            " ON CONFLICT (channel) DO UPDATE SET community = excluded.community",
            channel,
            community,
        )


async def _retried(run: Callable[[], Awaitable[list[asyncpg.Record]]]) -> list[asyncpg.Record]:
    for _ in range(_ATTEMPTS - 1):
        try:
            return await run()
        except asyncpg.DeadlockDetectedError:
            continue
    return await run()
