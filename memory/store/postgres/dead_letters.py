"""The dead letters (migrations/postgres/0014): updates a platform process could not store."""

from __future__ import annotations

from memory.models import DeadLetter
from memory.store import records
from memory.store.postgres.base import PostgresStoreBase


class PgDeadLettersMixin(PostgresStoreBase):
    async def record_dead_letter(self, letter: DeadLetter) -> bool:
        status = await self._pool.execute(
            "INSERT INTO dead_letters (platform, update_key, platform_user_id, payload, error,"
            " created_at) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
            letter.platform,
            letter.update_key,
            letter.platform_user_id,
            letter.payload,
            letter.error,
            records.ts(letter.created_at),
        )
        return status.endswith(" 1")

    async def dead_letters(self, limit: int) -> list[DeadLetter]:
        found = await self._pool.fetch(
            "SELECT * FROM dead_letters ORDER BY id DESC LIMIT $1", limit
        )
        return [records.dead_letter(row) for row in found]

    async def count_dead_letters(self) -> int:
        return int(await self._pool.fetchval("SELECT count(*) FROM dead_letters"))

    async def purge_dead_letters(self) -> int:
        async with self._transaction() as con:
            status = await con.execute("DELETE FROM dead_letters")
            await self._record_pending_purge(con)
        self._start_purge()
        return int(status.split()[-1])
