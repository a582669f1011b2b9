"""Writing what cards/sillytavern.py reads: the imported character's YAML and lore pages, and a
Character Card V2 (JSON) from any character."""

from __future__ import annotations

import base64
import json
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from cards.character import Character
from cards.checks import as_text
from cards.imported import ImportedCard
from cards.lore_book import book_from_pages
from cards.lore_files import LorePage, lore_folder, write_pages
from cards.png import png_with_text, with_text_chunks
from cards.text import COMPANION_EXTENSION, split_scenario, split_traits

# The order a human reads a sheet in; model/temperature/retrieval/journey only when set.
_KEY_ORDER = (
    "id", "name", "language", "rating", "identity", "traits", "speech_rules", "does_not_know",
    "opening_messages", "reminder", "model", "temperature", "retrieval", "journey",
    "journey_reason", "canon", "canon_reason", "aliases", "talkativeness", "card_passthrough",
)  # fmt: skip
_DEFAULTS: dict[str, object] = {
    "rating": "general", "retrieval": "auto", "journey": True, "journey_reason": "", "aliases": [],
    "talkativeness": 0.5, "canon": True, "canon_reason": "",
}  # fmt: skip
_COMMENTS = {
    "does_not_know": "Cards have no such list: add what the character does not know (it is the "
    "field that\n# prevents most contradictions).",
    "card_passthrough": "Kept only for `companion characters export`: never read into the prompt. "
    "It holds the\n# card's system_prompt and post_history_instructions (our prompt has its own "
    "blocks),\n# example dialogue, alternate greetings, lore book settings and unknown extensions.",
}
# What a card has no field for: carried under extensions.companion.
_OURS: tuple[str, ...] = (
    "id", "language", "rating", "speech_rules", "does_not_know", "reminder", "model", "temperature",
    "journey", "journey_reason", "aliases", "talkativeness",
)  # fmt: skip
_OURS += ("canon", "canon_reason")  # canon proposals' opt-out (memory/canon/)


class _Dumper(yaml.SafeDumper):
    """Multi-line text as literal blocks, so that descriptions stay readable and diffable."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


def _dump(value: dict[str, Any]) -> str:
    return yaml.dump(value, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)


def character_yaml(imported: ImportedCard) -> str:
    """The YAML file of an imported card, with the review notes as its header comment."""
    fields = imported.character.as_written().model_dump(mode="json")
    lines = [f"# Imported from {Path(imported.source).name} by `companion characters import`."]
    if imported.notes:
        lines.append("# Needs a human:")
        for note in imported.notes:
            lines += textwrap.wrap(note, 98, initial_indent="#   - ", subsequent_indent="#     ")
    text = "\n".join(lines) + "\n"
    for key in _KEY_ORDER:
        value = fields.get(key)
        if value is None or (key in _DEFAULTS and value == _DEFAULTS[key]):
            continue
        if key == "card_passthrough" and not value:
            continue
        if key in _COMMENTS and (key != "does_not_know" or not value):
            text += f"# {_COMMENTS[key]}\n"
        text += _dump({key: value})
    return text


def save_imported(
    imported: ImportedCard, folder: Path, *, overwrite: bool = False
) -> tuple[Path, list[Path]]:
    """Write `<id>.yaml` and `<id>.lore/*.md`; FileExistsError names what is in the way."""
    character = imported.character
    path = folder / f"{character.id}.yaml"
    pages_dir = lore_folder(folder, character.id)
    if not overwrite:
        for existing in (path, *sorted(pages_dir.glob("*.md"))):
            if existing.exists():
                raise FileExistsError(f"{existing} already exists")
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(character_yaml(imported), encoding="utf-8")
    if imported.avatar is not None:
        avatar_path(path).write_bytes(imported.avatar)
    # Pages of an earlier import are replaced too: stale pages would survive in the index.
    lore = imported.lore  # as the card wrote them: macros are expanded when loaded
    pages = write_pages(pages_dir, lore) if lore or pages_dir.is_dir() else []
    return path, pages


def avatar_path(character_file: Path) -> Path:
    """`<id>.avatar.png` beside the character's YAML: the image of a card imported from PNG."""
    return character_file.with_name(f"{character_file.stem}.avatar.png")


