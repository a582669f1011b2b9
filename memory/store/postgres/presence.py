"""What the companion needs between messages (issue 17): the user's time zone (PostgreSQL)."""

from __future__ import annotations

from memory.store.postgres.base import PostgresStoreBase


class PgPresenceMixin(PostgresStoreBase):
    async def user_timezone(self, user_id: int) -> str | None:
        found = await self._pool.fetchval(
            "SELECT timezone FROM user_preferences WHERE user_id = $1", user_id
        )
        return str(found) if found else None

    async def set_user_timezone(self, user_id: int, zone: str | None) -> None:
        await self._pool.execute(
            "INSERT INTO user_preferences (user_id, timezone) VALUES ($1, $2)"
            " ON CONFLICT (user_id) DO UPDATE SET timezone = excluded.timezone",
            user_id,
            zone,
        )
