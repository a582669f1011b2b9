"""PostgreSQL for the tests: one throwaway server per session (the one `make test-postgres`
started, named by COMPANION_TEST_DATABASE_URL, or else one started here), a migrated template
database, and a fresh copy of it per test (CREATE DATABASE ... TEMPLATE is fast).

Under pytest-xdist every worker is a session of its own: on the shared server each one
migrates a template of its own (CREATE DATABASE refuses a template another session is copying
or rebuilding) and names its databases after its process id, so workers never meet."""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from memory.store import MemoryStore
from memory.store.postgres import PostgresStore
from memory.store.sqlite import SqliteStore
from tests.pg_server import MISSING, URL_VARIABLE, binaries, running_server

_NAMES = itertools.count(1)
_PREFIX = f"test_{os.getpid()}_"
_templates: set[str] = set()
_template_lock = threading.Lock()
T = TypeVar("T")

needs_postgres = pytest.mark.skipif(
    binaries() is None and not os.environ.get(URL_VARIABLE), reason=MISSING
)


def suite_server() -> str | None:
    """The base URL (no database) of the server the whole suite runs on, under
    `make test-postgres`; None when the suite runs on SQLite."""
    url = os.environ.get(URL_VARIABLE)
    if not url:
        return None
    return urlunsplit(urlsplit(url)._replace(path=""))


def run_aside(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on a thread and loop of its own: the caller may be inside a loop."""
    with ThreadPoolExecutor(1) as worker:
        return worker.submit(asyncio.run, coroutine).result()


def template_name() -> str:
    """This process's template database (one per xdist worker on a shared server)."""
    return f"companion_template_{os.getpid()}"


async def _make_template(base: str) -> None:
    template = template_name()
    admin = await asyncpg.connect(f"{base}/postgres")
    try:
        await admin.execute(f"DROP DATABASE IF EXISTS {template}")
        await admin.execute(f"CREATE DATABASE {template}")
    finally:
        await admin.close()
    store = await PostgresStore.open(f"{base}/{template}")
    await store.close()


def ensure_template(base: str) -> None:
    with _template_lock:
        if base not in _templates:
            run_aside(_make_template(base))
            _templates.add(base)


@pytest.fixture(scope="session")
def pg_base() -> Iterator[str]:
    """The server's base URL, with the template database migrated."""
    shared = suite_server()
    if shared is not None:
        ensure_template(shared)
        yield shared
        return
    if binaries() is None:
        pytest.skip(MISSING)
    with running_server() as base:
        ensure_template(base)
        yield base


async def fresh_database(base: str) -> str:
    """The URL of a new database holding every migration and no rows."""
    name = f"{_PREFIX}{next(_NAMES)}"
    admin = await asyncpg.connect(f"{base}/postgres")
    try:
        # The names are ours (a process id, a counter), never input.
        await admin.execute(f"CREATE DATABASE {name} TEMPLATE {template_name()}")
    finally:
        await admin.close()
    return f"{base}/{name}"


@pytest.fixture
async def pg_url(pg_base: str) -> str:
    return await fresh_database(pg_base)


@pytest.fixture(params=["sqlite", "postgres"])
async def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """The SQLite store and the PostgreSQL store, each fresh: a test using it runs twice and
    proves the two backends agree."""
    store: MemoryStore
    if request.param == "sqlite":
        store = await SqliteStore.open(tmp_path / "x.db")
    else:
        base = request.getfixturevalue("pg_base")
        store = await PostgresStore.open(await fresh_database(base))
    store.purge_retry_seconds = 0.01  # type: ignore[attr-defined]
    try:
        yield store
    finally:
        await store.close()
