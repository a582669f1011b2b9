"""What several workers share on one PostgreSQL besides the inbox (issue 16): a thread's
compaction and a conversation's journey are claimed by one worker and done once, and the
per-user rate limit is counted in the database, so two workers together hold a user to one
limit and the notice that says when the character will answer stays true."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from bot.adapters.telegram_adapter import TelegramAdapter
from bot.answers import Answer, Caller
from bot.app import App, open_app
from bot.inbox.claimed_jobs import ClaimedCompactions
from bot.inbox.shared_limits import SharedRateLimiter
from bot.roles import claim_background_jobs, followups_once
from memory.models import Fact, Summary, SummaryFields, Thread
from memory.store.postgres import PostgresStore
from memory.store.postgres.inbox import PostgresInbox
from memory.summary.rolling import CompactionInput
from tests import pg_fixtures
from tests.conftest import FakeClock, make_settings
from tests.fakes.anthropic_api import Delay, FakeAnthropic, Text, ToolUse
from tests.fakes.telegram_api import FakeTelegram
from tests.helpers import dm
from tests.patience import PATIENCE

pytestmark = pg_fixtures.needs_postgres

NOW = datetime(2026, 11, 2, 18, 30, tzinfo=UTC)
SUMMARY = {
    "established_facts": ["Ane vive en Bilbao"],
    "relationship": [],
    "commitments": [],
    "tone": [],
    "open_threads": [],
    "canon": [],
}


@pytest.fixture
async def inboxes(pg_url: str) -> AsyncIterator[tuple[PostgresInbox, PostgresInbox]]:
    one, two = await PostgresInbox.open(pg_url), await PostgresInbox.open(pg_url)
    try:
        yield one, two
    finally:
        await one.close()
        await two.close()


async def workers(
    stack: AsyncExitStack, tmp_path: Path, fake: FakeAnthropic, url: str, **overrides: Any
) -> list[App]:
    """Two workers' engines on one database, each with its own inbox connection."""
    apps = []
    for n in range(2):
        settings = make_settings(tmp_path / f"w{n}", fake, database_url=url, **overrides)
        app = await stack.enter_async_context(
            open_app(settings, clock=FakeClock(), start_scheduler=False)
        )
        inbox = await PostgresInbox.open(url)
        stack.push_async_callback(inbox.close)
        app.companion.claim_compactions(ClaimedCompactions(inbox, app.store))
        limit, window = settings.rate_limit_messages, settings.rate_limit_window_seconds
        app.commands.use_rate_limiter(SharedRateLimiter(inbox, limit, window))
        apps.append(app)
    return apps


async def count(url: str, sql: str) -> int:
    connection = await asyncpg.connect(url)
    try:
        return int(await connection.fetchval(sql))
    finally:
        await connection.close()


async def test_a_thread_moved_mid_compaction_is_compacted_once(
    tmp_path: Path, fake_anthropic: FakeAnthropic, pg_url: str
) -> None:
    # The first worker's summary call is slow: the user's next message reaches the second
    # worker meanwhile, whose session (read from the store) is due for compaction too.
    fake_anthropic.queue(Delay(1.0, ToolUse("write_summary", SUMMARY)), route="write_summary")
    async with AsyncExitStack() as stack:
        one, two = await workers(
            stack, tmp_path, fake_anthropic, pg_url, window_trigger_turns=4, window_keep_turns=2
        )
        await one.companion.handle(dm("Hola, soy Ane"))
        await one.companion.handle(dm("Vivo en Bilbao"))  # the window is due: compacting
        await two.companion.handle(dm("Y tengo un perro"))
        await asyncio.gather(one.companion.drain(), two.companion.drain())
    assert len(fake_anthropic.bodies("write_summary")) == 1
    assert await count(pg_url, "SELECT count(*) FROM summaries") == 1


