"""Who may talk (bot/access.py), through the real Telegram adapter on its fake, the real engine
and the real store (either backend): a refused message asks the model nothing and stores none of
its text; a private chat is told once a day, a group nothing; invite-only and DMs off; a blocked
person keeps /memoria, and their forget leaves the block in place; /admin acceso changes the
rules live and /yo tells one's ids."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from bot.texts import text
from tests.conftest import FakeClock
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fault_helpers import telegram_bot
from tests.raw_db import raw_database, traces_of
from tests.test_burst import echo, wait_until

ANA, BEA, CARLA = 1001, 1002, 1003  # Ana is the operator
GROUP, OTHER_GROUP = -100500, -100600
OPERATOR = [f"telegram:{ANA}"]


class ReadClock(FakeClock):
    """The test's clock, counting its reads: a refused private message reads it once (the
    time it would be told), so a test can wait for a refusal that sends nothing."""

    reads = 0

    def __call__(self) -> datetime:
        self.reads += 1
        return super().__call__()


def bodies_text(llm: FakeAnthropic) -> str:
    return repr(llm.bodies())


def stored_users(bot_settings: object, user_id: int) -> list[tuple[object, ...]]:
    with raw_database(bot_settings) as raw:  # type: ignore[arg-type]
        return raw.execute(
            "SELECT id FROM users WHERE platform = 'telegram' AND platform_user_id = ?",
            (str(user_id),),
        ).fetchall()


async def test_a_blocked_person_costs_no_call_stores_nothing_and_is_told_once_a_day(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.default = echo()
    clock = ReadClock()
    blocked = [f"telegram:user:{BEA}"]
    async with telegram_bot(tmp_path, fake_anthropic, clock, access_blocked=blocked) as bot:
        bot.fake.languages.update({ANA: "es", BEA: "es"})
        clock.reads = 0
        bot.fake.send_private_text(BEA, "canario-uno")
        [told] = await bot.fake.wait_for_messages(BEA, 1)
        assert told["text"] == text("es", "access_blocked")
        bot.fake.send_private_text(BEA, "canario-dos")  # the same day: nothing sent
        await wait_until(lambda: clock.reads >= 2)
        clock.advance(hours=25)
        bot.fake.send_private_text(BEA, "canario-tres")  # a day later: told again
        lines = await bot.fake.wait_for_messages(BEA, 2)
        assert [m["text"] for m in lines] == [text("es", "access_blocked")] * 2
        assert not fake_anthropic.bodies()  # no model call at all
        assert traces_of(bot.app.settings, "canario") == []
        assert stored_users(bot.app.settings, BEA) == []  # not even their name
        bot.fake.send_private_text(ANA, "hola")  # the bot works for everyone else
        assert (await bot.fake.wait_for_messages(ANA, 1))[-1]["text"] == "Re: hola"
    assert "canario" not in bodies_text(fake_anthropic)
    assert len(bot.fake.sent_messages(BEA)) == 2


async def test_the_told_time_holds_across_restarts(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    """Told once today by one process, a second process (a restart, another worker) on the
    same database stays silent."""
    blocked = [f"telegram:user:{BEA}"]
    async with telegram_bot(tmp_path, fake_anthropic, clock, access_blocked=blocked) as bot:
        bot.fake.languages[BEA] = "en"
        bot.fake.send_private_text(BEA, "one")
        assert (await bot.fake.wait_for_messages(BEA, 1))[0]["text"] == text("en", "access_blocked")
    reads = ReadClock(clock.now)
    async with telegram_bot(tmp_path, fake_anthropic, reads, access_blocked=blocked) as again:
        again.fake.languages[BEA] = "en"
        reads.reads = 0
        again.fake.send_private_text(BEA, "two")
        await wait_until(lambda: reads.reads >= 1)
        again.fake.send_command(BEA, BEA, "/ayuda")  # a command is answered with the line
        [line] = await again.fake.wait_for_messages(BEA, 1)
        assert line["text"] == text("en", "access_blocked")
    assert not fake_anthropic.bodies()


async def test_in_a_group_a_blocked_person_gets_nothing(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    fake_anthropic.default = echo()
    blocked = [f"telegram:user:{BEA}"]
    async with telegram_bot(tmp_path, fake_anthropic, clock, access_blocked=blocked) as bot:
        bot.fake.send_group_text(GROUP, BEA, "canario del grupo", mention_bot=True)
        bot.fake.send_group_text(GROUP, CARLA, "hola a todos", mention_bot=True)
        # The scene is one queue: Carla's answer comes after Bea's message was refused.
        await bot.fake.wait_for_messages(GROUP, 1)
        assert len(bot.fake.sent_messages(GROUP)) == 1
        assert bot.fake.sent_messages(BEA) == []  # not even in private
        assert "canario" not in bodies_text(fake_anthropic)
        assert traces_of(bot.app.settings, "canario") == []


async def test_a_blocked_group_is_silent_for_everyone_but_the_operator(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    fake_anthropic.default = echo()
    overrides = {"access_blocked": [f"telegram:group:{GROUP}"], "admin_ids": OPERATOR}
    async with telegram_bot(tmp_path, fake_anthropic, clock, **overrides) as bot:
        bot.fake.send_group_text(GROUP, CARLA, "canario de carla", mention_bot=True)
        bot.fake.send_group_text(GROUP, ANA, "soy la operadora", mention_bot=True)
        await bot.fake.wait_for_messages(GROUP, 1)
        assert len(bot.fake.sent_messages(GROUP)) == 1
        assert "canario" not in bodies_text(fake_anthropic)
        bot.fake.send_private_text(CARLA, "hola")  # the group's block is not hers in private
        assert (await bot.fake.wait_for_messages(CARLA, 1))[0]["text"] == "Re: hola"


async def test_invite_only_answers_only_listed_people_and_groups(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    fake_anthropic.default = echo()
    allowed = [f"telegram:user:{CARLA}", f"telegram:group:{GROUP}"]
    overrides = {"access_invite_only": True, "access_allowed": allowed}
    async with telegram_bot(tmp_path, fake_anthropic, clock, **overrides) as bot:
        bot.fake.languages.update({BEA: "es", CARLA: "es"})
        bot.fake.send_private_text(BEA, "canario privado")
        [line] = await bot.fake.wait_for_messages(BEA, 1)
        assert line["text"] == text("es", "access_invite_only")
        bot.fake.send_private_text(CARLA, "hola")
        assert (await bot.fake.wait_for_messages(CARLA, 1))[0]["text"] == "Re: hola"
        bot.fake.send_group_text(GROUP, BEA, "en el grupo invitado", mention_bot=True)
        await bot.fake.wait_for_messages(GROUP, 1)  # a listed group: anyone in it
        bot.fake.send_group_text(OTHER_GROUP, BEA, "canario en otro grupo", mention_bot=True)
        bot.fake.send_group_text(OTHER_GROUP, CARLA, "yo sí", mention_bot=True)
        await bot.fake.wait_for_messages(OTHER_GROUP, 1)  # Carla, a listed person
        assert len(bot.fake.sent_messages(OTHER_GROUP)) == 1
        assert "canario" not in bodies_text(fake_anthropic)


async def test_dms_off_refuses_private_chats_but_for_allowed_people_and_operators(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    fake_anthropic.default = echo()
    overrides = {
        "access_dms": False,
        "access_allowed": [f"telegram:user:{CARLA}"],
        "admin_ids": OPERATOR,
    }
    async with telegram_bot(tmp_path, fake_anthropic, clock, **overrides) as bot:
        bot.fake.languages.update({BEA: "en"})
        bot.fake.send_private_text(BEA, "canary")
        [line] = await bot.fake.wait_for_messages(BEA, 1)
        assert line["text"] == text("en", "access_dms_off")
        for person in (CARLA, ANA):
            bot.fake.send_private_text(person, "hola")
            assert (await bot.fake.wait_for_messages(person, 1))[0]["text"] == "Re: hola"
        bot.fake.send_group_text(GROUP, BEA, "en un grupo sí", mention_bot=True)
        await bot.fake.wait_for_messages(GROUP, 1)
        assert "canary" not in bodies_text(fake_anthropic)


async def test_a_blocked_person_keeps_export_and_forget_and_the_block_outlives_the_forget(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    """The operator blocks Bea live (/admin acceso); her /memoria exportar and olvidar still
    work, her forget erases her memory, and she stays blocked."""
    fake_anthropic.default = echo()
    async with telegram_bot(tmp_path, fake_anthropic, clock, admin_ids=OPERATOR) as bot:
        bot.fake.languages.update({ANA: "es", BEA: "es"})
        bot.fake.send_private_text(BEA, "vivo en Getxo-secreto")
        assert (await bot.fake.wait_for_messages(BEA, 1))[-1]["text"] == "Re: vivo en Getxo-secreto"
        bot.fake.send_command(ANA, ANA, "/admin", f"acceso bloquear persona {BEA}")
        changed = (await bot.fake.wait_for_messages(ANA, 1))[-1]["text"]
        assert changed.startswith(text("es", "access_changed"))
        assert f"telegram:user:{BEA}" in changed
        bot.fake.send_command(BEA, BEA, "/memoria", "exportar")
        exported = (await bot.fake.wait_for_messages(BEA, 2))[1]["text"]
        assert exported == text("es", "mem_export", name="Koldo Arrieta")  # not the refusal
        documents = await bot.fake.wait_for_calls("sendDocument", 1)
        assert documents[0]["chat_id"] == BEA
        bot.fake.send_command(BEA, BEA, "/memoria", "olvidar")
        ask = (await bot.fake.wait_for_messages(BEA, 4))[-1]  # reply, export text, file? ask
        forget = next(
            b["callback_data"]
            for row in ask["reply_markup"]["inline_keyboard"]
            for b in row
            if b["callback_data"].startswith("mem:forget:")
        )
        bot.fake.press_button(BEA, BEA, ask["message_id"], forget)
        await bot.fake.wait_until(lambda: bool(bot.fake.calls_to("editMessageText")))
        await wait_until(lambda: traces_of(bot.app.settings, "Getxo-secreto") == [])
        bot.fake.send_command(BEA, BEA, "/personaje")  # still refused: the rule outlived it
        refused = (await bot.fake.wait_for_messages(BEA, 5))[-1]["text"]
        assert refused == text("es", "access_blocked")
    with raw_database(bot.app.settings) as raw:
        rules = raw.execute("SELECT platform, kind, target_id, effect FROM access_rules").fetchall()
    assert [tuple(r) for r in rules] == [("telegram", "user", str(BEA), "block")]


async def test_only_operators_change_the_rules_and_yo_tells_ones_ids(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    async with telegram_bot(tmp_path, fake_anthropic, clock, admin_ids=OPERATOR) as bot:
        bot.fake.languages.update({BEA: "es"})
        bot.fake.send_command(BEA, BEA, "/admin", f"acceso bloquear persona {CARLA}")
        refused = (await bot.fake.wait_for_messages(BEA, 1))[-1]["text"]
        assert refused == text("es", "admins_only")
        assert (await bot.app.store.access_state()).rules == frozenset()
        bot.fake.send_command(GROUP, BEA, "/yo", chat_type="supergroup", addressed=True)
        ids = (await bot.fake.wait_for_messages(BEA, 2))[-1]["text"]  # privately
        assert ids == text("es", "whoami", ids=f"telegram:user:{BEA}, telegram:group:{GROUP}")


async def test_a_blocked_persons_photo_is_not_fetched_nor_described(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    blocked = [f"telegram:user:{BEA}"]
    async with telegram_bot(tmp_path, fake_anthropic, clock, access_blocked=blocked) as bot:
        bot.fake.languages[BEA] = "es"
        bot.fake.send_photo(BEA, BEA, caption="canario de la foto")
        [line] = await bot.fake.wait_for_messages(BEA, 1)
        assert line["text"] == text("es", "access_blocked")
        assert not bot.fake.calls_to("getFile")  # the bytes were never asked for
        assert not fake_anthropic.bodies()  # no vision call
        assert traces_of(bot.app.settings, "canario") == []
