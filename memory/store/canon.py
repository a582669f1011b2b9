"""Canon proposals (migration 0027) as the store offers them: what a character established
about itself or its world, resting on its own assistant turns, waiting for an admin.

The rows are the character's, not a person's (a proposal holds no person's data: the checks of
memory/canon/ refuse it before it is stored), so they are neither exported nor imported with a
person's memory. What ties them to people is their evidence: a person's forget deletes the
pending proposals that rest on that person's threads, or on a scene conversation the person
spoke in, and the evidence rows pointing there from decided ones (`forget_canon_evidence`,
also run inside `forget` and `forget_scene_lines`, in their transaction).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from memory.models import CanonEvidenceLine, CanonProposal, Conversation, NewCanonProposal

PENDING = "pending"
DECISIONS = ("approved", "rejected")


class CanonStore(Protocol):
    async def add_canon_proposals(
        self, character_id: str, proposals: Sequence[NewCanonProposal], now: datetime
    ) -> list[int]:
        """Store the proposals as pending, in one transaction; the ids of those stored, in
        order. A proposal none of whose evidence is (still) an assistant turn of this
        character is not stored, nor is any evidence id that is not one (a forget may have
        run since the checks)."""
        ...

    async def list_canon_proposals(
        self, character_id: str | None = None, status: str = PENDING
    ) -> list[CanonProposal]:
        """The proposals with that status (every character's when None), oldest first."""
        ...

    async def get_canon_proposal(self, proposal_id: int) -> CanonProposal | None: ...

    async def canon_evidence(self, proposal_id: int) -> list[CanonEvidenceLine]:
        """The character's own turns the proposal rests on, still stored, oldest first."""
        ...

    async def decide_canon_proposal(self, proposal_id: int, status: str, now: datetime) -> bool:
        """'approved' or 'rejected', only from pending: False (nothing written) otherwise.
        Any other status is a ValueError."""
        ...

    async def conversations_pending_canon(self) -> list[Conversation]:
        """Ended private and scene conversations not yet read for proposals, oldest first."""
        ...

    async def canon_run_status(self, conversation_id: int) -> str | None: ...

    async def save_canon_run(
        self,
        conversation_id: int,
        character_id: str,
        proposals: Sequence[NewCanonProposal],
        status: str,
        now: datetime,
        person_lines: Sequence[int] = (),
    ) -> list[int] | None:
        """Store the proposals (as `add_canon_proposals`) and mark the conversation read with
        `status`, in one transaction; None, and nothing written, when the conversation is gone
        (forgotten), was read already (by another worker), or one of `person_lines` (the
        people's turns the proposals were checked against) was deleted meanwhile: a forget
        ran, and the conversation is read again without them."""
        ...

    async def forget_canon_evidence(self, person_id: int, character_id: str | None) -> int:
        """The forget hook: delete the pending proposals (of one character, or of every one
        when None) resting on a turn of the person's own threads or of a scene conversation
        the person spoke in, and such evidence rows of decided proposals; how many proposals
        went. `forget` and `forget_scene_lines` run it themselves, in their transaction."""
        ...


# What an integer column holds: an id outside it (typed by an admin) names no row.
_ID_RANGE = range(-(2**63), 2**63)


def is_row_id(value: int) -> bool:
    return value in _ID_RANGE


def checked_decision(status: str) -> str:
    if status not in DECISIONS:
        raise ValueError(f"a canon proposal is decided 'approved' or 'rejected', not {status!r}")
    return status
