"""Scenes with workers on PostgreSQL (issue 31, item 7), as real processes (`companion run
--role platform|worker`) on the fake Telegram API: a group is one queue whatever worker takes
it, so its people's lines are stored in arrival order and each turn is answered once."""

from __future__ import annotations

import json
from pathlib import Path

import asyncpg

from tests import pg_fixtures
from tests.fakes.telegram_api import FakeTelegram
from tests.patience import PATIENCE
from tests.scaleout_helpers import FakeChatLLM, RoleProcess, role_env, watched

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
        async with watched(processes):
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


async def test_a_worker_killed_mid_turn_is_followed_by_one_that_finishes_the_turn(
    tmp_path: Path, pg_base: str
) -> None:
    """Koldo has spoken and Maggie's call is under way when the worker is killed: its
    successor sends Maggie's line, not Koldo's again, and asks the model nothing for Koldo."""
    url = await pg_fixtures.fresh_database(pg_base)
    async with FakeTelegram() as telegram, FakeChatLLM(lambda: 0.05) as llm:
        env = role_env(
            tmp_path, url, telegram, llm, INBOX_POLL_SECONDS="0.2", INBOX_LEASE_SECONDS="3.0"
        )
        env["ADMIN_IDS"] = "telegram:1001"
        roles = ("platform", "worker")
        processes = [await RoleProcess.start(r, env, tmp_path, n) for n, r in enumerate(roles)]
        async with watched(processes):
            for process in processes:
                await process.ready()
            telegram.send_command(GROUP, 1001, "/escena", "añadir lighthouse_keeper", "supergroup")
            await telegram.wait_until(lambda: bool(group_says(telegram, "Maggie Thornton entra")))
            llm.hold_from = llm.requests + 2  # Koldo answers; Maggie's call hangs
            telegram.send_group_text(
                GROUP, 1001, "Koldo y Maggie: u1001-m0 ¿quién fue?", first_name="Ana"
            )
            await telegram.wait_until(
                lambda: (
                    bool(group_says(telegram, KOLDO_LINE)) and llm.requests >= (llm.hold_from or 0)
                )
            )
            await processes[1].kill()
            llm.hold_from = None
            llm.release.set()
            processes.append(await RoleProcess.start("worker", env, tmp_path, 2))
            await telegram.wait_until(lambda: bool(group_says(telegram, MAGGIE_LINE)))
            await processes[2].ready()
            assert (
                len(group_says(telegram, KOLDO_LINE)) == len(group_says(telegram, MAGGIE_LINE)) == 1
            )
            # Koldo's stored line was sent again by nobody and asked of the model once.
            assert sum("Koldo Arrieta" in first_line_of_system(b) for b in llm.bodies) == 1
            assert sum("Maggie Thornton" in first_line_of_system(b) for b in llm.bodies) == 2


KOLDO_LINE, MAGGIE_LINE = "Koldo Arrieta\nRe: u1001-m0", "Maggie Thornton\nRe: u1001-m0"


def group_says(telegram: FakeTelegram, opening: str) -> list[str]:
    """The group's messages that begin with `opening`."""
    return [
        str(m["text"]) for m in telegram.sent_messages(GROUP) if str(m["text"]).startswith(opening)
    ]


def first_line_of_system(body: str) -> str:
    messages = json.loads(body).get("messages", [])
    system = next((str(m.get("content")) for m in messages if m.get("role") == "system"), "")
    return system.split("\n", 1)[0]
