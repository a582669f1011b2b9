"""A card's round trip keeps what the card said: macros, empty fields, the avatar; a card that
would make an unaffordable sheet is refused with the field and the limit."""

from __future__ import annotations

import base64
import json
import zlib
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from cards.character import load_character
from cards.png import text_chunks
from cards.sillytavern import (
    MAX_CARD_BYTES,
    MAX_SHEET_FIELD_CHARS,
    CardError,
    card_from_character,
    character_from_card,
    import_card,
    save_imported,
)
from memory.engine.prompt import render_character_sheet
from tests.test_cards import _run, b64, png, v2_card, write


def _imported_and_loaded(tmp_path: Path, card: dict[str, Any]):  # type: ignore[no-untyped-def]
    imported = import_card(write(tmp_path, "card.json", card))
    path, _ = save_imported(imported, tmp_path / "chars")
    return imported, load_character(path)


def test_macros_are_kept_in_the_file_and_on_export_and_expanded_only_for_the_prompt(
    tmp_path: Path,
) -> None:
    original = v2_card()
    _, character = _imported_and_loaded(tmp_path, original)
    yaml_text = (tmp_path / "chars" / "seraphina_vale.yaml").read_text()
    assert "{{char}} is a 23 years old" in yaml_text
    sheet = render_character_sheet(character)
    assert "{{" not in sheet and "Seraphina Vale is a 23 years old" in sheet
    assert "The user wakes up in Seraphina Vale's glade." in sheet
    assert "Seraphina Vale's home" in character.lore[0].content

    data = card_from_character(character)["data"]
    source = original["data"]
    assert (data["description"], data["scenario"]) == (source["description"], source["scenario"])
    assert (
        data["character_book"]["entries"][0]["content"]
        == (source["character_book"]["entries"][0]["content"])
    )


def test_an_empty_personality_stays_empty_and_no_placeholder_reaches_the_prompt(
    tmp_path: Path,
) -> None:
    card = v2_card()
    card["data"]["personality"] = ""
    imported, character = _imported_and_loaded(tmp_path, card)
    assert character.traits == ()
    assert any(note.startswith("traits:") for note in imported.notes)
    assert card_from_character(character)["data"]["personality"] == ""
    sheet = render_character_sheet(character)
    yaml_text = (tmp_path / "chars" / "seraphina_vale.yaml").read_text()
    for placeholder in ("not stated", "no consta", "Consistent with the description"):
        assert placeholder not in sheet and placeholder not in yaml_text
    assert "Trade:" not in sheet and "Age: 23." in sheet


def test_a_personality_given_as_a_list_becomes_traits() -> None:
    card = v2_card()
    card["data"]["personality"] = ["brave", "stubborn", "kind to animals"]
    character = character_from_card(card).character
    assert character.traits == ("Brave", "Stubborn", "Kind to animals")


def test_a_card_that_sets_the_model_is_listed_for_a_human() -> None:
    ours = character_from_card(v2_card()).character.model_copy(update={"model": "gpt-x"})
    notes = character_from_card(card_from_character(ours)).notes
    assert any(note.startswith("model:") and "gpt-x" in note for note in notes)


def _idat(raw: bytes) -> bytes:
    at = raw.index(b"IDAT")
    length = int.from_bytes(raw[at - 4 : at], "big")
    return raw[at + 4 : at + 4 + length]


