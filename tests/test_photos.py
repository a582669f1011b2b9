"""Photos on the fake platforms, with real image payloads: the vision model sees the bytes
(base64 image block) with the caption, the turn log keeps its description and never the bytes,
the description is searchable, and size, type and a provider without vision get clear answers."""

from __future__ import annotations

import asyncio
import base64
import struct
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.telegram_adapter import TelegramAdapter
from bot.app import App, open_app
from bot.texts import text
from memory.engine.photos import sniff_image
from memory.engine.tokens import TokenEstimator
from memory.models import Thread
from memory.search.retrieval import Retriever
from tests.conftest import FakeClock, make_settings
from tests.fakes.anthropic_api import FakeAnthropic, Text
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.discord_world import FakeAttachment
from tests.fakes.paced import PacedDownload
from tests.fakes.telegram_api import FakeTelegram
from tests.test_discord_adapter import running
from tests.test_incognito import database_holds

ANA = 1001
LIMIT = 1_000_000  # 1 MB, as the default limit is counted
# A photo of 3 MB, its bytes a real PNG's head and then padding: refused before it is decoded.
THREE_MB = b"\x89PNG\r\n\x1a\n" + bytes(3_000_000)
# A download's end is awaited only so that a broken bound fails instead of hanging.
HANG_UP_SECONDS = 10.0
GROUP = -100_555
# GIF89a, 1x1, one white pixel: the smallest well-formed GIF.
GIF = bytes.fromhex(
    "47494638396101000100800000ffffff00000021f90401000000002c00000000010001000002024401003b"
)


