"""Character cards in and out: V2/V3 JSON and PNG, broken cards, the round trip, the CLI."""

from __future__ import annotations

import argparse
import base64
import copy
import json
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest

from bot.cli_admin import register, run_admin
from bot.config import Settings
from cards.character import CharacterBook, load_character, opening_messages_for
from cards.lint import lint_character
from cards.lore_files import LorePage, parse_page, read_pages, render_page
from cards.png import png_with_text, text_chunks
from cards.sillytavern import (
    CardError,
    card_from_character,
    character_from_card,
    import_card,
    save_imported,
)
from cards.text import expand_macros, split_traits
from tests.conftest import REPO


def v2_card() -> dict[str, Any]:
    return {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": "Seraphina Vale",
            "description": "{{char}} is a 23 years old forest guardian who heals travellers.",
            "personality": "caring, protective; gentle\ncurious",
            "scenario": "{{user}} wakes up in {{char}}'s glade.",
            "first_mes": '*Seraphina kneels beside you.* "You are safe here."',
            "mes_example": '<START>\n{{user}}: Hi\n{{char}}: *smiles* "Hello, {{user}}."',
            "creator_notes": "Best with a warm model.",
            "system_prompt": "You are {{char}}. {{original}}",
            "post_history_instructions": "Stay in character.",
            "alternate_greetings": ["*She waves.* Hello, {{user}}.", "Back again?"],
            "tags": ["fantasy", "healer"],
            "creator": "someone",
            "character_version": "1.2",
            "extensions": {"talkativeness": "0.5", "depth_prompt": {"prompt": "x", "depth": 4}},
            "character_book": {
                "name": "Glade lore",
                "scan_depth": 4,
                "extensions": {},
                "entries": [
                    {
                        "keys": ["glade", "clearing"],
                        "content": "The glade is {{char}}'s home.\n## Flora\nMoss and ferns.",
                        "extensions": {},
                        "enabled": True,
                        "insertion_order": 100,
                        "comment": "The Glade",
                    },
                    {
                        "keys": ["wolves"],
                        "content": "Wolves guard the forest edge.",
                        "extensions": {"position": 1},
                        "enabled": True,
                        "insertion_order": 200,
                        "constant": True,
                    },
                    {
                        "keys": ["old"],
                        "content": "A retired entry.",
                        "extensions": {},
                        "enabled": False,
                        "insertion_order": 300,
                    },
                ],
            },
        },
    }


def v3_card() -> dict[str, Any]:
    card = v2_card()
    card.update(spec="chara_card_v3", spec_version="3.0")
    card["data"].update(
        name="Seraphina Vale (V3)",
        nickname="Sera",
        group_only_greetings=["Hello, everyone."],
        assets=[{"type": "icon", "uri": "ccdefault:", "name": "main", "ext": "png"}],
    )
    return card


def b64(card: object) -> str:
    return base64.b64encode(json.dumps(card).encode()).decode()


