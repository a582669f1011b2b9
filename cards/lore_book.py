"""A card's `character_book` <-> our lore pages, both ways.

Enabled entries with content become pages (title from the entry's name, comment or first key;
description from its comment or first sentence). The book's settings and each entry's keys and
flags stay in `card_passthrough.character_book`, by page slug, so that export rebuilds the same
book from the pages as they are then.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from cards.lore_files import LorePage, unique_slugs


def pages_from_book(
    book: dict[str, Any] | None,
) -> tuple[list[LorePage], dict[str, Any] | None, list[str]]:
    """Enabled entries become pages; the book's settings and each entry's keys and flags stay
    in the passthrough (by slug) so that export rebuilds the same book. Card macros stay as
    written: they are expanded when the character is loaded."""
    if not book:
        return [], None, []
    entries = [e for e in book.get("entries", []) if isinstance(e, dict)]
    usable = [e for e in entries if e.get("enabled", True) and (e.get("content") or "").strip()]
    titles = [_entry_title(e, n) for n, e in enumerate(usable, 1)]
    slugs = iter(unique_slugs(titles, "page"))
    usable_ids = {id(e) for e in usable}
    pages, metadata, constant = [], [], []
    for entry in entries:
        if id(entry) not in usable_ids:
            metadata.append(entry)  # disabled or empty: kept whole, for export only
            continue
        title = titles[len(pages)]
        content = entry["content"].strip()
        page = LorePage(
            slug=next(slugs),
            title=title,
            description=_entry_description(entry, title, content),
            content=content,
        )
        pages.append(page)
        metadata.append({"slug": page.slug, **{k: v for k, v in entry.items() if k != "content"}})
        if entry.get("constant"):
            constant.append(page.slug)
    settings = {k: v for k, v in book.items() if k != "entries"}
    notes = []
    if constant:
        notes.append(
            f"lore: {', '.join(constant)} always sat in the card's context ('constant'); here "
            "pages are read on demand: move what the character must always know into the sheet"
        )
    if len(metadata) > len(pages):
        skipped = len(metadata) - len(pages)
        notes.append(f"lore: {skipped} disabled or empty entries kept for export only")
    return pages, {**settings, "entries": metadata}, notes


def _entry_title(entry: dict[str, Any], number: int) -> str:
    keys = [k for k in entry.get("keys") or [] if isinstance(k, str) and k.strip()]
    for candidate in (entry.get("name"), entry.get("comment"), keys[0] if keys else None):
        if isinstance(candidate, str) and candidate.strip():
            return " ".join(candidate.split())[:80]
    return f"Entry {number}"


def _entry_description(entry: dict[str, Any], title: str, content: str) -> str:
    comment = (entry.get("comment") or "").strip()
    if comment and comment != title:
        return " ".join(comment.split())[:160]
    # The first line of prose: a heading would only repeat the title.
    prose = (line.strip() for line in content.splitlines() if not line.lstrip().startswith("#"))
    first_line = next((line for line in prose if line), "")
    sentence = re.split(r"(?<=[.!?])\s", first_line, maxsplit=1)[0]
    return sentence if len(sentence) <= 160 else sentence[:157].rstrip() + "…"


def book_from_pages(
    pages: Sequence[LorePage], kept: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The card's book rebuilt from the pages as they are now: edited pages export their new
    text, deleted pages drop out, new pages get an entry keyed by their title."""
    settings = dict(kept or {})
    metadata: list[dict[str, Any]] = list(settings.pop("entries", []))
    by_slug = {page.slug: page for page in pages}
    entries: list[dict[str, Any]] = []
    for item in metadata:
        meta = dict(item)
        slug = meta.pop("slug", None)
        if slug is None:
            entries.append(meta)  # a disabled or empty entry, kept whole
        elif slug in by_slug:
            entries.append(_entry(by_slug.pop(slug), meta, len(entries)))
    entries += [_entry(page, {}, len(entries) + n) for n, page in enumerate(by_slug.values())]
    if not entries and not settings:
        return None
    if kept is None:  # a book made here: the fields the spec asks for
        return {"extensions": {}, "entries": entries}
    return {**settings, "entries": entries}  # the card's own book: only the fields it had


def _entry(page: LorePage, meta: dict[str, Any], position: int) -> dict[str, Any]:
    if meta:
        return _kept_entry(page, meta)
    entry: dict[str, Any] = {
        "keys": [page.title],
        "content": page.content,
        "extensions": {},
        "enabled": True,
        "insertion_order": position * 10,
        "name": page.title,
    }
    if page.description and page.description != page.title:
        entry["comment"] = page.description
    return entry


def _kept_entry(page: LorePage, meta: dict[str, Any]) -> dict[str, Any]:
    """An imported entry as the card wrote it, with no field it lacked; the page is the truth
    now, so its text, and its title or description where a human changed them, win."""
    entry = {**meta, "content": page.content}
    if page.title != _entry_title(entry, 1):
        entry["name"] = page.title
    if page.description != _entry_description(entry, page.title, page.content):
        entry["comment"] = page.description
    return entry
