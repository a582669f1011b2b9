"""Off the record across a restart (issue 28, A4): the fact that a thread is off the record is
in the database (never its words), so a new process over the same database refuses the next
message unstored, with the notice of an off-the-record conversation that ended, instead of
storing what the user still believes is off the record. Driven through the real Telegram adapter
on the fake Bot API; the "restart" is a new App (a new engine and store) over the same file or
PostgreSQL database."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from bot.adapters.telegram_adapter import TelegramAdapter
from bot.app import App, open_app
from memory.models import Thread
from tests.conftest import FakeClock, make_settings
from tests.fakes.anthropic_api import FakeAnthropic, Text
from tests.fakes.telegram_api import FakeTelegram
from tests.test_incognito import database_holds

ANA = 1001
SECRET = "Txakoli4471ocelote"  # said off the record, before the restart
AFTER = "Getaria9902manatí"  # the first message after it
EXPIRED = "terminó tras un rato sin mensajes"  # bot/texts.py, incognito_expired (es)


@asynccontextmanager
async def process(
    telegram: FakeTelegram, tmp_path: Path, llm: FakeAnthropic, clock: FakeClock
) -> AsyncIterator[App]:
    """One run of the bot: a new engine, store and adapter over the test's database."""
    settings = make_settings(
        tmp_path, llm, telegram_bot_token=telegram.token, telegram_api_base_url=telegram.url
    )
    async with open_app(settings, clock=clock, start_scheduler=False) as app:
        adapter = TelegramAdapter(settings, app.commands)
        await adapter.start()
        try:
            yield app
        finally:
            await adapter.stop()


async def say(telegram: FakeTelegram, text: str) -> str:
    before = len(telegram.sent_messages(ANA))
    if text.startswith("/"):
        telegram.send_command(ANA, ANA, text)
    else:
        telegram.send_private_text(ANA, text, first_name="Ana")
    await telegram.wait_for_messages(ANA, before + 1)
    return str(telegram.sent_messages(ANA)[-1]["text"])


async def go_off_the_record(telegram: FakeTelegram, llm: FakeAnthropic) -> None:
    llm.queue(Text("Apuntado."), Text("Entre nosotros."))
    await say(telegram, "Hola, soy Ana")
    assert (await say(telegram, "/incognito")).startswith("Conversación fuera de registro")
    assert await say(telegram, f"Te cuento algo: {SECRET}") == "Entre nosotros."


async def test_the_next_message_after_a_restart_is_refused_unstored(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    async with FakeTelegram() as telegram:
        async with process(telegram, tmp_path, fake_anthropic, clock):
            await go_off_the_record(telegram, fake_anthropic)
        calls = len(fake_anthropic.bodies())
        clock.advance(minutes=2)  # well inside the timeout: only the restart ended it
        async with process(telegram, tmp_path, fake_anthropic, clock) as app:
            refused = await say(telegram, f"Sigo fuera de registro: {AFTER}")
            assert EXPIRED in refused
            assert len(fake_anthropic.bodies()) == calls  # no model call was made for it
            await app.companion.drain()
            assert await database_holds(app, AFTER) == []
            assert await database_holds(app, SECRET) == []
            # Once: the message after the notice is on the record again.
            fake_anthropic.queue(Text("De vuelta."))
            assert await say(telegram, "Ahora sí, con memoria") == "De vuelta."
            assert await database_holds(app, "Ahora sí, con memoria") != []


async def test_incognito_off_after_a_restart_ends_it(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    async with FakeTelegram() as telegram:
        async with process(telegram, tmp_path, fake_anthropic, clock):
            await go_off_the_record(telegram, fake_anthropic)
        async with process(telegram, tmp_path, fake_anthropic, clock) as app:
            off = await say(telegram, "/incognito off")
            assert off.startswith("Fin de la conversación fuera de registro")
            fake_anthropic.queue(Text("Vale."))
            assert await say(telegram, "Algo normal") == "Vale."
            assert await database_holds(app, "Algo normal") != []


async def test_the_flag_is_never_the_words_and_forget_deletes_it(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    async with FakeTelegram() as telegram:
        async with process(telegram, tmp_path, fake_anthropic, clock) as app:
            await go_off_the_record(telegram, fake_anthropic)
            user = await app.store.find_user("telegram", str(ANA))
            assert user is not None
            thread = Thread(user.id, "detective_bilbao", "dm")
            until = await app.store.off_record_until(thread)
            assert until is not None and until > clock()  # the expiry moved with the message
            await app.companion.drain()
            assert await database_holds(app, SECRET) == []
            async with app.companion.forgetting(user.id, thread.character_id):
                await app.store.forget(user.id, thread.character_id)
            assert await app.store.off_record_until(thread) is None
        async with process(telegram, tmp_path, fake_anthropic, clock) as app:
            fake_anthropic.queue(Text("Hola, ¿nos conocemos?"))
            assert await say(telegram, "Hola otra vez") == "Hola, ¿nos conocemos?"


async def test_a_restart_right_after_incognito_ends_it_too(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    async with FakeTelegram() as telegram:
        async with process(telegram, tmp_path, fake_anthropic, clock):
            assert (await say(telegram, "/incognito")).startswith("Conversación fuera de registro")
        async with process(telegram, tmp_path, fake_anthropic, clock) as app:
            assert EXPIRED in await say(telegram, f"Mi secreto: {AFTER}")
            assert fake_anthropic.bodies() == []
            assert await database_holds(app, AFTER) == []
