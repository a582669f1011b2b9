"""SillyTavern character cards (V2 `chara_card_v2`, V3 `chara_card_v3`) in and out.

Import reads a card from JSON or from the PNG that embeds it (base64 JSON in a tEXt chunk named
`chara`, or `ccv3`, which wins) and maps it onto our sheet. Cards are written for a different
prompt, so the mapping is partial by nature; everything it could not state honestly is listed
in `ImportedCard.notes` for a human, and everything the prompt does not use is kept in
`Character.card_passthrough` so that export gives it back.

Mapping:
  name                      -> name; id = slug of the name
  description (+ scenario)  -> identity.description ("Scenario: …" as its last paragraph)
  personality               -> traits (split on lines, else on commas/semicolons)
  first_mes                 -> the pinned opening message
  character_book entries    -> lore pages (characters/<id>.lore/<slug>.md)
  everything else           -> card_passthrough (example dialogue, alternate greetings,
                               system_prompt, post_history_instructions, tags, extensions…)
  {{char}} / {{user}}       -> the name / "the user" (in the text we use; passthrough stays raw)
Export (`card_from_character`, in memory/card_export.py) also writes our own fields under
`extensions.companion`, which import reads back, so that a card made here round trips.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from memory.card_export import card_from_character, character_yaml, save_imported
from memory.card_lore import pages_from_book
from memory.card_png import PngError, is_png, text_chunks
from memory.card_text import (
    COMPANION_EXTENSION,
    THE_USER,
    detect_language,
    expand_macros,
    find_age,
    mentions_user,
    speech_rule,
    split_traits,
    with_scenario,
    words,
)
from memory.characters import Character
from memory.lore_files import LorePage, slugify

__all__ = [
    "CardError",
    "ImportedCard",
    "card_from_character",
    "character_from_card",
    "character_yaml",
    "import_card",
    "parse_card_bytes",
    "read_card",
    "save_imported",
]

SPECS = ("chara_card_v2", "chara_card_v3")
V1_MESSAGE = "V1 cards are not supported: open it in SillyTavern and save it as V2"
_TEXT_FIELDS = (
    "name", "description", "personality", "scenario", "first_mes", "mes_example",
    "creator_notes", "system_prompt", "post_history_instructions", "creator",
    "character_version", "nickname",
)  # fmt: skip
_LIST_FIELDS = ("alternate_greetings", "tags", "group_only_greetings")
# Fields the mapping turns into our sheet; every other field of `data` is passed through.
_CONSUMED = ("name", "description", "personality", "scenario", "first_mes", "character_book")
_NOT_STATED = {"en": "not stated in the card", "es": "no consta en la ficha"}
_TONE_FALLBACK = {"en": "true to the character", "es": "fiel al personaje"}


class CardError(ValueError):
    """A card cannot be imported; the message names the file and the problem."""


@dataclass(frozen=True)
class ImportedCard:
    character: Character
    lore: tuple[LorePage, ...]
    notes: tuple[str, ...]  # what a human must review, as "field: problem"
    source: str


# ---- reading --------------------------------------------------------------------------------


def read_card(path: Path) -> dict[str, Any]:
    """The card's JSON object, from a .json file or a PNG; errors name the file."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CardError(f"{path}: cannot be read: {exc.strerror or exc}") from exc
    return parse_card_bytes(raw, str(path), png=path.suffix.lower() == ".png")


