"""Canon proposals on SQLite (migration 0027): memory/store/canon.py says what they are."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime

from memory.models import CanonEvidenceLine, CanonProposal, Conversation, NewCanonProposal
from memory.store.canon import PENDING, checked_decision, is_row_id
from memory.store.records import dt
from memory.store.records import ts as _ts
from memory.store.sqlite.base import StoreBase, on_db_thread

# The proposals with their evidence ids, as one row each.
_SELECT = (
    "SELECT p.*, (SELECT json_group_array(turn_id) FROM (SELECT turn_id FROM canon_evidence"
    " WHERE proposal_id = p.id ORDER BY turn_id)) AS evidence FROM canon_proposals p"
)

# The evidence rows a person's forget reaches: on a turn of their own threads (any scope when
# ?4 is 1, else only scope ?5), or of a scene conversation they spoke in (scene ?3, or any).
# ?1 person, ?2 character or NULL for every one.
_CITED = (
    "SELECT e.proposal_id, e.turn_id FROM canon_evidence e"
    " JOIN canon_proposals p ON p.id = e.proposal_id"
    " WHERE (?2 IS NULL OR p.character_id = ?2) AND ("
    " (e.thread_id = ?1 AND (?4 = 1 OR e.scope = ?5))"
    " OR e.conversation_id IN (SELECT conversation_id FROM turns WHERE speaker_id = ?1"
    " AND scope LIKE 'scene:%' AND (?3 IS NULL OR scope = ?3)))"
)


def proposal_of(row: sqlite3.Row) -> CanonProposal:
    return CanonProposal(
        id=row["id"],
        character_id=row["character_id"],
        text=row["text"],
        evidence_turn_ids=tuple(json.loads(row["evidence"])),
        contradicts=row["contradicts"],
        status=row["status"],
        created_at=datetime.fromisoformat(row["created_at"]),
        decided_at=dt(row["decided_at"]),
    )


class CanonMixin(StoreBase):
    @on_db_thread
    def add_canon_proposals(
        self, character_id: str, proposals: Sequence[NewCanonProposal], now: datetime
    ) -> list[int]:
        with self._transaction():
            return self._insert_proposals(character_id, proposals, now)

    def _insert_proposals(
        self, character_id: str, proposals: Sequence[NewCanonProposal], now: datetime
    ) -> list[int]:
        """Inside the caller's transaction."""
        stored: list[int] = []
        for proposal in proposals:
            turns = self._all(
                "SELECT t.id, t.user_id, t.scope, t.conversation_id FROM json_each(?) AS w"
                " CROSS JOIN turns AS t ON t.id = w.value"
                " WHERE t.role = 'assistant' AND t.character_id = ? ORDER BY t.id",
                (json.dumps(list(proposal.evidence_turn_ids)), character_id),
            )
            if not turns:
                continue
            found = self._one(
                "INSERT INTO canon_proposals (character_id, text, contradicts, status,"
                " created_at) VALUES (?, ?, ?, 'pending', ?) RETURNING id",
                (character_id, proposal.text, proposal.contradicts, _ts(now)),
            )
            assert found is not None
            proposal_id = int(found[0])
            self._con.executemany(
                "INSERT OR IGNORE INTO canon_evidence (proposal_id, turn_id, thread_id,"
                " scope, conversation_id) VALUES (?, ?, ?, ?, ?)",
                [(proposal_id, *tuple(turn)) for turn in turns],
            )
            stored.append(proposal_id)
        return stored

    @on_db_thread
    def conversations_pending_canon(self) -> list[Conversation]:
        return [
            self._conversation(row)
            for row in self._all(
                "SELECT c.* FROM conversations c WHERE c.ended_at IS NOT NULL"
                " AND (c.scope = 'dm' OR c.scope LIKE 'scene:%')"
                " AND NOT EXISTS (SELECT 1 FROM canon_runs r WHERE r.conversation_id = c.id)"
                " ORDER BY c.id"
            )
        ]

    @on_db_thread
    def canon_run_status(self, conversation_id: int) -> str | None:
        row = self._one(
            "SELECT status FROM canon_runs WHERE conversation_id = ?", (conversation_id,)
        )
        return str(row[0]) if row else None

    @on_db_thread
    def save_canon_run(
        self,
        conversation_id: int,
        character_id: str,
        proposals: Sequence[NewCanonProposal],
        status: str,
        now: datetime,
        person_lines: Sequence[int] = (),
    ) -> list[int] | None:
        with self._transaction() as db:
            wanted = sorted(set(person_lines))
            found = self._one(
                "SELECT count(*) FROM turns WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(wanted),),
            )
            if found is None or int(found[0]) != len(wanted):
                return None
            cursor = db.execute(
                "INSERT INTO canon_runs (conversation_id, character_id, status, created_at)"
                " SELECT id, ?, ?, ? FROM conversations WHERE id = ?"
                " ON CONFLICT (conversation_id) DO NOTHING",
                (character_id, status, _ts(now), conversation_id),
            )
            if cursor.rowcount != 1:
                return None
            return self._insert_proposals(character_id, proposals, now)

    @on_db_thread
    def list_canon_proposals(
        self, character_id: str | None = None, status: str = PENDING
    ) -> list[CanonProposal]:
        return [
            proposal_of(row)
            for row in self._all(
                _SELECT + " WHERE (?1 IS NULL OR p.character_id = ?1) AND p.status = ?2"
                " ORDER BY p.id",
                (character_id, status),
            )
        ]

    @on_db_thread
    def get_canon_proposal(self, proposal_id: int) -> CanonProposal | None:
        if not is_row_id(proposal_id):
            return None
        row = self._one(_SELECT + " WHERE p.id = ?", (proposal_id,))
        return proposal_of(row) if row else None

    @on_db_thread
    def canon_evidence(self, proposal_id: int) -> list[CanonEvidenceLine]:
        if not is_row_id(proposal_id):
            return []
        return [
            CanonEvidenceLine(row[0], datetime.fromisoformat(row[1]), row[2])
            for row in self._all(
                "SELECT t.id, t.created_at, t.text FROM canon_evidence e"
                " JOIN turns t ON t.id = e.turn_id WHERE e.proposal_id = ? ORDER BY t.id",
                (proposal_id,),
            )
        ]

    @on_db_thread
    def decide_canon_proposal(self, proposal_id: int, status: str, now: datetime) -> bool:
        checked_decision(status)
        if not is_row_id(proposal_id):
            return False
        with self._transaction() as db:
            cursor = db.execute(
                "UPDATE canon_proposals SET status = ?, decided_at = ?"
                " WHERE id = ? AND status = 'pending'",
                (status, _ts(now), proposal_id),
            )
        return cursor.rowcount == 1

    async def forget_canon_evidence(self, person_id: int, character_id: str | None) -> int:
        dropped = await self._forget_canon_rows(person_id, character_id)
        if dropped:
            self._start_purge()  # the proposals' text leaves the WAL as a forget's
        return dropped

    @on_db_thread
    def _forget_canon_rows(self, person_id: int, character_id: str | None) -> int:
        with self._transaction():
            dropped = self._drop_canon_citing(person_id, character_id, None, every_own=True)
            if dropped:
                self._record_pending_purge()
        return dropped

    def _drop_canon_citing(
        self,
        person_id: int,
        character_id: str | None,
        scene_scope: str | None,
        *,
        every_own: bool = False,
        own_scope: str | None = None,
    ) -> int:
        """Inside the caller's transaction, before the person's lines go: the evidence rows
        reaching the person (on their own threads: of every scope with `every_own`, else of
        `own_scope` only; on scene conversations they spoke in: `scene_scope`'s, or every
        one), and the pending proposals among them; how many proposals went."""
        cited = self._all(_CITED, (person_id, character_id, scene_scope, int(every_own), own_scope))
        if not cited:
            return 0
        proposals = sorted({row[0] for row in cited})
        self._con.executemany(
            "DELETE FROM canon_evidence WHERE proposal_id = ? AND turn_id = ?",
            [tuple(row) for row in cited],
        )
        return self._con.execute(
            "DELETE FROM canon_proposals WHERE status = 'pending' AND id IN"
            " (SELECT value FROM json_each(?))",
            (json.dumps(proposals),),
        ).rowcount
