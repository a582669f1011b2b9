"""Discord through the inbox (issue 16): real `companion run --role platform|worker`
subprocesses against the fake Discord (gateway and REST on 127.0.0.1), a fake LLM and a
throwaway PostgreSQL. The platform process stores what the bot answers and defers interactions;
workers answer through REST alone; a worker killed mid-reply has its message answered once by
another (Discord's nonce dedupes the resend); a restarted platform loses nothing it stored.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import asyncpg

from bot.config import Settings
from bot.inbox.discord_platform import addressed, discord_arrival, personal
from bot.roles import run_role
from bot.texts import text
from tests import pg_fixtures
from tests.fakes.discord_api import FakeDiscord
from tests.fault_helpers import subprocess_env, until
from tests.scaleout_helpers import FakeChatLLM, RoleProcess

pytestmark = pg_fixtures.needs_postgres

ALICE, BOB = 4242, 5353
MAGGIE = "lighthouse_keeper"
EPHEMERAL = 64


def discord_env(
    tmp_path: Path, url: str, fake: FakeDiscord, llm: FakeChatLLM, **extra: str
) -> dict[str, str]:
    return subprocess_env(
        tmp_path / "unused.db",
        DATABASE_URL=url,
        DISCORD_BOT_TOKEN=fake.token or "",
        DISCORD_API_BASE_URL=f"{fake.url}/api/v10",
        LLM_PROVIDER="openai",
        OPENAI_BASE_URL=llm.url,
        LLM_TIMEOUT_SECONDS="30",
        WINDOW_TRIGGER_TURNS="10000",
        INBOX_LEASE_SECONDS="2",
        INBOX_POLL_SECONDS="0.3",
        LOG_LEVEL="WARNING",
        **extra,
    )


async def inbox_rows(url: str) -> list[asyncpg.Record]:
    connection = await asyncpg.connect(url)
    try:
        return await connection.fetch(
            "SELECT i.id, i.update_key, i.pair_key, i.answered_at IS NOT NULL AS answered,"
            " (SELECT count(*) FROM outbox o WHERE o.inbox_id = i.id AND o.seq >= 0) AS sends"
            " FROM inbox i ORDER BY i.id"
        )
    finally:
        await connection.close()


async def rows_when(
    url: str, ready: Callable[[list[asyncpg.Record]], bool], what: str, seconds: float = 20
) -> list[asyncpg.Record]:
    """The inbox's rows once `ready` says so (another process writes them)."""
    for _ in range(int(seconds / 0.05)):
        rows = await inbox_rows(url)
        if ready(rows):
            return rows
        await asyncio.sleep(0.05)
    raise AssertionError(f"{what}; the inbox holds {[dict(r) for r in await inbox_rows(url)]}")


class Roles:
    """The processes of one test, killed at its end whatever happened."""

    def __init__(self, tmp_path: Path, env: dict[str, str]) -> None:
        self.tmp_path = tmp_path
        self.env = env
        self.processes: list[RoleProcess] = []

    async def start(self, role: str) -> RoleProcess:
        process = await RoleProcess.start(role, self.env, self.tmp_path, len(self.processes))
        self.processes.append(process)
        await process.ready()
        return process

    async def close(self, failed: bool) -> None:
        for process in self.processes:
            await process.kill()
            if failed:
                print(f"---- {process.role} {process.log.name}\n{process.output()[-4000:]}")


