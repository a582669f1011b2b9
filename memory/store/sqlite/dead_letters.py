"""The dead letters (migrations/sqlite/0014): updates a platform process could not store."""

from __future__ import annotations

from memory.models import DeadLetter
from memory.store import records
from memory.store.sqlite.base import StoreBase, on_db_thread


class DeadLettersMixin(StoreBase):
    @on_db_thread
    def record_dead_letter(self, letter: DeadLetter) -> bool:
        cursor = self._con.execute(
            "INSERT INTO dead_letters (platform, update_key, platform_user_id, payload, error,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (
                letter.platform,
                letter.update_key,
                letter.platform_user_id,
                letter.payload,
                letter.error,
                records.ts(letter.created_at),
            ),
        )
        return cursor.rowcount == 1

    @on_db_thread
    def dead_letters(self, limit: int) -> list[DeadLetter]:
        found = self._all("SELECT * FROM dead_letters ORDER BY id DESC LIMIT ?", (limit,))
        return [records.dead_letter(row) for row in found]

    @on_db_thread
    def count_dead_letters(self) -> int:
        row = self._one("SELECT count(*) FROM dead_letters")
        return int(row[0]) if row else 0

    async def purge_dead_letters(self) -> int:
        """Their rows now; the bytes they leave in the WAL in the background, as a forget's."""
        deleted = await self._delete_dead_letters()
        self._start_purge()
        return deleted

    @on_db_thread
    def _delete_dead_letters(self) -> int:
        with self._transaction() as db:
            deleted = db.execute("DELETE FROM dead_letters").rowcount
            self._record_pending_purge()
        return int(deleted)
