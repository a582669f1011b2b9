"""While the provider fails, the profile's extraction and the journey of an ended conversation
are asked for again on a bounded schedule (1, 5 and 30 minutes after each failure), then given
up and reported to the admin, instead of at every sweep for ever (memory/engine/retries.py).
The real engine and SDK against the fake Messages API, on the fake clock."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest

from bot.app import App
from tests.conftest import FakeClock
from tests.fakes.anthropic_api import (
    Error,
    FakeAnthropic,
    Text,
    ToolUse,
    empty_tool_answer,
    route_of,
)
from tests.helpers import dm
from tests.raw_db import raw_database
from tests.test_cli import companion, env_for

EXTRACTION, JOURNEY = "record_profile", "write_journey"


def provider_down(body: dict[str, Any]) -> Any:
    """Replies still work; every background call fails at the provider."""
    return Text("Entendido.") if route_of(body) == "reply" else Error(500, "api_error")


def provider_back(body: dict[str, Any]) -> Any:
    return Text("Entendido.") if route_of(body) == "reply" else empty_tool_answer(body)


def calls(fake: FakeAnthropic) -> tuple[int, int]:
    return len(fake.bodies(EXTRACTION)), len(fake.bodies(JOURNEY))


async def sweep_after(app: App, clock: FakeClock, **delta: float) -> None:
    clock.advance(**delta)
    await app.sweep()
    await app.companion.drain()


def statuses(app: App) -> tuple[str, str]:
    with raw_database(app.settings) as raw:
        [(extraction,)] = raw.execute("SELECT extraction_status FROM conversations").fetchall()
        [(journey,)] = raw.execute("SELECT status FROM journey_runs").fetchall()
    return str(extraction), str(journey)


async def test_a_failing_provider_is_asked_again_after_1_5_30_minutes_then_given_up(
    app: App,
    fake_anthropic: FakeAnthropic,
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Any,
) -> None:
    fake_anthropic.default = provider_down
    await app.companion.handle(dm("Me llamo Ane y me mudo a Getxo en abril"))
    await sweep_after(app, clock, hours=1)  # ends it: the first attempt of each fails
    assert calls(fake_anthropic) == (1, 1)
    await sweep_after(app, clock, seconds=0)  # the next sweep asks nothing
    assert calls(fake_anthropic) == (1, 1)
    for attempt, minutes in enumerate((1, 5, 30), start=2):
        await sweep_after(app, clock, minutes=minutes, seconds=-1)  # a second too early
        assert calls(fake_anthropic) == (attempt - 1, attempt - 1)
        await sweep_after(app, clock, seconds=1)
        assert calls(fake_anthropic) == (attempt, attempt)
    # The fourth attempt failed too: given up, never asked again.
    for _ in range(3):
        await sweep_after(app, clock, days=1)
    assert calls(fake_anthropic) == (4, 4)
    assert statuses(app) == ("failed", "failed")
    given_up = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any("extraction of conversation" in m and "given up" in m for m in given_up)
    assert any("journey of conversation" in m and "given up" in m for m in given_up)
    assert any("canon proposals of conversation" in m and "given up" in m for m in given_up)
    # The admin sees it.
    database = str(app.settings.database_path)
    code, out, _ = await companion("stats", env=env_for(tmp_path, None, DATABASE_PATH=database))
    assert code == 0
    given = "given up after their provider failed every retry: extraction 1, journey 1, canon 1"
    assert given in out


async def test_a_provider_back_within_the_schedule_writes_the_profile_and_the_journey(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    fake_anthropic.default = provider_down
    await app.companion.handle(dm("Me llamo Ane y me mudo a Getxo en abril"))
    await sweep_after(app, clock, hours=1)
    assert calls(fake_anthropic) == (1, 1)
    fake_anthropic.default = provider_back
    await sweep_after(app, clock, seconds=30)  # back, but the schedule waits its minute
    assert calls(fake_anthropic) == (1, 1)
    await sweep_after(app, clock, seconds=30)
    assert calls(fake_anthropic) == (2, 2)
    # An empty first chronicle is "nothing" to tell yet; the extraction found no fact.
    assert statuses(app) == ("done", "nothing")
    await sweep_after(app, clock, hours=1)
    assert calls(fake_anthropic) == (2, 2)


def chronicle_of_the_user_turn(body: dict[str, Any]) -> ToolUse:
    """A sound first chronicle, citing the user's turn it is shown."""
    shown = body["messages"][0]["content"][0]["text"]
    [turn] = re.findall(r"^\[(\d+)\] user:", shown, re.MULTILINE)
    return ToolUse(JOURNEY, {"journey": f"Ane contó que le daba miedo volar {{cite:{turn}}}."})


async def test_a_rejected_answer_is_not_counted_as_a_provider_failure(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    await app.companion.handle(dm("Me da miedo volar"))
    invented = ToolUse(JOURNEY, {"journey": "Ane habló de un viaje {cite:987654}."})
    fake_anthropic.queue(invented, Error(500, "api_error"), route=JOURNEY)
    await sweep_after(app, clock, hours=1)  # rejected once, then the provider failed
    assert len(fake_anthropic.bodies(JOURNEY)) == 2
    fake_anthropic.queue(chronicle_of_the_user_turn, route=JOURNEY)
    await sweep_after(app, clock, minutes=1)  # one provider failure: one minute's wait
    assert len(fake_anthropic.bodies(JOURNEY)) == 3
    assert statuses(app)[1] == "done"
