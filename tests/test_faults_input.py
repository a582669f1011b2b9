"""Bad input through the real adapters (PTB against the fake Bot API, discord.py against the fake
Discord): every message gets a clear answer or refusal, nothing crashes (the next ordinary
message is answered), and nothing the bot posts can ping or render the user's markup.

The fake LLM repeats the user's text in its answer: the worst case for injection."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.texts import text
from memory.scene.voices import voices_in
from tests.conftest import FakeClock
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.discord_api import FakeDiscord, SentMessage
from tests.fault_helpers import TelegramBot, echo_llm, query, telegram_bot
from tests.patience import PATIENCE
from tests.test_discord_adapter import running

ANA = 1001
USER_TEXTS = "SELECT text FROM turns WHERE role = 'user' ORDER BY id"
GROUP = -100_777
ALICE = 4242

EMPTY = text("es", "empty")
HUNDRED_KB = "a" * 102_400
INVISIBLE = "\u200b\u200c\u200d\u2060\ufeff"  # zero-width space, (non-)joiners, word joiner, BOM
RTL = "\u202eolleh\u202c שלום مرحبا \u200f!"  # a right-to-left override, Hebrew, Arabic, RLM
EMOJI = "🕵️\u200d♂️🔎💀🙂"
LONE_SURROGATE = "hola \ud800 mundo \udfff"  # as JSON can carry it: "\ud800"
INJECTIONS = [
    "@everyone @here mirad esto",
    "<@&123> <@4242> <#1> avisad al rol",
    "[pincha aquí](tg://user?id=1) y [esto](https://example.com)",
    "*negrita* _cursiva_ `código` ~tachado~ ||spoiler|| <b>html</b> <a href='x'>a</a>",
]


def too_long(length: int) -> str:
    return text("es", "too_long", length=length, limit=4000, over=length - 4000)


def no_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


# -- Telegram ---------------------------------------------------------------------------------


@pytest.fixture
async def tg(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> AsyncIterator[TelegramBot]:
    fake_anthropic.default = echo_llm
    async with telegram_bot(tmp_path, fake_anthropic, clock) as bot:
        yield bot


async def tg_exchange(bot: TelegramBot, message: str, chat: int = ANA, **kw: Any) -> str:
    """Send one message and return the bot's (single) answer to it."""
    before = len(bot.fake.sent_messages(chat))
    if chat == ANA:
        bot.fake.send_private_text(ANA, message, first_name="Ana")
    else:
        bot.fake.send_group_text(chat, ANA, message, **kw)
    sent = await bot.fake.wait_for_messages(chat, before + 1)
    assert len(sent) == before + 1
    return str(sent[-1]["text"])


def assert_plain_text_only(bot: TelegramBot) -> None:
    """Replies go out as Telegram HTML built by the bot: whatever markup the user (or the model
    echoing them) wrote is escaped, so it can never become a link, a mention or a tag; only the
    bot's own Markdown (*actions*, `code`) becomes formatting."""
    assert bot.adapter.application.bot.defaults is None
    for method in ("sendMessage", "editMessageText"):
        for params in bot.fake.calls_to(method):
            assert params.get("parse_mode") == "HTML", params
            assert not params.get("entities"), params
    allowed = {"italic", "bold", "code", "pre"}
    for sent in bot.fake.sent_messages():
        kinds = {e["type"] for e in sent["message"].get("entities") or []}
        assert kinds <= allowed, sent


def rendered(message: str) -> str:
    """What Telegram shows of the bot's Markdown: *x* and `x` without their marks."""
    return message.replace("*negrita*", "negrita").replace("`código`", "código")


