"""What reading a SillyTavern card gives (cards/sillytavern.py) and writing it takes
(cards/export.py): the character, its lore pages, what a human must review, and the avatar."""

from __future__ import annotations

from dataclasses import dataclass

from cards.character import Character
from cards.lore_files import LorePage


@dataclass(frozen=True)
class ImportedCard:
    character: Character
    lore: tuple[LorePage, ...]
    notes: tuple[str, ...]  # what a human must review, as "field: problem"
    source: str
    # The PNG's image without its card chunks, for `<id>.avatar.png` (None for a JSON card).
    avatar: bytes | None = None
