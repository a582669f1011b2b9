"""The store's foundation: the connection, its pragmas, migrations, one method at a time."""

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
from typing import Any, Concatenate, ParamSpec, Self, TypeVar

import aiosqlite

from memory import fts
from memory.models import Conversation, Fact, Summary, SummaryFields, Thread, Turn

log = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S", bound="StoreBase")

_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


def serialized(
    method: Callable[Concatenate[S, P], Awaitable[R]],
) -> Callable[Concatenate[S, P], Awaitable[R]]:
    """Run a Store method alone on the connection.

    All coroutines share one connection; without this, one method's statements could land
    inside another's open transaction, or its COMMIT could meet a half-read cursor
    ("cannot commit transaction - SQL statements in progress").
    """

    @functools.wraps(method)
    async def wrapper(self: S, *args: P.args, **kwargs: P.kwargs) -> R:
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


class StoreBase:
    """The connection, its pragmas, the migrations, and running one method at a time."""

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
    async def open(cls, path: Path, *, migrate: bool = True) -> Self:
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

    # ---- rows into typed records ----------------------------------------------------------

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
