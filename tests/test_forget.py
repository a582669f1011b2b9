"""Forget is final on the running bot: background work in flight when the user confirms is
stopped and leaves nothing; the admin CLI covers every character; /memoria is rate-limited."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.answers import Caller
from bot.app import App, open_app
from tests.conftest import FakeClock, make_settings
from tests.fakes.anthropic_api import FakeAnthropic, ToolUse
from tests.helpers import summary_input
from tests.patience import PATIENCE
from tests.raw_db import database_env, raw_database, traces_of
from tests.test_cli import companion, env_for
from tests.test_profile import op, record, user_turn_ids

ANA = Caller("telegram", "u1", "Ana", "dm", "c1")
BEA = Caller("telegram", "u2", "Bea", "dm", "c2")
CANARY = "txantxangorricanary"
FORGET = "mem:forget:detective_bilbao"


@pytest.fixture
async def small_window(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> AsyncIterator[App]:
    """A window that compacts after four turns: two exchanges start a compaction."""
    settings = make_settings(tmp_path, fake_anthropic, window_trigger_turns=4, window_keep_turns=2)
    async with open_app(settings, clock=clock, start_scheduler=False) as running:
        yield running


@pytest.fixture
def gates() -> Iterator[list[Gate]]:
    """Every gate is opened at the end, even when a test fails before it opens its own: the
    fake provider then answers the request it holds instead of stalling its shutdown."""
    made: list[Gate] = []
    yield made
    for gate in made:
        gate.opened.set()


class Gate:
    """A scripted model answer that is held until the test opens the gate: the background
    call is truly in flight (the request reached the fake provider) when the user forgets."""

    def __init__(self, answer: Any, registry: list[Gate]) -> None:
        self.arrived = asyncio.Event()
        self.opened = asyncio.Event()
        self._answer = answer
        registry.append(self)

    async def __call__(self, body: dict[str, Any]) -> Any:
        self.arrived.set()
        await self.opened.wait()
        return self._answer(body) if callable(self._answer) else self._answer


def rows_of(app: App, user_id: int) -> dict[str, int]:
    """The user's rows in every table that holds memory."""
    tables = ("conversations", "turns", "summaries", "facts", "llm_usage", "reply_sources")
    with raw_database(app.settings) as raw:
        return {
            table: raw.execute(
                f"SELECT count(*) FROM {table} WHERE user_id = ?", (user_id,)
            ).fetchone()[0]
            for table in tables
        }


async def user_id_of(app: App, caller: Caller) -> int:
    user = await app.store.find_user(caller.platform, caller.user_id)
    assert user is not None
    return user.id


async def test_a_forget_during_an_in_flight_compaction_leaves_nothing(
    small_window: App, fake_anthropic: FakeAnthropic, gates: list[Gate]
) -> None:
    app = small_window
    answer = ToolUse("write_summary", summary_input(canon=[f"La clave es {CANARY}"]))
    gate = Gate(answer, gates)
    fake_anthropic.queue(gate, route="write_summary")
    await app.commands.chat(ANA, f"Apunta mi clave: {CANARY}")
    await app.commands.chat(ANA, "Y vivo en Getxo")
    await asyncio.wait_for(gate.arrived.wait(), 10)  # the summariser's call is in flight
    ana = await user_id_of(app, ANA)
    done = await asyncio.wait_for(app.commands.button(ANA, FORGET), 5)
    assert "olvidado" in done.text
    # The compaction was cancelled by the forget, not merely outrun: nothing is left to wait for.
    await asyncio.wait_for(app.companion.drain(), 2)
    gate.opened.set()
    assert rows_of(app, ana) == dict.fromkeys(rows_of(app, ana), 0)
    assert app.companion.sessions_in_ram == 0  # no session in RAM holds the old window
    assert await app.store.purge_settled(timeout=PATIENCE)
    with raw_database(app.settings) as raw:
        assert raw.execute("SELECT count(*) FROM summaries").fetchone()[0] == 0
    reply = await app.commands.chat(ANA, "¿Qué sabes de mí?")
    assert reply.ok
    assert CANARY not in str(fake_anthropic.bodies()[-1])  # the next prompt carries nothing


async def test_a_forget_during_an_in_flight_extraction_leaves_nothing(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock, gates: list[Gate]
) -> None:
    await app.commands.chat(ANA, f"Mi clave del portal es {CANARY}")
    turn = user_turn_ids(app)[-1]
    gate = Gate(record(op("semantic", "door_code", CANARY, [turn])), gates)
    fake_anthropic.queue(gate, route="record_profile")
    ana = await user_id_of(app, ANA)
    clock.advance(hours=2)
    sweeping = asyncio.create_task(app.sweep())  # ends the conversation, extracts its facts
    await asyncio.wait_for(gate.arrived.wait(), 10)
    assert "olvidado" in (await asyncio.wait_for(app.commands.button(ANA, FORGET), 5)).text
    # The extraction was stopped by the forget: the sweep ends without the model's answer.
    await asyncio.wait_for(sweeping, 2)
    await asyncio.wait_for(app.companion.drain(), 2)
    gate.opened.set()
    assert rows_of(app, ana) == dict.fromkeys(rows_of(app, ana), 0)
    view = await app.commands.memoria(ANA, "ver", "")
    assert CANARY not in view.text


