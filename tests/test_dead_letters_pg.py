"""Issue 28 item A2 on PostgreSQL: an update the inbox cannot store no longer stops the platform
process for everyone. Real `companion run --role platform|worker` subprocesses against the fake
Telegram, a fake LLM and a throwaway PostgreSQL; and `--role all` in this process."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import asyncpg

from bot.adapters.telegram_adapter import TelegramAdapter
from bot.app import open_app
from bot.health import Metrics
from bot.inbox.dead_letters import InboxKeeper
from bot.inbox.discord_platform import arrival_of
from memory.models import Thread
from memory.store import open_inbox, open_store
from tests import pg_fixtures
from tests.conftest import FakeClock, make_settings
from tests.fakes.anthropic_api import FakeAnthropic, Text
from tests.fakes.telegram_api import FakeTelegram
from tests.patience import PATIENCE
from tests.scaleout_helpers import FakeChatLLM, RoleProcess, role_env

pytestmark = pg_fixtures.needs_postgres

ANA, BEA, CARMEN = 4101, 4102, 4103
NOW = datetime(2026, 11, 2, 18, 30, tzinfo=UTC)


async def fetch(url: str, sql: str) -> list[asyncpg.Record]:
    connection = await asyncpg.connect(url)
    try:
        return await connection.fetch(sql)
    finally:
        await connection.close()


async def scrape(process: RoleProcess) -> str:
    async with aiohttp.ClientSession() as session:
        url = f"http://127.0.0.1:{process.health_port}/metrics"
        async with session.get(url) as response:
            return await response.text()


def refused_update(telegram: FakeTelegram, user: int, text: str) -> None:
    """A message PostgreSQL's jsonb refuses whatever its text: a number JSON parsers in
    Python accept (Infinity) and jsonb does not. Sanitising text cannot mend it."""
    queued = telegram.send_private_text(user, text)
    queued["message"]["odd"] = float("inf")  # before anything awaits: as it is polled


async def test_a_nul_and_an_unstorable_update_stop_nobody_else(
    tmp_path: Path, pg_base: str
) -> None:
    url = await pg_fixtures.fresh_database(pg_base)
    async with FakeTelegram() as telegram, FakeChatLLM(lambda: 0.0) as llm:
        env = role_env(tmp_path, url, telegram, llm, INBOX_POLL_SECONDS="0.3")
        processes: list[RoleProcess] = []
        failed = True
        try:
            for n, role in enumerate(("platform", "worker")):
                processes.append(await RoleProcess.start(role, env, tmp_path, n))
                await processes[-1].ready()
            platform = processes[0]
            telegram.send_private_text(ANA, "u1-m0 ho\x00la")  # stored sanitised
            refused_update(telegram, BEA, "u2-m0 hola")  # a dead letter
            telegram.send_private_text(CARMEN, "u3-m0 hola")  # answered after both
            await telegram.wait_for_messages(CARMEN, 1, timeout=PATIENCE)
            await telegram.wait_for_messages(ANA, 1, timeout=PATIENCE)
            metrics = await scrape(platform)
            failed = False
        finally:
            for process in processes:
                await process.kill()
                if failed:
                    print(f"---- {process.role}\n{process.output()[-4000:]}")
    assert telegram.sent_messages(ANA)[0]["text"].startswith("Re: u1-m0")
    assert telegram.sent_messages(BEA) == []
    turns = await fetch(url, "SELECT text FROM turns WHERE role = 'user' ORDER BY id")
    assert "u1-m0 hola" in [t["text"] for t in turns]
    [letter] = await fetch(url, "SELECT * FROM dead_letters")
    assert (letter["platform"], letter["platform_user_id"]) == ("telegram", str(BEA))
    assert json.loads(letter["payload"])["message"]["text"] == "u2-m0 hola"  # as sent
    assert "Infinity" in letter["payload"] and "json" in letter["error"].lower()
    assert telegram.token not in letter["error"]
    assert 'companion_dead_letters_total{role="platform"} 1' in metrics.splitlines()


async def test_role_all_on_postgresql_answers_a_message_holding_nul(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock, pg_url: str
) -> None:
    fake_anthropic.queue(Text("Dime."), Text("Aquí estoy."))
    async with FakeTelegram() as telegram:
        settings = make_settings(
            tmp_path,
            fake_anthropic,
            database_url=pg_url,
            telegram_bot_token=telegram.token,
            telegram_api_base_url=telegram.url,
        )
        async with open_app(settings, clock=clock, start_scheduler=False) as app:
            adapter = TelegramAdapter(settings, app.commands)
            await adapter.start()
            try:
                telegram.send_private_text(ANA, "ho\x00la", first_name="A\x00na")
                [first] = await telegram.wait_for_messages(ANA, 1, timeout=PATIENCE)
                telegram.send_private_text(BEA, "hola")
                [second] = await telegram.wait_for_messages(BEA, 1, timeout=PATIENCE)
            finally:
                await adapter.stop()
    assert (first["text"], second["text"]) == ("Dime.", "Aquí estoy.")
    turns = await fetch(pg_url, "SELECT text FROM turns WHERE role = 'user' ORDER BY id")
    assert [t["text"] for t in turns] == ["hola", "hola"]
    names = await fetch(pg_url, "SELECT display_name FROM users ORDER BY id")
    assert names[0]["display_name"] == "Ana"


async def test_a_scene_message_refused_is_kept_under_its_sender(pg_base: str) -> None:
    """A guild message is stored under its channel's pair (bot/inbox/discord_platform.py), which
    names no sender: a dead letter of it is still its author's, for their forget to delete."""
    url = await pg_fixtures.fresh_database(pg_base)
    store, inbox = await open_store(url), await open_inbox(url)
    try:
        keeper = InboxKeeper(inbox, store, Metrics("platform"), [], retry_seconds=0.0)
        message = {
            "id": "9", "channel_id": "7", "guild_id": "3", "author": {"id": "41"}, "type": 0,
            "content": "hola", "odd": float("inf"),  # jsonb refuses it whatever the text
        }  # fmt: skip
        assert arrival_of({"t": "MESSAGE_CREATE", "d": message}).pair_key == "discord:scene:7"
        await keeper.keep("discord", [{"t": "MESSAGE_CREATE", "d": message}], arrival_of)
        [letter] = await store.dead_letters(10)
        assert (letter.platform, letter.platform_user_id) == ("discord", "41")
    finally:
        await inbox.close()
        await store.close()


