"""The `companion` command: parse, load the settings once, dispatch, and turn every failure an
admin can fix into one line (the bot itself is composed in bot/app.py)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sqlite3
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING

from memory.errors import UserFacingError

if TYPE_CHECKING:
    from bot.config import Settings

# Nothing else at import: `companion --version` must not load the bot (the SDKs, the gate's
# model, the platforms' libraries take seconds). Each command imports what it runs.

LOG_FILE_NAME = "companion.log"  # in the data folder, beside the database


def _version() -> str:
    try:
        return version("companion")
    except PackageNotFoundError:  # run from a copy that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    from bot.cli_access import register as register_access
    from bot.cli_admin import register as register_admin
    from bot.cli_canon import register as register_canon
    from bot.cli_db import register as register_db
    from bot.cli_inbox import register as register_inbox
    from bot.cli_memory import register as register_memory
    from bot.evaluation import register as register_eval
    from bot.role_names import ROLES

    parser = argparse.ArgumentParser(
        prog="companion",
        description="Companion characters that remember their users, on Discord, Telegram "
        "and the terminal. Settings come from the environment and .env (see .env.example).",
    )
    parser.add_argument("--version", action="version", version=f"companion {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chat = commands.add_parser("chat", help="chat with a character in the terminal")
    chat.add_argument("--character", required=True, help="character id (see characters list)")
    chat.add_argument("--user", default="admin", help="your user name (default: admin)")
    run_parser = commands.add_parser(
        "run", help="run the Discord and/or Telegram bot (whichever tokens are set)"
    )
    run_parser.add_argument(
        "--role",
        choices=ROLES,
        default="all",
        help="all: one process does everything (default); platform: store incoming messages "
        "in the PostgreSQL inbox; worker: answer them (several may run)",
    )
    commands.add_parser("migrate", help="apply pending database migrations and exit")
    characters = commands.add_parser(
        "characters",
        help="list, lint, import (SillyTavern cards) or export character files; the canon "
        "they propose: proposals, approve or reject",
    )
    characters_commands = characters.add_subparsers(dest="action", required=True)
    characters_commands.add_parser("list", help="list the characters and their files")
    characters_commands.add_parser("lint", help="warn where a sheet breaks the writing rules")
    register_admin(commands, characters_commands)
    register_canon(characters_commands)
    register_memory(commands)
    register_db(commands)
    register_inbox(commands)
    register_eval(commands)
    register_access(commands)
    return parser


def _numbers(applied: Sequence[str]) -> str:
    """['0013_turn_source.sql', '0014_dead_letters.sql'] -> '2 migrations (0013_turn_source,
    0014_dead_letters)'; a long run is shown by its ends."""
    names = [Path(name).stem for name in applied]
    shown = ", ".join(names) if len(names) <= 3 else f"{names[0]} to {names[-1]}"
    return f"{len(names)} migration{'s' if len(names) > 1 else ''} ({shown})"


async def _migrate(settings: Settings) -> int:
    from memory.store import open_store

    store = await open_store(settings.database_target, migrate=False)
    try:
        applied = await store.migrate()
        version = await store.schema_version()
    finally:
        await store.close()
    done = f"applied {_numbers(applied)}" if applied else "already up to date"
    print(f"{settings.database_name}: {done}; schema version {version}")
    return 0


async def _chat(
    settings: Settings, character_id: str, user_name: str, log_file: Path | None
) -> int:
    from functools import partial

    from bot.app import open_app
    from bot.cli_characters import book_of_valid_files
    from bot.llm import DeferredLLM
    from bot.llm.diagnosis import ReplyFailures, advice
    from bot.terminal import ChatPlaces, run_chat

    # The other characters' broken files are warned about, not fatal: `run` is the strict one.
    characters = book_of_valid_files(settings.characters_dir)
    llm = DeferredLLM(settings)  # the SDK is imported while the prompt waits for a line
    failures = ReplyFailures(llm, partial(advice, settings))
    async with open_app(settings, llm=failures, characters=characters) as app:
        llm.warm()
        places = ChatPlaces.beside(settings.database_path, log_file)
        await run_chat(
            app.companion, app.commands, character_id, user_name, places=places, failures=failures
        )
    return 0


def _settings() -> Settings:
    """The settings, after warning about .env keys that are no setting."""
    from pydantic import ValidationError

    from bot.config import Settings
    from bot.config_errors import describe_settings_error, unknown_env_keys

    for warning in unknown_env_keys():
        print(f"companion: warning: {warning}", file=sys.stderr)
    try:
        settings = Settings()
        settings.check_window()
    except ValidationError as exc:
        lines = describe_settings_error(exc)
        raise UserFacingError("invalid settings: " + "; ".join(lines)) from exc
    except ValueError as exc:
        raise UserFacingError(f"invalid settings: {exc}") from exc
    for warning in settings.model_warnings():
        print(f"companion: warning: {warning}", file=sys.stderr)
    return settings


def _database_problem(exc: sqlite3.Error, path: Path) -> str:
    """One line naming the database file and what to do about it."""
    reason = str(exc)
    if "full" in reason:
        return f"the database {path} cannot grow: {reason}; free some disk space"
    if "not a database" in reason or "malformed" in reason:
        return (
            f"the database {path} is corrupt or not a SQLite file ({reason}); restore it from "
            "a backup or point DATABASE_PATH elsewhere"
        )
    if "readonly" in reason or "unable to open" in reason:
        return (
            f"cannot write the database {path} ({reason}); check that its folder exists and "
            "is writable, or set DATABASE_PATH"
        )
    return f"the database {path} failed: {reason}"


