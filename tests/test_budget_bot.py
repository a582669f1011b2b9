"""Budgets on the fake Telegram and the real engine (issue 36, item 2): a person out of budget
is answered with one line saying when it resets, the model is not asked and the message is
kept; /memoria keeps working; the operators hear once at 80% and once at 100% of the global
cap; background calls count to the person and wait for the reset; `stats --by` shows it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

from bot.adapters.telegram_adapter import TelegramAdapter
from bot.app import App, open_app
from bot.budgets import spend_metrics
from bot.health import HealthServer, Metrics
from memory.budget.policy import day_key
from memory.models import Thread
from tests.conftest import FakeClock, make_settings
from tests.fakes.anthropic_api import FakeAnthropic, Text
from tests.fakes.telegram_api import FakeTelegram
from tests.helpers import dm
from tests.raw_db import raw_database
from tests.test_background_backoff import EXTRACTION, JOURNEY
from tests.test_canon import ROUTE as CANON
from tests.test_cli import companion, env_for

ANA, OPERATOR = 1001, 4242
DETECTIVE = "detective_bilbao"
RESET_LINE = "podrás seguir hablando a partir del 2026-11-03 00:00 (UTC)"


@dataclass
class Bot:
    fake: FakeTelegram
    llm: FakeAnthropic
    app: App


@asynccontextmanager
async def telegram_bot(
    tmp_path: Path, llm: FakeAnthropic, clock: FakeClock, **budgets: Any
) -> AsyncIterator[Bot]:
    async with FakeTelegram() as fake:
        settings = make_settings(
            tmp_path, llm, telegram_bot_token=fake.token, telegram_api_base_url=fake.url,
            admin_ids=[f"telegram:{OPERATOR}"], **budgets,
        )  # fmt: skip
        async with open_app(settings, clock=clock, start_scheduler=False) as app:
            adapter = TelegramAdapter(settings, app.commands)
            await adapter.start()
            app.followups.use(adapter)
            try:
                yield Bot(fake, llm, app)
            finally:
                await adapter.stop()


async def say(bot: Bot, text: str, count: int) -> str:
    bot.fake.send_private_text(ANA, text, first_name="Ana")
    return str((await bot.fake.wait_for_messages(ANA, count))[-1]["text"])


async def stored_texts(app: App) -> list[str]:
    user = await app.store.find_user("telegram", str(ANA))
    assert user is not None
    conversation = await app.store.open_conversation(Thread(user.id, DETECTIVE, "dm"))
    assert conversation is not None
    return [t.text for t in await app.store.conversation_turns(conversation.id)]


async def test_out_of_budget_is_one_line_with_the_reset_no_call_and_the_message_kept(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    async with telegram_bot(tmp_path, fake_anthropic, clock, budget_guest_day=0.0) as bot:
        answer = await say(bot, "Hola, ¿me ayudas con un caso?", 1)
        assert RESET_LINE in answer
        assert "de tu cuenta" in answer  # whose limit it is
        assert fake_anthropic.requests == []  # the model was never asked
        assert await stored_texts(bot.app) == ["Hola, ¿me ayudas con un caso?"]


async def test_memoria_works_while_out_of_budget(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    async with telegram_bot(tmp_path, fake_anthropic, clock, budget_guest_day=0.0) as bot:
        await say(bot, "Me llamo Ana", 1)
        bot.fake.send_command(ANA, ANA, "/memoria", args="exportar")
        sent = await bot.fake.wait_until(lambda: bool(bot.fake.calls_to("sendDocument")))
        assert sent is None
        bot.fake.send_command(ANA, ANA, "/memoria")
        answer = str((await bot.fake.wait_for_messages(ANA, 2))[-1]["text"])
        assert "límite" not in answer
        assert fake_anthropic.requests == []


async def fill_global(app: App, clock: FakeClock, spent: float) -> None:
    """The global cap's counters (its stripes on PostgreSQL) brought to `spent` in all, evenly,
    through the store's own settle."""
    scopes = app.settings.budget_policy().global_scopes()
    day = day_key(clock())
    for scope in scopes:
        await app.store.reserve_budget([(scope, day, 10.0)], 0.0)
        now = next(c.spent for c in await app.store.budget_counters(day) if c.scope == scope)
        await app.store.settle_budget([(scope, day)], 0.0, spent / len(scopes) - now)


