"""Table by table, row by row, between databases (`companion db copy`).

Rows are read and written as the SQLite store's columns hold them (ISO text for times, JSON text
for lists, integers for flags), so they move between the two backends unchanged. The turn's
search vector is not a column of the copy: it is computed again from the text on write.
`pending_purges` is not copied either: it records bytes owed by the source's own files.
"""

from __future__ import annotations

from typing import Any

from memory.store.postgres.base import PostgresStoreBase
from memory.store.postgres.terms import search_vector

# Every data table in foreign-key order, with its columns (those of the SQLite schema, in
# its order) and the integer key rows are paged by (None: read in one page).
COPY_TABLES: dict[str, tuple[tuple[str, ...], str | None]] = {
    "users": (("id", "platform", "platform_user_id", "display_name", "created_at"), "id"),
    "conversations": (
        ("id", "user_id", "character_id", "scope", "started_at", "last_activity_at",
         "ended_at", "end_reason", "extracted_at", "extraction_status"),
        "id",
    ),
    "turns": (
        ("id", "conversation_id", "user_id", "character_id", "scope", "role", "text",
         "created_at", "platform_message_id"),
        "id",
    ),
    "summaries": (
        ("id", "user_id", "character_id", "scope", "fields_json", "cited_ids_json",
         "covers_up_to_turn_id", "created_at"),
        "id",
    ),
    "llm_usage": (
        ("id", "user_id", "character_id", "conversation_id", "turn_id", "kind", "model", "ok",
         "error", "input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens",
         "latency_ms", "created_at", "tool_round", "fragments", "tools_called"),
        "id",
    ),
    "facts": (
        ("id", "user_id", "character_id", "kind", "key", "value", "origin", "scope",
         "evidence", "lifetime", "event_date", "created_at", "confirmed_at", "expires_at",
         "status"),
        "id",
    ),
    "fact_history": (
        ("id", "fact_id", "user_id", "value", "origin", "evidence", "valid_from",
         "superseded_at", "reason"),
        "id",
    ),
    "memory_rejections": (
        ("id", "user_id", "character_id", "conversation_id", "reason", "created_at"),
        "id",
    ),
    "character_choices": (("user_id", "channel_key", "character_id", "chosen_at"), "user_id"),
    "channel_bindings": (
        ("platform", "channel_id", "character_id", "bound_by", "bound_at"),
        None,
    ),
    "user_preferences": (("user_id", "review_mode", "timezone"), "user_id"),
    "followup_settings": (("user_id", "character_id", "enabled", "offered_at"), None),
    "followups": (("id", "user_id", "character_id", "fact_id", "turn_id", "sent_at"), "id"),
    "reply_sources": (
        ("turn_id", "user_id", "character_id", "fact_ids", "summary_id", "window_turn_ids",
         "fragment_turn_ids", "created_at"),
        "turn_id",
    ),
}  # fmt: skip
_PRIMARY_KEYS = {
    "character_choices": "user_id, channel_key",
    "channel_bindings": "platform, channel_id",
    "followup_settings": "user_id, character_id",
}
_IDENTITY_TABLES = ("users", "conversations", "turns", "summaries", "llm_usage", "facts",
                    "fact_history", "memory_rejections", "followups")  # fmt: skip


def copy_key(table: str) -> str | None:
    """The column whose last value read is the next `after_id` (None: one page holds all)."""
    return _checked(table)[1]


def _checked(table: str) -> tuple[tuple[str, ...], str | None]:
    if table not in COPY_TABLES:
        raise ValueError(f"not a table of the copy: {table!r}")
    return COPY_TABLES[table]


class PgCopyMixin(PostgresStoreBase):
    async def copy_tables(self) -> list[str]:
        """Every data table, parents before children (schema_migrations and the purge
        records excepted)."""
        return list(COPY_TABLES)

    async def read_rows(self, table: str, after_id: int, limit: int) -> list[dict[str, Any]]:
        """Up to `limit` rows whose `copy_key` is above `after_id`, in primary-key order. Rows
        sharing a key value (a user's character choices) are never split between pages, so a
        page may hold a few more; a table without an integer key comes whole at after_id 0."""
        columns, key = _checked(table)
        names = ", ".join(columns)
        order = _PRIMARY_KEYS.get(table, key)
        if key is None:
            if after_id > 0:
                return []
            found = await self._pool.fetch(f"SELECT {names} FROM {table} ORDER BY {order}")
        else:
            found = await self._pool.fetch(
                f"SELECT {names} FROM {table} WHERE {key} > $1 AND {key} <= (SELECT max(k)"
                f" FROM (SELECT {key} AS k FROM {table} WHERE {key} > $1 ORDER BY {key}"
                f" LIMIT $2) AS page) ORDER BY {order}",
                after_id,
                limit,
            )
        return [dict(row) for row in found]

    async def write_rows(self, table: str, rows: list[dict[str, Any]]) -> None:
        """Insert `rows` as they are, ids included, in one transaction (a turn's search vector
        computed from its text)."""
        columns, _ = _checked(table)
        if not rows:
            return
        names = list(columns)
        if table == "turns":
            names.append("search")
        marks = ", ".join(
            f"${i}::tsvector" if name == "search" else f"${i}"
            for i, name in enumerate(names, start=1)
        )
        values = [_row_values(table, columns, row) for row in rows]
        async with self._transaction() as con:
            await con.executemany(
                f"INSERT INTO {table} ({', '.join(names)}) VALUES ({marks})", values
            )

    async def finish_copy(self) -> None:
        """Move every id sequence past the largest id copied, so new rows never reuse one."""
        async with self._transaction() as con:
            for table in _IDENTITY_TABLES:
                await con.execute(
                    "SELECT setval(pg_get_serial_sequence($1, 'id'), greatest(max(id), 1),"
                    f" max(id) IS NOT NULL) FROM {table}",
                    table,
                )


def _row_values(table: str, columns: tuple[str, ...], row: dict[str, Any]) -> tuple[Any, ...]:
    values = [row[name] for name in columns]
    if table == "llm_usage":  # SQLite may hand a whole number back for a REAL
        index = columns.index("latency_ms")
        values[index] = float(values[index])
    if table == "turns":
        spoken = row["role"] != "tool"
        values.append(search_vector(row["text"]) if spoken else None)
    return tuple(values)