async def test_a_compaction_claim_is_exclusive_owed_and_outlived_by_nobody(
    inboxes: tuple[PostgresInbox, PostgresInbox], pg_url: str
) -> None:
    store = await PostgresStore.open(pg_url)
    try:
        user = await store.upsert_user("telegram", "1", "Ane", NOW)
        thread = Thread(user.id, "detective_bilbao", "dm")
        conversation = await store.start_conversation(thread, NOW)
        turn = await store.add_turn(conversation, "user", "hola", NOW)
        job = CompactionInput(thread, "Koldo", "es", None, (turn,), conversation.id)
        one, two = (ClaimedCompactions(inbox, store) for inbox in inboxes)
        async with one.claim(job) as first:
            async with two.claim(job) as second:
                assert (first, second) == (True, False)
            summary = Summary(SummaryFields(established_facts=("x",)), frozenset(), turn.id, NOW)
            await store.save_summary(thread, summary, conversation.id)
        async with two.claim(job) as again:
            assert not again  # folded already: its summary is no longer the newest
        # A worker that dies holding a claim loses it when the lease runs out.
        async with inboxes[0].job_claim("compaction:x", 0.1) as dead:
            await asyncio.sleep(0.2)
            async with inboxes[1].job_claim("compaction:x", 30) as successor:
                assert dead and successor
    finally:
        await store.close()


async def test_two_workers_count_one_limit_per_user(
    inboxes: tuple[PostgresInbox, PostgresInbox],
) -> None:
    one, two = (SharedRateLimiter(inbox, 3, 60) for inbox in inboxes)
    taken = await asyncio.gather(*(w.take("telegram:1") for w in (one, two) * 4))
    assert sorted(taken)[:3] == [0.0] * 3
    assert all(59 < wait <= 60 for wait in sorted(taken)[3:])  # the oldest call leaves at 60 s
    assert await two.take("telegram:2") == 0.0  # per user


WINDOW = 4.0


async def test_a_call_held_by_the_shared_limit_is_made_when_the_notice_says(
    tmp_path: Path, fake_anthropic: FakeAnthropic, pg_url: str
) -> None:
    caller = Caller("telegram", "1", "Ane", "dm", "1")
    notices: list[tuple[float, str]] = []

    async def notify(answer: Answer) -> None:
        notices.append((time.monotonic(), answer.text))

    async with AsyncExitStack() as stack:
        one, two = await workers(
            stack,
            tmp_path,
            fake_anthropic,
            pg_url,
            rate_limit_messages=2,
            rate_limit_window_seconds=WINDOW,
        )
        started = time.monotonic()
        await one.commands.chat(caller, "uno", "1", notify)
        await two.commands.chat(caller, "dos", "2", notify)
        answer = await one.commands.chat(caller, "tres", "3", notify)  # the third in WINDOW s
        answered = time.monotonic()
    assert answer.ok and len(fake_anthropic.bodies()) == 3
    [(held_at, notice)] = notices
    seconds = int("".join(c for c in notice if c.isdigit()))
    # The notice gives what is left of the window since the first call, rounded up.
    assert 1 <= seconds <= WINDOW and seconds >= WINDOW - (held_at - started)
    # The call waited for the window to pass since the first call, and was made then, not a
    # window later; a loaded machine only makes the wait look longer.
    assert answered - started >= WINDOW
    assert answered - held_at < seconds + WINDOW


