"""Who runs each community and where a mature character speaks (issue 36, items 3 and 4), on
the fake Discord with the real discord.py: members with Manage Server (or Manage Channels in the
channel) manage its scene and binding, as the interaction's resolved permissions say; a plain
member is told who can; a mature character speaks only in an age-restricted channel."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.texts import text
from tests.conftest import FakeClock
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.discord_world import MANAGE_CHANNELS, MANAGE_GUILD, MEMBER_PERMISSIONS
from tests.test_community_telegram import mature_cast
from tests.test_discord_scenes import ANA, BEA, BOB, ITZIAR, KOLDO, MAGGIE, Stage, staged

CAROL = 7474  # manages channels, not the server


@pytest.fixture
async def stage(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> AsyncIterator[Stage]:
    mature_cast(tmp_path)
    async with FakeDiscord() as fake:
        fake.world.nsfw_channels.add(fake.channel_ids[1])  # "random" is age-restricted
        fake.world.member_permissions[BEA] = MEMBER_PERMISSIONS | MANAGE_GUILD
        fake.world.member_permissions[CAROL] = MEMBER_PERMISSIONS | MANAGE_CHANNELS
        async with staged(tmp_path, fake, fake_anthropic, clock) as staging:
            yield staging


async def in_channel(
    stage: Stage, channel: int, user: int, name: str, sub: str, **opts: Any
) -> str:
    """A slash command's answer, in a guild channel."""
    interaction = await stage.fake.slash_command(
        name, opts or None, user_id=user, subcommand=sub, channel_id=channel
    )
    return str((await stage.fake.wait_for_interaction_response(interaction)).content)


async def test_a_manage_server_member_manages_the_scene_and_the_binding(stage: Stage) -> None:
    general = stage.channel
    joined = await in_channel(stage, general, BEA, "escena-admin", "añadir", id="lighthouse_keeper")
    assert joined == text("es", "scene_joined", name=MAGGIE)
    left = await in_channel(stage, general, BEA, "escena-admin", "quitar", id="lighthouse_keeper")
    assert left == text("es", "scene_left", name=MAGGIE)
    bound = await in_channel(stage, general, CAROL, "personaje-admin", "vincular",
                             id="lighthouse_keeper")  # fmt: skip
    assert bound == text("es", "bound", name=MAGGIE)  # Manage Channels: their own channel
    assert await stage.h.app.store.bound_character("discord", str(general)) == "lighthouse_keeper"
    reload = await in_channel(stage, general, BEA, "personaje-admin", "recargar")
    assert reload == text("es", "admins_only")  # the character files stay the operator's


async def test_a_plain_member_is_refused_and_told_who_can(stage: Stage) -> None:
    general = stage.channel
    for name, sub in (("escena-admin", "añadir"), ("personaje-admin", "vincular")):
        refused = await in_channel(stage, general, BOB, name, sub, id="lighthouse_keeper")
        assert refused == text("es", "manage_discord")
    store = stage.h.app.store
    assert await store.scene_members("discord", str(general)) == []
    assert await store.bound_character("discord", str(general)) is None


async def test_a_mature_character_speaks_only_in_an_age_restricted_channel(
    stage: Stage,
) -> None:
    general, restricted = stage.channel, stage.fake.channel_ids[1]
    refused = await in_channel(stage, general, ANA, "escena-admin", "añadir", id="tabernera")
    assert refused == text("es", "mature_discord", name=ITZIAR)
    refused = await in_channel(stage, general, BEA, "personaje-admin", "vincular", id="tabernera")
    assert refused == text("es", "mature_discord", name=ITZIAR)
    assert ITZIAR not in await in_channel(stage, general, BOB, "personaje", "lista")
    joined = await in_channel(stage, restricted, BEA, "escena-admin", "añadir", id="tabernera")
    assert joined == text("es", "scene_joined", name=ITZIAR)
    assert ITZIAR in await in_channel(stage, restricted, BOB, "personaje", "lista")
    await stage.fake.guild_message(BOB, "Itziar, ¿qué hay hoy?", channel_id=restricted)
    [line] = await stage.fake.webhooks.wait_for_messages(restricted, 1)
    assert line.message["author"]["username"] == ITZIAR
    # Discord's own age gate decides: /escena madura does not mark a Discord channel.
    marked = await in_channel(stage, general, BEA, "escena-admin", "madura", estado="on")
    assert marked == text("es", "scene_mature_discord")
    assert not await stage.h.app.store.chat_is_mature("discord", str(general))


async def test_a_channel_bound_to_a_mature_character_answers_with_the_default(
    stage: Stage, clock: FakeClock
) -> None:
    """Bound before the character was rated mature (or the channel's age gate was turned off):
    the default character answers, and the channel's admins are told why, once."""
    general = stage.channel
    await stage.h.app.store.bind_channel("discord", str(general), "tabernera", "op", clock())
    await stage.say(BOB, "Buenas tardes")
    [line] = await stage.lines_said(1)
    assert line.message["author"]["username"] == KOLDO
    reason = text("es", "mature_discord", name=ITZIAR)
    notice = text("es", "mature_fallback", name=ITZIAR, reason=reason, fallback=KOLDO)
    await stage.say(BOB, "¿Hay alguien?")
    await stage.lines_said(2)
    said = [m.content for m in stage.fake.sent_messages(general)]
    assert said.count(notice) == 1
