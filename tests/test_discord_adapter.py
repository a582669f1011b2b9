"""The Discord adapter end to end: real discord.py against the fake Discord, the real engine, and
the fake Anthropic Messages API as the LLM."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from discord.gateway import DiscordWebSocket
from discord.http import Route

from bot.adapters import discord_views
from bot.adapters.discord_adapter import DiscordAdapter
from bot.adapters.split import split_message
from bot.app import App, open_app
from bot.command_line import help_lines
from bot.texts import text
from memory.scene.voices import voices_in
from tests.conftest import FakeClock, make_settings
from tests.fakes.anthropic_api import Delay, FakeAnthropic, Text
from tests.fakes.discord_api import FakeAttachment, FakeDiscord, SentMessage
from tests.fakes.discord_world import JSON
from tests.patience import PATIENCE
from tests.raw_db import raw_database

ALICE, BOB, OTHER_BOT = 4242, 5353, 6464
EPHEMERAL = 64
KOLDO, MAGGIE = "detective_bilbao", "lighthouse_keeper"
MAGGIE_NAME = "Maggie Thornton"


@dataclass
class Harness:
    fake: FakeDiscord
    llm: FakeAnthropic
    app: App
    adapter: DiscordAdapter

    def bodies(self) -> list[dict[str, Any]]:
        return self.llm.bodies()

    def last_user_text(self) -> str:
        return as_heard(self.bodies()[-1]["messages"][-1]["content"][0]["text"])

    async def slash(self, name: str, options: dict[str, object] | None = None, **kw: Any) -> Any:
        interaction_id = await self.fake.slash_command(name, options, **kw)
        return await self.fake.wait_for_interaction_response(interaction_id)


Launch = Callable[..., Awaitable[Harness]]


@asynccontextmanager
async def running(
    tmp_path: Path, fake: FakeDiscord, llm: FakeAnthropic, clock: FakeClock, **overrides: Any
) -> AsyncIterator[Harness]:
    settings = make_settings(
        tmp_path,
        llm,
        discord_bot_token=fake.token,
        discord_api_base_url=f"{fake.url}/api/v10",
        **overrides,
    )
    async with open_app(settings, clock=clock, start_scheduler=False) as app:
        adapter = DiscordAdapter(
            settings, app.commands, guild_ready_timeout=0.05, ready_timeout=PATIENCE
        )
        await adapter.start()
        try:
            yield Harness(fake, llm, app, adapter)
        finally:
            await adapter.stop()


@pytest.fixture
async def launch(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> AsyncIterator[Launch]:
    """Start the whole bot with settings overrides; stopped (adapter, then engine) at the end."""
    async with FakeDiscord() as fake, AsyncExitStack() as stack:

        async def start(**overrides: Any) -> Harness:
            context = running(tmp_path, fake, fake_anthropic, clock, **overrides)
            return await stack.enter_async_context(context)

        yield start


@pytest.fixture
async def h(launch: Launch) -> Harness:
    return await launch(admin_ids=[f"discord:{ALICE}"])


def reply_target(message: SentMessage) -> int | None:
    reference = message.message_reference
    return int(reference["message_id"]) if reference else None


def as_heard(text: str) -> str:
    """A scene line in its person's container (memory/scene/voices.py) as "name: words"."""
    found = voices_in(text)
    return f"{found[0][1]}: {found[0][2]}" if len(found) == 1 and found[0][0] == "person" else text


def texts_sent_to_llm(body: dict[str, Any]) -> list[str]:
    return [
        as_heard(block["text"])
        for m in body["messages"]
        for block in m["content"]
        if "text" in block
    ]


# -- lifecycle ----------------------------------------------------------------------------------