def _file_problem(exc: OSError, settings: Settings | None) -> str:
    reason = exc.strerror or str(exc)
    if not exc.filename:
        return reason
    database = settings.database_path if settings else None
    if database is not None and Path(exc.filename) in (database, *database.parents):
        return (
            f"cannot create the database {database}: {reason}: {exc.filename}; check the "
            "folder or set DATABASE_PATH"
        )
    return f"{reason}: {exc.filename}"


def _dispatch(args: argparse.Namespace, settings: Settings, log_file: Path | None) -> int:
    # Each command imports only what it runs: `chat` must reach its prompt without loading
    # the platforms' libraries that `run` needs.
    if args.command == "chat":
        return asyncio.run(_chat(settings, args.character, args.user, log_file))
    if args.command == "characters" and args.action in ("proposals", "approve", "reject"):
        from bot.cli_canon import run_canon

        return asyncio.run(run_canon(args, settings))
    if args.command in ("characters", "stats"):
        from bot.cli_admin import run_admin

        # Card import/export and stats first: `characters` treats other actions as lint.
        code = asyncio.run(run_admin(args, settings))
        if code is not None:
            return code
    if args.command == "migrate":
        return asyncio.run(_migrate(settings))
    if args.command == "characters":
        from bot.cli_characters import characters_command

        return characters_command(settings, args.action)
    if args.command == "run":
        from bot.roles import run_role

        return asyncio.run(run_role(settings, args.role))
    return _dispatch_data(args, settings)


def _dispatch_data(args: argparse.Namespace, settings: Settings) -> int:
    """The commands on the stored data: db, memory, inbox, eval."""
    if args.command == "db":
        from bot.cli_db import run_db

        return asyncio.run(run_db(args, str(settings.database_target)))
    if args.command == "memory":
        from bot.cli_memory import run_memory

        return asyncio.run(run_memory(args, settings))
    if args.command == "inbox":
        from bot.cli_inbox import run_inbox

        return asyncio.run(run_inbox(args, settings))
    if args.command == "eval":
        from bot.evaluation import run_eval_command

        return asyncio.run(run_eval_command(args, settings))
    if args.command == "access":
        from bot.cli_access import run_access

        return asyncio.run(run_access(args, settings))
    return 1


def _stderr_level(command: str, log_level: str) -> int:
    """The bot's progress is its stderr (`docker logs`): all of it. A command's is what it
    prints: its INFO lines go to the log file only, unless LOG_LEVEL=DEBUG asks for every
    line."""
    if command == "run" or log_level.upper() == "DEBUG":
        return logging.NOTSET
    return logging.WARNING


def _run(args: argparse.Namespace) -> int:
    """Every failure an admin can fix ends here as one line on stderr and exit code 2; its full
    detail goes to the log file."""
    from bot.logging_setup import FILE_ONLY, configure_logging
    from cards.character import CharacterFileError
    from memory.store import SchemaTooNewError, StoreUnavailable

    log = logging.getLogger("companion")
    settings: Settings | None = None
    try:
        settings = _settings()
        log_file = configure_logging(
            settings.log_level,
            settings.secrets(),
            log_file=settings.database_path.parent / LOG_FILE_NAME,
            to_stderr=args.command != "chat",  # no log line inside the conversation
            stderr_level=_stderr_level(args.command, settings.log_level),
            sdk_payloads=settings.log_sdk_payloads,
        )
        return _dispatch(args, settings, log_file)
    except CharacterFileError as exc:
        refusing = ", refusing to start" if args.command == "run" else ""
        print(f"companion: character files are invalid{refusing}:\n{exc}", file=sys.stderr)
        return 2
    except (UserFacingError, SchemaTooNewError, StoreUnavailable) as exc:
        log.debug("companion: %s", exc, exc_info=True, extra=FILE_ONLY)
        print(f"companion: {exc}", file=sys.stderr)
        return 2
    except sqlite3.Error as exc:
        log.error("companion: database error", exc_info=True, extra=FILE_ONLY)
        path = settings.database_path if settings else Path("?")
        print(f"companion: {_database_problem(exc, path)}", file=sys.stderr)
        return 2
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):
            raise
        log.error("companion: file error", exc_info=True, extra=FILE_ONLY)
        print(f"companion: {_file_problem(exc, settings)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _quiet_broken_pipe() -> int:
    """The reader went away (`... | head`): stop writing, without a traceback at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 128 + signal.SIGPIPE


def main(argv: Sequence[str] | None = None) -> int:
    if list(sys.argv[1:] if argv is None else argv) == ["--version"]:
        print(f"companion {_version()}")  # without building the parser: see the imports
        return 0
    try:
        args = build_parser().parse_args(argv)
        code = _run(args)
        sys.stdout.flush()  # here, where a closed pipe can still be handled
        return code
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except Exception:
        # Through logging, not Python's default traceback printer, so that configured secrets
        # are redacted: PTB's InvalidToken message, for one, holds the bot token.
        logging.getLogger("companion").critical("companion: stopped by an error", exc_info=True)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
