"""The database a bench runs on: a temporary SQLite file, or a fresh database on PostgreSQL
(the server at --database-url, or else a throwaway one started here, as `make test-postgres`
starts it: tests/pg_server.py, PostgreSQL 15's server binaries)."""

from __future__ import annotations

import argparse
import itertools
import os
import tempfile
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg

BACKENDS = ("sqlite", "postgres")
_NAMES = itertools.count(1)


def add_backend_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default="sqlite",
        help="postgres: run on SQLite and on PostgreSQL, figures side by side",
    )
    parser.add_argument(
        "--database-url",
        help="an existing PostgreSQL server (postgresql://user@host:port); default: a "
        "throwaway server started for the run",
    )


class Databases:
    """Hands out empty databases of one backend for one bench run."""

    def __init__(self, backend: str, folder: Path, server: str | None) -> None:
        self.backend = backend
        self._folder = folder
        self._server = server

    async def fresh(self, name: str, template: str | None = None) -> str | Path:
        """A new empty database (or a copy of `template`, a database made by this object)."""
        if self.backend == "sqlite":
            return self._folder / f"{name}-{next(_NAMES)}.db"
        assert self._server is not None
        database = f"bench_{os.getpid()}_{name}_{next(_NAMES)}"
        admin = await asyncpg.connect(f"{self._server}/postgres")
        try:
            # Both names are ours (a counter and the bench's own labels), never input.
            copy = f" TEMPLATE {urlsplit(template).path.lstrip('/')}" if template else ""
            await admin.execute(f"CREATE DATABASE {database}{copy}")
        finally:
            await admin.close()
        return f"{self._server}/{database}"


@asynccontextmanager
async def databases(backend: str, server_url: str | None = None) -> AsyncIterator[Databases]:
    async with AsyncExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-")))
        server = None
        if backend == "postgres":
            if server_url:
                server = urlunsplit(urlsplit(server_url)._replace(path=""))
            else:
                from tests.pg_server import running_server_async  # the throwaway server

                server = await stack.enter_async_context(running_server_async())
        yield Databases(backend, folder, server)
