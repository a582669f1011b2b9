"""The real Telegram adapter (real python-telegram-bot) against the fake Bot API on 127.0.0.1,
with the real engine answering through the fake Anthropic Messages API."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.telegram_adapter import TelegramAdapter
from bot.app import App, open_app
from memory.models import Fact, Thread
from memory.scene.voices import voices_in
from tests.conftest import FakeClock, make_settings
from tests.fakes.anthropic_api import Delay, FakeAnthropic, Text
from tests.fakes.telegram_api import FakeTelegram

ANA, BEA = 1001, 1002
GROUP = -100_777


@dataclass
class Bot:
    fake: FakeTelegram
    llm: FakeAnthropic
    app: App
    adapter: TelegramAdapter


@pytest.fixture
async def bot(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock, request: pytest.FixtureRequest
) -> AsyncIterator[Bot]:
    overrides: dict[str, Any] = getattr(request, "param", {})
    async with FakeTelegram() as fake:
        settings = make_settings(
            tmp_path,
            fake_anthropic,
            telegram_bot_token=fake.token,
            telegram_api_base_url=fake.url,
            **overrides,
        )
        async with open_app(settings, clock=clock, start_scheduler=False) as app:
            adapter = TelegramAdapter(settings, app.commands)
            await adapter.start()
            try:
                yield Bot(fake, fake_anthropic, app, adapter)
            finally:
                await adapter.stop()


def llm_texts(body: dict[str, Any]) -> str:
    return json.dumps(body, ensure_ascii=False)


async def test_dm_conversation_of_several_turns(bot: Bot) -> None:
    bot.llm.queue(Text("Siéntate."), Text("Iñaki. Apuntado."), Text("El martes."))
    for index, message in enumerate(["Hola", "Busco a mi hermano Iñaki", "¿Cuándo?"], start=1):
        bot.fake.send_private_text(ANA, message, first_name="Ana")
        await bot.fake.wait_for_messages(ANA, index)
    assert [m["text"] for m in bot.fake.sent_messages(ANA)] == [
        "Siéntate.",
        "Iñaki. Apuntado.",
        "El martes.",
    ]
    assert "Busco a mi hermano Iñaki" in llm_texts(bot.llm.bodies()[-1])
    assert any(c["action"] == "typing" for c in bot.fake.chat_actions)
    languages = {language for _, language in bot.fake.commands}
    assert {"es", "en", ""} <= languages


async def test_group_mention_reply_and_silence(bot: Bot) -> None:
    bot.llm.queue(Text("¿Quién pregunta?"), Text("Sigo aquí."))
    bot.fake.send_group_text(GROUP, ANA, "hola a todos")  # not addressed: ignored
    bot.fake.send_group_text(GROUP, ANA, "¿estás ahí?", mention_bot=True)
    first = (await bot.fake.wait_for_messages(GROUP, 1))[0]
    # A group is a scene: each line is headed by its character's name (bot/scenes.py).
    assert first["text"] == "Koldo Arrieta\n¿Quién pregunta?"
    assert first["reply_to_message_id"] or first["reply_parameters"]  # addresses the writer
    bot.fake.send_group_text(GROUP, BEA, "¿y tú?", reply_to_bot_message_id=first["message_id"])
    await bot.fake.wait_for_messages(GROUP, 2)
    assert len(bot.llm.bodies()) == 2
    assert "hola a todos" not in llm_texts(bot.llm.bodies()[0])


async def test_long_reply_is_split_at_4096(bot: Bot) -> None:
    sentence = "Esta es una frase bastante larga del detective, con detalles. "
    long_reply = sentence * 150  # ~9,300 characters
    bot.llm.queue(Text(long_reply))
    bot.fake.send_private_text(ANA, "Cuéntamelo todo")
    chunks = [m["text"] for m in await bot.fake.wait_for_messages(ANA, 3)]
    assert all(len(c) <= 4096 for c in chunks)
    assert " ".join(chunks).split() == long_reply.split()


async def test_a_group_is_one_scene_with_every_speaker_named(bot: Bot) -> None:
    bot.fake.send_group_text(GROUP, ANA, "mi perro se llama Beltza", mention_bot=True)
    await bot.fake.wait_for_messages(GROUP, 1)
    bot.fake.send_group_text(GROUP, BEA, "¿qué tal?", mention_bot=True)
    await bot.fake.wait_for_messages(GROUP, 2)
    body = bot.llm.bodies()[-1]
    # One shared conversation: Bea's turn shows Ana's line, in Ana's person container.
    window = "\n".join(b["text"] for m in body["messages"] for b in m["content"] if "text" in b)
    said = [(kind, name, words) for kind, name, words in voices_in(window)]
    ana = bot.fake.users[ANA]["first_name"]
    assert ("person", ana, "mi perro se llama Beltza") in said
    assert ("person", bot.fake.users[BEA]["first_name"], "¿qué tal?") in said
    assert "conversación de grupo" in bot.llm.bodies()[-1]["system"][1]["text"]


async def test_reset_and_switching_character(bot: Bot) -> None:
    bot.fake.send_private_text(ANA, "Hola")
    await bot.fake.wait_for_messages(ANA, 1)
    bot.fake.send_command(ANA, ANA, "/reset")
    reset = (await bot.fake.wait_for_messages(ANA, 2))[-1]
    assert reset["text"].startswith("Conversación terminada")
    bot.fake.send_command(ANA, ANA, "/personaje")
    listing = (await bot.fake.wait_for_messages(ANA, 3))[-1]
    buttons = [row[0]["callback_data"] for row in listing["reply_markup"]["inline_keyboard"]]
    assert buttons == ["char:detective_bilbao", "char:lighthouse_keeper"]
    bot.fake.press_button(ANA, ANA, listing["message_id"], "char:lighthouse_keeper")
    await bot.fake.wait_until(lambda: bool(bot.fake.edited_messages))
    assert bot.fake.edited_messages[-1]["text"] == "You are now talking to Maggie Thornton."
    bot.fake.send_private_text(ANA, "Hello?")
    await bot.fake.wait_for_messages(ANA, 4)
    assert bot.llm.bodies()[-1]["system"][0]["text"].startswith("You are Maggie Thornton")


async def test_attachments_and_oversized_messages(bot: Bot) -> None:
    bot.fake.send_sticker(ANA, ANA)
    sticker = (await bot.fake.wait_for_messages(ANA, 1))[0]
    assert sticker["text"] == "Por ahora solo leo texto: cuéntamelo con palabras."
    bot.fake.send_private_text(ANA, "x" * 4001)
    refused = (await bot.fake.wait_for_messages(ANA, 2))[-1]
    assert "4001 caracteres y el límite es 4000 (te pasas en 1)" in refused["text"]
    assert bot.llm.bodies() == []


async def test_memoria_in_a_group_answers_privately(bot: Bot) -> None:
    bot.fake.send_private_text(ANA, "Hola")  # opens the private chat
    await bot.fake.wait_for_messages(ANA, 1)
    bot.fake.send_command(GROUP, ANA, "/memoria", args="ver", chat_type="supergroup")
    pointer = (await bot.fake.wait_for_messages(GROUP, 1))[0]
    assert pointer["text"] == "Te he contestado por privado."
    private = (await bot.fake.wait_for_messages(ANA, 2))[-1]
    assert private["text"].startswith("No recuerdo nada de ti todavía")


async def test_shutdown_finishes_the_reply_in_flight(bot: Bot) -> None:
    bot.llm.queue(Delay(0.8, Text("Respuesta lenta.")))
    bot.fake.send_private_text(ANA, "¿Sigues?")
    await bot.fake.wait_until(lambda: len(bot.llm.requests) == 1)
    stopping = asyncio.create_task(bot.adapter.stop())
    delivered = await bot.fake.wait_for_messages(ANA, 1)
    await stopping
    assert delivered[0]["text"] == "Respuesta lenta."


async def seed_fact(bot: Bot, user_id: int, key: str, value: str) -> int:
    """A fact about the user, as an extraction would write it."""
    bot.fake.send_private_text(user_id, f"Mi {key} es {value}")
    await bot.fake.wait_until(
        lambda: any(c["chat_id"] == user_id for c in bot.fake.sent_messages())
    )
    user = await bot.app.store.find_user("telegram", str(user_id))
    assert user is not None
    conversation = await bot.app.store.open_conversation(Thread(user.id, "detective_bilbao", "dm"))
    assert conversation is not None
    turn = (await bot.app.store.conversation_turns(conversation.id))[0]
    now = bot.app.companion._clock()
    fact = Fact(
        0,
        user.id,
        "detective_bilbao",
        "semantic",
        key,
        value,
        "stated",
        "dm",
        (turn.id,),
        "days:180",
        None,
        now,
        now,
        None,
    )
    await bot.app.store.apply_fact_changes([fact], [], [], [], None, now)
    return (await bot.app.store.facts(user.id, "detective_bilbao"))[0].id


async def test_memoria_fix_delete_and_another_users_number(bot: Bot) -> None:
    fact_id = await seed_fact(bot, ANA, "ciudad", "Getxo")
    bot.fake.send_command(ANA, ANA, "/memoria", args=f"corregir {fact_id} Bilbao")
    fixed = (await bot.fake.wait_for_messages(ANA, 2))[-1]
    assert fixed["text"] == f"Corregido: #{fact_id} ciudad = Bilbao."
    bot.fake.send_private_text(BEA, "Hola")
    await bot.fake.wait_for_messages(BEA, 1)
    bot.fake.send_command(BEA, BEA, "/memoria", args=f"borrar {fact_id}")
    refused = (await bot.fake.wait_for_messages(BEA, 2))[-1]
    assert refused["text"] == f"No hay ningún recuerdo #{fact_id} en tu memoria."
    bot.fake.send_command(ANA, ANA, "/memoria", args="ver")
    view = (await bot.fake.wait_for_messages(ANA, 3))[-1]
    assert f"#{fact_id} ciudad: Bilbao" in view["text"] and "antes: Getxo" in view["text"]


async def test_memoria_forget_confirmed_with_a_button_and_export(bot: Bot) -> None:
    await seed_fact(bot, ANA, "perro", "Beltza")
    bot.fake.send_command(ANA, ANA, "/memoria", args="exportar")
    await bot.fake.wait_until(lambda: bool(bot.fake.documents))
    document = bot.fake.documents[-1]
    assert document["filename"] == "memoria-detective_bilbao.json"
    assert json.loads(document["content"])["facts"][0]["value"] == "Beltza"
    bot.fake.send_command(ANA, ANA, "/memoria", args="olvidar")
    ask = (await bot.fake.wait_for_messages(ANA, 4))[-1]  # reply, export note, file, question
    buttons = [row[0]["callback_data"] for row in ask["reply_markup"]["inline_keyboard"]]
    assert buttons == ["mem:forget:detective_bilbao", "mem:cancel"]
    bot.fake.press_button(ANA, ANA, ask["message_id"], "mem:forget:detective_bilbao")
    await bot.fake.wait_until(lambda: bool(bot.fake.edited_messages))
    assert "te ha olvidado por completo" in bot.fake.edited_messages[-1]["text"]
    user = await bot.app.store.find_user("telegram", str(ANA))
    assert user is not None and await bot.app.store.facts(user.id, "detective_bilbao") == []
