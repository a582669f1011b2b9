"""The `companion` command: the one entry point, and the composition root."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence

from pydantic import ValidationError

from bot.app import open_app
from bot.cli_admin import register as register_admin
from bot.cli_admin import run_admin
from bot.cli_memory import register as register_memory
from bot.cli_memory import run_memory
from bot.config import Settings
from bot.evaluation import register as register_eval
from bot.evaluation import run_eval_command
from bot.logging_setup import configure_logging
from bot.runner import run_bot
from bot.terminal import run_chat
from memory.characters import CharacterBook, CharacterFileError
from memory.errors import UserFacingError
from memory.lint import lint_character, lint_lore
from memory.store import SchemaTooNewError, Store


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="companion",
        description="Companion characters that remember their users, on Discord, Telegram "
        "and the terminal. Settings come from the environment and .env (see .env.example).",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chat = commands.add_parser("chat", help="chat with a character in the terminal")
    chat.add_argument("--character", required=True, help="character id (see characters list)")
    chat.add_argument("--user", default="admin", help="your user name (default: admin)")
    commands.add_parser(
        "run", help="run the Discord and/or Telegram bot (whichever tokens are set)"
    )
    commands.add_parser("migrate", help="apply pending database migrations and exit")
    characters = commands.add_parser("characters", help="list or lint character files")
    characters_commands = characters.add_subparsers(dest="action", required=True)
    characters_commands.add_parser("list", help="list the characters and their files")
    characters_commands.add_parser("lint", help="warn where a sheet breaks the writing rules")
    register_admin(commands, characters_commands)
    register_memory(commands)
    register_eval(commands)
    return parser


async def _migrate(settings: Settings) -> int:
    store = await Store.open(settings.database_path, migrate=False)
    try:
        applied = await store.migrate()
        version = await store.schema_version()
    finally:
        await store.close()
    print(
        f"{settings.database_path}: applied {len(applied)} migration(s) {applied}; "
        f"schema version {version}"
    )
    return 0


def _characters(settings: Settings, action: str) -> int:
    book = CharacterBook.load(settings.characters_dir)
    if action == "list":
        for character in book.all():
            print(
                f"{character.id}\t{character.name}\t{character.language}\t{character.source_path}"
            )
        return 0
    warnings = [w for character in book.all() for w in lint_character(character)]
    for character in book.all():
        report, lore_warnings = lint_lore(character, settings.lore_page_cap_tokens)
        for line in report:
            print(line)
        warnings += lore_warnings
    for warning in warnings:
        print(f"warning: {warning}")
    print(f"{len(book.ids())} character(s), {len(warnings)} warning(s)")
    return 0


async def _chat(settings: Settings, character_id: str, user_name: str) -> int:
    async with open_app(settings) as app:
        await run_chat(app.companion, app.commands, character_id, user_name)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = Settings()
        settings.check_window()
    except (ValidationError, ValueError) as exc:
        print(f"companion: invalid settings: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, settings.secrets())
    try:
        # Card import/export and stats first: `characters` treats other actions as lint.
        code = asyncio.run(run_admin(args, settings))
        if code is not None:
            return code
        if args.command == "migrate":
            return asyncio.run(_migrate(settings))
        if args.command == "characters":
            return _characters(settings, args.action)
        if args.command == "chat":
            return asyncio.run(_chat(settings, args.character, args.user))
        if args.command == "run":
            return asyncio.run(run_bot(settings))
        if args.command == "memory":
            return asyncio.run(run_memory(args, settings))
        if args.command == "eval":
            return asyncio.run(run_eval_command(args, settings))
    except CharacterFileError as exc:
        print(f"companion: character files are invalid, refusing to start:\n{exc}", file=sys.stderr)
        return 2
    except (UserFacingError, SchemaTooNewError) as exc:
        print(f"companion: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception:
        # Through logging, not Python's default traceback printer, so that configured secrets
        # are redacted: PTB's InvalidToken message, for one, holds the bot token.
        logging.getLogger("companion").critical("companion: stopped by an error", exc_info=True)
        return 1
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
