"""The journey on the fake platforms: real python-telegram-bot and discord.py against the fakes
of their APIs, the real engine answering through the fake Messages API. Two private
conversations end (a /reset, then inactivity), each is chronicled, and the third begins with
the journey in block 2; the character follows every citation with lookup_turn and reads the
user's own turns. Another user sees nothing of it, and cannot read those turns either."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.app import App
from memory.journey.model import cited_in
from tests.conftest import FakeClock, running_telegram
from tests.fakes.anthropic_api import FakeAnthropic, Text, ToolUse
from tests.fakes.discord_api import FakeDiscord
from tests.raw_db import raw_database
from tests.test_discord_adapter import running as running_discord

ROUTE = "write_journey"
_TURN = re.compile(r"^\[(\d+)\] user: (.*)$", re.MULTILINE)


def chronicler(says: str, chapter: str) -> Any:
    """A chronicler that continues the journey it is shown with one sentence citing the user's
    turn that holds `says`, read from the atomic turns of its request (as a model would)."""

    def answer(body: dict[str, Any]) -> ToolUse:
        shown = body["messages"][0]["content"][0]["text"]
        previous = shown.split("Previous journey:\n", 1)[1].split("\n\nThe conversation of")[0]
        turn = next(int(i) for i, text in _TURN.findall(shown) if says in text)
        paragraphs = [] if previous.startswith("(none yet") else [previous.strip()]
        sentence = chapter.format(cite=f"{{cite:{turn}}}")
        return ToolUse(ROUTE, {"journey": "\n\n".join([*paragraphs, sentence])})

    return answer


def follow_block2(body: dict[str, Any]) -> ToolUse:
    """The character follows every citation of block 2 at once."""
    return ToolUse("lookup_turn", {"ids": sorted(cited_in(block2(body)))})


def block2(body: dict[str, Any]) -> str:
    return str(body["system"][1]["text"])


def tool_results(body: dict[str, Any]) -> list[str]:
    return [
        str(block["content"])
        for message in body["messages"]
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]


def turns_of(app: App, platform_user: int) -> dict[int, str]:
    with raw_database(app.settings) as raw:
        rows = raw.execute(
            "SELECT t.id, t.text FROM turns t JOIN users u ON u.id = t.user_id"
            " WHERE u.platform_user_id = ? AND t.role = 'user'",
            (str(platform_user),),
        ).fetchall()
    return {int(turn_id): str(text) for turn_id, text in rows}


@dataclass
class Chat:
    """One platform's private chats, driven through its real adapter and fake API."""

    app: App
    ana: int
    bea: int
    send: Callable[[int, str], Awaitable[None]]
    answers: Callable[[int, int], Awaitable[list[str]]]  # the bot's texts once there are n
    reset: Callable[[int], Awaitable[None]]

    async def say(self, user: int, text: str) -> str:
        """Send `text` and return the bot's answer to it."""
        before = len(await self.answers(user, 0))
        await self.send(user, text)
        return (await self.answers(user, before + 1))[-1]


@asynccontextmanager
async def telegram_chat(
    tmp_path: Path, llm: FakeAnthropic, clock: FakeClock
) -> AsyncIterator[Chat]:
    async with running_telegram(tmp_path, llm, clock) as (telegram, app):

        async def send(user: int, text: str) -> None:
            telegram.send_private_text(user, text, first_name=f"u{user}")

        async def answers(user: int, count: int) -> list[str]:
            return [m["text"] for m in await telegram.wait_for_messages(user, count)]

        async def reset(user: int) -> None:
            before = len(telegram.sent_messages(user))
            telegram.send_command(user, user, "/reset")
            await telegram.wait_for_messages(user, before + 1)

        yield Chat(app, 1001, 1002, send, answers, reset)


@asynccontextmanager
async def discord_chat(tmp_path: Path, llm: FakeAnthropic, clock: FakeClock) -> AsyncIterator[Chat]:
    async with FakeDiscord() as fake, running_discord(tmp_path, fake, llm, clock) as h:

        async def send(user: int, text: str) -> None:
            await fake.dm(user, text)

        async def answers(user: int, count: int) -> list[str]:
            return [m.content for m in await fake.wait_for_dms(user, count)]

        async def reset(user: int) -> None:
            await h.slash("reset", user_id=user, guild=False)

        yield Chat(h.app, 4242, 5353, send, answers, reset)


@pytest.fixture(params=["telegram", "discord"])
async def chat(
    request: pytest.FixtureRequest, tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> AsyncIterator[Chat]:
    platform = telegram_chat if request.param == "telegram" else discord_chat
    async with platform(tmp_path, fake_anthropic, clock) as running:
        yield running


async def two_conversations(chat: Chat, llm: FakeAnthropic, clock: FakeClock) -> None:
    """The first ends with /reset, the second by inactivity (the scheduler's sweep)."""
    llm.queue(
        chronicler("miedo volar", "Ana confesó a Koldo su miedo a volar {cite} y él la escuchó."),
        route=ROUTE,
    )
    await chat.say(chat.ana, "Me da miedo volar, nunca he cogido un avión")
    await chat.reset(chat.ana)
    await chat.app.companion.drain()  # the chronicle runs after the reset, off the reply path
    llm.queue(
        chronicler(
            "Lisboa", "Semanas después contó, orgullosa, que voló a Lisboa {cite} sin miedo."
        ),
        route=ROUTE,
    )
    clock.advance(hours=1)
    await chat.say(chat.ana, "¡Al final cogí el avión a Lisboa y salió bien!")
    clock.advance(hours=2)
    await chat.app.sweep()
    await chat.app.companion.drain()


async def test_the_third_conversation_begins_with_the_journey_and_follows_its_citations(
    chat: Chat, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    await two_conversations(chat, fake_anthropic, clock)
    assert len(fake_anthropic.bodies(ROUTE)) == 2  # once per conversation
    fake_anthropic.queue(follow_block2, Text("Me acuerdo de Lisboa."))
    clock.advance(days=3)
    assert await chat.say(chat.ana, "Hola de nuevo, Koldo") == "Me acuerdo de Lisboa."
    first, after_tool = fake_anthropic.bodies()[-2:]
    journey = block2(first)
    assert "miedo a volar" in journey and "Lisboa" in journey
    assert block2(after_tool) == journey  # block 2 is frozen: the cached prefix holds
    cited = cited_in(journey)
    own = turns_of(chat.app, chat.ana)
    assert len(cited) == 2 and cited <= set(own)  # every citation is Ana's own turn
    [read] = tool_results(after_tool)
    for turn_id in cited:  # each resolves to that turn's words, none is "not found"
        assert f"[{turn_id}]" in read and own[turn_id][:20] in read
    assert "not found" not in read

    # Another user: nothing of Ana's journey in the prompt, and her turns cannot be read.
    fake_anthropic.queue(
        ToolUse("lookup_turn", {"ids": sorted(cited)}), Text("No sé de qué me hablas.")
    )
    await chat.say(chat.bea, "Hola, soy Bea")
    bea_first, bea_after = fake_anthropic.bodies()[-2:]
    assert "volar" not in str(bea_first) and "Lisboa" not in str(bea_first)
    assert "{cite:" not in block2(bea_first)
    [refused] = tool_results(bea_after)
    assert all(f"[{turn_id}] not found" in refused for turn_id in cited)
    assert "volar" not in refused and "Lisboa" not in refused