def parse_card_bytes(raw: bytes, source: str, *, png: bool = False) -> dict[str, Any]:
    """Parse and check a card; `png` says the name promised a PNG even if the bytes do not."""
    if png or is_png(raw):
        text, where = _png_payload(raw, source)
    else:
        try:
            text, where = raw.decode("utf-8-sig"), ""
        except UnicodeDecodeError as exc:
            raise CardError(f"{source}: neither a PNG nor UTF-8 JSON text ({exc.reason})") from exc
    try:
        card = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CardError(
            f"{source}: invalid JSON{where}: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from exc
    check_card(card, source)
    return card


def _png_payload(raw: bytes, source: str) -> tuple[str, str]:
    try:
        chunks = text_chunks(raw)
    except PngError as exc:
        raise CardError(f"{source}: {exc}") from exc
    key = next((name for name in ("ccv3", "chara") if name in chunks), None)
    if key is None:
        raise CardError(
            f"{source}: the PNG holds no character card (no tEXt chunk named 'chara' or 'ccv3')"
        )
    try:
        decoded = base64.b64decode(chunks[key].strip(), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise CardError(f"{source}: PNG chunk '{key}' is not valid base64: {exc}") from exc
    try:
        return decoded.decode("utf-8-sig"), f" in PNG chunk '{key}'"
    except UnicodeDecodeError as exc:
        raise CardError(f"{source}: PNG chunk '{key}' does not decode to UTF-8 text") from exc


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
        (data.get(key) or "").strip() for key in ("description", "personality", "first_mes")
    ):
        raise CardError(
            f"{source}: the card has no 'data.description', 'data.personality' or "
            "'data.first_mes': nothing to build a character from"
        )


def _check_types(data: dict[str, Any], source: str) -> None:
    for key in _TEXT_FIELDS:
        if data.get(key) is not None and not isinstance(data[key], str):
            raise CardError(f"{source}: field 'data.{key}' must be text, not {_kind(data[key])}")
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
    for index, entry in enumerate(book.get("entries", [])):
        where = f"'data.character_book.entries.{index}'"
        if not isinstance(entry, dict) or not isinstance(entry.get("content", ""), str):
            raise CardError(f"{source}: field {where} must be an object with text 'content'")
        if not isinstance(entry.get("keys", []), list):
            raise CardError(f"{source}: field {where}.keys must be a list of texts")


def _kind(value: object) -> str:
    return {list: "a list", dict: "an object", bool: "true/false"}.get(type(value), "a number")


# ---- mapping --------------------------------------------------------------------------------


def import_card(path: Path) -> ImportedCard:
    return character_from_card(read_card(path), str(path))


def character_from_card(card: dict[str, Any], source: str = "card") -> ImportedCard:
    check_card(card, source)
    data: dict[str, Any] = card["data"]
    name = " ".join(data["name"].split())[:80]
    macro_name = (data.get("nickname") or "").strip() or name
    extensions = dict(data.get("extensions") or {})
    ours = extensions.pop(COMPANION_EXTENSION, None)
    ours = ours if isinstance(ours, dict) else None
    sample = " ".join(data.get(k) or "" for k in ("description", "personality", "first_mes"))
    language = (ours or {}).get("language") or detect_language(sample)

    def text(key: str) -> str:
        return expand_macros((data.get(key) or "").strip(), macro_name, language)

    pages, book_meta, lore_notes = pages_from_book(data.get("character_book"), macro_name, language)
    passthrough = _passthrough(card, data, extensions, book_meta)
    sheet = {
        "id": slugify(name, "character"),
        "name": name,
        "language": language,
        "description": with_scenario(text("description"), text("scenario"), language),
        "personality": text("personality"),
        "first_mes": text("first_mes"),
    }
    notes: list[str] = []
    if ours is not None:
        fields = _restored_fields(sheet, ours)
    else:
        fields = _derived_fields(sheet, data, notes)
        if mentions_user(data.get("first_mes") or ""):
            notes.append(
                f"opening_messages: the greeting named {{{{user}}}}, now '{THE_USER[language]}'"
                ": reread it, and say 'you' where it speaks to the user"
            )
    fields["card_passthrough"] = passthrough
    try:
        character = Character.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(
            f"field '{'.'.join(str(p) for p in e['loc'])}': {e['msg']}" for e in exc.errors()
        )
        raise CardError(f"{source}: the card does not make a valid character: {problems}") from exc
    notes += _passthrough_notes(passthrough, ours is not None) + lore_notes
    return ImportedCard(character, tuple(pages), tuple(notes), source)


def _opening(first_mes: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "text": first_mes}] if first_mes else []


