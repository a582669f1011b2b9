"""The dating of superseded claims holds for whichever summary ends up newest (issue 28, A7).

After a reset the conversation's compaction and its extraction run at once. The compaction's
summary is built from the previous summary it was handed; the extraction dates the claims of
the newest summary when it changes a fact. Each test here makes them land in one order, through
the real engine, database and fake Messages API, and checks the next session's prompt."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from bot.app import App
from memory.models import Summary, SummaryFields, Thread
from memory.summary.supersede import ValueChange, carry_dated, retire_superseded
from tests.conftest import FakeClock
from tests.fakes.anthropic_api import FakeAnthropic, Text, ToolUse
from tests.helpers import summary_input
from tests.raw_db import raw_database
from tests.test_profile import record, user_turn_ids
from tests.test_supersede import (
    ANA,
    GETXO_CANON,
    assert_no_current_getxo,
    check_next_session,
    cite,
    city_forgotten,
    first_session,
    move_session,
    moved,
    summary_rows,
    until,
)

WAITING = "saving when the session is free"


def cities(app: App) -> list[str]:
    with raw_database(app.settings) as raw:
        return [r[0] for r in raw.execute("SELECT value FROM facts WHERE key = 'city'")]


async def test_a_summary_saved_while_the_session_answers_keeps_the_extractions_dating(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Ana writes again right after the reset. The compaction's summary is ready while her
    reply is being written (the session is busy): the extraction changes the city and dates
    the newest summary meanwhile, and the compaction's summary, saved after, is the newest."""
    caplog.set_level(logging.DEBUG, logger="memory.engine.compaction")
    await first_session(app, fake_anthropic, clock)
    await app.commands.chat(ANA, "Me he mudado a Bilbao, por fin")
    said = user_turn_ids(app)[-1]
    answering, answer, extract_now = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def summarise(body: dict[str, Any]) -> ToolUse:
        await answering.wait()
        claim = f"Ana se ha mudado a Bilbao {{cite:{cite(body)}}}"
        return ToolUse("write_summary", summary_input(established_facts=[claim]))

    async def extract(body: dict[str, Any]) -> ToolUse:
        await extract_now.wait()
        return record(moved(said))

    async def reply(body: dict[str, Any]) -> Text:
        answering.set()
        await answer.wait()
        return Text("¡Hola, Ana!")

    fake_anthropic.queue(summarise, route="write_summary")
    fake_anthropic.queue(extract, route="record_profile")
    fake_anthropic.queue(reply)
    before, folds = summary_rows(app), caplog.text.count(WAITING)
    await app.commands.reset(ANA)
    hello = asyncio.create_task(app.commands.chat(ANA, "Hola otra vez"))
    # the summary is written and waits for the session, busy answering
    await until(lambda: caplog.text.count(WAITING) > folds)
    extract_now.set()
    await until(lambda: summary_rows(app) > before)  # the extraction dated the newest summary
    answer.set()
    await hello
    await app.companion.drain()
    await check_next_session(app, fake_anthropic, clock)


async def forgotten_city_session(app: App, fake: FakeAnthropic, extraction_first: bool) -> None:
    await move_session(
        app,
        fake,
        extraction_first,
        change=city_forgotten,
        said_text="Ya no vivo en Getxo, ahora voy de un sitio a otro en furgoneta",
        new_claim="Ana vive ahora en una furgoneta",
    )


async def check_forgotten_city(app: App, fake: FakeAnthropic, clock: FakeClock) -> None:
    """A deleted fact leaves no history: its claims are dated once, none is current."""
    assert cities(app) == []
    clock.advance(days=2)
    await app.commands.chat(ANA, "Hola de nuevo")
    system = fake.bodies()[-1]["system"]
    summary = system[2]["text"]
    assert_no_current_getxo(system[1]["text"] + "\n" + summary)
    assert summary.count(f"- Antes (hasta 2026-11): {GETXO_CANON}") == 1, summary
    assert "furgoneta" in summary
    canon = summary.split("Canon (nunca contradecir):")[1]
    assert "Getxo" not in canon and "Beltza" in canon
    view = await app.commands.memoria(ANA, "ver", "")
    assert_no_current_getxo(view.text)


@pytest.mark.parametrize("extraction_first", [True, False], ids=["extraction", "compaction"])
async def test_a_city_the_extraction_deleted_stays_dated_whichever_summary_lands_last(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock, extraction_first: bool
) -> None:
    """The compaction's summary comes from the summary before the deletion; saved after the
    extraction dated the newest one, it must not state the deleted city as current."""
    await first_session(app, fake_anthropic, clock)
    await forgotten_city_session(app, fake_anthropic, extraction_first)
    await check_forgotten_city(app, fake_anthropic, clock)


