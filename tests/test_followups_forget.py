"""A forget and a follow-up, in each order they can meet (issue 28, A3): a follow-up about a
forgotten event is never sent (checked on the fake platform), no turn is stored after the
forget, and the forget leaves no row of the user with the character.

(a) the forget lands before the job reads what is due; (b) after the read, before the write;
(c) during the follow-up's model call; (d) after it is written, before it is sent; (e) while
the forget itself is under way (its rows not yet deleted) when the follow-up begins."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.telegram_adapter import TelegramAdapter
from bot.answers import Caller
from bot.app import App, open_app
from memory.store.copy import MEMORY_TABLES
from tests.conftest import FakeClock, make_settings
from tests.fakes.anthropic_api import FakeAnthropic, Text
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.telegram_api import FakeTelegram
from tests.raw_db import raw_database
from tests.test_discord_adapter import running
from tests.test_followups import DETECTIVE, THURSDAY, dated, learn
from tests.test_forget import Gate

ANA, BEA = 1001, 1002
FORGET = f"mem:forget:{DETECTIVE}"
# Bounds a wait that only a wrong order makes long: the forget that waits for a model call.
STUCK = 10.0
# Past STUCK: a model call held at the gate must not end by the client's own timeout.
LLM_TIMEOUT = 60


@dataclass
class Bot:
    fake: FakeTelegram
    llm: FakeAnthropic
    app: App


@pytest.fixture
def gates() -> Iterator[list[Gate]]:
    made: list[Gate] = []
    yield made
    for gate in made:  # a test failing early must not leave the fake provider stalled
        gate.opened.set()


@pytest.fixture
async def bot(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> AsyncIterator[Bot]:
    async with FakeTelegram() as fake:
        settings = make_settings(
            tmp_path,
            fake_anthropic,
            telegram_bot_token=fake.token,
            telegram_api_base_url=fake.url,
            llm_timeout_seconds=LLM_TIMEOUT,
        )
        async with open_app(settings, clock=clock, start_scheduler=False) as app:
            adapter = TelegramAdapter(settings, app.commands)
            await adapter.start()
            app.followups.use(adapter)
            try:
                yield Bot(fake, fake_anthropic, app)
            finally:
                await adapter.stop()


async def due(app: App, clock: FakeClock, platform: str, user: int, event: str) -> int:
    """A user who said yes to follow-ups, with an event on Thursday; the clock on Friday noon:
    the follow-up is due. No message went through the engine: nothing of theirs is in RAM."""
    clock.now = datetime(2026, 11, 2, 18, 30, tzinfo=clock.now.tzinfo)
    found = await app.store.upsert_user(platform, str(user), f"user{user}", clock())
    assert await app.store.offer_followups_once(found.id, DETECTIVE, clock())
    await app.store.set_followups(found.id, DETECTIVE, True)
    await learn(app, dated(found.id, event, THURSDAY, clock()), clock())
    clock.now = datetime(2026, 11, 6, 12, 0, tzinfo=clock.now.tzinfo)
    return found.id


async def due_on_telegram(bot: Bot, clock: FakeClock, user: int, event: str) -> int:
    """As `due`, the user having opened the private chat with /avisos on (a bot can only
    write to a chat that wrote to it first)."""
    bot.fake.send_command(user, user, "avisos", "on", first_name=f"user{user}")
    await bot.fake.wait_for_messages(user, 1)
    return await due(bot.app, clock, "telegram", user, event)


def sent_to(bot: Bot, user: int) -> list[str]:
    """What the bot wrote to the user after their /avisos on was answered."""
    return [str(m["text"]) for m in bot.fake.sent_messages(user)[1:]]


def caller(platform: str, user: int) -> Caller:
    return Caller(platform, str(user), f"user{user}", "dm", str(user))


async def forget(app: App, platform: str, user: int) -> None:
    done = await app.commands.button(caller(platform, user), FORGET)
    assert "olvidado" in done.text


def rows_of(app: App, user_id: int) -> dict[str, int]:
    """The user's rows in every table a forget empties."""
    with raw_database(app.settings) as raw:
        return {
            table: raw.execute(
                f"SELECT count(*) FROM {table} WHERE user_id = ?", (user_id,)
            ).fetchone()[0]
            for table in MEMORY_TABLES
        }


def nothing_left(app: App, user_id: int) -> None:
    rows = rows_of(app, user_id)
    assert rows == dict.fromkeys(rows, 0), rows


async def test_a_forget_before_the_job_reads_leaves_nothing_to_send(
    bot: Bot, clock: FakeClock
) -> None:
    ana = await due_on_telegram(bot, clock, ANA, "entrevista de trabajo")
    await forget(bot.app, "telegram", ANA)
    bot.llm.queue(Text("¿Qué tal la entrevista?"))
    assert await bot.app.followups.run() == 0
    await bot.app.companion.drain()
    assert sent_to(bot, ANA) == []
    nothing_left(bot.app, ana)


