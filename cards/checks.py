"""What a character card must be before it is mapped: its spec, the types of its fields, and
limits that keep a card from becoming a sheet nobody can afford to send or a file that
exhausts memory. Every refusal names the file, the field and, for a limit, the excess."""

from __future__ import annotations

from typing import Any

SPECS = ("chara_card_v2", "chara_card_v3")
V1_MESSAGE = "V1 cards are not supported: open it in SillyTavern and save it as V2"
_TEXT_FIELDS = (
    "name", "description", "personality", "scenario", "first_mes", "mes_example",
    "creator_notes", "system_prompt", "post_history_instructions", "creator",
    "character_version", "nickname",
)  # fmt: skip
_LIST_FIELDS = ("alternate_greetings", "tags", "group_only_greetings")
# Limits that keep a card from becoming a sheet nobody can afford to send (a 6 MB description
# is 1.7M tokens) or a file that exhausts memory; real cards stay far below them.
MAX_CARD_BYTES = 16 * 1024 * 1024
MAX_JSON_DEPTH = 32
MAX_SHEET_FIELD_CHARS = 20_000  # description, personality, scenario, first_mes: in the prompt
MAX_OTHER_FIELD_CHARS = 100_000  # kept for export only
MAX_LORE_ENTRIES = 500
MAX_LORE_ENTRY_CHARS = 40_000
_SHEET_FIELDS = ("description", "personality", "scenario", "first_mes")


class CardError(ValueError):
    """A card cannot be imported; the message names the file and the problem."""


def json_depth(text: str, stop_after: int) -> int:
    """How deep objects and arrays nest (outside strings), in one linear pass; it stops
    counting past `stop_after`, so a hostile file costs no more than a sane one."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > stop_after:
                    return deepest
        elif char in "]}":
            depth -= 1
    return deepest


def check_card(card: object, source: str) -> None:
    """Raise CardError naming the first problem that would stop the import."""
    if not isinstance(card, dict):
        raise CardError(f"{source}: expected a JSON object at the top level of the card")
    spec = card.get("spec")
    if spec is None:
        if any(key in card for key in ("name", "char_name", "first_mes", "char_persona")):
            raise CardError(f"{source}: no 'spec' field: {V1_MESSAGE}")
        raise CardError(f"{source}: not a character card: no 'spec' field")
    if spec not in SPECS:
        raise CardError(f"{source}: unsupported spec {spec!r}; expected one of {', '.join(SPECS)}")
    data = card.get("data")
    if not isinstance(data, dict):
        raise CardError(f"{source}: required field 'data' is missing or not an object")
    _check_types(data, source)
    if not (data.get("name") or "").strip():
        raise CardError(f"{source}: required field 'data.name' is missing or empty")
    if not any(
        as_text(data.get(key)).strip() for key in ("description", "personality", "first_mes")
    ):
        raise CardError(
            f"{source}: the card has no 'data.description', 'data.personality' or "
            "'data.first_mes': nothing to build a character from"
        )


def as_text(value: object) -> str:
    """A text field; a personality given as a list of traits reads as one trait a line."""
    if isinstance(value, list):
        return "\n".join(str(item) for item in value)
    return value if isinstance(value, str) else ""


def _check_types(data: dict[str, Any], source: str) -> None:
    for key in _TEXT_FIELDS:
        value = data.get(key)
        if key == "personality" and isinstance(value, list):
            if not all(isinstance(item, str) for item in value):
                raise CardError(f"{source}: field 'data.personality' must be text or texts")
        elif value is not None and not isinstance(value, str):
            raise CardError(f"{source}: field 'data.{key}' must be text, not {_kind(value)}")
        limit = MAX_SHEET_FIELD_CHARS if key in _SHEET_FIELDS else MAX_OTHER_FIELD_CHARS
        _check_length(f"data.{key}", as_text(value), limit, source)
    for key in _LIST_FIELDS:
        value = data.get(key)
        if value is not None and not (
            isinstance(value, list) and all(isinstance(v, str) for v in value)
        ):
            raise CardError(f"{source}: field 'data.{key}' must be a list of texts")
    if data.get("extensions") is not None and not isinstance(data["extensions"], dict):
        raise CardError(f"{source}: field 'data.extensions' must be an object")
    book = data.get("character_book")
    if book is None:
        return
    if not isinstance(book, dict) or not isinstance(book.get("entries", []), list):
        raise CardError(f"{source}: field 'data.character_book' must be an object with 'entries'")
    if len(book.get("entries", [])) > MAX_LORE_ENTRIES:
        count = len(book["entries"])
        raise CardError(
            f"{source}: field 'data.character_book.entries' has {count} entries; the limit is "
            f"{MAX_LORE_ENTRIES} (over by {count - MAX_LORE_ENTRIES})"
        )
    for index, entry in enumerate(book.get("entries", [])):
        where = f"'data.character_book.entries.{index}'"
        if not isinstance(entry, dict) or not isinstance(entry.get("content", ""), str):
            raise CardError(f"{source}: field {where} must be an object with text 'content'")
        if not isinstance(entry.get("keys", []), list):
            raise CardError(f"{source}: field {where}.keys must be a list of texts")
        _check_length(
            where.strip("'") + ".content", entry.get("content") or "", MAX_LORE_ENTRY_CHARS, source
        )


def _check_length(field: str, text: str, limit: int, source: str) -> None:
    if len(text) > limit:
        raise CardError(
            f"{source}: field '{field}' has {len(text):,} characters; the limit is {limit:,} "
            f"(over by {len(text) - limit:,}): shorten it, or move background into lore pages"
        )


def _kind(value: object) -> str:
    return {list: "a list", dict: "an object", bool: "true/false"}.get(type(value), "a number")
