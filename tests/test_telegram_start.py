"""Telegram's /start, every user's first message: the character's greeting, not the help."""

from __future__ import annotations

import shutil
from pathlib import Path

from bot.adapters.telegram_adapter import TelegramAdapter
from bot.app import open_app
from cards.sillytavern import import_card, save_imported
from tests.conftest import CHARACTERS, FakeClock, make_settings
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.telegram_api import FakeTelegram
from tests.test_cards import v2_card, write

ANA = 1001


async def test_start_greets_as_the_character_with_one_line_on_help(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    folder = tmp_path / "characters"
    shutil.copytree(CHARACTERS, folder)
    card = v2_card()
    card["data"]["first_mes"] = "*She looks up.* Welcome, {{user}}."
    save_imported(import_card(write(tmp_path, "card.json", card)), folder)
    async with FakeTelegram() as fake:
        settings = make_settings(
            tmp_path,
            fake_anthropic,
            characters_dir=folder,
            default_character="seraphina_vale",
            telegram_bot_token=fake.token,
            telegram_api_base_url=fake.url,
        )
        async with open_app(settings, clock=clock, start_scheduler=False) as app:
            adapter = TelegramAdapter(settings, app.commands)
            await adapter.start()
            try:
                fake.send_command(ANA, ANA, "/start", first_name="Ana")
                (first,) = await fake.wait_for_messages(ANA, 1)
            finally:
                await adapter.stop()
    lines = first["text"].split("\n\n")
    assert lines[0] == "She looks up. Welcome, Ana."  # the greeting, named for her (the fake
    # gives the text without its HTML entities)
    assert lines[1:] == ["(/help: what I can do and which commands there are)"]
    assert "You are talking to" not in first["text"]  # not the help screen
    assert fake_anthropic.bodies() == []  # the greeting is pinned text, no model call
