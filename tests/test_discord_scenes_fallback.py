"""Scenes on the fake Discord (tests/test_discord_scenes.py), when webhooks cannot be used:
without the Manage Webhooks permission each line is the bot's own message headed by the
character's name in bold, with one warning per channel, and the permission is used once
granted; a webhook Discord refuses to make; a line streamed by editing its message, through a
webhook or as the bot."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.adapters import discord_scene
from tests.conftest import FakeClock
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.discord_api import FakeDiscord
from tests.patience import PATIENCE
from tests.test_discord_scenes import (
    ANA,
    BEA,
    BOB,
    CLYDE,
    ITZIAR,
    KOLDO,
    MAGGIE,
    Stage,
    author,
    cast_of_three,
    characters_with_avatar,
    scene_warnings,
    staged,
)

# -- without Manage Webhooks --------------------------------------------------------------------


@pytest.fixture
async def denied(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> AsyncIterator[Stage]:
    """The stage in a channel where the bot lacks Manage Webhooks."""
    characters_with_avatar(tmp_path)
    async with FakeDiscord() as fake:
        fake.webhooks.deny_manage_webhooks(fake.channel_id)
        async with staged(tmp_path, fake, fake_anthropic, clock) as stage:
            yield stage


async def test_without_manage_webhooks_lines_are_the_bots_own_with_the_name_in_bold(
    denied: Stage, caplog: pytest.LogCaptureFixture
) -> None:
    stage = denied
    caplog.set_level(logging.WARNING, logger="bot.adapters.discord_scene")
    await cast_of_three(stage)
    stage.lines[MAGGIE] = ["Tea first, then stories."]
    asked = await stage.say(ANA, "Maggie, ¿qué tal la librería?")
    [line] = await stage.fake.wait_for_messages(stage.channel)
    assert line.content == f"**{MAGGIE}**\nTea first, then stories."
    assert line.message_reference and int(line.message_reference["message_id"]) == int(asked["id"])
    assert line.allowed_mentions == {"parse": []}  # no ping, not even of the one replied to
    await stage.say(BEA, "¿y eso?", reply_to=line.id)  # a reply to her line: hers to answer
    await stage.say(BOB, "Koldo, ¿y tú?")
    lines = await stage.fake.wait_for_messages(stage.channel, 3)
    assert [m.content.split("\n")[0] for m in lines if m.content] == [
        f"**{MAGGIE}**", f"**{MAGGIE}**", f"**{KOLDO}**",
    ]  # fmt: skip
    assert stage.speakers() == [MAGGIE, MAGGIE, KOLDO]
    assert stage.fake.webhooks.messages(stage.channel) == []
    warnings = scene_warnings(caplog)
    assert len(warnings) == 1 and "Manage Webhooks" in warnings[0]
    assert str(stage.channel) in warnings[0]
    # Tried once, not at every line: the channel is left alone for a while.
    assert stage.fake.webhooks.refused == [("GET", stage.channel)]


async def test_a_permission_granted_later_is_used_with_one_warning_only(
    tmp_path: Path,
    fake_anthropic: FakeAnthropic,
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.WARNING, logger="bot.adapters.discord_scene")
    monkeypatch.setattr(discord_scene, "DENIED_RETRY_SECONDS", 0.0)  # tried again at once
    characters_with_avatar(tmp_path)
    async with FakeDiscord() as fake, staged(tmp_path, fake, fake_anthropic, clock) as stage:
        fake.webhooks.deny_manage_webhooks()  # the whole guild
        await stage.say(ANA, "Koldo, hola", mention_bot=True)
        await fake.wait_for_messages(stage.channel, 1)  # (sent together: one burst, one line)
        await stage.say(ANA, "Koldo, ¿sigues?", mention_bot=True)
        lines = await fake.wait_for_messages(stage.channel, 2)
        assert all((m.content or "").startswith(f"**{KOLDO}**\n") for m in lines)
        assert len(fake.webhooks.refused) == 2  # tried again: still refused
        fake.webhooks.allow_manage_webhooks()
        await stage.say(ANA, "Koldo, ¿ahora?", mention_bot=True)
        [line] = await stage.lines_said(1)
        assert author(line) == KOLDO
    warnings = scene_warnings(caplog)
    assert len(warnings) == 1 and "Manage Webhooks" in warnings[0]


# -- streaming ----------------------------------------------------------------------------------


async def test_a_streamed_line_is_one_webhook_message_edited_in_place(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    fake_anthropic.stream_pieces, fake_anthropic.stream_pause = 8, 0.03
    characters_with_avatar(tmp_path)
    final = "Tea first, then stories. The lamp has been lit since seven, love."
    async with (
        FakeDiscord() as fake,
        staged(
            tmp_path, fake, fake_anthropic, clock, stream_replies=True, stream_edit_seconds=0.0
        ) as stage,
    ):
        await stage.add("lighthouse_keeper")
        stage.lines[MAGGIE] = [final]
        await stage.say(ANA, "Maggie, ¿qué tal?")
        [shown] = await stage.lines_said(1)
        assert author(shown) == MAGGIE and (shown.content or "").endswith("…")

        def landed() -> bool | None:
            return True if shown.message["content"] == final else None

        await fake.changes.wait_for(landed, PATIENCE, lambda: f"edits: {fake.webhooks.edits}")
    edits = [e for e in fake.webhooks.edits if e.id == shown.id]
    assert edits and edits[-1].content == final
    assert all((e.content or "").endswith("…") for e in edits[:-1])
    assert len(fake.webhooks.messages(fake.channel_id)) == 1  # one message, edited in place
    assert fake.sent_messages(fake.channel_id) == []
    assert fake_anthropic.bodies()[-1]["stream"] is True


async def test_without_the_permission_a_streamed_line_keeps_its_bold_name_in_every_edit(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    fake_anthropic.stream_pieces, fake_anthropic.stream_pause = 8, 0.03
    characters_with_avatar(tmp_path)
    final = "Tea first, then stories. The lamp has been lit since seven, love."
    async with (
        FakeDiscord() as fake,
        staged(
            tmp_path, fake, fake_anthropic, clock, stream_replies=True, stream_edit_seconds=0.0
        ) as stage,
    ):
        fake.webhooks.deny_manage_webhooks()
        await stage.add("lighthouse_keeper")
        stage.lines[MAGGIE] = [final]
        await stage.say(ANA, "Maggie, ¿qué tal?")
        [shown] = await fake.wait_for_messages(stage.channel)
        assert (shown.content or "").startswith(f"**{MAGGIE}**\n")

        def landed() -> bool | None:
            return True if shown.message["content"] == f"**{MAGGIE}**\n{final}" else None

        await fake.changes.wait_for(landed, PATIENCE, lambda: f"edits: {fake.edited_messages}")
    edits = [e for e in fake.edited_messages if e.id == shown.id]
    assert edits and all((e.content or "").startswith(f"**{MAGGIE}**\n") for e in edits)
    assert len(fake.sent_messages(fake.channel_id)) == 1  # one message, edited in place


async def test_a_webhook_discord_refuses_to_make_is_asked_for_once(
    tmp_path: Path,
    fake_anthropic: FakeAnthropic,
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Discord refuses a webhook named with "clyde" or "discord": that character speaks as the
    bot with its name in bold, the others through their webhooks, and it is not asked again
    at every line."""
    caplog.set_level(logging.WARNING, logger="bot.adapters.discord_scene")
    folder = characters_with_avatar(tmp_path)
    sheet = (folder / "tabernera.yaml").read_text(encoding="utf-8")
    (folder / "clyde.yaml").write_text(
        sheet.replace(f"name: {ITZIAR}", f"name: {CLYDE}"), encoding="utf-8"
    )
    async with FakeDiscord() as fake, staged(tmp_path, fake, fake_anthropic, clock) as stage:
        await stage.add("clyde")
        await stage.say(ANA, "Clyde, hola")
        await fake.wait_for_messages(stage.channel)
        await stage.say(BEA, "Clyde, ¿qué tal?")
        await stage.say(BEA, "Koldo, ¿y tú?")
        [koldo] = await stage.lines_said(1)
        lines = await fake.wait_for_messages(stage.channel, 2)
    assert [m.content for m in lines] == [
        "**Clyde Barrow**\nSoy Clyde.",
        "**Clyde Barrow**\nSoy Clyde.",
    ]
    assert author(koldo) == KOLDO
    made = [r for r in fake.requests if r.method == "POST" and r.path.endswith("/webhooks")]
    assert [r.status for r in made] == [400, 200]  # Clyde's once, refused; then Koldo's
    assert len(scene_warnings(caplog)) == 1