async def test_memoria_confirmations_and_exports_are_rate_limited(app: App) -> None:
    await app.commands.chat(ANA, "Hola")
    limit = 3  # Limits.memoria_limit
    for _ in range(limit - 1):
        assert (await app.commands.memoria(ANA, "exportar", "")).document is not None
    assert "olvidado" in (await app.commands.button(ANA, FORGET)).text
    for attempt in (
        lambda: app.commands.memoria(ANA, "exportar", ""),
        lambda: app.commands.button(ANA, FORGET),
        lambda: app.commands.memoria(ANA, "olvidar", "confirmar"),
    ):
        refused = await attempt()
        assert not refused.ok and refused.private and refused.document is None
        assert "Vuelve a probar dentro de" in refused.text
        seconds = int(refused.text.rsplit("dentro de ", 1)[1].split()[0])
        assert 0 < seconds <= 600
    assert (await app.commands.memoria(ANA, "ver", "")).ok  # reading is not limited
    assert (await app.commands.memoria(ANA, "olvidar", "")).buttons  # nor is asking
    assert (await app.commands.memoria(BEA, "exportar", "")).document is not None  # per user


async def test_the_cli_forgets_every_character_in_the_database_and_the_user(
    tmp_path: Path, app: App, fake_anthropic: FakeAnthropic
) -> None:
    await app.commands.chat(ANA, f"Recuerda {CANARY}")
    await app.commands.chat(BEA, "Hola, soy Bea")
    await app.commands.memoria(ANA, "revisar", "on")
    ana = await user_id_of(app, ANA)
    with raw_database(app.settings) as raw:  # a character removed since
        raw.execute(
            "INSERT INTO facts (user_id, character_id, kind, key, value, origin, scope,"
            " evidence, lifetime, created_at, confirmed_at) VALUES (?, 'retired_character',"
            " 'semantic', 'city', 'Getxo', 'stated', 'dm', '[]', 'never', 'x', 'x')",
            (ana,),
        )
        raw.execute(
            "INSERT INTO character_choices VALUES (?, 'c1', 'retired_character', 'x')", (ana,)
        )
    env = env_for(tmp_path, None, **database_env(app.settings))
    code, out, err = await companion(
        "memory", "forget", "--platform", "telegram", "--user", "u1", "--yes", env=env
    )
    assert code == 0, err
    assert "retired_character: deleted" in out and "detective_bilbao: deleted" in out
    with raw_database(app.settings) as raw:
        for table in ("facts", "turns", "conversations", "character_choices", "user_preferences"):
            assert (
                raw.execute(f"SELECT count(*) FROM {table} WHERE user_id = ?", (ana,)).fetchone()[0]
                == 0
            ), table
        assert raw.execute("SELECT platform_user_id FROM users").fetchall() == [("u2",)]
    assert traces_of(app.settings, CANARY) == []
    # The running bot goes on with Ana as a new user, on a new conversation.
    assert (await app.commands.chat(ANA, "¿Me recuerdas?")).ok
    assert rows_of(app, await user_id_of(app, ANA))["turns"] == 2
    assert rows_of(app, await user_id_of(app, BEA))["turns"] == 2  # Bea's memory is untouched


async def test_a_full_forget_on_the_bot_clears_the_display_name(app: App) -> None:
    """/memoria olvidar of the user's only character leaves nothing of their words, their name
    included; while another character still remembers them, the name stays for it."""
    named = Caller("telegram", "u1", "Ana Txantxangorri", "dm", "c1")
    await app.commands.chat(named, "Hola")
    await app.commands.chat(BEA, "Hola, soy Bea")
    assert "olvidado" in (await app.commands.memoria(named, "olvidar", "confirmar")).text
    assert await app.store.purge_settled(timeout=None)
    with raw_database(app.settings) as raw:
        names = raw.execute("SELECT platform_user_id, display_name FROM users ORDER BY 1")
        assert names.fetchall() == [("u1", ""), ("u2", "Bea")]
    assert traces_of(app.settings, "Txantxangorri") == []
    # The next message is a new conversation with the name the platform gives now.
    assert (await app.commands.chat(named, "¿Me recuerdas?")).ok
    user = await app.store.find_user("telegram", "u1")
    assert user is not None and user.display_name == "Ana Txantxangorri"
