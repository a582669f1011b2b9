"""Errors every backend raises the same way, so that callers never name a backend."""

from __future__ import annotations

import re
from importlib import resources

_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


class SchemaTooNewError(RuntimeError):
    """The database was written by a newer version of the bot."""


class StoreUnavailable(RuntimeError):
    """The database server cannot be reached or refuses the connection; the message names it
    (never with its password) and what to check."""


class EmptyDatabaseFile(StoreUnavailable):
    """The database path holds a file of 0 bytes: SQLite would silently start a new, empty
    database in it, hiding that the real one was lost (a failed copy, a full disk)."""


class ConversationGone(LookupError):
    """The conversation was deleted under the engine (by `companion memory forget` in another
    process): nothing can be added to it any more."""


def available_migrations(dialect: str) -> list[tuple[int, str, str]]:
    """(version, file name, SQL) of every migration of `dialect` ("sqlite" or "postgres"), in
    order. Both dialects share the numbering: version N is the same change in each."""
    found = []
    for entry in resources.files(f"migrations.{dialect}").iterdir():
        match = _MIGRATION_NAME.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    return sorted(found)


def refuse_unknown_versions(where: str, applied: set[int], dialect: str) -> None:
    """Raise SchemaTooNewError when `applied` holds a version this code does not know."""
    known = {version for version, _, _ in available_migrations(dialect)}
    unknown = sorted(applied - known)
    if unknown:
        raise SchemaTooNewError(
            f"{where} has schema migration(s) {unknown} that this version of the bot "
            f"does not know (it knows up to {max(known)}): upgrade the bot, or use a copy "
            "of the database made before the upgrade"
        )