async def test_a_message_and_a_slash_command_are_stored_then_answered_by_a_worker(
    tmp_path: Path, pg_base: str
) -> None:
    url = await pg_fixtures.fresh_database(pg_base)
    async with FakeDiscord() as fake, FakeChatLLM(lambda: 0.05) as llm:
        shard = {"DISCORD_SHARD_ID": "0", "DISCORD_SHARD_COUNT": "1"}
        roles = Roles(tmp_path, discord_env(tmp_path, url, fake, llm, **shard))
        failed = True
        try:
            await roles.start("platform")
            await roles.start("worker")
            assert (fake.identify_payload or {}).get("shard") == [0, 1]
            assert len(fake.gateway_connections) == 1  # the worker never connects
            await fake.dm(ALICE, "u1-m0 hola")
            reply = (await fake.wait_for_dms(ALICE))[0]
            assert (reply.content or "").startswith("Re: u1-m0")
            assert reply.message["message_reference"]["message_id"]  # a reply to the message
            assert reply.payload["enforce_nonce"] and reply.payload["nonce"]

            # The deferral lands after the worker's answer is ready: the worker waits for it.
            fake.rest.callback_delay = 1.0
            interaction = await fake.slash_command("memoria", user_id=ALICE, subcommand="ver")
            deferred = await fake.wait_for_interaction_response(interaction)
            assert deferred.type == 5 and deferred.flags & EPHEMERAL  # personal, in a guild
            answer = (await fake.wait_for_followups(interaction))[0]
            assert (answer.method, answer.target) == ("PATCH", "@original")
            assert answer.content
            fake.rest.callback_delay = 0.0

            await fake.guild_message(BOB, "u2-m0 charla entre humanos")  # not for the bot
            await fake.guild_message(BOB, "u2-m1 oye", mention_bot=True)
            # A guild channel is a scene: the character speaks through its webhook.
            in_guild = await fake.webhooks.wait_for_messages(fake.channel_id)
            assert (in_guild[0].content or "").startswith("Re: u2-m1")
            rows = await rows_when(url, lambda rs: all(r["answered"] for r in rs), "answered")
            failed = False
        finally:
            await roles.close(failed)
    assert fake.errors == [] and fake.unknown_routes == []
    # Stored: the DM, the command, the mention (never the chatter); each answered, recorded.
    assert [r["update_key"][0] for r in rows] == ["m", "i", "m"]
    assert all(r["answered"] and r["sends"] == 1 for r in rows)
    assert rows[0]["pair_key"] == f"discord:{ALICE}:{fake.dm_channel_id(ALICE)}"
    assert rows[2]["pair_key"] == f"discord:scene:{fake.channel_id}"  # the scene's one queue


async def test_buttons_and_autocomplete_are_answered_by_a_worker(
    tmp_path: Path, pg_base: str
) -> None:
    """A button press on a DM panel is deferred by the platform as an update, and the worker's
    answer replaces the panel; an autocomplete (which cannot be deferred) is answered by the
    worker directly."""
    url = await pg_fixtures.fresh_database(pg_base)
    async with FakeDiscord() as fake, FakeChatLLM(lambda: 0.05) as llm:
        roles = Roles(tmp_path, discord_env(tmp_path, url, fake, llm))
        failed = True
        try:
            await roles.start("platform")
            await roles.start("worker")
            listing = await fake.slash_command(
                "personaje", user_id=ALICE, guild=False, subcommand="lista"
            )
            panel = (await fake.wait_for_followups(listing))[0].message
            assert panel is not None
            ids = [c["custom_id"] for row in panel["components"] for c in row["components"]]
            assert f"char:{MAGGIE}" in ids
            pressed = await fake.press_button(ALICE, panel, f"char:{MAGGIE}")
            deferred = await fake.wait_for_interaction_response(pressed)
            assert deferred.type == 6  # a DM panel: the answer replaces it
            switched = (await fake.wait_for_followups(pressed))[0]
            assert (switched.method, switched.target) == ("PATCH", "@original")
            assert switched.message is not None and switched.message["id"] == panel["id"]
            assert switched.content == text("es", "switched", name="Maggie Thornton")
            assert switched.message["components"] == []

            suggest = await autocomplete(fake, ALICE, "light")
            choices = await fake.wait_for_interaction_response(suggest)
            assert choices.type == 8
            assert choices.data["choices"] == [
                {"name": f"Maggie Thornton ({MAGGIE})", "value": MAGGIE}
            ]
            failed = False
        finally:
            await roles.close(failed)
    assert fake.errors == []


async def autocomplete(fake: FakeDiscord, user_id: int, typed: str) -> int:
    """`/personaje cambiar id:<typed>` being typed in a DM; the interaction's id."""
    state = fake.world.new_interaction(fake.dm_channel_id(user_id), None)
    focused = {"name": "id", "type": 3, "value": typed, "focused": True}
    data = {
        "id": "1",
        "name": "personaje",
        "type": 1,
        "options": [{"name": "cambiar", "type": 1, "options": [focused]}],
    }
    payload = fake.world.interaction_payload(state, fake.world.user(user_id), data)
    await fake.dispatch("INTERACTION_CREATE", {**payload, "type": 4})
    return state.id


