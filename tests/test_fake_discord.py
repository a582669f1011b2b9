"""The real discord.py, unmodified, against the fake Discord in tests/fakes/discord_api.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import discord
import pytest
from discord import app_commands
from discord.ext import commands

from tests.fakes.discord_api import FakeAttachment, FakeDiscord, point_discord_at
from tests.patience import PATIENCE

ALICE, OTHER_BOT = 4242, 5151
EPHEMERAL = 64


@dataclass
class Seen:
    """What the bot's own handlers observed, for assertions from the discord.py side."""

    messages: list[discord.Message] = field(default_factory=list)
    ignored_bots: list[discord.Message] = field(default_factory=list)
    attachment_bytes: list[bytes] = field(default_factory=list)


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as fake:
        restore = point_discord_at(fake.url)
        try:
            yield fake
        finally:
            restore()


def build_memory_commands(seen: Seen) -> app_commands.Group:
    """/memory notes add <text> (group > subgroup > command) and /memory forget."""
    memory = app_commands.Group(name="memory", description="What the companion remembers")
    notes = app_commands.Group(name="notes", description="Notes", parent=memory)

    @notes.command(name="add", description="Remember a note")
    async def add(interaction: discord.Interaction, text: str) -> None:
        await interaction.response.send_message(f"noted: {text}", ephemeral=True)
        await interaction.followup.send("saved to memory", ephemeral=True)

    @memory.command(name="forget", description="Forget everything")
    async def forget(interaction: discord.Interaction) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        await interaction.edit_original_response(content="forgotten")

    return memory


def default_intents() -> discord.Intents:
    intents = discord.Intents.none()
    intents.guilds = intents.guild_messages = intents.dm_messages = True
    intents.message_content = True
    return intents


def build_bot(
    fake: FakeDiscord, seen: Seen, intents: discord.Intents | None = None
) -> commands.Bot:
    intents = intents or default_intents()
    # guild_ready_timeout: discord.py waits this long after the last GUILD_CREATE before
    # on_ready (default 2 s); the fake sends its only guild at once, so waiting is pointless.
    bot = commands.Bot(command_prefix="!", intents=intents, guild_ready_timeout=0.05)
    bot.tree.add_command(build_memory_commands(seen), guild=discord.Object(fake.guild_id))

    @bot.tree.command(name="ping", description="Global command")
    async def ping(interaction: discord.Interaction) -> None:
        await interaction.response.send_message("pong")

    @bot.event
    async def on_message(message: discord.Message) -> None:
        if message.author.bot:
            seen.ignored_bots.append(message)
            return
        seen.messages.append(message)
        seen.attachment_bytes.extend([await a.read() for a in message.attachments])
        replying_to_bot = (
            isinstance(message.reference and message.reference.resolved, discord.Message)
            and message.reference.resolved.author == bot.user  # type: ignore[union-attr]
        )
        if message.guild and bot.user not in message.mentions and not replying_to_bot:
            return
        async with message.channel.typing():
            await message.reply(f"echo: {message.clean_content}", mention_author=False)

    return bot


@asynccontextmanager
async def running(bot: commands.Bot, fake: FakeDiscord) -> AsyncIterator[None]:
    """Start the bot as an application would and always close it."""
    start = asyncio.create_task(bot.start(fake.token or ""))
    ready = asyncio.create_task(bot.wait_until_ready())
    try:
        done, _ = await asyncio.wait({start, ready}, timeout=5, return_when=asyncio.FIRST_COMPLETED)
        if start in done:
            start.result()  # re-raises why start() ended early
        assert ready in done, "bot never became ready"
        yield
    finally:
        ready.cancel()
        await bot.close()
        await asyncio.wait_for(start, timeout=PATIENCE)


@pytest.fixture
async def bot(fake: FakeDiscord) -> AsyncIterator[tuple[commands.Bot, Seen]]:
    seen = Seen()
    client = build_bot(fake, seen)
    async with running(client, fake):
        yield client, seen


async def test_connects_and_becomes_ready(
    fake: FakeDiscord, bot: tuple[commands.Bot, Seen]
) -> None:
    client, _ = bot
    assert client.user is not None and client.user.id == fake.bot_user.id
    assert client.application_id == fake.application_id
    guild = client.get_guild(fake.guild_id)
    assert guild is not None and not guild.unavailable
    assert isinstance(guild.get_channel(fake.channel_id), discord.TextChannel)
    assert guild.me is not None
    identify = fake.identify_payload
    assert identify is not None and identify["token"] == fake.token
    assert identify["intents"] == client.intents.value
    # zlib-stream was negotiated, so the frames discord.py decoded were compressed ones.
    connection = fake.gateway_connections[-1]
    assert connection.query["compress"] == "zlib-stream"
    assert any(frame["op"] == 1 for frame in connection.received)  # heartbeat, ACKed
    assert fake.unknown_routes == []


