"""Budget counters on PostgreSQL (migration 0024). A reservation locks its counters' rows
(in one order, so two reservations cannot deadlock) and checks and writes them in one
transaction: workers that reserve at once are served one after the other."""

from __future__ import annotations

from collections.abc import Sequence

from memory.budget.ledger import BudgetCounter, Counter, Limit
from memory.store.postgres.base import PostgresStoreBase

_LOCK = (
    "SELECT scope, period, spent + reserved FROM budget_counters"
    " WHERE (scope, period) IN (SELECT * FROM unnest($1::text[], $2::text[]))"
    " ORDER BY scope, period FOR UPDATE"
)
_CREATE = (
    "INSERT INTO budget_counters (scope, period)"
    " SELECT * FROM unnest($1::text[], $2::text[]) AS k(scope, period) ORDER BY scope, period"
    " ON CONFLICT DO NOTHING"
)


class PgBudgetsMixin(PostgresStoreBase):
    async def reserve_budget(self, limits: Sequence[Limit], amount: float) -> int | None:
        """See memory/budget/ledger.py."""
        scopes, periods = [s for s, _, _ in limits], [p for _, p, _ in limits]
        async with self._transaction() as con:
            await con.execute(_CREATE, scopes, periods)
            held = {(r[0], r[1]): r[2] for r in await con.fetch(_LOCK, scopes, periods)}
            for index, (scope, period, limit) in enumerate(limits):
                if held[(scope, period)] + amount > limit:
                    await con.execute(
                        "UPDATE budget_counters SET refused = refused + 1"
                        " WHERE scope = $1 AND period = $2",
                        scope,
                        period,
                    )
                    return index
            await con.execute(
                "UPDATE budget_counters c SET reserved = c.reserved + $3"
                " FROM unnest($1::text[], $2::text[]) AS k(scope, period)"
                " WHERE c.scope = k.scope AND c.period = k.period",
                scopes,
                periods,
                amount,
            )
        return None

    async def settle_budget(
        self, counters: Sequence[Counter], reserved: float, spent: float
    ) -> list[float]:
        """See memory/budget/ledger.py."""
        scopes, periods = [s for s, _ in counters], [p for _, p in counters]
        async with self._transaction() as con:
            await con.fetch(_LOCK, scopes, periods)
            rows = await con.fetch(
                "UPDATE budget_counters c SET reserved = greatest(c.reserved - $3, 0),"
                " spent = c.spent + $4, calls = c.calls + 1"
                " FROM unnest($1::text[], $2::text[]) AS k(scope, period)"
                " WHERE c.scope = k.scope AND c.period = k.period RETURNING c.scope, c.period,"
                " c.spent",
                scopes,
                periods,
                reserved,
                spent,
            )
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
