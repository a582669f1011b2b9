"""No message is lost: bursts through the real Telegram and Discord adapters (on their fakes)
are all stored and answered by fewer LLM calls than messages, and a call held back by the rate
limit is announced with its time and then made, answering everything that was held."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bot.app import App
from bot.commands import RateLimiter
from bot.texts import text
from tests.conftest import FakeClock
from tests.fakes.anthropic_api import Delay, FakeAnthropic, Text, route_of
from tests.fakes.anthropic_api import _default as fake_default
from tests.fakes.discord_api import FakeDiscord
from tests.fault_helpers import newest_user_text, request_texts, telegram_bot, turns
from tests.helpers import dm
from tests.patience import PATIENCE
from tests.test_discord_adapter import ALICE, reply_target, running

ANA = 1001


class Timer:
    """The rate limiter's clock and sleep: a held call sleeps until the test moves time on."""

    def __init__(self) -> None:
        self.now = 0.0
        self.asked: list[float] = []
        self._moved = asyncio.Event()

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self._moved.clear()
        self.asked.append(seconds)  # a test that sees this knows the sleeper waits
        await self._moved.wait()

    def move_to(self, now: float) -> None:
        self.now = now
        self._moved.set()


def echo(slow_first: float = 0.0) -> Callable[[dict[str, Any]], Any]:
    """Answers each reply request with the newest user text; the first one slowly."""
    calls = [0]

    def answer(body: dict[str, Any]) -> Any:
        if route_of(body) != "reply":
            return fake_default(body)
        calls[0] += 1
        reply = Text(f"Re: {newest_user_text(body)}")
        return Delay(slow_first, reply) if calls[0] == 1 and slow_first else reply

    return answer


def user_turns(database: Path | str) -> list[str]:
    return [t for _, role, t in turns(database) if role == "user"]


async def wait_until(condition: Callable[[], bool], timeout: float = PATIENCE) -> None:  # noqa: ASYNC109
    async with asyncio.timeout(timeout):
        while not condition():  # noqa: ASYNC110 (the condition is a database read)
            await asyncio.sleep(0.01)


