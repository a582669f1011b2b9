"""Rules that held only by accident of the other tests: what the user stated outranks an
inference, a "stated" fact needs the user's own words, and admin commands check the platform
as well as the id. Real engine, real SQLite file, the fake Anthropic API on 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.answers import Caller
from bot.app import App, open_app
from bot.texts import text
from tests.conftest import FakeClock, make_settings
from tests.fakes.anthropic_api import FakeAnthropic
from tests.helpers import dm, group
from tests.raw_db import raw_database
from tests.test_profile import end_by_timer, facts, op, record, user_turn_ids


def origins(app: App) -> list[tuple[str, str]]:
    with raw_database(app.settings) as raw:
        return raw.execute("SELECT value, origin FROM facts ORDER BY id").fetchall()


async def test_an_inference_never_overwrites_what_the_user_stated(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    await app.companion.handle(dm("Vivo en Getxo"))
    fake_anthropic.queue(
        record(op("semantic", "city", "Getxo", user_turn_ids(app))), route="record_profile"
    )
    await end_by_timer(app, clock)
    await app.companion.handle(dm("Hoy he ido de compras a Bilbao"))
    guess = op("semantic", "city", "Bilbao", user_turn_ids(app)[-1:], "update", "inferred")
    fake_anthropic.queue(record(guess), route="record_profile")
    await end_by_timer(app, clock)
    assert origins(app) == [("Getxo", "stated")]
    # The same change, said by the user, does go through: the test can see an update.
    await app.companion.handle(dm("Me he mudado a Bilbao"))
    told = op("semantic", "city", "Bilbao", user_turn_ids(app)[-1:], "update", "stated")
    fake_anthropic.queue(record(told), route="record_profile")
    await end_by_timer(app, clock)
    assert origins(app) == [("Bilbao", "stated")]


async def test_a_stated_fact_must_cite_a_turn_of_the_user(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    await app.companion.handle(dm("Hola"))
    with raw_database(app.settings) as raw:
        [reply] = [r[0] for r in raw.execute("SELECT id FROM turns WHERE role = 'assistant'")]
    said_by_the_character = record(op("semantic", "name", "Koldo", [reply]))
    fake_anthropic.queue(*[said_by_the_character] * 3, route="record_profile")
    await end_by_timer(app, clock)
    assert facts(app) == []
    with raw_database(app.settings) as raw:
        errors = [r[0] for r in raw.execute("SELECT error FROM llm_usage WHERE ok = 0")]
    assert errors and all("no evidence turn is the user's" in e for e in errors)


@pytest.fixture
async def admin_app(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> AsyncIterator[App]:
    settings = make_settings(tmp_path, fake_anthropic, admin_ids="telegram:42")
    async with open_app(settings, clock=clock, start_scheduler=False) as running:
        yield running


def in_group(platform: str, user_id: str) -> Caller:
    return Caller(platform, user_id, "Someone", "group", "-100")


async def test_admin_commands_check_the_platform_and_the_id(admin_app: App) -> None:
    commands = admin_app.commands
    for stranger in (in_group("telegram", "43"), in_group("discord", "42")):
        refused = await commands.bind(stranger, "lighthouse_keeper")
        assert not refused.ok and refused.text == text("es", f"manage_{stranger.platform}")
        reload = await commands.reload(stranger)
        assert not reload.ok and reload.text == text("es", "admins_only")
        assert "ADMIN_IDS" in reload.text  # who can: the operator
        assert await admin_app.store.bound_character(stranger.platform, "-100") is None
    admin = in_group("telegram", "42")
    assert (await commands.bind(admin, "lighthouse_keeper")).ok
    assert await admin_app.store.bound_character("telegram", "-100") == "lighthouse_keeper"
    assert (await commands.reload(admin)).ok


async def test_what_is_learned_in_one_group_stays_in_that_group(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    await app.companion.handle(group("En el trabajo me llaman Txiki", user="u1", channel="g1"))
    fake_anthropic.queue(
        record(op("semantic", "preferred_name", "Txiki", user_turn_ids(app)[-1:])),
        route="record_profile",
    )
    await end_by_timer(app, clock)
    await app.companion.handle(group("Hola", user="u1", channel="g1"))
    assert "- preferred name: Txiki" in fake_anthropic.bodies()[-1]["system"][1]["text"]
    await app.companion.handle(group("Hola", user="u1", channel="g2"))
    assert "Txiki" not in str(fake_anthropic.bodies()[-1])
