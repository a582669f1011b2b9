from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bot.app import open_app
from bot.texts import LANGUAGES
from cards.character import CharacterBook, CharacterFileError, load_character
from cards.lint import lint_character, lint_lore
from memory.engine.lore import render_lore_index
from tests.conftest import CHARACTERS, REPO, make_settings

GOOD = (CHARACTERS / "lighthouse_keeper.yaml").read_text()


SHIPPED = ("detective_bilbao", "lighthouse_keeper")


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_shipped_characters_load_and_lint_clean() -> None:
    # The shipped files by name: an admin's own characters beside them are not the tests' to judge.
    shipped = [load_character(REPO / "characters" / f"{name}.yaml") for name in SHIPPED]
    assert [character.id for character in shipped] == list(SHIPPED)
    assert shipped[0].language == "es"
    for character in shipped:
        # Every language the bot serves has its greeting: each user is greeted in theirs.
        assert lint_character(character, languages=LANGUAGES) == [], character.id


def test_lint_names_each_language_the_greeting_is_not_written_in(tmp_path: Path) -> None:
    start, end = GOOD.index("opening_messages:"), GOOD.index("reminder:")
    plain = "opening_messages:\n  - {role: assistant, text: 'Come in, love.'}\n"
    character = load_character(write(tmp_path, "maggie.yaml", GOOD[:start] + plain + GOOD[end:]))
    warnings = lint_character(character, languages=LANGUAGES)
    assert [(w.field, w.message.split(":")[0]) for w in warnings] == [
        ("opening_messages.0.text", "no greeting in 'es'")
    ]
    assert "greeted in 'en'" in warnings[0].message
    both = "opening_messages:\n  - text: {en: 'Come in, love.', es: 'Pasa, cielo.'}\n"
    character = load_character(write(tmp_path, "maggie.yaml", GOOD[:start] + both + GOOD[end:]))
    assert lint_character(character, languages=LANGUAGES) == []
    assert lint_character(character, languages=("es", "en", "fr"))[0].message.startswith(
        "no greeting in 'fr'"
    )


def test_a_greeting_by_language_refuses_a_language_and_a_blank_text(tmp_path: Path) -> None:
    start, end = GOOD.index("opening_messages:"), GOOD.index("reminder:")
    for bad, problem in (
        ("{en: Hi, fr: Salut}", "opening_messages.0.text"),
        ("{en: Hi, es: '  '}", "must not be empty"),
        ("{}", "one text per language"),
    ):
        text = f"opening_messages:\n  - text: {bad}\n"
        path = write(tmp_path, "maggie.yaml", GOOD[:start] + text + GOOD[end:])
        with pytest.raises(CharacterFileError) as error:
            load_character(path)
        assert str(path) in str(error.value) and problem in str(error.value), str(error.value)


def test_the_fixture_characters_are_the_shipped_ones() -> None:
    for name in SHIPPED:
        fixture = (CHARACTERS / f"{name}.yaml").read_text()
        assert fixture == (REPO / "characters" / f"{name}.yaml").read_text(), name


def test_a_missing_field_names_the_file_and_the_field(tmp_path: Path) -> None:
    broken = GOOD.replace("  trade: retired", "  job: retired").replace("reminder:", "remind:")
    path = write(tmp_path, "broken.yaml", broken)
    with pytest.raises(CharacterFileError) as error:
        load_character(path)
    message = str(error.value)
    assert str(path) in message
    assert "field 'reminder': Field required" in message
    assert "field 'identity.job': Extra inputs are not permitted" in message


def test_invalid_yaml_and_wrong_types_are_reported(tmp_path: Path) -> None:
    bad_yaml = write(tmp_path, "a.yaml", "name: [unclosed\n")
    with pytest.raises(CharacterFileError, match=r"a\.yaml: not valid YAML"):
        load_character(bad_yaml)
    wrong = write(tmp_path, "b.yaml", GOOD.replace("temperature: 0.8", "temperature: 3"))
    with pytest.raises(CharacterFileError, match=r"field 'temperature': Input should be less"):
        load_character(wrong)
    listing = write(tmp_path, "c.yaml", "- just\n- a list\n")
    with pytest.raises(CharacterFileError, match="expected a mapping"):
        load_character(listing)


