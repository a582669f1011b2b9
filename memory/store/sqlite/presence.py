"""What the companion needs between messages (issue 17): the user's time zone."""

from __future__ import annotations

from memory.store.sqlite.base import StoreBase, on_db_thread


class PresenceMixin(StoreBase):
    @on_db_thread
    def user_timezone(self, user_id: int) -> str | None:
        row = self._one("SELECT timezone FROM user_preferences WHERE user_id = ?", (user_id,))
        return str(row[0]) if row and row[0] else None

    @on_db_thread
    def set_user_timezone(self, user_id: int, zone: str | None) -> None:
        self._con.execute(
            "INSERT INTO user_preferences (user_id, timezone) VALUES (?, ?)"
            " ON CONFLICT (user_id) DO UPDATE SET timezone = excluded.timezone",
            (user_id, zone),
        )
