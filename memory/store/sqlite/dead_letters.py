"""The dead letters (migrations/sqlite/0014): updates a platform process could not store.

Off the record means nothing kept, dead letters included: a letter whose sender has a thread
off the record when it is written keeps no text (no payload, only the error's type, which
quotes nothing), decided in the insert's own statement so that no caller can forget to. A
letter that names no sender is reached by no forget: the sweep deletes it once it is older
than DEAD_LETTER_NO_SENDER_DAYS (bot/jobs.py).
"""

from __future__ import annotations

from datetime import datetime

from memory.models import DeadLetter
from memory.store import records
from memory.store.sqlite.base import StoreBase, on_db_thread

_RECORD = (
    "INSERT INTO dead_letters (platform, update_key, platform_user_id, payload, error,"
    " created_at) SELECT :platform, :update_key, :user, CASE WHEN off THEN '' ELSE :payload END,"
    " CASE WHEN off THEN :kind ELSE :error END, :created_at"
    " FROM (SELECT EXISTS (SELECT 1 FROM off_record_threads o JOIN users u ON u.id = o.user_id"
    " WHERE u.platform = :platform AND u.platform_user_id = :user) AS off)"
    " WHERE true ON CONFLICT DO NOTHING"  # WHERE: SQLite would read ON as the SELECT's join
)


class DeadLettersMixin(StoreBase):
    @on_db_thread
    def record_dead_letter(self, letter: DeadLetter) -> bool:
        cursor = self._con.execute(
            _RECORD,
            {
                "platform": letter.platform,
                "update_key": letter.update_key,
                "user": letter.platform_user_id,
                "payload": letter.payload,
                "error": letter.error,
                "kind": records.error_kind(letter.error),
                "created_at": records.utc_ts(letter.created_at),
            },
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

    async def expire_dead_letters(self, before: datetime) -> int:
        """Delete the letters that name no sender written before `before`; how many."""
        deleted = await self._delete_expired_letters(records.utc_ts(before))
        if deleted:
            self._start_purge()
        return deleted

    @on_db_thread
    def _delete_expired_letters(self, before: str) -> int:
        with self._transaction() as db:
            deleted = db.execute(
                "DELETE FROM dead_letters WHERE platform_user_id IS NULL AND created_at < ?",
                (before,),
            ).rowcount
            if deleted:
                self._record_pending_purge()
        return int(deleted)

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
