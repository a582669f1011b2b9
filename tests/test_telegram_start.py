"""Telegram's /start, every user's first message: the character's greeting, not the help."""

from __future__ import annotations

import shutil
from pathlib import Path

from bot.adapters.telegram_adapter import TelegramAdapter
from bot.app import open_app
from cards.character import load_character
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


async def test_start_greets_each_user_in_their_own_language(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    """A character that wrote its greeting in several languages greets each user in the one
    their client reports (language_code), and in its own when the client reports none or one
    the character did not write."""
    koldo = load_character(CHARACTERS / "detective_bilbao.yaml")
    texts = koldo.opening_messages[0].text
    assert isinstance(texts, dict) and set(texts) == {"es", "en"}
    ana, bob, carla, dieter = 1001, 1002, 1003, 1004
    async with FakeTelegram() as fake:
        fake.languages.update({ana: "es-ES", bob: "en-GB", dieter: "de"})
        settings = make_settings(
            tmp_path,
            fake_anthropic,
            characters_dir=CHARACTERS,
            default_character="detective_bilbao",
            telegram_bot_token=fake.token,
            telegram_api_base_url=fake.url,
        )
        async with open_app(settings, clock=clock, start_scheduler=False) as app:
            adapter = TelegramAdapter(settings, app.commands)
            await adapter.start()
            try:
                firsts = {}
                for user in (ana, bob, carla, dieter):
                    fake.send_command(user, user, "/start", first_name=f"u{user}")
                    (firsts[user],) = await fake.wait_for_messages(user, 1)
            finally:
                await adapter.stop()
    greeting = {user: first["text"].split("\n\n")[0] for user, first in firsts.items()}
    assert greeting[ana].startswith("La puerta del despacho chirría.")
    assert greeting[bob].startswith("The office door creaks.")
    assert greeting[carla] == greeting[ana]  # no language reported: the character's own
    assert greeting[dieter] == greeting[ana]  # one the character did not write: its own
    assert firsts[bob]["text"].endswith("(/help: what I can do and which commands there are)")
    assert fake_anthropic.bodies() == []


async def test_start_in_english_with_a_spanish_only_greeting_gives_the_spanish_one(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    """A plain-string greeting stays valid: every user gets it, whatever their language."""
    folder = tmp_path / "characters"
    folder.mkdir()
    text = (CHARACTERS / "detective_bilbao.yaml").read_text()
    start = text.index("opening_messages:")
    end = text.index("reminder:")
    plain = "opening_messages:\n  - {role: assistant, text: Siéntate y cuenta.}\n"
    (folder / "koldo.yaml").write_text(text[:start] + plain + text[end:])
    async with FakeTelegram() as fake:
        fake.languages[ANA] = "en-US"
        settings = make_settings(
            tmp_path,
            fake_anthropic,
            characters_dir=folder,
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
    assert first["text"].split("\n\n")[0] == "Siéntate y cuenta."
