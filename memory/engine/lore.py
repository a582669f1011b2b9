"""The lore index: the map in the cached prompt, one line per page, never the territory."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

DESCRIPTION_CHARS = 110
MAX_HEADINGS = 9
_HEADING = re.compile(r"^##\s+(.+?)\s*#*\s*$", re.MULTILINE)

TITLES = {
    "es": "Tu lore (lee una página con read_lore, como mucho dos a la vez)",
    "en": "Your lore (read a page with read_lore, at most two at a time)",
}


class LorePageLike(Protocol):
    slug: str
    title: str
    description: str
    content: str


def headings(content: str) -> list[str]:
    return _HEADING.findall(content)


def index_line(page: LorePageLike) -> str:
    description = page.description.strip().replace("\n", " ")
    if len(description) > DESCRIPTION_CHARS:
        description = description[: DESCRIPTION_CHARS - 1].rstrip() + "…"
    line = f"- {page.slug}: {page.title}"
    if description:
        line += f" — {description}"
    shown = headings(page.content)[:MAX_HEADINGS]
    if shown:
        line += f" [{'; '.join(shown)}]"
    return line


def render_lore_index(pages: Sequence[LorePageLike], language: str) -> str:
    if not pages:
        return ""
    return "\n".join([f"## {TITLES.get(language, TITLES['en'])}", *map(index_line, pages)])
