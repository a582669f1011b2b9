"""Writing an approved canon fact into a character's files (cards/canon_writer.py): only the one
value changes, comments and key order survive byte for byte, the result loads and lints, and a
failure leaves the files as they were."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from bot.texts import LANGUAGES
from cards.canon_writer import CanonWriteError, write_canon
from cards.character import load_character
from cards.lint import lint_character
from tests.conftest import CHARACTERS

COMMENTED = """\
# A hand-written sheet, with comments everywhere the writer must not touch.
name: Ane Zubiri   # the full name
language: es
identity:
  age: 40          # she says 39
  trade: capitana de un pesquero
  # where she lives
  place: Bermeo
  description: >-
    Manda un barco viejo y lo cuida como a una hija. Habla poco en tierra y mucho en el mar,
    donde se siente en casa.
  # end of identity
traits: [Seca, Leal, Terca]   # flow style stays
speech_rules:
  - "Frases cortas."          # quoted stays quoted
reminder: {tone: seca, main_rule: frases cortas}
# the last comment
"""


def folder_with(tmp_path: Path, name: str = "ane.yaml", text: str = COMMENTED) -> Path:
    folder = tmp_path / "characters"
    folder.mkdir()
    (folder / name).write_text(text, encoding="utf-8")
    return folder / name


def comments(text: str) -> list[str]:
    return [line[line.index("#") :] for line in text.splitlines() if "#" in line]


def added_lines(before: str, after: str) -> list[str]:
    """The lines `after` has beyond `before`, checking every line of `before` is still there,
    unchanged and in its order (a byte-for-byte diff that only adds)."""
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    added, at = [], 0
    for line in new:
        if at < len(old) and line == old[at]:
            at += 1
        else:
            added.append(line)
    assert at == len(old), f"lines of the original were changed or lost: {old[at:]}"
    return added


def test_a_fact_about_the_character_ends_its_description_and_nothing_else_moves(
    tmp_path: Path,
) -> None:
    path = folder_with(tmp_path)
    before = path.read_text(encoding="utf-8")
    written = write_canon(load_character(path), "Su barco se llama Itsaso", "sheet")
    after = path.read_text(encoding="utf-8")
    assert written.path == path
    assert added_lines(before, after) == ["    Su barco se llama Itsaso.\n"]
    assert after.replace("    Su barco se llama Itsaso.\n", "") == before
    reloaded = load_character(path)
    ending = "donde se siente en casa. Su barco se llama Itsaso."
    assert reloaded.identity.description.endswith(ending)
    assert list(yaml.safe_load(after)) == list(yaml.safe_load(before))  # key order


@pytest.mark.parametrize("name", ["detective_bilbao.yaml", "lighthouse_keeper.yaml"])
def test_the_shipped_characters_take_a_fact_and_still_load_and_lint(
    tmp_path: Path, name: str
) -> None:
    folder = tmp_path / "characters"
    shutil.copytree(CHARACTERS, folder)
    path = folder / name
    before, character = path.read_text(encoding="utf-8"), load_character(path)
    warned = {str(w) for w in lint_character(character, languages=LANGUAGES)}
    write_canon(character, "Has a cousin in Leeds", "sheet")
    after = path.read_text(encoding="utf-8")
    assert added_lines(before, after) == ["    Has a cousin in Leeds.\n"]
    reloaded = load_character(path)
    assert reloaded.identity.description.endswith(" Has a cousin in Leeds.")
    assert reloaded.model_dump(exclude={"identity"}) == character.model_dump(exclude={"identity"})
    # Lint still runs clean of anything new but the sheet's size: the detective's sheet sits
    # at the 400-token line, and the approve command prints that warning for the admin.
    new = {w for w in lint_character(reloaded, languages=LANGUAGES) if str(w) not in warned}
    assert all(w.field == "sheet" for w in new)
    assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in CHARACTERS.iterdir())


@pytest.mark.parametrize(
    ("identity", "kept"),
    [
        ("identity:\n  age: 3  # years\n  description: a plain one  # a note\n", "  # a note\n"),
        ('identity: {age: 3, description: "x y"}  # flow\n', "}  # flow\n"),
        ("identity: {age: 3}  # no description yet\n", "}  # no description yet\n"),
        ("identity:\n  age: 3  # years\n# after\n", "# after\n"),
        ("identity:\n  description: |\n    one\n    two\n\n  # a gap\n  age: 3\n", "  # a gap\n"),
    ],
)
def test_every_shape_of_identity_keeps_its_comments(
    tmp_path: Path, identity: str, kept: str
) -> None:
    text = f"name: X\n{identity}speech_rules: [a]\nreminder: {{tone: t, main_rule: m}}\n"
    path = folder_with(tmp_path, "x.yaml", text)
    before = yaml.safe_load(text)
    write_canon(load_character(path), "It has a boat", "sheet")
    after = path.read_text(encoding="utf-8")
    assert kept.strip() in after
    assert comments(after) == comments(text)  # every comment, in its order
    loaded = yaml.safe_load(after)
    assert {k: v for k, v in loaded.items() if k != "identity"} == {
        k: v for k, v in before.items() if k != "identity"
    }
    description = load_character(path).identity.description
    assert description.endswith("It has a boat.")
    old = str((before["identity"] or {}).get("description") or "").strip()
    assert description.startswith(old.split("\n")[0])


def test_a_fact_about_the_world_goes_to_the_canon_lore_page(tmp_path: Path) -> None:
    path = folder_with(tmp_path)
    before = path.read_bytes()
    first = write_canon(load_character(path), "El puerto de Bermeo tiene dos faros", "lore")
    second = write_canon(load_character(path), "La cofradía abre a las seis", "lore")
    assert first.path == second.path == path.parent / "ane.lore" / "canon.md"
    assert path.read_bytes() == before  # the sheet is untouched
    page = next(p for p in load_character(path).lore if p.slug == "canon")
    assert page.content == "- El puerto de Bermeo tiene dos faros.\n- La cofradía abre a las seis."
    assert page.title == "Canon" and "Ane Zubiri" in page.description


def test_a_page_written_by_hand_keeps_every_byte(tmp_path: Path) -> None:
    path = folder_with(tmp_path)
    (path.parent / "ane.lore").mkdir()
    page = path.parent / "ane.lore" / "canon.md"
    page.write_text("# Lo sabido\n\n> Hechos del puerto.\n\n## Barcos\n\n- El Itsaso.", "utf-8")
    before = page.read_text(encoding="utf-8")
    write_canon(load_character(path), "El Gaviota se hundió en 1998", "lore")
    assert page.read_text(encoding="utf-8") == before + "\n- El Gaviota se hundió en 1998.\n"


def test_a_yaml_page_named_canon_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    text = COMMENTED + "lore:\n  - {slug: canon, title: C, description: d, content: x}\n"
    path = folder_with(tmp_path, text=text)
    with pytest.raises(CanonWriteError, match="already has a page 'canon'"):
        write_canon(load_character(path), "Algo del mundo", "lore")
    assert path.read_text(encoding="utf-8") == text
    assert sorted(p.name for p in path.parent.iterdir()) == ["ane.yaml"]


def test_a_write_the_character_cannot_load_is_undone(tmp_path: Path) -> None:
    path = folder_with(tmp_path)
    character = load_character(path)
    broken = path.parent / "ane.lore" / "otra.md"
    broken.parent.mkdir()
    broken.write_text("no title line\n", encoding="utf-8")  # broken after the character loaded
    with pytest.raises(CanonWriteError, match="would no longer load"):
        write_canon(character, "Algo del mundo", "lore")
    assert sorted(p.name for p in broken.parent.iterdir()) == ["otra.md"]
    with pytest.raises(CanonWriteError, match="would no longer load"):
        write_canon(character, "Algo de ella", "sheet")
    assert path.read_text(encoding="utf-8") == COMMENTED
    assert sorted(p.name for p in path.parent.iterdir()) == ["ane.lore", "ane.yaml"]


def test_a_file_broken_since_it_was_loaded_is_left_alone(tmp_path: Path) -> None:
    path = folder_with(tmp_path)
    character = load_character(path)
    path.write_text(COMMENTED + "  bad: [\n", encoding="utf-8")
    with pytest.raises(CanonWriteError, match="not valid YAML"):
        write_canon(character, "Algo de ella", "sheet")
    assert path.read_text(encoding="utf-8") == COMMENTED + "  bad: [\n"


def test_text_that_folding_would_change_is_written_quoted_and_exact(tmp_path: Path) -> None:
    path = folder_with(tmp_path, "x.yaml", "name: X\nidentity: {age: 3}\nspeech_rules: [a]\n"
                       "reminder: {tone: t, main_rule: m}\n")  # fmt: skip
    write_canon(load_character(path), 'Dice "hola": a veces # no es comentario', "sheet")
    assert load_character(path).identity.description == ('Dice "hola": a veces # no es comentario.')
