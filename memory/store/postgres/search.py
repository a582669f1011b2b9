"""Search over the turn log on PostgreSQL full-text search (migrations/postgres/0003, 0007).

Each spoken turn carries a tsvector of the project's folded words (memory/store/postgres/
terms.py) in a GIN index over (user_id, character_id, search): every query names the user and
the character, so it reads that thread's posting lists only, and returns nobody else's turns.
The candidates come back best first by an IDF-weighted ts_rank, the stand-in for FTS5's bm25;
memory/search/retrieval.py then scores them with the same Python BM25 as on SQLite.
"""

from __future__ import annotations

import asyncpg

from memory.models import Turn
from memory.search.terms import Term
from memory.store.postgres import rows
from memory.store.postgres.base import PostgresStoreBase
from memory.store.postgres.rows import ids_param
from memory.store.postgres.terms import any_query, term_query
from memory.store.protocols import ExchangeRow
from memory.store.sql import EXCHANGE_SPAN

# The thread of $1 (user), $2 (character) and $3 (scope, every scope when NULL), as `alias`.
_IN_THREAD = "{t}.user_id = $1 AND {t}.character_id = $2 AND ($3::text IS NULL OR {t}.scope = $3)"
# ts_rank's normalisation 1: divided by 1 + log(the turn's length), as bm25 discounts long
# documents.
_RANK_NORMALISATION = 1

_TERM_COUNTS = (
    "SELECT (SELECT count(*) FROM turns t WHERE "
    + _IN_THREAD.format(t="t")
    + " AND t.search @@ u.q::tsquery) FROM unnest($4::text[]) WITH ORDINALITY AS u(q, i)"
    " ORDER BY u.i"
)

_MATCHING = (
    "WITH q AS MATERIALIZED (SELECT u.q::tsquery AS query, (SELECT count(*) FROM turns t WHERE "
    + _IN_THREAD.format(t="t")
    + " AND t.search @@ u.q::tsquery) AS df FROM unnest($4::text[]) AS u(q)),"
    " n AS MATERIALIZED (SELECT count(*) AS total FROM turns t WHERE "
    + _IN_THREAD.format(t="t")
    + ") SELECT t.id FROM turns t WHERE "
    + _IN_THREAD.format(t="t")
    + " AND t.search @@ $5::tsquery ORDER BY (SELECT sum(ln(1 + (n.total - q.df + 0.5)"
    f" / (q.df + 0.5)) * ts_rank(t.search, q.query, {_RANK_NORMALISATION})) FROM q, n) DESC,"
    " t.id DESC LIMIT $6"
)

_EXCHANGES = (
    EXCHANGE_SPAN
    + " FROM unnest($4::bigint[]) AS hit(id) JOIN turns t ON t.id = hit.id WHERE "
    + _IN_THREAD.format(t="t")
    + ") SELECT span.lo, span.hi, (SELECT max(p.id) FROM turns p"
    "  WHERE p.conversation_id = span.cid AND p.id < span.lo) AS previous,"
    " m.id, m.conversation_id, m.role, m.text, m.created_at, m.platform_message_id,"
    " m.speaker_id, m.speaker_character, m.speaker_name"
    " FROM span JOIN turns m ON m.conversation_id = span.cid"
    " AND m.id >= span.lo AND m.id < coalesce(span.hi, 9223372036854775807)"
    " WHERE m.user_id = $1 AND m.character_id = $2 ORDER BY m.id"
)


class PgSearchMixin(PostgresStoreBase):
    async def search_term_counts(
        self, user_id: int, character_id: str, scope: str | None, terms: list[Term]
    ) -> list[int]:
        """In how many of the thread's turns each term occurs (the document frequency)."""
        if not terms:
            return []
        found = await self._pool.fetch(
            _TERM_COUNTS, user_id, character_id, scope, [term_query(t) for t in terms]
        )
        return [int(row[0]) for row in found]

    async def purge_search_index(self) -> None:
        """Run after deleting turns: their dead tuples and index entries are vacuumed in the
        background, recorded as owed first so a crash resumes it (`purge_settled` waits)."""
        async with self._pool.acquire() as con:
            await self._record_pending_purge(con)
        self._start_purge()

    async def thread_text_stats(
        self, user_id: int, character_id: str, scope: str | None
    ) -> tuple[int, int]:
        """(turns, characters) of the thread's user and assistant turns; all scopes if None."""
        row = await self._pool.fetchrow(
            "SELECT count(*), coalesce(sum(length(text)), 0) FROM turns t WHERE "
            + _IN_THREAD.format(t="t")
            + " AND role <> 'tool'",
            user_id,
            character_id,
            scope,
        )
        return (int(row[0]), int(row[1])) if row else (0, 0)

    async def search_exchanges(
        self, user_id: int, character_id: str, scope: str | None, terms: list[Term], limit: int
    ) -> tuple[list[int], list[ExchangeRow]]:
        """The thread's turns holding any of `terms` (best first, at most `limit`), and every
        turn of the exchanges that hold them, as `exchange_turns` gives them."""
        if not terms:
            return [], []
        async with self._pool.acquire() as con, con.transaction(readonly=True):
            found = await con.fetch(
                _MATCHING,
                user_id,
                character_id,
                scope,
                [term_query(t) for t in terms],
                any_query(terms),
                limit,
            )
            ids = [int(row[0]) for row in found]
            exchanges = (
                await con.fetch(_EXCHANGES, user_id, character_id, scope, ids) if ids else []
            )
        return ids, [_exchange_row(row) for row in exchanges]

    async def exchange_turns(
        self, user_id: int, character_id: str, scope: str | None, turn_ids: list[int]
    ) -> list[ExchangeRow]:
        """(first turn id, next exchange's first turn id, previous exchange's last turn id, turn)
        for every turn of the exchanges that hold `turn_ids`. An exchange runs from a user turn
        to the next user turn of the same conversation; turns before a conversation's first
        user turn form one of their own."""
        found = await self._pool.fetch(
            _EXCHANGES, user_id, character_id, scope, ids_param(turn_ids)
        )
        return [_exchange_row(row) for row in found]

    async def turns_by_ids(self, user_id: int, character_id: str, ids: list[int]) -> list[Turn]:
        """The turns among `ids` that belong to this user with this character; others are
        absent. In the order of `ids`."""
        found = await self._pool.fetch(
            # The speaker's columns too: a scene's line is read back voiced.
            "SELECT t.id, t.conversation_id, t.role, t.text, t.created_at, t.platform_message_id,"
            " t.speaker_id, t.speaker_character, t.speaker_name"
            " FROM unnest($1::bigint[]) WITH ORDINALITY AS hit(id, i)"
            " JOIN turns t ON t.id = hit.id WHERE t.user_id = $2 AND t.character_id = $3"
            " ORDER BY hit.i",
            ids_param(ids),
            user_id,
            character_id,
        )
        return [rows.turn(row) for row in found]


def _exchange_row(row: asyncpg.Record) -> ExchangeRow:
    return (row["lo"], row["hi"], row["previous"], rows.turn(row))
