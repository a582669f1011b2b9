"""Budget counters on SQLite (migration 0024). Each method runs whole on the store's one
thread, so a reservation's check and its write cannot interleave with another's."""

from __future__ import annotations

from collections.abc import Sequence

from memory.store.budgets import BudgetCounter, Counter, Limit
from memory.store.sqlite.base import StoreBase, on_db_thread


class BudgetsMixin(StoreBase):
    @on_db_thread
    def reserve_budget(self, limits: Sequence[Limit], amount: float) -> int | None:
        """See memory/store/budgets.py."""
        with self._transaction() as db:
            for index, (scope, period, limit) in enumerate(limits):
                row = db.execute(
                    "SELECT spent + reserved FROM budget_counters WHERE scope = ? AND period = ?",
                    (scope, period),
                ).fetchone()
                if (row[0] if row else 0.0) + amount > limit:
                    db.execute(
                        "INSERT INTO budget_counters (scope, period, refused) VALUES (?, ?, 1)"
                        " ON CONFLICT (scope, period) DO UPDATE SET refused = refused + 1",
                        (scope, period),
                    )
                    return index
            db.executemany(
                "INSERT INTO budget_counters (scope, period, reserved) VALUES (?, ?, ?)"
                " ON CONFLICT (scope, period) DO UPDATE"
                " SET reserved = reserved + excluded.reserved",
                [(scope, period, amount) for scope, period, _ in limits],
            )
        return None

    @on_db_thread
    def settle_budget(
        self, counters: Sequence[Counter], reserved: float, spent: float
    ) -> list[float]:
        """See memory/store/budgets.py."""
        after = []
        with self._transaction() as db:
            for scope, period in counters:
                row = db.execute(
                    "UPDATE budget_counters SET reserved = max(reserved - ?, 0),"
                    " spent = spent + ?, calls = calls + 1 WHERE scope = ? AND period = ?"
                    " RETURNING spent",
                    (reserved, spent, scope, period),
                ).fetchone()
                after.append(row[0] if row else 0.0)
        return after

    @on_db_thread
    def claim_budget_notice(self, scope: str, period: str, level: int) -> bool:
        with self._transaction() as db:
            cursor = db.execute(
                "UPDATE budget_counters SET notified = ? WHERE scope = ? AND period = ?"
                " AND notified < ?",
                (level, scope, period, level),
            )
        return cursor.rowcount == 1

    @on_db_thread
    def budget_total(self, scopes: Sequence[str], period: str) -> float:
        marks = ", ".join("?" for _ in scopes)
        row = self._one(
            f"SELECT coalesce(sum(spent), 0) FROM budget_counters WHERE period = ?"
            f" AND scope IN ({marks})",
            (period, *scopes),
        )
        return float(row[0]) if row else 0.0

    @on_db_thread
    def budget_counters(self, period: str) -> list[BudgetCounter]:
        return [
            BudgetCounter(*row)
            for row in self._all(
                "SELECT scope, period, spent, reserved, calls, refused FROM budget_counters"
                " WHERE period = ? ORDER BY scope",
                (period,),
            )
        ]

    @on_db_thread
    def platform_identity(self, user_id: int) -> str | None:
        row = self._one("SELECT platform, platform_user_id FROM users WHERE id = ?", (user_id,))
        return f"{row[0]}:{row[1]}" if row else None

    @on_db_thread
    def channel_community(self, channel: str) -> str | None:
        row = self._one("SELECT community FROM channel_communities WHERE channel = ?", (channel,))
        return str(row[0]) if row else None

    @on_db_thread
    def record_channel_community(self, channel: str, community: str) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT INTO channel_communities (channel, community) VALUES (?, ?)"
                " ON CONFLICT (channel) DO UPDATE SET community = excluded.community",
                (channel, community),
            )