async def test_a_png_card_exports_as_a_png_with_its_avatar(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = png({"chara": b64(v2_card()), "Comment": "made by hand"})
    card_file = write(tmp_path, "sera.png", source)
    assert await _run(tmp_path, "characters", "import", str(card_file)) == 0
    avatar = tmp_path / "chars" / "seraphina_vale.avatar.png"
    assert "chara" not in text_chunks(avatar.read_bytes())  # the image alone, no stale card
    out = tmp_path / "out" / "sera.png"
    capsys.readouterr()
    assert await _run(tmp_path, "characters", "export", "seraphina_vale", "--out", str(out)) == 0
    assert "in its avatar PNG" in capsys.readouterr().out
    exported = out.read_bytes()
    assert _idat(exported) == _idat(source) == zlib.compress(b"\0\0\0\0")
    chunks = text_chunks(exported)
    assert chunks["Comment"] == "made by hand"
    card = json.loads(base64.b64decode(chunks["chara"]))
    assert card["data"]["description"] == v2_card()["data"]["description"]
    again = import_card(out)
    assert again.character.name == "Seraphina Vale" and again.avatar is not None


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    huge = tmp_path / "huge.png"
    with huge.open("wb") as file:
        file.truncate(MAX_CARD_BYTES + 1)  # sparse: costs no disk
    with pytest.raises(CardError) as error:
        import_card(huge)
    assert str(huge) in str(error.value) and "over by 1" in str(error.value)


def test_a_field_over_its_limit_names_the_field_and_the_excess(tmp_path: Path) -> None:
    card = v2_card()
    card["data"]["description"] = "x" * (6 * 1024 * 1024)
    with pytest.raises(CardError) as error:
        import_card(write(tmp_path, "big.json", card))
    message = str(error.value)
    assert "'data.description'" in message and f"{MAX_SHEET_FIELD_CHARS:,}" in message
    card = v2_card()
    card["data"]["character_book"]["entries"][0]["content"] = "y" * 50_000
    with pytest.raises(CardError, match=r"entries\.0\.content"):
        import_card(write(tmp_path, "lore.json", card))


def test_deeply_nested_json_is_refused_without_a_traceback(tmp_path: Path) -> None:
    card = json.dumps(v2_card())
    nested = card[:-1] + ', "x": ' + "[" * 5000 + "]" * 5000 + "}"
    with pytest.raises(CardError, match="nested more than"):
        import_card(write(tmp_path, "deep.json", nested))
    # Brackets inside strings are text, not nesting.
    fine = v2_card()
    fine["data"]["creator_notes"] = "[" * 200 + '\\"{' * 50
    assert import_card(write(tmp_path, "fine.json", fine)).character.name == "Seraphina Vale"


def _sparse_card() -> dict[str, Any]:
    """A card as small tools write it: a comma personality, lore entries with only the fields
    they need, a book without `extensions`."""
    card = v2_card()
    card["data"]["personality"] = "brave, kind, a little sly"
    card["data"]["character_book"] = {
        "name": "Glade lore",
        "entries": [
            {"keys": ["glade"], "content": "The glade is {{char}}'s home."},
            {"keys": ["wolves", "pack"], "content": "Wolves guard the edge.", "comment": "Wolves"},
        ],
    }
    return card


def test_a_round_trip_gives_back_the_cards_personality_and_lore_entries(tmp_path: Path) -> None:
    original = _sparse_card()
    _, character = _imported_and_loaded(tmp_path, json.loads(json.dumps(original)))
    assert character.traits == ("Brave", "Kind", "A little sly")  # traits for the prompt
    data = card_from_character(character)["data"]
    assert data["personality"] == "brave, kind, a little sly"  # not one trait per line
    assert data["character_book"] == original["data"]["character_book"]  # no field gained
    again = character_from_card(card_from_character(character), "exported.json")
    assert (
        card_from_character(again.character, again.lore)["data"]["character_book"]
        == (original["data"]["character_book"])
    )


def test_edited_traits_and_pages_are_what_export_writes(tmp_path: Path) -> None:
    _, character = _imported_and_loaded(tmp_path, _sparse_card())
    edited = character.model_copy(update={"traits": ("Brave", "Gentle")})
    assert card_from_character(edited)["data"]["personality"] == "Brave, Gentle"
    retitled = [replace(page, title="Home") for page in character.lore]
    entries = card_from_character(character, retitled)["data"]["character_book"]["entries"]
    assert entries[0]["name"] == "Home" and entries[0]["keys"] == ["glade"]


def test_a_journey_turned_off_with_its_reason_survives_export_import_and_the_yaml(
    tmp_path: Path,
) -> None:
    path = tmp_path / "src" / "quiet.yaml"
    path.parent.mkdir()
    path.write_text(
        "id: quiet\nname: Quiet One\nlanguage: en\nidentity: {description: A quiet one.}\n"
        "speech_rules: [Speaks softly.]\nreminder: {tone: calm, main_rule: Listen.}\n"
        "journey: false\njourney_reason: Each talk starts afresh, by design.\n"
    )
    character = load_character(path)
    card = card_from_character(character, lore_pages=[])
    assert card["data"]["extensions"]["companion"]["journey"] is False
    imported, loaded = _imported_and_loaded(tmp_path, json.loads(json.dumps(card)))
    for again in (imported.character, loaded):  # the card, then the YAML written from it
        assert again.journey is False
        assert again.journey_reason == "Each talk starts afresh, by design."


def test_a_characters_scene_names_and_talkativeness_survive_export_import_and_the_yaml(
    tmp_path: Path,
) -> None:
    path = tmp_path / "src" / "talker.yaml"
    path.parent.mkdir()
    path.write_text(
        "id: talker\nname: Itziar Goikoetxea\nlanguage: es\nidentity: {description: Tabernera.}\n"
        "speech_rules: [Habla claro.]\nreminder: {tone: cercano, main_rule: Corto.}\n"
        "aliases: [la tabernera, Itzi]\ntalkativeness: 0.9\n"
    )
    character = load_character(path)
    card = card_from_character(character, lore_pages=[])
    assert card["data"]["extensions"]["companion"]["aliases"] == ["la tabernera", "Itzi"]
    imported, loaded = _imported_and_loaded(tmp_path, json.loads(json.dumps(card)))
    for again in (imported.character, loaded):  # the card, then the YAML written from it
        assert again.aliases == ("la tabernera", "Itzi")
        assert again.talkativeness == 0.9
        assert again.names_in_scene() == ("Itziar Goikoetxea", "Itziar", "la tabernera", "Itzi")
