"""The long-term profile, and which character serves each channel."""

from __future__ import annotations

from datetime import datetime

from memory.models import (
    PROVIDER_FAILURE,
    Conversation,
    Fact,
    FactVersion,
    Thread,
)
from memory.store import params, records
from memory.store.records import fact as _fact
from memory.store.records import ts as _ts
from memory.store.sql import FACT_WRITES, numbered
from memory.store.sqlite.base import StoreBase, on_db_thread

_FACT_WRITES = {name: numbered(statement) for name, statement in FACT_WRITES.items()}


class ProfileMixin(StoreBase):
    # ---- the long-term profile --------------------------------------------------------------

    @on_db_thread
    def facts(self, user_id: int, character_id: str, scope: str | None = None) -> list[Fact]:
        """The user's facts with one character, in one scope or all of them."""
        query = "SELECT * FROM facts WHERE user_id = ? AND character_id = ?"
        params: tuple[object, ...] = (user_id, character_id)
        if scope is not None:
            query += " AND scope = ?"
            params += (scope,)
        return [_fact(row) for row in self._all(query + " ORDER BY id", params)]

    @on_db_thread
    def fact_history(self, user_id: int, fact_id: int) -> list[FactVersion]:
        cursor = self._con.execute(
            "SELECT * FROM fact_history WHERE user_id = ? AND fact_id = ? ORDER BY id",
            (user_id, fact_id),
        )
        return [records.fact_version(row) for row in cursor]

    @on_db_thread
    def apply_fact_changes(
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
        the same transaction: an extraction that ends after a forget writes nothing."""
        with self._transaction() as db:
            if (
                conversation_id is not None
                and not db.execute(
                    "SELECT 1 FROM conversations WHERE id = ?", (conversation_id,)
                ).fetchall()
            ):
                return False
            for name, values in params.fact_changes(adds, updates, deletes, confirms, now):
                db.execute(_FACT_WRITES[name], values)
            if conversation_id is not None:
                self._mark_extracted(conversation_id, "done", now)
        return True

    @on_db_thread
    def mark_extracted(self, conversation_id: int, status: str, now: datetime) -> None:
        self._mark_extracted(conversation_id, status, now)

    def _mark_extracted(self, conversation_id: int, status: str, now: datetime) -> None:
        self._con.execute(
            "UPDATE conversations SET extracted_at = ?, extraction_status = ? WHERE id = ?",
            (_ts(now), status, conversation_id),
        )

    @on_db_thread
    def conversations_pending_extraction(self) -> list[Conversation]:
        """Ended and never extracted: derived from the database, so a crash loses nothing."""
        return [
            self._conversation(row)
            for row in self._all(
                "SELECT * FROM conversations WHERE ended_at IS NOT NULL AND extracted_at IS NULL"
                " ORDER BY id"
            )
        ]

    @on_db_thread
    def provider_failures(
        self, kind: str, conversation_id: int
    ) -> tuple[int, datetime | None, str]:
        """The retry schedule's state of a background job (memory/engine/retries.py)."""
        cursor = self._con.execute(
            "SELECT created_at, error FROM llm_usage WHERE conversation_id = ? AND kind = ?"
            " AND ok = 0 AND substr(error, 1, ?) = ?",
            (conversation_id, kind, len(PROVIDER_FAILURE), PROVIDER_FAILURE),
        )
        # Parsed, not max()ed as text: created_at carries the clock's TIMEZONE offset.
        failed = sorted((datetime.fromisoformat(row[0]), str(row[1])) for row in cursor)
        return (len(failed), *failed[-1]) if failed else (0, None, "")

    @on_db_thread
    def given_up_jobs(self) -> dict[str, int]:
        row = self._one(
            "SELECT (SELECT count(*) FROM conversations WHERE extraction_status = 'failed'),"
            " (SELECT count(*) FROM journey_runs WHERE status = 'failed'),"
            " (SELECT count(*) FROM canon_runs WHERE status = 'failed')"
        )
        if row is None:
            return {}
        return {"extraction": int(row[0]), "journey": int(row[1]), "canon": int(row[2])}

    @on_db_thread
    def record_rejection(
        self, thread: Thread, conversation_id: int | None, reason: str, now: datetime
    ) -> None:
        self._con.execute(
            "INSERT INTO memory_rejections (user_id, character_id, conversation_id, reason,"
            " created_at) VALUES (?, ?, ?, ?, ?)",
            (thread.user_id, thread.character_id, conversation_id, reason, _ts(now)),
        )

    @on_db_thread
    def count_rejections(self, user_id: int | None = None) -> int:
        query, params = "SELECT COUNT(*) FROM memory_rejections", ()
        if user_id is not None:
            query, params = query + " WHERE user_id = ?", (user_id,)
        row = self._one(query, params)
        return int(row[0]) if row else 0

    # ---- characters per channel -------------------------------------------------------------

    @on_db_thread
    def chosen_character_of(
        self, platform: str, platform_user_id: str, channel_key: str
    ) -> str | None:
        """The character this platform user chose in this channel, if any (one look-up)."""
        row = self._one(
            "SELECT c.character_id FROM users u JOIN character_choices c ON c.user_id = u.id"
            " WHERE u.platform = ? AND u.platform_user_id = ? AND c.channel_key = ?",
            (platform, platform_user_id, channel_key),
        )
        return str(row[0]) if row else None

    @on_db_thread
    def choose_character(
        self, user_id: int, channel_key: str, character_id: str, now: datetime
    ) -> None:
        self._con.execute(
            "INSERT INTO character_choices (user_id, channel_key, character_id, chosen_at)"
            " VALUES (?, ?, ?, ?) ON CONFLICT (user_id, channel_key) DO UPDATE SET"
            " character_id = excluded.character_id, chosen_at = excluded.chosen_at",
            (user_id, channel_key, character_id, _ts(now)),
        )

    @on_db_thread
    def bound_character(self, platform: str, channel_id: str) -> str | None:
        row = self._one(
            "SELECT character_id FROM channel_bindings WHERE platform = ? AND channel_id = ?",
            (platform, channel_id),
        )
        return str(row[0]) if row else None

    @on_db_thread
    def bind_channel(
        self, platform: str, channel_id: str, character_id: str | None, by: str, now: datetime
    ) -> None:
        """Bind a channel to a character, or unbind it with None."""
        if character_id is None:
            self._con.execute(
                "DELETE FROM channel_bindings WHERE platform = ? AND channel_id = ?",
                (platform, channel_id),
            )
            return
        self._con.execute(
            "INSERT INTO channel_bindings (platform, channel_id, character_id, bound_by,"
            " bound_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (platform, channel_id) DO UPDATE"
            " SET character_id = excluded.character_id, bound_by = excluded.bound_by,"
            " bound_at = excluded.bound_at",
            (platform, channel_id, character_id, by, _ts(now)),
        )
