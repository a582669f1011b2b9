"""The journey of each user with each character (migration 0019), on PostgreSQL."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from memory.journey.model import JOURNEY_SCOPE, Journey
from memory.models import Conversation
from memory.store import params, remap
from memory.store.postgres import rows
from memory.store.postgres.base import PostgresStoreBase
from memory.store.postgres.rows import ts

_INSERT = (
    "INSERT INTO journeys (user_id, character_id, text, cited_ids_json, covers_conversation_id,"
    " created_at) VALUES ($1, $2, $3, $4, $5, $6)"
)
_RUN = (
    "INSERT INTO journey_runs (conversation_id, user_id, character_id, status, created_at)"
    " SELECT id, $2, $3, $4, $5 FROM conversations WHERE id = $1"
    " ON CONFLICT (conversation_id) DO NOTHING"
)


class PgJourneysMixin(PostgresStoreBase):
    async def journey(self, user_id: int, character_id: str) -> Journey | None:
        row = await self._pool.fetchrow(
            "SELECT * FROM journeys WHERE user_id = $1 AND character_id = $2",
            user_id,
            character_id,
        )
        return rows.journey(row) if row else None

    async def save_journey(
        self, journey: Journey, conversation_id: int, previous_id: int | None, now: datetime
    ) -> bool:
        async with self._transaction() as con:
            # The conversation's row locked: a forget deleting it waits, or has already won.
            owed = await con.fetchval(
                "SELECT 1 FROM conversations c WHERE c.id = $1 AND NOT EXISTS"
                " (SELECT 1 FROM journey_runs r WHERE r.conversation_id = c.id) FOR UPDATE",
                conversation_id,
            )
            current = await con.fetchval(
                "SELECT id FROM journeys WHERE user_id = $1 AND character_id = $2 FOR UPDATE",
                journey.user_id,
                journey.character_id,
            )
            if not owed or current != previous_id:
                return False
            if current is not None:
                await con.execute("DELETE FROM journeys WHERE id = $1", current)
                await self._record_pending_purge(con)
            await con.execute(
                _INSERT, *params.journey(journey, conversation_id, journey.created_at)
            )
            await con.execute(
                _RUN, conversation_id, journey.user_id, journey.character_id, "done", ts(now)
            )
        return True

    async def mark_journey_run(
        self, conversation: Conversation, status: str, now: datetime
    ) -> None:
        thread = conversation.thread
        await self._pool.execute(
            _RUN, conversation.id, thread.user_id, thread.character_id, status, ts(now)
        )

    async def journey_run_status(self, conversation_id: int) -> str | None:
        found = await self._pool.fetchval(
            "SELECT status FROM journey_runs WHERE conversation_id = $1", conversation_id
        )
        return str(found) if found is not None else None

    async def conversations_pending_journey(self) -> list[Conversation]:
        found = await self._pool.fetch(
            "SELECT c.* FROM conversations c WHERE c.ended_at IS NOT NULL AND c.scope = $1"
            " AND NOT EXISTS (SELECT 1 FROM journey_runs r WHERE r.conversation_id = c.id)"
            " ORDER BY c.id",
            JOURNEY_SCOPE,
        )
        return [rows.conversation(row) for row in found]

    async def rewrite_journey(self, journey: Journey) -> bool:
        async with self._transaction() as con:
            if journey.paragraphs:
                status = await con.execute(
                    "UPDATE journeys SET text = $1, cited_ids_json = $2 WHERE id = $3"
                    " AND user_id = $4 AND character_id = $5",
                    *params.rewritten_journey(journey),
                )
            else:
                status = await con.execute(
                    "DELETE FROM journeys WHERE id = $1 AND user_id = $2 AND character_id = $3",
                    *params.journey_key(journey),
                )
            written = status.endswith(" 1")
            if written:
                await self._record_pending_purge(con)
        if written:
            self._start_purge()
        return written

    async def delete_journey(self, user_id: int, character_id: str) -> bool:
        async with self._transaction() as con:
            status = await con.execute(
                "DELETE FROM journeys WHERE user_id = $1 AND character_id = $2",
                user_id,
                character_id,
            )
            deleted = status.endswith(" 1")
            if deleted:
                await self._record_pending_purge(con)
        if deleted:
            self._start_purge()
        return deleted

    async def _import_journey(self, con: asyncpg.Connection, load: remap.Load) -> int:
        """Inside import_rows' transaction (see the SQLite store's `_import_journey`)."""
        owner = (load.user_id, load.character_id)
        for new_id in load.conversation_ids.values():
            await con.execute(_RUN, new_id, *owner, "imported", ts(load.now))
        journey = remap.journey(load)
        if journey is None:
            return 0
        await con.execute("DELETE FROM journeys WHERE user_id = $1 AND character_id = $2", *owner)
        covers = max(load.conversation_ids.values(), default=None)
        await con.execute(_INSERT, *params.journey(journey, covers, load.now))
        return 1
