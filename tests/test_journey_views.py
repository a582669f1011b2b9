"""Every view of what is remembered lists every tier, the journey included (issue 35, items 6
and 8): `/memoria ver`, bare `/memoria historia` as documented, and `companion memory show`
(a real subprocess); after /reset no view calls the ended conversation's summary current."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.answers import Caller
from bot.app import App
from bot.command_line import run_line
from memory.errors import UserFacingError
from tests.conftest import FakeClock
from tests.fakes.anthropic_api import FakeAnthropic, ToolUse
from tests.helpers import summary_input
from tests.test_cli import companion, env_for
from tests.test_journey import two_conversations

ANA = Caller("telegram", "u1", "Ana", "dm", "dm-u1")


async def test_memoria_ver_lists_the_journey_with_the_facts(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    await two_conversations(app, fake_anthropic, clock)
    shown = await run_line(app.commands, ANA, "/memoria ver")
    assert shown is not None
    assert "No recuerdo nada" not in shown.text
    assert "Nuestra historia" in shown.text and "Lisboa" in shown.text
    assert "{cite" not in shown.text and "2026" in shown.text  # dates, not codes


async def test_bare_memoria_historia_shows_the_story(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    await two_conversations(app, fake_anthropic, clock)
    for line in ("/memoria historia", "/memory story", "/memoria historia ver"):
        shown = await run_line(app.commands, ANA, line)
        assert shown is not None and "Lisboa" in shown.text, line
    with pytest.raises(UserFacingError, match=r"\[ver\|borrar\]"):
        await run_line(app.commands, ANA, "/memoria historia quemar")  # usage names it optional
    deleted = await run_line(app.commands, ANA, "/memoria historia borrar")
    assert deleted is not None and "borrado" in deleted.text


async def test_companion_memory_show_lists_the_journey(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock, tmp_path: Path
) -> None:
    await two_conversations(app, fake_anthropic, clock)
    env = env_for(tmp_path, None, DATABASE_PATH=str(app.settings.database_path))
    code, out, err = await companion(
        "memory", "show", "--platform", "telegram", "--user", "u1", env=env
    )
    assert code == 0, err
    [koldo] = [s for s in out.split("\n\n== ") if "detective_bilbao:" in s.split("\n")[0]]
    assert "nothing yet" not in koldo, out
    assert "Their story (the journey):" in koldo and "Lisboa" in koldo and "{cite" not in koldo


async def test_after_reset_the_ended_conversations_summary_is_not_called_current(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    await app.commands.chat(ANA, "Estoy preparando una maratón en primavera")
    fake_anthropic.queue(
        ToolUse("write_summary", summary_input(open_threads=["Ana prepara una maratón"])),
        route="write_summary",
    )
    await app.commands.reset(ANA)
    await app.companion.drain()
    shown = await run_line(app.commands, ANA, "/memoria ver")
    assert shown is not None and "maratón" in shown.text  # still remembered: a tier shown
    assert "De qué va la conversación de ahora" not in shown.text
    assert "De qué hablamos la última vez" in shown.text
    english = await run_line(app.commands, ANA, "/memory view")
    assert english is not None and "current conversation" not in english.text
