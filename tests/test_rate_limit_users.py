"""Whom the rate limit counts, as the engine builds its key (memory/engine/bursts.py): one user,
through the real Telegram adapter on its fake. Another user is never held by someone else's
calls, and a user who switches character is still the same user: the limit follows them across
characters (a key per user and character would let anyone multiply the limit by switching)."""

from __future__ import annotations

from pathlib import Path

from bot.commands import RateLimiter
from bot.texts import text
from tests.conftest import FakeClock
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fault_helpers import telegram_bot
from tests.test_burst import Timer, echo, wait_until

ANA, BEA = 1001, 1002


class Releasable(Timer):
    """The test timer, and at the end a release: every sleep then moves the time itself, so no
    held call (the rule broken, several may be) can keep the bot from stopping."""

    released = False

    async def sleep(self, seconds: float) -> None:
        if self.released:
            self.now += seconds
            return
        await super().sleep(seconds)

    def release(self, now: float) -> None:
        self.released = True
        self.move_to(now)


async def test_one_users_calls_never_hold_another_user(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    fake_anthropic.default = echo()
    timer = Releasable()
    async with telegram_bot(tmp_path, fake_anthropic, clock) as bot:
        bot.app.commands.use_rate_limiter(RateLimiter(1, 60, timer.clock, timer.sleep))
        bot.fake.languages.update({ANA: "es", BEA: "es"})
        try:
            bot.fake.send_private_text(ANA, "uno")
            await bot.fake.wait_for_messages(ANA, 1)  # Ana's one call of the window
            timer.now = 10.0
            bot.fake.send_private_text(ANA, "dos")
            notice = (await bot.fake.wait_for_messages(ANA, 2))[-1]
            assert notice["text"] == text("es", "rate_limited", seconds=50)
            bot.fake.send_private_text(BEA, "hola")  # while Ana is held
            answer = (await bot.fake.wait_for_messages(BEA, 1))[-1]
            assert answer["text"] == "Re: hola"  # Bea's own first call: not held
            assert timer.asked == [50.0]  # only Ana's call sleeps
        finally:
            timer.release(60.0)
        assert (await bot.fake.wait_for_messages(ANA, 3))[-1]["text"] == "Re: dos"


async def test_switching_character_does_not_reset_the_limit(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    fake_anthropic.default = echo()
    timer = Releasable()
    async with telegram_bot(tmp_path, fake_anthropic, clock) as bot:
        bot.app.commands.use_rate_limiter(RateLimiter(1, 60, timer.clock, timer.sleep))
        bot.fake.languages[ANA] = "es"
        try:
            bot.fake.send_private_text(ANA, "uno")  # to the default character, Koldo
            assert (await bot.fake.wait_for_messages(ANA, 1))[-1]["text"] == "Re: uno"
            bot.fake.send_command(ANA, ANA, "/personaje", "lighthouse_keeper")
            switched = (await bot.fake.wait_for_messages(ANA, 2))[-1]
            assert "Maggie" in switched["text"]
            timer.now = 20.0
            bot.fake.send_private_text(ANA, "hola Maggie")  # another character, same user
            notice = (await bot.fake.wait_for_messages(ANA, 3))[-1]
            assert notice["text"] == text("es", "rate_limited", seconds=40)
            await wait_until(lambda: timer.asked == [40.0])  # held, not answered
            assert len(fake_anthropic.bodies()) == 1
        finally:
            timer.release(60.0)
        answer = (await bot.fake.wait_for_messages(ANA, 4))[-1]
    assert answer["text"] == "Re: hola Maggie"  # answered once the window allows
    assert len(fake_anthropic.bodies()) == 2
