"""`companion db copy`: move a deployment between SQLite and PostgreSQL (either way);
`companion db check`: check the database and its search index, and rebuild the index."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TextIO

from memory.errors import UserFacingError
from memory.store import MemoryStore, StoreUnavailable, is_postgres, open_store
from memory.store.copy import CopyRefused, copy_deployment

BAR_WIDTH = 30


def register(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    database = commands.add_parser(
        "db", help="check the database, or move it between SQLite and PostgreSQL"
    )
    actions = database.add_subparsers(dest="db_action", required=True, metavar="ACTION")
    copy = actions.add_parser(
        "copy",
        help="copy every row (ids, citations and fact history intact) into an empty database, "
        "then verify row counts and checksums",
    )
    copy.add_argument(
        "--from", dest="source", required=True, help="postgresql://... URL or SQLite file path"
    )
    copy.add_argument(
        "--to",
        dest="target",
        required=True,
        help="an empty PostgreSQL database (URL) or a SQLite file that does not exist yet",
    )
    check = actions.add_parser(
        "check",
        help="check the database file and its search index (SQLite: PRAGMA integrity_check and "
        "FTS5's integrity-check); exit code 1 if anything is wrong",
    )
    check.add_argument(
        "--database",
        help="postgresql://... URL or SQLite file path (default: DATABASE_URL or DATABASE_PATH)",
    )
    check.add_argument(
        "--repair",
        action="store_true",
        help="rebuild the search index from the turns, then check again (stop the bot first)",
    )


class ProgressBar:
    """One line per table, redrawn in place on a terminal; a line per table elsewhere."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._live = out.isatty()
        self._drawn = 0.0

    def __call__(self, table: str, done: int, total: int) -> None:
        finished = done >= total
        if not self._live and not finished:
            return
        now = time.monotonic()
        if self._live and not finished and now - self._drawn < 0.1:
            return
        self._drawn = now
        filled = BAR_WIDTH if total == 0 else BAR_WIDTH * done // total
        line = f"{table:<18} [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {done:,}/{total:,}"
        self._out.write(("\r" if self._live else "") + line + ("\n" if finished else ""))
        self._out.flush()


def _check_paths(source: str, target: str | None) -> None:
    """A SQLite source must exist (opening it would create it), a SQLite target must not."""
    if not is_postgres(source) and not Path(source.removeprefix("sqlite:///")).is_file():
        raise UserFacingError(f"no SQLite database at {source}: give the path of the file")
    if (
        target is not None
        and not is_postgres(target)
        and Path(target.removeprefix("sqlite:///")).exists()
    ):
        raise UserFacingError(
            f"{target} already exists: copy into a new SQLite file (a path that does not exist)"
        )


async def _open(url: str, flag: str, migrate: bool = True) -> MemoryStore:
    """The store at `url`; when it cannot be reached, the error names the flag that gave the
    address (the store's own message names DATABASE_URL, which the copy does not read)."""
    try:
        return await open_store(url, migrate=migrate)
    except StoreUnavailable as exc:
        raise UserFacingError(str(exc).replace("DATABASE_URL", flag)) from exc


async def run_db(args: argparse.Namespace, default_target: str) -> int:
    if args.db_action == "check":
        return await _check(args.database or default_target, repair=args.repair)
    return await _copy(args)


REPAIR_HINT = (
    "rebuild the search index from the turns with `companion db check --repair` (stop the "
    "bot first); if the file itself is damaged, restore it from a backup"
)


async def _check(target: str, *, repair: bool) -> int:
    """Check (and with `repair` first rebuild) the search index; exit code 1 on a problem."""
    _check_paths(target, None)
    # A URL holds a password: name the database by kind, never by its URL.
    name = "the PostgreSQL database" if is_postgres(target) else target
    store = await open_store(target, migrate=False)
    try:
        if repair:
            rebuilt = await store.rebuild_search_index()
            if rebuilt is None:
                print(f"{name}: nothing to rebuild (each turn's search column is in its row)")
            else:
                print(f"{name}: search index rebuilt from {rebuilt:,} turn(s)")
        result = await store.integrity_check()
    finally:
        await store.close()
    if result == "ok":
        print(f"{name}: ok (the database and its search index)")
        return 0
    print(f"{name}: PROBLEM: {result}")
    print(REPAIR_HINT)
    return 1


async def _copy(args: argparse.Namespace) -> int:
    """Copy, verify, and say what moved; a refusal is one line and exit code 2."""
    _check_paths(args.source, args.target)
    source = await _open(args.source, "--from", migrate=False)
    try:
        target = await _open(args.target, "--to")
        try:
            if await source.schema_version() != await target.schema_version():
                raise UserFacingError(
                    "the source's schema is older than this bot's: run `companion migrate` "
                    "with DATABASE_URL or DATABASE_PATH pointing at the source first"
                )
            report = await copy_deployment(source, target, ProgressBar(sys.stderr))
        finally:
            await target.close()
    except CopyRefused as refused:
        raise UserFacingError(str(refused)) from refused
    finally:
        await source.close()
    tables = len(report.tables)
    print(f"copied {report.rows:,} row(s) in {tables} tables; counts and checksums verified")
    return 0