def png(width: int, height: int, seed: int = 7) -> bytes:
    """A real PNG (RGB, 8 bits), its pixels a simple pattern: chunks with their CRCs."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    rows = b"".join(
        b"\x00" + bytes((x * seed + y * 31 + c * 71) % 256 for x in range(width) for c in range(3))
        for y in range(height)
    )
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


@dataclass
class Bot:
    fake: FakeTelegram
    llm: FakeAnthropic
    app: App


@pytest.fixture
async def launch(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> AsyncIterator[Any]:
    stack: list[Any] = []

    async def start(**overrides: Any) -> Bot:
        fake = await FakeTelegram().__aenter__()
        settings = make_settings(
            tmp_path,
            fake_anthropic,
            telegram_bot_token=fake.token,
            telegram_api_base_url=fake.url,
            **overrides,
        )
        context = open_app(settings, clock=clock, start_scheduler=False)
        app = await context.__aenter__()
        adapter = TelegramAdapter(settings, app.commands)
        await adapter.start()
        stack.append((fake, context, adapter))
        return Bot(fake, fake_anthropic, app)

    yield start
    for fake, context, adapter in reversed(stack):
        await adapter.stop()
        await context.__aexit__(None, None, None)
        await fake.__aexit__(None, None, None)


def image_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for m in body["messages"] for b in m["content"] if b["type"] == "image"]


def test_the_payloads_are_real_images() -> None:
    assert sniff_image(png(2, 2)) == "image/png" and sniff_image(GIF) == "image/gif"
    assert zlib.decompress(png(2, 2)[33 + 8 : -12])[:1] == b"\x00"  # the IDAT inflates
    assert sniff_image(b"BM" + bytes(60)) is None  # a BMP is no photo we take


async def test_a_private_photo_is_seen_described_and_never_kept(launch: Any) -> None:
    bot = await launch()
    image = png(8, 8)
    bot.llm.queue(
        Text("Un cachorro negro sobre una manta de cuadros."), Text("¡Qué cosa más bonita!")
    )
    bot.fake.send_photo(ANA, ANA, content=image, caption="Mi perro nuevo, Kuro")
    [reply] = await bot.fake.wait_for_messages(ANA, 1)
    assert reply["text"] == "¡Qué cosa más bonita!"
    describe, answer = bot.llm.bodies()
    [seen] = image_blocks(describe)
    assert seen["source"] == {
        "type": "base64",
        "media_type": "image/png",
        "data": base64.b64encode(image).decode(),
    }
    assert "Mi perro nuevo, Kuro" in str(describe["messages"])
    # The reply is built on the description, text only, like any other turn.
    assert image_blocks(answer) == []
    description = "Un cachorro negro sobre una manta de cuadros."
    stored = f"[Foto de User1001: {description}]\nMi perro nuevo, Kuro"
    assert answer["messages"][-1]["content"][0]["text"] == stored
    user = await bot.app.store.find_user("telegram", str(ANA))
    assert user is not None
    thread = Thread(user.id, "detective_bilbao", "dm")
    turns = await bot.app.store.turns_after(thread, 0)
    assert [t.text for t in turns] == [stored, "¡Qué cosa más bonita!"]
    found = await Retriever(bot.app.store, TokenEstimator()).search(thread, "cachorro manta", 3)
    assert found and "cachorro" in found[0].text
    usage = [r for r in await bot.app.store.usage_records(user.id) if r.kind == "photo"]
    assert len(usage) == 1 and usage[0].ok and usage[0].input_tokens > 0
    assert await database_holds(bot.app, base64.b64encode(image).decode()[:40]) == []
    target = bot.app.settings.database_target
    if isinstance(target, Path):  # SQLite: not one run of the raw bytes either
        for path in target.parent.glob(target.name + "*"):
            assert image[16:48] not in path.read_bytes()


async def test_limits_and_a_model_without_vision_get_clear_answers(launch: Any) -> None:
    bot = await launch(photo_max_bytes=200)
    bot.fake.send_photo(ANA, ANA, content=png(32, 32))
    bot.fake.send_photo(ANA, ANA, content=b"BM" + bytes(60))
    too_big, bad_type = await bot.fake.wait_for_messages(ANA, 2)
    assert too_big["text"] == text("es", "photo_too_big", limit="0.0002")
    assert bad_type["text"] == text("es", "photo_bad_type")
    assert len(bot.fake.calls_to("getFile")) == 1  # the oversized one was never downloaded
    assert bot.llm.bodies() == []
    blind = await launch(llm_vision=False)
    blind.fake.send_photo(ANA, ANA, content=png(2, 2), caption="mira")
    [answer] = await blind.fake.wait_for_messages(ANA, 1)
    assert answer["text"] == text("es", "photo_no_vision")
    assert blind.llm.bodies() == []


async def test_in_a_group_only_a_photo_addressed_to_the_bot_is_seen(launch: Any) -> None:
    bot = await launch()
    bot.fake.send_photo(GROUP, ANA, content=png(2, 2), caption="mirad", chat_type="supergroup")
    username = bot.fake.bot_user["username"]
    bot.llm.queue(Text("Un faro al atardecer."), Text("Bonito faro."))
    bot.fake.send_photo(
        GROUP,
        ANA,
        content=png(2, 2),
        caption=f"@{username} ¿qué te parece?",
        chat_type="supergroup",
    )
    [reply] = await bot.fake.wait_for_messages(GROUP, 1)
    # A line of the group's scene, headed by the character's name.
    assert reply["text"] == "Koldo Arrieta\nBonito faro." and len(bot.llm.bodies()) == 2


async def test_a_discord_photo_is_seen_with_its_caption(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    async with FakeDiscord() as fake, running(tmp_path, fake, fake_anthropic, clock):
        fake_anthropic.queue(Text("Un píxel blanco."), Text("Muy minimalista."))
        gif = FakeAttachment("arte.gif", GIF, "image/gif", width=1, height=1)
        await fake.dm(4242, "mi obra de arte", attachments=[gif])
        [reply] = await fake.wait_for_dms(4242, 1)
        assert reply.content == "Muy minimalista."
        [seen] = image_blocks(fake_anthropic.bodies()[0])
        assert seen["source"]["media_type"] == "image/gif"
        assert base64.b64decode(seen["source"]["data"]) == GIF
        last = fake_anthropic.bodies()[1]["messages"][-1]["content"][0]["text"]
        assert last.startswith("[Foto de") and last.endswith("mi obra de arte")


async def test_a_photo_of_no_declared_size_is_read_no_further_than_the_limit(launch: Any) -> None:
    bot = await launch(photo_max_bytes=LIMIT)
    bot.fake.send_photo(ANA, ANA, content=THREE_MB, declared=False, held_after=LIMIT + 1)
    [too_big] = await bot.fake.wait_for_messages(ANA, 1)
    assert too_big["text"] == text("es", "photo_too_big", limit="1")
    [download] = bot.fake.paced.values()
    # The client hung up with at most one byte past the limit read: the rest was never sent.
    await asyncio.wait_for(download.hung_up.wait(), HANG_UP_SECONDS)
    assert download.sent == LIMIT + 1 and download.requests == 1
    assert bot.llm.bodies() == []
    # One within the limit, its size undeclared too, is read whole and seen.
    bot.llm.queue(Text("Un píxel blanco."), Text("Muy minimalista."))
    bot.fake.send_photo(ANA, ANA, content=GIF, declared=False)
    assert (await bot.fake.wait_for_messages(ANA, 2))[1]["text"] == "Muy minimalista."
    [seen] = image_blocks(bot.llm.bodies()[0])
    assert base64.b64decode(seen["source"]["data"]) == GIF


async def test_a_discord_attachment_that_lies_about_its_size_is_read_no_further(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    paced = PacedDownload(THREE_MB, held_after=LIMIT + 1)
    liar = FakeAttachment("foto.png", THREE_MB, "image/png", declared_size=1_000, paced=paced)
    async with (
        FakeDiscord() as fake,
        running(tmp_path, fake, fake_anthropic, clock, photo_max_bytes=LIMIT),
    ):
        await fake.dm(4242, "mira", attachments=[liar])
        [reply] = await fake.wait_for_dms(4242, 1)
        assert reply.content == text("es", "photo_too_big", limit="1")
        await asyncio.wait_for(paced.hung_up.wait(), HANG_UP_SECONDS)
        assert paced.sent == LIMIT + 1 and paced.requests == 1
        assert fake_anthropic.bodies() == []
