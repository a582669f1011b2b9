"""A worker's wake-ups and claim loop (bot/inbox/worker.py) on a real PostgreSQL inbox: a
stored message wakes the worker that answered its pair last, and no other (every worker for a
pair nobody answered); a message stored while an idle worker's claim is on its way is claimed
at once, not at the next poll. Missed, it waits for the poll, or another worker takes it once
the affinity runs out and reads the user's session again; woken for a message it may not
claim yet, a worker makes an empty claim (issue 38 item 7: work that one worker never does)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from bot.health import Metrics
from bot.inbox.worker import ClaimLoop
from memory.store.inbox import Answered, Claim
from memory.store.postgres import PostgresStore
from memory.store.postgres.inbox import PostgresInbox
from tests import pg_fixtures
from tests.patience import PATIENCE
from tests.test_inbox import arrival

pytestmark = pg_fixtures.needs_postgres
# Far longer than PATIENCE: a message found only by the poll fails the test.
NEVER_POLLS = 10 * PATIENCE
# A negative check's own bound (tests/patience.py): both workers' notices leave at one COMMIT.
NOT_WOKEN_SECONDS = 1.0


@pytest.fixture
async def inbox(pg_url: str) -> AsyncIterator[PostgresInbox]:
    await (await PostgresStore.open(pg_url)).close()  # migrated
    opened = await PostgresInbox.open(pg_url)
    try:
        yield opened
    finally:
        await opened.close()


async def not_woken(event: asyncio.Event) -> bool:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), NOT_WOKEN_SECONDS)
    return not event.is_set()


async def test_a_message_wakes_the_worker_that_answered_its_pair_last_and_no_other(
    inbox: PostgresInbox,
) -> None:
    await inbox.put([arrival(1, 10)])
    claim = await inbox.claim("w1", 30)
    assert claim is not None
    assert await inbox.finish(claim.pair_key, "w1", [m.id for m in claim.messages])
    async with inbox.wakeups("w1") as w1, inbox.wakeups("w2") as w2:
        await inbox.put([arrival(2, 10, "w1 answered this pair last")])
        await asyncio.wait_for(w1.wait(), PATIENCE)
        assert await not_woken(w2)  # it could only make an empty claim: the affinity is w1's
        w1.clear()
        await inbox.put([arrival(3, 20, "a pair nobody answered yet")])
        await asyncio.wait_for(asyncio.gather(w1.wait(), w2.wait()), PATIENCE)


class StoredDuringTheClaim(PostgresInbox):
    """The real inbox, where a message is stored while the loop's first claim is on its way:
    after its query found nothing, and heard (the notice reached the listener) before the
    claim returns."""

    woken: asyncio.Event
    stored = False

    @contextlib.asynccontextmanager
    async def wakeups(self, worker: str) -> AsyncIterator[asyncio.Event]:
        async with super().wakeups(worker) as event:
            self.woken = event
            yield event

    async def claim_many(
        self, worker: str, lease_seconds: float, affinity_seconds: float, limit: int
    ) -> list[Claim]:
        claims = await super().claim_many(worker, lease_seconds, affinity_seconds, limit)
        if not self.stored:
            self.stored = True
            assert claims == []
            await self.put([arrival(1, 10, "stored meanwhile")])
            await self.woken.wait()
        return claims


async def test_a_message_stored_while_an_idle_worker_claims_is_claimed_without_a_poll(
    pg_url: str,
) -> None:
    await (await PostgresStore.open(pg_url)).close()  # migrated
    inbox = StoredDuringTheClaim.over(pg_url)
    await inbox.connect()
    claimed: asyncio.Queue[Claim] = asyncio.Queue()

    async def answer(claim: Claim) -> Answered:
        await claimed.put(claim)
        return Answered(tuple(m.id for m in claim.messages))

    async def no_purge() -> None:
        return None

    loop = ClaimLoop(
        inbox,
        answer,
        Metrics("worker"),
        "w1",
        purge=no_purge,
        concurrency=4,
        lease_seconds=30,
        poll_seconds=NEVER_POLLS,
    )
    stop = asyncio.Event()
    running = asyncio.create_task(loop.run(stop))
    try:
        claim = await asyncio.wait_for(claimed.get(), PATIENCE)
        assert [m.payload["message"]["text"] for m in claim.messages] == ["stored meanwhile"]
    finally:
        stop.set()
        await asyncio.wait_for(running, PATIENCE)
        await inbox.close()
