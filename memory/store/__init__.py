"""The one owner of the database: every SQL statement of the project lives in this package,
in one folder per backend. Services depend on the interfaces of `protocols`; `open_store`,
called by the composition root and the admin CLI, is the one place that picks a backend."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from memory.store.errors import ConversationGone, SchemaTooNewError, StoreUnavailable
from memory.store.inbox import Inbox
from memory.store.protocols import MemoryStore

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres(target: str | Path) -> bool:
    return isinstance(target, str) and target.startswith(POSTGRES_SCHEMES)


def public_name(target: str | Path) -> str:
    """The database as logs and messages may name it: a file path, or a server's host, port
    and database, never the URL's user or password."""
    if not is_postgres(target):
        return str(target)
    url = urlsplit(str(target))
    return f"postgresql://{url.hostname or 'localhost'}:{url.port or 5432}{url.path}"


async def open_store(target: str | Path, *, migrate: bool = True) -> MemoryStore:
    """The store at `target`: a PostgreSQL URL, or a SQLite file (a path, or `sqlite:///path`).
    Migrations are applied unless `migrate` is False; a schema newer than the code is refused."""
    if is_postgres(target):
        # Imported here: the SQLite default must not need the PostgreSQL driver loaded.
        from memory.store.postgres import PostgresStore, connection_problem

        try:
            return await PostgresStore.open(str(target), migrate=migrate)
        except Exception as error:
            problem = connection_problem(str(target), error)
            if problem is None:
                raise
            raise StoreUnavailable(problem) from error
    from memory.store.sqlite import SqliteStore

    path = Path(str(target).removeprefix("sqlite:///")) if isinstance(target, str) else target
    return await SqliteStore.open(path, migrate=migrate)


def inbox_over(url: str) -> Inbox:
    """The durable inbox of the PostgreSQL database at `url` (migrated by `open_store`), its
    pool not yet connected (`await inbox.connect()`); only PostgreSQL has one."""
    if not is_postgres(url):
        raise ValueError("the inbox needs PostgreSQL: set DATABASE_URL=postgresql://...")
    from memory.store.postgres.inbox import PostgresInbox

    return PostgresInbox.over(url)


async def open_inbox(url: str) -> Inbox:
    inbox = inbox_over(url)
    await inbox.connect()
    return inbox


__all__ = [
    "ConversationGone",
    "Inbox",
    "MemoryStore",
    "SchemaTooNewError",
    "StoreUnavailable",
    "inbox_over",
    "is_postgres",
    "open_inbox",
    "open_store",
    "public_name",
]
