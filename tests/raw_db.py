"""Read the test's database directly, whichever backend the suite runs on.

`raw_database(settings)` gives what `sqlite3.connect(path)` gives on SQLite (a connection
whose `execute(sql, params)` returns rows as tuples) and the same on PostgreSQL, where `?`
placeholders become `$1, $2, ...`. For checks of what was stored, never for the engine's work.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

import asyncpg

from memory.store import is_postgres
from memory.store.copy import COPY_TABLES
from tests.pg_fixtures import run_aside

_PLACEHOLDER = re.compile(r"\?")


class HasDatabase(Protocol):
    @property
    def database_target(self) -> str | Path: ...


class Rows:
    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self._rows = rows

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self._rows

    def fetchone(self) -> tuple[Any, ...] | None:
        return self._rows[0] if self._rows else None

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self._rows)


class PostgresRaw:
    """sqlite3's connection API over one PostgreSQL database: each statement on its own."""

    def __init__(self, url: str) -> None:
        self._url = url

    def __enter__(self) -> PostgresRaw:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Rows:
        numbered = iter(range(1, 1000))
        translated = _PLACEHOLDER.sub(lambda _: f"${next(numbered)}", sql)
        return Rows(run_aside(self._fetch(translated, tuple(params))))

    async def _fetch(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        connection = await asyncpg.connect(self._url)
        try:
            return [tuple(row) for row in await connection.fetch(sql, *params)]
        finally:
            await connection.close()


def raw_database(where: HasDatabase | str | Path) -> sqlite3.Connection | PostgresRaw:
    """A raw connection to the test's database (settings, or a target path or URL)."""
    target = where if isinstance(where, str | Path) else where.database_target
    if is_postgres(target):
        return PostgresRaw(str(target))
    return sqlite3.connect(target)


def traces_of(where: HasDatabase, canary: str) -> list[str]:
    """Where `canary` is still stored. On SQLite, byte for byte: the file and its WAL (a forget
    guarantees both). On PostgreSQL, every row of every table read as text (docs/privacy.md says
    why the bytes of dead rows are not a guarantee there: VACUUM frees their space, it does not
    overwrite it)."""
    target = where.database_target
    if not is_postgres(target):
        files = [Path(target), Path(f"{target}-wal")]
        needle = canary.encode()
        return [f.name for f in files if f.exists() and needle.lower() in f.read_bytes().lower()]
    with raw_database(target) as raw:
        return [
            table
            for table in COPY_TABLES
            if raw.execute(
                f"SELECT 1 FROM {table} t WHERE t::text ILIKE ?", (f"%{canary}%",)
            ).fetchall()
        ]


class HasDatabaseSettings(HasDatabase, Protocol):
    @property
    def database_path(self) -> Path: ...


def database_env(settings: HasDatabaseSettings) -> dict[str, str]:
    """The variables that point a `companion` subprocess at the test's database."""
    env = {"DATABASE_PATH": str(settings.database_path)}
    if is_postgres(settings.database_target):
        env["DATABASE_URL"] = str(settings.database_target)
    return env


def store_facts_directly(
    where: HasDatabase, user_id: int, character_id: str, rows: Sequence[tuple[str, str]], stamp: str
) -> None:
    """(key, value) rows written straight into the facts table, around the engine and its gate
    (as a row from before the gate would be): stated, learned in private, never ageing."""
    with raw_database(where) as raw:
        for key, value in rows:
            raw.execute(
                "INSERT INTO facts (user_id, character_id, kind, key, value, origin, scope,"
                " evidence, lifetime, created_at, confirmed_at, status) VALUES"
                " (?, ?, 'semantic', ?, ?, 'stated', 'dm', '[]', 'never', ?, ?, 'active')",
                (user_id, character_id, key, value, stamp, stamp),
            )
