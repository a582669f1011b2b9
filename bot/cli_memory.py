"""`companion memory show|export|import|forget`: support and erasure requests, for admins.

These commands need only the database (no LLM): they work on a stopped bot too.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import difflib
import json
import re
import sys
from functools import partial
from pathlib import Path
from typing import Any

from bot.app import system_clock
from bot.cli_characters import book_of_valid_files
from bot.cli_memory_view import format_admin_view
from bot.config import Settings
from bot.private_files import SymlinkRefused, private_folder, write_private
from memory.errors import UserFacingError
from memory.models import User
from memory.privacy import MemoryService
from memory.profile.extraction import character_names
from memory.store import MemoryStore, open_store

# How long `memory forget` waits for the purge (index merge, complete WAL checkpoint) to finish.
PURGE_WAIT_SECONDS = 30.0


PLATFORMS = ("telegram", "discord", "terminal")


def platform(value: str) -> str:
    """A platform name, or the error argparse prints, with the closest name."""
    if value in PLATFORMS:
        return value
    close = difflib.get_close_matches(value.lower(), PLATFORMS, n=1, cutoff=0.5)
    hint = f"did you mean {close[0]}? " if close else ""
    raise argparse.ArgumentTypeError(
        f"unknown platform '{value}'; {hint}(one of {', '.join(PLATFORMS)})"
    )


def counted(counts: dict[str, int]) -> str:
    """{'turns': 3, 'summaries': 1} -> '3 turns, 1 summary': the rows written or deleted."""
    return ", ".join(f"{number} {_noun(name, number)}" for name, number in counts.items()) or (
        "nothing"
    )


def _deleted(counts: dict[str, int], verbose: bool) -> str:
    """'deleted 23 rows (-v: by table)', or every table's count with -v."""
    if verbose:
        return f"deleted {counted(counts)}"
    total = sum(counts.values())
    if not total:
        return "nothing to delete"
    return f"deleted {total} {_noun('rows', total)} (-v: by table)"


def _noun(plural: str, number: int) -> str:
    if number != 1:
        return plural
    return plural[:-3] + "y" if plural.endswith("ies") else plural.removesuffix("s")


