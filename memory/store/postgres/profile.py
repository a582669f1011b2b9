"""The long-term profile, and which character serves each channel."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from memory.models import PROVIDER_FAILURE, Conversation, Fact, FactVersion, Thread
from memory.store import params
from memory.store.postgres import rows
from memory.store.postgres.base import PostgresStoreBase
from memory.store.postgres.rows import ts
from memory.store.sql import FACT_WRITES


class PgProfileMixin(PostgresStoreBase):
    # ---- the long-term profile --------------------------------------------------------------

    async def facts(self, user_id: int, character_id: str, scope: str | None = None) -> list[Fact]:
        """The user's facts with one character, in one scope or all of them."""
        found = await self._pool.fetch(
            "SELECT * FROM facts WHERE user_id = $1 AND character_id = $2"
            " AND ($3::text IS NULL OR scope = $3) ORDER BY id",
            user_id,
            character_id,
            scope,
        )
        return [rows.fact(row) for row in found]

    async def fact_history(self, user_id: int, fact_id: int) -> list[FactVersion]:
        found = await self._pool.fetch(
            "SELECT * FROM fact_history WHERE user_id = $1 AND fact_id = $2 ORDER BY id",
            user_id,
            fact_id,
        )
        return [rows.fact_version(row) for row in found]

    async def apply_fact_changes(
        self,
        adds: list[Fact],
        updates: list[tuple[Fact, Fact, str]],
        deletes: list[Fact],
        confirms: list[Fact],
        conversation_id: int | None,
        now: datetime,
    ) -> bool:
        """Write one extraction's operations atomically: all of them or none. With
        `conversation_id` (an extraction's), none unless that conversation still exists, in
        the same transaction (its row locked): an extraction that ends after a forget writes
        nothing."""
        async with self._transaction() as con:
            if conversation_id is not None and not await con.fetchval(
                "SELECT 1 FROM conversations WHERE id = $1 FOR SHARE", conversation_id
            ):
                return False
            for name, values in params.fact_changes(adds, updates, deletes, confirms, now):
                await con.execute(FACT_WRITES[name], *values)
            if conversation_id is not None:
                await self._mark(con, conversation_id, "done", now)
        return True

    async def mark_extracted(self, conversation_id: int, status: str, now: datetime) -> None:
        async with self._pool.acquire() as con:
            await self._mark(con, conversation_id, status, now)

    @staticmethod
    async def _mark(
        con: asyncpg.Connection, conversation_id: int, status: str, now: datetime
    ) -> None:
        await con.execute(
            "UPDATE conversations SET extracted_at = $1, extraction_status = $2 WHERE id = $3",
            ts(now),
            status,
            conversation_id,
        )

    async def conversations_pending_extraction(self) -> list[Conversation]:
        """Ended and never extracted: derived from the database, so a crash loses nothing."""
        found = await self._pool.fetch(
            "SELECT * FROM conversations WHERE ended_at IS NOT NULL AND extracted_at IS NULL"
            " ORDER BY id"
        )
        return [rows.conversation(row) for row in found]

    async def provider_failures(
        self, kind: str, conversation_id: int
    ) -> tuple[int, datetime | None, str]:
        """The retry schedule's state of a background job (memory/engine/retries.py)."""
        found = await self._pool.fetch(
            "SELECT created_at, error FROM llm_usage WHERE conversation_id = $1 AND kind = $2"
            " AND ok = 0 AND left(error, $3) = $4",
            conversation_id,
            kind,
            len(PROVIDER_FAILURE),
            PROVIDER_FAILURE,
        )
        # Parsed, not max()ed as text: created_at carries the clock's TIMEZONE offset.
        failed = sorted((datetime.fromisoformat(row[0]), str(row[1])) for row in found)
        return (len(failed), *failed[-1]) if failed else (0, None, "")

    async def given_up_jobs(self) -> dict[str, int]:
        row = await self._pool.fetchrow(
            "SELECT (SELECT count(*) FROM conversations WHERE extraction_status = 'failed'),"
            " (SELECT count(*) FROM journey_runs WHERE status = 'failed'),"
            " (SELECT count(*) FROM canon_runs WHERE status = 'failed')"
        )
        return {"extraction": int(row[0]), "journey": int(row[1]), "canon": int(row[2])}

    async def record_rejection(
        self, thread: Thread, conversation_id: int | None, reason: str, now: datetime
    ) -> None:
        await self._pool.execute(
            "INSERT INTO memory_rejections (user_id, character_id, conversation_id, reason,"
            " created_at) VALUES ($1, $2, $3, $4, $5)",
            thread.user_id,
            thread.character_id,
            conversation_id,
            reason,
            ts(now),
        )

    async def count_rejections(self, user_id: int | None = None) -> int:
        return int(
            await self._pool.fetchval(
                "SELECT count(*) FROM memory_rejections WHERE $1::bigint IS NULL OR user_id = $1",
                user_id,
            )
        )

    # ---- characters per channel -------------------------------------------------------------

    async def chosen_character_of(
        self, platform: str, platform_user_id: str, channel_key: str
    ) -> str | None:
        """The character this platform user chose in this channel, if any (one look-up)."""
        found = await self._pool.fetchval(
            "SELECT c.character_id FROM users u JOIN character_choices c ON c.user_id = u.id"
            " WHERE u.platform = $1 AND u.platform_user_id = $2 AND c.channel_key = $3",
            platform,
            platform_user_id,
            channel_key,
        )
        return str(found) if found is not None else None

    async def choose_character(
        self, user_id: int, channel_key: str, character_id: str, now: datetime
    ) -> None:
        await self._pool.execute(
            "INSERT INTO character_choices (user_id, channel_key, character_id, chosen_at)"
            " VALUES ($1, $2, $3, $4) ON CONFLICT (user_id, channel_key) DO UPDATE SET"
            " character_id = excluded.character_id, chosen_at = excluded.chosen_at",
            user_id,
            channel_key,
            character_id,
            ts(now),
        )

    async def bound_character(self, platform: str, channel_id: str) -> str | None:
        found = await self._pool.fetchval(
            "SELECT character_id FROM channel_bindings WHERE platform = $1 AND channel_id = $2",
            platform,
            channel_id,
        )
        return str(found) if found is not None else None

    async def bind_channel(
        self, platform: str, channel_id: str, character_id: str | None, by: str, now: datetime
    ) -> None:
        """Bind a channel to a character, or unbind it with None."""
        if character_id is None:
            await self._pool.execute(
                "DELETE FROM channel_bindings WHERE platform = $1 AND channel_id = $2",
                platform,
                channel_id,
            )
            return
        await self._pool.execute(
            "INSERT INTO channel_bindings (platform, channel_id, character_id, bound_by,"
            " bound_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (platform, channel_id) DO UPDATE"
            " SET character_id = excluded.character_id, bound_by = excluded.bound_by,"
            " bound_at = excluded.bound_at",
            platform,
            channel_id,
            character_id,
            by,
            ts(now),
        )
