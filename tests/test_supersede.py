"""Memory stays true when life changes (issue 13, item 7): after a move, no prompt and no
/memoria screen states the old city as current. Driven through the real engine, database and
fake Messages API; the two background jobs after a conversation are made to finish in each
order, since each order leaves the stale claim in a different place."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from bot.answers import Caller
from bot.app import App
from memory.models import SummaryFields
from memory.summary.supersede import ValueChange, retire_superseded
from tests.conftest import FakeClock
from tests.fakes.anthropic_api import FakeAnthropic, ToolUse
from tests.helpers import summary_input
from tests.raw_db import raw_database
from tests.test_profile import op, record, user_turn_ids

ANA = Caller("telegram", "u1", "Ana", "dm", "c1")
GETXO_CANON = "Vivo en Getxo desde hace tres años"


def cite(body: dict[str, Any]) -> int:
    """The first turn id the summariser was given."""
    text = body["messages"][0]["content"][0]["text"]
    return int(text.split("Turns to fold in:\n[")[1].split("]")[0])


async def first_session(app: App, fake: FakeAnthropic, clock: FakeClock) -> None:
    """Ana says where she lives; the summary copies it into canon, the profile stores it."""

    def summarise(body: dict[str, Any]) -> ToolUse:
        first = cite(body)
        return ToolUse(
            "write_summary",
            summary_input(
                # the model also lists the canon claim among the facts: dated, it is one line
                established_facts=[
                    f"Ana vive en Getxo {{cite:{first}}}",
                    f"{GETXO_CANON} {{cite:{first}}}",
                ],
                canon=[
                    f"{GETXO_CANON} {{cite:{first}}}",
                    f"Su perro se llama Beltza {{cite:{first}}}",
                ],
            ),
        )

    await app.commands.chat(ANA, f"{GETXO_CANON}, y mi perro se llama Beltza")
    said = user_turn_ids(app)[-1]
    fake.queue(summarise, route="write_summary")
    fake.queue(record(op("semantic", "city", "Getxo", [said])), route="record_profile")
    await app.commands.reset(ANA)
    await app.companion.drain()
    clock.advance(days=3)


async def until(condition: Any) -> None:
    """Polls the database (a background job's write has no event to wait on)."""
    for _ in range(3000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the background job never got there")


def city(app: App) -> str:
    with raw_database(app.settings) as raw:
        return raw.execute("SELECT value FROM facts WHERE key = 'city'").fetchone()[0]


def summary_rows(app: App) -> int:
    with raw_database(app.settings) as raw:
        return raw.execute("SELECT COUNT(*) FROM summaries").fetchone()[0]


def moved(said: int) -> dict[str, Any]:
    return op("semantic", "city", "Bilbao", [said], action="update")


def city_forgotten(said: int) -> dict[str, Any]:
    return op("semantic", "city", None, [said], action="delete")


async def move_session(
    app: App,
    fake: FakeAnthropic,
    extraction_first: bool,
    change: Any = moved,
    said_text: str = "Me he mudado a Bilbao, por fin",
    new_claim: str = "Ana se ha mudado a Bilbao",
) -> None:
    """Ana says she moved; the session is reset, and its compaction and extraction finish in
    the order asked for (the one first has saved its summary before the other answers)."""
    extracted, compacted = asyncio.Event(), asyncio.Event()

    async def summarise(body: dict[str, Any]) -> ToolUse:
        if extraction_first:
            await extracted.wait()
        return ToolUse(
            "write_summary",
            summary_input(established_facts=[f"{new_claim} {{cite:{cite(body)}}}"]),
        )

    await app.commands.chat(ANA, said_text)
    said = user_turn_ids(app)[-1]

    async def extract(body: dict[str, Any]) -> ToolUse:
        if not extraction_first:
            await compacted.wait()
        return record(change(said))

    fake.queue(summarise, route="write_summary")
    fake.queue(extract, route="record_profile")
    before = summary_rows(app)
    await app.commands.reset(ANA)
    await until(lambda: summary_rows(app) > before)  # the extraction's dating, or the fold
    (extracted if extraction_first else compacted).set()
    await app.companion.drain()


def assert_no_current_getxo(text: str) -> None:
    stale = [
        line
        for line in text.splitlines()
        if "Getxo" in line and "Antes (hasta 2026-11)" not in line and "antes: Getxo" not in line
    ]
    assert stale == [], text
    dated = [line for line in text.splitlines() if "Antes (hasta 2026-11)" in line]
    assert len(dated) == len(set(dated)), text  # each retired claim is listed once


def assert_only_bilbao_is_current(text: str) -> None:
    assert_no_current_getxo(text)
    assert "Bilbao" in text


async def check_next_session(app: App, fake: FakeAnthropic, clock: FakeClock) -> None:
    clock.advance(days=2)
    await app.commands.chat(ANA, "Hola de nuevo")
    system = fake.bodies()[-1]["system"]
    profile, summary = system[1]["text"], system[2]["text"]
    assert "city: Bilbao" in profile
    assert_only_bilbao_is_current(profile + "\n" + summary)
    assert f"- Antes (hasta 2026-11): {GETXO_CANON}" in summary  # dated, not dropped
    canon = summary.split("Canon (nunca contradecir):")[1]
    assert "Getxo" not in canon and "Beltza" in canon  # an unrelated canon claim stays
    view = await app.commands.memoria(ANA, "ver", "")
    assert_only_bilbao_is_current(view.text)


async def test_a_move_dates_the_old_city_when_the_extraction_lands_first(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    await first_session(app, fake_anthropic, clock)
    await move_session(app, fake_anthropic, extraction_first=True)
    await check_next_session(app, fake_anthropic, clock)


async def test_a_move_dates_the_old_city_when_the_compaction_lands_first(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    await first_session(app, fake_anthropic, clock)
    await move_session(app, fake_anthropic, extraction_first=False)
    await check_next_session(app, fake_anthropic, clock)


async def test_a_move_told_in_a_session_that_ends_by_inactivity(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    """No compaction at all after the move: the extraction alone rewrites the summary."""
    await first_session(app, fake_anthropic, clock)
    await app.commands.chat(ANA, "Me he mudado a Bilbao, por fin")
    said = user_turn_ids(app)[-1]
    fake_anthropic.queue(
        record(op("semantic", "city", "Bilbao", [said], action="update")), route="record_profile"
    )
    clock.advance(hours=2)
    await app.sweep()
    await app.companion.drain()
    assert city(app) == "Bilbao"
    await check_next_session(app, fake_anthropic, clock)


WHEN = datetime(2026, 11, 5, tzinfo=UTC)


def test_a_claim_about_the_change_itself_or_written_after_it_stays() -> None:
    change = ValueChange("Getxo", "Bilbao", WHEN, through_turn_id=40)
    fields = SummaryFields(
        established_facts=(
            "Se mudó de Getxo a Bilbao {cite:40}",  # names the new value too: about the move
            "Visitó Getxo el sábado {cite:55}",  # cites only turns after the change
            "Vive en Getxo {cite:3}",
        ),
        canon=("El pedido es el 48213 {cite:3}",),
    )
    retired = retire_superseded(fields, [change], "en")
    assert retired.established_facts == (
        "Se mudó de Getxo a Bilbao {cite:40}",
        "Visitó Getxo el sábado {cite:55}",
        "Before (until 2026-11): Vive en Getxo {cite:3}",
    )
    assert retired.canon == fields.canon
    assert retire_superseded(retired, [change], "en") == retired  # dated once, not again


def test_a_deleted_fact_dates_its_claims_and_a_new_job_only_the_changed_words() -> None:
    fields = SummaryFields(
        established_facts=("Trabaja de enfermera en Cruces {cite:2}", "Tiene un gato {cite:2}"),
        canon=("Su gato se llama Mishi {cite:2}",),
    )
    changes = [
        ValueChange("enfermera en Cruces", "enfermera en Basurto", WHEN, 9),
        ValueChange("gato llamado Mishi", None, WHEN, 9),
    ]
    retired = retire_superseded(fields, changes, "es")
    assert retired.canon == ()
    assert retired.established_facts == (
        "Antes (hasta 2026-11): Trabaja de enfermera en Cruces {cite:2}",
        "Antes (hasta 2026-11): Tiene un gato {cite:2}",
        "Antes (hasta 2026-11): Su gato se llama Mishi {cite:2}",
    )


async def test_a_move_learnt_while_the_next_conversation_runs_reaches_it(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    """The move's extraction lands after the next conversation began (a restart, a slow
    model): from the next message on, that conversation's summary no longer says Getxo."""
    await first_session(app, fake_anthropic, clock)
    await app.commands.chat(ANA, "Me he mudado a Bilbao, por fin")
    said = user_turn_ids(app)[-1]
    release = asyncio.Event()

    async def extract(body: dict[str, Any]) -> ToolUse:
        await release.wait()
        return record(op("semantic", "city", "Bilbao", [said], action="update"))

    fake_anthropic.queue(extract, route="record_profile")
    clock.advance(hours=2)
    await app.commands.chat(ANA, "Buenas")  # ends the move's conversation: its extraction waits
    assert f"- {GETXO_CANON}" in fake_anthropic.bodies()[-1]["system"][2]["text"]
    release.set()
    await until(lambda: city(app) == "Bilbao")
    await app.companion.drain()
    await app.commands.chat(ANA, "¿Qué tal?")
    summary = fake_anthropic.bodies()[-1]["system"][2]["text"]
    assert f"- Antes (hasta 2026-11): {GETXO_CANON}" in summary
    assert f"- {GETXO_CANON}" not in summary
