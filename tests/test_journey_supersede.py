"""The journey and a changed fact (issue 35, item 5): after the profile replaces a value, no
sentence of the story states the old one as current. Through the real engine, database and fake
Messages API, with the extraction (which records the change) and the chronicle (which may copy
the old sentence again) finishing in each order."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from bot.app import App
from memory.summary.supersede import ValueChange, date_sentences
from tests.conftest import FakeClock
from tests.fakes.anthropic_api import FakeAnthropic, ToolUse
from tests.helpers import dm
from tests.test_journey import ROUTE, block2, chronicle, end_by_timer, stored_journey, turn_ids
from tests.test_profile import op, record
from tests.test_supersede import until

OLD = "Ana le contó a Koldo que vive en Getxo {cite:%d}, cerca del puerto."
PAST = "Antes (hasta 2026-11): "


def journey_text(app: App) -> str:
    rows = stored_journey(app)
    return rows[0][1] if rows else ""


@pytest.mark.parametrize("extraction_first", [True, False])
async def test_a_sentence_naming_a_replaced_value_is_marked_past(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock, extraction_first: bool
) -> None:
    await app.companion.handle(dm("Vivo en Getxo desde hace tres años"))
    getxo = turn_ids(app)[0]
    fake_anthropic.queue(record(op("semantic", "city", "Getxo", [getxo])), route="record_profile")
    fake_anthropic.queue(chronicle(OLD % getxo), route=ROUTE)
    await end_by_timer(app, clock)
    assert journey_text(app) == OLD % getxo  # current, for now

    await app.companion.handle(dm("Me he mudado a Bilbao, por fin"))
    bilbao = turn_ids(app)[-1]
    extracted = asyncio.Event()

    async def extract(body: dict[str, Any]) -> ToolUse:
        if not extraction_first:  # the chronicle is saved before the change is recorded
            await until(lambda: "Bilbao" in journey_text(app))
        return record(op("semantic", "city", "Bilbao", [bilbao], action="update"))

    async def write(body: dict[str, Any]) -> ToolUse:
        if extraction_first:  # the change is recorded while the chronicler writes
            await until(lambda: "Antes" in journey_text(app))
        extracted.set()
        # the model copies the old sentence as it was, then tells of the move
        return chronicle(f"{OLD % getxo}\n\nDespués se mudó a Bilbao {{cite:{bilbao}}}.")

    fake_anthropic.queue(extract, route="record_profile")
    fake_anthropic.queue(write, route=ROUTE)
    await end_by_timer(app, clock)
    assert extracted.is_set()
    text = journey_text(app)
    assert PAST + OLD % getxo in text and text.count("Getxo") == 1, text
    assert "se mudó a Bilbao" in text and PAST + "Después" not in text
    await app.companion.handle(dm("Hola otra vez"))
    shown = block2(fake_anthropic.bodies()[-1])
    assert "Getxo" in shown and "Antes (hasta 2026-11)" in shown


def test_date_sentences_leaves_the_change_itself_and_what_was_written_after() -> None:
    change = ValueChange("Getxo", "Bilbao", datetime(2026, 11, 20, tzinfo=UTC), 10)
    story = [
        "Ana vivía en Getxo {cite:4} y paseaba por el puerto. Koldo la escuchó.",
        "Ana dejó Getxo por Bilbao {cite:10}. En su casa nueva echaba de menos Getxo {cite:12}.",
    ]
    dated = date_sentences(story, [change], "es")
    assert (
        dated[0]
        == f"{PAST}Ana vivía en Getxo {{cite:4}} y paseaba por el puerto. Koldo la escuchó."
    )
    assert dated[1] == story[1]  # names the new value too; the second cites only newer turns
    assert date_sentences(dated, [change], "es") == dated  # dated once
