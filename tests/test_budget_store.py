"""Budget counters on both backends (migration 0024): a reservation fits every counter or none,
reservations made at once (many tasks, two stores on one database) never hold more than the
limit, settling moves a reservation to the spend, and each notice level is claimed once."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import asyncpg

from memory.store.postgres import PostgresStore
from memory.store.sqlite import SqliteStore
from tests.patience import PATIENCE

DAY = "d:2026-11-02"
LIMIT = 10.0


async def _reserve_and_settle(
    store: Any, limits: list[tuple[str, str, float]], cost: float
) -> bool:
    if await store.reserve_budget(limits, 1.0) is not None:
        return False
    await asyncio.sleep(0)  # the call: others reserve meanwhile
    await store.settle_budget([(s, p) for s, p, _ in limits], 1.0, cost)
    return True


async def _spent(store: Any, scope: str) -> tuple[float, float]:
    row = next(c for c in await store.budget_counters(DAY) if c.scope == scope)
    return row.spent, row.reserved


async def test_many_reservations_at_once_never_exceed_the_limit(any_store: Any) -> None:
    limits = [("person:telegram:1", DAY, LIMIT), ("global", DAY, 100.0)]
    held = await asyncio.gather(*(any_store.reserve_budget(limits, 1.0) for _ in range(40)))
    assert held.count(None) == 10  # worst case 1.0 each: ten fit in 10.0, no more
    assert set(held) == {None, 0}  # the person's counter refused the rest
    spent, reserved = await _spent(any_store, "person:telegram:1")
    assert (spent, reserved) == (0.0, 10.0)
    # the refused ones reserved nothing on the global counter either (all or none)
    assert await _spent(any_store, "global") == (0.0, 10.0)


async def test_settling_moves_the_reservation_to_the_spend(any_store: Any) -> None:
    limits = [("person:telegram:1", DAY, 2.0)]
    assert await any_store.reserve_budget(limits, 1.5) is None
    assert await any_store.reserve_budget(limits, 1.0) == 0  # 1.5 held + 1.0 > 2.0
    after = await any_store.settle_budget([("person:telegram:1", DAY)], 1.5, 0.25)
    assert after == [0.25]
    assert await _spent(any_store, "person:telegram:1") == (0.25, 0.0)
    assert await any_store.reserve_budget(limits, 1.5) is None  # the rest is free again
    counter = (await any_store.budget_counters(DAY))[0]
    assert (counter.calls, counter.refused) == (1, 1)


async def test_a_notice_level_is_claimed_once(any_store: Any) -> None:
    await any_store.reserve_budget([("global", DAY, 1.0)], 0.1)
    claims = await asyncio.gather(*(any_store.claim_budget_notice("global", DAY, 80)
                                     for _ in range(5)))  # fmt: skip
    assert claims.count(True) == 1
    assert await any_store.claim_budget_notice("global", DAY, 100)
    assert not await any_store.claim_budget_notice("global", DAY, 100)


async def _two_stores_hammer(first: Any, second: Any) -> None:
    limits = [("community:telegram:-5", DAY, LIMIT)]
    runs = [_reserve_and_settle(store, limits, 1.0) for store in (first, second) * 30]
    done = await asyncio.gather(*runs)
    assert done.count(True) == 10
    spent, reserved = await _spent(first, "community:telegram:-5")
    assert (spent, reserved) == (LIMIT, 0.0)


async def test_two_stores_on_one_sqlite_file_never_overspend(tmp_path: Path) -> None:
    first = await SqliteStore.open(tmp_path / "budget.db")
    second = await SqliteStore.open(tmp_path / "budget.db")
    try:
        await _two_stores_hammer(first, second)
    finally:
        await first.close()
        await second.close()


async def test_two_stores_on_one_postgres_database_never_overspend(pg_url: str) -> None:
    first = await PostgresStore.open(pg_url)
    second = await PostgresStore.open(pg_url)
    try:
        await _two_stores_hammer(first, second)
    finally:
        await first.close()
        await second.close()


async def _waiting_on_locks(admin: asyncpg.Connection, count: int) -> None:
    """Until `count` statements wait on a row lock (pg_stat_activity): another process's
    state, polled within PATIENCE as the workers' tests poll theirs."""
    for _ in range(int(PATIENCE / 0.01)):
        waiting = await admin.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND datname = current_database()"
        )
        if waiting >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{count} reservations never waited on the counter's lock")


async def test_postgres_reservations_read_the_counter_after_the_lock(pg_url: str) -> None:
    """Reservations that wait while another worker settles a big call see its spend when they
    get the row: checked against the snapshot they started with, all would pass."""
    store = await PostgresStore.open(pg_url)
    admin = await asyncpg.connect(pg_url)
    limits = [("global", DAY, LIMIT)]
    try:
        assert await store.reserve_budget(limits, 1.0) is None
        settling = admin.transaction()
        await settling.start()
        await admin.execute("SELECT 1 FROM budget_counters WHERE scope = 'global' FOR UPDATE")
        waiting = [asyncio.create_task(store.reserve_budget(limits, 1.0)) for _ in range(3)]
        watcher = await asyncpg.connect(pg_url)
        try:
            await _waiting_on_locks(watcher, 3)
        finally:
            await watcher.close()
        await admin.execute(
            "UPDATE budget_counters SET reserved = 0, spent = 9.5 WHERE scope = 'global'"
        )
        await settling.commit()
        assert await asyncio.gather(*waiting) == [0, 0, 0]  # 9.5 + 1.0 > 10: none fits
        assert await _spent(store, "global") == (9.5, 0.0)
    finally:
        await admin.close()
        await store.close()
