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
