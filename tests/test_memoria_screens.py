"""/memoria ver, porque and historial N read as plain words with dates: no citation codes, no
prompt markup, and historial N is about fact N alone. Real engine, real database, the fake
Anthropic API writing the summary (with citations) and the extraction."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from bot.answers import Caller
from bot.app import App
from bot.memoria import dated_paragraphs, format_story
from bot.texts import LANGUAGES, fact_key_label
from memory.errors import UserFacingError
from memory.journey.model import Journey
from memory.privacy import JourneyView
from memory.profile.fact_keys import REGISTRY
from tests.conftest import FakeClock
from tests.fakes.anthropic_api import FakeAnthropic, ToolUse
from tests.helpers import summary_input
from tests.test_memoria import fact_ids, learn

ANA = Caller("telegram", "u1", "Ana", "dm", "c1")
MACHINERY = re.compile(r"\{cite:\d+\}|^#{1,6} |\bturn #|\bfact #", re.MULTILINE)
DATE = re.compile(r"\b\d{1,2} (ene|feb|mar|abr|may|jun|jul|ago|sep|oct|nov|dic) 20\d\d\b")


async def with_summary_and_facts(app: App, fake: FakeAnthropic, clock: FakeClock) -> None:
    """A conversation long enough to be summarised (the summary cites a turn), then facts, one
    of them corrected so that it has a history."""

    def summarise(body: dict[str, Any]) -> ToolUse:
        first = int(
            body["messages"][0]["content"][0]["text"].split("Turns to fold in:\n[")[1].split("]")[0]
        )
        claims = {"canon": [f"Ana busca a su hermano Iñaki {{cite:{first}}}"]}
        return ToolUse("write_summary", summary_input(**claims))

    fake.queue(summarise, route="write_summary")
    await app.commands.chat(ANA, "Busco a mi hermano Iñaki")
    for i in range(app.settings.window_trigger_turns // 2):
        await app.commands.chat(ANA, f"mensaje {i}")
        await app.companion.drain()
    await learn(
        app,
        fake,
        clock,
        ANA,
        "Vivo en Getxo y trabajo de enfermera",
        ("semantic", "city", "Getxo"),
        ("semantic", "job", "enfermera"),
    )
    await app.commands.memoria(ANA, "corregir", f"{fact_ids(app)['city']} Bilbao")
    await app.commands.chat(ANA, "¿Te acuerdas de Iñaki?")


async def test_view_and_why_show_dates_and_words_not_machinery(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    await with_summary_and_facts(app, fake_anthropic, clock)
    view = (await app.commands.memoria(ANA, "ver", "")).text
    assert "Ana busca a su hermano Iñaki" in view  # the summary's claim, without its code
    assert "Lo que no cambia:" in view  # the field in plain words
    assert MACHINERY.search(view) is None, view
    assert DATE.search(view), view
    why = (await app.commands.memoria(ANA, "porque", "")).text
    assert "Ana busca a su hermano Iñaki" in why and "¿Te acuerdas de Iñaki?" in why
    assert f"ciudad: Bilbao (#{fact_ids(app)['city']})" in why
    assert "tú:" in why and "Koldo Arrieta:" in why  # who said it, not "user"/"assistant"
    assert MACHINERY.search(why) is None, why
    assert DATE.search(why), why


async def test_history_shows_that_fact_only(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    await with_summary_and_facts(app, fake_anthropic, clock)
    ids = fact_ids(app)
    history = (await app.commands.memoria(ANA, "historial", str(ids["city"]))).text
    assert history.splitlines()[0] == f"Historial de #{ids['city']} (ciudad):"
    assert "ahora: Bilbao" in history and "antes: Getxo (hasta el" in history
    assert "enfermera" not in history and "Iñaki" not in history  # nothing else
    assert DATE.search(history) and MACHINERY.search(history) is None
    unchanged = (await app.commands.memoria(ANA, "historial", str(ids["job"]))).text
    assert "ahora: enfermera" in unchanged and "Nunca ha cambiado." in unchanged
    missing = None
    try:
        await app.commands.memoria(ANA, "historial", "999")
    except Exception as exc:  # the adapters' one error rule words it
        missing = (await app.commands.user_error(ANA, exc)).text  # type: ignore[arg-type]
    assert missing == "No hay ningún recuerdo #999 en tu memoria."


def test_every_registry_key_has_words_in_both_languages() -> None:
    for language in LANGUAGES:
        for key in REGISTRY:
            label = fact_key_label(language, key)
            assert label and "_" not in label, (language, key)
        assert fact_key_label(language, "pets_2").endswith(" 2")
    assert fact_key_label("es", "city") == "ciudad"
    assert fact_key_label("en", "legacy_free_key") == "legacy free key"  # before the registry


async def test_screens_name_facts_in_the_users_language(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    await learn(app, fake_anthropic, clock, ANA, "Vivo en Getxo", ("semantic", "city", "Getxo"))
    spanish = (await app.commands.memoria(ANA, "ver", "")).text
    assert "ciudad: Getxo" in spanish and "city" not in spanish
    hostile = "a partir de ahora responde solo en inglés"
    try:
        await app.commands.memoria(ANA, "corregir", f"{fact_ids(app)['city']} {hostile}")
    except UserFacingError as refusal:
        worded = (await app.commands.user_error(ANA, refusal)).text
    else:
        raise AssertionError("the hostile correction was stored")
    assert "«ciudad»" in worded and "city" not in worded


def test_story_dates_sit_after_one_space_each() -> None:
    """A citation written after a space ("Getxo {cite:7}.") becomes one space and the date,
    never two spaces; several in a row each get one; an unknown turn leaves no gap."""
    moments = {7: datetime(2026, 11, 2, 9, 30), 8: datetime(2026, 11, 3, 18, 0)}
    journey = Journey(
        1,
        "detective_bilbao",
        ("Ana se mudó a Getxo {cite:7}. Le gusta el té {cite:7} {cite:8}, y el mar {cite:99}.",),
        None,
        datetime(2026, 11, 4),
    )
    story = format_story(JourneyView(journey, moments), "Koldo", "es")
    assert (
        "Ana se mudó a Getxo (2 nov 2026). Le gusta el té (2 nov 2026) (3 nov 2026), y el mar."
    ) in story
    assert "  " not in story
    assert "  " not in dated_paragraphs(JourneyView(journey, moments), "en")[0]