async def test_start_connects_syncs_commands_and_stop_restores_discord_py(
    launch: Launch, fake_anthropic: FakeAnthropic
) -> None:
    saved = (Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY)
    h = await launch()
    assert Route.BASE.startswith(h.fake.url)
    assert str(DiscordWebSocket.DEFAULT_GATEWAY) == h.fake.ws_url  # learnt from /gateway/bot
    assert h.adapter.client.is_ready()
    identify = h.fake.identify_payload
    assert identify is not None and identify["intents"] == h.adapter.client.intents.value
    assert h.adapter.client.intents.message_content and h.adapter.client.intents.dm_messages
    names = {c["name"] for c in h.fake.registered_commands[None]}
    assert names == {
        "personaje",
        "personaje-admin",
        "escena",
        "escena-admin",
        "memoria",
        "reset",
        "ayuda",
        "zona",
        "incognito",
        "avisos",
        "start",
        "yo",
        "admin",
    }
    memoria = next(c for c in h.fake.registered_commands[None] if c["name"] == "memoria")
    subcommands = {o["name"]: o["description"] for o in memoria["options"]}
    assert set(subcommands) == {
        "ver", "corregir", "borrar", "olvidar", "exportar", "revisar", "caduca", "porque",
        "historial", "historia",
    }  # fmt: skip
    assert all(0 < len(d) <= 100 for d in subcommands.values())
    await h.adapter.stop()
    assert h.adapter.client.is_closed()
    assert saved == (Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY)
    assert h.fake.unknown_routes == [] and h.fake.errors == []


async def test_start_fails_clearly_without_ready(tmp_path: Path, fake_anthropic) -> None:
    async with FakeDiscord() as fake:
        settings = make_settings(
            tmp_path,
            fake_anthropic,
            discord_bot_token=fake.token,
            discord_api_base_url=f"{fake.url}/api/v10",
        )
        async with open_app(settings, start_scheduler=False) as app:
            adapter = DiscordAdapter(settings, app.commands, ready_timeout=0.2)
            fake.gateway.token = "another-token"  # IDENTIFY is refused: no READY ever comes
            with pytest.raises(RuntimeError, match="authentication failed; check DISCORD_BOT"):
                await adapter.start()
            await adapter.stop()


# -- conversations ------------------------------------------------------------------------------


async def test_dm_conversation_replies_in_order_with_history(h: Harness) -> None:
    h.llm.queue(Text("Siéntate."), Text("Cuéntame más."), Text("Ya te digo."))
    sent = []
    for i in range(3):  # each after the previous answer: a burst would be answered once
        sent.append(await h.fake.dm(ALICE, f"mensaje {i}", username="alice"))
        replies = await h.fake.wait_for_dms(ALICE, i + 1)
    assert [r.content for r in replies] == ["Siéntate.", "Cuéntame más.", "Ya te digo."]
    assert [reply_target(r) for r in replies] == [int(m["id"]) for m in sent]
    second = texts_sent_to_llm(h.bodies()[1])
    assert "mensaje 0" in second and "Siéntate." in second
    assert h.last_user_text() == "mensaje 2"


async def test_guild_mention_answered_plain_message_ignored_reply_answered(h: Harness) -> None:
    # A guild channel is a scene: the character speaks through its webhook (more in
    # tests/test_discord_scenes.py).
    h.llm.queue(Text("Dime."), Text("Eso es otra historia."))
    await h.fake.guild_message(ALICE, "esto no va contigo", username="alice")
    await h.fake.guild_message(ALICE, "hola, detective", mention_bot=True, username="alice")
    [first] = await h.fake.webhooks.wait_for_messages(h.fake.channel_id)
    assert first.content == "Dime." and first.message["author"]["username"] == "Koldo Arrieta"
    assert len(h.bodies()) == 1  # the unmentioned message (handled first) never reached the LLM
    assert h.last_user_text() == "alice: hola, detective"  # the mention is stripped

    await h.fake.guild_message(ALICE, "¿y eso?", reply_to=first.id, username="alice")
    second = (await h.fake.webhooks.wait_for_messages(h.fake.channel_id, 2))[1]
    assert second.content == "Eso es otra historia."
    assert h.last_user_text() == "alice: ¿y eso?"
    assert h.fake.sent_messages(h.fake.channel_id) == []


