"""The PostgreSQL store's foundation: the pool, the migrations, the change feed and the purge.

Every method is a coroutine over an asyncpg pool; one that writes more than one statement runs
them in one transaction, so each method is atomic as the SQLite store's are on its thread.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from importlib import resources
from typing import Any, Self
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from memory.store import public_name
from memory.store.errors import SchemaTooNewError
from memory.store.postgres.changes import ChangeFeed
from memory.store.purge import BackgroundPurge

log = logging.getLogger(__name__)

_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
# Serialises migrations of two processes starting together (any constant of our own).
_MIGRATION_LOCK = 0x636F6D70
POOL_MIN, POOL_MAX = 1, 10
# Every table a deletion of memory touches: VACUUMed by a purge.
PURGED_TABLES = (
    "turns",
    "conversations",
    "summaries",
    "facts",
    "fact_history",
    "llm_usage",
    "memory_rejections",
    "reply_sources",
    "character_choices",
    "user_preferences",
    "followups",
    "followup_settings",
    "users",
    "off_record_threads",
    # An off-record message answered through the workers' inbox is deleted from it: its
    # words were in the row (migrations/postgres/0012).
    "inbox",
    "outbox",
)


def _ts(moment: datetime) -> str:
    return moment.isoformat()


def _now_text() -> str:
    return datetime.now().astimezone().isoformat()


def available_pg_migrations() -> list[tuple[int, str, str]]:
    """(version, file name, SQL) of every file in `migrations.postgres`, in order."""
    found = []
    for entry in resources.files("migrations.postgres").iterdir():
        match = _MIGRATION_NAME.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    return sorted(found)


def normalise_url(url: str) -> str:
    """postgres:// is accepted as a spelling of postgresql://; anything else is refused."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ValueError(f"not a PostgreSQL URL (postgresql://...): {redact_url(url)}")
    return urlunsplit(parts._replace(scheme="postgresql"))


