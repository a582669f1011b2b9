"""Retrieval in the engine: automatic fragments, the memory tools, lore, the bounded tool loop."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.app import App, open_app
from tests.conftest import CHARACTERS, FakeClock, make_settings
from tests.fakes.anthropic_api import FakeAnthropic, Text, ToolUse
from tests.helpers import dm
from tests.raw_db import raw_database

LORE_CHARACTER = (
    (CHARACTERS / "lighthouse_keeper.yaml").read_text()
    + """
lore:
  - slug: godrevy
    title: Godrevy lighthouse
    description: The lighthouse Maggie kept for thirty years, and the night of the 1987 storm.
    content: |
      ## The tower
      Twenty-six metres of whitewashed stone on an island off the bay.

      ## The storm of 1987
      The lamp failed at two in the morning; Maggie wound the clockwork by hand until dawn.
  - slug: shop
    title: The bookshop
    description: Second-hand books by the harbour.
    content: |
      ## Regulars
      Mr Penrose buys a western every Tuesday.
"""
)


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for m in body["messages"] for b in m["content"] if b["type"] == "tool_result"]


def usage_rows(app: App) -> list[tuple[int, int, str]]:
    with raw_database(app.settings) as raw:
        return raw.execute(
            "SELECT tool_round, fragments, tools_called FROM llm_usage"
            " WHERE kind = 'reply' ORDER BY id"
        ).fetchall()


async def chat_until_folded(app: App, user: str, first: str) -> None:
    """Say `first`, then enough small talk that it leaves the window for the summary."""
    await app.companion.handle(dm(first, user=user))
    for index in range(app.settings.window_trigger_turns // 2):
        await app.companion.handle(dm(f"charla {index}", user=user))
        await app.companion.drain()


async def test_automatic_fragment_recalls_a_folded_detail(app: App, fake_anthropic) -> None:
    await chat_until_folded(app, "u1", "Mi perro se llama Beltza y es un pastor vasco")
    await app.companion.handle(dm("¿Te acuerdas de cómo se llama mi perro Beltza?"))
    context = fake_anthropic.bodies()[-1]["messages"][-1]["content"][1]["text"]
    assert "Recuerdos de conversaciones anteriores" in context
    assert "[2026-11-02] " in context and "Beltza y es un pastor vasco" in context
    # The usage row counts the fragments used: the detail, and the exchange just after it,
    # which inherits part of its score (an answer often comes one exchange later).
    assert usage_rows(app)[-1][1] == context.count("[2026-11-02] ") == 2


async def test_unrelated_question_brings_no_fragment(app: App, fake_anthropic) -> None:
    await chat_until_folded(app, "u1", "Mi perro se llama Beltza y es un pastor vasco")
    await app.companion.handle(dm("Hoy hace sol en la ría"))
    context = fake_anthropic.bodies()[-1]["messages"][-1]["content"][1]["text"]
    assert "Recuerdos" not in context


async def test_search_memory_round_is_stored_and_counted(app: App, fake_anthropic) -> None:
    await chat_until_folded(app, "u1", "El número de pedido es el 48213 y costó 300 euros")
    fake_anthropic.queue(
        ToolUse("search_memory", {"query": "número de pedido"}), Text("Era el 48213.")
    )
    reply = await app.companion.handle(dm("¿Qué número tenía el pedido?"))
    assert reply.text == "Era el 48213."
    second = fake_anthropic.bodies()[-1]
    results = tool_results(second)
    assert "48213" in results[0]["content"] and results[0]["is_error"] is False
    assert usage_rows(app)[-2:] == [(0, 0, "search_memory"), (1, 0, "")]
    with raw_database(app.settings) as raw:
        stored = raw.execute("SELECT text FROM turns WHERE role = 'tool'").fetchall()
    assert stored and stored[0][0].startswith("[search_memory]")
    await app.companion.handle(dm("¿Y cuánto costó?"))  # the result stays in the conversation
    texts = [
        b.get("text", "") for m in fake_anthropic.bodies()[-1]["messages"] for b in m["content"]
    ]
    assert any(t.startswith("[search_memory]") and "48213" in t for t in texts)


async def test_lookup_turn_never_reads_another_users_turn(app: App, fake_anthropic) -> None:
    await app.companion.handle(dm("Mi secreto es la palabra girasol", user="bea", name="Bea"))
    with raw_database(app.settings) as raw:
        foreign = raw.execute("SELECT id FROM turns WHERE text LIKE '%girasol%'").fetchone()[0]
    await app.companion.handle(dm("Hola", user="ana"))
    fake_anthropic.queue(ToolUse("lookup_turn", {"ids": [foreign, 999999]}), Text("Nada."))
    await app.companion.handle(dm("¿Qué dije?", user="ana"))
    content = tool_results(fake_anthropic.bodies()[-1])[0]["content"]
    assert content == f"[{foreign}] not found\n[999999] not found"
    assert "girasol" not in str(fake_anthropic.bodies()[-1])


async def test_tool_loop_stops_at_two_rounds(app: App, fake_anthropic) -> None:
    fake_anthropic.queue(
        ToolUse("search_memory", {"query": "uno"}),
        ToolUse("search_memory", {"query": "dos"}),
        Text("Basta de buscar."),
    )
    reply = await app.companion.handle(dm("Busca algo"))
    bodies = fake_anthropic.bodies()
    assert len(bodies) == 3 and reply.text == "Basta de buscar."
    assert "tool_choice" not in bodies[0] and "tool_choice" not in bodies[1]
    assert bodies[2]["tool_choice"] == {"type": "none"}
    assert [r[0] for r in usage_rows(app)] == [0, 1, 2]


@pytest.fixture
async def lore_app(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> AsyncIterator[App]:
    folder = tmp_path / "characters"
    shutil.copytree(CHARACTERS, folder)
    (folder / "lighthouse_keeper.yaml").write_text(LORE_CHARACTER)
    settings = make_settings(
        tmp_path, fake_anthropic, characters_dir=folder, lore_page_cap_tokens=100
    )
    async with open_app(settings, clock=clock, start_scheduler=False) as app:
        yield app


async def test_lore_index_in_the_cached_sheet_and_read_lore(lore_app: App, fake_anthropic) -> None:
    fake_anthropic.queue(ToolUse("read_lore", {"slugs": ["godrevy"]}), Text("Ah, 1987."))
    await lore_app.companion.handle(dm("Tell me about the storm", character="lighthouse_keeper"))
    first, second = fake_anthropic.bodies()
    sheet = first["system"][0]["text"]
    assert "- godrevy: Godrevy lighthouse — The lighthouse Maggie kept" in sheet
    assert "[The tower; The storm of 1987]" in sheet
    assert "wound the clockwork" not in sheet  # the map, not the territory
    read_lore = next(t for t in first["tools"] if t["name"] == "read_lore")
    slugs = read_lore["input_schema"]["properties"]["slugs"]
    assert slugs["items"]["enum"] == ["godrevy", "shop"] and slugs["maxItems"] == 2
    page = tool_results(second)[0]["content"]
    assert page.startswith("# Godrevy lighthouse") and "wound the clockwork" in page


async def test_read_lore_refuses_more_than_two_pages_and_unknown(
    lore_app: App, fake_anthropic
) -> None:
    fake_anthropic.queue(
        ToolUse("read_lore", {"slugs": ["godrevy", "shop", "godrevy"]}),
        ToolUse("read_lore", {"slugs": ["atlantis"]}),
        Text("Hm."),
    )
    await lore_app.companion.handle(dm("Everything!", character="lighthouse_keeper"))
    bodies = fake_anthropic.bodies()
    assert "at most 2 pages" in tool_results(bodies[1])[0]["content"]
    unknown = tool_results(bodies[2])[-1]
    assert unknown["is_error"] and "unknown pages ['atlantis']" in unknown["content"]


async def test_recall_runs_only_once_turns_lie_outside_the_window(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    """Automatic recall is skipped while the window holds the whole thread, and runs once a
    compaction has folded turns away, also in a session rebuilt after a restart."""
    settings = make_settings(tmp_path, fake_anthropic)
    async with open_app(settings, clock=clock, start_scheduler=False) as app:
        await app.companion.handle(dm("Mi perro se llama Beltza"))
        [session] = app.companion._sessions._sessions.values()
        assert not session.has_turns_outside_window()
        await chat_until_folded(app, "u1", "Y mi gato, Txuri")
        assert session.has_turns_outside_window()
        held = {turn.id for turn in session.window}
        assert held and min(held) > 1  # the first turns were folded away
    clock.advance(minutes=5)
    async with open_app(settings, clock=clock, start_scheduler=False) as app:
        await app.companion.handle(dm("¿Te acuerdas de Beltza?"))
        [session] = app.companion._sessions._sessions.values()
        assert session.has_turns_outside_window()