async def test_a_city_deleted_by_an_extraction_alone_is_dated_in_the_next_prompt(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    """No compaction after the deletion (the session ends by inactivity): the real extraction,
    answering with a delete, is what dates the summary's claims."""
    await first_session(app, fake_anthropic, clock)
    await app.commands.chat(ANA, "Ya no vivo en Getxo, ahora voy en furgoneta")
    said = user_turn_ids(app)[-1]
    fake_anthropic.queue(record(city_forgotten(said)), route="record_profile")
    clock.advance(hours=2)
    await app.sweep()
    await app.companion.drain()
    assert cities(app) == []
    clock.advance(days=2)
    await app.commands.chat(ANA, "Hola de nuevo")
    summary = fake_anthropic.bodies()[-1]["system"][2]["text"]
    assert summary.count(f"- Antes (hasta 2026-11): {GETXO_CANON}") == 1, summary
    assert_no_current_getxo(summary)


WHEN = datetime(2026, 11, 5, tzinfo=UTC)


def test_a_claim_said_in_both_fields_or_dated_before_is_dated_once() -> None:
    change = ValueChange("Getxo", "Bilbao", WHEN, through_turn_id=40)
    fields = SummaryFields(
        established_facts=("Vive en Getxo {cite:3}", "Before (until 2026-10): Va a Getxo {cite:4}"),
        canon=("Vive en Getxo {cite:3}", "Va a Getxo {cite:4}"),
    )
    assert retire_superseded(fields, [change], "en").established_facts == (
        "Before (until 2026-10): Va a Getxo {cite:4}",
        "Before (until 2026-11): Vive en Getxo {cite:3}",
    )


def test_a_summary_built_from_an_older_row_keeps_what_the_newest_dated() -> None:
    newest = SummaryFields(
        established_facts=("Antes (hasta 2026-11): Vive en Getxo {cite:3}", "Tiene perro {cite:3}")
    )
    built = SummaryFields(
        established_facts=("Tiene perro {cite:3}", "Se fue de viaje {cite:9}"),
        canon=("Vive en Getxo {cite:3}", "Pedido 48213 {cite:3}"),
    )
    carried = carry_dated(built, newest)
    assert carried.established_facts == (
        "Tiene perro {cite:3}",
        "Se fue de viaje {cite:9}",
        "Antes (hasta 2026-11): Vive en Getxo {cite:3}",
    )
    assert carried.canon == ("Pedido 48213 {cite:3}",)
    assert carry_dated(built, None) == built


async def test_a_summary_save_over_a_replaced_row_stores_nothing(
    app: App, clock: FakeClock
) -> None:
    """The store's half, on the backend under test: the check and the INSERT are one step."""
    store = app.store
    await app.commands.chat(ANA, "Hola")
    thread = next(iter(app.companion._sessions._sessions))
    assert isinstance(thread, Thread)
    summary = Summary(SummaryFields(tone=("calma",)), frozenset(), 0, clock())
    first = await store.save_summary_over(thread, summary, None)
    assert first.id is not None and not first.stale
    assert (await store.save_summary_over(thread, summary, None)).stale  # one exists now
    second = await store.save_summary_over(
        thread, replace(summary, covers_up_to_turn_id=1), first.id
    )
    assert second.id is not None and second.id > first.id
    stale = await store.save_summary_over(thread, summary, first.id)
    assert stale.stale and stale.id is None
    latest = await store.latest_summary(thread)
    assert latest is not None and latest.id == second.id


async def test_a_city_corrected_by_the_user_is_dated_by_the_next_summary(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    """/memoria corregir changes the fact without an extraction: the history read when the
    next summary is saved is what dates the old city."""
    await first_session(app, fake_anthropic, clock)
    with raw_database(app.settings) as raw:
        fact_id = raw.execute("SELECT id FROM facts WHERE key = 'city'").fetchone()[0]
    corrected = await app.commands.memoria(ANA, "corregir", f"{fact_id} Bilbao")
    assert "Bilbao" in corrected.text
    await app.commands.chat(ANA, "Hoy he paseado por la ría")

    def summarise(body: dict[str, Any]) -> ToolUse:
        claim = f"Ana paseó por la ría {{cite:{cite(body)}}}"
        return ToolUse("write_summary", summary_input(established_facts=[claim]))

    fake_anthropic.queue(summarise, route="write_summary")
    await app.commands.reset(ANA)
    await app.companion.drain()
    await check_next_session(app, fake_anthropic, clock)