def card_png(card: dict[str, Any], avatar: bytes | None) -> bytes:
    """The card embedded in its avatar (a blank image when it has none), as SillyTavern does:
    base64 JSON in a tEXt chunk named `chara`."""
    payload = base64.b64encode(json.dumps(card, ensure_ascii=False).encode("utf-8")).decode()
    image = avatar if avatar is not None else png_with_text({}, 400, 600)
    return with_text_chunks(image, {"chara": payload}, drop=("ccv3",))


def card_from_character(
    character: Character, lore_pages: Sequence[LorePage] | None = None
) -> dict[str, Any]:
    """A Character Card V2 (`chara_card_v2`, spec_version 2.0) as a JSON-ready dict.

    `lore_pages` defaults to the character's own pages (its YAML `lore:` and its `.lore/`
    folder, as loaded). Only the first opening message is a card's `first_mes` (in the
    character's language); the others ride in `extensions.companion`, and the greeting's other
    languages are alternate greetings too.
    """
    character = character.as_written()  # a card keeps its {{char}} and {{user}} macros
    if lore_pages is None:
        lore_pages = character.lore
    kept = dict(character.card_passthrough)
    description, scenario = split_scenario(character.identity.description, character.language)
    first, others, openings = _greeting(character)
    ours = character.model_dump(mode="json", include=set(_OURS))
    ours["identity"] = character.identity.model_dump(mode="json", exclude={"description"})
    ours["retrieval"] = character.retrieval
    if openings:
        ours["opening_messages_more"] = openings
    if others:  # the greeting in other languages: alternate greetings, for card apps
        ours["greeting_languages"] = others
    data: dict[str, Any] = {
        "name": character.name,
        "description": description,
        "personality": _personality(character, kept.get("personality")),
        "scenario": scenario,
        "first_mes": first,
    }
    for key in ("mes_example", "creator_notes", "system_prompt", "post_history_instructions"):
        data[key] = kept.get(key, "")
    for key in ("alternate_greetings", "tags"):
        data[key] = list(kept.get(key, []))
    data["tags"] = rating_tags(data["tags"], character.rating)
    alternates = data["alternate_greetings"]
    alternates += [text for text in others.values() if text not in alternates]
    data["creator"] = kept.get("creator", "")
    data["character_version"] = kept.get("character_version", "")
    data["extensions"] = {**kept.get("extensions", {}), COMPANION_EXTENSION: ours}
    book = book_from_pages(lore_pages, kept.get("character_book"))
    if book is not None:
        data["character_book"] = book
    skip = {"spec", "spec_version", "character_book", "extensions"}
    # Fields of newer specs (V3's nickname, assets…): readers of V2 ignore keys they lack.
    data.update({k: v for k, v in kept.items() if k not in data and k not in skip})
    return {"spec": "chara_card_v2", "spec_version": "2.0", "data": data}


def is_nsfw_tag(tag: object) -> bool:
    """SillyTavern's marker of a card for adults: a tag containing "nsfw", in any case."""
    return isinstance(tag, str) and "nsfw" in tag.casefold()


def rating_tags(tags: list[Any], rating: str) -> list[Any]:
    """The card's tags saying the character's rating: an "NSFW" tag when mature, none when
    general (the YAML's rating is the truth an admin edits)."""
    others = [t for t in tags if not is_nsfw_tag(t)]
    if rating != "mature":
        return others
    return tags if any(is_nsfw_tag(t) for t in tags) else [*tags, "NSFW"]


def _greeting(character: Character) -> tuple[str, dict[str, str], list[dict[str, Any]]]:
    """The card's first_mes (the greeting in the character's language), the greeting in its
    other languages, and the opening messages after it (as dicts)."""
    openings = [m.model_dump(mode="json") for m in character.opening_messages]
    if not openings or openings[0]["role"] != "assistant":
        return "", {}, openings
    greeting, own = character.opening_messages[0], character.language
    others = {
        language: greeting.text_in(language, own)
        for language in greeting.languages(own)
        if language != own
    }
    return greeting.text_in(own, own), others, openings[1:]


def _personality(character: Character, original: object) -> object:
    """The card's own personality while the traits are still the ones derived from it; else
    the traits, joined as the card joined them (commas, or one a line)."""
    traits = list(character.traits)
    if original is None:
        return "\n".join(traits)
    text = as_text(original)
    if split_traits(text, character.language)[0] == traits:
        return original
    return "\n".join(traits) if "\n" in text.strip() else ", ".join(traits)