async def test_an_off_record_senders_refused_update_keeps_no_text(pg_base: str) -> None:
    """Issue 35 item 3: the platform process's letter of a sender off the record (/incognito)
    says that it failed, and whose it was, with none of the words, then and after `off`."""
    url = await pg_fixtures.fresh_database(pg_base)
    store, inbox = await open_store(url), await open_inbox(url)
    try:
        ana = await store.upsert_user("discord", "41", "Ana", NOW)
        await store.set_off_record(Thread(ana.id, "detective_bilbao", "dm"), NOW)
        keeper = InboxKeeper(inbox, store, Metrics("platform"), [], retry_seconds=0.0)
        message = {
            "id": "9", "channel_id": "7", "author": {"id": "41"}, "type": 0,
            "content": "mi clave es tortuga42", "odd": float("inf"),
        }  # fmt: skip
        await keeper.keep("discord", [{"t": "MESSAGE_CREATE", "d": message}], arrival_of)
        await store.clear_off_record(Thread(ana.id, "detective_bilbao", "dm"))
        rows = await fetch(url, "SELECT * FROM dead_letters")
        assert [(r["platform_user_id"], r["payload"]) for r in rows] == [("41", "")]
        assert "tortuga42" not in repr(dict(rows[0])) and rows[0]["error"]
    finally:
        await inbox.close()
        await store.close()


REFUSE_FIRST_INSERTS = """
CREATE SEQUENCE refusals;
CREATE TABLE refuse_limit (n int NOT NULL);
CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF nextval('refusals') <= (SELECT n FROM refuse_limit) THEN
        RAISE EXCEPTION 'refused by the test';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER refuse BEFORE INSERT ON inbox FOR EACH ROW EXECUTE FUNCTION refuse();
"""


async def test_an_update_is_dead_lettered_only_after_its_third_failed_try(pg_base: str) -> None:
    """The database refuses the first N inserts (a trigger counting on a sequence, which no
    rollback undoes): the batch's try and two of the update's own fail and the third stores
    it; when every try fails, it is tried three times, then kept as a dead letter."""
    for refused, stored in ((3, True), (1000, False)):
        url = await pg_fixtures.fresh_database(pg_base)
        store, inbox = await open_store(url), await open_inbox(url)
        connection = await asyncpg.connect(url)
        try:
            await connection.execute(REFUSE_FIRST_INSERTS)
            await connection.execute("INSERT INTO refuse_limit VALUES ($1)", refused)
            metrics = Metrics("platform")
            keeper = InboxKeeper(inbox, store, metrics, [], retry_seconds=0.0)
            message = {"id": "9", "channel_id": "7", "author": {"id": "41"}, "content": "hola"}
            await keeper.keep("discord", [{"t": "MESSAGE_CREATE", "d": message}], arrival_of)
            tries = await connection.fetchval("SELECT last_value FROM refusals")
            kept = await connection.fetchval("SELECT count(*) FROM inbox")
            assert (kept, metrics.dead_letters) == ((1, 0) if stored else (0, 1)), refused
            assert tries == 4  # the batch's, then the update's three
        finally:
            await connection.close()
            await inbox.close()
            await store.close()
