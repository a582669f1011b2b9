"""The story of each scene (issue 37 A) on the fake Discord, with the real discord.py: a
character's story of the channel's scene is written when the conversation ends, and any member
reads it with `/escena historia` (by the character's name), visibly in the channel."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.texts import text
from tests.conftest import FakeClock
from tests.fakes.anthropic_api import FakeAnthropic, ToolUse, route_of
from tests.fakes.discord_api import FakeDiscord
from tests.test_discord_scenes import ANA, BEA, KOLDO, MAGGIE, Stage, characters_with_avatar, staged


@pytest.fixture
async def stage(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> AsyncIterator[Stage]:
    characters_with_avatar(tmp_path)
    async with FakeDiscord() as fake, staged(tmp_path, fake, fake_anthropic, clock) as on:
        plain = fake_anthropic.default

        def chronicler(body: dict[str, Any]) -> Any:
            if route_of(body) != "write_journey":
                return plain(body)
            shown = body["messages"][0]["content"][0]["text"]
            line = next(row for row in shown.splitlines() if "Txurdinaga" in row)
            line_id = line.split("]", 1)[0].lstrip("[")
            return ToolUse("write_journey", {"journey": f"Ana contó que vivía en Txurdinaga "
                                                        f"{{cite:{line_id}}}."})  # fmt: skip

        fake_anthropic.default = chronicler
        yield on


async def story_of(stage: Stage, user: int, name: str) -> str | None:
    interaction = await stage.fake.slash_command(
        "escena", {"personaje": name}, user_id=user, subcommand="historia"
    )
    return (await stage.fake.wait_for_interaction_response(interaction)).content


async def test_a_member_reads_the_story_of_the_character_named(
    stage: Stage, clock: FakeClock
) -> None:
    await stage.add("lighthouse_keeper")
    assert await story_of(stage, BEA, "Koldo") == text("es", "scene_story_none", name=KOLDO)
    await stage.say(ANA, "Koldo: vivo en Txurdinaga")
    await stage.lines_said(1)
    clock.advance(hours=2)
    await stage.h.app.sweep()
    await stage.h.app.companion.drain()
    shown = await story_of(stage, BEA, "Koldo")  # a plain member
    assert shown is not None
    assert shown.startswith(text("es", "scene_story_title", name=KOLDO))
    assert "vivía en Txurdinaga (" in shown and "{cite:" not in shown
    maggie = await story_of(stage, BEA, "maggie")
    assert maggie is not None and "Txurdinaga" in maggie  # she was there: her own story
    assert maggie.startswith(text("es", "scene_story_title", name=MAGGIE))
