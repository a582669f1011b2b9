"""The dead letters (migrations/postgres/0014): updates a platform process could not store.
An off-record sender's letter keeps no text, a letter with no sender expires: see
memory/store/sqlite/dead_letters.py."""

from __future__ import annotations

from datetime import datetime

from memory.models import DeadLetter
from memory.store import records
from memory.store.postgres.base import PostgresStoreBase

_RECORD = (
    "INSERT INTO dead_letters (platform, update_key, platform_user_id, payload, error,"
    " created_at) SELECT $1, $2, $3, CASE WHEN off THEN '' ELSE $4 END,"
    " CASE WHEN off THEN $7 ELSE $5 END, $6"
    " FROM (SELECT EXISTS (SELECT 1 FROM off_record_threads o JOIN users u ON u.id = o.user_id"
    " WHERE u.platform = $1 AND u.platform_user_id = $3) AS off) flag"
    " ON CONFLICT DO NOTHING"
)


class PgDeadLettersMixin(PostgresStoreBase):
    async def record_dead_letter(self, letter: DeadLetter) -> bool:
        status = await self._pool.execute(
            _RECORD,
            letter.platform,
            letter.update_key,
            letter.platform_user_id,
            letter.payload,
            letter.error,
            records.utc_ts(letter.created_at),
            records.error_kind(letter.error),
        )
        return status.endswith(" 1")

    async def dead_letters(self, limit: int) -> list[DeadLetter]:
        found = await self._pool.fetch(
            "SELECT * FROM dead_letters ORDER BY id DESC LIMIT $1", limit
        )
        return [records.dead_letter(row) for row in found]

    async def count_dead_letters(self) -> int:
        return int(await self._pool.fetchval("SELECT count(*) FROM dead_letters"))

    async def expire_dead_letters(self, before: datetime) -> int:
        """Delete the letters that name no sender written before `before`; how many."""
        async with self._transaction() as con:
            status = await con.execute(
                "DELETE FROM dead_letters WHERE platform_user_id IS NULL AND created_at < $1",
                records.utc_ts(before),
            )
            deleted = int(status.split()[-1])
            if deleted:
                await self._record_pending_purge(con)
        if deleted:
            self._start_purge()
        return deleted

    async def purge_dead_letters(self) -> int:
        async with self._transaction() as con:
            status = await con.execute("DELETE FROM dead_letters")
            await self._record_pending_purge(con)
        self._start_purge()
        return int(status.split()[-1])
