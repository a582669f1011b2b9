"""SillyTavern character cards (V2 `chara_card_v2`, V3 `chara_card_v3`) in and out.

Import reads a card from JSON or from the PNG that embeds it (base64 JSON in a tEXt chunk named
`chara`, or `ccv3`, which wins) and maps it onto our sheet. Cards are written for a different
prompt, so the mapping is partial by nature; everything it could not state honestly is listed
in `ImportedCard.notes` for a human, and everything the prompt does not use is kept in
`Character.card_passthrough` so that export gives it back.

Mapping:
  name                      -> name; id = slug of the name
  description (+ scenario)  -> identity.description ("Scenario: …" as its last paragraph)
  personality               -> traits (a list, or text split on lines, else on commas); the
                               card's wording is kept too, so that export gives it back
  first_mes                 -> the pinned opening message (the greeting)
  alternate_greetings       -> the greeting in another language, the first one written in
                               it; all of them kept in card_passthrough as well
  character_book entries    -> lore pages (characters/<id>.lore/<slug>.md)
  a tag containing "NSFW"    -> rating: mature (export writes the tag back from the rating)
  everything else           -> card_passthrough (example dialogue, alternate greetings,
                               system_prompt, post_history_instructions, tags, extensions…)
  {{char}} / {{user}}       -> kept in the file (export gives them back); expanded only for
                               the prompt, when the character is loaded
  the PNG's image           -> `<id>.avatar.png` beside the YAML, so that a PNG export keeps it
Export (`card_from_character`, in cards/export.py) also writes our own fields under
`extensions.companion`, which import reads back, so that a card made here round trips.
"""

from __future__ import annotations

import base64
import binascii
import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cards.character import Character, with_macros_expanded
from cards.checks import (
    MAX_CARD_BYTES,
    MAX_JSON_DEPTH,
    MAX_SHEET_FIELD_CHARS,
    CardError,
    as_text,
    check_card,
    json_depth,
)
from cards.export import card_from_character, character_yaml, is_nsfw_tag, save_imported
from cards.imported import ImportedCard
from cards.lore_book import pages_from_book
from cards.lore_files import slugify
from cards.png import PngError, is_png, text_chunks, with_text_chunks
from cards.text import (
    COMPANION_EXTENSION,
    THE_USER,
    detect_language,
    find_age,
    mentions_user,
    speech_rule,
    split_traits,
    with_scenario,
    words,
)

__all__ = [
    "MAX_CARD_BYTES",
    "MAX_SHEET_FIELD_CHARS",
    "CardError",
    "ImportedCard",
    "card_from_character",
    "character_from_card",
    "character_yaml",
    "check_card",
    "import_card",
    "parse_card_bytes",
    "read_card",
    "save_imported",
]

# Fields the mapping turns into our sheet; every other field of `data` is passed through.
_CONSUMED = ("name", "description", "personality", "scenario", "first_mes", "character_book")
_TONE_FALLBACK = {"en": "true to the character", "es": "fiel al personaje"}


# ---- reading --------------------------------------------------------------------------------


def read_card(path: Path) -> dict[str, Any]:
    """The card's JSON object, from a .json file or a PNG; errors name the file."""
    return parse_card_bytes(_read_bytes(path), str(path), png=path.suffix.lower() == ".png")


def _read_bytes(path: Path) -> bytes:
    try:
        size = path.stat().st_size
        if size > MAX_CARD_BYTES:
            raise CardError(
                f"{path}: the file has {size:,} bytes and a card may have at most "
                f"{MAX_CARD_BYTES:,} (over by {size - MAX_CARD_BYTES:,}): shrink the image"
            )
        return path.read_bytes()
    except OSError as exc:
        raise CardError(f"{path}: cannot be read: {exc.strerror or exc}") from exc


def parse_card_bytes(raw: bytes, source: str, *, png: bool = False) -> dict[str, Any]:
    """Parse and check a card; `png` says the name promised a PNG even if the bytes do not."""
    if png or is_png(raw):
        text, where = _png_payload(raw, source)
    else:
        try:
            text, where = raw.decode("utf-8-sig"), ""
        except UnicodeDecodeError as exc:
            raise CardError(f"{source}: neither a PNG nor UTF-8 JSON text ({exc.reason})") from exc
    depth = json_depth(text, MAX_JSON_DEPTH)
    if depth > MAX_JSON_DEPTH:
        raise CardError(
            f"{source}: the JSON{where} is nested more than {MAX_JSON_DEPTH} levels deep; "
            "a card is a flat object"
        )
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


# ---- mapping --------------------------------------------------------------------------------


def import_card(path: Path) -> ImportedCard:
    raw = _read_bytes(path)
    png = path.suffix.lower() == ".png" or is_png(raw)
    imported = character_from_card(parse_card_bytes(raw, str(path), png=png), str(path))
    if not png:
        return imported
    avatar = with_text_chunks(raw, {}, drop=("chara", "ccv3"))
    return ImportedCard(imported.character, imported.lore, imported.notes, imported.source, avatar)