def redact_url(url: str) -> str:
    """The URL as it may be logged: never with its password."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def connection_problem(url: str, error: BaseException) -> str | None:
    """One line for an admin when `error` means the server cannot be used (unreachable, a
    wrong password, no such database); None for any other error."""
    where = public_name(url)
    if isinstance(error, OSError | TimeoutError):
        reason = error.strerror or str(error) or type(error).__name__
    elif isinstance(
        error,
        asyncpg.InvalidPasswordError
        | asyncpg.InvalidAuthorizationSpecificationError
        | asyncpg.InvalidCatalogNameError
        | asyncpg.CannotConnectNowError,
    ):
        reason = str(error)
    else:
        return None
    return f"cannot reach the database {where}: {reason}; check DATABASE_URL and the server"


async def _keep_session(_con: asyncpg.Connection) -> None:
    """What a connection going back to the pool needs: nothing. asyncpg still rolls back a
    transaction left open; its default reset query (UNLISTEN, RESET ALL, advisory unlocks) is
    a round trip per statement for state this store never sets: the origin is a startup
    parameter, LISTEN has a connection of its own, and an advisory lock taken on a pooled
    connection is released before it goes back (the migration lock, in a finally)."""


class PostgresStoreBase(BackgroundPurge):
    """The pool, the migrations, the change feed and the background purge."""

    PURGE_ERRORS = (asyncpg.PostgresError, OSError)  # the record stays: try again later

    def __init__(self, pool: asyncpg.Pool, url: str, origin: str) -> None:
        super().__init__()
        self._pool = pool
        self.url = redact_url(url)
        self._origin = origin
        self._feed = ChangeFeed(url, origin)

    @classmethod
    async def open(cls, url: str, *, migrate: bool = True) -> Self:
        url = normalise_url(url)
        origin = uuid.uuid4().hex
        # A startup parameter, not a SET: the pool's RESET ALL on release returns to it.
        pool = await asyncpg.create_pool(
            url,
            min_size=POOL_MIN,
            max_size=POOL_MAX,
            server_settings={"companion.origin": origin, "application_name": "companion"},
            reset=_keep_session,
        )
        store = cls(pool, url, origin)
        try:
            await store._check_schema_not_newer()
            if migrate:
                await store.migrate()
            await store._feed.start()
            if migrate:
                # A purge the last run recorded but did not finish: resumed in the background.
                await store.resume_purge()
        except BaseException:
            await store.close()
            raise
        return store

    async def close(self) -> None:
        await self._stop_purge()
        await self._feed.stop()
        await self._pool.close()

    @property
    def external_changes(self) -> int:
        """How many writes of other processes to memory a session caches were announced on the
        change feed (memory/store/postgres/changes.py, which says how late it may be)."""
        return self._feed.count

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[asyncpg.Connection]:
        async with self._pool.acquire() as con, con.transaction():
            yield con

    async def _execute(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        """One raw statement: for tests and benches that break things on purpose."""
        return list(await self._pool.fetch(sql, *args))

    # ---- migrations -------------------------------------------------------------------------

    async def _applied_versions(self, con: asyncpg.Connection) -> set[int]:
        await con.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL, applied_at text NOT NULL)"
        )
        return {row[0] for row in await con.fetch("SELECT version FROM schema_migrations")}

    async def _check_schema_not_newer(self) -> None:
        known = {version for version, _, _ in available_pg_migrations()}
        async with self._pool.acquire() as con:
            exists = await con.fetchval("SELECT to_regclass('schema_migrations') IS NOT NULL")
            applied = await self._applied_versions(con) if exists else set()
        unknown = sorted(applied - known)
        if unknown:
            raise SchemaTooNewError(
                f"{self.url} has schema migration(s) {unknown} that this version of the bot "
                f"does not know (it knows up to {max(known)}): upgrade the bot, or use a copy "
                "of the database made before the upgrade"
            )

    async def migrate(self) -> list[str]:
        """Apply the migrations not yet recorded, each in its own transaction with its record;
        an advisory lock keeps two processes starting together from racing."""
        done: list[str] = []
        async with self._pool.acquire() as con:
            await con.execute("SELECT pg_advisory_lock($1)", _MIGRATION_LOCK)
            try:
                applied = await self._applied_versions(con)
                for version, name, sql in available_pg_migrations():
                    if version in applied:
                        continue
                    async with con.transaction():
                        await con.execute(sql)
                        await con.execute(
                            "INSERT INTO schema_migrations (version, name, applied_at)"
                            " VALUES ($1, $2, $3)",
                            version,
                            name,
                            _now_text(),
                        )
                    log.info("applied migration %s", name)
                    done.append(name)
            finally:
                await con.execute("SELECT pg_advisory_unlock($1)", _MIGRATION_LOCK)
        return done

    async def schema_version(self) -> int:
        return int(await self._pool.fetchval("SELECT max(version) FROM schema_migrations") or 0)

    async def integrity_check(self) -> str:
        """ "ok", or what is wrong: every spoken turn indexed for search, the schema complete."""
        async with self._pool.acquire() as con:
            unindexed = await con.fetchval(
                "SELECT count(*) FROM turns WHERE role <> 'tool' AND search IS NULL"
            )
            version = await con.fetchval("SELECT max(version) FROM schema_migrations")
        problems = []
        if unindexed:
            problems.append(f"{unindexed} turn(s) missing from the search index")
        latest = max(v for v, _, _ in available_pg_migrations())
        if version != latest:
            problems.append(f"schema at version {version}, not {latest}")
        return "; ".join(problems) or "ok"

    async def rebuild_search_index(self) -> int | None:
        """Nothing to rebuild: each turn's tsvector is a column of its row, written with it."""
        return None

    # ---- purging what a deletion left (forget) ----------------------------------------------

    @staticmethod
    async def _record_pending_purge(con: asyncpg.Connection) -> None:
        """Inside the deleting transaction: the purge is owed from the moment the rows are gone,
        so a crash before it ends leaves the record, and the next start resumes it."""
        await con.execute("INSERT INTO pending_purges (requested_at) VALUES ($1)", _now_text())

    async def pending_purges(self) -> int:
        return int(await self._pool.fetchval("SELECT count(*) FROM pending_purges"))

    async def _purge_step(self) -> str:
        """VACUUM every table a deletion touches, then clear the records this pass covered.

        What this guarantees about bytes on disk, and what it does not:
        - VACUUM (plain, not FULL) removes the deleted rows' dead tuples from the tables and
          their index entries (the GIN index's posting lists included, its pending list
          flushed first) and marks the space free for reuse. It does not overwrite that space:
          the old bytes stay in the data files until new rows reuse the pages, or until the
          end of the file is truncated away (VACUUM truncates trailing empty pages).
        - The WAL keeps the deleted rows (and their earlier inserts) until its segments are
          recycled after later checkpoints; WAL archives, replicas and backups keep them for
          as long as they are kept. Nothing here reaches them.
        - VACUUM FULL would rewrite each table into new files and drop the old ones, but it
          holds an ACCESS EXCLUSIVE lock on the table meanwhile: every user's turns would wait
          for a forget. The purge runs plain VACUUM, which blocks no reader or writer, and does
          not use FULL; the unlinked files of a FULL would not be overwritten either.
        VACUUM cannot run inside a transaction block: it runs on a pooled connection outside
        any, and a VACUUM already running elsewhere just makes this one wait.
        """
        last = await self._pool.fetchval("SELECT max(id) FROM pending_purges")
        if last is None:
            return "done"
        async with self._pool.acquire() as con:
            # The names are the module's constants, never input.
            await con.execute(f"VACUUM (ANALYZE) {', '.join(PURGED_TABLES)}")
        await self._pool.execute("DELETE FROM pending_purges WHERE id <= $1", last)
        return "cleared"
