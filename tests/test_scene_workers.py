"""Scenes with workers on PostgreSQL (issue 31, item 7), as real processes (`companion run
--role platform|worker`) on the fake Telegram API: a group is one queue whatever worker takes
it, so its people's lines are stored in arrival order and each turn is answered once."""

from __future__ import annotations

from pathlib import Path

import asyncpg

from tests import pg_fixtures
from tests.fakes.telegram_api import FakeTelegram
from tests.patience import PATIENCE
from tests.scaleout_helpers import FakeChatLLM, RoleProcess, role_env

pytestmark = pg_fixtures.needs_postgres

GROUP = -100_999
PEOPLE = {1001: "Ana", 1002: "Bea", 1003: "Bob"}


async def rows(url: str, sql: str) -> list[asyncpg.Record]:
    connection = await asyncpg.connect(url)
    try:
        return await connection.fetch(sql)
    finally:
        await connection.close()


async def stored_lines(url: str) -> list[str]:
    """The people's lines of the scene, in the order its one character's copy holds them."""
    found = await rows(
        url,
        "SELECT text FROM turns WHERE scope LIKE 'scene:%' AND speaker_id IS NOT NULL ORDER BY id",
    )
    return [r["text"] for r in found]


async def test_a_scenes_messages_are_one_queue_across_two_workers(
    tmp_path: Path, pg_base: str
) -> None:
    url = await pg_fixtures.fresh_database(pg_base)
    async with FakeTelegram() as telegram, FakeChatLLM(lambda: 0.2) as llm:
        env = role_env(tmp_path, url, telegram, llm, INBOX_POLL_SECONDS="0.2")
        roles = ("platform", "worker", "worker")
        processes = [await RoleProcess.start(r, env, tmp_path, n) for n, r in enumerate(roles)]
        try:
            for process in processes:
                await process.ready()
            said = []
            for index in range(6):  # three people, one after the other, faster than replies
                person = list(PEOPLE)[index % 3]
                said.append(f"u{index % 3}-m{index} hola")
                telegram.send_group_text(
                    GROUP, person, said[-1], mention_bot=True, first_name=PEOPLE[person]
                )
            await telegram.wait_until(
                lambda: any("-m5 " in str(m["text"]) for m in telegram.sent_messages(GROUP)),
                timeout=PATIENCE,
            )
            answered = [str(m["text"]) for m in telegram.sent_messages(GROUP)]
            assert await stored_lines(url) == said  # in arrival order, whoever took them
            # Each turn answered once, on its newest message, by the scene's one character.
            assert len(answered) == len(set(answered)) and len(answered) <= 6
            assert all(a.startswith("Koldo Arrieta\nRe: ") for a in answered)
        except BaseException:
            for process in processes:
                print(f"---- {process.role} {process.log.name}\n{process.output()[-3000:]}")
            raise
        finally:
            for process in processes:
                await process.kill()
