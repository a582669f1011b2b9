"""Time awareness end to end: /zona sets the user's zone, and the request the model gets says
their local time and how long it has been (the rendering itself: tests/test_prompt.py)."""

from __future__ import annotations

from bot.answers import Caller
from bot.app import App
from bot.command_line import run_line
from tests.conftest import FakeClock
from tests.fakes.anthropic_api import FakeAnthropic, Text
from tests.helpers import dm

ANA = Caller("telegram", "u1", "Ana", "dm", "dm-u1")


def turn_context(body: dict[str, object]) -> str:
    last = body["messages"][-1]["content"]  # type: ignore[index]
    return str(last[-2]["text"])


async def test_the_zone_command_puts_the_local_time_in_the_prompt(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    # The clock says 18:30 UTC on Monday 2 November 2026.
    fake_anthropic.queue(Text("Buenas."), Text("Buenas noches, Ana."))
    await app.companion.handle(dm("Hola"))
    assert "lunes 2026-11-02 18:30 (UTC), por la tarde" in turn_context(fake_anthropic.bodies()[0])
    answer = await run_line(app.commands, ANA, "/zona Asia/Tokyo")
    assert answer is not None and answer.ok
    assert answer.text == "Tu zona horaria es ahora Asia/Tokyo (allí son las 03:30)."
    assert await app.store.user_timezone(1) == "Asia/Tokyo"
    await app.companion.handle(dm("¿Sigues despierto?"))  # the session in RAM sees it too
    context = turn_context(fake_anthropic.bodies()[1])
    assert "Ahora, en la hora local de Ana: martes 2026-11-03 03:30 (Asia/Tokyo), de madrugada" in (
        context
    )


async def test_an_unknown_zone_is_refused_with_an_example(app: App) -> None:
    answer = await run_line(app.commands, ANA, "/timezone Mars/Olympus")
    assert answer is not None and not answer.ok
    assert "Mars/Olympus" in answer.text and "Europe/Madrid" in answer.text
    assert await app.store.user_timezone(1) is None


async def test_a_return_after_three_weeks_is_said_in_the_next_conversation(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    await run_line(app.commands, ANA, "/zona Europe/Madrid")
    fake_anthropic.queue(Text("Aquí estaré."), Text("¡Cuánto tiempo!"))
    await app.companion.handle(dm("Me voy de viaje"))
    clock.advance(days=21, hours=3)
    await app.companion.end_idle_conversations()
    await app.companion.handle(dm("Ya he vuelto"))
    context = turn_context(fake_anthropic.bodies()[1])
    assert "Último mensaje anterior de Ana: hace 3 semanas." in context
    assert "saluda a Ana como a alguien que vuelve" in context
    assert "lunes 2026-11-23 22:30 (Europe/Madrid), por la noche" in context
