"""Budget counters on both backends (migration 0024): a reservation fits every counter or none,
reservations made at once (many tasks, two stores on one database) never hold more than the
limit, settling moves a reservation to the spend, and each notice level is claimed once."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from memory.store.postgres import PostgresStore
from memory.store.sqlite import SqliteStore

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
