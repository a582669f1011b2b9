"""Follow-ups on the fake platforms, with a fake clock: offered once after the first dated event,
opt-in (/avisos), written once in character after the event at a waking local hour, stored as a
turn with its sources and cost, paused while unanswered, capped per week, never from a group."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path

import pytest

from bot.adapters.telegram_adapter import TelegramAdapter
from bot.app import App, open_app
from bot.followups import FollowUpPolicy
from memory.models import Fact, FollowUpCandidate, FollowUpState, Thread
from tests.conftest import FakeClock, make_settings
from tests.fakes.anthropic_api import FakeAnthropic, Text
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.telegram_api import FakeTelegram
from tests.raw_db import raw_database
from tests.test_discord_adapter import running

ANA = 1001
DETECTIVE = "detective_bilbao"
THURSDAY = date(2026, 11, 5)  # the clock starts on Monday 2 November 2026, 18:30 UTC


@dataclass
class Bot:
    fake: FakeTelegram
    llm: FakeAnthropic
    app: App


@pytest.fixture
async def bot(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> AsyncIterator[Bot]:
    async with FakeTelegram() as fake:
        settings = make_settings(
            tmp_path, fake_anthropic, telegram_bot_token=fake.token, telegram_api_base_url=fake.url
        )
        async with open_app(settings, clock=clock, start_scheduler=False) as app:
            adapter = TelegramAdapter(settings, app.commands)
            await adapter.start()
            app.followups.use(adapter)
            try:
                yield Bot(fake, fake_anthropic, app)
            finally:
                await adapter.stop()


def dated(
    user_id: int, value: str, when: date, now: datetime, scope: str = "dm", key: str = "event"
) -> Fact:
    return Fact(
        id=0, user_id=user_id, character_id=DETECTIVE, kind="episodic", key=key, value=value,
        origin="stated", scope=scope, evidence=(), lifetime="event", event_date=when,
        created_at=now, confirmed_at=now, expires_at=None,
    )  # fmt: skip


async def learn(app: App, fact: Fact, now: datetime) -> None:
    assert await app.store.apply_fact_changes([fact], [], [], [], None, now)


async def say(bot: Bot, message: str, count: int) -> str:
    bot.fake.send_private_text(ANA, message, first_name="Ana")
    sent = await bot.fake.wait_for_messages(ANA, count)
    return str(sent[-1]["text"])


async def test_a_follow_up_on_telegram_from_offer_to_answer(bot: Bot, clock: FakeClock) -> None:
    bot.llm.queue(Text("Suerte con eso."))
    await say(bot, "El jueves tengo una entrevista de trabajo", 1)
    user = await bot.app.store.find_user("telegram", str(ANA))
    assert user is not None
    await learn(bot.app, dated(user.id, "entrevista de trabajo", THURSDAY, clock()), clock())
    # Offered once, in private, after the first dated event; nothing is sent before opting in.
    assert await bot.app.followups.run() == 0
    offer = bot.fake.sent_messages(ANA)[-1]["text"]
    assert "/avisos on" in offer and "Koldo" in offer
    assert await bot.app.followups.run() == 0 and len(bot.fake.sent_messages(ANA)) == 2
    bot.fake.send_command(ANA, ANA, "avisos", "on", first_name="Ana")
    on = (await bot.fake.wait_for_messages(ANA, 3))[-1]["text"]
    assert "como mucho 2 veces por semana" in on
    # Thursday itself is too early; Friday 08:00 (UTC, the user's zone) is a quiet hour.
    clock.now = datetime(2026, 11, 5, 12, 0, tzinfo=clock.now.tzinfo)
    assert await bot.app.followups.run() == 0
    clock.now = datetime(2026, 11, 6, 8, 0, tzinfo=clock.now.tzinfo)
    assert await bot.app.followups.run() == 0
    clock.now = datetime(2026, 11, 6, 11, 0, tzinfo=clock.now.tzinfo)
    bot.llm.queue(Text("Oye, ¿qué tal fue la entrevista del jueves?"))
    assert await bot.app.followups.run() == 1
    assert bot.fake.sent_messages(ANA)[-1]["text"] == "Oye, ¿qué tal fue la entrevista del jueves?"
    body = bot.llm.bodies()[-1]
    assert "entrevista de trabajo (2026-11-05)" in str(body["messages"][-1])
    # The reply's own prompt: the same sheet block, breakpoint or none (the test sheet is too
    # short for a system breakpoint to pay), and a breakpoint on the newest message.
    replies = [b for b in bot.llm.bodies()[:-1] if b.get("tools")]
    assert replies and body["system"][0] == replies[-1]["system"][0]
    assert any("cache_control" in block for block in body["messages"][-1]["content"])
    # Once only, stored as a turn, its sources for /memoria porque, its cost as "followup".
    assert await bot.app.followups.run() == 0
    sources = await bot.app.store.last_reply_sources(user.id, DETECTIVE)
    assert sources is not None
    [turn] = await bot.app.store.turns_by_ids(user.id, DETECTIVE, [sources.turn_id])
    assert turn.role == "assistant" and turn.text.startswith("Oye, ¿qué tal fue")
    bot.fake.send_command(ANA, ANA, "memoria", "porque", first_name="Ana")
    why = (await bot.fake.wait_for_messages(ANA, 5))[-1]["text"]
    assert why.startswith("Mi última respuesta (6 nov 2026, 11:00)")
    assert "acontecimiento: entrevista de trabajo" in why
    usage = [r for r in await bot.app.store.usage_records(user.id) if r.kind == "followup"]
    assert len(usage) == 1 and usage[0].ok and usage[0].output_tokens > 0
    # Unanswered, it pauses the next one; the user's answer lifts the pause.
    await learn(
        bot.app,
        dated(user.id, "cita con el dentista", date(2026, 11, 6), clock(), key="event_2"),
        clock(),
    )
    clock.now = datetime(2026, 11, 7, 11, 0, tzinfo=clock.now.tzinfo)
    assert await bot.app.followups.run() == 0
    bot.llm.queue(Text("Me alegro."), Text("¿Y el dentista?"))
    await say(bot, "¡Me han cogido!", 6)
    assert await bot.app.followups.run() == 1
    assert bot.fake.sent_messages(ANA)[-1]["text"] == "¿Y el dentista?"


async def test_groups_never_get_follow_ups(bot: Bot, clock: FakeClock) -> None:
    bot.llm.queue(Text("Hola."))
    await say(bot, "Hola", 1)
    user = await bot.app.store.find_user("telegram", str(ANA))
    assert user is not None
    await bot.app.store.set_followups(user.id, DETECTIVE, True)
    group_fact = dated(user.id, "boda de mi prima", THURSDAY, clock(), scope="group:telegram:-5")
    await learn(bot.app, group_fact, clock())
    clock.now = datetime(2026, 11, 6, 12, 0, tzinfo=clock.now.tzinfo)
    assert await bot.app.followups.run() == 0
    assert len(bot.fake.sent_messages()) == 1  # the one reply: no offer, no follow-up


def test_the_policy_caps_a_week_and_keeps_quiet_hours() -> None:
    now = datetime(2026, 11, 6, 11, 0).astimezone()
    fact = dated(1, "x", THURSDAY, now)
    due = FollowUpCandidate(fact, "telegram", "1", "Ana", "UTC")
    policy = FollowUpPolicy(per_week=2)
    assert policy.allows(due, FollowUpState((), False), now)
    two = (now.replace(day=2), now.replace(day=4))
    assert not policy.allows(due, FollowUpState(two, False), now)
    assert policy.allows(due, FollowUpState((now.replace(month=10),) * 2, False), now)
    assert policy.quiet(23) and policy.quiet(3) and not policy.quiet(10) and policy.quiet(21)
    tokyo = FollowUpCandidate(fact, "telegram", "1", "Ana", "Asia/Tokyo")  # 20:00 there
    assert policy.allows(tokyo, FollowUpState((), False), now.astimezone(tz=None))
    late = datetime(2026, 11, 6, 13, 0).astimezone()  # 22:00 in Tokyo
    assert not policy.allows(tokyo, FollowUpState((), False), late)


async def test_a_follow_up_on_discord_goes_to_the_users_dm(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    async with FakeDiscord() as fake, running(tmp_path, fake, fake_anthropic, clock) as bot:
        app = bot.app
        app.followups.use(bot.adapter)
        fake.add_user(4242, "ana")
        user = await app.store.upsert_user("discord", "4242", "Ana", clock())
        await app.store.set_followups(user.id, DETECTIVE, True)
        await app.store.offer_followups_once(user.id, DETECTIVE, clock())
        await learn(app, dated(user.id, "examen de conducir", THURSDAY, clock()), clock())
        clock.now = datetime(2026, 11, 6, 12, 0, tzinfo=clock.now.tzinfo)
        fake_anthropic.queue(Text("¿Aprobaste el examen?"))
        assert await app.followups.run() == 1
        assert [m.content for m in fake.sent_dms(4242)] == ["¿Aprobaste el examen?"]


async def test_a_due_event_gets_nothing_without_a_yes(bot: Bot, clock: FakeClock) -> None:
    """Three users with an event on Thursday, all offered follow-ups; on Friday at noon, when
    it is due, only the one who said yes hears about it: not the one who never answered, nor
    the one who said /avisos off after /avisos on."""
    bea, cai = ANA + 1, ANA + 2
    bot.fake.send_command(ANA, ANA, "avisos", "on", first_name="Ana")
    bot.fake.send_command(cai, cai, "avisos", "on", first_name="Cai")
    await bot.fake.wait_for_messages(cai, 1)
    bot.fake.send_command(cai, cai, "avisos", "off", first_name="Cai")
    bot.llm.queue(Text("Suerte con el examen."))
    bot.fake.send_private_text(bea, "El jueves tengo un examen", first_name="Bea")
    for chat, count in ((ANA, 1), (bea, 1), (cai, 2)):
        await bot.fake.wait_for_messages(chat, count)
    for chat, event in ((ANA, "entrevista"), (bea, "examen"), (cai, "mudanza")):
        user = await bot.app.store.find_user("telegram", str(chat))
        assert user is not None
        await learn(bot.app, dated(user.id, event, THURSDAY, clock()), clock())
    assert await bot.app.followups.run() == 0  # Monday: each is offered follow-ups, once
    before = {chat: len(bot.fake.sent_messages(chat)) for chat in (ANA, bea, cai)}
    assert before == {ANA: 2, bea: 2, cai: 3}
    clock.now = datetime(2026, 11, 6, 12, 0, tzinfo=clock.now.tzinfo)
    bot.llm.queue(Text("¿Qué tal la entrevista?"), Text("¿Qué tal el examen?"))
    assert await bot.app.followups.run() == 1
    assert bot.fake.sent_messages(ANA)[-1]["text"] == "¿Qué tal la entrevista?"
    assert len(bot.fake.sent_messages(bea)) == before[bea]
    assert len(bot.fake.sent_messages(cai)) == before[cai]
    assert len(bot.llm.bodies()) == 2  # Bea's reply and Ana's follow-up: no other was written


async def test_no_follow_up_while_the_conversation_is_off_the_record(
    bot: Bot, clock: FakeClock
) -> None:
    bot.fake.send_command(ANA, ANA, "avisos", "on", first_name="Ana")
    await bot.fake.wait_for_messages(ANA, 1)
    user = await bot.app.store.find_user("telegram", str(ANA))
    assert user is not None
    assert await bot.app.store.offer_followups_once(user.id, DETECTIVE, clock())
    await learn(bot.app, dated(user.id, "entrevista de trabajo", THURSDAY, clock()), clock())
    clock.now = datetime(2026, 11, 6, 12, 0, tzinfo=clock.now.tzinfo)
    bot.fake.send_command(ANA, ANA, "incognito", first_name="Ana")
    assert "fuera de registro" in (await bot.fake.wait_for_messages(ANA, 2))[-1]["text"]
    bot.llm.queue(Text("¿Qué tal la entrevista?"))
    assert await bot.app.followups.run() == 0
    assert len(bot.fake.sent_messages(ANA)) == 2 and bot.llm.bodies() == []
    with raw_database(bot.app.settings) as raw:
        assert raw.execute("SELECT count(*) FROM turns").fetchone()[0] == 0
    # Still owed: back on the record, the follow-up goes out.
    bot.fake.send_command(ANA, ANA, "incognito", "off", first_name="Ana")
    await bot.fake.wait_for_messages(ANA, 3)
    assert await bot.app.followups.run() == 1
    assert bot.fake.sent_messages(ANA)[-1]["text"] == "¿Qué tal la entrevista?"


async def test_no_follow_up_for_a_person_whose_off_record_flag_is_stored(
    bot: Bot, clock: FakeClock
) -> None:
    """After a restart no off-record session is in RAM: the stored flag alone must stop it."""
    bot.fake.send_command(ANA, ANA, "avisos", "on", first_name="Ana")
    await bot.fake.wait_for_messages(ANA, 1)
    user = await bot.app.store.find_user("telegram", str(ANA))
    assert user is not None
    assert await bot.app.store.offer_followups_once(user.id, DETECTIVE, clock())
    await learn(bot.app, dated(user.id, "entrevista de trabajo", THURSDAY, clock()), clock())
    clock.now = datetime(2026, 11, 6, 12, 0, tzinfo=clock.now.tzinfo)
    thread = Thread(user.id, DETECTIVE, "dm")
    # What the process that was told /incognito left behind it before it stopped.
    await bot.app.store.set_off_record(thread, clock() + timedelta(minutes=30))
    assert not bot.app.companion.is_off_record(thread)
    bot.llm.queue(Text("¿Qué tal la entrevista?"))
    assert await bot.app.followups.run() == 0
    assert bot.llm.bodies() == [] and len(bot.fake.sent_messages(ANA)) == 1
    assert await bot.app.store.clear_off_record(thread)  # still owed, once back on the record
    assert await bot.app.followups.run() == 1
    assert bot.fake.sent_messages(ANA)[-1]["text"] == "¿Qué tal la entrevista?"
