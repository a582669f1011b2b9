"""`companion db copy`: a whole deployment from one database to another (SQLite <-> PostgreSQL).

Table by table in foreign-key order, page by page, ids kept (they are the citation codes of
summaries and reply sources, and fact history points at fact ids), so everything that refers to
a row still refers to it after the move. Rows travel as the SQLite columns hold them (ISO text
for times, JSON text for lists), which both backends read and write unchanged. The copy is then
verified: the row count and a checksum of every table, read back from the target, must equal the
source's. The target must be empty; the source is only read.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memory.store.protocols import DeploymentCopy

PAGE_ROWS = 2000
# The tables of a user's memory with a character, each with user_id and character_id columns,
# children before parents: the order a forget deletes them in (and where `characters_of` looks).
MEMORY_TABLES = (
    "off_record_threads",
    "journey_runs",
    "journeys",
    "followups",
    "followup_settings",
    "reply_sources",
    "llm_usage",
    "memory_rejections",
    "summaries",
    "facts",
    "turns",
    "conversations",
)

# A user's own lines in group scenes, as one character witnessed them: an export's
# "scene_lines" (to read; an import puts no words back into a group). $1 user, $2 character.
SCENE_LINES = (
    "SELECT id, scope, text, created_at FROM turns WHERE speaker_id = $1 AND character_id = $2"
)

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
         "created_at", "platform_message_id", "source_key", "speaker_id", "speaker_character",
         "speaker_name"),
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
    "followup_settings": (("user_id", "character_id", "enabled", "offered_at"), "user_id"),
    "followups": (("id", "user_id", "character_id", "fact_id", "turn_id", "sent_at"), "id"),
    "off_record_threads": (("user_id", "character_id", "scope", "expires_at"), "user_id"),
    "reply_sources": (
        ("turn_id", "user_id", "character_id", "fact_ids", "summary_id", "window_turn_ids",
         "fragment_turn_ids", "created_at", "journey_id"),
        "turn_id",
    ),
    "dead_letters": (
        ("id", "platform", "update_key", "platform_user_id", "payload", "error", "created_at"),
        "id",
    ),
    "journeys": (
        ("id", "user_id", "character_id", "text", "cited_ids_json", "covers_conversation_id",
         "created_at"),
        "id",
    ),
    "journey_runs": (
        ("conversation_id", "user_id", "character_id", "status", "created_at"),
        "conversation_id",
    ),
    "scene_members": (
        ("platform", "channel_id", "character_id", "added_by", "added_at"),
        None,
    ),
    "budget_counters": (
        ("scope", "period", "spent", "reserved", "calls", "refused", "notified"),
        None,
    ),
    "access_rules": (("platform", "kind", "target_id", "effect", "set_by", "set_at"), None),
    "access_settings": (("name", "value"), None),
    "access_notices": (("platform", "user_id", "told_at"), None),
    "chat_ratings": (
        ("platform", "channel_id", "mature", "marked_by", "marked_at", "notice_character"),
        None,
    ),
    "canon_proposals": (
        ("id", "character_id", "text", "contradicts", "status", "created_at", "decided_at"),
        "id",
    ),
    "canon_evidence": (
        ("proposal_id", "turn_id", "thread_id", "scope", "conversation_id"),
        "proposal_id",
    ),
    "canon_runs": (("conversation_id", "character_id", "status", "created_at"), "conversation_id"),
    "channel_communities": (("channel", "community"), None),
}  # fmt: skip
PRIMARY_KEYS = {
    "character_choices": "user_id, channel_key",
    "channel_bindings": "platform, channel_id",
    "followup_settings": "user_id, character_id",
    "off_record_threads": "user_id, character_id, scope",
    "scene_members": "platform, channel_id, character_id",
    "budget_counters": "scope, period",
    "access_rules": "platform, kind, target_id, effect",
    "access_settings": "name",
    "access_notices": "platform, user_id",
    "chat_ratings": "platform, channel_id",
    "canon_evidence": "proposal_id, turn_id",
    "channel_communities": "channel",
}
IDENTITY_TABLES = ("users", "conversations", "turns", "summaries", "llm_usage", "facts",
                    "fact_history", "memory_rejections", "followups", "dead_letters",
                   "journeys", "canon_proposals")  # fmt: skip


def copy_key(table: str) -> str | None:
    """The column whose last value read is the next `after_id` (None: one page holds all)."""
    return checked_table(table)[1]


def checked_table(table: str) -> tuple[tuple[str, ...], str | None]:
    if table not in COPY_TABLES:
        raise ValueError(f"not a table of the copy: {table!r}")
    return COPY_TABLES[table]


def page_query(table: str, after_id: int, limit: int) -> tuple[str, tuple[int, ...]] | None:
    """The statement ($N parameters) and its values that read `read_rows`' page of `table`:
    up to `limit` rows whose copy key is above `after_id`, in key order, rows sharing a key
    value (a user's character choices) never split between pages; a table without an integer
    key comes whole at after_id 0, and None (nothing) after it."""
    columns, key = checked_table(table)  # the name is one of ours before it is put in the SQL
    names = ", ".join(columns)
    order = PRIMARY_KEYS.get(table, key)
    if key is None:
        return (f"SELECT {names} FROM {table} ORDER BY {order}", ()) if after_id <= 0 else None
    return (
        f"SELECT {names} FROM {table} WHERE {key} > $1 AND {key} <= (SELECT max(k)"
        f" FROM (SELECT {key} AS k FROM {table} WHERE {key} > $1 ORDER BY {key}"
        f" LIMIT $2) AS page) ORDER BY {order}",
        (after_id, limit),
    )


class CopyRefused(RuntimeError):
    """The copy cannot start or did not verify; the message says what to do."""


@dataclass
class TableCopy:
    table: str
    rows: int = 0
    checksum: str = ""


@dataclass
class CopyReport:
    tables: list[TableCopy] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(table.rows for table in self.tables)


# (table, rows copied so far, rows in the table)
Progress = Callable[[str, int, int], None]


class _Digest:
    """Order-sensitive checksum of rows as canonical JSON: the same rows in the same key order
    give the same digest on either backend (a REAL that SQLite returns as an integer counts as
    the same number)."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()

    def add(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            canonical = {
                k: float(v)
                if isinstance(v, int | float) and not isinstance(v, bool) and k == "latency_ms"
                else v
                for k, v in row.items()
            }
            self._hash.update(json.dumps(canonical, sort_keys=True, default=str).encode())
            self._hash.update(b"\n")

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


async def _pages(store: DeploymentCopy, table: str) -> Any:
    """Every row of `table`, a page at a time, in key order."""
    key = copy_key(table)
    after = 0
    while True:
        rows = await store.read_rows(table, after, PAGE_ROWS)
        if not rows:
            return
        yield rows
        if key is None:
            return
        after = int(rows[-1][key])


async def _refuse_unless_empty(target: DeploymentCopy) -> None:
    for table in await target.copy_tables():
        if await target.count_rows(table):
            raise CopyRefused(
                f"the target already holds rows in {table}: copy into an empty database "
                "(a new PostgreSQL database, or a SQLite path that does not exist yet)"
            )


async def copy_deployment(
    source: DeploymentCopy, target: DeploymentCopy, progress: Progress | None = None
) -> CopyReport:
    """Copy every table from `source` into the empty `target`, then verify both sides."""
    await _refuse_unless_empty(target)
    report = CopyReport()
    for table in await source.copy_tables():
        total = await source.count_rows(table)
        digest, copied = _Digest(), 0
        async for rows in _pages(source, table):
            await target.write_rows(table, rows)
            digest.add(rows)
            copied += len(rows)
            if progress is not None:
                progress(table, copied, total)
        report.tables.append(TableCopy(table, copied, digest.hexdigest()))
    await target.finish_copy()
    await verify(report, target)
    return report


async def verify(report: CopyReport, target: DeploymentCopy) -> None:
    """Read every table back from the target: same row count and checksum as the source's."""
    for copied in report.tables:
        digest, rows = _Digest(), 0
        async for page in _pages(target, copied.table):
            digest.add(page)
            rows += len(page)
        if rows != copied.rows or digest.hexdigest() != copied.checksum:
            raise CopyRefused(
                f"verification failed for {copied.table}: {copied.rows} row(s) read from the "
                f"source, {rows} in the target, checksums "
                f"{'equal' if digest.hexdigest() == copied.checksum else 'different'}; "
                "the target is incomplete: drop it and copy again"
            )
