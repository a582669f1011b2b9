"""The durable inbox's tables on a real PostgreSQL (memory/store/postgres/inbox.py): claims are
exclusive per pair and in arrival order, leases run out, redeliveries are one row, a recorded
send marks a message answered, the sweep's lock is held by one process."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
import pytest

from bot.inbox.telegram_platform import telegram_arrival
from memory.models import Thread
from memory.store.inbox import DONE_SEQ, SWEEP_LOCK, Arrival
from memory.store.postgres import PostgresStore
from memory.store.postgres.inbox import PostgresInbox
from tests import pg_fixtures

pytestmark = pg_fixtures.needs_postgres


@pytest.fixture
async def inbox(pg_url: str) -> AsyncIterator[PostgresInbox]:
    store = await PostgresStore.open(pg_url)  # the template is migrated; this checks 0012 ran
    await store.close()
    opened = await PostgresInbox.open(pg_url)
    try:
        yield opened
    finally:
        await opened.close()


def arrival(update_id: int, user: int, text: str = "hola") -> Arrival:
    return telegram_arrival(
        {
            "update_id": update_id,
            "message": {
                "message_id": update_id,
                "from": {"id": user, "is_bot": False, "first_name": "U"},
                "chat": {"id": user, "type": "private"},
                "date": 0,
                "text": text,
            },
        }
    )


async def test_a_redelivered_update_is_stored_once(inbox: PostgresInbox) -> None:
    assert await inbox.put([arrival(1, 10), arrival(2, 10)]) == 2
    assert await inbox.put([arrival(2, 10), arrival(3, 10)]) == 1  # 2 came again
    assert (await inbox.stats()).pending == 3


async def test_claims_take_a_whole_pair_in_order_and_never_the_same_pair(
    inbox: PostgresInbox,
) -> None:
    await inbox.put([arrival(1, 10, "a"), arrival(2, 20, "b"), arrival(3, 10, "c")])
    first, second, third = await asyncio.gather(
        inbox.claim("w1", 30), inbox.claim("w2", 30), inbox.claim("w3", 30)
    )
    claims = [c for c in (first, second, third) if c is not None]
    assert sorted(c.pair_key for c in claims) == ["telegram:10:10", "telegram:20:20"]
    by_pair = {c.pair_key: c for c in claims}
    texts = [m.payload["message"]["text"] for m in by_pair["telegram:10:10"].messages]
    assert texts == ["a", "c"]  # the pair's pending messages, oldest first
    # A message arriving for a held pair waits for it to be let go.
    await inbox.put([arrival(4, 10, "d")])
    assert await inbox.claim("w4", 30) is None


async def test_a_finished_pair_is_answered_and_free(inbox: PostgresInbox) -> None:
    await inbox.put([arrival(1, 10)])
    claim = await inbox.claim("w1", 30)
    assert claim is not None
    assert await inbox.finish(claim.pair_key, "w1", [m.id for m in claim.messages])
    await inbox.put([arrival(2, 10, "again")])
    again = await inbox.claim("w2", 30)
    assert again is not None and again.moved  # w1 answered this user last
    assert [m.payload["message"]["text"] for m in again.messages] == ["again"]
    stats = await inbox.stats()
    assert (stats.pending, stats.answered, stats.claimed_pairs) == (1, 1, 1)


async def test_a_lease_runs_out_and_the_next_worker_answers(inbox: PostgresInbox) -> None:
    await inbox.put([arrival(1, 10)])
    # A lease long enough that a busy machine cannot end it between the two claims.
    dead = await inbox.claim("dead", 2.0)
    assert dead is not None
    assert await inbox.claim("w2", 30) is None  # held
    await asyncio.sleep(2.1)
    taken = await inbox.claim("w2", 30)
    assert taken is not None and taken.moved
    assert taken.messages[0].attempts == 2
    # The dead worker's late finish changes nothing: the pair is another's now.
    assert not await inbox.finish(dead.pair_key, "dead", [m.id for m in dead.messages])
    assert not await inbox.extend(dead.pair_key, "dead", 30)
    assert (await inbox.stats()).pending == 1


async def test_a_recorded_send_is_seen_by_the_next_claim(inbox: PostgresInbox) -> None:
    await inbox.put([arrival(1, 10), arrival(2, 10)])
    claim = await inbox.claim("w1", 2.0)
    assert claim is not None
    assert await inbox.record_send(claim.messages[1].id, 0, "555", "w1")
    # Idempotent, and says the send was recorded already (a second worker made it too).
    assert not await inbox.record_send(claim.messages[1].id, 0, "555", "w1")
    await asyncio.sleep(2.1)  # w1 dies before it marks them
    again = await inbox.claim("w2", 30)
    assert again is not None
    assert [m.sent for m in again.messages] == [False, True]
    assert [(m.sends, m.done) for m in again.messages] == [({}, False), ({0: "555"}, False)]
    # The end of its handler is recorded too, and is not a send: the message is whole.
    await inbox.record_send(again.messages[1].id, 7, "556", "w2")
    await inbox.record_send(again.messages[1].id, DONE_SEQ, "", "w2")
    assert not await inbox.finish(again.pair_key, "nobody", [])  # still w2's
    assert await inbox.finish(again.pair_key, "w2", [])  # let go, nothing marked answered
    third = await inbox.claim("w3", 30)
    assert third is not None
    assert [(m.sends, m.done) for m in third.messages][1] == ({0: "555", 7: "556"}, True)


async def test_the_sweep_lock_is_held_by_one_process_at_a_time(
    inbox: PostgresInbox, pg_url: str
) -> None:
    other = await PostgresInbox.open(pg_url)
    try:
        async with inbox.exclusive(SWEEP_LOCK) as mine, other.exclusive(SWEEP_LOCK) as theirs:
            assert (mine, theirs) == (True, False)
        async with other.exclusive(SWEEP_LOCK) as theirs:
            assert theirs
    finally:
        await other.close()


async def test_answered_messages_are_pruned_past_the_horizon(inbox: PostgresInbox) -> None:
    await inbox.put([arrival(1, 10), arrival(2, 20)])
    claim = await inbox.claim("w1", 30)
    assert claim is not None
    await inbox.record_send(claim.messages[0].id, 0, "1", "w1")
    await inbox.finish(claim.pair_key, "w1", [m.id for m in claim.messages])
    await asyncio.sleep(0.05)
    assert await inbox.prune(0.01) == 1  # the pending one stays
    assert (await inbox.stats()).pending == 1


async def test_listeners_wake_when_a_message_is_stored(inbox: PostgresInbox) -> None:
    async with inbox.wakeups("w1") as woken:
        assert not woken.is_set()
        await inbox.put([arrival(1, 10)])
        await asyncio.wait_for(woken.wait(), 5)


def test_a_callback_query_has_the_pair_of_its_presser() -> None:
    pressed = telegram_arrival(
        {
            "update_id": 9,
            "callback_query": {
                "id": "1",
                "from": {"id": 42},
                "message": {"message_id": 3, "chat": {"id": -100}},
                "data": "char:x",
            },
        }
    )
    assert (pressed.update_key, pressed.pair_key) == ("9", "telegram:42:-100")


def test_a_groups_messages_share_their_scenes_pair_and_keep_their_sender() -> None:
    """A group is one scene, one queue: its people's messages are claimed together and answered
    one turn at a time, in arrival order; a private chat stays its user's own pair."""

    def message(update_id: int, user: int, chat: int, kind: str) -> Arrival:
        body = {"message_id": update_id, "from": {"id": user}, "text": "hola",
                "chat": {"id": chat, "type": kind}}  # fmt: skip
        return telegram_arrival({"update_id": update_id, "message": body})

    ana, bea = message(1, 42, -100, "supergroup"), message(2, 43, -100, "group")
    assert ana.pair_key == bea.pair_key == "telegram:scene:-100"
    assert (ana.sender, bea.sender) == ("42", "43")  # a forget still finds their dead letters
    assert message(3, 42, 42, "private").pair_key == "telegram:42:42"


