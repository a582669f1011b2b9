"""Search over the turn log (FTS5 specifics live in memory/search/terms.py)."""

from __future__ import annotations

import json

from memory.models import Turn
from memory.search.terms import Term
from memory.store.protocols import ExchangeRow
from memory.store.sql import EXCHANGE_SPAN
from memory.store.sqlite import fts
from memory.store.sqlite.base import StoreBase, on_db_thread


class SearchMixin(StoreBase):
    # ---- search over the turn log (FTS5 specifics live in fts.py beside this module) ------

    @on_db_thread
    def search_term_counts(
        self, user_id: int, character_id: str, scope: str | None, terms: list[Term]
    ) -> list[int]:
        return fts.term_counts(self._con, user_id, character_id, scope, terms)

    async def purge_search_index(self) -> None:
        """Run after deleting turns: their words leave the index segments, and the WAL (which
        still holds the old pages) is checkpointed and truncated, in the background and
        resumed after a crash (`purge_settled` waits for it)."""
        await self._run(self._record_pending_purge)
        self._start_purge()

    @on_db_thread
    def thread_text_stats(
        self, user_id: int, character_id: str, scope: str | None
    ) -> tuple[int, int]:
        """(turns, characters) of the thread's user and assistant turns; all scopes if None."""
        row = self._one(
            "SELECT count(*), total(length(text)) FROM turns WHERE user_id = ?"
            " AND character_id = ? AND (?3 IS NULL OR scope = ?3) AND role != 'tool'",
            (user_id, character_id, scope),
        )
        return (int(row[0]), int(row[1])) if row else (0, 0)

    @on_db_thread
    def search_exchanges(
        self, user_id: int, character_id: str, scope: str | None, terms: list[Term], limit: int
    ) -> tuple[list[int], list[ExchangeRow]]:
        """The thread's turns holding any of `terms` (best BM25 first, at most `limit`), and
        every turn of the exchanges that hold them, as `exchange_turns` gives them."""
        ids = fts.matching_turns(self._con, user_id, character_id, scope, terms, limit)
        return ids, self._exchange_turns(user_id, character_id, scope, ids) if ids else []

    @on_db_thread
    def exchange_turns(
        self, user_id: int, character_id: str, scope: str | None, turn_ids: list[int]
    ) -> list[ExchangeRow]:
        """(first turn id, next exchange's first turn id, previous exchange's last turn id, turn)
        for every turn of the exchanges that hold `turn_ids`. An exchange runs from a user turn
        to the next user turn of the same conversation; turns before a conversation's first
        user turn form one of their own."""
        return self._exchange_turns(user_id, character_id, scope, turn_ids)

    def _exchange_turns(
        self, user_id: int, character_id: str, scope: str | None, turn_ids: list[int]
    ) -> list[ExchangeRow]:
        cursor = self._con.execute(
            EXCHANGE_SPAN
            # CROSS JOIN keeps SQLite from scanning the whole thread by user_id: seek by id.
            + " FROM json_each(?1) AS hit CROSS JOIN turns t ON t.id = hit.value"
            " WHERE t.user_id = ?2 AND t.character_id = ?3 AND (?4 IS NULL OR t.scope = ?4))"
            " SELECT span.lo, span.hi, (SELECT max(p.id) FROM turns p"
            "  WHERE p.conversation_id = span.cid AND p.id < span.lo) AS previous, m.*"
            " FROM span JOIN turns m ON m.conversation_id = span.cid"
            " AND m.id >= span.lo AND m.id < coalesce(span.hi, 9223372036854775807)"
            " WHERE m.user_id = ?2 AND m.character_id = ?3 ORDER BY m.id",
            (json.dumps(turn_ids), user_id, character_id, scope),
        )
        return [(row[0], row[1], row[2], self._turn(row)) for row in cursor.fetchall()]

    @on_db_thread
    def turns_by_ids(self, user_id: int, character_id: str, ids: list[int]) -> list[Turn]:
        """The turns among `ids` that belong to this user with this character; others are absent."""
        cursor = self._con.execute(
            "SELECT t.* FROM json_each(?) AS hit CROSS JOIN turns t ON t.id = hit.value"
            " WHERE t.user_id = ? AND t.character_id = ?",
            (json.dumps(ids), user_id, character_id),
        )
        return [self._turn(row) for row in cursor.fetchall()]