def register(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    memory = commands.add_parser("memory", help="show, export, import or forget a user's memory")
    actions = memory.add_subparsers(dest="memory_action", required=True, metavar="ACTION")
    for name, help_text in (
        ("show", "print what characters remember about a user"),
        ("export", "write a user's memory with a character as JSON"),
        ("import", "read an export back into a user's memory"),
        ("forget", "delete a user's memory (with a confirmation)"),
    ):
        action = actions.add_parser(name, help=help_text)
        if name == "import":
            action.add_argument("file", type=Path, help="an export written by `memory export`")
        action.add_argument(
            "--platform", required=True, type=platform, help="telegram, discord or terminal"
        )
        action.add_argument("--user", required=True, help="the user's id on that platform")
        if name == "export":
            action.add_argument("--character", required=True, help="character id (one export "
                                "per character)")  # fmt: skip
        else:
            action.add_argument("--character", help="character id (default: every character)")
        if name == "export":
            action.add_argument(
                "--out",
                type=Path,
                help="file to write, mode 0600 (default: data/exports/ beside the database; "
                "'-' for standard output)",
            )
            action.add_argument("--force", action="store_true", help="overwrite an existing file")
        if name == "forget":
            action.add_argument("--yes", action="store_true", help="do not ask for confirmation")
            action.add_argument(
                "-v", "--verbose", action="store_true", help="count what was deleted, by table"
            )


async def run_memory(args: argparse.Namespace, settings: Settings) -> int:
    book = book_of_valid_files(settings.characters_dir)
    store = await open_store(settings.database_target)
    try:

        def no_live_sessions(_user: int, _character: str) -> None:
            """The CLI runs beside the bot, whose sessions it cannot reach (the bot notices
            the other writer and reads them again: see README, /memoria)."""

        service = MemoryService(
            store,
            settings.lifetimes(),
            system_clock(settings),
            lambda _user, _character: contextlib.nullcontext(),
            no_live_sessions,
            names_of=partial(character_names, book),
        )
        user = await store.find_user(args.platform, args.user)
        if args.memory_action == "import":
            user = user or await store.upsert_user(
                args.platform, args.user, args.user, system_clock(settings)()
            )
            return await _import(service, user, args.file, args.character)
        if user is None:
            raise UserFacingError(
                f"no user {args.user} on {args.platform} in {settings.database_name}"
            )
        characters = [args.character] if args.character else book.ids()
        if args.memory_action == "show":
            views = [(c, await service.view(user, c, "dm")) for c in characters]
            print("\n\n".join(format_admin_view(view, c, user) for c, view in views))
            return 0
        if args.memory_action == "export":
            out = args.out or default_export_path(settings, user, args.character)
            if args.out is None:  # the bot's own folder: private even if an older one was not
                await asyncio.to_thread(private_folder, out.parent)
            return await _export(service, user, args.character, out, args.force)
        # Every character the database holds for the user, loaded now or not.
        everyone = [args.character] if args.character else await store.characters_of(user.id)
        return await _forget(store, service, user, everyone, args)
    finally:
        await store.close()


def default_export_path(settings: Settings, user: User, character: str | None) -> Path:
    """data/exports/ beside the database: outside the repository's tracked files. The name
    ends in `-admin`: `/memoria exportar` in `companion chat` writes the same folder, and
    names its file for the same character and user (bot/terminal.py export_name)."""
    safe = re.sub(r"[^\w.-]", "_", f"{character}-{user.platform}-{user.platform_user_id}")
    return settings.database_path.parent / "exports" / f"memoria-{safe}-admin.json"


async def _export(
    service: MemoryService, user: User, character: str | None, out: Path, force: bool
) -> int:
    if character is None:
        raise UserFacingError("memory export needs --character (one export per character)")
    data = await service.export(user, character)
    text = json.dumps(data, ensure_ascii=False, indent=1)
    if str(out) == "-":
        print(text)
        return 0
    try:
        await asyncio.to_thread(write_private, out, text.encode(), overwrite=force)
    except FileExistsError as exc:
        raise UserFacingError(f"{out} already exists; pass --force to overwrite it") from exc
    except SymlinkRefused as exc:
        raise UserFacingError(
            f"{out} is a symbolic link; refusing to write through it (even with --force): "
            "give --out the path of a real file"
        ) from exc
    print(f"wrote {out} (readable by you only)", file=sys.stderr)
    return 0


def _turn_key(turn: dict[str, Any]) -> tuple[Any, ...]:
    return (turn.get("role"), turn.get("text"), turn.get("created_at"))


def _fact_key(fact: dict[str, Any]) -> tuple[Any, ...]:
    return (fact.get("kind"), fact.get("key"), fact.get("value"), fact.get("created_at"))


async def _refuse_repeat(
    service: MemoryService, user: User, character_id: str, data: dict[str, Any], file: Path
) -> None:
    """An export whose turns (or, without turns, facts) are already in this memory was imported
    before: importing it again would double them. Ids change on import; role, text and time
    do not."""
    current = await service.export(user, character_id)
    for table, key in (("turns", _turn_key), ("facts", _fact_key)):
        incoming = [key(row) for row in data.get(table) or [] if isinstance(row, dict)]
        if not incoming:
            continue
        present = {key(row) for row in current.get(table, [])}
        repeated = sum(1 for item in incoming if item in present)
        if repeated:
            raise UserFacingError(
                f"{file}: {repeated} of its {len(incoming)} {table} are already in the memory "
                f"of {user.platform} user {user.platform_user_id} with {character_id} (imported "
                "before?); nothing imported"
            )
        return


async def _import(service: MemoryService, user: User, file: Path, character: str | None) -> int:
    try:
        data = json.loads(await asyncio.to_thread(file.read_text, encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserFacingError(f"{file}: cannot be read as JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise UserFacingError(f"{file}: not a memory export (a JSON object is expected)")
    character_id = character or data.get("character_id")
    if not character_id:
        raise UserFacingError(f"{file} names no character_id; pass --character")
    await _refuse_repeat(service, user, character_id, data, file)
    counts = await service.import_(user, character_id, data)
    print(f"imported into {character_id}: {counted(counts)}")
    return 0


async def _forget(
    store: MemoryStore,
    service: MemoryService,
    user: User,
    characters: list[str],
    args: argparse.Namespace,
) -> int:
    """Each character's memory, then the user's own rows (display name, choices,
    preferences) once no memory with any character refers to them; one line a character,
    the count of each table with -v."""
    if not args.yes:
        platform_id = user.platform_user_id
        named = ", ".join(characters) or "no character"
        try:
            answer = await asyncio.to_thread(
                input,
                f"Delete ALL memory of user {platform_id} with {named}? "
                "Type the user id to confirm: ",
            )
        except EOFError:
            answer = ""
        if answer.strip() != platform_id:
            print("not confirmed; nothing deleted")
            return 1
    for character_id in characters:
        counts = await service.forget(user, character_id)
        print(f"{character_id}: {_deleted(counts, args.verbose)}")
    if await store.forget_user_if_unreferenced(user.id):
        print(f"user {user.platform_user_id}: no memory left; their own rows deleted too")
    if not await store.purge_settled(timeout=PURGE_WAIT_SECONDS):
        print(
            "the purge of the deleted bytes is still blocked (a reader holds the database); "
            "it stays recorded, and the bot finishes it (at its next sweep or start)",
            file=sys.stderr,
        )
    return 0
