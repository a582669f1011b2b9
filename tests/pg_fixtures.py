"""Fixtures for tests of the PostgreSQL store: one throwaway server per session, a migrated
template database, and a fresh copy of it per test (CREATE DATABASE ... TEMPLATE is fast)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from memory.store import Store
from memory.store.postgres import PostgresStore
from tests.pg_server import MISSING, binaries, running_server

TEMPLATE = "companion_template"
_NAMES = itertools.count(1)

needs_postgres = pytest.mark.skipif(binaries() is None, reason=MISSING)


async def _make_template(base: str) -> None:
    admin = await asyncpg.connect(f"{base}/postgres")
    try:
        await admin.execute(f"CREATE DATABASE {TEMPLATE}")
    finally:
        await admin.close()
    store = await PostgresStore.open(f"{base}/{TEMPLATE}")
    await store.close()


@pytest.fixture(scope="session")
def pg_base() -> Iterator[str]:
    """The server's base URL, with the template database migrated."""
    if binaries() is None:
        pytest.skip(MISSING)
    with running_server() as base:
        # On a thread of its own: the fixture may be first asked for inside a running loop.
        with ThreadPoolExecutor(1) as worker:
            worker.submit(asyncio.run, _make_template(base)).result()
        yield base


async def fresh_database(base: str) -> str:
    """The URL of a new database holding every migration and no rows."""
    name = f"test_{next(_NAMES)}"
    admin = await asyncpg.connect(f"{base}/postgres")
    try:
        # The name is ours (a counter), never input.
        await admin.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
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
    if request.param == "sqlite":
        store: Any = await Store.open(tmp_path / "x.db")
    else:
        base = request.getfixturevalue("pg_base")
        store = await PostgresStore.open(await fresh_database(base))
    store.purge_retry_seconds = 0.01
    try:
        yield store
    finally:
        await store.close()