async def test_two_workers_send_a_follow_up_due_once(tmp_path: Path, pg_url: str) -> None:
    """The follow-up job runs in every worker; its lock lets one write and send what is due
    (both running it at once would each read the same due event and send it)."""
    friday = FakeClock(datetime(2026, 11, 6, 11, 0, tzinfo=UTC))
    async with AsyncExitStack() as stack:
        fake = await stack.enter_async_context(FakeAnthropic())
        telegram = await stack.enter_async_context(FakeTelegram())
        apps, inboxes = [], []
        for n in range(2):
            settings = make_settings(
                tmp_path / f"w{n}", fake, database_url=pg_url, telegram_bot_token=telegram.token,
                telegram_api_base_url=telegram.url,
            )  # fmt: skip
            app = await stack.enter_async_context(
                open_app(settings, clock=friday, start_scheduler=False)
            )
            adapter = TelegramAdapter(settings, app.commands)
            await adapter.application.initialize()  # REST only, as a worker's: no polling
            stack.push_async_callback(adapter.application.shutdown)
            app.followups.use(adapter)
            inbox = await PostgresInbox.open(pg_url)
            stack.push_async_callback(inbox.close)
            apps.append(app)
            inboxes.append(inbox)
        telegram.send_private_text(1001, "hola", first_name="Ana")  # the chat exists
        store = apps[0].store
        monday = datetime(2026, 11, 2, 18, 30, tzinfo=UTC)
        user = await store.upsert_user("telegram", "1001", "Ana", monday)
        event = Fact(
            id=0, user_id=user.id, character_id="detective_bilbao", kind="episodic", key="event",
            value="entrevista de trabajo", origin="stated", scope="dm", evidence=(),
            lifetime="event", event_date=date(2026, 11, 5), created_at=monday,
            confirmed_at=monday, expires_at=None,
        )  # fmt: skip
        assert await store.apply_fact_changes([event], [], [], [], None, monday)
        assert await store.offer_followups_once(user.id, "detective_bilbao", monday)
        await store.set_followups(user.id, "detective_bilbao", True)
        fake.queue(
            Delay(0.3, Text("¿Qué tal la entrevista?")), Delay(0.3, Text("¿Y la entrevista?"))
        )

        async def both() -> list[int | None]:
            runs = (followups_once(a, i) for a, i in zip(apps, inboxes, strict=True))
            return list(await asyncio.gather(*runs))

        # One sent it; the other found the job taken.
        assert sorted(await both(), key=str) == [1, None]
        assert [m["text"] for m in telegram.sent_messages(1001)] == ["¿Qué tal la entrevista?"]
        assert await both() in ([0, 0], [0, None], [None, 0])  # sent once, never again


async def test_two_workers_sweeping_write_a_conversations_journey_once(
    tmp_path: Path, fake_anthropic: FakeAnthropic, pg_url: str
) -> None:
    """The journey of a conversation is claimed like its extraction: while one worker's
    chronicle waits on the model, the other worker's sweep and start-up catch-up find the pair
    claimed, and once it is written nobody writes it again."""
    asked, release = asyncio.Event(), asyncio.Event()

    async def held_chronicle(body: dict[str, Any]) -> ToolUse:
        asked.set()
        await release.wait()
        shown = body["messages"][0]["content"][0]["text"]
        [turn] = re.findall(r"^\[(\d+)\] user:", shown, re.MULTILINE)
        return ToolUse("write_journey", {"journey": f"Ane contó que se mudaba {{cite:{turn}}}."})

    fake_anthropic.queue(held_chronicle, route="write_journey")
    clock = FakeClock()
    async with AsyncExitStack() as stack:
        one, two = await claiming_workers(stack, tmp_path, fake_anthropic, pg_url, clock)
        await one.companion.handle(dm("Hola, soy Ane y me mudo a Getxo"))
        clock.advance(hours=2)
        sweeps = [asyncio.create_task(worker.sweep()) for worker in (one, two)]
        await asyncio.wait_for(asked.wait(), PATIENCE)
        # Every other way to the same chronicle, while the first waits on the model.
        for worker in (two, one):
            await worker.chronicler.write_pending()  # type: ignore[union-attr]
        release.set()
        await asyncio.gather(*sweeps)
        await asyncio.gather(one.companion.drain(), two.companion.drain())
        await asyncio.gather(one.sweep(), two.sweep())  # nothing is owed any more
    assert len(fake_anthropic.bodies("write_journey")) == 1
    assert await count(pg_url, "SELECT count(*) FROM journeys") == 1
    assert await count(pg_url, "SELECT count(*) FROM journey_runs WHERE status = 'done'") == 1


async def claiming_workers(
    stack: AsyncExitStack, tmp_path: Path, fake: FakeAnthropic, url: str, clock: FakeClock
) -> list[App]:
    """Two workers' engines on one database and one clock, their background jobs claimed as
    `companion run --role worker` claims them."""
    apps = []
    for n in range(2):
        settings = make_settings(tmp_path / f"w{n}", fake, database_url=url)
        app = await stack.enter_async_context(
            open_app(settings, clock=clock, start_scheduler=False)
        )
        inbox = await PostgresInbox.open(url)
        stack.push_async_callback(inbox.close)
        claim_background_jobs(app, inbox)
        apps.append(app)
    return apps