async def test_a_forget_after_the_read_and_before_the_write_stops_that_follow_up(
    bot: Bot, clock: FakeClock, gates: list[Gate]
) -> None:
    """Two users due in one run: Bea forgets while Ana's follow-up is being written, after the
    job read both as due."""
    await due_on_telegram(bot, clock, ANA, "entrevista de trabajo")
    bea = await due_on_telegram(bot, clock, BEA, "examen de conducir")
    gate = Gate(Text("¿Qué tal la entrevista?"), gates)
    bot.llm.queue(gate, Text("¿Aprobaste el examen?"))
    running_job = asyncio.create_task(bot.app.followups.run())
    await asyncio.wait_for(gate.arrived.wait(), STUCK)  # Ana's model call: both were read
    await forget(bot.app, "telegram", BEA)
    gate.opened.set()
    assert await running_job == 1
    await bot.app.companion.drain()
    assert sent_to(bot, ANA) == ["¿Qué tal la entrevista?"]
    assert sent_to(bot, BEA) == []
    assert len(bot.llm.bodies()) == 1  # Bea's was not even written
    nothing_left(bot.app, bea)


async def test_a_forget_during_the_model_call_cancels_the_follow_up(
    bot: Bot, clock: FakeClock, gates: list[Gate]
) -> None:
    ana = await due_on_telegram(bot, clock, ANA, "entrevista de trabajo")
    gate = Gate(Text("¿Qué tal la entrevista?"), gates)
    bot.llm.queue(gate)
    running_job = asyncio.create_task(bot.app.followups.run())
    await asyncio.wait_for(gate.arrived.wait(), STUCK)
    forgetting = asyncio.create_task(forget(bot.app, "telegram", ANA))
    # The forget cancels the call in flight: it does not wait for the model's answer.
    await asyncio.wait({forgetting}, timeout=STUCK)
    forgot_first = forgetting.done()
    gate.opened.set()
    await forgetting
    assert await running_job == 0
    await bot.app.companion.drain()
    assert sent_to(bot, ANA) == []
    nothing_left(bot.app, ana)
    assert forgot_first, "the forget waited for the follow-up's model call"


async def test_a_forget_after_the_write_and_before_the_send_stops_it(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    """On Discord, sending to a user first opens their DM channel: the follow-up is written
    and stored by then, and nothing is sent yet."""
    async with (
        FakeDiscord() as fake,
        running(tmp_path, fake, fake_anthropic, clock, llm_timeout_seconds=LLM_TIMEOUT) as harness,
    ):
        app = harness.app
        app.followups.use(harness.adapter)
        fake.add_user(4242, "ana")
        ana = await due(app, clock, "discord", 4242, "examen de conducir")
        fake.rest.dm_gate = asyncio.Event()
        fake_anthropic.queue(Text("¿Aprobaste el examen?"))
        running_job = asyncio.create_task(app.followups.run())
        try:
            await asyncio.wait_for(fake.rest.dm_requested.wait(), STUCK)
            assert rows_of(app, ana)["followups"] == 1  # written and recorded
            forgetting = asyncio.create_task(forget(app, "discord", 4242))
            await asyncio.wait({forgetting}, timeout=STUCK)
            forgot_first = forgetting.done()
        finally:
            fake.rest.dm_gate.set()
        await forgetting
        assert await running_job == 0
        await app.companion.drain()
        assert fake.sent_dms(4242) == []
        nothing_left(app, ana)
        assert forgot_first, "the forget waited for the follow-up's send"


async def test_a_follow_up_that_begins_while_a_forget_is_under_way_writes_nothing(
    bot: Bot, clock: FakeClock
) -> None:
    """The forget has begun (its listeners run, its rows are not deleted yet) when the job
    reaches the user: the store still says the follow-up is owed, the forget says otherwise."""
    ana = await due_on_telegram(bot, clock, ANA, "entrevista de trabajo")
    reached, release = asyncio.Event(), asyncio.Event()

    async def hold(user_id: int, character_id: str) -> Any:
        reached.set()
        await release.wait()

    bot.app.companion.on_forget(hold)
    forgetting = asyncio.create_task(forget(bot.app, "telegram", ANA))
    try:
        await asyncio.wait_for(reached.wait(), STUCK)
        assert rows_of(bot.app, ana)["facts"] == 1  # not deleted yet
        bot.llm.queue(Text("¿Qué tal la entrevista?"))
        assert await bot.app.followups.run() == 0
        assert bot.llm.bodies() == []  # not even written: the forget was seen first
    finally:
        release.set()
    await forgetting
    await bot.app.companion.drain()
    assert sent_to(bot, ANA) == []
    nothing_left(bot.app, ana)


async def test_the_stores_checks_see_a_forget_from_another_process(
    app: App, clock: FakeClock
) -> None:
    """What the engine asks right before writing and sending, and the record of a follow-up,
    after the rows went under it (`companion memory forget`, or a forget in another worker:
    no lock of this process is held for them)."""
    ana = await due(app, clock, "telegram", ANA, "entrevista de trabajo")
    [fact] = await app.store.facts(ana, DETECTIVE)
    assert await app.store.followup_owed(ana, DETECTIVE, fact.id)
    await app.store.forget(ana, DETECTIVE)
    assert not await app.store.followup_owed(ana, DETECTIVE, fact.id)
    assert not await app.store.record_followup(ana, DETECTIVE, fact.id, None, clock())
    assert not await app.store.followup_recorded(ana, DETECTIVE, fact.id, 1)
    nothing_left(app, ana)
