"""Chat ratings on SQLite (migration 0025): the group chats marked for adults, and which bound
character each channel's admins were told about."""

from __future__ import annotations

from datetime import datetime

from memory.store.records import ts as _ts
from memory.store.sqlite.base import StoreBase, on_db_thread


class RatingsMixin(StoreBase):
    @on_db_thread
    def chat_is_mature(self, platform: str, channel_id: str) -> bool:
        row = self._one(
            "SELECT mature FROM chat_ratings WHERE platform = ? AND channel_id = ?",
            (platform, channel_id),
        )
        return bool(row and row[0])

    @on_db_thread
    def mark_chat_mature(
        self, platform: str, channel_id: str, mature: bool, by: str, now: datetime
    ) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT INTO chat_ratings (platform, channel_id, mature, marked_by, marked_at)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (platform, channel_id) DO UPDATE SET"
                " mature = excluded.mature, marked_by = excluded.marked_by,"
                " marked_at = excluded.marked_at",
                (platform, channel_id, int(mature), by, _ts(now)),
            )

    @on_db_thread
    def claim_rating_notice(
        self, platform: str, channel_id: str, character_id: str, now: datetime
    ) -> bool:
        """True once per channel and character: the caller tells the admins, nobody else."""
        with self._transaction() as db:
            cursor = db.execute(
                "INSERT INTO chat_ratings (platform, channel_id, notice_character)"
                " VALUES (?, ?, ?) ON CONFLICT (platform, channel_id) DO UPDATE SET"
                " notice_character = excluded.notice_character"
                " WHERE chat_ratings.notice_character IS NOT excluded.notice_character",
                (platform, channel_id, character_id),
            )
        return cursor.rowcount == 1
