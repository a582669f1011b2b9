"""The one owner of the database connection: every SQL statement of the project lives here
(FTS5 aside, in `memory/fts.py`, which is only called from this class)."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from datetime import date, datetime
from importlib import resources
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

import aiosqlite

from memory import fts
from memory.fts import Term
from memory.models import (
    Conversation,
    Fact,
    FactVersion,
    ReplySources,
    Summary,
    SummaryFields,
    Thread,
    Turn,
    UsageRecord,
    User,
)

log = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")

_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


def serialized(
    method: Callable[Concatenate[Store, P], Awaitable[R]],
) -> Callable[Concatenate[Store, P], Awaitable[R]]:
    """Run a Store method alone on the connection.

    All coroutines share one connection; without this, one method's statements could land
    inside another's open transaction, or its COMMIT could meet a half-read cursor
    ("cannot commit transaction - SQL statements in progress").
    """

    @functools.wraps(method)
    async def wrapper(self: Store, *args: P.args, **kwargs: P.kwargs) -> R:
        async with self._guard():
            return await method(self, *args, **kwargs)

    return wrapper


class SchemaTooNewError(RuntimeError):
    """The database was written by a newer version of the bot."""


def _ts(moment: datetime) -> str:
    return moment.isoformat()


def _dt(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def _fact(row: aiosqlite.Row) -> Fact:
    return Fact(
        id=row["id"],
        user_id=row["user_id"],
        character_id=row["character_id"],
        kind=row["kind"],
        key=row["key"],
        value=row["value"],
        origin=row["origin"],
        scope=row["scope"],
        evidence=tuple(json.loads(row["evidence"])),
        lifetime=row["lifetime"],
        event_date=date.fromisoformat(row["event_date"]) if row["event_date"] else None,
        created_at=datetime.fromisoformat(row["created_at"]),
        confirmed_at=datetime.fromisoformat(row["confirmed_at"]),
        expires_at=_dt(row["expires_at"]),
        status=row["status"],
    )


def available_migrations() -> list[tuple[int, str, str]]:
    """(version, file name, SQL) of every file in the `migrations` package, in order."""
    found = []
    for entry in resources.files("migrations").iterdir():
        match = _MIGRATION_NAME.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    return sorted(found)


class Store:
    def __init__(self, db: aiosqlite.Connection, path: Path) -> None:
        self._db = db
        self.path = path
        self._lock = asyncio.Lock()
        self._owner: asyncio.Task[Any] | None = None

    @asynccontextmanager
    async def _guard(self) -> AsyncIterator[None]:
        """The connection for this task alone; re-entrant, so methods may call each other."""
        task = asyncio.current_task()
        if self._owner is not None and self._owner is task:
            yield
            return
        async with self._lock:
            self._owner = task
            try:
                yield
            finally:
                self._owner = None

    @classmethod
    async def open(cls, path: Path, *, migrate: bool = True) -> Store:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = await aiosqlite.connect(path, isolation_level=None)
        db.row_factory = aiosqlite.Row
        for pragma in (
            "journal_mode = WAL",
            "synchronous = NORMAL",
            "foreign_keys = ON",
            "busy_timeout = 5000",
            # Deleted memory must not linger in free pages.
            "secure_delete = ON",
        ):
            await db.execute(f"PRAGMA {pragma}")
        # The search index's triggers call it (migration 0007): on every connection, first.
        await db.create_function("thread_tokens", 4, fts.thread_tokens, deterministic=True)
        store = cls(db, path)
        try:
            await store._check_schema_not_newer()
            if migrate:
                await store.migrate()
        except BaseException:
            await db.close()
            raise
        return store

    @serialized
    async def close(self) -> None:
        await self._db.close()

    async def _all(self, sql: str, params: Iterable[Any] = ()) -> list[aiosqlite.Row]:
        """Every row, in one trip to the database thread (a cursor costs three)."""
        return list(await self._db.execute_fetchall(sql, tuple(params)))

    async def _one(self, sql: str, params: Iterable[Any] = ()) -> aiosqlite.Row | None:
        rows = await self._all(sql, params)
        return rows[0] if rows else None

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        # BEGIN IMMEDIATE takes the write lock up front, so a transaction never fails halfway
        # on a lock upgrade; aiosqlite serialises statements on its single thread.
        await self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            # SQLite may already have rolled back (SQLITE_FULL, SQLITE_IOERR, ...): a ROLLBACK
            # then fails with "no transaction is active" and hides the real error.
            if self._db.in_transaction:
                await self._db.execute("ROLLBACK")
            raise
        await self._db.execute("COMMIT")

    # ---- migrations -------------------------------------------------------------------------

    async def _applied_versions(self) -> set[int]:
        await self._db.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        return {row[0] for row in await self._all("SELECT version FROM schema_migrations")}

    async def _check_schema_not_newer(self) -> None:
        known = {version for version, _, _ in available_migrations()}
        unknown = sorted((await self._applied_versions()) - known)
        if unknown:
            raise SchemaTooNewError(
                f"{self.path} has schema migration(s) {unknown} that this version of the bot "
                f"does not know (it knows up to {max(known)}): upgrade the bot, or use a copy "
                "of the database made before the upgrade"
            )

    @serialized
    async def migrate(self) -> list[str]:
        """Apply the migrations not yet recorded, each in its own transaction."""
        applied = await self._applied_versions()
        done = []
        for version, name, sql in available_migrations():
            if version in applied:
                continue
            # executescript, because triggers hold semicolons; the file name is safe to inline
            # (it matched _MIGRATION_NAME), and the record commits with the migration or not at all.
            script = (
                f"BEGIN IMMEDIATE;\n{sql}\n;INSERT INTO schema_migrations (version, name, "
                f"applied_at) VALUES ({version}, '{name}', datetime('now'));\nCOMMIT;"
            )
            try:
                await self._db.executescript(script)
            except BaseException:
                if self._db.in_transaction:
                    await self._db.execute("ROLLBACK")
                raise
            log.info("applied migration %s", name)
            done.append(name)
        return done

    @serialized
    async def schema_version(self) -> int:
        row = await self._one("SELECT MAX(version) FROM schema_migrations")
        return int(row[0] or 0) if row else 0

    @serialized
    async def integrity_check(self) -> str:
        row = await self._one("PRAGMA integrity_check")
        return str(row[0]) if row else "no answer"

    # ---- users and conversations ------------------------------------------------------------

    @serialized
    async def upsert_user(
        self, platform: str, platform_user_id: str, display_name: str, now: datetime
    ) -> User:
        row = await self._one(
            "INSERT INTO users (platform, platform_user_id, display_name, created_at)"
            " VALUES (?, ?, ?, ?)"
            " ON CONFLICT (platform, platform_user_id) DO UPDATE SET"
            " display_name = excluded.display_name"
            " RETURNING id, platform, platform_user_id, display_name",
            (platform, platform_user_id, display_name, _ts(now)),
        )
        assert row is not None
        return User(row["id"], row["platform"], row["platform_user_id"], row["display_name"])

    @serialized
    async def find_user(self, platform: str, platform_user_id: str) -> User | None:
        row = await self._one(
            "SELECT id, platform, platform_user_id, display_name FROM users"
            " WHERE platform = ? AND platform_user_id = ?",
            (platform, platform_user_id),
        )
        if row is None:
            return None
        return User(row["id"], row["platform"], row["platform_user_id"], row["display_name"])

    @staticmethod
    def _conversation(row: aiosqlite.Row) -> Conversation:
        return Conversation(
            id=row["id"],
            thread=Thread(row["user_id"], row["character_id"], row["scope"]),
            started_at=datetime.fromisoformat(row["started_at"]),
            last_activity_at=datetime.fromisoformat(row["last_activity_at"]),
            ended_at=_dt(row["ended_at"]),
            end_reason=row["end_reason"],
            extracted_at=_dt(row["extracted_at"]),
        )

    @serialized
    async def open_conversation(self, thread: Thread) -> Conversation | None:
        row = await self._one(
            "SELECT * FROM conversations WHERE user_id = ? AND character_id = ? AND scope = ?"
            " AND ended_at IS NULL ORDER BY id DESC LIMIT 1",
            (thread.user_id, thread.character_id, thread.scope),
        )
        return self._conversation(row) if row else None

    @serialized
    async def start_conversation(self, thread: Thread, now: datetime) -> Conversation:
        row = await self._one(
            "INSERT INTO conversations (user_id, character_id, scope, started_at,"
            " last_activity_at) VALUES (?, ?, ?, ?, ?) RETURNING *",
            (thread.user_id, thread.character_id, thread.scope, _ts(now), _ts(now)),
        )
        assert row is not None
        return self._conversation(row)

    @serialized
    async def end_conversation(self, conversation_id: int, reason: str, now: datetime) -> bool:
        """End it if still open; False when someone else ended it first."""
        async with self._db.execute(
            "UPDATE conversations SET ended_at = ?, end_reason = ?"
            " WHERE id = ? AND ended_at IS NULL",
            (_ts(now), reason, conversation_id),
        ) as cursor:
            return cursor.rowcount == 1

    @serialized
    async def conversations_idle_since(self, cutoff: datetime) -> list[Conversation]:
        return [
            self._conversation(row)
            for row in await self._all(
                "SELECT * FROM conversations WHERE ended_at IS NULL AND last_activity_at < ?",
                (_ts(cutoff),),
            )
        ]

    # ---- the turn log -----------------------------------------------------------------------

    @serialized
    async def add_turn(
        self,
        conversation: Conversation,
        role: str,
        text: str,
        now: datetime,
        platform_message_id: str | None = None,
    ) -> Turn:
        thread = conversation.thread
        async with self._transaction() as db:
            row = await self._one(
                "INSERT INTO turns (conversation_id, user_id, character_id, scope, role, text,"
                " created_at, platform_message_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                " RETURNING id",
                (
                    conversation.id,
                    thread.user_id,
                    thread.character_id,
                    thread.scope,
                    role,
                    text,
                    _ts(now),
                    platform_message_id,
                ),
            )
            await db.execute(
                "UPDATE conversations SET last_activity_at = ? WHERE id = ?",
                (_ts(now), conversation.id),
            )
        assert row is not None
        return Turn(row[0], conversation.id, role, text, now, platform_message_id)  # type: ignore[arg-type]

    @staticmethod
    def _turn(row: aiosqlite.Row) -> Turn:
        return Turn(
            id=row["id"],
            conversation_id=row["conversation_id"],
            role=row["role"],
            text=row["text"],
            created_at=datetime.fromisoformat(row["created_at"]),
            platform_message_id=row["platform_message_id"],
        )

    @serialized
    async def turns_after(self, thread: Thread, after_turn_id: int) -> list[Turn]:
        """The thread's turns with an id above `after_turn_id`, oldest first."""
        return [
            self._turn(row)
            for row in await self._all(
                "SELECT * FROM turns WHERE user_id = ? AND character_id = ? AND scope = ?"
                " AND id > ? ORDER BY id",
                (thread.user_id, thread.character_id, thread.scope, after_turn_id),
            )
        ]

    @serialized
    async def conversation_turns(self, conversation_id: int) -> list[Turn]:
        return [
            self._turn(row)
            for row in await self._all(
                "SELECT * FROM turns WHERE conversation_id = ? ORDER BY id", (conversation_id,)
            )
        ]

    @serialized
    async def count_turns(self, thread: Thread) -> int:
        row = await self._one(
            "SELECT COUNT(*) FROM turns WHERE user_id = ? AND character_id = ? AND scope = ?",
            (thread.user_id, thread.character_id, thread.scope),
        )
        return int(row[0]) if row else 0

    # ---- summaries --------------------------------------------------------------------------

    @staticmethod
    def _summary(row: aiosqlite.Row) -> Summary:
        raw = json.loads(row["fields_json"])
        return Summary(
            fields=SummaryFields(**{name: tuple(raw.get(name, ())) for name in raw}),
            cited_ids=frozenset(json.loads(row["cited_ids_json"])),
            covers_up_to_turn_id=row["covers_up_to_turn_id"],
            created_at=datetime.fromisoformat(row["created_at"]),
            id=row["id"],
        )

    @serialized
    async def latest_summary(self, thread: Thread) -> Summary | None:
        row = await self._one(
            "SELECT * FROM summaries WHERE user_id = ? AND character_id = ? AND scope = ?"
            " ORDER BY id DESC LIMIT 1",
            (thread.user_id, thread.character_id, thread.scope),
        )
        return self._summary(row) if row else None

    @serialized
    async def save_summary(self, thread: Thread, summary: Summary) -> int:
        """Store a new version; returns its id."""
        cursor = await self._db.execute(
            "INSERT INTO summaries (user_id, character_id, scope, fields_json, cited_ids_json,"
            " covers_up_to_turn_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                thread.user_id,
                thread.character_id,
                thread.scope,
                json.dumps(dict(summary.fields.items()), ensure_ascii=False),
                json.dumps(sorted(summary.cited_ids)),
                summary.covers_up_to_turn_id,
                _ts(summary.created_at),
            ),
        )
        return int(cursor.lastrowid or 0)

    # ---- usage ------------------------------------------------------------------------------

    @serialized
    async def record_usage(self, record: UsageRecord, now: datetime) -> None:
        await self._db.execute(
            "INSERT INTO llm_usage (user_id, character_id, conversation_id, turn_id, kind,"
            " model, ok, error, input_tokens, cache_read_tokens, cache_write_tokens,"
            " output_tokens, latency_ms, created_at, tool_round, fragments, tools_called)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                record.user_id,
                record.character_id,
                record.conversation_id,
                record.turn_id,
                record.kind,
                record.model,
                int(record.ok),
                record.error,
                record.input_tokens,
                record.cache_read_tokens,
                record.cache_write_tokens,
                record.output_tokens,
                record.latency_ms,
                _ts(now),
                record.tool_round,
                record.fragments,
                record.tools_called,
            ),
        )

    @serialized
    async def usage_records(
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
        async with self._db.execute(
            f"SELECT * FROM llm_usage{where} ORDER BY id", params
        ) as cursor:
            return [
                UsageRecord(
                    kind=row["kind"],
                    model=row["model"],
                    ok=bool(row["ok"]),
                    user_id=row["user_id"],
                    character_id=row["character_id"],
                    conversation_id=row["conversation_id"],
                    turn_id=row["turn_id"],
                    error=row["error"],
                    input_tokens=row["input_tokens"],
                    cache_read_tokens=row["cache_read_tokens"],
                    cache_write_tokens=row["cache_write_tokens"],
                    output_tokens=row["output_tokens"],
                    latency_ms=row["latency_ms"],
                    tool_round=row["tool_round"],
                    fragments=row["fragments"],
                    tools_called=row["tools_called"],
                )
                async for row in cursor
            ]

    # ---- the long-term profile --------------------------------------------------------------

    @serialized
    async def facts(self, user_id: int, character_id: str, scope: str | None = None) -> list[Fact]:
        """The user's facts with one character, in one scope or all of them."""
        query = "SELECT * FROM facts WHERE user_id = ? AND character_id = ?"
        params: tuple[object, ...] = (user_id, character_id)
        if scope is not None:
            query += " AND scope = ?"
            params += (scope,)
        return [_fact(row) for row in await self._all(query + " ORDER BY id", params)]

    @serialized
    async def fact_history(self, user_id: int, fact_id: int) -> list[FactVersion]:
        async with self._db.execute(
            "SELECT * FROM fact_history WHERE user_id = ? AND fact_id = ? ORDER BY id",
            (user_id, fact_id),
        ) as cursor:
            return [
                FactVersion(
                    fact_id=row["fact_id"],
                    value=row["value"],
                    origin=row["origin"],
                    valid_from=datetime.fromisoformat(row["valid_from"]),
                    superseded_at=datetime.fromisoformat(row["superseded_at"]),
                    reason=row["reason"],
                )
                async for row in cursor
            ]

    @serialized
    async def apply_fact_changes(
        self,
        adds: list[Fact],
        updates: list[tuple[Fact, Fact, str]],
        deletes: list[Fact],
        confirms: list[Fact],
        conversation_id: int | None,
        now: datetime,
    ) -> None:
        """Write one extraction's operations atomically: all of them or none."""
        async with self._transaction() as db:
            for fact in adds:
                await db.execute(
                    "INSERT INTO facts (user_id, character_id, kind, key, value, origin, scope,"
                    " evidence, lifetime, event_date, created_at, confirmed_at, expires_at,"
                    " status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        fact.user_id,
                        fact.character_id,
                        fact.kind,
                        fact.key,
                        fact.value,
                        fact.origin,
                        fact.scope,
                        json.dumps(list(fact.evidence)),
                        fact.lifetime,
                        fact.event_date.isoformat() if fact.event_date else None,
                        _ts(fact.created_at),
                        _ts(fact.confirmed_at),
                        _ts(fact.expires_at) if fact.expires_at else None,
                        fact.status,
                    ),
                )
            for old, new, reason in updates:
                await db.execute(
                    "INSERT INTO fact_history (fact_id, user_id, value, origin, evidence,"
                    " valid_from, superseded_at, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        old.id,
                        old.user_id,
                        old.value,
                        old.origin,
                        json.dumps(list(old.evidence)),
                        _ts(old.confirmed_at),
                        _ts(now),
                        reason,
                    ),
                )
                await self._overwrite_fact(new)
            for fact in confirms:
                await self._overwrite_fact(fact)
            for fact in deletes:
                await db.execute(
                    "DELETE FROM facts WHERE id = ? AND user_id = ?", (fact.id, fact.user_id)
                )
            if conversation_id is not None:
                await self.mark_extracted(conversation_id, "done", now)

    async def _overwrite_fact(self, fact: Fact) -> None:
        await self._db.execute(
            "UPDATE facts SET value = ?, origin = ?, evidence = ?, lifetime = ?,"
            " event_date = ?, confirmed_at = ?, expires_at = ?, status = ?"
            " WHERE id = ? AND user_id = ?",
            (
                fact.value,
                fact.origin,
                json.dumps(list(fact.evidence)),
                fact.lifetime,
                fact.event_date.isoformat() if fact.event_date else None,
                _ts(fact.confirmed_at),
                _ts(fact.expires_at) if fact.expires_at else None,
                fact.status,
                fact.id,
                fact.user_id,
            ),
        )

    @serialized
    async def mark_extracted(self, conversation_id: int, status: str, now: datetime) -> None:
        await self._db.execute(
            "UPDATE conversations SET extracted_at = ?, extraction_status = ? WHERE id = ?",
            (_ts(now), status, conversation_id),
        )

    @serialized
    async def conversations_pending_extraction(self) -> list[Conversation]:
        """Ended and never extracted: derived from the database, so a crash loses nothing."""
        return [
            self._conversation(row)
            for row in await self._all(
                "SELECT * FROM conversations WHERE ended_at IS NOT NULL AND extracted_at IS NULL"
                " ORDER BY id"
            )
        ]

    @serialized
    async def record_rejection(
        self, thread: Thread, conversation_id: int | None, reason: str, now: datetime
    ) -> None:
        await self._db.execute(
            "INSERT INTO memory_rejections (user_id, character_id, conversation_id, reason,"
            " created_at) VALUES (?, ?, ?, ?, ?)",
            (thread.user_id, thread.character_id, conversation_id, reason, _ts(now)),
        )

    @serialized
    async def count_rejections(self, user_id: int | None = None) -> int:
        query, params = "SELECT COUNT(*) FROM memory_rejections", ()
        if user_id is not None:
            query, params = query + " WHERE user_id = ?", (user_id,)
        row = await self._one(query, params)
        return int(row[0]) if row else 0

    # ---- characters per channel -------------------------------------------------------------

    @serialized
    async def chosen_character(self, user_id: int, channel_key: str) -> str | None:
        row = await self._one(
            "SELECT character_id FROM character_choices WHERE user_id = ? AND channel_key = ?",
            (user_id, channel_key),
        )
        return str(row[0]) if row else None

    @serialized
    async def choose_character(
        self, user_id: int, channel_key: str, character_id: str, now: datetime
    ) -> None:
        await self._db.execute(
            "INSERT INTO character_choices (user_id, channel_key, character_id, chosen_at)"
            " VALUES (?, ?, ?, ?) ON CONFLICT (user_id, channel_key) DO UPDATE SET"
            " character_id = excluded.character_id, chosen_at = excluded.chosen_at",
            (user_id, channel_key, character_id, _ts(now)),
        )

    @serialized
    async def bound_character(self, platform: str, channel_id: str) -> str | None:
        row = await self._one(
            "SELECT character_id FROM channel_bindings WHERE platform = ? AND channel_id = ?",
            (platform, channel_id),
        )
        return str(row[0]) if row else None

    @serialized
    async def bind_channel(
        self, platform: str, channel_id: str, character_id: str | None, by: str, now: datetime
    ) -> None:
        """Bind a channel to a character, or unbind it with None."""
        if character_id is None:
            await self._db.execute(
                "DELETE FROM channel_bindings WHERE platform = ? AND channel_id = ?",
                (platform, channel_id),
            )
            return
        await self._db.execute(
            "INSERT INTO channel_bindings (platform, channel_id, character_id, bound_by,"
            " bound_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (platform, channel_id) DO UPDATE"
            " SET character_id = excluded.character_id, bound_by = excluded.bound_by,"
            " bound_at = excluded.bound_at",
            (platform, channel_id, character_id, by, _ts(now)),
        )

    # ---- search over the turn log (FTS5 specifics live in memory/fts.py) --------------------

    @serialized
    async def search_turns(
        self, user_id: int, character_id: str, scope: str | None, terms: list[Term], limit: int
    ) -> list[int]:
        return await fts.matching_turns(self._db, user_id, character_id, scope, terms, limit)

    @serialized
    async def search_term_counts(
        self, user_id: int, character_id: str, scope: str | None, terms: list[Term]
    ) -> list[int]:
        return await fts.term_counts(self._db, user_id, character_id, scope, terms)

    @serialized
    async def purge_search_index(self) -> None:
        """Run after deleting turns: their words leave the index segments, and the WAL (which
        still holds the old pages) is checkpointed and truncated."""
        await fts.optimize(self._db)
        await self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    @serialized
    async def thread_text_stats(
        self, user_id: int, character_id: str, scope: str | None
    ) -> tuple[int, int]:
        """(turns, characters) of the thread's user and assistant turns; all scopes if None."""
        row = await self._one(
            "SELECT count(*), total(length(text)) FROM turns WHERE user_id = ?"
            " AND character_id = ? AND (?3 IS NULL OR scope = ?3) AND role != 'tool'",
            (user_id, character_id, scope),
        )
        return (int(row[0]), int(row[1])) if row else (0, 0)

    @serialized
    async def exchange_turns(
        self, user_id: int, character_id: str, scope: str | None, turn_ids: list[int]
    ) -> list[tuple[int, int | None, int | None, Turn]]:
        """(first turn id, next exchange's first turn id, previous exchange's last turn id, turn)
        for every turn of the exchanges that hold `turn_ids`. An exchange runs from a user turn
        to the next user turn of the same conversation; turns before a conversation's first
        user turn form one of their own."""
        async with self._db.execute(
            "WITH span AS (SELECT DISTINCT t.conversation_id AS cid,"
            " coalesce((SELECT p.id FROM turns p WHERE p.conversation_id = t.conversation_id"
            "  AND p.id <= t.id AND p.role = 'user' ORDER BY p.id DESC LIMIT 1),"
            "  (SELECT min(p.id) FROM turns p WHERE p.conversation_id = t.conversation_id)) AS lo,"
            " (SELECT n.id FROM turns n WHERE n.conversation_id = t.conversation_id"
            "  AND n.id > t.id AND n.role = 'user' ORDER BY n.id LIMIT 1) AS hi"
            # CROSS JOIN keeps SQLite from scanning the whole thread by user_id: seek by id.
            " FROM json_each(?1) AS hit CROSS JOIN turns t ON t.id = hit.value"
            " WHERE t.user_id = ?2 AND t.character_id = ?3 AND (?4 IS NULL OR t.scope = ?4))"
            " SELECT span.lo, span.hi, (SELECT max(p.id) FROM turns p"
            "  WHERE p.conversation_id = span.cid AND p.id < span.lo) AS previous, m.*"
            " FROM span JOIN turns m ON m.conversation_id = span.cid"
            " AND m.id >= span.lo AND m.id < coalesce(span.hi, 9223372036854775807)"
            " WHERE m.user_id = ?2 AND m.character_id = ?3 ORDER BY m.id",
            (json.dumps(turn_ids), user_id, character_id, scope),
        ) as cursor:
            # One fetchall: iterating would cross to aiosqlite's thread once per row.
            return [(row[0], row[1], row[2], self._turn(row)) for row in await cursor.fetchall()]

    @serialized
    async def turns_by_ids(self, user_id: int, character_id: str, ids: list[int]) -> list[Turn]:
        """The turns among `ids` that belong to this user with this character; others are absent."""
        async with self._db.execute(
            "SELECT t.* FROM json_each(?) AS hit CROSS JOIN turns t ON t.id = hit.value"
            " WHERE t.user_id = ? AND t.character_id = ?",
            (json.dumps(ids), user_id, character_id),
        ) as cursor:
            return [self._turn(row) for row in await cursor.fetchall()]

    # ---- the user's own memory controls (/memoria) -----------------------------------------

    @serialized
    async def fact(self, user_id: int, character_id: str, fact_id: int) -> Fact | None:
        """One of this user's facts with this character; anyone else's is simply not found."""
        row = await self._one(
            "SELECT * FROM facts WHERE id = ? AND user_id = ? AND character_id = ?",
            (fact_id, user_id, character_id),
        )
        return _fact(row) if row else None

    @serialized
    async def review_mode(self, user_id: int) -> bool:
        row = await self._one(
            "SELECT review_mode FROM user_preferences WHERE user_id = ?", (user_id,)
        )
        return bool(row[0]) if row else False

    @serialized
    async def set_review_mode(self, user_id: int, on: bool) -> None:
        await self._db.execute(
            "INSERT INTO user_preferences (user_id, review_mode) VALUES (?, ?)"
            " ON CONFLICT (user_id) DO UPDATE SET review_mode = excluded.review_mode",
            (user_id, int(on)),
        )

    @serialized
    async def delete_fact(self, user_id: int, character_id: str, fact_id: int) -> bool:
        async with self._db.execute(
            "DELETE FROM facts WHERE id = ? AND user_id = ? AND character_id = ?",
            (fact_id, user_id, character_id),
        ) as cursor:
            return cursor.rowcount == 1

    @serialized
    async def record_reply_sources(self, thread: Thread, sources: ReplySources) -> None:
        await self._db.execute(
            "INSERT OR REPLACE INTO reply_sources (turn_id, user_id, character_id, fact_ids,"
            " summary_id, window_turn_ids, fragment_turn_ids, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                sources.turn_id,
                thread.user_id,
                thread.character_id,
                json.dumps(list(sources.fact_ids)),
                sources.summary_id or None,
                json.dumps(list(sources.window_turn_ids)),
                json.dumps(list(sources.fragment_turn_ids)),
                _ts(sources.created_at),
            ),
        )

    @serialized
    async def last_reply_sources(self, user_id: int, character_id: str) -> ReplySources | None:
        row = await self._one(
            "SELECT * FROM reply_sources WHERE user_id = ? AND character_id = ?"
            " ORDER BY turn_id DESC LIMIT 1",
            (user_id, character_id),
        )
        if row is None:
            return None
        return ReplySources(
            turn_id=row["turn_id"],
            fact_ids=tuple(json.loads(row["fact_ids"])),
            summary_id=row["summary_id"],
            window_turn_ids=tuple(json.loads(row["window_turn_ids"])),
            fragment_turn_ids=tuple(json.loads(row["fragment_turn_ids"])),
            created_at=datetime.fromisoformat(row["created_at"]),
        )

    @serialized
    async def summary_by_id(self, user_id: int, summary_id: int) -> Summary | None:
        row = await self._one(
            "SELECT * FROM summaries WHERE id = ? AND user_id = ?", (summary_id, user_id)
        )
        return self._summary(row) if row else None

    @serialized
    async def export_rows(
        self, user_id: int, character_id: str
    ) -> dict[str, list[dict[str, object]]]:
        """Every row this user has with this character, table by table, as plain dicts."""
        queries = {
            "conversations": "SELECT * FROM conversations WHERE user_id = ? AND character_id = ?",
            "turns": "SELECT * FROM turns WHERE user_id = ? AND character_id = ?",
            "summaries": "SELECT * FROM summaries WHERE user_id = ? AND character_id = ?",
            "facts": "SELECT * FROM facts WHERE user_id = ? AND character_id = ?",
            "fact_history": "SELECT h.* FROM fact_history h JOIN facts f ON f.id = h.fact_id"
            " WHERE f.user_id = ? AND f.character_id = ?",
        }
        rows: dict[str, list[dict[str, object]]] = {}
        for table, query in queries.items():
            async with self._db.execute(query + " ORDER BY 1", (user_id, character_id)) as cur:
                rows[table] = [dict(row) async for row in cur]
        return rows

    @serialized
    async def forget(self, user_id: int, character_id: str) -> dict[str, int]:
        """Delete everything this user has with this character, from every table and index."""
        owned = "WHERE user_id = ? AND character_id = ?"
        counts: dict[str, int] = {}
        async with self._transaction() as db:
            for table in (
                "reply_sources",
                "llm_usage",
                "memory_rejections",
                "summaries",
                "facts",
                "turns",
                "conversations",
            ):
                async with db.execute(
                    f"DELETE FROM {table} {owned}", (user_id, character_id)
                ) as cursor:
                    counts[table] = cursor.rowcount
        await self.purge_search_index()
        return counts

    @serialized
    async def import_rows(
        self, user_id: int, character_id: str, data: dict[str, Any], now: datetime
    ) -> dict[str, int]:
        """Load an export into this user's memory with fresh ids, rewriting every reference
        (citations, evidence, history) to them; one transaction, all or nothing."""
        turn_ids: dict[int, int] = {}
        counts = {"conversations": 0, "turns": 0, "summaries": 0, "facts": 0}
        async with self._transaction() as db:
            conversation_ids: dict[int, int] = {}
            for row in data.get("conversations", []):
                async with db.execute(
                    "INSERT INTO conversations (user_id, character_id, scope, started_at,"
                    " last_activity_at, ended_at, end_reason, extracted_at, extraction_status)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                    (
                        user_id,
                        character_id,
                        row["scope"],
                        row["started_at"],
                        row["last_activity_at"],
                        row["ended_at"] or _ts(now),
                        row["end_reason"] or "imported",
                        row["extracted_at"] or _ts(now),
                        row.get("extraction_status") or "imported",
                    ),
                ) as cursor:
                    conversation_ids[row["id"]] = (await cursor.fetchone())[0]  # type: ignore[index]
                counts["conversations"] += 1
            for row in sorted(data.get("turns", []), key=lambda r: r["id"]):
                async with db.execute(
                    "INSERT INTO turns (conversation_id, user_id, character_id, scope, role,"
                    " text, created_at, platform_message_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                    " RETURNING id",
                    (
                        conversation_ids[row["conversation_id"]],
                        user_id,
                        character_id,
                        row["scope"],
                        row["role"],
                        row["text"],
                        row["created_at"],
                        None,
                    ),
                ) as cursor:
                    turn_ids[row["id"]] = (await cursor.fetchone())[0]  # type: ignore[index]
                counts["turns"] += 1
            counts["summaries"] = await self._import_summaries(
                user_id, character_id, data, turn_ids
            )
            counts["facts"] = await self._import_facts(user_id, character_id, data, turn_ids)
        return counts

    async def _import_summaries(
        self, user_id: int, character_id: str, data: dict[str, Any], turn_ids: dict[int, int]
    ) -> int:
        def recite(text: str) -> str:
            return re.sub(
                r"\{cite:(\d+)\}", lambda m: f"{{cite:{turn_ids.get(int(m.group(1)), 0)}}}", text
            )

        for row in sorted(data.get("summaries", []), key=lambda r: r["id"]):
            fields = {
                name: [recite(claim) for claim in claims]
                for name, claims in row["fields_json"].items()
            }
            cited = sorted(turn_ids[i] for i in row["cited_ids_json"] if i in turn_ids)
            covered = max(
                (new for old, new in turn_ids.items() if old <= row["covers_up_to_turn_id"]),
                default=0,
            )
            await self._db.execute(
                "INSERT INTO summaries (user_id, character_id, scope, fields_json,"
                " cited_ids_json, covers_up_to_turn_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    user_id,
                    character_id,
                    row["scope"],
                    json.dumps(fields, ensure_ascii=False),
                    json.dumps(cited),
                    covered,
                    row["created_at"],
                ),
            )
        return len(data.get("summaries", []))

    async def _import_facts(
        self, user_id: int, character_id: str, data: dict[str, Any], turn_ids: dict[int, int]
    ) -> int:
        fact_ids: dict[int, int] = {}
        for row in data.get("facts", []):
            evidence = [turn_ids[i] for i in row["evidence"] if i in turn_ids]
            inserted = await self._one(
                "INSERT INTO facts (user_id, character_id, kind, key, value, origin, scope,"
                " evidence, lifetime, event_date, created_at, confirmed_at, expires_at, status)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (user_id, character_id, scope, kind, key) DO NOTHING RETURNING id",
                (
                    user_id,
                    character_id,
                    row["kind"],
                    row["key"],
                    row["value"],
                    row["origin"],
                    row["scope"],
                    json.dumps(evidence),
                    row["lifetime"],
                    row["event_date"],
                    row["created_at"],
                    row["confirmed_at"],
                    row["expires_at"],
                    row["status"],
                ),
            )
            if inserted:
                fact_ids[row["id"]] = inserted[0]
        for row in data.get("fact_history", []):
            if row["fact_id"] in fact_ids:
                await self._db.execute(
                    "INSERT INTO fact_history (fact_id, user_id, value, origin, evidence,"
                    " valid_from, superseded_at, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        fact_ids[row["fact_id"]],
                        user_id,
                        row["value"],
                        row["origin"],
                        json.dumps([turn_ids[i] for i in row["evidence"] if i in turn_ids]),
                        row["valid_from"],
                        row["superseded_at"],
                        row["reason"],
                    ),
                )
        return len(fact_ids)

    @serialized
    async def thread_turns_by_ids(self, thread: Thread, ids: list[int]) -> list[Turn]:
        """The turns among `ids` in this very thread (user, character and scope): a DM turn is
        never readable from a group, nor anyone else's from anywhere."""
        return [
            self._turn(row)
            for row in await self._all(
                # CROSS JOIN: look each id up, instead of letting the planner scan the thread.
                "SELECT t.* FROM json_each(?) AS wanted CROSS JOIN turns AS t"
                " ON t.id = wanted.value WHERE t.user_id = ? AND t.character_id = ?"
                " AND t.scope = ? ORDER BY t.id",
                (json.dumps(ids), thread.user_id, thread.character_id, thread.scope),
            )
        ]