async def test_auto_sharded_client_uses_gateway_bot(fake: FakeDiscord) -> None:
    client = discord.AutoShardedClient(intents=default_intents(), guild_ready_timeout=0.05)
    start = asyncio.create_task(client.start(fake.token or ""))
    try:
        await asyncio.wait_for(client.wait_until_ready(), timeout=PATIENCE)
        assert client.shard_count == 1 and client.get_guild(fake.guild_id) is not None
    finally:
        await client.close()
        await asyncio.wait_for(start, timeout=PATIENCE)
    assert any(r.path == "/api/v10/gateway/bot" for r in fake.requests)
    assert fake.identify_payload is not None and fake.identify_payload["shard"] == [0, 1]


async def test_dm_round_trip(fake: FakeDiscord, bot: tuple[commands.Bot, Seen]) -> None:
    _, seen = bot
    sent = await fake.dm(ALICE, "hello there", username="alice")
    [reply] = await fake.wait_for_dms(ALICE)
    assert reply.content == "echo: hello there"
    assert reply.message_reference is not None
    assert int(reply.message_reference["message_id"]) == int(sent["id"])
    assert reply.allowed_mentions is not None
    assert reply.allowed_mentions["replied_user"] is False
    assert isinstance(seen.messages[0].channel, discord.DMChannel)
    assert seen.messages[0].author.name == "alice"


async def test_guild_mention_and_reply_to_bot(
    fake: FakeDiscord, bot: tuple[commands.Bot, Seen]
) -> None:
    client, seen = bot
    await fake.guild_message(ALICE, "not for the bot")
    await fake.guild_message(ALICE, "hi bot", mention_bot=True)
    [first] = await fake.wait_for_messages(fake.channel_id)
    assert first.content == "echo: @Companion hi bot"
    assert client.user in seen.messages[1].mentions

    await fake.guild_message(ALICE, "about that", reply_to=first.id)
    second = (await fake.wait_for_messages(fake.channel_id, count=2))[1]
    assert second.content == "echo: about that"
    reference = seen.messages[2].reference
    assert reference is not None and isinstance(reference.resolved, discord.Message)
    assert reference.resolved.author == client.user
    assert len(seen.messages) == 3  # the unmentioned message reached on_message but got no reply


async def test_typing_recorded_while_replying(
    fake: FakeDiscord, bot: tuple[commands.Bot, Seen]
) -> None:
    await fake.guild_message(ALICE, "type for me", mention_bot=True)
    await fake.wait_for_messages(fake.channel_id)
    assert fake.typing_calls == [fake.channel_id]
    typing_at = fake.requests.index(next(r for r in fake.requests if r.path.endswith("/typing")))
    sent_at = fake.requests.index(next(r for r in fake.requests if r.path.endswith("/messages")))
    assert typing_at < sent_at


async def test_other_bots_are_ignorable(fake: FakeDiscord, bot: tuple[commands.Bot, Seen]) -> None:
    _, seen = bot
    await fake.guild_message(OTHER_BOT, "beep", mention_bot=True, author_bot=True)
    await fake.guild_message(ALICE, "after the bot", mention_bot=True)
    # Events are handled in order, so once Alice is answered the bot message was handled too.
    [only] = await fake.wait_for_messages(fake.channel_id)
    assert only.content.endswith("after the bot")
    assert [m.author.id for m in seen.ignored_bots if m.author.id != fake.bot_user.id] == [
        OTHER_BOT
    ]


async def test_attachments_and_stickers(fake: FakeDiscord, bot: tuple[commands.Bot, Seen]) -> None:
    _, seen = bot
    photo = FakeAttachment("cat.png", b"\x89PNG fake", "image/png", width=2, height=2)
    await fake.guild_message(
        ALICE, "look", mention_bot=True, attachments=[photo], stickers=["wave"]
    )
    await fake.wait_for_messages(fake.channel_id)
    message = seen.messages[0]
    assert [a.filename for a in message.attachments] == ["cat.png"]
    assert message.attachments[0].content_type == "image/png"
    assert seen.attachment_bytes == [b"\x89PNG fake"]
    assert [s.name for s in message.stickers] == ["wave"]


async def test_command_sync_records_group_and_subcommands(
    fake: FakeDiscord, bot: tuple[commands.Bot, Seen]
) -> None:
    client, _ = bot
    synced = await client.tree.sync(guild=discord.Object(fake.guild_id))
    assert [c.name for c in synced] == ["memory"] and synced[0].id > 0
    [memory] = fake.registered_commands[fake.guild_id]
    options = {o["name"]: o for o in memory["options"]}
    assert options["notes"]["type"] == 2  # SUB_COMMAND_GROUP
    assert [(o["name"], o["type"]) for o in options["notes"]["options"]] == [("add", 1)]
    assert options["forget"]["type"] == 1  # SUB_COMMAND
    await client.tree.sync()
    assert [c["name"] for c in fake.registered_commands[None]] == ["ping"]