async def test_telegram_empty_and_invisible_messages_are_refused(
    tg: TelegramBot, caplog: pytest.LogCaptureFixture
) -> None:
    assert await tg_exchange(tg, "   \n\t  ") == EMPTY
    assert await tg_exchange(tg, INVISIBLE) == EMPTY
    assert await tg_exchange(tg, f" {INVISIBLE} \n ") == EMPTY
    # A mention of the bot and nothing else, in a group.
    assert await tg_exchange(tg, "", chat=GROUP, mention_bot=True) == EMPTY
    # An update whose text is empty (the real API never sends one): no answer, no crash.
    tg.fake.send_private_text(ANA, "")
    assert await tg_exchange(tg, "hola") == "Re: hola"
    assert len(tg.llm.bodies()) == 1
    assert query(tg.app.settings.database_target, "SELECT role, text FROM turns") == [
        ("user", "hola"),
        ("assistant", "Re: hola"),
    ]
    assert no_errors(caplog) == []


async def test_telegram_100_kb_is_refused_without_the_llm(
    tg: TelegramBot, caplog: pytest.LogCaptureFixture
) -> None:
    assert await tg_exchange(tg, HUNDRED_KB) == too_long(len(HUNDRED_KB))
    assert tg.llm.bodies() == []
    assert query(tg.app.settings.database_target, "SELECT COUNT(*) FROM turns") == [(0,)]
    assert await tg_exchange(tg, "¿sigues?") == "Re: ¿sigues?"
    assert no_errors(caplog) == []


@pytest.mark.parametrize("message", [EMOJI, RTL, f"{INVISIBLE}hola{INVISIBLE}"])
async def test_telegram_unusual_but_valid_text_is_answered_verbatim(
    tg: TelegramBot, message: str, caplog: pytest.LogCaptureFixture
) -> None:
    assert await tg_exchange(tg, message) == f"Re: {message}"
    stored = query(tg.app.settings.database_target, "SELECT text FROM turns WHERE role = 'user'")
    assert stored == [(message,)]
    assert await tg_exchange(tg, "vale") == "Re: vale"
    assert no_errors(caplog) == []


async def test_telegram_lone_surrogates_are_answered_not_crashed(
    tg: TelegramBot, caplog: pytest.LogCaptureFixture
) -> None:
    answer = await tg_exchange(tg, LONE_SURROGATE)
    assert answer == "Re: hola \ufffd mundo \ufffd"  # the broken halves become U+FFFD
    stored = query(tg.app.settings.database_target, "SELECT text FROM turns WHERE role = 'user'")
    assert stored == [("hola \ufffd mundo \ufffd",)]
    assert await tg_exchange(tg, "vale") == "Re: vale"
    assert no_errors(caplog) == []


async def test_telegram_lone_surrogate_in_the_name_is_harmless(
    tg: TelegramBot, caplog: pytest.LogCaptureFixture
) -> None:
    tg.fake.send_private_text(ANA, "hola", first_name="An\ud800a")
    [answer] = await tg.fake.wait_for_messages(ANA)
    assert answer["text"] == "Re: hola"
    assert no_errors(caplog) == []


async def test_telegram_markup_and_mentions_are_sent_as_plain_text(
    tg: TelegramBot, caplog: pytest.LogCaptureFixture
) -> None:
    for message in INJECTIONS:
        # The user's own HTML and links are shown as typed (escaped), never rendered.
        assert await tg_exchange(tg, message) == f"Re: {rendered(message)}"
        group_answer = await tg_exchange(tg, message, chat=GROUP, mention_bot=True)
        # In a group's scene the line is headed by the character's name, and the model read
        # the message in its speaker's container (memory/scene/voices.py), escaped.
        head, _, echoed = group_answer.partition("\nRe: ")
        assert head == "Koldo Arrieta"
        assert voices_in(echoed) == [("person", "Ana", rendered(message))]
    assert_plain_text_only(tg)
    assert no_errors(caplog) == []