async def test_a_worker_killed_mid_reply_is_followed_by_one_that_sends_it_once(
    tmp_path: Path, pg_base: str
) -> None:
    """The first worker's reply reaches Discord, which holds its answer until the worker is
    SIGKILLed: nothing is recorded. The next worker finds the message's turn and its stored
    reply (turns.source_key), sends that reply again with no LLM call and the same nonce, and
    Discord returns the first message instead of making a second."""
    url = await pg_fixtures.fresh_database(pg_base)
    async with FakeDiscord() as fake, FakeChatLLM(lambda: 0.05) as llm:
        roles = Roles(tmp_path, discord_env(tmp_path, url, fake, llm))
        failed = True
        try:
            await roles.start("platform")
            first = await roles.start("worker")
            fake.rest.send_gate = gate = asyncio.Event()
            await fake.dm(ALICE, "u1-m0 hola")
            await fake.wait_for_dms(ALICE)
            await first.kill()
            fake.rest.send_gate = None
            gate.set()
            await roles.start("worker")
            await until(lambda: bool(fake.rest.deduplicated), 30, "the reply sent again")
            rows = await rows_when(url, lambda rs: all(r["answered"] for r in rs), "answered")
            failed = False
        finally:
            await roles.close(failed)
    assert llm.requests == 1  # the stored reply is sent again, not generated again
    assert len(fake.sent_dms(ALICE)) == 1  # sent twice, on the user's screen once
    assert fake.rest.deduplicated[0].id == fake.sent_dms(ALICE)[0].id
    assert [(r["answered"], r["sends"]) for r in rows] == [(True, 1)]


async def test_a_scene_is_one_queue_answered_by_workers_through_webhooks(
    tmp_path: Path, pg_base: str
) -> None:
    """Two people in one channel: one pair, the channel's, answered by two workers; each line
    goes through the character's webhook and is recorded as its message's send; a reply to a
    line (no mention) and, once an admin added a character, its name alone are stored and
    heard; chatter is not stored."""
    url = await pg_fixtures.fresh_database(pg_base)
    async with FakeDiscord() as fake, FakeChatLLM(lambda: 0.05) as llm:
        env = discord_env(tmp_path, url, fake, llm, ADMIN_IDS=f"discord:{ALICE}")
        roles = Roles(tmp_path, env)
        failed = True
        try:
            await roles.start("platform")
            await roles.start("worker")
            await roles.start("worker")
            await fake.guild_message(ALICE, "u1-m0 hola", mention_bot=True)
            [koldo] = await fake.webhooks.wait_for_messages(fake.channel_id)
            assert koldo.message["author"]["username"] == "Koldo Arrieta"
            assert (koldo.content or "").startswith("Re: u1-m0")
            await fake.guild_message(BOB, "u2-m1 ¿y eso?", reply_to=koldo.id)  # no mention
            second = (await fake.webhooks.wait_for_messages(fake.channel_id, 2))[1]
            assert (second.content or "").startswith("Re: u2-m1")
            await fake.guild_message(BOB, "u2-m2 charla entre humanos")  # nobody named
            added = await fake.slash_command(
                "escena-admin", {"id": MAGGIE}, user_id=ALICE, subcommand="añadir"
            )
            assert "Maggie Thornton" in ((await fake.wait_for_followups(added))[0].content or "")
            await fake.guild_message(BOB, "u2-m3 Maggie, ¿qué tal?")  # her name alone
            third = (await fake.webhooks.wait_for_messages(fake.channel_id, 3))[2]
            assert third.message["author"]["username"] == "Maggie Thornton"
            rows = await rows_when(url, lambda rs: all(r["answered"] for r in rs), "answered")
            failed = False
        finally:
            await roles.close(failed)
    assert fake.errors == [] and fake.unknown_routes == []
    scene = f"discord:scene:{fake.channel_id}"
    chat = [r for r in rows if r["update_key"].startswith("m")]
    assert [r["pair_key"] for r in chat] == [scene] * 3  # the chatter was never stored
    assert all(r["sends"] == 1 for r in chat)  # each line recorded as its message's send
    assert len(fake.webhooks.messages(fake.channel_id)) == 3 and llm.requests == 3


