"""A character's rating (issue 36, item 4) in its files: `rating: general` (the default) or
`mature` in the YAML, a card's NSFW tag on import and export, and lint's reminder where a sheet
reads as meant for adults without the rating."""

from __future__ import annotations

from pathlib import Path

import pytest

from cards.character import CharacterFileError, load_character
from cards.export import card_from_character
from cards.lint import lint_character
from cards.sillytavern import character_from_card
from tests.conftest import CHARACTERS
from tests.test_cards import v2_card

KEEPER = (CHARACTERS / "lighthouse_keeper.yaml").read_text(encoding="utf-8")


def keeper(tmp_path: Path, first_line: str, *, description: str | None = None) -> Path:
    text = first_line + "\n" + KEEPER
    if description is not None:
        text = text.replace("  description: ", f"  description: {description} ", 1)
    path = tmp_path / "lighthouse_keeper.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_rating_is_general_unless_the_file_says_mature(tmp_path: Path) -> None:
    assert load_character(CHARACTERS / "lighthouse_keeper.yaml").rating == "general"
    assert load_character(keeper(tmp_path, "rating: mature")).rating == "mature"


def test_another_rating_is_refused_naming_the_file_and_the_field(tmp_path: Path) -> None:
    path = keeper(tmp_path, "rating: adult")
    with pytest.raises(CharacterFileError) as error:
        load_character(path)
    message = str(error.value)
    assert str(path) in message
    assert "field 'rating': Input should be 'general' or 'mature'" in message


@pytest.mark.parametrize("tag", ["NSFW", "nsfw", "NSFW 18+", "Not-NSFW-safe"])
def test_a_cards_nsfw_tag_imports_as_mature(tag: str) -> None:
    card = v2_card()
    card["data"]["tags"] = ["fantasy", tag]
    imported = character_from_card(card, "card.json")
    assert imported.character.rating == "mature"
    assert any(note.startswith("rating: mature") for note in imported.notes)


def test_a_card_without_the_tag_imports_as_general() -> None:
    imported = character_from_card(v2_card(), "card.json")
    assert imported.character.rating == "general"
    assert not any(note.startswith("rating") for note in imported.notes)


def test_export_writes_the_rating_back_as_the_tag(tmp_path: Path) -> None:
    mature = load_character(keeper(tmp_path, "rating: mature"))
    card = card_from_character(mature)
    assert "NSFW" in card["data"]["tags"]
    assert character_from_card(card, "again.json").character.rating == "mature"
    general = mature.model_copy(update={"rating": "general"})
    assert not any("nsfw" in t.casefold() for t in card_from_character(general)["data"]["tags"])


def test_lint_warns_where_a_general_sheet_reads_as_mature(tmp_path: Path) -> None:
    path = keeper(tmp_path, "rating: general", description="Writes explicit erotic fiction.")
    warnings = [w for w in lint_character(load_character(path)) if w.field == "rating"]
    assert len(warnings) == 1 and "'explicit'" in warnings[0].message
    rated = keeper(tmp_path, "rating: mature", description="Writes explicit erotic fiction.")
    assert [w for w in lint_character(load_character(rated)) if w.field == "rating"] == []
    plain = load_character(CHARACTERS / "lighthouse_keeper.yaml")
    assert [w for w in lint_character(plain) if w.field == "rating"] == []


def test_lint_reads_a_cards_tags_and_spanish_words(tmp_path: Path) -> None:
    card = v2_card()
    card["data"]["tags"] = ["fantasy"]
    card["data"]["description"] = "Una guardiana del bosque que posa desnuda para los viajeros."
    imported = character_from_card(card, "card.json").character
    assert [w.field for w in lint_character(imported)].count("rating") == 1
