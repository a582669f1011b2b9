"""`companion characters proposals [ID]`, `approve ID` and `reject ID`: the admin reviews what
characters established about themselves or their world (bot/canon_review.py). An approved fact
is written into the character's files; a running bot's live reload (bot/reload.py) takes it
within a minute, or at once with `/personaje recargar`."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from bot.canon_review import CanonReview, Shown
from bot.cli_characters import book_of_valid_files
from bot.config import Settings
from cards.canon_writer import PLACES
from memory.store import open_store

ACTIONS = ("proposals", "approve", "reject")
EVIDENCE_CHARS = 160  # an evidence line in the list; `proposals ID` shows it whole
NO_EVIDENCE = "(no line is left to show: a forget removed them)"
WHERE = {"sheet": "the sheet (identity.description)", "lore": "the lore page 'canon'"}


def proposal_id(value: str) -> int:
    """'12' or '#12' (as the list shows it)."""
    digits = value.removeprefix("#")
    if not digits.isdecimal():
        raise argparse.ArgumentTypeError(f"'{value}' is not a proposal id (a number, as listed)")
    return int(digits)


def register(characters: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    listing = characters.add_parser(
        "proposals",
        help="the canon proposals waiting for review, with the lines they rest on and the "
        "contradiction mark; with an ID, that one in full",
    )
    listing.add_argument("id", nargs="?", type=proposal_id, help="one proposal, in full")
    listing.add_argument("--character", help="only this character's proposals")
    approve = characters.add_parser(
        "approve", help="write a proposal into the character's sheet or lore page, and mark it"
    )
    approve.add_argument("id", type=proposal_id, help="the proposal (see characters proposals)")
    approve.add_argument(
        "--into",
        choices=PLACES,
        default="sheet",
        help="sheet: a fact about the character itself, at the end of identity.description "
        "(default); lore: a fact about its world, on the lore page 'canon'",
    )
    approve.add_argument(
        "--force", action="store_true", help="approve even a proposal marked as contradicting"
    )
    reject = characters.add_parser("reject", help="drop a proposal: nothing is written")
    reject.add_argument("id", type=proposal_id, help="the proposal (see characters proposals)")


async def run_canon(args: argparse.Namespace, settings: Settings) -> int:
    book = book_of_valid_files(settings.characters_dir)
    store = await open_store(settings.database_target)
    try:
        review = CanonReview(store, book, lambda: datetime.now(UTC), settings.lore_page_cap_tokens)
        if args.action == "approve":
            await _approve(review, args)
        elif args.action == "reject":
            rejected = await review.reject(args.id)
            print(f"rejected #{rejected.id}: nothing was written")
        elif args.id is not None:
            print("\n".join(full(await review.one(args.id))))
        else:
            _list(await review.pending(args.character))
    finally:
        await store.close()
    return 0


async def _approve(review: CanonReview, args: argparse.Namespace) -> None:
    approved = await review.approve(args.id, args.into, force=args.force)
    print(f"approved #{approved.proposal.id}: written into {WHERE[approved.written.place]}, "
          f"{approved.written.path}")  # fmt: skip
    for warning in approved.warnings:  # what this fact made lint say, the sheet's size above all
        print(f"warning: {warning}")
    print("a running bot reloads the file within a minute (now: /personaje recargar)")


def _list(pending: list[Shown]) -> None:
    for shown in pending:
        print("\n".join(summary(shown)))
    print(
        f"{len(pending)} pending; `companion characters approve ID [--into lore]` writes one, "
        "`reject ID` drops it"
    )


def _head(shown: Shown) -> str:
    p = shown.proposal
    mark = f"  CONTRADICTS the sheet: {p.contradicts}" if p.contradicts else ""
    return f"#{p.id}  {p.character_id}  {p.created_at:%Y-%m-%d %H:%M} UTC  {p.status}{mark}"


def _cut(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def summary(shown: Shown) -> list[str]:
    """The list's lines of one proposal: its head, its text, its evidence cut short."""
    lines = [_head(shown), f"    {shown.proposal.text}"]
    lines += [
        f"      turn {e.turn_id}, {e.created_at:%Y-%m-%d %H:%M}: {_cut(e.text, EVIDENCE_CHARS)}"
        for e in shown.evidence
    ]
    return lines if shown.evidence else [*lines, f"      {NO_EVIDENCE}"]


def full(shown: Shown) -> list[str]:
    """One proposal in full: status, dates, text, the sheet line it contradicts, evidence."""
    p = shown.proposal
    decided = f", decided {p.decided_at:%Y-%m-%d %H:%M} UTC" if p.decided_at else ""
    lines = [_head(shown) + decided, "", p.text, ""]
    if p.contradicts:
        lines += [f"It contradicts the sheet: {p.contradicts}", ""]
    lines.append(f"It rests on {len(shown.evidence)} line(s) of the character:")
    if not shown.evidence:
        lines.append(f"  {NO_EVIDENCE}")
    for line in shown.evidence:
        lines += [f"  turn {line.turn_id}, {line.created_at:%Y-%m-%d %H:%M} UTC:", *(
            f"    {part}" for part in line.text.splitlines() or [""]
        )]  # fmt: skip
    return lines
