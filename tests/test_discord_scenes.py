"""Scenes (issue 31) on the fake Discord with the real discord.py and the real engine answering
through the fake Anthropic API: a guild channel is one shared conversation, each character
speaking through a channel webhook of its own, with its name and avatar; without the Manage
Webhooks permission, as the bot with the name in bold."""

from __future__ import annotations

import logging
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bot.adapters import discord_scene
from bot.texts import text
from memory.scene.routing import Castmember, weighted_choice
from tests.conftest import FakeClock
from tests.fakes.anthropic_api import FakeAnthropic, Text, route_of
from tests.fakes.anthropic_api import _default as fake_default
from tests.fakes.discord_api import FakeDiscord, SentMessage
from tests.fakes.discord_webhooks import FakeWebhook
from tests.test_discord_adapter import Harness, running
from tests.test_scenes import cast_folder

ANA, BEA, BOB = 4242, 5353, 6363
NAMES = {ANA: "ana", BEA: "bea", BOB: "bob"}
KOLDO, MAGGIE, ITZIAR = "Koldo Arrieta", "Maggie Thornton", "Itziar Goikoetxea"
CLYDE = "Clyde Barrow"  # a name Discord refuses for a webhook
IDS = {KOLDO: "detective_bilbao", MAGGIE: "lighthouse_keeper", ITZIAR: "tabernera", CLYDE: "clyde"}
# Itziar's card image: `<id>.avatar.png` beside her YAML (cards/export.py avatar_path).
AVATAR = b"\x89PNG\r\n\x1a\n" + b"itziar" * 8


@dataclass
class Stage:
    """The bot in a guild channel of the fake Discord, each character saying its queued lines."""

    h: Harness
    lines: dict[str, list[str]] = field(default_factory=dict)  # what each character will say

    @property
    def fake(self) -> FakeDiscord:
        return self.h.fake

    @property
    def channel(self) -> int:
        return self.fake.channel_id

    def speaker_of(self, body: dict[str, Any]) -> str:
        first = body["system"][0]["text"].split("\n", 1)[0]
        return next(name for name in IDS if name in first)

    def answer(self, body: dict[str, Any]) -> Any:
        if route_of(body) != "reply":
            return fake_default(body)
        name = self.speaker_of(body)
        queued = self.lines.get(name)
        return Text(queued.pop(0) if queued else f"Soy {name.split()[0]}.")

    def speakers(self) -> list[str]:
        return [self.speaker_of(b) for b in self.h.bodies() if route_of(b) == "reply"]

    def requests_of(self, name: str) -> list[dict[str, Any]]:
        return [b for b in self.h.bodies() if self.speaker_of(b) == name]

    async def say(self, user: int, text: str, **kw: Any) -> dict[str, Any]:
        return await self.fake.guild_message(user, text, username=NAMES[user], **kw)

    async def lines_said(self, count: int) -> list[SentMessage]:
        """The characters' webhook messages in the channel, once there are `count`."""
        return await self.fake.webhooks.wait_for_messages(self.channel, count)

    async def add(self, character_id: str, user: int = ANA) -> str | None:
        interaction = await self.fake.slash_command(
            "escena-admin", {"id": character_id}, user_id=user, subcommand="añadir"
        )
        return (await self.fake.wait_for_interaction_response(interaction)).content


def author(message: SentMessage) -> str:
    return str(message.message["author"]["username"])


def transcript(fake: FakeDiscord, channel: int) -> list[tuple[str, str]]:
    """The channel as a reader sees it: every message, in order, by the name it shows."""
    messages = [m for m in fake.world.messages.values() if m["channel_id"] == str(channel)]
    ordered = sorted(messages, key=lambda m: int(m["id"]))
    return [
        (m["author"].get("global_name") or m["author"]["username"], m["content"]) for m in ordered
    ]


def scene_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == discord_scene.__name__ and r.levelno >= logging.WARNING
    ]


def characters_with_avatar(tmp_path: Path) -> Path:
    folder = cast_folder(tmp_path)
    (folder / "tabernera.avatar.png").write_bytes(AVATAR)
    return folder


@asynccontextmanager
async def staged(
    tmp_path: Path,
    fake: FakeDiscord,
    llm: FakeAnthropic,
    clock: FakeClock,
    **overrides: Any,
) -> AsyncIterator[Stage]:
    values: dict[str, Any] = {
        "characters_dir": tmp_path / "characters",
        "default_character": "detective_bilbao",
        "admin_ids": [f"discord:{ANA}"],
        "scene_seed": 7,
        **overrides,
    }
    async with running(tmp_path, fake, llm, clock, **values) as h:
        stage = Stage(h)
        llm.default = stage.answer
        yield stage