def test_the_book_reports_every_broken_file_and_duplicate_ids(tmp_path: Path) -> None:
    write(tmp_path, "one.yaml", GOOD)
    write(tmp_path, "two.yaml", "id: one\n" + GOOD)
    write(tmp_path, "three.yaml", GOOD.replace("traits:", "trait:"))
    with pytest.raises(CharacterFileError) as error:
        CharacterBook.load(tmp_path)
    lines = str(error.value).splitlines()
    assert len(lines) == 2
    assert "three.yaml" in lines[0] and "'trait': Extra inputs are not permitted" in lines[0]
    assert "two.yaml: field 'id': 'one' is already used by" in lines[1]


async def test_the_bot_refuses_to_start_with_a_broken_character(
    tmp_path: Path, fake_anthropic
) -> None:
    folder = tmp_path / "characters"
    shutil.copytree(CHARACTERS, folder)
    write(folder, "broken.yaml", GOOD.replace("name: Maggie Thornton\n", ""))
    settings = make_settings(tmp_path, fake_anthropic, characters_dir=folder)
    with pytest.raises(CharacterFileError, match=r"broken\.yaml: field 'name': Field required"):
        async with open_app(settings, start_scheduler=False):
            pass


def test_lint_warns_where_a_sheet_breaks_the_rules(tmp_path: Path) -> None:
    text = GOOD.replace(
        "  - Speak in short, plain sentences with one concrete image from the harbour or the "
        "shop.\n",
        "  - Never use long words.\n  - Don't ask questions.\n  - No emojis.\n  - Avoid slang.\n",
    )
    text = (
        text.split("does_not_know:")[0] + "opening_messages:" + text.split("opening_messages:")[1]
    )
    text = text.replace("  - Remembers promises and keeps them.\n", "").replace(
        "  - Practical; believes in tea, walks and writing things down.\n", ""
    )
    character = load_character(write(tmp_path, "lint.yaml", text))
    warnings = {(w.field, w.message.split(";")[0]) for w in lint_character(character)}
    fields = {field for field, _ in warnings}
    assert "traits" in fields and "does_not_know" in fields and "speech_rules" in fields
    negative = {f for f in fields if f.startswith("speech_rules.")}
    assert negative == {"speech_rules.0", "speech_rules.1", "speech_rules.2", "speech_rules.3"}
    long_sheet = GOOD.replace("  description: >-", "  description: >-\n    " + "word " * 400)
    long_character = load_character(write(tmp_path, "long.yaml", long_sheet))
    assert any(
        w.field == "sheet" and "over the 400" in w.message for w in lint_character(long_character)
    )


def test_lore_pages_from_markdown_files_and_lint(tmp_path: Path) -> None:
    path = write(tmp_path, "keeper.yaml", GOOD)
    folder = tmp_path / "keeper.lore"
    folder.mkdir()
    (folder / "godrevy.md").write_text(
        "# Godrevy lighthouse\n\n> The tower she kept.\n\n"
        + "".join(f"## Part {i}\nword " * 1 + "\n" for i in range(12)),
        encoding="utf-8",
    )
    (folder / "shop.md").write_text("# The shop\n\n" + "books and tea. " * 800, encoding="utf-8")
    character = load_character(path)
    assert [p.slug for p in character.lore] == ["godrevy", "shop"]
    assert character.lore[0].description == "The tower she kept."
    report, warnings = lint_lore(character, cap_tokens=1500)
    assert report[0].startswith("keeper: lore index") and "2 page(s)" in report[0]
    assert "largest page 'shop'" in report[1] and "of the 1500 cap" in report[1]
    problems = {(w.field, w.message.split(",")[0]) for w in warnings}
    assert ("lore.godrevy", "12 '## ' headings; the index shows the first 9") in problems
    assert any(w.field == "lore.shop" and "over the 1500 cap" in w.message for w in warnings)
    index = render_lore_index(character.lore, "en")
    assert index.count("\n- ") == 2 and "Part 8" in index and "Part 9" not in index


def test_lore_slug_defined_twice_is_an_error(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "keeper.yaml",
        GOOD + "lore:\n  - {slug: shop, title: S, description: d, content: c}\n",
    )
    (tmp_path / "keeper.lore").mkdir()
    (tmp_path / "keeper.lore" / "shop.md").write_text("# Shop\n\nbooks\n", encoding="utf-8")
    with pytest.raises(CharacterFileError, match="page 'shop' is defined twice"):
        load_character(path)
    (tmp_path / "keeper.lore" / "shop.md").write_text("no title\n", encoding="utf-8")
    with pytest.raises(CharacterFileError, match="first line must be the page title"):
        load_character(path)