async def test_a_conversation_is_extracted_by_one_worker_and_once(pg_url: str) -> None:
    store = await PostgresStore.open(pg_url)
    one, two = await PostgresInbox.open(pg_url), await PostgresInbox.open(pg_url)
    try:
        now = datetime.now(UTC)
        user = await store.upsert_user("telegram", "1", "Ane", now)
        conversation = await store.start_conversation(Thread(user.id, "detective", "dm:1"), now)
        await store.end_conversation(conversation.id, "inactivity", now)
        async with one.extraction_claim(conversation.id) as first:
            async with two.extraction_claim(conversation.id) as second:
                assert (first, second) == (True, False)
            await store.mark_extracted(conversation.id, "done", now)
        async with two.extraction_claim(conversation.id) as again:
            assert not again  # done: the other worker's catch-up skips it
    finally:
        await one.close()
        await two.close()
        await store.close()


async def test_a_pair_waits_a_moment_for_the_worker_holding_its_session(
    inbox: PostgresInbox,
) -> None:
    await inbox.put([arrival(1, 10)])
    claim = await inbox.claim("w1", 30)
    assert claim is not None
    await inbox.finish(claim.pair_key, "w1", [m.id for m in claim.messages])
    await inbox.put([arrival(2, 10)])
    assert await inbox.claim("w2", 30, affinity_seconds=10) is None  # left to w1 a while
    again = await inbox.claim("w1", 30, affinity_seconds=10)
    assert again is not None and not again.moved
    await inbox.finish(again.pair_key, "w1", [m.id for m in again.messages])
    await inbox.put([arrival(3, 10)])
    await asyncio.sleep(0.1)
    stolen = await inbox.claim("w2", 30, affinity_seconds=0.05)  # w1 is busy or dead
    assert stolen is not None and stolen.moved


async def test_one_query_claims_several_pairs_oldest_first(inbox: PostgresInbox) -> None:
    await inbox.put([arrival(1, 10), arrival(2, 20), arrival(3, 10), arrival(4, 30)])
    claims = await inbox.claim_many("w1", 30, 0.0, 3)
    # The three oldest pending messages belong to two pairs: both taken, whole.
    assert {c.pair_key: len(c.messages) for c in claims} == {
        "telegram:10:10": 2,
        "telegram:20:20": 1,
    }
    rest = await inbox.claim_many("w2", 30, 0.0, 10)
    assert [c.pair_key for c in rest] == ["telegram:30:30"]


async def test_an_answered_message_keeps_no_text(inbox: PostgresInbox, pg_url: str) -> None:
    """Once answered, the text lives only as a turn, where a forget reaches it; the inbox row
    keeps no more than what recognises a redelivery."""
    await inbox.put([arrival(1, 10, "mi secreto CANARY-inbox")])
    claim = await inbox.claim("w1", 30)
    assert claim is not None
    assert await inbox.finish(claim.pair_key, "w1", [m.id for m in claim.messages])
    connection = await asyncpg.connect(pg_url)
    try:
        texts = [row[0] for row in await connection.fetch("SELECT payload::text FROM inbox")]
    finally:
        await connection.close()
    assert texts and not any("CANARY" in text for text in texts)
    assert await inbox.put([arrival(1, 10, "mi secreto CANARY-inbox")]) == 0  # still a redelivery