async def test_long_reply_is_split_for_discord(h: Harness) -> None:
    sentence = "Esto es una frase de prueba bastante normal. "
    long = (sentence * (4500 // len(sentence) + 1)).strip()
    h.llm.queue(Text(long))
    sent = await h.fake.dm(ALICE, "cuéntamelo todo")
    expected = split_message(long, 2000)
    replies = await h.fake.wait_for_dms(ALICE, len(expected))
    assert len(expected) == 3
    assert [r.content for r in replies] == expected
    assert all(len(r.content or "") <= 2000 for r in replies)
    assert all((r.content or "").endswith(".") for r in replies)  # cut on sentences
    assert reply_target(replies[0]) == int(sent["id"])
    assert [reply_target(r) for r in replies[1:]] == [None, None]


async def test_a_guild_channel_is_one_scene_with_every_speaker_named(h: Harness) -> None:
    h.llm.queue(Text("Apuntado."), Text("Encantado, Bea."))
    await h.fake.guild_message(ALICE, "mi gato se llama Bigotes", mention_bot=True, username="ana")
    await h.fake.webhooks.wait_for_messages(h.fake.channel_id)
    await h.fake.guild_message(BOB, "soy Bea", mention_bot=True, username="bea")
    lines = await h.fake.webhooks.wait_for_messages(h.fake.channel_id, 2)
    assert [m.content for m in lines] == ["Apuntado.", "Encantado, Bea."]
    assert all(m.allowed_mentions == {"parse": []} for m in lines)  # a line pings nobody
    # One shared conversation: Bea's turn shows Ana's line and the character's, each named
    # (a person's in their container, read back as "name: words").
    bea_request = texts_sent_to_llm(h.bodies()[1])
    assert "ana: mi gato se llama Bigotes" in bea_request and "Apuntado." in bea_request
    assert "bea: soy Bea" in bea_request


async def test_other_bots_and_webhooks_are_ignored(h: Harness) -> None:
    h.llm.queue(Text("Aquí estoy."))
    await h.fake.guild_message(OTHER_BOT, "beep", mention_bot=True, author_bot=True)
    await h.fake.dm(OTHER_BOT, "beep boop", author_bot=True)
    hook = h.fake.world.user_message(
        h.fake.channel_id, BOB, f"<@{h.fake.bot_user.id}> hook", base_url=h.fake.url,
        username="hook", author_bot=False, reply_to=None, attachments=None, stickers=(),
    )  # fmt: skip
    await h.fake.dispatch("MESSAGE_CREATE", {**hook, "webhook_id": "999"})
    await h.fake.guild_message(ALICE, "¿hay alguien?", mention_bot=True, username="alice")
    [only] = await h.fake.webhooks.wait_for_messages(h.fake.channel_id)
    assert only.content == "Aquí estoy."
    assert len(h.bodies()) == 1 and h.last_user_text() == "alice: ¿hay alguien?"
    assert h.fake.sent_dms(OTHER_BOT) == [] and h.fake.sent_messages(h.fake.channel_id) == []


async def test_typing_is_shown_before_the_reply(h: Harness) -> None:
    await h.fake.dm(ALICE, "¿qué ves?")
    await h.fake.wait_for_dms(ALICE)
    channel = h.fake.dm_channel_id(ALICE)
    paths = [r.path for r in h.fake.requests if r.method == "POST"]
    typing = paths.index(f"/api/v10/channels/{channel}/typing")
    message = paths.index(f"/api/v10/channels/{channel}/messages")
    assert typing < message
    # In a guild's scene too, before the character's line.
    await h.fake.guild_message(ALICE, "¿qué ves?", mention_bot=True)
    [line] = await h.fake.webhooks.wait_for_messages(h.fake.channel_id)
    hook = f"/api/v10/webhooks/{line.message['webhook_id']}/"
    paths = [r.path for r in h.fake.requests if r.method == "POST"]
    typing = paths.index(f"/api/v10/channels/{h.fake.channel_id}/typing")
    assert typing < next(i for i, p in enumerate(paths) if p.startswith(hook))


async def test_llm_cannot_ping_everyone_roles_or_users(h: Harness) -> None:
    h.llm.queue(Text(f"@everyone @here <@&{h.fake.guild_id}> <@{BOB}> venid todos."))
    await h.fake.dm(ALICE, "llama a todos")
    [reply] = await h.fake.wait_for_dms(ALICE)
    assert reply.content is not None and reply.content.startswith("@everyone")
    assert reply.allowed_mentions == {"parse": [], "replied_user": True}
    # A character's line in a guild's scene pings nobody either.
    h.llm.queue(Text(f"@everyone @here <@&{h.fake.guild_id}> <@{BOB}> venid todos."))
    await h.fake.guild_message(ALICE, "llama a todos", mention_bot=True)
    [line] = await h.fake.webhooks.wait_for_messages(h.fake.channel_id)
    assert line.content is not None and line.content.startswith("@everyone")
    assert line.allowed_mentions == {"parse": []}


async def test_attachments_without_text_are_refused_with_text_answered(h: Harness) -> None:
    # (Photos are seen: tests/test_photos.py. A file that is no image is not.)
    photo = FakeAttachment("gato.pdf", b"%PDF-1.4", "application/pdf")
    await h.fake.dm(ALICE, "", attachments=[photo])
    await h.fake.dm(ALICE, "", stickers=["wave"])
    await h.fake.dm(ALICE, "mira mi gato", attachments=[photo])
    replies = await h.fake.wait_for_dms(ALICE, 3)
    refusal = text("es", "attachment")
    assert [r.content for r in replies[:2]] == [refusal, refusal]
    assert len(h.bodies()) == 1 and h.last_user_text() == "mira mi gato"


async def test_message_over_the_limit_is_refused_without_llm(launch: Launch) -> None:
    h = await launch(max_message_chars=100)
    await h.fake.dm(ALICE, "x" * 150)
    [reply] = await h.fake.wait_for_dms(ALICE)
    assert reply.content == text("es", "too_long", length=150, limit=100, over=50)
    assert h.bodies() == []


async def test_unexpected_error_is_logged_and_apologised(
    h: Harness, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("database on fire")

    monkeypatch.setattr(h.app.commands, "submit", broken)
    await h.fake.dm(ALICE, "hola")
    [reply] = await h.fake.wait_for_dms(ALICE)
    assert reply.content == text("es", "error")
    assert "database on fire" not in (reply.content or "")
    logged = [r for r in caplog.records if r.exc_info and "database on fire" in str(r.exc_info[1])]
    assert logged


# -- channel binding ------------------------------------------------------------------------------


async def test_bound_channel_answers_every_message(h: Harness) -> None:
    refused = await h.slash("personaje-admin", {"id": MAGGIE}, user_id=BOB, subcommand="vincular")
    assert refused.ephemeral and refused.content == text("es", "manage_discord")
    bound = await h.slash("personaje-admin", {"id": MAGGIE}, user_id=ALICE, subcommand="vincular")
    assert not bound.ephemeral and "Maggie Thornton" in (bound.content or "")
    h.llm.queue(Text("Hello, love."))
    await h.fake.guild_message(BOB, "nice shop")  # no mention: answered because bound
    [reply] = await h.fake.webhooks.wait_for_messages(h.fake.channel_id)
    assert (reply.content, reply.message["author"]["username"]) == ("Hello, love.", MAGGIE_NAME)
    assert "Maggie Thornton" in h.bodies()[0]["system"][0]["text"]

    unbound = await h.slash("personaje-admin", user_id=ALICE, subcommand="desvincular")
    assert unbound.content == text("es", "unbound")  # in the language of the user who asked
    h.llm.queue(Text("Dime."))
    await h.fake.guild_message(BOB, "still there?")
    await h.fake.guild_message(BOB, "hola", mention_bot=True)
    second = (await h.fake.webhooks.wait_for_messages(h.fake.channel_id, 2))[1]
    assert second.content == "Dime." and len(h.bodies()) == 2
    assert second.message["author"]["username"] == "Koldo Arrieta"  # the default, once unbound


# -- slash commands -------------------------------------------------------------------------------


async def test_reset_slash_command_ends_the_conversation(h: Harness) -> None:
    await h.fake.dm(ALICE, "hola")
    await h.fake.wait_for_dms(ALICE)
    response = await h.slash("reset", user_id=ALICE, guild=False)
    assert response.type == 4 and response.content == text("es", "reset")
    with raw_database(h.app.settings) as raw:
        reasons = raw.execute("SELECT end_reason FROM conversations").fetchall()
    assert reasons == [("reset",)]
    again = await h.slash("reset", user_id=ALICE, guild=False)
    assert again.content == text("es", "reset_none")


async def test_switching_character_changes_the_system_prompt(h: Harness) -> None:
    response = await h.slash(
        "personaje", {"id": MAGGIE}, user_id=ALICE, guild=False, subcommand="cambiar"
    )
    assert response.content == text("es", "switched", name="Maggie Thornton")
    await h.fake.dm(ALICE, "hello")
    await h.fake.wait_for_dms(ALICE)
    system = h.bodies()[-1]["system"][0]["text"]
    assert "Maggie Thornton" in system and "Koldo" not in system


async def test_character_list_buttons_switch(h: Harness) -> None:
    listing = await h.slash("personaje", user_id=ALICE, guild=False, subcommand="lista")
    buttons = [c for row in listing.data["components"] for c in row["components"]]
    assert [b["custom_id"] for b in buttons] == [f"char:{KOLDO}", f"char:{MAGGIE}"]
    message = response_message(h.fake, listing.interaction_id)  # the list, with its buttons
    pressed = await press_button(h.fake, ALICE, message, f"char:{MAGGIE}", guild=False)
    update = await h.fake.wait_for_interaction_response(pressed)
    assert update.type == 7  # the DM panel is edited in place
    assert update.content == text("es", "switched", name="Maggie Thornton")  # the user's
    assert update.data["components"] == []


async def test_autocomplete_offers_character_ids(h: Harness) -> None:
    state = h.fake.world.new_interaction(h.fake.dm_channel_id(ALICE), None)
    focused = {"name": "id", "type": 3, "value": "light", "focused": True}
    data = {
        "id": "1",
        "name": "personaje",
        "type": 1,
        "options": [{"name": "cambiar", "type": 1, "options": [focused]}],
    }
    payload = h.fake.world.interaction_payload(state, h.fake.world.user(ALICE), data)
    await h.fake.dispatch("INTERACTION_CREATE", {**payload, "type": 4})
    response = await h.fake.wait_for_interaction_response(state.id)
    assert response.type == 8
    assert response.data["choices"] == [{"name": f"Maggie Thornton ({MAGGIE})", "value": MAGGIE}]


async def test_help_is_ephemeral_in_a_guild(h: Harness) -> None:
    response = await h.slash("ayuda", user_id=ALICE)
    expected = text("es", "help", name="Koldo Arrieta", commands=help_lines("es"))
    assert response.ephemeral and response.content == expected


async def test_slash_command_error_is_ephemeral_and_logged(
    h: Harness, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(*args: object) -> None:
        raise RuntimeError("help exploded")

    monkeypatch.setattr(h.app.commands, "help", broken)
    response = await h.slash("ayuda", user_id=ALICE, guild=False)
    assert response.ephemeral and response.content == text("es", "error")
    assert any(r.exc_info and "help exploded" in str(r.exc_info[1]) for r in caplog.records)


async def test_slow_command_is_deferred_then_followed_up(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(discord_views, "DEFER_AFTER_SECONDS", 0)  # every command is "slow"
    interaction_id = await h.fake.slash_command("ayuda", user_id=ALICE)
    deferred = await h.fake.wait_for_interaction_response(interaction_id)
    assert deferred.type == 5 and deferred.ephemeral
    [followup] = await h.fake.wait_for_followups(interaction_id)
    assert followup.content == text("es", "help", name="Koldo Arrieta", commands=help_lines("es"))


# -- /memoria -------------------------------------------------------------------------------------


async def test_memoria_ver_is_ephemeral_in_a_guild(h: Harness) -> None:
    response = await h.slash("memoria", user_id=ALICE, subcommand="ver")
    assert response.ephemeral and response.content.startswith(text("es", "mem_none"))


async def test_memoria_user_facing_error_is_shown(h: Harness) -> None:
    response = await h.slash("memoria", {"numero": 999}, user_id=ALICE, subcommand="borrar")
    assert response.ephemeral and "999" in (response.content or "")
    assert response.content != text("es", "error")


async def test_memoria_arguments_are_passed_as_words(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot.commands import Answer

    calls: list[tuple[str, str, str]] = []

    async def memoria(caller: Any, action: str, args: str) -> Answer:
        calls.append((caller.channel_kind, action, args))
        return Answer("ok")

    monkeypatch.setattr(h.app.commands, "memoria", memoria)
    options = {"numero": 3, "valor": "vive en Getxo"}
    await h.slash("memoria", options, user_id=ALICE, guild=False, subcommand="corregir")
    await h.slash("memoria", {"estado": "on"}, user_id=ALICE, subcommand="revisar")
    options = {"numero": 2, "duracion": "6m"}
    dm = await h.slash("memoria", options, user_id=ALICE, guild=False, subcommand="caduca")
    assert calls == [
        ("dm", "corregir", "3 vive en Getxo"),
        ("group", "revisar", "on"),
        ("dm", "caduca", "2 6m"),
    ]
    assert not dm.ephemeral  # a DM is private already; only private answers go ephemeral


async def test_memoria_exportar_sends_a_file(h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    await h.fake.dm(ALICE, "me llamo Ana")
    await h.fake.wait_for_dms(ALICE)
    response = await h.slash("memoria", user_id=ALICE, guild=False, subcommand="exportar")
    assert response.ephemeral
    [upload] = response.files
    assert upload.filename == f"memoria-{KOLDO}.json"
    assert "me llamo Ana" in upload.data.decode()


async def test_memoria_olvidar_confirms_with_a_button(h: Harness) -> None:
    await h.fake.dm(ALICE, "me llamo Ana")  # her private memory with Koldo
    await h.fake.wait_for_dms(ALICE)
    await h.fake.guild_message(ALICE, "Koldo, soy de Deusto", mention_bot=True)  # the scene
    await h.fake.webhooks.wait_for_messages(h.fake.channel_id, 1)  # Koldo's line
    asked = await h.slash("memoria", user_id=ALICE, subcommand="olvidar")
    assert asked.ephemeral
    ids = [c["custom_id"] for row in asked.data["components"] for c in row["components"]]
    # In a guild channel the forget is the caller's part of the channel's scene.
    forget = f"mem:forget:@{h.fake.channel_id}"
    assert ids == [forget, "mem:cancel"]
    message = response_message(h.fake, asked.interaction_id)
    pressed = await press_button(h.fake, ALICE, message, forget, guild=True)
    update = await h.fake.wait_for_interaction_response(pressed)
    assert update.type == 7  # the ephemeral panel is replaced by the outcome
    assert update.content.startswith("Hecho: he borrado tus mensajes de esta escena")
    with raw_database(h.app.settings) as raw:
        scene = raw.execute("SELECT COUNT(*) FROM turns WHERE speaker_id IS NOT NULL").fetchone()
        private = raw.execute("SELECT COUNT(*) FROM turns WHERE scope = 'dm'").fetchone()
    assert scene == (0,)  # her line, gone from the scene
    assert private == (2,)  # her private chat is another memory, kept


async def test_press_under_a_public_message_answers_privately(h: Harness) -> None:
    listing = await h.slash("personaje", user_id=ALICE, subcommand="lista")
    public = {**listing.data, "flags": 0}  # as if the list had been posted for everyone
    message = h.fake.world.message_payload(h.fake.channel_id, h.fake.bot_user, **public)
    pressed = await press_button(h.fake, BOB, message, f"char:{MAGGIE}", guild=True)
    response = await h.fake.wait_for_interaction_response(pressed)
    assert response.type == 4 and response.ephemeral
    # In a guild channel the characters are the scene's: the press is answered, privately.
    assert response.content == text("es", "scene_switch")


# -- shutdown -------------------------------------------------------------------------------------


async def test_stop_finishes_the_reply_in_flight_and_takes_no_new_messages(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="bot.adapters.discord_adapter")
    generating = asyncio.Event()

    def slow(body: dict[str, Any]) -> Delay:
        generating.set()
        return Delay(1.0, Text("Te contesto aunque me vaya."))

    h.llm.queue(slow)
    await h.fake.dm(ALICE, "¿sigues ahí?")
    await asyncio.wait_for(generating.wait(), 5)
    stopping = asyncio.create_task(h.adapter.stop())
    late = await h.fake.dm(BOB, "¿y yo?")
    [reply] = await h.fake.wait_for_dms(ALICE)
    assert reply.content == "Te contesto aunque me vaya."
    await asyncio.wait_for(stopping, 5)
    assert h.adapter.client.is_closed()
    assert len(h.bodies()) == 1 and h.fake.sent_dms(BOB) == []
    assert any(late["id"] in r.getMessage() for r in caplog.records)


def response_message(fake: FakeDiscord, interaction_id: int) -> JSON | None:
    """The message the fake made of an interaction's response."""
    states = fake.world.interactions.values()
    return next(state.original for state in states if state.id == interaction_id)


async def press_button(
    fake: FakeDiscord, user_id: int, message: JSON | None, custom_id: str, *, guild: bool
) -> int:
    """Press a button of ``message`` (a component interaction); returns the interaction id."""
    assert message is not None
    state = fake.world.new_interaction(int(message["channel_id"]), fake.guild_id if guild else None)
    data = {"custom_id": custom_id, "component_type": 2}
    payload = fake.world.interaction_payload(state, fake.world.user(user_id), data)
    await fake.dispatch("INTERACTION_CREATE", {**payload, "type": 3, "message": message})
    return state.id
