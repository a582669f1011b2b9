"""The journey of each user with each character (migration 0019), on SQLite."""

from __future__ import annotations

from datetime import datetime

from memory.journey.model import JOURNEY_SCOPE, Journey
from memory.models import Conversation
from memory.store import params, records, remap
from memory.store.records import ts as _ts
from memory.store.sqlite.base import StoreBase, on_db_thread

_INSERT = (
    "INSERT INTO journeys (user_id, character_id, text, cited_ids_json, covers_conversation_id,"
    " created_at) VALUES (?, ?, ?, ?, ?, ?)"
)


class JourneysMixin(StoreBase):
    @on_db_thread
    def journey(self, user_id: int, character_id: str) -> Journey | None:
        row = self._one(
            "SELECT * FROM journeys WHERE user_id = ? AND character_id = ?",
            (user_id, character_id),
        )
        return records.journey(row) if row else None

    @on_db_thread
    def save_journey(
        self, journey: Journey, conversation_id: int, previous_id: int | None, now: datetime
    ) -> bool:
        with self._transaction() as db:
            owed = db.execute(
                "SELECT 1 FROM conversations c WHERE c.id = ? AND NOT EXISTS"
                " (SELECT 1 FROM journey_runs r WHERE r.conversation_id = c.id)",
                (conversation_id,),
            ).fetchall()
            current = db.execute(
                "SELECT id FROM journeys WHERE user_id = ? AND character_id = ?",
                (journey.user_id, journey.character_id),
            ).fetchall()
            if not owed or (current[0][0] if current else None) != previous_id:
                return False
            if current:  # the old version goes: a save point replaces, it is never kept
                db.execute("DELETE FROM journeys WHERE id = ?", (previous_id,))
                self._record_pending_purge()
            db.execute(_INSERT, params.journey(journey, conversation_id, journey.created_at))
            self._insert_run(conversation_id, journey.user_id, journey.character_id, "done", now)
        return True

    def _insert_run(
        self, conversation_id: int, user_id: int, character_id: str, status: str, now: datetime
    ) -> None:
        self._con.execute(
            "INSERT INTO journey_runs (conversation_id, user_id, character_id, status,"
            " created_at) SELECT id, ?, ?, ?, ? FROM conversations WHERE id = ?"
            " ON CONFLICT (conversation_id) DO NOTHING",
            (user_id, character_id, status, _ts(now), conversation_id),
        )

    @on_db_thread
    def mark_journey_run(self, conversation: Conversation, status: str, now: datetime) -> None:
        thread = conversation.thread
        self._insert_run(conversation.id, thread.user_id, thread.character_id, status, now)

    @on_db_thread
    def journey_run_status(self, conversation_id: int) -> str | None:
        row = self._one(
            "SELECT status FROM journey_runs WHERE conversation_id = ?", (conversation_id,)
        )
        return str(row[0]) if row else None

    @on_db_thread
    def conversations_pending_journey(self) -> list[Conversation]:
        return [
            self._conversation(row)
            for row in self._all(
                "SELECT c.* FROM conversations c WHERE c.ended_at IS NOT NULL AND c.scope = ?"
                " AND NOT EXISTS (SELECT 1 FROM journey_runs r WHERE r.conversation_id = c.id)"
                " ORDER BY c.id",
                (JOURNEY_SCOPE,),
            )
        ]

    async def rewrite_journey(self, journey: Journey) -> bool:
        written = await self._rewrite_journey(journey)
        if written:
            self._start_purge()  # the dropped sentences' bytes leave the WAL too
        return written

    @on_db_thread
    def _rewrite_journey(self, journey: Journey) -> bool:
        with self._transaction() as db:
            if journey.paragraphs:
                cursor = db.execute(
                    "UPDATE journeys SET text = ?, cited_ids_json = ? WHERE id = ?"
                    " AND user_id = ? AND character_id = ?",
                    params.rewritten_journey(journey),
                )
            else:
                cursor = db.execute(
                    "DELETE FROM journeys WHERE id = ? AND user_id = ? AND character_id = ?",
                    params.journey_key(journey),
                )
            if cursor.rowcount == 1:
                self._record_pending_purge()
        return cursor.rowcount == 1

    async def delete_journey(self, user_id: int, character_id: str) -> bool:
        deleted = await self._delete_journey(user_id, character_id)
        if deleted:
            self._start_purge()
        return deleted

    @on_db_thread
    def _delete_journey(self, user_id: int, character_id: str) -> bool:
        with self._transaction() as db:
            cursor = db.execute(
                "DELETE FROM journeys WHERE user_id = ? AND character_id = ?",
                (user_id, character_id),
            )
            if cursor.rowcount == 1:
                self._record_pending_purge()
        return cursor.rowcount == 1

    def _import_journey(self, load: remap.Load) -> int:
        """Inside import_rows' transaction: the imported conversations are history, never
        chronicled again; an imported journey (already gated by the import) replaces the
        pair's (remap.journey)."""
        owner = (load.user_id, load.character_id)
        for new_id in load.conversation_ids.values():
            self._insert_run(new_id, *owner, "imported", load.now)
        journey = remap.journey(load)
        if journey is None:
            return 0
        self._con.execute("DELETE FROM journeys WHERE user_id = ? AND character_id = ?", owner)
        covers = max(load.conversation_ids.values(), default=None)
        self._con.execute(_INSERT, params.journey(journey, covers, load.now))
        return 1
