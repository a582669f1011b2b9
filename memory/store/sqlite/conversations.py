"""Users, conversations, the turn log (replies with their sources), summaries and usage rows."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from datetime import datetime

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
from memory.store import params, records
from memory.store.errors import ConversationGone
from memory.store.records import speaker_columns
from memory.store.records import ts as _ts
from memory.store.sqlite.base import StoreBase, on_db_thread


class ConversationsMixin(StoreBase):
    # ---- users and conversations ------------------------------------------------------------

    @on_db_thread
    def upsert_user(
        self, platform: str, platform_user_id: str, display_name: str, now: datetime
    ) -> User:
        row = self._one(
            "INSERT INTO users (platform, platform_user_id, display_name, created_at)"
            " VALUES (?, ?, ?, ?)"
            " ON CONFLICT (platform, platform_user_id) DO UPDATE SET"
            " display_name = excluded.display_name"
            " RETURNING id, platform, platform_user_id, display_name",
            (platform, platform_user_id, display_name, _ts(now)),
        )
        assert row is not None
        return records.user(row)

    @on_db_thread
    def find_user(self, platform: str, platform_user_id: str) -> User | None:
        row = self._one(
            "SELECT id, platform, platform_user_id, display_name FROM users"
            " WHERE platform = ? AND platform_user_id = ?",
            (platform, platform_user_id),
        )
        return records.user(row) if row else None

    @on_db_thread
    def open_conversation(self, thread: Thread) -> Conversation | None:
        row = self._one(
            "SELECT * FROM conversations WHERE user_id = ? AND character_id = ? AND scope = ?"
            " AND ended_at IS NULL ORDER BY id DESC LIMIT 1",
            (thread.user_id, thread.character_id, thread.scope),
        )
        return self._conversation(row) if row else None

    @on_db_thread
    def start_conversation(self, thread: Thread, now: datetime) -> Conversation:
        row = self._one(
            "INSERT INTO conversations (user_id, character_id, scope, started_at,"
            " last_activity_at) VALUES (?, ?, ?, ?, ?) RETURNING *",
            (thread.user_id, thread.character_id, thread.scope, _ts(now), _ts(now)),
        )
        assert row is not None
        return self._conversation(row)

    @on_db_thread
    def end_conversation(self, conversation_id: int, reason: str, now: datetime) -> bool:
        """End it if still open; False when someone else ended it first."""
        cursor = self._con.execute(
            "UPDATE conversations SET ended_at = ?, end_reason = ?"
            " WHERE id = ? AND ended_at IS NULL",
            (_ts(now), reason, conversation_id),
        )
        return cursor.rowcount == 1

    @on_db_thread
    def conversations_idle_since(self, cutoff: datetime) -> list[Conversation]:
        return [
            self._conversation(row)
            for row in self._all(
                "SELECT * FROM conversations WHERE ended_at IS NULL AND last_activity_at < ?",
                (_ts(cutoff),),
            )
        ]

    # ---- the turn log -----------------------------------------------------------------------

    @on_db_thread
    def add_turn(
        self,
        conversation: Conversation,
        role: str,
        text: str,
        now: datetime,
        platform_message_id: str | None = None,
    ) -> Turn:
        try:
            with self._transaction():
                return self._insert_turn(conversation, role, text, now, platform_message_id)
        except sqlite3.IntegrityError as error:
            if self._one("SELECT 1 FROM conversations WHERE id = ?", (conversation.id,)) is None:
                raise ConversationGone(conversation.id) from error
            raise

    @on_db_thread
    def add_user_turn(
        self,
        conversation: Conversation,
        text: str,
        now: datetime,
        platform_message_id: str | None,
        source_key: str | None,
        speaker: Speaker | None = None,
    ) -> UserTurn:
        """See TurnLog.add_user_turn (one method on the store's thread: atomic)."""
        try:
            with self._transaction():
                found = self._sourced_turn(conversation.thread, source_key)
                if found is not None:
                    return found
                turn = self._insert_turn(
                    conversation, "user", text, now, platform_message_id, source_key, speaker
                )
                return UserTurn(turn)
        except sqlite3.IntegrityError as error:
            if self._one("SELECT 1 FROM conversations WHERE id = ?", (conversation.id,)) is None:
                raise ConversationGone(conversation.id) from error
            raise

    def _sourced_turn(self, thread: Thread, source_key: str | None) -> UserTurn | None:
        """The thread's turn with this source key and the reply after it (the first turn of
        its conversation after it that is not a tool's, when it is the character's)."""
        if source_key is None:
            return None
        row = self._one(
            "SELECT * FROM turns WHERE user_id = ? AND character_id = ? AND scope = ?"
            " AND source_key = ?",
            (thread.user_id, thread.character_id, thread.scope, source_key),
        )
        if row is None:
            return None
        turn = self._turn(row)
        after = self._one(
            "SELECT * FROM turns WHERE conversation_id = ? AND id > ? AND role <> 'tool'"
            " ORDER BY id LIMIT 1",
            (turn.conversation_id, turn.id),
        )
        reply = self._turn(after) if after is not None and after["role"] == "assistant" else None
        return UserTurn(turn, existed=True, reply=reply)

    @on_db_thread
    def add_reply(
        self,
        conversation: Conversation,
        text: str,
        now: datetime,
        sources: ReplySources,
        usage: UsageRecord | None = None,
    ) -> Turn:
        """The character's reply, what it was built from and what it cost, in one transaction:
        the reply's new id replaces `sources.turn_id`."""
        with self._transaction():
            turn = self._insert_turn(conversation, "assistant", text, now, None)
            self._insert_reply_sources(
                conversation.thread, replace(sources, turn_id=turn.id, created_at=now)
            )
            if usage is not None:
                self._insert_usage(usage, now)
        return turn

    def _insert_reply_sources(self, thread: Thread, sources: ReplySources) -> None:
        self._con.execute(
            "INSERT OR REPLACE INTO reply_sources (turn_id, user_id, character_id, fact_ids,"
            " summary_id, window_turn_ids, fragment_turn_ids, created_at, journey_id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                sources.turn_id,
                thread.user_id,
                thread.character_id,
                *params.reply_sources(sources),
                _ts(sources.created_at),
                sources.journey_id,
            ),
        )

    def _insert_turn(
        self,
        conversation: Conversation,
        role: str,
        text: str,
        now: datetime,
        platform_message_id: str | None,
        source_key: str | None = None,
        speaker: Speaker | None = None,
    ) -> Turn:
        thread = conversation.thread
        row = self._one(
            "INSERT INTO turns (conversation_id, user_id, character_id, scope, role, text,"
            " created_at, platform_message_id, source_key, speaker_id, speaker_character,"
            " speaker_name) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                conversation.id,
                thread.user_id,
                thread.character_id,
                thread.scope,
                role,
                text,
                _ts(now),
                platform_message_id,
                source_key,
                *speaker_columns(speaker),
            ),
        )
        self._con.execute(
            "UPDATE conversations SET last_activity_at = ? WHERE id = ?",
            (_ts(now), conversation.id),
        )
        assert row is not None
        return Turn(row[0], conversation.id, role, text, now, platform_message_id, speaker)

    @on_db_thread
    def turns_after(self, thread: Thread, after_turn_id: int) -> list[Turn]:
        """The thread's turns with an id above `after_turn_id`, oldest first."""
        return [
            self._turn(row)
            for row in self._all(
                "SELECT * FROM turns WHERE user_id = ? AND character_id = ? AND scope = ?"
                " AND id > ? ORDER BY id",
                (thread.user_id, thread.character_id, thread.scope, after_turn_id),
            )
        ]

    @on_db_thread
    def conversation_turns(self, conversation_id: int) -> list[Turn]:
        return [
            self._turn(row)
            for row in self._all(
                "SELECT * FROM turns WHERE conversation_id = ? ORDER BY id", (conversation_id,)
            )
        ]

    @on_db_thread
    def count_turns(self, thread: Thread) -> int:
        row = self._one(
            "SELECT COUNT(*) FROM turns WHERE user_id = ? AND character_id = ? AND scope = ?",
            (thread.user_id, thread.character_id, thread.scope),
        )
        return int(row[0]) if row else 0

    # ---- summaries --------------------------------------------------------------------------

    @on_db_thread
    def latest_summary(self, thread: Thread) -> Summary | None:
        row = self._one(
            "SELECT * FROM summaries WHERE user_id = ? AND character_id = ? AND scope = ?"
            " ORDER BY id DESC LIMIT 1",
            (thread.user_id, thread.character_id, thread.scope),
        )
        return self._summary(row) if row else None

    @on_db_thread
    def save_summary(
        self, thread: Thread, summary: Summary, conversation_id: int | None = None
    ) -> int | None:
        """Store a new version; returns its id. With `conversation_id` (the compaction's), only
        while that conversation still exists, tested by the INSERT itself: a summary computed
        before a forget writes nothing after it (None), whatever raced past the engine's lock."""
        return self._insert_summary(thread, summary, conversation_id)

    @on_db_thread
    def save_summary_over(
        self,
        thread: Thread,
        summary: Summary,
        newest_id: int | None,
        conversation_id: int | None = None,
    ) -> SummarySaved:
        """Save only while `newest_id` is still the thread's newest. The check and the INSERT
        share one write transaction (BEGIN IMMEDIATE, or the group's): no other process's
        summary lands in between."""
        with self._transaction():
            row = self._one(
                "SELECT MAX(id) FROM summaries WHERE user_id = ? AND character_id = ?"
                " AND scope = ?",
                (thread.user_id, thread.character_id, thread.scope),
            )
            if (row[0] if row else None) != newest_id:
                return SummarySaved(None, stale=True)
            return SummarySaved(self._insert_summary(thread, summary, conversation_id))

    def _insert_summary(
        self, thread: Thread, summary: Summary, conversation_id: int | None
    ) -> int | None:
        row = self._one(
            "INSERT INTO summaries (user_id, character_id, scope, fields_json, cited_ids_json,"
            " covers_up_to_turn_id, created_at) SELECT ?, ?, ?, ?, ?, ?, ?"
            " WHERE ?8 IS NULL OR EXISTS (SELECT 1 FROM conversations WHERE id = ?8"
            " AND user_id = ?1 AND character_id = ?2) RETURNING id",
            params.summary(thread, summary, conversation_id),
        )
        return int(row[0]) if row else None

    # ---- usage ------------------------------------------------------------------------------

    @on_db_thread
    def record_usage(self, record: UsageRecord, now: datetime) -> None:
        self._insert_usage(record, now)

    def _insert_usage(self, record: UsageRecord, now: datetime) -> None:
        # A row of a conversation is written only while it exists: a background call that
        # ends after a forget leaves no row (nor a foreign-key error) behind.
        self._con.execute(
            "INSERT INTO llm_usage (user_id, character_id, conversation_id, turn_id, kind,"
            " model, ok, error, input_tokens, cache_read_tokens, cache_write_tokens,"
            " output_tokens, latency_ms, tool_round, fragments, tools_called, created_at)"
            " SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17"
            " WHERE ?3 IS NULL OR EXISTS (SELECT 1 FROM conversations WHERE id = ?3)",
            (*params.usage(record), _ts(now)),
        )

    @on_db_thread
    def usage_records(
        self, user_id: int | None = None, since: datetime | None = None
    ) -> list[UsageRecord]:
        clauses: list[str] = []
        params: list[object] = []
        if user_id is not None:
            clauses.append("user_id = ?")
            params.append(user_id)
        if since is not None:
            # julianday() compares instants: created_at carries the clock's TIMEZONE offset.
            clauses.append("julianday(created_at) >= julianday(?)")
            params.append(_ts(since))
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        cursor = self._con.execute(f"SELECT * FROM llm_usage{where} ORDER BY id", params)
        return [records.usage_record(row) for row in cursor]
