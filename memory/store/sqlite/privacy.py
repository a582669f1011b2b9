"""The user's own memory controls: /memoria, export and import, forget."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from memory.models import Fact, ReplySources, Summary, Thread, Turn
from memory.store import records, remap
from memory.store.copy import MEMORY_TABLES, SCENE_LINES
from memory.store.records import fact as _fact
from memory.store.sqlite.base import on_db_thread
from memory.store.sqlite.scenes import ScenesMixin

# A forget's statement for the sender's dead letters (migrations 0014): they name the user by
# platform id, as the platform process knew them, not by users.id.
DELETE_DEAD_LETTERS = (
    "DELETE FROM dead_letters WHERE (platform, platform_user_id) IN"
    " (SELECT platform, platform_user_id FROM users WHERE id = ?)"
)


class PrivacyMixin(ScenesMixin):
    # ---- the user's own memory controls (/memoria) -----------------------------------------

    @on_db_thread
    def fact(self, user_id: int, character_id: str, fact_id: int) -> Fact | None:
        """One of this user's facts with this character; anyone else's is simply not found."""
        row = self._one(
            "SELECT * FROM facts WHERE id = ? AND user_id = ? AND character_id = ?",
            (fact_id, user_id, character_id),
        )
        return _fact(row) if row else None

    @on_db_thread
    def review_mode(self, user_id: int) -> bool:
        row = self._one("SELECT review_mode FROM user_preferences WHERE user_id = ?", (user_id,))
        return bool(row[0]) if row else False

    @on_db_thread
    def set_review_mode(self, user_id: int, on: bool) -> None:
        self._con.execute(
            "INSERT INTO user_preferences (user_id, review_mode) VALUES (?, ?)"
            " ON CONFLICT (user_id) DO UPDATE SET review_mode = excluded.review_mode",
            (user_id, int(on)),
        )

    async def delete_fact(self, user_id: int, character_id: str, fact_id: int) -> bool:
        """Delete one fact; its value leaves the WAL in the background purge, as a forget's."""
        deleted = await self._delete_fact_row(user_id, character_id, fact_id)
        if deleted:
            self._start_purge()
        return deleted

    @on_db_thread
    def _delete_fact_row(self, user_id: int, character_id: str, fact_id: int) -> bool:
        with self._transaction() as db:
            cursor = db.execute(
                "DELETE FROM facts WHERE id = ? AND user_id = ? AND character_id = ?",
                (fact_id, user_id, character_id),
            )
            if cursor.rowcount == 1:  # its value is in the WAL: owed a checkpoint
                self._record_pending_purge()
        return cursor.rowcount == 1

    @on_db_thread
    def last_reply_sources(self, user_id: int, character_id: str) -> ReplySources | None:
        row = self._one(
            "SELECT * FROM reply_sources WHERE user_id = ? AND character_id = ?"
            " ORDER BY turn_id DESC LIMIT 1",
            (user_id, character_id),
        )
        return records.reply_sources(row) if row else None

    @on_db_thread
    def summary_by_id(self, user_id: int, summary_id: int) -> Summary | None:
        row = self._one(
            "SELECT * FROM summaries WHERE id = ? AND user_id = ?", (summary_id, user_id)
        )
        return self._summary(row) if row else None

    @on_db_thread
    def export_rows(self, user_id: int, character_id: str) -> dict[str, list[dict[str, object]]]:
        """Every row this user has with this character, table by table, as plain dicts."""
        queries = {
            "conversations": "SELECT * FROM conversations WHERE user_id = ? AND character_id = ?",
            "turns": "SELECT * FROM turns WHERE user_id = ? AND character_id = ?",
            "summaries": "SELECT * FROM summaries WHERE user_id = ? AND character_id = ?",
            "facts": "SELECT * FROM facts WHERE user_id = ? AND character_id = ?",
            "fact_history": "SELECT h.* FROM fact_history h JOIN facts f ON f.id = h.fact_id"
            " WHERE f.user_id = ? AND f.character_id = ?",
            "journeys": "SELECT * FROM journeys WHERE user_id = ? AND character_id = ?",
            # Their own lines in group scenes, as this character witnessed them (to read;
            # an import puts no words back into a group).
            "scene_lines": SCENE_LINES.replace("$1", "?").replace("$2", "?"),
        }
        rows: dict[str, list[dict[str, object]]] = {}
        for table, query in queries.items():
            cur = self._con.execute(query + " ORDER BY 1", (user_id, character_id))
            rows[table] = [dict(row) for row in cur]
        return rows

    async def forget(self, user_id: int, character_id: str) -> dict[str, int]:
        """Delete everything this user has with this character, from every table and index;
        when that was the last of their memory, their display name goes too (the users row
        stays, for their settings; the next message writes the name they then have). The rows
        go now (the index's own rows with them, through its delete trigger: work in
        proportion to what is deleted); the bytes they leave in old index segments and in the
        WAL are purged in the background, recorded as owed in the same transaction."""
        counts = await self._forget_rows(user_id, character_id)
        self._start_purge()
        return counts

    @on_db_thread
    def _forget_rows(self, user_id: int, character_id: str) -> dict[str, int]:
        owned = "WHERE user_id = ? AND character_id = ?"
        counts: dict[str, int] = {}
        with self._transaction() as db:
            # First, while the lines it looks for are still there (memory/store/canon.py).
            counts["canon_proposals"] = self._drop_canon_citing(
                user_id, character_id, None, every_own=True
            )
            for table in MEMORY_TABLES:  # children before parents
                cursor = db.execute(f"DELETE FROM {table} {owned}", (user_id, character_id))
                counts[table] = cursor.rowcount
            # Per sender, not per character: the platform process never knew the character.
            counts["dead_letters"] = db.execute(DELETE_DEAD_LETTERS, (user_id,)).rowcount
            # What this character witnessed of them in group scenes goes too (issue 31).
            counts["scene_lines"] = self._delete_scene_lines(user_id, None, character_id).lines
            if not self._remembered(user_id):
                db.execute("UPDATE users SET display_name = '' WHERE id = ?", (user_id,))
            self._record_pending_purge()
        return counts

    def _remembered(self, user_id: int) -> bool:
        """Whether any memory row, with any character, still refers to the user."""
        return any(
            self._all(f"SELECT 1 FROM {table} WHERE user_id = ? LIMIT 1", (user_id,))
            for table in (*MEMORY_TABLES, "fact_history")
        ) or bool(self._all("SELECT 1 FROM turns WHERE speaker_id = ? LIMIT 1", (user_id,)))

    @on_db_thread
    def characters_of(self, user_id: int) -> list[str]:
        """Every character this user has any row with, loaded now or not."""
        tables = (*MEMORY_TABLES, "character_choices")
        union = " UNION ".join(
            f"SELECT character_id FROM {table} WHERE user_id = ?1" for table in tables
        )
        return [row[0] for row in self._all(union + " ORDER BY 1", (user_id,)) if row[0]]

    async def forget_user_if_unreferenced(self, user_id: int) -> bool:
        """Once nothing of the user's memory is left with any character: their remaining
        rows (display name, choices of character, preferences) go too. False, and nothing
        deleted, while any memory row still refers to them."""
        forgotten = await self._forget_user_rows(user_id)
        if forgotten:
            self._start_purge()
        return forgotten

    @on_db_thread
    def _forget_user_rows(self, user_id: int) -> bool:
        with self._transaction() as db:
            if self._remembered(user_id):
                return False
            for table in ("character_choices", "user_preferences"):
                db.execute(f"DELETE FROM {table} WHERE user_id = ?", (user_id,))
            db.execute("DELETE FROM users WHERE id = ?", (user_id,))
            self._record_pending_purge()
        return True

    @on_db_thread
    def import_rows(
        self, user_id: int, character_id: str, data: dict[str, Any], now: datetime
    ) -> dict[str, int]:
        """Load an export into this user's memory with fresh ids, rewriting every reference
        (citations, evidence, history) to them (memory/store/remap.py); one transaction, all
        or nothing."""
        load = remap.Load(user_id, character_id, data, now)
        with self._transaction() as db:
            for row in data.get("conversations", []):
                cursor = db.execute(
                    "INSERT INTO conversations (user_id, character_id, scope, started_at,"
                    " last_activity_at, ended_at, end_reason, extracted_at, extraction_status)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                    remap.conversation(row, load),
                )
                # fetched whole, before COMMIT
                load.conversation_ids[row["id"]] = cursor.fetchall()[0][0]
            for row in sorted(data.get("turns", []), key=lambda r: r["id"]):
                cursor = db.execute(
                    "INSERT INTO turns (conversation_id, user_id, character_id, scope, role,"
                    " text, created_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
                    remap.turn(row, load),
                )
                load.turn_ids[row["id"]] = cursor.fetchall()[0][0]
            counts = {
                "conversations": len(load.conversation_ids),
                "turns": len(load.turn_ids),
                "summaries": self._import_summaries(load),
                "facts": self._import_facts(load),
            }
            if self._import_journey(load):  # type: ignore[attr-defined]
                counts["journeys"] = 1
        return counts

    def _import_summaries(self, load: remap.Load) -> int:
        for row in sorted(load.data.get("summaries", []), key=lambda r: r["id"]):
            self._con.execute(
                "INSERT INTO summaries (user_id, character_id, scope, fields_json,"
                " cited_ids_json, covers_up_to_turn_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                remap.summary(row, load),
            )
        return len(load.data.get("summaries", []))

    def _import_facts(self, load: remap.Load) -> int:
        fact_ids: dict[int, int] = {}
        stored = self._all(
            "SELECT scope, kind, key FROM facts WHERE user_id = ? AND character_id = ?",
            (load.user_id, load.character_id),
        )
        for row, key in remap.fact_keys(load.data.get("facts", []), map(tuple, stored)):
            inserted = self._one(
                "INSERT INTO facts (user_id, character_id, kind, key, value, origin, scope,"
                " evidence, lifetime, event_date, created_at, confirmed_at, expires_at, status)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (user_id, character_id, scope, kind, key) DO NOTHING RETURNING id",
                remap.fact(row, key, load),
            )
            if inserted:
                fact_ids[row["id"]] = inserted[0]
        for row in load.data.get("fact_history", []):
            if row["fact_id"] in fact_ids:
                self._con.execute(
                    "INSERT INTO fact_history (fact_id, user_id, value, origin, evidence,"
                    " valid_from, superseded_at, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    remap.fact_version(row, fact_ids[row["fact_id"]], load),
                )
        return len(fact_ids)

    @on_db_thread
    def thread_turns_by_ids(self, thread: Thread, ids: list[int]) -> list[Turn]:
        """The turns among `ids` in this very thread (user, character and scope): a DM turn is
        never readable from a group, nor anyone else's from anywhere."""
        return [
            self._turn(row)
            for row in self._all(
                # CROSS JOIN: look each id up, instead of letting the planner scan the thread.
                "SELECT t.* FROM json_each(?) AS wanted CROSS JOIN turns AS t"
                " ON t.id = wanted.value WHERE t.user_id = ? AND t.character_id = ?"
                " AND t.scope = ? ORDER BY t.id",
                (json.dumps(ids), thread.user_id, thread.character_id, thread.scope),
            )
        ]
