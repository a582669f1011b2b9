"""`companion inbox dead-letters`: the updates a platform process could not store in the inbox
(bot/inbox/dead_letters.py), one line each, newest first; `--purge` deletes them all."""

from __future__ import annotations

import argparse

from bot.config import Settings
from memory.models import DeadLetter
from memory.store import open_store

DEFAULT_LIMIT = 20
PAYLOAD_CHARS = 160


def register(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    inbox = commands.add_parser("inbox", help="what the platform processes could not store")
    actions = inbox.add_subparsers(dest="inbox_action", required=True, metavar="ACTION")
    dead = actions.add_parser(
        "dead-letters",
        help="list the updates the inbox would not take (newest first), or delete them",
    )
    dead.add_argument(
        "--limit", type=int, default=DEFAULT_LIMIT, help=f"how many (default {DEFAULT_LIMIT})"
    )
    dead.add_argument(
        "--purge", action="store_true", help="delete every dead letter (they hold user text)"
    )


def describe(letter: DeadLetter) -> str:
    """One line: when, where, whose, what the database said, and the start of the update."""
    payload = letter.payload or "(no text kept: the sender was off the record)"
    if len(payload) > PAYLOAD_CHARS:
        payload = payload[:PAYLOAD_CHARS] + "..."
    error = " ".join(letter.error.split())  # a database's message may span lines
    return (
        f"#{letter.id} {letter.created_at.isoformat(timespec='seconds')} {letter.platform}"
        f" update {letter.update_key or '?'} from user {letter.platform_user_id or '?'}:"
        f" {error} | {payload}"
    )


async def run_inbox(args: argparse.Namespace, settings: Settings) -> int:
    store = await open_store(settings.database_target)
    try:
        if args.purge:
            print(f"deleted {await store.purge_dead_letters()} dead letter(s)")
            return 0
        total = await store.count_dead_letters()
        for letter in await store.dead_letters(max(args.limit, 0)):
            print(describe(letter))
        print(f"{total} dead letter(s)")
    finally:
        await store.close()
    return 0
