"""/admin canon: the operator reviews canon proposals (bot/canon_review.py) from a private chat
with the bot. Only there: the list quotes the characters' lines from people's conversations,
which a group must not read. An approved fact is written and the characters reloaded at once."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from bot.access import Access
from bot.answers import Answer, Caller
from bot.canon_review import CanonReview, Shown
from bot.reload import CharacterReloader
from bot.texts import format_moment, text
from cards.canon_writer import Place
from cards.character import CharacterFileError

Language = Callable[[Caller], Awaitable[str]]
LISTED = 10  # proposals in one answer; the rest wait for the next decisions
EVIDENCE_CHARS = 200  # an evidence line in the list; `/admin canon lista ID` shows it whole
PLACES: dict[str, Place] = {"ficha": "sheet", "sheet": "sheet", "lore": "lore"}


class CanonCommands:
    def __init__(
        self,
        review: CanonReview,
        access: Access,
        language: Language,
        reloader: CharacterReloader,
    ) -> None:
        self._review = review
        self._access = access
        self._language = language
        self._reloader = reloader

    async def run(self, caller: Caller, action: str, args: list[str]) -> Answer:
        """/admin canon [lista [ID] | aprobar ID [ficha|lore] | rechazar ID], operator, private."""
        language = await self._language(caller)
        if not self._access.is_operator(caller):
            return Answer(text(language, "admins_only"), ok=False, private=True)
        if caller.channel_kind == "group":
            return Answer(text(language, "canon_private_only"), ok=False, private=True)
        if action == "aprobar":
            return await self._approve(language, int(args[0]), PLACES[(args[1:] or ["ficha"])[0]])
        if action == "rechazar":
            rejected = await self._review.reject(int(args[0]))
            return Answer(text(language, "canon_rejected", id=rejected.id), private=True)
        if args:
            return Answer("\n".join(_lines(language, await self._review.one(int(args[0])))),
                          private=True)  # fmt: skip
        return Answer(listing(language, await self._review.pending()), private=True)

    async def _approve(self, language: str, proposal_id: int, place: Place) -> Answer:
        approved = await self._review.approve(proposal_id, place)
        lines = [text(language, f"canon_approved_{place}", id=approved.proposal.id)]
        lines += [f"- {warning}" for warning in approved.warnings]
        try:
            self._reloader.reload()  # new turns see the fact now, not at the next poll
        except CharacterFileError as exc:
            lines += [text(language, "reload_refused"), str(exc)]
        return Answer("\n".join(lines), private=True)


def listing(language: str, pending: list[Shown]) -> str:
    if not pending:
        return text(language, "canon_none")
    lines = [text(language, "canon_title", count=len(pending))]
    for shown in pending[:LISTED]:
        lines += ["", *_lines(language, shown, EVIDENCE_CHARS)]
    if len(pending) > LISTED:
        lines += ["", text(language, "canon_more", count=len(pending) - LISTED)]
    return "\n".join([*lines, "", text(language, "canon_hint")])


def _lines(language: str, shown: Shown, cut: int | None = None) -> list[str]:
    """One proposal: its number, character and text, the mark, and the lines it rests on."""
    p = shown.proposal
    lines = [f"#{p.id} · {p.character_id} · {text(language, f'canon_status_{p.status}')}", p.text]
    if p.contradicts:
        lines.append(text(language, "canon_mark", sheet=p.contradicts))
    for line in shown.evidence:
        said = " ".join(line.text.split())
        if cut is not None and len(said) > cut:
            said = said[: cut - 1].rstrip() + "…"
        when = format_moment(language, line.created_at)
        lines.append(text(language, "canon_line", turn=line.turn_id, when=when, text=said))
    return lines if shown.evidence else [*lines, text(language, "canon_no_evidence")]
