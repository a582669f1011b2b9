"""Live reload of characters: a changed file applies to new turns, a broken one is refused.

The folder is polled (file modification times) by the scheduler, and admins can force a reload
with `/personaje recargar`. A broken file never replaces what is serving: the error goes to the
log (and to the admin who asked), and its previous version keeps answering, while the other
files' edits are taken.
"""

from __future__ import annotations

import logging
from pathlib import Path

from cards.character import (
    Character,
    CharacterBook,
    CharacterFileError,
    FolderRead,
    read_folder,
)

log = logging.getLogger(__name__)


class CharacterReloader:
    def __init__(self, folder: Path, book: CharacterBook) -> None:
        self._folder = folder
        self._book = book
        self._seen = self._snapshot()

    def _snapshot(self) -> dict[str, float]:
        paths = [
            *self._folder.glob("*.yaml"),
            *self._folder.glob("*.yml"),
            *self._folder.glob("*.lore/*.md"),
        ]
        return {str(path): path.stat().st_mtime for path in paths if path.is_file()}

    def reload(self) -> str:
        """Load the folder again and serve it, file by file: the valid files as they are now,
        a broken file's previous version (a new broken file is not served). Raises
        CharacterFileError naming the broken files once the rest is served."""
        self._seen = self._snapshot()
        read = read_folder(self._folder)
        served = self._with_previous(read)
        if not served:
            raise (
                CharacterFileError.of_files(read.broken)
                if read.broken
                else CharacterFileError(
                    f"{self._folder}: holds no character file (*.yaml); still serving the previous"
                )
            )
        self._book.replace_with(CharacterBook(served))
        if read.broken:
            raise CharacterFileError.of_files(read.broken)
        message = f"reloaded {len(served)} character(s): {', '.join(sorted(served))}"
        log.info(message)
        return message

    def _with_previous(self, read: FolderRead) -> dict[str, Character]:
        """The read's characters, plus the serving version of every file now broken."""
        served = dict(read.characters)
        broken = {problem.path for problem in read.broken}
        for character in self._book.all():
            if character.source_path in broken and character.id not in served:
                served[character.id] = character
        return served

    async def check(self) -> bool:
        """The scheduler's poll: reload when a file changed; True when something was taken."""
        if self._snapshot() == self._seen:
            return False
        try:
            self.reload()
        except CharacterFileError as exc:
            log.error(
                "character files changed but some are invalid; still serving the previous "
                "version of those (the other files are reloaded):\n%s",
                exc,
            )
            return False
        return True