def png(texts: dict[str, str]) -> bytes:
    """A PNG written independently of cards/png.py, so the reader is tested for real."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    body = [chunk(b"tEXt", k.encode() + b"\0" + v.encode()) for k, v in texts.items()]
    pixels = chunk(b"IDAT", zlib.compress(b"\0\0\0\0"))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + b"".join(body)
        + pixels
        + chunk(b"IEND", b"")
    )


def write(folder: Path, name: str, content: bytes | str | object) -> Path:
    path = folder / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_text(json.dumps(content), encoding="utf-8")
    return path


# ---- import ---------------------------------------------------------------------------------


def test_a_v2_json_card_maps_onto_the_sheet(tmp_path: Path) -> None:
    imported = import_card(write(tmp_path, "sera.json", v2_card()))
    character = imported.character
    assert (character.id, character.name, character.language) == (
        "seraphina_vale",
        "Seraphina Vale",
        "en",
    )
    assert character.identity.age == 23
    assert character.identity.description == (
        "Seraphina Vale is a 23 years old forest guardian who heals travellers.\n\n"
        "Scenario: The user wakes up in Seraphina Vale's glade."
    )
    assert character.traits == ("Caring, protective; gentle", "Curious")
    assert [m.text for m in character.opening_messages] == [
        '*Seraphina kneels beside you.* "You are safe here."'
    ]
    assert character.speech_rules[0].startswith("Write actions between asterisks")
    kept = character.card_passthrough
    assert kept["alternate_greetings"] == ["*She waves.* Hello, {{user}}.", "Back again?"]
    assert kept["system_prompt"] == "You are {{char}}. {{original}}"
    assert kept["post_history_instructions"] == "Stay in character."
    assert kept["extensions"]["depth_prompt"] == {"prompt": "x", "depth": 4}
    assert [p.slug for p in imported.lore] == ["the_glade", "wolves"]
    glade = imported.lore[0]  # as the files will hold it: the macro stays for export
    assert glade.title == "The Glade"
    assert glade.description == "The glade is {{char}}'s home."
    assert "## Flora" in glade.content
    fields = {note.split(":")[0] for note in imported.notes}
    assert {"speech_rules", "identity", "lore", "card_passthrough.system_prompt"} <= fields


def test_a_v3_card_uses_its_nickname_and_keeps_its_extra_fields(tmp_path: Path) -> None:
    imported = import_card(write(tmp_path, "sera3.json", v3_card()))
    character = imported.character
    assert character.id == "seraphina_vale_v3"
    assert "Scenario: The user wakes up in Sera's glade." in character.identity.description
    assert character.card_passthrough["group_only_greetings"] == ["Hello, everyone."]
    assert character.card_passthrough["spec"] == "chara_card_v3"


def test_a_png_with_a_chara_chunk_imports(tmp_path: Path) -> None:
    path = write(tmp_path, "sera.png", png({"chara": b64(v2_card())}))
    assert import_card(path).character.name == "Seraphina Vale"


def test_ccv3_wins_over_chara_in_the_same_png(tmp_path: Path) -> None:
    path = write(tmp_path, "both.png", png({"chara": b64(v2_card()), "ccv3": b64(v3_card())}))
    assert import_card(path).character.name == "Seraphina Vale (V3)"


def test_our_png_writer_round_trips_text_chunks() -> None:
    raw = png_with_text({"chara": "abc", "other": "x"})
    assert text_chunks(raw) == {"chara": "abc", "other": "x"}


def _v1() -> dict[str, Any]:
    return {"name": "Old", "description": "d", "personality": "p", "first_mes": "hi"}


def _card_with(**data: Any) -> dict[str, Any]:
    card = v2_card()
    card["data"].update(data)
    return card


BROKEN = [
    ("nochunk.png", png({"Software": "paint"}), "no tEXt chunk named 'chara' or 'ccv3'"),
    ("bad64.png", png({"chara": "not base64!!"}), "chunk 'chara' is not valid base64"),
    ("badjson.png", png({"chara": base64.b64encode(b"{oops").decode()}), "invalid JSON in PNG"),
    ("photo.png", b"\xff\xd8\xff\xe0JFIF", "not a PNG file (bad signature)"),
    ("cut.png", png({"chara": b64(v2_card())})[:40], "truncated PNG"),
    ("bad.json", '{"spec": "chara_card_v2",', "invalid JSON: Expecting"),
    ("v1.json", _v1(), "V1 cards are not supported: open it in SillyTavern and save it as V2"),
    ("list.json", [1, 2], "expected a JSON object"),
    ("other.json", {"hello": 1}, "not a character card: no 'spec' field"),
    ("v9.json", {"spec": "chara_card_v9", "data": {}}, "unsupported spec 'chara_card_v9'"),
    ("nodata.json", {"spec": "chara_card_v2"}, "required field 'data' is missing"),
    ("noname.json", _card_with(name="  "), "required field 'data.name' is missing or empty"),
    ("empty.json", _card_with(description="", personality="", first_mes=""), "nothing to build"),
    ("types.json", _card_with(alternate_greetings="hi"), "'data.alternate_greetings' must be"),
    ("num.json", _card_with(personality=3), "'data.personality' must be text, not a number"),
]


@pytest.mark.parametrize(("name", "content", "problem"), BROKEN, ids=[b[0] for b in BROKEN])
def test_a_broken_card_names_the_file_and_the_problem(
    tmp_path: Path, name: str, content: object, problem: str
) -> None:
    path = write(tmp_path, name, content)
    with pytest.raises(CardError) as error:
        import_card(path)
    assert str(error.value).startswith(f"{path}: ")
    assert problem in str(error.value)


# ---- text rules -----------------------------------------------------------------------------


def test_macros_become_the_name_and_the_user() -> None:
    text = "{{user}} meets {{char}}. *{{USER}} smiles* at <BOT>; {{char}} greets {{user}}."
    assert expand_macros(text, "Mira", "en") == (
        "The user meets Mira. *The user smiles* at Mira; Mira greets the user."
    )
    assert expand_macros("{{user}} llega. {{random:a,b}}", "Mira", "es") == (
        "El usuario llega. {{random:a,b}}"
    )


def test_personality_is_split_into_traits_only_when_it_is_a_list() -> None:
    assert split_traits("shy, clever; kind", "en") == (["Shy", "Clever", "Kind"], None)
    prose = "She is kind to strangers, but when anyone threatens her forest she turns cold fast."
    traits, note = split_traits(prose, "en")
    assert traits == [prose] and note is not None and "prose" in note
    many, note = split_traits("Personality: a, b, c, d, e, f, g", "en")
    assert many == ["A, b", "C, d", "E", "F", "G"]
    assert note is not None and "grouped" in note
    traits, note = split_traits("", "en")
    assert traits == [] and note is not None and "no personality" in note


def test_a_lore_page_renders_and_parses_back(tmp_path: Path) -> None:
    page = LorePage("harbour", "The Harbour", "Where boats sleep.", "# Old\nText.\n## Boats\nMany.")
    path = write(tmp_path, "harbour.md", render_page(page))
    assert path.read_text().startswith("# The Harbour\n\n> Where boats sleep.\n\n## Old\n")
    assert parse_page(path) == LorePage(
        "harbour", "The Harbour", "Where boats sleep.", "## Old\nText.\n## Boats\nMany."
    )


# ---- round trip -----------------------------------------------------------------------------


def test_import_write_load_lint_export_round_trip(tmp_path: Path) -> None:
    original = v2_card()
    imported = import_card(write(tmp_path, "sera.json", copy.deepcopy(original)))
    folder = tmp_path / "characters"
    path, pages = save_imported(imported, folder)
    assert path == folder / "seraphina_vale.yaml"
    assert [p.name for p in pages] == ["the_glade.md", "wolves.md"]
    character = load_character(path)
    assert character.model_dump(exclude={"lore"}) == imported.character.model_dump(exclude={"lore"})
    assert character.as_written().lore == imported.lore  # read back from <id>.lore/
    assert character.lore[0].content.startswith("The glade is Seraphina Vale's home.")
    warnings = lint_character(character)
    print("\n".join(str(w) for w in warnings))  # what an admin sees after an import
    assert {w.field for w in warnings} >= {"speech_rules", "does_not_know"}

    card = card_from_character(character)  # reads the pages beside the file
    data, source = card["data"], original["data"]
    assert (card["spec"], card["spec_version"]) == ("chara_card_v2", "2.0")
    assert data["name"] == source["name"]
    assert data["first_mes"] == source["first_mes"]
    assert data["alternate_greetings"] == source["alternate_greetings"]
    assert data["mes_example"] == source["mes_example"]
    assert data["extensions"]["talkativeness"] == "0.5"
    book, source_book = data["character_book"], source["character_book"]
    assert (book["name"], book["scan_depth"]) == ("Glade lore", 4)
    for mine, theirs in zip(book["entries"], source_book["entries"], strict=True):
        for key in ("keys", "enabled", "insertion_order", "extensions"):
            assert mine[key] == theirs[key]
    assert [e["content"] for e in book["entries"]] == [
        "The glade is {{char}}'s home.\n## Flora\nMoss and ferns.",
        "Wolves guard the forest edge.",
        "A retired entry.",
    ]

    again = character_from_card(card, "exported.json")
    # Our own fields came back from extensions.companion: only the book's notes remain.
    assert [note.split(":")[0] for note in again.notes] == ["lore", "lore"]
    mine = again.character.model_dump(exclude={"card_passthrough", "lore"})
    assert mine == character.model_dump(exclude={"card_passthrough", "lore"})
    assert again.lore == tuple(read_pages(folder / "seraphina_vale.lore"))


@pytest.mark.parametrize("name", ["lighthouse_keeper", "detective_bilbao"])
def test_a_shipped_character_exports_and_imports_back_unchanged(name: str) -> None:
    character = CharacterBook.load(REPO / "tests" / "data" / "characters").get(name)
    assert character is not None
    card = card_from_character(character, lore_pages=[])
    greeting = character.opening_messages[0]
    assert card["data"]["first_mes"] == greeting.text_in(character.language, "")
    other = next(x for x in ("es", "en") if x != character.language)
    # The greeting in the other language rides as an alternate greeting, for card apps.
    assert card["data"]["alternate_greetings"] == [greeting.text_in(other, "")]
    assert "character_book" not in card["data"]
    again = character_from_card(json.loads(json.dumps(card))).character
    assert again.model_dump(exclude={"card_passthrough"}) == character.model_dump(
        exclude={"card_passthrough"}
    )


def test_alternate_greetings_in_another_language_round_trip(tmp_path: Path) -> None:
    """A card's alternate greeting written in the other language is the greeting in that
    language; export gives first_mes and every alternate greeting back as they were."""
    original = v2_card()
    original["data"]["first_mes"] = "*Seraphina se arrodilla.* Aquí estás a salvo, {{user}}."
    original["data"]["description"] = "{{char}} es una guardiana del bosque que cura a viajeros."
    alternates = [
        "*Seraphina saluda con la mano.* Otra vez por aquí, {{user}}.",
        "*Seraphina kneels beside you.* You are safe here, {{user}}, and the forest is quiet.",
        "*She smiles at you.* Welcome back to the glade, it is good to see you again.",
    ]
    original["data"]["alternate_greetings"] = alternates
    imported = import_card(write(tmp_path, "sera.json", copy.deepcopy(original)))
    character = imported.character
    assert character.language == "es"
    assert character.as_written().opening_messages[0].text == {
        "es": original["data"]["first_mes"],
        "en": alternates[1],  # the first one in English
    }
    assert any(n.startswith("card_passthrough.alternate_greetings") for n in imported.notes)
    folder = tmp_path / "characters"
    path, _ = save_imported(imported, folder)
    loaded = load_character(path)
    assert [m.text for m in opening_messages_for(loaded, "Ana", "en")] == [
        "*Seraphina kneels beside you.* You are safe here, Ana, and the forest is quiet."
    ]
    assert [m.text for m in opening_messages_for(loaded, "Ana", "es")] == [
        "*Seraphina se arrodilla.* Aquí estás a salvo, Ana."
    ]
    card = card_from_character(loaded)
    assert card["data"]["first_mes"] == original["data"]["first_mes"]
    assert card["data"]["alternate_greetings"] == alternates
    again = character_from_card(json.loads(json.dumps(card)))
    assert again.character.as_written().opening_messages == loaded.as_written().opening_messages
    assert card_from_character(again.character)["data"]["alternate_greetings"] == alternates


def test_a_greeting_in_two_languages_exports_and_imports_back(tmp_path: Path) -> None:
    """A greeting written here in es and en: the card's first_mes is the character's
    language, the other an alternate greeting, and an import gives the same character back."""
    text = (REPO / "tests" / "data" / "characters" / "lighthouse_keeper.yaml").read_text()
    assert "\n      es: >-" in text  # the shipped form: one text per language
    written = load_character(write(tmp_path, "maggie.yaml", text))
    card = json.loads(json.dumps(card_from_character(written, lore_pages=[])))
    texts = written.opening_messages[0].text
    assert isinstance(texts, dict)
    assert card["data"]["first_mes"] == texts["en"]
    assert card["data"]["alternate_greetings"] == [texts["es"]]
    again = character_from_card(card).character
    assert again.opening_messages == written.opening_messages
    assert card_from_character(again, lore_pages=[])["data"]["alternate_greetings"] == [texts["es"]]


# ---- the CLI --------------------------------------------------------------------------------


async def _run(tmp_path: Path, *argv: str) -> int | None:
    parser = argparse.ArgumentParser(prog="companion")
    register(parser.add_subparsers(dest="command", required=True))
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None, characters_dir=tmp_path / "chars", database_path=tmp_path / "c.db"
    )
    return await run_admin(parser.parse_args(argv), settings)


async def test_cli_import_writes_lints_and_refuses_to_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    card = write(tmp_path, "sera.png", png({"chara": b64(v2_card())}))
    assert await _run(tmp_path, "characters", "import", str(card)) == 0
    out = capsys.readouterr().out
    assert f"-> {tmp_path / 'chars' / 'seraphina_vale.yaml'}" in out
    assert "2 lore page(s)" in out
    assert "needs a human" in out and "speech_rules:" in out and "lint: does_not_know" in out
    assert (tmp_path / "chars" / "seraphina_vale.lore" / "wolves.md").is_file()

    assert await _run(tmp_path, "characters", "import", str(card)) == 2
    err = capsys.readouterr().err
    assert "seraphina_vale.yaml already exists; pass --force to overwrite it" in err
    assert await _run(tmp_path, "characters", "import", str(card), "--force") == 0


async def test_cli_import_reports_a_broken_card_and_a_duplicate_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = write(tmp_path, "old.json", _v1())
    assert await _run(tmp_path, "characters", "import", str(bad)) == 2
    assert f"{bad}: no 'spec' field: V1 cards are not supported" in capsys.readouterr().err
    folder = tmp_path / "chars"
    folder.mkdir()
    shipped = (REPO / "tests" / "data" / "characters" / "lighthouse_keeper.yaml").read_text()
    write(folder, "maggie.yaml", "id: seraphina_vale\n" + shipped)
    card = write(tmp_path, "sera.json", v2_card())
    assert await _run(tmp_path, "characters", "import", str(card)) == 2
    assert "maggie.yaml already uses the id 'seraphina_vale'" in capsys.readouterr().err


async def test_cli_export_writes_a_v2_card(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    card = write(tmp_path, "sera.json", v2_card())
    assert (
        await _run(tmp_path, "characters", "import", str(card), "--out", str(tmp_path / "chars"))
        == 0
    )
    out_file = tmp_path / "out" / "sera.card.json"
    assert (
        await _run(tmp_path, "characters", "export", "seraphina_vale", "--out", str(out_file)) == 0
    )
    assert "V2 card, 3 lore entries" in capsys.readouterr().out
    exported = json.loads(out_file.read_text())
    assert exported["data"]["name"] == "Seraphina Vale"
    assert (
        await _run(tmp_path, "characters", "export", "seraphina_vale", "--out", str(out_file)) == 2
    )
    assert "already exists" in capsys.readouterr().err
    assert await _run(tmp_path, "characters", "export", "seraphina_vale") == 0
    assert json.loads(capsys.readouterr().out)["spec"] == "chara_card_v2"
    assert await _run(tmp_path, "characters", "export", "nobody") == 2
    assert "no character 'nobody'" in capsys.readouterr().err


async def test_run_admin_leaves_other_commands_alone(tmp_path: Path) -> None:
    settings = Settings(_env_file=None, characters_dir=tmp_path)  # type: ignore[call-arg]
    chat = argparse.Namespace(command="chat")
    lint = argparse.Namespace(command="characters", action="lint")
    assert await run_admin(chat, settings) is None
    assert await run_admin(lint, settings) is None


def test_the_note_on_a_greeting_naming_the_user_says_what_the_file_does(tmp_path: Path) -> None:
    """The file keeps {{user}} and each user sees their own name: the note must not say the
    greeting now reads "the user"."""
    card = v2_card()
    card["data"]["first_mes"] = "*She looks up.* Welcome, {{user}}."
    imported = import_card(write(tmp_path, "sera.json", card))
    (note,) = [n for n in imported.notes if n.startswith("opening_messages")]
    path, _ = save_imported(imported, tmp_path / "characters")
    assert "Welcome, {{user}}." in path.read_text()
    assert "kept in the file" in note and "their own name" in note
    assert "now 'the user'" not in note
    loaded = load_character(path)
    assert opening_messages_for(loaded, "Ana")[0].text == "*She looks up.* Welcome, Ana."