@pytest.fixture
async def stage(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> AsyncIterator[Stage]:
    characters_with_avatar(tmp_path)
    async with FakeDiscord() as fake, staged(tmp_path, fake, fake_anthropic, clock) as stage:
        yield stage


async def cast_of_three(stage: Stage) -> None:
    for character in ("lighthouse_keeper", "tabernera"):
        await stage.add(character)
    present = await stage.h.app.store.scene_members("discord", str(stage.channel))
    assert present == ["detective_bilbao", "lighthouse_keeper", "tabernera"]


# -- who speaks ---------------------------------------------------------------------------------


async def test_a_character_named_answers_through_its_own_webhook(stage: Stage) -> None:
    await cast_of_three(stage)
    stage.lines[MAGGIE] = ["Tea first, then stories."]
    await stage.say(ANA, "Maggie, ¿qué tal la librería?")
    [line] = await stage.lines_said(1)
    assert (author(line), line.content) == (MAGGIE, "Tea first, then stories.")
    assert line.payload["username"] == MAGGIE
    assert line.allowed_mentions == {"parse": []}  # a line pings nobody
    assert line.message["webhook_id"] == str(stage.fake.webhooks.in_channel(stage.channel)[0].id)
    assert stage.speakers() == [MAGGIE]  # only the one named
    assert stage.fake.sent_messages(stage.channel) == []  # nothing as the bot itself
    [hook] = stage.fake.webhooks.in_channel(stage.channel)
    assert (hook.name, hook.avatar) == (MAGGIE, None)  # her card has no image


async def test_a_reply_to_a_characters_webhook_message_is_answered_by_it(stage: Stage) -> None:
    await cast_of_three(stage)
    await stage.say(ANA, "Koldo, buenas")  # Ana's last partner: Koldo
    await stage.lines_said(1)
    await stage.say(BEA, "Hola, Itziar")
    itziar_line = (await stage.lines_said(2))[-1]
    assert author(itziar_line) == ITZIAR
    # No name, no mention: only the reply says who is addressed (not Ana's last partner).
    await stage.say(ANA, "¿y tú qué opinas?", reply_to=itziar_line.id)
    lines = await stage.lines_said(3)
    assert author(lines[-1]) == ITZIAR
    assert stage.speakers() == [KOLDO, ITZIAR, ITZIAR]
    asked = stage.requests_of(ITZIAR)[-1]
    assert 'name="ana">¿y tú qué opinas?</person>' in str(asked)


async def test_nobody_named_a_seeded_choice_then_the_same_partner_and_the_cap(
    stage: Stage,
) -> None:
    await cast_of_three(stage)
    await stage.say(ANA, "¿qué hacemos esta noche?", mention_bot=True)  # names nobody
    [first] = await stage.lines_said(1)
    book = stage.h.app.companion.characters
    cast = [
        Castmember(c.id, c.names_in_scene(), c.talkativeness)
        for c in (book.get(IDS[n]) for n in (KOLDO, MAGGIE, ITZIAR))
        if c is not None
    ]
    chosen = weighted_choice(cast, random.Random(7))  # SCENE_SEED=7, the documented rule
    assert IDS[author(first)] == chosen
    await stage.say(ANA, "¿y después?", mention_bot=True)  # the one Ana last spoke with
    second = (await stage.lines_said(2))[-1]
    assert author(second) == author(first)

    await stage.say(BEA, "Koldo, Maggie, Itziar: ¿quién invita?")  # three named, two may speak
    lines = await stage.lines_said(4)
    assert [author(m) for m in lines[-2:]] == [KOLDO, MAGGIE]
    await stage.h.app.companion.drain()
    assert stage.speakers()[-2:] == [KOLDO, MAGGIE] and len(stage.speakers()) == 4


async def test_a_character_added_midway_by_the_slash_command_witnessed_nothing_before(
    stage: Stage,
) -> None:
    await stage.say(ANA, "Koldo, mi contraseña del portal es el 4521", mention_bot=True)
    [koldo_line] = await stage.lines_said(1)
    assert author(koldo_line) == KOLDO  # a scene nobody added to has the default character
    refused = await stage.add("lighthouse_keeper", user=BEA)
    assert refused == text("es", "manage_discord")  # who can: Manage Server, or the operator
    joined = await stage.add("lighthouse_keeper")
    assert joined is not None and MAGGIE in joined
    await stage.say(BEA, "Maggie, ¿qué te ha contado Ana?")
    maggie_line = (await stage.lines_said(2))[-1]
    assert author(maggie_line) == MAGGIE
    [request] = stage.requests_of(MAGGIE)
    assert "4521" not in str(request) and "contraseña" not in str(request)
    assert 'name="bea">Maggie, ¿qué te ha contado Ana?</person>' in str(request)  # 1st line


# -- how each character appears -----------------------------------------------------------------


async def test_one_webhook_per_character_with_its_avatar_found_again_after_a_restart(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    characters_with_avatar(tmp_path)
    async with FakeDiscord() as fake:
        async with staged(tmp_path, fake, fake_anthropic, clock) as stage:
            await cast_of_three(stage)
            await stage.say(ANA, "Itziar, Koldo: buenas")
            await stage.lines_said(2)
            await stage.say(BEA, "Itziar, ¿me pones un café?")
            await stage.lines_said(3)
        made = {h.name: h for h in fake.webhooks.in_channel(fake.channel_id)}
        assert set(made) == {ITZIAR, KOLDO}  # Maggie never spoke: no webhook of hers
        assert made[ITZIAR].avatar == AVATAR and made[KOLDO].avatar is None
        async with staged(tmp_path, fake, fake_anthropic, clock) as stage:  # a restart
            await stage.say(ANA, "Itziar, ¿sigues ahí?")
            line = (await stage.lines_said(4))[-1]
        assert author(line) == ITZIAR and line.message["webhook_id"] == str(made[ITZIAR].id)
    creations = [r for r in fake.requests if r.method == "POST" and r.path.endswith("/webhooks")]
    assert len(creations) == 2  # found again with GET, not made twice
    assert fake.unknown_routes == [] and fake.errors == []


async def test_a_three_character_scene_reads_as_a_conversation(stage: Stage) -> None:
    await cast_of_three(stage)
    stage.lines[KOLDO] = ["*Deja el café.* Pregúntale a Itziar, ella lo oye todo."]
    stage.lines[ITZIAR] = ["¡Aupa! Ayer vino un tipo con gabardina. Bob, ¿otra ronda?"]
    stage.lines[MAGGIE] = ["A man in a raincoat? He bought a map of the coast from me."]
    await stage.say(BOB, "Koldo, ¿quién robó la caja del bar?")
    await stage.lines_said(2)  # Koldo hands the word to Itziar, within the cap
    await stage.say(ANA, "Maggie, ¿tú viste algo?")
    await stage.lines_said(3)
    shown = transcript(stage.fake, stage.channel)
    print("\n".join(f"{name}: {words}" for name, words in shown))  # the excerpt, with -s
    joined = "entra en la escena. No sabe nada de lo dicho antes de llegar."
    assert shown == [
        ("Companion", f"{MAGGIE} {joined}"),  # the admin's /escena añadir, answered by the bot
        ("Companion", f"{ITZIAR} {joined}"),
        ("bob", "Koldo, ¿quién robó la caja del bar?"),
        (KOLDO, "*Deja el café.* Pregúntale a Itziar, ella lo oye todo."),
        (ITZIAR, "¡Aupa! Ayer vino un tipo con gabardina. Bob, ¿otra ronda?"),
        ("ana", "Maggie, ¿tú viste algo?"),
        (MAGGIE, "A man in a raincoat? He bought a map of the coast from me."),
    ]
    maggie_saw = str(stage.requests_of(MAGGIE)[0])
    assert "Pregúntale a Itziar" in maggie_saw and "gabardina" in maggie_saw  # witnessed


async def test_webhook_messages_are_never_heard_no_loops(stage: Stage) -> None:
    await cast_of_three(stage)
    # Each names the other: heard as people's words, they would answer each other for ever.
    stage.lines[KOLDO] = ["Itziar sabrá, pregúntale."] * 3
    stage.lines[ITZIAR] = ["Koldo, no me líes."] * 3
    await stage.say(BOB, "Koldo, ¿quién fue?")
    await stage.lines_said(2)
    foreign = FakeWebhook(
        stage.fake.world.ids.next(), "t", stage.channel, stage.fake.guild_id, "Otro bot",
        None, stage.fake.world.user(BOB).payload(), None,
    )  # fmt: skip
    stage.fake.webhooks.hooks[foreign.id] = foreign  # another integration's webhook
    message = stage.fake.world.message_payload(
        stage.channel, stage.fake.world.user(BOB), "Koldo, ¿estás?", webhook_id=str(foreign.id)
    )
    await stage.fake.dispatch("MESSAGE_CREATE", message)
    # Arrival order: everything dispatched before this was handled before it.
    await stage.say(ANA, "Maggie, hola")
    lines = await stage.lines_said(3)
    assert [author(m) for m in lines] == [KOLDO, ITZIAR, MAGGIE]
    await stage.h.app.companion.drain()
    assert stage.speakers() == [KOLDO, ITZIAR, MAGGIE]
    assert "¿estás?" not in str(stage.h.bodies())
