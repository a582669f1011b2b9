"""Canon proposals on PostgreSQL (migration 0027): memory/store/canon.py says what they are."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import asyncpg

from memory.models import CanonEvidenceLine, CanonProposal, Conversation, NewCanonProposal
from memory.store.canon import PENDING, checked_decision, is_row_id
from memory.store.postgres.base import PostgresStoreBase
from memory.store.postgres.rows import conversation, dt, ids_param, ts

_SELECT = (
    "SELECT p.*, coalesce((SELECT array_agg(turn_id ORDER BY turn_id) FROM canon_evidence"
    " WHERE proposal_id = p.id), '{}') AS evidence FROM canon_proposals p"
)

# The SQLite twin's _CITED: $1 person, $2 character or NULL, $3 scene or NULL, $4 every own
# scope, $5 the one own scope.
_CITED = (
    "SELECT e.proposal_id, e.turn_id FROM canon_evidence e"
    " JOIN canon_proposals p ON p.id = e.proposal_id"
    " WHERE ($2::text IS NULL OR p.character_id = $2) AND ("
    " (e.thread_id = $1 AND ($4::boolean OR e.scope = $5::text))"
    " OR e.conversation_id IN (SELECT conversation_id FROM turns WHERE speaker_id = $1"
    " AND scope LIKE 'scene:%' AND ($3::text IS NULL OR scope = $3)))"
)


async def _insert_proposals(
    con: asyncpg.Connection,
    character_id: str,
    proposals: Sequence[NewCanonProposal],
    now: datetime,
) -> list[int]:
    """Inside the caller's transaction: the SQLite twin's `_insert_proposals`."""
    stored: list[int] = []
    for proposal in proposals:
        turns = await con.fetch(
            "SELECT id, user_id, scope, conversation_id FROM turns"
            " WHERE id = ANY($1::bigint[]) AND role = 'assistant' AND character_id = $2"
            " ORDER BY id",
            ids_param(list(proposal.evidence_turn_ids)),
            character_id,
        )
        if not turns:
            continue
        proposal_id = await con.fetchval(
            "INSERT INTO canon_proposals (character_id, text, contradicts, status, created_at)"
            " VALUES ($1, $2, $3, 'pending', $4) RETURNING id",
            character_id,
            proposal.text,
            proposal.contradicts,
            ts(now),
        )
        await con.executemany(
            "INSERT INTO canon_evidence (proposal_id, turn_id, thread_id, scope,"
            " conversation_id) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
            [(proposal_id, *tuple(turn)) for turn in turns],
        )
        stored.append(int(proposal_id))
    return stored


def proposal_of(row: asyncpg.Record) -> CanonProposal:
    return CanonProposal(
        id=row["id"],
        character_id=row["character_id"],
        text=row["text"],
        evidence_turn_ids=tuple(row["evidence"]),
        contradicts=row["contradicts"],
        status=row["status"],
        created_at=datetime.fromisoformat(row["created_at"]),
        decided_at=dt(row["decided_at"]),
    )


async def drop_canon_citing(
    con: asyncpg.Connection,
    person_id: int,
    character_id: str | None,
    scene_scope: str | None,
    *,
    every_own: bool = False,
    own_scope: str | None = None,
) -> int:
    """The SQLite twin's `_drop_canon_citing`, inside the caller's transaction."""
    cited = await con.fetch(_CITED, person_id, character_id, scene_scope, every_own, own_scope)
    if not cited:
        return 0
    await con.executemany(
        "DELETE FROM canon_evidence WHERE proposal_id = $1 AND turn_id = $2",
        [(row[0], row[1]) for row in cited],
    )
    status = await con.execute(
        "DELETE FROM canon_proposals WHERE status = 'pending' AND id = ANY($1::bigint[])",
        sorted({row[0] for row in cited}),
    )
    return int(str(status).split()[-1])


class PgCanonMixin(PostgresStoreBase):
    async def add_canon_proposals(
        self, character_id: str, proposals: Sequence[NewCanonProposal], now: datetime
    ) -> list[int]:
        async with self._transaction() as con:
            return await _insert_proposals(con, character_id, proposals, now)

    async def conversations_pending_canon(self) -> list[Conversation]:
        found = await self._pool.fetch(
            "SELECT c.* FROM conversations c WHERE c.ended_at IS NOT NULL"
            " AND (c.scope = 'dm' OR c.scope LIKE 'scene:%')"
            " AND NOT EXISTS (SELECT 1 FROM canon_runs r WHERE r.conversation_id = c.id)"
            " ORDER BY c.id"
        )
        return [conversation(row) for row in found]

    async def canon_run_status(self, conversation_id: int) -> str | None:
        if not is_row_id(conversation_id):
            return None
        found = await self._pool.fetchval(
            "SELECT status FROM canon_runs WHERE conversation_id = $1", conversation_id
        )
        return None if found is None else str(found)

    async def save_canon_run(
        self,
        conversation_id: int,
        character_id: str,
        proposals: Sequence[NewCanonProposal],
        status: str,
        now: datetime,
        person_lines: Sequence[int] = (),
    ) -> list[int] | None:
        wanted = sorted(set(person_lines))
        async with self._transaction() as con:
            found = await con.fetchval(
                "SELECT count(*) FROM turns WHERE id = ANY($1::bigint[])", ids_param(wanted)
            )
            if int(found) != len(wanted):
                return None
            marked = await con.execute(
                "INSERT INTO canon_runs (conversation_id, character_id, status, created_at)"
                " SELECT id, $1, $2, $3 FROM conversations WHERE id = $4"
                " ON CONFLICT (conversation_id) DO NOTHING",
                character_id,
                status,
                ts(now),
                conversation_id,
            )
            if not str(marked).endswith(" 1"):
                return None
            return await _insert_proposals(con, character_id, proposals, now)

    async def list_canon_proposals(
        self, character_id: str | None = None, status: str = PENDING
    ) -> list[CanonProposal]:
        found = await self._pool.fetch(
            _SELECT + " WHERE ($1::text IS NULL OR p.character_id = $1) AND p.status = $2"
            " ORDER BY p.id",
            character_id,
            status,
        )
        return [proposal_of(row) for row in found]

    async def get_canon_proposal(self, proposal_id: int) -> CanonProposal | None:
        if not is_row_id(proposal_id):
            return None
        row = await self._pool.fetchrow(_SELECT + " WHERE p.id = $1", proposal_id)
        return proposal_of(row) if row else None

    async def canon_evidence(self, proposal_id: int) -> list[CanonEvidenceLine]:
        if not is_row_id(proposal_id):
            return []
        found = await self._pool.fetch(
            "SELECT t.id, t.created_at, t.text FROM canon_evidence e"
            " JOIN turns t ON t.id = e.turn_id WHERE e.proposal_id = $1 ORDER BY t.id",
            proposal_id,
        )
        return [CanonEvidenceLine(r[0], datetime.fromisoformat(r[1]), r[2]) for r in found]

    async def decide_canon_proposal(self, proposal_id: int, status: str, now: datetime) -> bool:
        checked_decision(status)
        if not is_row_id(proposal_id):
            return False
        status_text = await self._pool.execute(
            "UPDATE canon_proposals SET status = $1, decided_at = $2"
            " WHERE id = $3 AND status = 'pending'",
            status,
            ts(now),
            proposal_id,
        )
        return str(status_text).endswith(" 1")

    async def forget_canon_evidence(self, person_id: int, character_id: str | None) -> int:
        async with self._transaction() as con:
            dropped = await drop_canon_citing(con, person_id, character_id, None, every_own=True)
            if dropped:
                await self._record_pending_purge(con)
        if dropped:
            self._start_purge()
        return dropped


__all__ = ["PgCanonMixin", "drop_canon_citing"]
