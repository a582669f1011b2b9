"""Reviewing canon proposals (issue 37 part B; memory/store/canon.py holds them): the pending
ones with their evidence, approve (the fact written into the character's files, then marked),
reject. One service behind `companion characters proposals|approve|reject` and `/admin canon`.

Refusals are UserFacingError with a catalogue code (bot/texts.py words them in the operator's
language in a chat; the command line prints the English message)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from bot.texts import LANGUAGES
from cards.canon_writer import CanonWriteError, Place, Written, write_canon
from cards.character import Character, CharacterBook, CharacterFileError, load_character
from cards.lint import LintWarning, lint_character, lint_lore
from memory.errors import UserFacingError
from memory.models import CanonEvidenceLine, CanonProposal
from memory.store.canon import PENDING, CanonStore, is_row_id


@dataclass(frozen=True)
class Shown:
    """A proposal as the admin reads it: with the character's own lines it rests on."""

    proposal: CanonProposal
    evidence: list[CanonEvidenceLine]


@dataclass(frozen=True)
class Approved:
    proposal: CanonProposal
    written: Written
    warnings: list[LintWarning]


class CanonReview:
    def __init__(
        self,
        store: CanonStore,
        characters: CharacterBook,
        clock: Callable[[], datetime],
        lore_cap_tokens: int,
    ) -> None:
        self._store = store
        self._characters = characters
        self._clock = clock
        self._lore_cap = lore_cap_tokens

    async def pending(self, character_id: str | None = None) -> list[Shown]:
        """The proposals waiting for a decision, oldest first, each with its evidence."""
        waiting = await self._store.list_canon_proposals(character_id, PENDING)
        return [Shown(p, await self._store.canon_evidence(p.id)) for p in waiting]

    async def one(self, proposal_id: int) -> Shown:
        """One proposal, whatever its status, with its evidence."""
        proposal = await self._found(proposal_id)
        return Shown(proposal, await self._store.canon_evidence(proposal.id))

    async def approve(self, proposal_id: int, place: Place, force: bool = False) -> Approved:
        """Write the fact into the character's sheet or lore page, then mark it approved. A
        proposal that contradicts the sheet is refused unless `force`: the sheet would say
        both. The file is written first: a failed write leaves the proposal pending."""
        proposal = await self._pending(proposal_id)
        if proposal.contradicts and not force:
            raise UserFacingError(
                f"#{proposal.id} contradicts the character's sheet ({proposal.contradicts}): "
                "approving it would leave the sheet saying both; edit the sheet by hand and "
                "reject it, or approve it with --force",
                code="canon_contradicts", id=proposal.id, sheet=proposal.contradicts,
            )  # fmt: skip
        path = self._file_of(proposal)
        try:
            before = set(map(str, self._lint(load_character(path))))
            written = write_canon(load_character(path), proposal.text, place)
        except (CanonWriteError, CharacterFileError) as exc:
            raise UserFacingError(
                f"#{proposal.id} was not written, nothing changed: {exc}",
                code="canon_not_written", id=proposal.id, reason=str(exc),
            ) from exc  # fmt: skip
        if not await self._store.decide_canon_proposal(proposal.id, "approved", self._clock()):
            raise self._decided(await self._found(proposal.id))  # decided meanwhile elsewhere
        warnings = [w for w in self._lint(load_character(path)) if str(w) not in before]
        return Approved(await self._found(proposal.id), written, warnings)

    async def reject(self, proposal_id: int) -> CanonProposal:
        """Mark the proposal rejected; nothing is written."""
        proposal = await self._pending(proposal_id)
        if not await self._store.decide_canon_proposal(proposal.id, "rejected", self._clock()):
            raise self._decided(await self._found(proposal.id))
        return await self._found(proposal.id)

    def _lint(self, character: Character) -> list[LintWarning]:
        found = lint_character(character, languages=LANGUAGES)
        return found + lint_lore(character, self._lore_cap)[1]

    def _file_of(self, proposal: CanonProposal) -> Path:
        character = self._characters.get(proposal.character_id)
        if character is None or not character.source_path:
            raise UserFacingError(
                f"#{proposal.id} is about '{proposal.character_id}', which has no valid "
                "character file now; fix the file or reject the proposal",
                code="canon_no_character", id=proposal.id, character=proposal.character_id,
            )  # fmt: skip
        return Path(character.source_path)

    async def _found(self, proposal_id: int) -> CanonProposal:
        found = (
            await self._store.get_canon_proposal(proposal_id) if is_row_id(proposal_id) else None
        )
        if found is None:
            raise UserFacingError(
                f"there is no canon proposal #{proposal_id} (`companion characters proposals` "
                "lists the pending ones)",
                code="canon_unknown", id=proposal_id,
            )  # fmt: skip
        return found

    async def _pending(self, proposal_id: int) -> CanonProposal:
        proposal = await self._found(proposal_id)
        if proposal.status != PENDING:
            raise self._decided(proposal)
        return proposal

    @staticmethod
    def _decided(proposal: CanonProposal) -> UserFacingError:
        when = f"{proposal.decided_at:%Y-%m-%d %H:%M}" if proposal.decided_at else "earlier"
        return UserFacingError(
            f"#{proposal.id} was already {proposal.status} ({when} UTC): only a pending "
            "proposal can be decided",
            code=f"canon_already_{proposal.status}", id=proposal.id, when=when,
        )  # fmt: skip