async def test_telegram_keeps_answering_after_every_kind_of_bad_input(
    tg: TelegramBot, caplog: pytest.LogCaptureFixture
) -> None:
    bad = ["", " ", INVISIBLE, HUNDRED_KB, EMOJI, RTL, LONE_SURROGATE, *INJECTIONS]
    for message in bad:
        tg.fake.send_private_text(ANA, message)
    tg.fake.send_private_text(ANA, "fin")
    # A refusal for each message without text or too long; the others, arriving together,
    # are one burst or a few, each answered once, the last answer to "fin".
    await tg.fake.wait_until(
        lambda: any(m["text"] == "Re: fin" for m in tg.fake.sent_messages(ANA))
    )
    sent = tg.fake.sent_messages(ANA)
    refused = [m for m in sent if not m["text"].startswith("Re: ")]
    assert len(refused) == 3 and sent[-1]["text"] == "Re: fin"
    assert len(sent) - len(refused) == len(tg.llm.bodies())
    stored = [row[0] for row in query(tg.app.settings.database_target, USER_TEXTS)]
    assert len(stored) == len(bad) - 4 + 1  # every message with text within the limit, and fin
    assert_plain_text_only(tg)
    assert no_errors(caplog) == []


# -- Discord ----------------------------------------------------------------------------------


@pytest.fixture
async def dc(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> AsyncIterator[FakeDiscord]:
    fake_anthropic.default = echo_llm
    async with FakeDiscord() as fake, running(tmp_path, fake, fake_anthropic, clock):
        yield fake


async def dc_exchange(fake: FakeDiscord, message: str, guild: bool = False) -> str:
    """What the bot answers: in a guild's scene, the character's webhook line or the bot's
    own refusal, whichever comes."""
    channel = fake.channel_id if guild else fake.dm_channel_id(ALICE)

    def posted() -> list[SentMessage]:
        return fake.sent_messages(channel) + fake.webhooks.messages(channel)

    before = len(posted())
    if guild:
        await fake.guild_message(ALICE, message, mention_bot=True, username="alice")
    else:
        await fake.dm(ALICE, message)
    sent = await fake.changes.wait_for(
        lambda: posted()[before:] or None, PATIENCE, lambda: f"no answer to {message!r}"
    )
    return str(sent[0].content)


def assert_no_pings(sent: list[SentMessage]) -> None:
    """Discord pings whatever `allowed_mentions` allows: nothing but the replied-to author."""
    assert sent
    for message in sent:
        assert message.allowed_mentions == {"parse": [], "replied_user": True}, message.payload


async def test_discord_bad_input_is_answered_and_pings_nobody(
    dc: FakeDiscord, caplog: pytest.LogCaptureFixture
) -> None:
    assert await dc_exchange(dc, "  \n ") == EMPTY
    assert await dc_exchange(dc, INVISIBLE) == EMPTY
    assert await dc_exchange(dc, "", guild=True) == EMPTY  # only the bot's mention
    assert await dc_exchange(dc, HUNDRED_KB) == too_long(len(HUNDRED_KB))
    for message in (EMOJI, RTL):
        assert await dc_exchange(dc, message) == f"Re: {message}"
    assert await dc_exchange(dc, LONE_SURROGATE) == "Re: hola \ufffd mundo \ufffd"
    for message in INJECTIONS:
        assert await dc_exchange(dc, message) == f"Re: {message}"
        # In a guild's scene the model read the message in its speaker's container.
        echoed = (await dc_exchange(dc, message, guild=True)).removeprefix("Re: ")
        assert voices_in(echoed) == [("person", "alice", message)]
    assert await dc_exchange(dc, "fin") == "Re: fin"
    assert_no_pings(dc.sent_messages())
    lines = dc.webhooks.messages(dc.channel_id)  # the character's lines: no ping at all
    assert lines and all(m.allowed_mentions == {"parse": []} for m in lines)
    assert no_errors(caplog) == []
    assert dc.errors == []


def test_input_constants_are_what_they_claim() -> None:
    """Guard the fixtures themselves: the surrogates survive JSON as the platforms send them."""
    assert json.loads(json.dumps(LONE_SURROGATE)) == LONE_SURROGATE
    assert INVISIBLE.strip() != ""  # str.strip() alone does not see them as blank
    assert len(HUNDRED_KB) == 100 * 1024