def _derived_fields(
    sheet: dict[str, Any], data: dict[str, Any], notes: list[str]
) -> dict[str, Any]:
    """Our sheet from a foreign card: what cannot be derived honestly is noted, not invented."""
    lang, name = sheet["language"], sheet["name"]
    traits, trait_note = split_traits(sheet["personality"], lang)
    if trait_note:
        notes.append(f"traits: {trait_note}")
    style = " ".join([sheet["first_mes"], data.get("mes_example") or ""])
    rule, derived = speech_rule(name, style, lang)
    origin = "derived from the card's formatting only" if derived else "a neutral placeholder"
    notes.append(
        f"speech_rules: cards have none; '{rule}' is {origin}: a human must write 2-3 positive "
        "rules in the character's voice"
    )
    age = find_age(sheet["description"])
    notes.append(
        "identity: cards have no "
        + ("trade or place" if age else "age, trade or place")
        + f"; they read '{_NOT_STATED[lang]}' until a human fills them in"
    )
    short = all(len(words(t)) <= 3 for t in traits[:3]) and not trait_note
    tone = ", ".join(t.lower() for t in traits[:3]) if short else _TONE_FALLBACK[lang]
    if not short:
        notes.append(f"reminder.tone: set to '{tone}'; write the character's default tone")
    return {
        "id": sheet["id"],
        "name": name,
        "language": lang,
        "identity": {
            "age": age or _NOT_STATED[lang],
            "trade": _NOT_STATED[lang],
            "place": _NOT_STATED[lang],
            "description": sheet["description"],
        },
        "traits": traits,
        "speech_rules": [rule],
        "opening_messages": _opening(sheet["first_mes"]),
        "reminder": {"tone": tone, "main_rule": rule},
    }


def _restored_fields(sheet: dict[str, Any], ours: dict[str, Any]) -> dict[str, Any]:
    """A card exported by us: the card's own fields win (it may have been edited elsewhere);
    `extensions.companion` supplies what a card has no field for."""
    traits, _ = split_traits(sheet["personality"], sheet["language"])
    identity = {**ours.get("identity", {}), "description": sheet["description"]}
    fields = {key: value for key, value in ours.items() if key not in ("opening_messages_more",)}
    fields.update(
        id=ours.get("id", sheet["id"]),
        name=sheet["name"],
        identity=identity,
        traits=traits,
        opening_messages=_opening(sheet["first_mes"]) + list(ours.get("opening_messages_more", [])),
    )
    return fields


def _passthrough(
    card: dict[str, Any],
    data: dict[str, Any],
    extensions: dict[str, Any],
    book_meta: dict[str, Any] | None,
) -> dict[str, Any]:
    """Every field the sheet does not use, raw (macros unexpanded, as the card's apps expect)."""
    kept: dict[str, Any] = {"spec": card["spec"], "spec_version": card.get("spec_version", "")}
    for key, value in data.items():
        if key not in _CONSUMED and key != "extensions" and value not in ("", [], {}, None):
            kept[key] = value
    if extensions:
        kept["extensions"] = extensions
    if book_meta:
        kept["character_book"] = book_meta
    return kept


def _passthrough_notes(passthrough: dict[str, Any], ours: bool) -> list[str]:
    if ours:
        return []
    notes = []
    for key in ("system_prompt", "post_history_instructions"):
        if passthrough.get(key):
            notes.append(
                f"card_passthrough.{key}: not used in the prompt (our prompt has its own "
                "blocks); move what matters into the speech rules or the reminder"
            )
    if passthrough.get("mes_example"):
        notes.append(
            "card_passthrough.mes_example: example dialogue is not used in the prompt; "
            "distil its voice into the speech rules"
        )
    if passthrough.get("alternate_greetings"):
        count = len(passthrough["alternate_greetings"])
        notes.append(
            f"card_passthrough.alternate_greetings: {count} kept for export only; "
            "first_mes is the pinned opening message"
        )
    return notes
