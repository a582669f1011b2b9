"""Off the record with workers on PostgreSQL (issue 28, A4), as real processes (`companion run
--role platform|worker`) on the fake Telegram API: an off-record message answered through the
inbox leaves its row (deleted, not blanked, and the inbox VACUUMed as after a forget), and a
worker killed while the user is off the record does not end it silently: its successor refuses
the next message unstored, with the notice."""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg

from tests import pg_fixtures
from tests.fakes.telegram_api import FakeTelegram
from tests.patience import PATIENCE
from tests.scaleout_helpers import FakeChatLLM, RoleProcess, role_env, watched

pytestmark = pg_fixtures.needs_postgres

ANA = 1001
SECRET = "Zarautz5521tapir"
AFTER = "Orio7730lince"
EXPIRED = "terminó tras un rato sin mensajes"  # bot/texts.py, incognito_expired (es)


async def fetch(url: str, sql: str) -> list[asyncpg.Record]:
    connection = await asyncpg.connect(url)
    try:
        return await connection.fetch(sql)
    finally:
        await connection.close()


async def holding(url: str, needle: str) -> list[str]:
    """The tables with a row whose text holds the needle."""
    tables = [
        r["tablename"]
        for r in await fetch(url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    ]
    found = []
    for table in tables:
        rows = await fetch(url, f"SELECT 1 FROM \"{table}\" t WHERE t::text ILIKE '%{needle}%'")
        if rows:
            found.append(table)
    return found


async def value(url: str, sql: str) -> int:
    return int((await fetch(url, sql))[0][0])


async def until_value(url: str, sql: str, wanted: int, seconds: float = 30) -> None:
    """Wait for another process's write: `sql` counts `wanted`."""
    for _ in range(int(seconds / 0.05)):
        if await value(url, sql) == wanted:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{sql} is {await value(url, sql)}, not {wanted}, after {seconds}s")


OWED = "SELECT count(*) FROM pending_purges"


async def inbox_vacuumed(url: str) -> bool:
    rows = await fetch(
        url,
        "SELECT vacuum_count + autovacuum_count AS n FROM pg_stat_user_tables"
        " WHERE relname = 'inbox'",
    )
    return bool(rows) and int(rows[0]["n"]) > 0


async def texts_once(telegram: FakeTelegram, count: int) -> list[str]:
    await telegram.wait_for_messages(ANA, count, timeout=PATIENCE)
    return [str(m["text"]) for m in telegram.sent_messages(ANA)]


async def test_off_record_words_leave_the_inbox_and_a_dead_worker_ends_nothing_silently(
    tmp_path: Path, pg_base: str
) -> None:
    url = await pg_fixtures.fresh_database(pg_base)
    async with FakeTelegram() as telegram, FakeChatLLM(lambda: 0.0) as llm:
        env = role_env(
            tmp_path, url, telegram, llm, INBOX_LEASE_SECONDS="2", INBOX_POLL_SECONDS="0.3"
        )
        processes = [await RoleProcess.start(r, env, tmp_path, n)
                     for n, r in enumerate(("platform", "worker"))]  # fmt: skip
        async with watched(processes):
            for process in processes:
                await process.ready()
            telegram.send_private_text(ANA, "Hola u1-m0", first_name="Ana")
            await texts_once(telegram, 1)
            telegram.send_command(ANA, ANA, "/incognito")
            assert (await texts_once(telegram, 2))[-1].startswith("Conversación fuera")
            telegram.send_private_text(ANA, f"Secreto u1-m1 {SECRET}", first_name="Ana")
            assert (await texts_once(telegram, 3))[-1].startswith("Re: u1-m1")
            # The answered off-record row is gone (the other two are kept, blank, to recognise
            # a redelivery), and so is its dead tuple: the purge ran, as after a forget.
            await until_value(url, "SELECT count(*) FROM inbox WHERE answered_at IS NULL", 0)
            assert await value(url, "SELECT count(*) FROM inbox") == 2
            await until_value(url, OWED, 0)
            assert await holding(url, SECRET) == []
            assert await inbox_vacuumed(url)
            # A worker's death, while the user is off the record: its successor refuses.
            await processes[1].kill()
            processes.append(await RoleProcess.start("worker", env, tmp_path, 2))
            await processes[-1].ready()
            requests = llm.requests
            telegram.send_private_text(ANA, f"Sigo u1-m2 {AFTER}", first_name="Ana")
            assert EXPIRED in (await texts_once(telegram, 4))[-1]
            assert llm.requests == requests
            await until_value(url, "SELECT count(*) FROM inbox WHERE answered_at IS NULL", 0)
            assert await value(url, "SELECT count(*) FROM inbox") == 2  # refused: deleted too
            await until_value(url, OWED, 0)
            assert await holding(url, AFTER) == []
            assert await holding(url, SECRET) == []