async def test_operators_hear_once_at_80_and_once_at_100_percent_of_the_global_cap(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    async with telegram_bot(tmp_path, fake_anthropic, clock, budget_global_day=1.0) as bot:
        bot.fake.send_command(OPERATOR, OPERATOR, "/ayuda")  # a bot writes to those who wrote
        await bot.fake.wait_for_messages(OPERATOR, 1)
        await fill_global(bot.app, clock, 0.7999)
        fake_anthropic.queue(Text("Claro, cuéntame."))
        assert await say(bot, "Hola", 1) == "Claro, cuéntame."
        notice = (await bot.fake.wait_for_messages(OPERATOR, 2))[-1]
        assert "80%" in notice["text"]
        fake_anthropic.queue(Text("Sigo aquí."))
        assert await say(bot, "¿Sigues?", 2) == "Sigo aquí."  # still under 100%: no notice
        await fill_global(bot.app, clock, 1.0)
        answer = await say(bot, "¿Y ahora?", 3)
        assert RESET_LINE in answer and "del bot" in answer
        await say(bot, "¿Hola?", 4)
        notices = [m["text"] for m in bot.fake.sent_messages(OPERATOR)][1:]
        assert len(notices) == 2 and "100%" in notices[1]
        assert len(fake_anthropic.bodies()) == 2  # the refused ones asked nothing


def calls(fake: FakeAnthropic) -> tuple[int, int, int]:
    return len(fake.bodies(EXTRACTION)), len(fake.bodies(JOURNEY)), len(fake.bodies(CANON))


async def sweep_after(app: App, clock: FakeClock, **delta: float) -> None:
    clock.advance(**delta)
    await app.sweep()
    await app.companion.drain()


async def test_background_calls_count_to_the_person_and_wait_for_the_reset(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    settings = make_settings(tmp_path, fake_anthropic, budget_guest_day=1.0)
    async with open_app(settings, clock=clock, start_scheduler=False) as app:
        await app.companion.handle(dm("Me llamo Ane y me mudo a Getxo en abril"))
        person = ("person:telegram:u1", day_key(clock()))
        [row] = [c for c in await app.store.budget_counters(person[1]) if c.scope == person[0]]
        assert row.calls == 1 and row.spent > 0  # the reply, paid by Ane
        await app.store.settle_budget([person], 0.0, 1.0 - row.spent)  # Ane's day is spent
        await sweep_after(app, clock, hours=1)  # ends the conversation: both jobs owed
        for _ in range(4):  # more sweeps than the provider's retry schedule would allow
            await sweep_after(app, clock, minutes=31)
        assert calls(fake_anthropic) == (0, 0, 0)  # deferred, no call
        with raw_database(app.settings) as raw:
            [(status,)] = raw.execute("SELECT extraction_status FROM conversations").fetchall()
        assert status not in ("done", "failed")  # still owed, not given up
        await sweep_after(app, clock, hours=4)  # the next day (01:34): the budget reset
        assert calls(fake_anthropic) == (1, 1, 1)
        next_day = ("person:telegram:u1", day_key(clock()))
        [row] = [c for c in await app.store.budget_counters(next_day[1])
                 if c.scope == next_day[0]]  # fmt: skip
        assert row.calls == 3 and row.spent > 0  # extraction, journey, canon: paid by Ane


async def test_stats_by_person_and_community_show_spend_against_budgets(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    settings = make_settings(
        tmp_path, fake_anthropic, database_path=tmp_path / "c.db", budget_guest_day=2.0,
        budget_community_day=5.0,
    )  # fmt: skip
    day = day_key(datetime.now(UTC))  # the command reads the real day's counters
    async with open_app(settings, clock=clock, start_scheduler=False) as app:
        await app.store.reserve_budget([("person:telegram:77", day, 2.0)], 0.0)
        await app.store.settle_budget([("person:telegram:77", day)], 0.0, 0.5)
        await app.store.reserve_budget([("community:telegram:-5", day, 5.0)], 0.0)
        await app.store.settle_budget([("community:telegram:-5", day)], 0.0, 1.25)
    env = env_for(tmp_path, fake_anthropic, BUDGET_GUEST_DAY="2", BUDGET_COMMUNITY_DAY="5")
    code, by_person, _ = await companion("stats", "--by", "person", env=env)
    assert code == 0
    assert "telegram:77" in by_person and "0.5000" in by_person and "25%" in by_person
    _, by_community, _ = await companion("stats", "--by", "community", env=env)
    assert "telegram:-5" in by_community and "1.2500" in by_community and "25%" in by_community


async def test_metrics_export_spend_per_scope_against_its_budget(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    settings = make_settings(tmp_path, fake_anthropic, budget_guest_day=2.0,
                             budget_global_day=10.0)  # fmt: skip
    day = day_key(datetime.now(UTC))  # a scrape reads the real day's counters
    async with open_app(settings, clock=clock, start_scheduler=False) as app:
        counters = [("person:telegram:77", day, 2.0), ("global", day, 10.0)]
        await app.store.reserve_budget(counters, 0.0)
        await app.store.settle_budget([(s, p) for s, p, _ in counters], 0.0, 0.75)
        metrics = Metrics("worker", spend=spend_metrics(settings, app.store))
        server = HealthServer(metrics, None, "127.0.0.1", 0)
        await server.start()
        try:
            async with aiohttp.ClientSession() as session:
                url = f"http://127.0.0.1:{server.port}/metrics"
                async with session.get(url) as response:
                    body = await response.text()
        finally:
            await server.stop()
    samples = dict(line.rsplit(" ", 1) for line in body.splitlines()
                   if line and not line.startswith("#"))  # fmt: skip
    person = 'kind="person",scope="telegram:77",period="day"'
    assert samples[f"companion_budget_spent{{{person}}}"] == "0.75"
    assert samples[f"companion_budget_limit{{{person}}}"] == "2.0"
    assert samples['companion_budget_spent{kind="global",scope="all",period="day"}'] == "0.75"
    typed = {line.split()[2] for line in body.splitlines() if line.startswith("# TYPE")}
    assert {"companion_budget_spent", "companion_budget_limit"} <= typed
