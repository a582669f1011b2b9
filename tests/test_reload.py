"""Live reload: a valid edit reaches new turns, a broken one is refused and the old one serves."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.answers import Caller
from bot.app import App, open_app
from tests.conftest import CHARACTERS, FakeClock, make_settings
from tests.fakes.anthropic_api import FakeAnthropic

ADMIN = Caller("telegram", "42", "Admin", "dm", "42")
USER = Caller("telegram", "7", "Ana", "dm", "7")


@pytest.fixture
async def live(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> AsyncIterator[tuple[App, Path]]:
    folder = tmp_path / "characters"
    shutil.copytree(CHARACTERS, folder)
    settings = make_settings(
        tmp_path, fake_anthropic, characters_dir=folder, admin_ids=["telegram:42"]
    )
    async with open_app(settings, clock=clock, start_scheduler=False) as app:
        yield app, folder / "detective_bilbao.yaml"


def edit(path: Path, old: str, new: str, stamp: int) -> None:
    path.write_text(path.read_text().replace(old, new))
    os.utime(path, (stamp, stamp))  # a distinct mtime, whatever the filesystem's resolution


async def test_a_valid_edit_applies_to_new_turns(live: tuple[App, Path], fake_anthropic) -> None:
    app, path = live
    await app.commands.chat(USER, "Hola")
    edit(path, "name: Koldo Arrieta", "name: Koldo Etxebarria", 1_900_000_000)
    await app.sweep()  # the scheduler's poll
    await app.commands.chat(USER, "¿Sigues ahí?")
    assert fake_anthropic.bodies()[-1]["system"][0]["text"].startswith("Eres Koldo Etxebarria")


async def test_a_broken_edit_is_refused_and_the_old_version_serves(
    live: tuple[App, Path], fake_anthropic, caplog: pytest.LogCaptureFixture
) -> None:
    app, path = live
    edit(path, "  trade: detective privado", "  trad: detective privado", 1_900_000_100)
    with caplog.at_level(logging.ERROR):
        await app.sweep()
    assert "still serving the previous version" in caplog.text
    assert "field 'identity.trad': Extra inputs are not permitted" in caplog.text
    await app.commands.chat(USER, "Hola")
    assert fake_anthropic.bodies()[-1]["system"][0]["text"].startswith("Eres Koldo Arrieta")


async def test_the_admin_command_reports_the_error(live: tuple[App, Path]) -> None:
    app, path = live
    refused = await app.commands.reload(USER)
    operator_only = "Solo el operador del bot puede hacer eso (su id está en ADMIN_IDS)."
    assert not refused.ok and refused.text == operator_only
    edit(path, "traits:", "trait:", 1_900_000_200)
    broken = await app.commands.reload(ADMIN)
    assert not broken.ok and broken.private
    assert "sigo con la versión anterior" in broken.text and "detective_bilbao.yaml" in broken.text
    edit(path, "trait:", "traits:", 1_900_000_300)
    fixed = await app.commands.reload(ADMIN)
    assert fixed.ok and fixed.text.startswith("Personajes recargados (2)")
