"""The database file on disk: every user's words, so readable by its owner only.

SQLite creates the file with the process's umask (0644 usually) and gives its `-wal` and `-shm`
the main file's mode; so the main file is made 0600 as soon as it is opened, before the WAL
pragma creates the other two, and those inherit it. A folder created here is 0700; an existing
folder that others can enter is only warned about, since it may hold more than the database.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from memory.store.errors import EmptyDatabaseFile

log = logging.getLogger(__name__)

PRIVATE_FILE = 0o600
PRIVATE_FOLDER = 0o700
SIDE_FILES = ("-wal", "-shm", "-journal")


def prepare(path: Path) -> None:
    """Refuse a 0-byte database file, and make the folder (0700) when there is none."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        size = None
    if size == 0:
        raise EmptyDatabaseFile(
            f"the database {path} is an empty file (0 bytes), not a database: restore it from "
            "a backup, or delete it to start with a new, empty memory"
        )
    folder = path.parent
    try:
        folder.mkdir(parents=True, mode=PRIVATE_FOLDER)
    except FileExistsError:
        mode = stat.S_IMODE(folder.stat().st_mode)
        if mode & 0o077:
            log.warning(
                "the database folder %s can be entered by other users (mode %o); the database "
                "files are private (0600), but to hide them too: chmod 700 %s",
                folder,
                mode,
                folder,
            )


def make_private(path: Path) -> None:
    """Mode 0600 for the database file and whichever of its side files exist (a database
    made by an older version was 0644). Run right after SQLite opens (creates) the file."""
    for candidate in (path, *(Path(f"{path}{suffix}") for suffix in SIDE_FILES)):
        try:
            if stat.S_IMODE(candidate.stat().st_mode) != PRIVATE_FILE:
                os.chmod(candidate, PRIVATE_FILE)
        except FileNotFoundError:
            continue
        except PermissionError:
            log.warning(
                "cannot make %s private (not its owner): chmod 600 %s", candidate, candidate
            )