async def test_a_restarted_platform_loses_nothing_it_stored(tmp_path: Path, pg_base: str) -> None:
    url = await pg_fixtures.fresh_database(pg_base)
    async with FakeDiscord() as fake, FakeChatLLM(lambda: 0.05) as llm:
        roles = Roles(tmp_path, discord_env(tmp_path, url, fake, llm))
        failed = True
        try:
            platform = await roles.start("platform")
            await fake.dm(ALICE, "u1-m0 uno")
            await rows_when(url, lambda rows: len(rows) == 1, "the first message stored")
            await platform.kill()  # no worker has seen it yet
            again = await roles.start("platform")
            await fake.dm(ALICE, "u1-m1 dos")
            await rows_when(url, lambda rows: len(rows) == 2, "the second message stored")
            await roles.start("worker")

            def replies() -> list[str]:
                return [m.content or "" for m in fake.sent_dms(ALICE)]

            await until(lambda: any("u1-m1" in r for r in replies()), 20, "m1 answered")
            rows = await rows_when(url, lambda rs: all(r["answered"] for r in rs), "answered")
            assert await again.stop() == 0  # SIGTERM: a clean stop
            failed = False
        finally:
            await roles.close(failed)
    # Both answered, in order, once (one reply when they make one burst, else one each).
    assert replies() in (["Re: u1-m1 entendido"], ["Re: u1-m0 entendido", "Re: u1-m1 entendido"])
    assert [r["answered"] for r in rows] == [True, True]


def test_what_the_platform_stores_and_under_which_pair() -> None:
    bot = 99
    dm = {"id": "1", "channel_id": "7", "author": {"id": "5"}, "type": 0, "content": "hola"}
    guild = {**dm, "guild_id": "3"}
    assert addressed(dm, bot, None) is True
    assert addressed({**dm, "author": {"id": "6", "bot": True}}, bot, None) is False
    assert addressed({**dm, "type": 7}, bot, None) is False  # a join, not chat
    assert addressed({**dm, "webhook_id": "8"}, bot, None) is False
    assert addressed(guild, bot, None) is None  # only a channel binding would address it
    assert addressed({**guild, "mentions": [{"id": "99"}]}, bot, None) is True
    assert addressed({**guild, "mention_roles": ["4"]}, bot, 4) is True
    assert addressed({**guild, "referenced_message": {"author": {"id": "99"}}}, bot, None)
    assert discord_arrival("MESSAGE_CREATE", dm).pair_key == "discord:5:7"
    # A guild's chat is its channel's scene: one pair for everyone in it, the sender kept apart.
    in_scene = discord_arrival("MESSAGE_CREATE", guild)
    assert (in_scene.pair_key, in_scene.sender) == ("discord:scene:7", "5")
    photo = {**guild, "attachments": [{"id": "2", "content_type": "image/png"}]}
    assert discord_arrival("MESSAGE_CREATE", photo).pair_key == "discord:5:7"  # per user
    command = {"id": "11", "type": 2, "channel_id": "7", "member": {"user": {"id": "5"}}}
    stored = discord_arrival("INTERACTION_CREATE", command)
    assert (stored.update_key, stored.pair_key) == ("i11", "discord:5:7")
    suggest = discord_arrival("INTERACTION_CREATE", {**command, "type": 4})
    assert suggest.pair_key == "discord:5:7:autocomplete"  # waits behind no conversation
    assert personal({"name": "memoria", "options": [{"name": "ver", "type": 1}]})
    bind = {"name": "personaje-admin", "options": [{"name": "vincular", "type": 1}]}
    assert not personal(bind)  # public: answered visibly in the channel


async def test_the_inbox_roles_need_a_platform_token(tmp_path: Path, capsys: object) -> None:
    async with FakeChatLLM(lambda: 0.0) as llm:
        env = {"llm_provider": "openai", "openai_base_url": llm.url}
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        database_path=tmp_path / "x.db",
        database_url="postgresql://nobody@127.0.0.1:1/none",
        **env,
    )
    for role in ("platform", "worker"):
        assert await run_role(settings, role, asyncio.Event()) == 2
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert "TELEGRAM_BOT_TOKEN" in err and "DISCORD_BOT_TOKEN" in err