async def test_ten_messages_in_a_burst_on_telegram_are_stored_and_answered(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    fake_anthropic.default = echo(slow_first=0.3)
    texts = [f"mensaje {i}" for i in range(10)]
    async with telegram_bot(tmp_path, fake_anthropic, clock) as bot:
        for message in texts:
            bot.fake.send_private_text(ANA, message, first_name="Ana")
        database = bot.app.settings.database_target
        await wait_until(
            lambda: len(user_turns(database)) == 10 and turns(database)[-1][1] == "assistant"
        )
        log = [(role, t) for _, role, t in turns(database)]
        replies = [t for role, t in log if role == "assistant"]
        await bot.fake.wait_for_messages(ANA, len(replies))
        await asyncio.sleep(0.1)  # nothing more may come
        sent = [m["text"] for m in bot.fake.sent_messages(ANA)]
    assert user_turns(database) == texts  # every message stored, in order
    calls = fake_anthropic.bodies()
    assert len(calls) < 10
    assert sent == replies and len(replies) == len(calls)  # each burst's reply sent once
    # Each reply answers the newest message before it, and every message is before a reply.
    assert all(log[i - 1] == ("user", t[4:]) for i, (r, t) in enumerate(log) if r == "assistant")
    assert log[-1] == ("assistant", "Re: mensaje 9")


async def test_a_burst_on_discord_is_answered_once_under_its_newest_message(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    fake_anthropic.default = echo(slow_first=0.3)
    async with FakeDiscord() as fake, running(tmp_path, fake, fake_anthropic, clock) as h:
        sent = [await fake.dm(ALICE, f"mensaje {i}") for i in range(10)]
        database = h.app.settings.database_target
        await wait_until(
            lambda: len(user_turns(database)) == 10 and turns(database)[-1][1] == "assistant"
        )
        calls = len(fake_anthropic.bodies())
        replies = await fake.wait_for_dms(ALICE, calls)
        await asyncio.sleep(0.1)  # nothing more may come
        assert len(fake.sent_dms(ALICE)) == calls
    assert user_turns(database) == [f"mensaje {i}" for i in range(10)]
    assert len(fake_anthropic.bodies()) < 10
    assert len(replies) == len(fake_anthropic.bodies())
    assert replies[-1].content == "Re: mensaje 9"
    assert reply_target(replies[-1]) == int(sent[-1]["id"])  # under the burst's newest message


async def test_a_held_call_names_when_and_answers_everything_held(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    fake_anthropic.default = echo()
    timer = Timer()
    async with telegram_bot(tmp_path, fake_anthropic, clock) as bot:
        bot.app.commands.use_rate_limiter(RateLimiter(2, 60, timer.clock, timer.sleep))
        database = bot.app.settings.database_target
        try:
            for index in range(2):  # two calls at 0 s: the cap
                bot.fake.send_private_text(ANA, f"mensaje {index}")
                await bot.fake.wait_for_messages(ANA, index + 1)
            timer.now = 15.0
            for index in range(2, 5):
                bot.fake.send_private_text(ANA, f"mensaje {index}")
            notice = (await bot.fake.wait_for_messages(ANA, 3))[-1]
            assert notice["text"] == text("es", "rate_limited", seconds=45)
            assert "45 s" in notice["text"]
            await wait_until(lambda: len(user_turns(database)) == 5)  # stored while held
            bot.fake.send_private_text(ANA, "mensaje 5")  # one more, during the wait
            await wait_until(lambda: len(user_turns(database)) == 6)
            await wait_until(lambda: timer.asked == [45.0])  # asleep, not only announced
            assert len(fake_anthropic.bodies()) == 2
        except BaseException:
            timer.move_to(60.0)  # let the held call end, or the bot could not stop
            raise
        timer.move_to(60.0)
        answered = (await bot.fake.wait_for_messages(ANA, 4))[-1]
        await asyncio.sleep(0.1)
        sent = bot.fake.sent_messages(ANA)
    assert answered["text"] == "Re: mensaje 5"
    assert len(sent) == 4  # two replies, one notice, one reply for all that was held
    bodies = fake_anthropic.bodies()
    assert len(bodies) == 3
    assert request_texts(bodies[2])[-4:] == [f"mensaje {i}" for i in range(2, 6)]
    assert user_turns(database) == [f"mensaje {i}" for i in range(6)]


async def test_the_terminal_chat_has_no_limit(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    from bot.answers import Caller

    fake_anthropic.default = echo()
    timer = Timer()
    async with telegram_bot(tmp_path, fake_anthropic, clock) as bot:
        bot.app.commands.use_rate_limiter(RateLimiter(1, 60, timer.clock, timer.sleep))
        admin = Caller("terminal", "admin", "admin", "dm", "terminal")
        answers = [await bot.app.commands.chat(admin, f"hola {i}") for i in range(3)]
    assert [a.text for a in answers] == [f"Re: hola {i}" for i in range(3)]
    assert timer.asked == []


async def test_a_held_call_on_discord_is_announced_then_answered_once(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    fake_anthropic.default = echo()
    timer = Timer()
    async with FakeDiscord() as fake, running(tmp_path, fake, fake_anthropic, clock) as h:
        h.app.commands.use_rate_limiter(RateLimiter(1, 30, timer.clock, timer.sleep))
        database = h.app.settings.database_target
        try:
            await fake.dm(ALICE, "uno")
            await fake.wait_for_dms(ALICE, 1)
            timer.now = 10.0
            held = [await fake.dm(ALICE, text) for text in ("dos", "tres")]
            notice = (await fake.wait_for_dms(ALICE, 2))[-1]
            assert notice.content == text("es", "rate_limited", seconds=20)
            assert reply_target(notice) == int(held[0]["id"])  # under the first held message
            await wait_until(lambda: len(user_turns(database)) == 3)
            await wait_until(lambda: timer.asked == [20.0])  # asleep, not only announced
            assert len(fake_anthropic.bodies()) == 1
        except BaseException:
            timer.move_to(30.0)
            raise
        timer.move_to(30.0)
        await asyncio.sleep(1)
        answer = (await fake.wait_for_dms(ALICE, 3))[-1]
        await asyncio.sleep(0.1)
        assert len(fake.sent_dms(ALICE)) == 3
    assert answer.content == "Re: tres" and reply_target(answer) == int(held[-1]["id"])
    assert request_texts(fake_anthropic.bodies()[1])[-2:] == ["dos", "tres"]


class CountingGate:
    """A call gate that waits while it counts the call, as the workers' one waits on the
    database (bot/inbox/shared_limits.py)."""

    def __init__(self) -> None:
        self.counting = asyncio.Event()
        self.counted = asyncio.Event()

    async def take(self, key: str) -> float:
        self.counting.set()
        await self.counted.wait()
        return 0.0

    async def wait(self, seconds: float) -> None:
        raise AssertionError("never held")


async def test_a_message_arriving_while_the_gate_counts_the_call_joins_it(
    app: App, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.default = echo()
    gate = CountingGate()
    first = app.companion.submit(dm("uno"), gate)
    await gate.counting.wait()
    second = app.companion.submit(dm("dos"), gate)  # joins the burst while the gate counts
    gate.counted.set()
    replies = await asyncio.gather(first, second)
    assert [r.text for r in replies] == ["", "Re: dos"]
    assert user_turns(app.settings.database_target) == ["uno", "dos"]
    assert len(fake_anthropic.bodies()) == 1
