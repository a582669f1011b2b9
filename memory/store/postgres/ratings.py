"""Chat ratings on PostgreSQL (migration 0025): the SQLite twin says what they are."""

from __future__ import annotations

from datetime import datetime

from memory.store.postgres.base import PostgresStoreBase
from memory.store.postgres.rows import ts


class PgRatingsMixin(PostgresStoreBase):
    async def chat_is_mature(self, platform: str, channel_id: str) -> bool:
        found = await self._pool.fetchval(
            "SELECT mature FROM chat_ratings WHERE platform = $1 AND channel_id = $2",
            platform,
            channel_id,
        )
        return bool(found)

    async def mark_chat_mature(
        self, platform: str, channel_id: str, mature: bool, by: str, now: datetime
    ) -> None:
        await self._pool.execute(
            "INSERT INTO chat_ratings (platform, channel_id, mature, marked_by, marked_at)"
            " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (platform, channel_id) DO UPDATE SET"
            " mature = excluded.mature, marked_by = excluded.marked_by,"
            " marked_at = excluded.marked_at",
            platform,
            channel_id,
            int(mature),
            by,
            ts(now),
        )

    async def claim_rating_notice(
        self, platform: str, channel_id: str, character_id: str, now: datetime
    ) -> bool:
        """True once per channel and character, across workers (one row, one winner)."""
        status = await self._pool.execute(
            "INSERT INTO chat_ratings (platform, channel_id, notice_character)"
            " VALUES ($1, $2, $3) ON CONFLICT (platform, channel_id) DO UPDATE SET"
            " notice_character = excluded.notice_character"
            " WHERE chat_ratings.notice_character IS DISTINCT FROM excluded.notice_character",
            platform,
            channel_id,
            character_id,
        )
        return str(status).endswith(" 1")
