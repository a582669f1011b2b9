"""Table by table, row by row, between databases (`companion db copy`).

Rows are read and written as the SQLite store's columns hold them (ISO text for times, JSON text
for lists, integers for flags), so they move between the two backends unchanged. The turn's
search vector is not a column of the copy: it is computed again from the text on write.
`pending_purges` is not copied either: it records bytes owed by the source's own files.
"""

from __future__ import annotations

from typing import Any

from memory.store.copy import COPY_TABLES, IDENTITY_TABLES, checked_table, page_query
from memory.store.postgres.base import PostgresStoreBase
from memory.store.postgres.terms import search_vector


class PgCopyMixin(PostgresStoreBase):
    async def copy_tables(self) -> list[str]:
        """Every data table, parents before children (schema_migrations and the purge
        records excepted)."""
        return list(COPY_TABLES)

    async def count_rows(self, table: str) -> int:
        checked_table(table)  # the name is one of ours before it is put in the SQL
        return int(await self._pool.fetchval(f"SELECT count(*) FROM {table}"))

    async def read_rows(self, table: str, after_id: int, limit: int) -> list[dict[str, Any]]:
        """`limit` rows or so after `after_id` (memory/store/copy.py's `page_query`)."""
        query = page_query(table, after_id, limit)
        if query is None:
            return []
        return [dict(row) for row in await self._pool.fetch(query[0], *query[1])]

    async def write_rows(self, table: str, rows: list[dict[str, Any]]) -> None:
        """Insert `rows` as they are, ids included, in one transaction (a turn's search vector
        computed from its text)."""
        columns, _ = checked_table(table)
        if not rows:
            return
        names = list(columns)
        if table == "turns":
            names.append("search")
        marks = ", ".join(
            f"${i}::tsvector" if name == "search" else f"${i}"
            for i, name in enumerate(names, start=1)
        )
        values = [_row_values(table, columns, row) for row in rows]
        async with self._transaction() as con:
            await con.executemany(
                f"INSERT INTO {table} ({', '.join(names)}) VALUES ({marks})", values
            )

    async def finish_copy(self) -> None:
        """Move every id sequence past the largest id copied, so new rows never reuse one."""
        async with self._transaction() as con:
            for table in IDENTITY_TABLES:
                await con.execute(
                    "SELECT setval(pg_get_serial_sequence($1, 'id'), greatest(max(id), 1),"
                    f" max(id) IS NOT NULL) FROM {table}",
                    table,
                )


def _row_values(table: str, columns: tuple[str, ...], row: dict[str, Any]) -> tuple[Any, ...]:
    values = [row[name] for name in columns]
    if table == "llm_usage":  # SQLite may hand a whole number back for a REAL
        index = columns.index("latency_ms")
        values[index] = float(values[index])
    if table == "budget_counters":  # as llm_usage's: REALs may come back whole
        for name in ("spent", "reserved"):
            values[columns.index(name)] = float(values[columns.index(name)])
    if table == "turns":
        spoken = row["role"] != "tool"
        values.append(search_vector(row["text"]) if spoken else None)
    return tuple(values)
