"""Streaming replies: the message fills in as the model writes it, on Telegram and Discord, through
the real SDKs against the fakes; edits are throttled; STREAM_REPLIES=false sends one message."""

from __future__ import annotations

import asyncio
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest

from bot.adapters.discord_adapter import DiscordAdapter
from bot.adapters.live import WRITING, LiveReply
from bot.app import App, open_app
from tests.conftest import FakeClock, make_settings, running_telegram
from tests.fakes.anthropic_api import FakeAnthropic, Text
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.telegram_api import FakeTelegram
from tests.raw_db import raw_database

ANA = 1001
REPLY = (
    "Mira, chaval, el caso del Casco Viejo no se resuelve en un día. "
    "Mañana bajamos a la ría y preguntamos a los de siempre."
)


def stored_replies(app: App) -> list[str]:
    with raw_database(app.settings) as raw:
        rows = raw.execute("SELECT text FROM turns WHERE role = 'assistant' ORDER BY id")
        return [row[0] for row in rows]


@pytest.fixture
def slow_stream(fake_anthropic: FakeAnthropic) -> FakeAnthropic:
    fake_anthropic.stream_pieces = 8
    fake_anthropic.stream_pause = 0.03
    return fake_anthropic


def telegram(
    tmp_path: Path, llm: FakeAnthropic, clock: FakeClock, **overrides: object
) -> AbstractAsyncContextManager[tuple[FakeTelegram, App]]:
    """The bot on the fake Telegram, streaming with no pause between edits (unless overridden)."""
    values: dict[str, object] = {"stream_replies": True, "stream_edit_seconds": 0.0, **overrides}
    return running_telegram(tmp_path, llm, clock, **values)


def shown(fake: FakeTelegram) -> list[str]:
    """The bot's messages to Ana as they read now (edits applied)."""
    return [
        fake.messages.get((ANA, sent["message_id"]), sent)["text"]
        for sent in fake.sent_messages(ANA)
    ]


async def _done(fake: FakeTelegram, app: App, replies: int) -> None:
    """Until the engine has stored the reply and the adapter has written its final text."""
    for _ in range(500):
        texts = shown(fake)  # the reply is stored before it is sent: wait for both
        if (
            len(stored_replies(app)) >= replies
            and texts
            and not any(text.endswith(WRITING.strip()) for text in texts)
        ):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"no final reply: {shown(fake)}")


async def test_telegram_reply_fills_in_one_message(
    tmp_path: Path, slow_stream: FakeAnthropic, clock: FakeClock
) -> None:
    slow_stream.queue(Text(REPLY))
    async with telegram(tmp_path, slow_stream, clock) as (fake, app):
        fake.send_private_text(ANA, "¿Qué hacemos con el caso?")
        await _done(fake, app, 1)
        [message] = fake.sent_messages(ANA)
        assert shown(fake) == [REPLY]
        edits = [e for e in fake.edited_messages if e["message_id"] == message["message_id"]]
        assert len(edits) >= 2  # it grew while the model wrote, then took the final text
        assert all(e["text"].endswith("…") for e in edits[:-1]) and edits[-1]["text"] == REPLY
        assert len(fake.calls_to("sendMessage")) == 1
        assert slow_stream.bodies()[0]["stream"] is True
        assert stored_replies(app) == [REPLY]


async def test_telegram_long_streamed_reply_keeps_its_parts(
    tmp_path: Path, slow_stream: FakeAnthropic, clock: FakeClock
) -> None:
    long_reply = "Esta es una frase bastante larga del detective, con detalles. " * 150
    slow_stream.queue(Text(long_reply))
    async with telegram(tmp_path, slow_stream, clock) as (fake, app):
        fake.send_private_text(ANA, "Cuéntamelo todo")
        await _done(fake, app, 1)
        await fake.wait_for_messages(ANA, 3)
        chunks = shown(fake)
        assert len(chunks) == 3 and all(len(c) <= 4096 for c in chunks)
        assert " ".join(chunks).split() == long_reply.split()


async def test_telegram_without_streaming_sends_once_and_never_edits(
    tmp_path: Path, slow_stream: FakeAnthropic, clock: FakeClock
) -> None:
    slow_stream.queue(Text(REPLY))
    async with telegram(tmp_path, slow_stream, clock, stream_replies=False) as (fake, app):
        fake.send_private_text(ANA, "¿Qué hacemos con el caso?")
        await _done(fake, app, 1)
        assert shown(fake) == [REPLY]
        assert fake.edited_messages == []
        assert "stream" not in slow_stream.bodies()[0]


async def test_discord_reply_fills_in_one_message(
    tmp_path: Path, slow_stream: FakeAnthropic, clock: FakeClock
) -> None:
    slow_stream.queue(Text(REPLY))
    async with FakeDiscord() as fake:
        settings = make_settings(
            tmp_path,
            slow_stream,
            discord_bot_token=fake.token,
            discord_api_base_url=f"{fake.url}/api/v10",
            stream_replies=True,
            stream_edit_seconds=0.0,
        )
        async with open_app(settings, clock=clock, start_scheduler=False) as app:
            adapter = DiscordAdapter(settings, app.commands, guild_ready_timeout=0.05)
            await adapter.start()
            try:
                sent = await fake.dm(ANA, "¿Qué hacemos con el caso?", username="ana")
                [first] = await fake.wait_for_dms(ANA, 1)
                for _ in range(500):
                    if fake.edited_messages and fake.edited_messages[-1].content == REPLY:
                        break
                    await asyncio.sleep(0.01)
            finally:
                await adapter.stop()
    edits = [e for e in fake.edited_messages if e.id == first.id]
    assert edits and edits[-1].content == REPLY
    assert all(e.content is not None and e.content.endswith("…") for e in edits[:-1])
    assert len(fake.sent_dms(ANA)) == 1  # one message, edited: no second copy
    assert first.message_reference and int(first.message_reference["message_id"]) == int(sent["id"])


async def test_edits_are_throttled_and_the_final_text_always_lands() -> None:
    now = [0.0]
    log: list[tuple[str, str]] = []

    async def send(text: str) -> int:
        log.append(("send", text))
        return 1

    async def edit(_handle: int, text: str) -> None:
        log.append(("edit", text))

    live = LiveReply(send, edit, str, interval=1.5, clock=lambda: now[0])
    text = ""
    for word in ("Buenas", "tardes,", "¿qué", "tal", "ha", "ido", "la", "entrevista?"):
        text = f"{text} {word}".strip()
        await live.update(text)
        now[0] += 0.5  # a delta every half second: at most one edit per 1.5 s
    assert log[0] == ("send", "Buenas tardes, ¿qué tal ha" + WRITING)  # 24 characters first
    assert [kind for kind, _ in log].count("edit") <= 2
    assert await live.finish(text)
    assert log[-1] == ("edit", text)
    await live.update(text + " más")  # a late snapshot never overwrites the final text
    assert log[-1] == ("edit", text)


async def test_a_failing_platform_ends_the_display_not_the_reply() -> None:
    async def send(_text: str) -> int:
        raise RuntimeError("429 Too Many Requests")

    async def edit(_handle: int, _text: str) -> None:
        raise AssertionError("nothing was sent, nothing to edit")

    live = LiveReply(send, edit, str, interval=0.0)
    await live.update("Un texto lo bastante largo para mostrarse ya")
    await live.update("Un texto lo bastante largo para mostrarse ya, y más")
    assert live.handle is None
    assert not await live.finish("final")  # the adapter sends the answer the usual way
