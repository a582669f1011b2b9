"""Whole tables in and out, for `companion db copy` (memory/store/copy.py)."""

from __future__ import annotations

from typing import Any

from memory.store.copy import COPY_TABLES, checked_table, page_query
from memory.store.sql import numbered
from memory.store.sqlite.base import StoreBase, on_db_thread


class CopyMixin(StoreBase):
    async def copy_tables(self) -> list[str]:
        """Every data table, parents before children (the migrations' record, the purge
        records and the search index excepted: the index is rebuilt by its triggers)."""
        return list(COPY_TABLES)

    @on_db_thread
    def count_rows(self, table: str) -> int:
        checked_table(table)  # the name is one of ours before it is put in the SQL
        row = self._one(f"SELECT count(*) FROM {table}")
        return int(row[0]) if row else 0

    @on_db_thread
    def read_rows(self, table: str, after_id: int, limit: int) -> list[dict[str, Any]]:
        """`limit` rows or so after `after_id` (memory/store/copy.py's `page_query`)."""
        query = page_query(table, after_id, limit)
        if query is None:
            return []
        columns, _ = checked_table(table)
        found = self._all(numbered(query[0]), query[1])
        return [dict(zip(columns, tuple(row), strict=True)) for row in found]

    @on_db_thread
    def write_rows(self, table: str, rows: list[dict[str, Any]]) -> None:
        """Insert `rows` as they are, ids included, in one transaction; the search index's
        triggers index the turns as they land. AUTOINCREMENT remembers the largest id."""
        columns, _ = checked_table(table)
        if not rows:
            return
        marks = ", ".join("?" for _ in columns)
        with self._transaction() as db:
            db.executemany(
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})",
                [tuple(row[name] for name in columns) for row in rows],
            )

    async def finish_copy(self) -> None:
        """Nothing to move: SQLite's AUTOINCREMENT already keeps the largest id inserted."""
