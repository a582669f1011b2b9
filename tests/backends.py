"""Which database the suite runs on: a SQLite file by default; under `make test-postgres`
(COMPANION_TEST_DATABASE_URL set by tests/pg_server.py) a fresh PostgreSQL database per test,
copied from a template that already holds the migrations."""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
from urllib.parse import urlsplit, urlunsplit

TEST_DATABASE_URL = "COMPANION_TEST_DATABASE_URL"
TEMPLATE = "companion_template"


def postgres_server() -> str | None:
    """The throwaway server's URL when the suite runs on PostgreSQL, else None."""
    return os.environ.get(TEST_DATABASE_URL) or None


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


class PostgresDatabases:
    """Hands out empty, migrated databases on the test server, one per test."""

    def __init__(self, server_url: str) -> None:
        self._server = server_url
        self._names = itertools.count()
        self._prefix = f"t{os.getpid()}_"
        self._template_ready = False
        self._lock = threading.Lock()

    def fresh(self) -> str:
        """The URL of a new database (run from synchronous fixtures, outside any loop)."""
        with self._lock:
            if not self._template_ready:
                _run(self._make_template())
                self._template_ready = True
            name = f"{self._prefix}{next(self._names)}"
            _run(self._execute(f'CREATE DATABASE "{name}" TEMPLATE {TEMPLATE}'))
        return with_database(self._server, name)

    async def _execute(self, sql: str) -> None:
        import asyncpg  # only the PostgreSQL run needs the driver

        connection = await asyncpg.connect(self._server)
        try:
            await connection.execute(sql)
        finally:
            await connection.close()

    async def _make_template(self) -> None:
        from memory.store import open_store

        await self._execute(f"DROP DATABASE IF EXISTS {TEMPLATE}")
        await self._execute(f"CREATE DATABASE {TEMPLATE}")
        store = await open_store(with_database(self._server, TEMPLATE))
        await store.close()


def _run(coroutine: object) -> None:
    """Run a coroutine to completion on a thread of its own: the caller may be inside a loop."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            asyncio.run(coroutine)  # type: ignore[arg-type]
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
