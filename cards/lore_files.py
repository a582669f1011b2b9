"""Lore pages on disk: `characters/<id>.lore/<slug>.md`, one Markdown file per page.

A page file reads:

    # Title
                                      (blank line)
    > One-line description for the lore index.
                                      (blank line)
    Content, with its own `## ` headings.

The slug is the file name; the prompt's lore index shows slug, title, description and the
`## ` headings, and `read_lore` returns the content.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

SLUG_MAX = 41  # the length a character id may have; page slugs follow the same pattern
_H1 = re.compile(r"^# ", re.MULTILINE)


class LoreFileError(ValueError):
    """A page file is malformed; the message names the file."""


@dataclass(frozen=True)
class LorePage:
    slug: str
    title: str
    description: str
    content: str


def slugify(text: str, fallback: str) -> str:
    """'Café Noir!' -> 'cafe_noir'; `fallback` when nothing ASCII is left (e.g. 'ミク')."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "_", ascii_text.lower()).strip("_")[:SLUG_MAX].rstrip("_")
    return slug or fallback


def unique_slugs(names: Iterable[str], fallback: str) -> list[str]:
    """One slug per name, suffixed _2, _3… where two names collide."""
    seen: set[str] = set()
    slugs = []
    for name in names:
        base = slugify(name, fallback)
        slug, number = base, 2
        while slug in seen:
            slug = f"{base[: SLUG_MAX - 4]}_{number}"
            number += 1
        seen.add(slug)
        slugs.append(slug)
    return slugs


def lore_folder(characters_dir: Path, character_id: str) -> Path:
    return characters_dir / f"{character_id}.lore"


def render_page(page: LorePage) -> str:
    # The title is the page's only H1: a '# ' heading inside the content would read as a second
    # page title to the index, so it becomes a '## ' section.
    content = _H1.sub("## ", page.content.strip())
    lines = [f"# {page.title}", ""]
    if page.description:
        lines += [f"> {' '.join(page.description.split())}", ""]
    return "\n".join([*lines, content]) + "\n"


def parse_page(path: Path) -> LorePage:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LoreFileError(f"{path}: cannot be read: {exc}") from exc
    first, _, rest = text.partition("\n")
    if not first.startswith("# ") or not first[2:].strip():
        raise LoreFileError(f"{path}: the first line must be the page title, as '# Title'")
    body = rest.lstrip("\n")
    description_lines = []
    while body.startswith(">"):
        line, _, body = body.partition("\n")
        description_lines.append(line.lstrip(">").strip())
    return LorePage(
        slug=path.stem,
        title=first[2:].strip(),
        description=" ".join(filter(None, description_lines)),
        content=body.strip(),
    )


def read_pages(folder: Path) -> list[LorePage]:
    """Every page of the folder, by file name; none when the folder does not exist."""
    if not folder.is_dir():
        return []
    return [parse_page(path) for path in sorted(folder.glob("*.md"))]


def write_pages(folder: Path, pages: Iterable[LorePage]) -> list[Path]:
    """Replace the folder's pages with `pages` (the caller has checked for overwriting)."""
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*.md"):
        stale.unlink()
    written = []
    for page in pages:
        path = folder / f"{page.slug}.md"
        path.write_text(render_page(page), encoding="utf-8")
        written.append(path)
    return written
