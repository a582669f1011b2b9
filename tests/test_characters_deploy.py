"""Characters on a deployment: one broken file costs only itself (list, lint, chat and a live
reload go on with the others), and importing a card never changes who new users get."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest

from bot.answers import Caller
from bot.app import open_app
from tests.conftest import CHARACTERS, FakeClock, make_settings
from tests.fakes.anthropic_api import FakeAnthropic, Text
from tests.test_cards import v2_card, write
from tests.test_cli import companion, env_for

KEEPER = (CHARACTERS / "lighthouse_keeper.yaml").read_text()
TYPO = KEEPER.replace("  trade: retired", "  trad: retired").replace("name: Maggie Thornton\n", "")
NEWCOMER = Caller("telegram", "77", "Ana", "dm", "77")


def folder_with_broken_files(tmp_path: Path) -> Path:
    folder = tmp_path / "characters"
    shutil.copytree(CHARACTERS, folder)
    (folder / "broken_keeper.yaml").write_text(TYPO.replace("traits:", "id: other\ntraits:"))
    (folder / "half_written.yaml").write_text("name: [unclosed\n")
    return folder


async def test_list_and_lint_report_every_broken_file_and_show_the_others(
    tmp_path: Path,
) -> None:
    env = env_for(tmp_path, None, CHARACTERS_DIR=str(folder_with_broken_files(tmp_path)))
    for action in ("list", "lint"):
        code, out, err = await companion("characters", action, env=env)
        assert code == 1, (out, err)  # a broken file fails the command
        assert "refusing to start" not in err
        assert "broken_keeper.yaml:" in err and "half_written.yaml:" in err
        # Every problem of the file, each naming its field, a misspelt key with its fix.
        assert (
            "field 'identity.trad': Extra inputs are not permitted (did you mean 'trade'?)" in err
        )
        assert "field 'name': Field required" in err
        assert "not valid YAML" in err
        # The syntax error's own mark names the file too, never '"<unicode string>"'.
        assert "<unicode string>" not in err
        assert f'in "{tmp_path}' in err and 'half_written.yaml", line' in err
    code, out, _ = await companion("characters", "list", env=env)
    assert "detective_bilbao\tKoldo Arrieta" in out and "lighthouse_keeper\tMaggie" in out
    code, out, _ = await companion("characters", "lint", env=env)
    assert "2 character(s)" in out and "2 broken file(s)" in out


async def test_a_chat_with_another_character_works_beside_a_broken_file(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    folder = folder_with_broken_files(tmp_path)
    fake_anthropic.queue(Text("Siéntate."))
    env = env_for(tmp_path, fake_anthropic, CHARACTERS_DIR=str(folder))
    code, out, err = await companion(
        "chat", "--character", "detective_bilbao", "--user", "ana", env=env, stdin="Hola\n"
    )
    assert code == 0, err
    assert "Koldo Arrieta: Siéntate." in out
    assert "skipping the broken file" in err and "broken_keeper.yaml" in err
    # (`run` still refuses: tests/test_characters.py::test_the_bot_refuses_to_start_...)


async def test_a_live_reload_takes_the_valid_edits_and_keeps_a_broken_files_last_version(
    tmp_path: Path,
    fake_anthropic: FakeAnthropic,
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    folder = tmp_path / "characters"
    shutil.copytree(CHARACTERS, folder)
    settings = make_settings(tmp_path, fake_anthropic, characters_dir=folder)
    fake_anthropic.queue(Text("Ahoy."), Text("Kaixo."))
    async with open_app(settings, clock=clock, start_scheduler=False) as app:
        detective = folder / "detective_bilbao.yaml"
        detective.write_text(
            detective.read_text().replace("name: Koldo Arrieta", "name: Koldo Etxebarria")
        )
        keeper = folder / "lighthouse_keeper.yaml"
        keeper.write_text(KEEPER.replace("  trade: retired", "  trad: retired"))
        for path in (detective, keeper):
            os.utime(path, (1_900_000_000, 1_900_000_000))
        with caplog.at_level(logging.ERROR):
            await app.sweep()  # the scheduler's poll
        assert "lighthouse_keeper.yaml" in caplog.text and "did you mean 'trade'?" in caplog.text
        assert "still serving the previous version" in caplog.text
        await app.commands.switch(NEWCOMER, "lighthouse_keeper")
        answer = await app.commands.chat(NEWCOMER, "Hello?")
        assert answer.ok and answer.text == "Ahoy."  # the keeper's last good version answers
        keeper_prompt = fake_anthropic.bodies()[-1]["system"][0]["text"]
        assert "Maggie Thornton" in keeper_prompt and "retired lighthouse keeper" in keeper_prompt
        await app.commands.switch(NEWCOMER, "detective_bilbao")
        await app.commands.chat(NEWCOMER, "Hola")
        assert fake_anthropic.bodies()[-1]["system"][0]["text"].startswith("Eres Koldo Etxebarria")


async def test_an_imported_card_says_who_new_users_get_and_never_takes_over(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    folder = tmp_path / "characters"
    shutil.copytree(CHARACTERS, folder)
    card = v2_card()
    card["data"]["name"] = "Aaron Ash"  # its id sorts before every shipped one
    env = env_for(tmp_path, None, CHARACTERS_DIR=str(folder))
    path = write(tmp_path, "aaron.json", card)
    code, out, err = await companion("characters", "import", str(path), env=env)
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("default character for new users"))
    assert line.startswith("default character for new users: detective_bilbao (")
    assert "DEFAULT_CHARACTER is unset" in line and "DEFAULT_CHARACTER=detective_bilbao" in line
    settings = make_settings(tmp_path, fake_anthropic, characters_dir=folder)
    async with open_app(settings, clock=clock, start_scheduler=False) as app:
        assert (await app.commands.character_for(NEWCOMER)).id == "detective_bilbao"

    code, out, _ = await companion("characters", "lint", env=env)
    assert "warning: settings: DEFAULT_CHARACTER: default character for new users: " in out
    pinned = env_for(tmp_path, None, CHARACTERS_DIR=str(folder), DEFAULT_CHARACTER="aaron_ash")
    code, out, _ = await companion("characters", "lint", env=pinned)
    assert "DEFAULT_CHARACTER" not in out  # pinned: nothing to warn about
    settings = make_settings(
        tmp_path, fake_anthropic, characters_dir=folder, default_character="aaron_ash"
    )
    async with open_app(settings, clock=clock, start_scheduler=False) as app:
        assert (await app.commands.character_for(NEWCOMER)).id == "aaron_ash"
