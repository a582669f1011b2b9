"""Users, conversations, the turn log (replies with their sources), summaries and usage rows."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from memory.models import (
    Conversation,
    ReplySources,
    Speaker,
    Summary,
    SummarySaved,
    Thread,
    Turn,
    UsageRecord,
    User,
    UserTurn,
)
from memory.store import params
from memory.store.errors import ConversationGone
from memory.store.postgres import rows
from memory.store.postgres.base import PostgresStoreBase
from memory.store.postgres.rows import ts
from memory.store.postgres.terms import search_vector
from memory.store.records import speaker_columns

_USER = "id, platform, platform_user_id, display_name"

# The conversation's row is updated first: a forget deleting it waits, or has finished and the
# CTE finds no row, so nothing is written (and add_* raises ConversationGone).
_WITH_TURN = (
    "WITH c AS (UPDATE conversations SET last_activity_at = $1 WHERE id = $2 RETURNING id),"
    " t AS (INSERT INTO turns (conversation_id, user_id, character_id, scope, role, text,"
    " created_at, platform_message_id, search) SELECT c.id, $3, $4, $5, $6, $7, $1, $8,"
    " $9::tsvector FROM c RETURNING id)"
)
_WITH_SOURCES = (
    ", s AS (INSERT INTO reply_sources (turn_id, user_id, character_id, fact_ids, summary_id,"
    " window_turn_ids, fragment_turn_ids, created_at, journey_id) SELECT t.id, $3, $4, $10,"
    " $11, $12, $13, $1, $31 FROM t)"
)
# A user's turn with its source key: a key already stored in the thread writes nothing (the
# unique index turns_source), told apart from a deleted conversation by `c`.
_WITH_USER_TURN = (
    "WITH c AS (UPDATE conversations SET last_activity_at = $1 WHERE id = $2 RETURNING id),"
    " t AS (INSERT INTO turns (conversation_id, user_id, character_id, scope, role, text,"
    " created_at, platform_message_id, search, source_key, speaker_id, speaker_character,"
    " speaker_name) SELECT c.id, $3, $4, $5, $6, $7, $1, $8, $9::tsvector, $10, $11, $12, $13"
    " FROM c ON CONFLICT DO NOTHING RETURNING id)"
    " SELECT (SELECT id FROM c) AS conversation, (SELECT id FROM t) AS turn"
)
# The turn a source key names in a thread, and the first turn after it that is not a tool's,
# which is the reply to it when it is the character's.
_SOURCED = (
    "SELECT t.id, t.conversation_id, t.role, t.text, t.created_at, t.platform_message_id,"
    " t.speaker_id, t.speaker_character, t.speaker_name,"
    " n.id AS next_id, n.role AS next_role, n.text AS next_text,"
    " n.created_at AS next_created_at FROM turns t"
    " LEFT JOIN LATERAL (SELECT id, role, text, created_at FROM turns WHERE conversation_id ="
    " t.conversation_id AND id > t.id AND role <> 'tool' ORDER BY id LIMIT 1) n ON true"
    " WHERE t.user_id = $1 AND t.character_id = $2 AND t.scope = $3 AND t.source_key = $4"
)
# A usage row of a conversation is written only while it exists (a forget may have won).
_WITH_USAGE = (
    ", u AS (INSERT INTO llm_usage (user_id, character_id, conversation_id, turn_id, kind,"
    " model, ok, error, input_tokens, cache_read_tokens, cache_write_tokens, output_tokens,"
    " latency_ms, created_at, tool_round, fragments, tools_called) SELECT $15, $16, $17, $18,"
    " $19, $20, $21, $22, $23, $24, $25, $26, $27, $1, $28, $29, $30 FROM t WHERE $14 AND"
    " ($17::bigint IS NULL OR EXISTS (SELECT 1 FROM conversations WHERE id = $17)))"
)


def _turn_values(
    conversation: Conversation,
    role: str,
    text: str,
    now: datetime,
    platform_message_id: str | None,
) -> tuple[Any, ...]:
    """$1-$9 of _WITH_TURN."""
    thread = conversation.thread
    vector = None if role == "tool" else search_vector(text)
    return (ts(now), conversation.id, thread.user_id, thread.character_id, thread.scope,
            role, text, platform_message_id, vector)  # fmt: skip


class PgConversationsMixin(PostgresStoreBase):
    # ---- users and conversations ------------------------------------------------------------

    async def upsert_user(
        self, platform: str, platform_user_id: str, display_name: str, now: datetime
    ) -> User:
        row = await self._pool.fetchrow(
            "INSERT INTO users (platform, platform_user_id, display_name, created_at)"
            " VALUES ($1, $2, $3, $4) ON CONFLICT (platform, platform_user_id) DO UPDATE SET"
            f" display_name = excluded.display_name RETURNING {_USER}",
            platform,
            platform_user_id,
            display_name,
            ts(now),
        )
        assert row is not None
        return rows.user(row)

    async def find_user(self, platform: str, platform_user_id: str) -> User | None:
        row = await self._pool.fetchrow(
            f"SELECT {_USER} FROM users WHERE platform = $1 AND platform_user_id = $2",
            platform,
            platform_user_id,
        )
        return rows.user(row) if row else None

    async def open_conversation(self, thread: Thread) -> Conversation | None:
        row = await self._pool.fetchrow(
            "SELECT * FROM conversations WHERE user_id = $1 AND character_id = $2"
            " AND scope = $3 AND ended_at IS NULL ORDER BY id DESC LIMIT 1",
            thread.user_id,
            thread.character_id,
            thread.scope,
        )
        return rows.conversation(row) if row else None

    async def start_conversation(self, thread: Thread, now: datetime) -> Conversation:
        row = await self._pool.fetchrow(
            "INSERT INTO conversations (user_id, character_id, scope, started_at,"
            " last_activity_at) VALUES ($1, $2, $3, $4, $4) RETURNING *",
            thread.user_id,
            thread.character_id,
            thread.scope,
            ts(now),
        )
        assert row is not None
        return rows.conversation(row)

    async def end_conversation(self, conversation_id: int, reason: str, now: datetime) -> bool:
        """End it if still open; False when someone else ended it first."""
        status = await self._pool.execute(
            "UPDATE conversations SET ended_at = $1, end_reason = $2"
            " WHERE id = $3 AND ended_at IS NULL",
            ts(now),
            reason,
            conversation_id,
        )
        return status == "UPDATE 1"

    async def conversations_idle_since(self, cutoff: datetime) -> list[Conversation]:
        # Compared as instants (the texts carry the clock's offset), open conversations only.
        found = await self._pool.fetch(
            "SELECT * FROM conversations WHERE ended_at IS NULL"
            " AND last_activity_at::timestamptz < $1::text::timestamptz ORDER BY id",
            ts(cutoff),
        )
        return [rows.conversation(row) for row in found]

    # ---- the turn log -----------------------------------------------------------------------

    async def add_turn(
        self,
        conversation: Conversation,
        role: str,
        text: str,
        now: datetime,
        platform_message_id: str | None = None,
    ) -> Turn:
        """One turn, indexed for search unless a tool's; ConversationGone once its conversation
        was deleted (a forget in another process). One statement: one round trip."""
        turn_id = await self._pool.fetchval(
            _WITH_TURN + " SELECT id FROM t",
            *_turn_values(conversation, role, text, now, platform_message_id),
        )
        if turn_id is None:
            raise ConversationGone(conversation.id)
        return Turn(turn_id, conversation.id, role, text, now, platform_message_id)

    async def add_user_turn(
        self,
        conversation: Conversation,
        text: str,
        now: datetime,
        platform_message_id: str | None,
        source_key: str | None,
        speaker: Speaker | None = None,
    ) -> UserTurn:
        """See TurnLog.add_user_turn: one round trip unless the message was stored before."""
        row = await self._pool.fetchrow(
            _WITH_USER_TURN,
            *_turn_values(conversation, "user", text, now, platform_message_id),
            source_key,
            *speaker_columns(speaker),
        )
        assert row is not None
        if row["conversation"] is None:
            raise ConversationGone(conversation.id)
        if row["turn"] is not None:
            turn_id = row["turn"]
            turn = Turn(turn_id, conversation.id, "user", text, now, platform_message_id, speaker)
            return UserTurn(turn)
        thread = conversation.thread
        found = await self._pool.fetchrow(
            _SOURCED, thread.user_id, thread.character_id, thread.scope, source_key
        )
        assert found is not None  # the key's row blocked the insert; a turn is never updated
        reply = None
        if found["next_role"] == "assistant":
            reply = Turn(
                found["next_id"],
                found["conversation_id"],
                "assistant",
                found["next_text"],
                datetime.fromisoformat(found["next_created_at"]),
            )
        return UserTurn(rows.turn(found), existed=True, reply=reply)

    async def add_reply(
        self,
        conversation: Conversation,
        text: str,
        now: datetime,
        sources: ReplySources,
        usage: UsageRecord | None = None,
    ) -> Turn:
        """The character's reply, what it was built from and what it cost, in one statement
        (so in one transaction): the reply's new id replaces `sources.turn_id`."""
        turn_id = await self._pool.fetchval(
            _WITH_TURN + _WITH_SOURCES + _WITH_USAGE + " SELECT id FROM t",
            *_turn_values(conversation, "assistant", text, now, None),
            *params.reply_sources(sources),
            usage is not None,
            *params.usage(usage or UsageRecord("reply", "", True)),
            sources.journey_id,  # $31, after _WITH_USAGE's
        )
        if turn_id is None:
            raise ConversationGone(conversation.id)
        return Turn(turn_id, conversation.id, "assistant", text, now, None)

    async def turns_after(self, thread: Thread, after_turn_id: int) -> list[Turn]:
        """The thread's turns with an id above `after_turn_id`, oldest first."""
        found = await self._pool.fetch(
            f"SELECT {rows.TURN_COLUMNS} FROM turns WHERE user_id = $1 AND character_id = $2"
            " AND scope = $3 AND id > $4 ORDER BY id",
            thread.user_id,
            thread.character_id,
            thread.scope,
            after_turn_id,
        )
        return [rows.turn(row) for row in found]

    async def conversation_turns(self, conversation_id: int) -> list[Turn]:
        found = await self._pool.fetch(
            f"SELECT {rows.TURN_COLUMNS} FROM turns WHERE conversation_id = $1 ORDER BY id",
            conversation_id,
        )
        return [rows.turn(row) for row in found]

    async def count_turns(self, thread: Thread) -> int:
        return int(
            await self._pool.fetchval(
                "SELECT count(*) FROM turns WHERE user_id = $1 AND character_id = $2"
                " AND scope = $3",
                thread.user_id,
                thread.character_id,
                thread.scope,
            )
        )

    # ---- summaries --------------------------------------------------------------------------

    async def latest_summary(self, thread: Thread) -> Summary | None:
        row = await self._pool.fetchrow(
            "SELECT * FROM summaries WHERE user_id = $1 AND character_id = $2 AND scope = $3"
            " ORDER BY id DESC LIMIT 1",
            thread.user_id,
            thread.character_id,
            thread.scope,
        )
        return rows.summary(row) if row else None

    async def save_summary(
        self, thread: Thread, summary: Summary, conversation_id: int | None = None
    ) -> int | None:
        """Store a new version; returns its id. With `conversation_id` (the compaction's), only
        while that conversation still exists, tested by the INSERT itself: a summary computed
        before a forget writes nothing after it (None)."""
        async with self._transaction() as con:
            await _lock_summaries(con, thread)
            return await _insert_summary(con, thread, summary, conversation_id)

    async def save_summary_over(
        self,
        thread: Thread,
        summary: Summary,
        newest_id: int | None,
        conversation_id: int | None = None,
    ) -> SummarySaved:
        """Save only while `newest_id` is still the thread's newest. Every summary save of the
        thread takes its advisory lock first, so under READ COMMITTED the check, run after the
        lock, sees every save committed before, and none can commit before this one does."""
        async with self._transaction() as con:
            await _lock_summaries(con, thread)
            newest = await con.fetchval(
                "SELECT max(id) FROM summaries WHERE user_id = $1 AND character_id = $2"
                " AND scope = $3",
                thread.user_id,
                thread.character_id,
                thread.scope,
            )
            if newest != newest_id:
                return SummarySaved(None, stale=True)
            return SummarySaved(await _insert_summary(con, thread, summary, conversation_id))

    # ---- usage ------------------------------------------------------------------------------

    async def record_usage(self, record: UsageRecord, now: datetime) -> None:
        async with self._pool.acquire() as con:
            await self._insert_usage(con, record, now)

    @staticmethod
    async def _insert_usage(con: asyncpg.Connection, record: UsageRecord, now: datetime) -> None:
        # A row of a conversation is written only while it exists: a background call that
        # ends after a forget leaves no row (nor a foreign-key error) behind.
        await con.execute(
            "INSERT INTO llm_usage (user_id, character_id, conversation_id, turn_id, kind,"
            " model, ok, error, input_tokens, cache_read_tokens, cache_write_tokens,"
            " output_tokens, latency_ms, tool_round, fragments, tools_called, created_at)"
            " SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17"
            " WHERE $3::bigint IS NULL OR EXISTS (SELECT 1 FROM conversations WHERE id = $3)",
            *params.usage(record),
            ts(now),
        )

    async def usage_records(
        self, user_id: int | None = None, since: datetime | None = None
    ) -> list[UsageRecord]:
        found = await self._pool.fetch(
            "SELECT * FROM llm_usage WHERE ($1::bigint IS NULL OR user_id = $1)"
            " AND ($2::text IS NULL OR created_at::timestamptz >= $2::text::timestamptz)"
            " ORDER BY id",
            user_id,
            ts(since) if since is not None else None,
        )
        return [rows.usage_record(row) for row in found]


# The advisory lock class of a thread's summary saves (the second key: the thread's hash; two
# threads that share a hash only wait for each other).
SUMMARY_LOCKS = 0x636F6D74


async def _lock_summaries(con: asyncpg.Connection, thread: Thread) -> None:
    await con.execute(
        "SELECT pg_advisory_xact_lock($1, hashtext($2))",
        SUMMARY_LOCKS,
        f"{thread.user_id}:{thread.character_id}:{thread.scope}",
    )


async def _insert_summary(
    con: asyncpg.Connection, thread: Thread, summary: Summary, conversation_id: int | None
) -> int | None:
    found = await con.fetchval(
        "INSERT INTO summaries (user_id, character_id, scope, fields_json, cited_ids_json,"
        " covers_up_to_turn_id, created_at) SELECT $1, $2, $3, $4, $5, $6, $7"
        " WHERE $8::bigint IS NULL OR EXISTS (SELECT 1 FROM conversations WHERE id = $8"
        " AND user_id = $1 AND character_id = $2) RETURNING id",
        *params.summary(thread, summary, conversation_id),
    )
    return int(found) if found is not None else None
