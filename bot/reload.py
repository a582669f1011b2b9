"""Live reload of characters: a changed file applies to new turns, a broken one is refused.

The folder is polled (file modification times) by the scheduler, and admins can force a reload
with `/personaje recargar`. A broken file never replaces what is serving: the error goes to the
log (and to the admin who asked), and the previous version keeps answering.
"""

from __future__ import annotations

import logging
from pathlib import Path

from cards.character import CharacterBook, CharacterFileError

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
        """Load the folder again and serve it; raises CharacterFileError and keeps the old."""
        self._seen = self._snapshot()
        newer = CharacterBook.load(self._folder)
        self._book.replace_with(newer)
        message = f"reloaded {len(newer.ids())} character(s): {', '.join(newer.ids())}"
        log.info(message)
        return message

    async def check(self) -> bool:
        """The scheduler's poll: reload when a file changed; True when something was taken."""
        if self._snapshot() == self._seen:
            return False
        try:
            self.reload()
        except CharacterFileError as exc:
            log.error(
                "character files changed but are invalid; still serving the previous version:\n%s",
                exc,
            )
            return False
        return True
