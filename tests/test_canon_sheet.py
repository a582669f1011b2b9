"""`canon: false` in a character's file (schema, lint, card export and import), and the sheet as
the named fields a proposal may contradict: code finds a contradiction the model did not name
where values differ, and checks the one it named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cards.character import CharacterBook, CharacterFileError, load_character
from cards.lint import lint_character
from cards.sillytavern import card_from_character, import_card, save_imported
from memory.canon.sheet import confirms, contradicted_field, sheet_fields
from tests.conftest import CHARACTERS
from tests.test_cards import write

BOOK = CharacterBook.load(CHARACTERS)
KOLDO = BOOK.get("detective_bilbao")
assert KOLDO is not None
SHEET = "id: quiet\nname: Quiet One\nlanguage: en\nidentity: {description: A quiet one.}\n" \
        "speech_rules: [Speaks softly.]\nreminder: {tone: calm, main_rule: Listen.}\n"  # fmt: skip


def test_canon_false_is_read_from_the_file_and_only_a_bool(tmp_path: Path) -> None:
    path = tmp_path / "quiet.yaml"
    path.write_text(SHEET + "canon: false\n")
    assert load_character(path).canon is False
    path.write_text(SHEET)
    assert load_character(path).canon is True  # the default: proposals are made
    path.write_text(SHEET + "canon: sometimes\n")
    with pytest.raises(CharacterFileError, match="canon"):
        load_character(path)


def test_lint_asks_why_canon_is_off() -> None:
    assert KOLDO is not None
    assert "canon" not in {w.field for w in lint_character(KOLDO)}
    off = KOLDO.model_copy(update={"canon": False})
    assert "canon" in {w.field for w in lint_character(off)}
    reasoned = KOLDO.model_copy(update={"canon": False, "canon_reason": "a fixed canon"})
    assert "canon" not in {w.field for w in lint_character(reasoned)}


def test_canon_off_survives_card_export_import_and_the_yaml(tmp_path: Path) -> None:
    path = tmp_path / "src" / "quiet.yaml"
    path.parent.mkdir()
    path.write_text(SHEET + "canon: false\ncanon_reason: A fixed canon.\n")
    card = card_from_character(load_character(path), lore_pages=[])
    assert card["data"]["extensions"]["companion"]["canon"] is False
    imported = import_card(write(tmp_path, "card.json", json.loads(json.dumps(card))))
    saved, _ = save_imported(imported, tmp_path / "chars")
    for again in (imported.character, load_character(saved)):
        assert (again.canon, again.canon_reason) == (False, "A fixed canon.")


def test_the_sheet_is_named_fields_with_their_values() -> None:
    assert KOLDO is not None
    fields = sheet_fields(KOLDO)
    assert fields["identity.age"].line == "identity.age: 58"
    assert fields["traits.1"].value.startswith("Seco y parco")
    assert "does_not_know.2" in fields and "speech_rules.1" not in fields  # how, not what


@pytest.mark.parametrize(
    ("proposal", "field"),
    [
        ("Koldo tiene 61 años.", "identity.age"),
        ("El despacho de Koldo está en Deusto, encima de una farmacia.", "identity.place"),
        ("Koldo tiene 58 años y una libreta azul.", None),  # the sheet's age: no contradiction
        ("Koldo resolvió el caso Zubiri en 1998.", None),  # a subject the sheet has not
        ("Koldo tiene una hermana, Miren.", None),
    ],
)
def test_code_finds_a_contradiction_where_values_differ(proposal: str, field: str | None) -> None:
    assert KOLDO is not None
    found = contradicted_field(proposal, sheet_fields(KOLDO), KOLDO)
    assert (found.name if found else None) == field


def test_the_field_the_model_names_is_checked() -> None:
    assert KOLDO is not None
    fields = sheet_fields(KOLDO)
    assert confirms("Koldo nunca fue ertzaina.", fields["identity.trade"], KOLDO)
    assert not confirms("Koldo tiene una hermana.", fields["identity.age"], KOLDO)
    assert not confirms("Koldo tiene 58 años.", fields["identity.age"], KOLDO)  # the same value
