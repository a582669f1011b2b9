"""A worker that dies between two parts of a long reply (issue 28, item 12): the next worker
claims the message and sends only the parts still missing, with no second LLM call. The death
is made deterministic: the fake Telegram holds the second part's sendMessage unanswered (the
first part's send is recorded by then), the worker's task is cancelled there, and its lease is
made to run out. Real TelegramWorkers (the real adapter and PTB) on a real PostgreSQL inbox."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from bot.adapters.split import split_html
from bot.adapters.telegram_adapter import LIMIT
from bot.adapters.telegram_format import to_telegram_html
from bot.app import open_app
from bot.config import Settings
from bot.health import Metrics
from bot.inbox.telegram_platform import telegram_arrival
from bot.inbox.telegram_worker import TelegramWorker
from memory.store.postgres.inbox import PostgresInbox
from tests import pg_fixtures
from tests.conftest import FakeClock, make_settings
from tests.fakes.anthropic_api import FakeAnthropic, Text, route_of
from tests.fakes.anthropic_api import _default as fake_default
from tests.fakes.telegram_api import FakeTelegram

pytestmark = pg_fixtures.needs_postgres

ANA = 1001
# Three paragraphs that no two fit in one Telegram message: a reply of three parts.
REPLY = "\n\n".join(letter * 3000 for letter in "abc")


def long_reply(body: dict[str, Any]) -> Any:
    return Text(REPLY) if route_of(body) == "reply" else fake_default(body)


@contextlib.asynccontextmanager
async def worker(settings: Settings, inbox: PostgresInbox, name: str) -> AsyncIterator[Any]:
    """One worker's engine and Telegram side (what `companion run --role worker` builds)."""
    async with open_app(settings, clock=FakeClock(), start_scheduler=False) as app:
        telegram = TelegramWorker(app, inbox, name, Metrics("worker"), lease_seconds=30)
        await telegram.start()
        try:
            yield telegram
        finally:
            await telegram.stop()


async def run_out_leases(url: str) -> None:
    """What a dead worker's lease does with time, now (the claim query reads the database's
    clock, so moving the lease back is moving time on)."""
    connection = await asyncpg.connect(url)
    try:
        await connection.execute(
            "UPDATE inbox_pairs SET claimed_until = clock_timestamp() - interval '1 second'"
        )
    finally:
        await connection.close()


@pytest.fixture
async def inbox(pg_url: str) -> AsyncIterator[PostgresInbox]:
    opened = await PostgresInbox.open(pg_url)
    try:
        yield opened
    finally:
        await opened.close()


async def test_a_reply_cut_by_a_dead_worker_is_completed_not_repeated(
    tmp_path: Path, fake_anthropic: FakeAnthropic, pg_url: str, inbox: PostgresInbox
) -> None:
    fake_anthropic.default = long_reply
    parts = split_html(to_telegram_html(REPLY), LIMIT)
    assert len(parts) == 3
    async with FakeTelegram() as fake:
        settings = make_settings(
            tmp_path,
            fake_anthropic,
            database_url=pg_url,
            telegram_bot_token=fake.token,
            telegram_api_base_url=fake.url,
        )
        fake.languages[ANA] = "es"
        # The update as Telegram delivers it; stored, as the platform process would, not polled.
        arrived = fake.send_private_text(ANA, "cuéntame el caso entero", first_name="Ana")
        await inbox.put([telegram_arrival(arrived)])
        gate = fake.hold_after("sendMessage", 1)
        try:
            async with worker(settings, inbox, "w1") as first:
                claim = await inbox.claim("w1", 30)
                assert claim is not None
                answering = asyncio.create_task(first.answer(claim))
                await fake.wait_for_calls("sendMessage", 2)  # part 2 is held: part 1 recorded
                answering.cancel()  # the worker dies there
                with contextlib.suppress(asyncio.CancelledError):
                    await answering
        finally:
            gate.set()
        assert [m["text"] for m in fake.sent_messages(ANA)] == parts[:1]
        await run_out_leases(pg_url)
        async with worker(settings, inbox, "w2") as second:
            claim = await inbox.claim("w2", 30)
            assert claim is not None
            assert [(m.sent, m.done) for m in claim.messages] == [(True, False)]
            answered = await second.answer(claim)
            assert not answered.unstored
            assert await inbox.finish(claim.pair_key, "w2", answered.ids)
        sent = [m["text"] for m in fake.sent_messages(ANA)]
    assert sent == parts  # each part once, in order
    assert len(fake_anthropic.bodies("reply")) == 1  # the stored reply, not a second call