async def test_interaction_ephemeral_reply_and_followup(
    fake: FakeDiscord, bot: tuple[commands.Bot, Seen]
) -> None:
    client, _ = bot
    await client.tree.sync(guild=discord.Object(fake.guild_id))
    interaction_id = await fake.slash_command(
        "memory", {"text": "likes tea"}, ALICE, group="notes", subcommand="add"
    )
    response = await fake.wait_for_interaction_response(interaction_id)
    assert response.type == 4 and response.ephemeral
    assert response.content == "noted: likes tea"
    [followup] = await fake.wait_for_followups(interaction_id)
    assert followup.method == "POST" and followup.content == "saved to memory"
    assert followup.flags & EPHEMERAL


async def test_deferred_interaction_then_edit_original(
    fake: FakeDiscord, bot: tuple[commands.Bot, Seen]
) -> None:
    client, _ = bot
    await client.tree.sync(guild=discord.Object(fake.guild_id))
    interaction_id = await fake.slash_command("memory", None, ALICE, subcommand="forget")
    response = await fake.wait_for_interaction_response(interaction_id)
    assert response.type == 5 and response.ephemeral
    [edit] = await fake.wait_for_followups(interaction_id)
    assert (edit.method, edit.target, edit.content) == ("PATCH", "@original", "forgotten")


async def test_global_command_in_dm(fake: FakeDiscord, bot: tuple[commands.Bot, Seen]) -> None:
    client, _ = bot
    await client.tree.sync()
    interaction_id = await fake.slash_command("ping", user_id=ALICE, guild=False)
    response = await fake.wait_for_interaction_response(interaction_id)
    assert (response.type, response.content, response.ephemeral) == (4, "pong", False)


async def test_unknown_routes_are_recorded(
    fake: FakeDiscord, bot: tuple[commands.Bot, Seen]
) -> None:
    client, _ = bot
    channel = client.get_channel(fake.channel_id)
    assert isinstance(channel, discord.TextChannel)
    with pytest.raises(discord.NotFound):
        await channel.create_invite()
    assert fake.unknown_routes == [("POST", f"/api/v10/channels/{fake.channel_id}/invites")]


async def test_gateway_drop_resumes(fake: FakeDiscord, bot: tuple[commands.Bot, Seen]) -> None:
    await fake.drop_gateway()
    await fake.wait_until_identified()
    assert fake.resumes == 1
    assert [c.identify is not None for c in fake.gateway_connections] == [True, True]
    assert [f["op"] for f in fake.gateway_connections[1].received].count(2) == 0  # no IDENTIFY
    await fake.dm(ALICE, "still there?")
    [reply] = await fake.wait_for_dms(ALICE)
    assert reply.content == "echo: still there?"


async def test_missing_intents_suppress_and_blank_messages(fake: FakeDiscord) -> None:
    intents = default_intents()
    intents.dm_messages = intents.message_content = False  # a misconfigured adapter
    seen = Seen()
    async with running(build_bot(fake, seen, intents), fake):
        await fake.dm(ALICE, "hello?")
        await fake.guild_message(ALICE, "secret", mention_bot=False)
        await fake.guild_message(ALICE, "hi", mention_bot=True)
        await fake.wait_for_messages(fake.channel_id)
    assert [event for event, _ in fake.suppressed_events] == ["MESSAGE_CREATE"]
    # Without message_content Discord blanks guild messages unless they mention the bot.
    assert [m.content for m in seen.messages] == ["", f"<@{fake.bot_user.id}> hi"]


async def test_close_is_clean_and_quick(fake: FakeDiscord) -> None:
    client = build_bot(fake, Seen())
    start = asyncio.create_task(client.start(fake.token or ""))
    try:
        await fake.wait_until_identified()
        await asyncio.wait_for(client.wait_until_ready(), timeout=PATIENCE)
    finally:
        began = time.monotonic()
        await client.close()
        await asyncio.wait_for(start, timeout=PATIENCE)
        elapsed = time.monotonic() - began
    assert elapsed < 2.0
    assert client.is_closed()
    await fake.changes.wait_for(
        lambda: fake.gateway_connections[-1].close_code, 2.0, lambda: "gateway never closed"
    )
    # discord.py's reader task races its own close(code=1000) and usually sends 4000 first.
    assert fake.gateway_connections[-1].close_code in (1000, 4000)
    assert len(fake.gateway_connections) == 1, "the client reconnected instead of closing"
