"""Channel webhooks on the fake Discord, driven by the real, unmodified discord.py: created and
listed over REST, executed with a username override, their messages echoed on the gateway
with `webhook_id` and resolved as the message a user replies to; Manage Webhooks denied."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import discord
import pytest
from discord.ext import commands

from tests.fakes.discord_api import FakeDiscord, point_discord_at
from tests.patience import PATIENCE
from tests.test_fake_discord import Seen, build_bot, running

ALICE = 4242
PNG = b"\x89PNG\r\n\x1a\n-an-avatar"


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as fake:
        restore = point_discord_at(fake.url)
        try:
            yield fake
        finally:
            restore()


@pytest.fixture
async def client(fake: FakeDiscord) -> AsyncIterator[commands.Bot]:
    bot = build_bot(fake, Seen())
    async with running(bot, fake):
        yield bot


def guild_channel(client: commands.Bot, fake: FakeDiscord) -> discord.TextChannel:
    channel = client.get_channel(fake.channel_id)
    assert isinstance(channel, discord.TextChannel)
    return channel


async def test_a_webhook_is_created_found_again_executed_and_edited(
    fake: FakeDiscord, client: commands.Bot
) -> None:
    channel = guild_channel(client, fake)
    created = await channel.create_webhook(name="Maggie Thornton", avatar=PNG)
    assert created.token and created.channel_id == fake.channel_id
    assert fake.webhooks.hooks[created.id].avatar == PNG  # the image data URI, decoded
    [listed] = await channel.webhooks()
    assert (listed.id, listed.name, listed.token) == (created.id, "Maggie Thornton", created.token)
    assert listed.user == client.user
    fetched_hook = await client.fetch_webhook(created.id)  # by id, with the bot's token
    assert (fetched_hook.name, fetched_hook.token) == ("Maggie Thornton", created.token)

    echoed = asyncio.ensure_future(
        client.wait_for("message", check=lambda m: m.webhook_id == created.id, timeout=PATIENCE)
    )
    hook = discord.Webhook.partial(created.id, created.token or "", client=client)
    sent = await hook.send(
        "Tea first.", username="Maggie", allowed_mentions=discord.AllowedMentions.none(), wait=True
    )
    assert (sent.author.name, sent.webhook_id, sent.content) == ("Maggie", created.id, "Tea first.")
    seen = await echoed  # on the gateway too, as Discord shows every bot a webhook's message
    assert seen.author.bot and seen.author.name == "Maggie" and seen.guild is not None
    [recorded] = fake.webhooks.messages(fake.channel_id)
    assert recorded.payload["username"] == "Maggie"
    assert recorded.payload["allowed_mentions"]["parse"] == []

    await sent.edit(content="Tea first, then stories.")
    [edit] = await fake.webhooks.wait_for_edits(sent.id)
    assert edit.message["content"] == "Tea first, then stories."
    fetched = await hook.fetch_message(sent.id)
    assert fetched.content == "Tea first, then stories."


async def test_a_reply_to_a_webhook_message_resolves_it(
    fake: FakeDiscord, client: commands.Bot
) -> None:
    created = await guild_channel(client, fake).create_webhook(name="Koldo Arrieta")
    hook = discord.Webhook.partial(created.id, created.token or "", client=client)
    sent = await hook.send("¿Quién pregunta?", username="Koldo Arrieta", wait=True)
    replying = asyncio.ensure_future(
        client.wait_for("message", check=lambda m: m.reference is not None, timeout=PATIENCE)
    )
    await fake.guild_message(ALICE, "yo", reply_to=sent.id, reply_mention=False)
    reply = await replying
    assert reply.reference is not None
    replied = reply.reference.resolved
    assert isinstance(replied, discord.Message)
    assert (replied.webhook_id, replied.author.name) == (created.id, "Koldo Arrieta")


async def test_without_manage_webhooks_creating_and_listing_are_forbidden(
    fake: FakeDiscord, client: commands.Bot
) -> None:
    fake.webhooks.deny_manage_webhooks(fake.channel_id)
    channel = guild_channel(client, fake)
    with pytest.raises(discord.Forbidden) as refused:
        await channel.create_webhook(name="Koldo Arrieta")
    assert refused.value.code == 50013 and "Missing Permissions" in str(refused.value)
    with pytest.raises(discord.Forbidden):
        await channel.webhooks()
    other = client.get_channel(fake.channel_ids[1])
    assert isinstance(other, discord.TextChannel)
    assert (await other.create_webhook(name="Koldo Arrieta")).name == "Koldo Arrieta"
    fake.webhooks.deny_manage_webhooks()  # the whole guild
    with pytest.raises(discord.Forbidden):
        await other.webhooks()
    assert fake.webhooks.refused == [
        ("POST", fake.channel_id), ("GET", fake.channel_id), ("GET", other.id),
    ]  # fmt: skip


async def test_interactions_still_answer_through_their_own_webhook(
    fake: FakeDiscord, client: commands.Bot
) -> None:
    await guild_channel(client, fake).create_webhook(name="Koldo Arrieta")
    await client.tree.sync()
    interaction = await fake.slash_command("ping")
    response = await fake.wait_for_interaction_response(interaction)
    assert response.content == "pong"
    assert fake.unknown_routes == [] and fake.errors == []
