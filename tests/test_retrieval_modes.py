"""A character's `retrieval:` setting holds: `tool` gives the memory tools and no automatic
fragments, `off` neither. Real engine, a copy of the characters folder, the fake Anthropic API."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.app import App, open_app
from tests.conftest import REPO, FakeClock, make_settings
from tests.fakes.anthropic_api import FakeAnthropic
from tests.helpers import dm
from tests.test_retrieval_engine import chat_until_folded

QUESTION = "¿Te acuerdas de cómo se llama mi perro Beltza?"


@pytest.fixture(params=["tool", "off"])
async def mode_app(
    request: pytest.FixtureRequest, tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> AsyncIterator[App]:
    folder = tmp_path / "characters"
    shutil.copytree(REPO / "tests" / "data" / "characters", folder)
    sheet = folder / "detective_bilbao.yaml"
    # Unquoted, as the README writes it (YAML 1.1 reads a bare `off` as false).
    sheet.write_text(sheet.read_text() + f"\nretrieval: {request.param}\n")
    settings = make_settings(tmp_path, fake_anthropic, characters_dir=folder)
    async with open_app(settings, clock=clock, start_scheduler=False) as app:
        yield app


async def test_the_retrieval_mode_decides_fragments_and_tools(
    mode_app: App, fake_anthropic: FakeAnthropic
) -> None:
    mode = mode_app.companion.character("detective_bilbao").retrieval
    await chat_until_folded(mode_app, "u1", "Mi perro se llama Beltza y es un pastor vasco")
    await mode_app.companion.handle(dm(QUESTION))
    body = fake_anthropic.bodies()[-1]
    context = body["messages"][-1]["content"][1]["text"]
    # this turn's context block, read as it was sent
    assert context.startswith("Ahora, en la hora local de")
    assert "Beltza y es un pastor vasco" not in context  # no automatic fragment either way
    offered = {tool["name"] for tool in body.get("tools", [])}
    if mode == "tool":
        assert {"search_memory", "lookup_turn"} <= offered
    else:
        assert mode == "off" and not {"search_memory", "lookup_turn"} & offered
