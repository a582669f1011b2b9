"""The user's own memory controls: /memoria, export and import, forget."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from memory.models import Fact, ReplySources, Summary, Thread, Turn
from memory.store import remap
from memory.store.copy import COPY_TABLES, MEMORY_TABLES, SCENE_LINES
from memory.store.postgres import rows
from memory.store.postgres.base import PostgresStoreBase
from memory.store.postgres.canon import drop_canon_citing
from memory.store.postgres.rows import ids_param
from memory.store.postgres.scenes import delete_scene_lines
from memory.store.postgres.terms import search_vector

_EXPORTED = ("conversations", "turns", "summaries", "facts", "journeys")


async def _remembered(con: asyncpg.Connection, user_id: int) -> bool:
    """Whether any memory row, with any character, still refers to the user."""
    for table in (*MEMORY_TABLES, "fact_history"):
        if await con.fetchval(f"SELECT 1 FROM {table} WHERE user_id = $1 LIMIT 1", user_id):
            return True
    return bool(await con.fetchval("SELECT 1 FROM turns WHERE speaker_id = $1 LIMIT 1", user_id))


def _count(status: str) -> int:
    """The row count of a command tag ("DELETE 3")."""
    return int(status.rsplit(" ", 1)[-1])


# A forget's statement for the sender's dead letters (migrations 0014): they name the user by
# platform id, as the platform process knew them, not by users.id.
DELETE_DEAD_LETTERS = (
    "DELETE FROM dead_letters WHERE (platform, platform_user_id) IN"
    " (SELECT platform, platform_user_id FROM users WHERE id = $1)"
)


class PgPrivacyMixin(PostgresStoreBase):
    async def fact(self, user_id: int, character_id: str, fact_id: int) -> Fact | None:
        """One of this user's facts with this character; anyone else's is simply not found."""
        row = await self._pool.fetchrow(
            "SELECT * FROM facts WHERE id = $1 AND user_id = $2 AND character_id = $3",
            fact_id,
            user_id,
            character_id,
        )
        return rows.fact(row) if row else None

    async def review_mode(self, user_id: int) -> bool:
        found = await self._pool.fetchval(
            "SELECT review_mode FROM user_preferences WHERE user_id = $1", user_id
        )
        return bool(found)

    async def set_review_mode(self, user_id: int, on: bool) -> None:
        await self._pool.execute(
            "INSERT INTO user_preferences (user_id, review_mode) VALUES ($1, $2)"
            " ON CONFLICT (user_id) DO UPDATE SET review_mode = excluded.review_mode",
            user_id,
            int(on),
        )

    async def delete_fact(self, user_id: int, character_id: str, fact_id: int) -> bool:
        async with self._transaction() as con:
            status = await con.execute(
                "DELETE FROM facts WHERE id = $1 AND user_id = $2 AND character_id = $3",
                fact_id,
                user_id,
                character_id,
            )
            deleted = _count(status) == 1
            if deleted:  # its dead tuple is owed a VACUUM
                await self._record_pending_purge(con)
        return deleted

    async def last_reply_sources(self, user_id: int, character_id: str) -> ReplySources | None:
        row = await self._pool.fetchrow(
            "SELECT * FROM reply_sources WHERE user_id = $1 AND character_id = $2"
            " ORDER BY turn_id DESC LIMIT 1",
            user_id,
            character_id,
        )
        return rows.reply_sources(row) if row else None

    async def summary_by_id(self, user_id: int, summary_id: int) -> Summary | None:
        row = await self._pool.fetchrow(
            "SELECT * FROM summaries WHERE id = $1 AND user_id = $2", summary_id, user_id
        )
        return rows.summary(row) if row else None

    async def export_rows(
        self, user_id: int, character_id: str
    ) -> dict[str, list[dict[str, object]]]:
        """Every row this user has with this character, table by table, as plain dicts with
        the SQLite store's columns (the search vector is not part of an export)."""
        exported: dict[str, list[dict[str, object]]] = {}
        async with self._pool.acquire() as con, con.transaction(readonly=True):
            for table in _EXPORTED:
                columns = ", ".join(COPY_TABLES[table][0])
                found = await con.fetch(
                    f"SELECT {columns} FROM {table} WHERE user_id = $1 AND character_id = $2"
                    " ORDER BY 1",
                    user_id,
                    character_id,
                )
                exported[table] = [dict(row) for row in found]
            columns = ", ".join(f"h.{name}" for name in COPY_TABLES["fact_history"][0])
            found = await con.fetch(
                f"SELECT {columns} FROM fact_history h JOIN facts f ON f.id = h.fact_id"
                " WHERE f.user_id = $1 AND f.character_id = $2 ORDER BY 1",
                user_id,
                character_id,
            )
            exported["fact_history"] = [dict(row) for row in found]
            found = await con.fetch(SCENE_LINES + " ORDER BY 1", user_id, character_id)
            exported["scene_lines"] = [dict(row) for row in found]
        return exported

    async def forget(self, user_id: int, character_id: str) -> dict[str, int]:
        """Delete everything this user has with this character, from every table, in one
        transaction (with their display name when that was the last of their memory: the users
        row stays, for their settings) that also records the purge as owed; the VACUUM that
        follows runs in the background (base.py's `_purge_step` says what it does and does not
        do to the bytes)."""
        counts: dict[str, int] = {}
        async with self._transaction() as con:
            # First, while the lines it looks for are still there (memory/store/canon.py).
            counts["canon_proposals"] = await drop_canon_citing(
                con, user_id, character_id, None, every_own=True
            )
            for table in MEMORY_TABLES:
                status = await con.execute(
                    f"DELETE FROM {table} WHERE user_id = $1 AND character_id = $2",
                    user_id,
                    character_id,
                )
                counts[table] = _count(status)
            # Per sender, not per character: the platform process never knew the character.
            counts["dead_letters"] = _count(await con.execute(DELETE_DEAD_LETTERS, user_id))
            # What this character witnessed of them in group scenes goes too (issue 31).
            erased = await delete_scene_lines(con, user_id, None, character_id)
            counts["scene_lines"] = erased.lines
            if not await _remembered(con, user_id):
                await con.execute("UPDATE users SET display_name = '' WHERE id = $1", user_id)
            await self._record_pending_purge(con)
        self._start_purge()
        return counts

    async def characters_of(self, user_id: int) -> list[str]:
        """Every character this user has any row with, loaded now or not."""
        union = " UNION ".join(
            f"SELECT character_id FROM {table} WHERE user_id = $1"
            for table in (*MEMORY_TABLES, "character_choices")
        )
        found = await self._pool.fetch(
            f'SELECT character_id FROM ({union}) AS c ORDER BY character_id COLLATE "C"',
            user_id,
        )
        return [row[0] for row in found if row[0]]

    async def forget_user_if_unreferenced(self, user_id: int) -> bool:
        """Once nothing of the user's memory is left with any character: their remaining
        rows (display name, choices of character, preferences) go too. False, and nothing
        deleted, while any memory row still refers to them."""
        async with self._transaction() as con:
            # Locked first: a memory row written meanwhile for this user waits for the decision.
            await con.execute("SELECT 1 FROM users WHERE id = $1 FOR UPDATE", user_id)
            if await _remembered(con, user_id):
                return False
            for table in ("character_choices", "user_preferences"):
                await con.execute(f"DELETE FROM {table} WHERE user_id = $1", user_id)
            await con.execute("DELETE FROM users WHERE id = $1", user_id)
            await self._record_pending_purge(con)
        self._start_purge()
        return True

    async def import_rows(
        self, user_id: int, character_id: str, data: dict[str, Any], now: datetime
    ) -> dict[str, int]:
        """As the SQLite store's: fresh ids, every reference rewritten, all or nothing."""
        load = remap.Load(user_id, character_id, data, now)
        async with self._transaction() as con:
            for row in data.get("conversations", []):
                load.conversation_ids[row["id"]] = await con.fetchval(
                    "INSERT INTO conversations (user_id, character_id, scope, started_at,"
                    " last_activity_at, ended_at, end_reason, extracted_at, extraction_status)"
                    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
                    *remap.conversation(row, load),
                )
            for row in sorted(data.get("turns", []), key=lambda r: r["id"]):
                load.turn_ids[row["id"]] = await con.fetchval(
                    "INSERT INTO turns (conversation_id, user_id, character_id, scope, role, text,"
                    " created_at, search) VALUES ($1, $2, $3, $4, $5, $6, $7, $8::tsvector)"
                    " RETURNING id",
                    *remap.turn(row, load),
                    None if row["role"] == "tool" else search_vector(row["text"]),
                )
            counts = {
                "conversations": len(load.conversation_ids),
                "turns": len(load.turn_ids),
                "summaries": await self._import_summaries(con, load),
                "facts": await self._import_facts(con, load),
            }
            if await self._import_journey(con, load):  # type: ignore[attr-defined]
                counts["journeys"] = 1
        return counts

    @staticmethod
    async def _import_summaries(con: asyncpg.Connection, load: remap.Load) -> int:
        for row in sorted(load.data.get("summaries", []), key=lambda r: r["id"]):
            await con.execute(
                "INSERT INTO summaries (user_id, character_id, scope, fields_json,"
                " cited_ids_json, covers_up_to_turn_id, created_at)"
                " VALUES ($1, $2, $3, $4, $5, $6, $7)",
                *remap.summary(row, load),
            )
        return len(load.data.get("summaries", []))

    @staticmethod
    async def _import_facts(con: asyncpg.Connection, load: remap.Load) -> int:
        fact_ids: dict[int, int] = {}
        stored = await con.fetch(
            "SELECT scope, kind, key FROM facts WHERE user_id = $1 AND character_id = $2",
            load.user_id,
            load.character_id,
        )
        for row, key in remap.fact_keys(load.data.get("facts", []), map(tuple, stored)):
            inserted = await con.fetchval(
                "INSERT INTO facts (user_id, character_id, kind, key, value, origin, scope,"
                " evidence, lifetime, event_date, created_at, confirmed_at, expires_at, status)"
                " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
                " ON CONFLICT (user_id, character_id, scope, kind, key) DO NOTHING RETURNING id",
                *remap.fact(row, key, load),
            )
            if inserted is not None:
                fact_ids[row["id"]] = inserted
        for row in load.data.get("fact_history", []):
            if row["fact_id"] in fact_ids:
                await con.execute(
                    "INSERT INTO fact_history (fact_id, user_id, value, origin, evidence,"
                    " valid_from, superseded_at, reason) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                    *remap.fact_version(row, fact_ids[row["fact_id"]], load),
                )
        return len(fact_ids)

    async def thread_turns_by_ids(self, thread: Thread, ids: list[int]) -> list[Turn]:
        """The turns among `ids` in this very thread (user, character and scope): a DM turn is
        never readable from a group, nor anyone else's from anywhere."""
        found = await self._pool.fetch(
            # Every column of a turn, the speaker's too: a scene's line is read back voiced.
            "SELECT t.id, t.conversation_id, t.role, t.text, t.created_at, t.platform_message_id,"
            " t.speaker_id, t.speaker_character, t.speaker_name"
            " FROM unnest($1::bigint[]) AS wanted(id)"
            " JOIN turns t ON t.id = wanted.id WHERE t.user_id = $2 AND t.character_id = $3"
            " AND t.scope = $4 ORDER BY t.id",
            ids_param(ids),
            thread.user_id,
            thread.character_id,
            thread.scope,
        )
        return [rows.turn(row) for row in found]
