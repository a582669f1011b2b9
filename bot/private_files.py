"""Files that hold a user's memory: written with mode 0600, never over an existing file unless
asked to."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


class SymlinkRefused(OSError):
    """The path is a symbolic link: writing through it would truncate whatever it points at."""


def write_private(path: Path, payload: bytes, *, overwrite: bool = False) -> None:
    """Write `payload` to `path`, readable by its owner only.

    Refuses (FileExistsError) when the file exists and `overwrite` is false, and
    (SymlinkRefused) when `path` is a symbolic link, even with `overwrite`; each check and the
    opening are one system call (O_EXCL, O_NOFOLLOW), so no other file can appear between them.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (os.O_TRUNC if overwrite else os.O_EXCL)
    try:
        descriptor = os.open(path, flags, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SymlinkRefused(
                errno.ELOOP, "is a symbolic link; give the path of a real file", str(path)
            ) from exc
        raise
    try:
        os.fchmod(descriptor, 0o600)  # an overwritten file keeps its old mode otherwise
        with os.fdopen(descriptor, "wb", closefd=False) as file:
            file.write(payload)
    finally:
        os.close(descriptor)


def private_folder(folder: Path) -> None:
    """Make `folder` (0700), or make it 0700 when an older version left it open to others: for
    the bot's own folders (the exports), never a folder a user named."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    if stat.S_IMODE(folder.stat().st_mode) & 0o077:
        folder.chmod(0o700)


def write_private_file(folder: Path, name: str, payload: bytes) -> Path:
    """Write `payload` as `folder/name` (the folder made private), or `name-2`, `name-3`...
    when taken; the path used."""
    private_folder(folder)
    base = Path(name)
    for attempt in range(1, 10_000):
        candidate = folder / (name if attempt == 1 else f"{base.stem}-{attempt}{base.suffix}")
        try:
            write_private(candidate, payload)
        except FileExistsError:
            continue
        return candidate
    raise FileExistsError(f"{folder / name}: too many files of that name")