def character_from_card(card: dict[str, Any], source: str = "card") -> ImportedCard:
    check_card(card, source)
    data: dict[str, Any] = card["data"]
    name = " ".join(data["name"].split())[:80]
    extensions = dict(data.get("extensions") or {})
    ours = extensions.pop(COMPANION_EXTENSION, None)
    ours = ours if isinstance(ours, dict) else None
    sample = " ".join(as_text(data.get(k)) for k in ("description", "personality", "first_mes"))
    language = (ours or {}).get("language") or detect_language(sample)

    def text(key: str) -> str:
        return as_text(data.get(key)).strip()

    pages, book_meta, lore_notes = pages_from_book(data.get("character_book"))
    passthrough = _passthrough(card, data, extensions, book_meta)
    sheet = {
        "id": slugify(name, "character"),
        "name": name,
        "language": language,
        "description": with_scenario(text("description"), text("scenario"), language),
        "personality": text("personality"),
        "first_mes": text("first_mes"),
        "other_greetings": _greetings_by_language(data.get("alternate_greetings"), language),
    }
    notes: list[str] = []
    if ours is not None:
        fields = _restored_fields(sheet, ours)
    else:
        fields = _derived_fields(sheet, data, notes)
        if mentions_user(data.get("first_mes") or ""):
            notes.append(
                "opening_messages: the greeting names {{user}}, kept in the file: each user "
                f"is shown their own name there, the prompt of a group '{THE_USER[language]}'"
                "; reread it, and say 'you' where it speaks to the user"
            )
    personality = data.get("personality")
    if as_text(personality).strip() and as_text(personality).strip() != "\n".join(fields["traits"]):
        # The card's own wording ("brave, kind"), for export while the traits stay as derived.
        passthrough["personality"] = personality
    fields["card_passthrough"] = passthrough
    tags = data.get("tags")
    if isinstance(tags, list) and any(is_nsfw_tag(t) for t in tags):
        fields["rating"] = "mature"
        notes.append("rating: mature, from the card's NSFW tag: it speaks only where adults are")
    if ours is not None and ours.get("model"):
        notes.append(
            f"model: the card asks for '{ours['model']}': check that your provider serves it, "
            "or delete the line to use LLM_MODEL"
        )
    try:
        character = Character.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(
            f"field '{'.'.join(str(p) for p in e['loc'])}': {e['msg']}" for e in exc.errors()
        )
        raise CardError(f"{source}: the card does not make a valid character: {problems}") from exc
    notes += _passthrough_notes(passthrough, ours is not None) + lore_notes
    return ImportedCard(with_macros_expanded(character), tuple(pages), tuple(notes), source)


def _opening(first_mes: str, language: str, others: dict[str, str]) -> list[dict[str, Any]]:
    """The greeting as an opening message: one text, or one per language when the card says
    it in others (`others`, language -> text)."""
    if not first_mes:
        return []
    others = {k: v for k, v in others.items() if k != language and v.strip()}
    return [{"role": "assistant", "text": {language: first_mes, **others} if others else first_mes}]


def _greetings_by_language(alternates: object, language: str) -> dict[str, str]:
    """Of a card's alternate greetings, the first written in each language other than the
    card's own: SillyTavern has no field for a greeting's language, so it is read off the text."""
    found: dict[str, str] = {}
    for alternate in alternates if isinstance(alternates, list) else []:
        text = as_text(alternate).strip()
        if text:
            found.setdefault(detect_language(text), text)
    found.pop(language, None)
    return found


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
        + "; the prompt leaves them out until a human fills them in"
    )
    short = all(len(words(t)) <= 3 for t in traits[:3]) and not trait_note
    tone = ", ".join(t.lower() for t in traits[:3]) if short else _TONE_FALLBACK[lang]
    if not short:
        notes.append(f"reminder.tone: set to '{tone}'; write the character's default tone")
    return {
        "id": sheet["id"],
        "name": name,
        "language": lang,
        "identity": {"age": age, "description": sheet["description"]},
        "traits": traits,
        "speech_rules": [rule],
        "opening_messages": _opening(sheet["first_mes"], lang, sheet["other_greetings"]),
        "reminder": {"tone": tone, "main_rule": rule},
    }


def _restored_fields(sheet: dict[str, Any], ours: dict[str, Any]) -> dict[str, Any]:
    """A card exported by us: the card's own fields win (it may have been edited elsewhere);
    `extensions.companion` supplies what a card has no field for."""
    traits, _ = split_traits(sheet["personality"], sheet["language"])
    identity = {**ours.get("identity", {}), "description": sheet["description"]}
    skip = ("opening_messages_more", "greeting_languages")
    fields = {key: value for key, value in ours.items() if key not in skip}
    others = ours.get("greeting_languages")
    greeting = _opening(sheet["first_mes"], sheet["language"], others or {})
    fields.update(
        id=ours.get("id", sheet["id"]),
        name=sheet["name"],
        identity=identity,
        traits=traits,
        opening_messages=greeting + list(ours.get("opening_messages_more", [])),
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
            f"card_passthrough.alternate_greetings: {count} kept for export; first_mes is the "
            "pinned opening message, and the first alternate in another language (es, en) is "
            "the greeting in that language"
        )
    return notes
