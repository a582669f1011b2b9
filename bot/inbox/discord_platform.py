"""The Discord platform process: one gateway connection (one shard: DISCORD_SHARD_ID of
DISCORD_SHARD_COUNT, or all guilds) that stores each event the bot answers in the inbox before
anything else is done with it.

discord.py turns each gateway dispatch into objects through its connection state's parsers, a
plain dict from event name to function; MESSAGE_CREATE and INTERACTION_CREATE are replaced
with functions that queue the raw payload, so nothing else sees them (no message cache, no
command tree: this process answers nothing). One task stores the queue in arrival order, a
batch per transaction. Messages are filtered first as the adapter would: what no worker would
answer (other bots, system messages, guild chatter not addressed to the bot) is never stored.

A guild channel is a scene (bot/scenes.py), and a scene is one queue: every person's chat in a
channel is stored under one pair, the channel's (`discord:scene:<channel id>`), so that one
worker at a time answers it, in arrival order, with the scene's sessions in its RAM. Stored
besides what mentions or replies to the bot: a reply to a character's webhook line (the bot's
own webhook, asked of Discord once per webhook), and every message of a channel where an admin
added characters with /escena añadir (as of a bound channel): the scene, on the worker, hears
those that name a character present. In a channel nobody added characters to, a message that
names the channel's one character without mentioning the bot is not stored (the single process
hears it): mention the bot, or add the character with /escena añadir.

Discord has no acknowledgement of a gateway event, except for interactions: an interaction not
answered within 3 s fails on the user's screen. So an interaction is stored first and then
deferred from here (type 5, "thinking"; a button on the presser's own panel: type 6, the
panel is what the answer replaces), which leaves its webhook open 15 minutes for the worker
that answers it by editing that deferred response. Autocomplete cannot be deferred: it is
stored under a pair of its own (per user and channel), so that it waits behind no
conversation, and a worker answers it directly, usually within Discord's 3 s.

What Discord sends while no platform process is connected is lost: a new process identifies
afresh and Discord replays nothing to it. What was stored is answered whatever happens to the
platform process afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from typing import Any, Protocol

import discord

from bot.adapters.discord_adapter import DiscordRedirect, intents, wait_until_ready
from bot.adapters.discord_scene import SceneWebhooks
from bot.cli_characters import book_of_valid_files
from bot.config import Settings
from bot.health import Metrics
from bot.inbox.dead_letters import DeadLetterSink, InboxKeeper
from bot.inbox.refused import PlatformAccess
from bot.registry import REGISTRY
from bot.scenes import cast_of, names_a_character
from memory.errors import UserFacingError
from memory.platform_text import storable_json
from memory.store.inbox import SCENE_PAIR, Arrival, Inbox

log = logging.getLogger(__name__)
PLATFORM = "discord"
MESSAGE_CREATE, INTERACTION_CREATE = "MESSAGE_CREATE", "INTERACTION_CREATE"
SCENE_PREFIX = f"{PLATFORM}:{SCENE_PAIR}:"  # + the channel id: everyone's chat in one scene
CHAT_MESSAGE_TYPES = (0, 19)  # default and reply, as discord_adapter.CHAT_MESSAGE_TYPES
COMMAND, COMPONENT, AUTOCOMPLETE = 2, 3, 4
SUBCOMMAND = 1
EPHEMERAL = 64  # a message flag
MAX_BATCH = 100
RETRY_SECONDS = 1.0
DRAIN_SECONDS = 5.0  # at a stop, for what arrived before the gateway closed
READY_TIMEOUT = 60.0
Event = tuple[str, dict[str, Any]]


class Bindings(DeadLetterSink, Protocol):
    """The store as this process uses it: whether a channel is bound to a character or has a
    scene an admin added characters to (its reads), and where an event the inbox will not take
    is kept."""

    async def bound_character(self, platform: str, channel_id: str) -> str | None: ...

    async def scene_members(self, platform: str, channel_id: str) -> list[str]: ...


def arrival_of(raw: dict[str, Any]) -> Arrival:
    return discord_arrival(raw["t"], raw["d"])


def discord_arrival(event: str, data: dict[str, Any]) -> Arrival:
    """The inbox row of an event: its pair is the user in the channel (the adapter's order
    key); the payload is the dispatch as the gateway sent it, its text made storable
    (memory/platform_text.py)."""
    data = storable_json(data)
    if event == INTERACTION_CREATE:
        user = (data.get("member") or {}).get("user") or data.get("user") or {}
        key = f"i{data['id']}"
    else:
        user = data.get("author") or {}
        key = f"m{data['id']}"
    pair = f"{PLATFORM}:{user.get('id', '-')}:{data.get('channel_id', '-')}"
    if event == INTERACTION_CREATE and data.get("type") == AUTOCOMPLETE:
        pair = f"{pair}:autocomplete"  # waits behind no conversation
    elif event == MESSAGE_CREATE and scene_chat(data):
        pair = f"{SCENE_PREFIX}{data.get('channel_id', '-')}"  # the scene's one queue
    sender = str(user["id"]) if user.get("id") else None
    return Arrival(PLATFORM, key, pair, {"t": event, "d": data}, sender)


def scene_chat(data: dict[str, Any]) -> bool:
    """A guild message that the adapter hands to its channel's scene: not a photo, nor a
    message of nothing but attachments or stickers (those keep the per-user path)."""
    if "guild_id" not in data:
        return False
    attachments = data.get("attachments") or []
    if any(str(a.get("content_type") or "").startswith("image/") for a in attachments):
        return False
    return bool(str(data.get("content") or "").strip()) or not (
        attachments or data.get("sticker_items")
    )


def addressed(data: dict[str, Any], bot_id: int, own_role: int | None) -> bool | None:
    """Whether the adapter would answer this message, as far as the payload tells: None for a
    guild message that only a channel binding could address."""
    author = data.get("author") or {}
    if author.get("bot") or data.get("webhook_id") is not None:
        return False  # answering bots (or our own echo) risks endless reply loops
    if int(data.get("type") or 0) not in CHAT_MESSAGE_TYPES:
        return False
    if "guild_id" not in data:
        return True  # a DM
    if any(int(m["id"]) == bot_id for m in data.get("mentions") or []):
        return True
    if own_role is not None and str(own_role) in (data.get("mention_roles") or []):
        return True
    replied = (data.get("referenced_message") or {}).get("author") or {}
    if int(replied.get("id") or 0) == bot_id:
        return True
    return None


def personal(data: dict[str, Any]) -> bool:
    """Whether a slash command's answer concerns only the caller (ephemeral in a guild), as
    the adapter decides from the registry; Discord sends the default (Spanish) names."""
    name = data.get("name", "")
    sub = next((o["name"] for o in data.get("options") or [] if o.get("type") == SUBCOMMAND), None)
    for command in REGISTRY:
        if name not in (command.names.es, f"{command.names.es}-admin"):
            continue
        if sub is None:
            return not command.public
        return not any(c.public for c in command.subcommands if c.names.es == sub)
    return True


def own_panel(data: dict[str, Any]) -> bool:
    """A button on a message only its presser sees (a DM, an ephemeral message): its answer
    replaces that message, as the adapter's press does."""
    flags = int((data.get("message") or {}).get("flags") or 0)
    return "guild_id" not in data or bool(flags & EPHEMERAL)


class DiscordIngest:
    name = PLATFORM

    def __init__(
        self,
        settings: Settings,
        inbox: Inbox,
        metrics: Metrics,
        bindings: Bindings,
        *,
        access: PlatformAccess | None = None,
        guild_ready_timeout: float = 2.0,
    ) -> None:
        self._settings = settings
        self._access = access
        self._metrics = metrics
        self._bindings = bindings
        # The characters' names: a guild message that names one of a scene's is heard by it.
        self._characters = book_of_valid_files(settings.characters_dir)
        self._default = settings.default_character or self._characters.default_id
        token = settings.discord_bot_token
        secrets = [token.get_secret_value()] if token is not None else []
        self._keeper = InboxKeeper(inbox, bindings, metrics, secrets)
        shard_id, shard_count = settings.discord_shard_id, settings.discord_shard_count
        if (shard_id is None) != (shard_count is None) or (shard_id or 0) >= (shard_count or 1):
            raise UserFacingError(
                "set both DISCORD_SHARD_ID and DISCORD_SHARD_COUNT (the id below the count), "
                "or neither"
            )
        self._redirect = DiscordRedirect(settings.discord_api_base_url)
        self._client = discord.Client(
            intents=intents(),
            guild_ready_timeout=guild_ready_timeout,
            shard_id=shard_id,
            shard_count=shard_count,
        )
        self._webhooks = SceneWebhooks(self._client)  # which webhooks are the characters'
        parsers = self._client._connection.parsers
        for event in (MESSAGE_CREATE, INTERACTION_CREATE):
            parsers[event] = functools.partial(self._arrived, event)
        self._queue: asyncio.Queue[Event] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []

    def _arrived(self, event: str, data: dict[str, Any]) -> None:
        # Called by the gateway reader, synchronously: nothing is awaited between frames.
        self._queue.put_nowait((event, data))

    async def start(self) -> None:
        token = self._settings.discord_bot_token
        assert token is not None
        await self._client.login(token.get_secret_value())
        await self._redirect.follow_gateway(self._client)
        self._tasks.append(asyncio.create_task(self._store_forever(), name="discord-ingest"))
        gateway = asyncio.create_task(self._client.connect(), name="discord-gateway")
        self._tasks.append(gateway)
        await wait_until_ready(self._client, gateway, READY_TIMEOUT)
        log.info("discord platform: storing messages and interactions in the inbox")

    async def stop(self) -> None:
        """Disconnect, store what had arrived (bounded), then end."""
        await self._client.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._queue.join(), DRAIN_SECONDS)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._redirect.undo()

    async def _store_forever(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while not self._queue.empty() and len(batch) < MAX_BATCH:
                batch.append(self._queue.get_nowait())
            wanted = [(e, d) for e, d in batch if await self._wanted(e, d)]
            if wanted:
                await self._store([{"t": e, "d": d} for e, d in wanted])
            for event, data in wanted:
                if event == INTERACTION_CREATE and data.get("type") in (COMMAND, COMPONENT):
                    self._tasks.append(asyncio.create_task(self._defer(data)))
            self._tasks = [t for t in self._tasks if not t.done()]
            for _ in batch:
                self._queue.task_done()

    async def _store(self, events: list[dict[str, Any]]) -> None:
        """Each event in the inbox or as a dead letter (bot/inbox/dead_letters.py), or tried
        again until it is (the database is down): a dropped event would be lost for good."""
        while True:
            try:
                await self._keeper.keep(PLATFORM, await self._screened(events), arrival_of)
                return
            except Exception:
                self._metrics.errors += 1
                log.warning("discord: the inbox could not store; retrying", exc_info=True)
                await asyncio.sleep(RETRY_SECONDS)

    async def _screened(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A refused person's messages without their words, or left out (bot/inbox/refused.py)."""
        if self._access is None:
            return events
        kept = []
        for raw in events:
            data = await self._access.discord(raw["t"], raw["d"])
            if data is not None:
                kept.append({"t": raw["t"], "d": data})
        return kept

    async def _wanted(self, event: str, data: dict[str, Any]) -> bool:
        if event == INTERACTION_CREATE:
            return data.get("type") in (COMMAND, COMPONENT, AUTOCOMPLETE)
        me = self._client.user
        assert me is not None  # events only arrive once logged in
        guild = self._client.get_guild(int(data.get("guild_id") or 0))
        own_role = guild.self_role if guild is not None else None
        try:
            verdict = addressed(data, me.id, own_role.id if own_role else None)
        except (KeyError, TypeError, ValueError):
            return True  # a shape we do not know: kept, as a dead letter if not in the inbox
        if verdict is not None:
            return verdict
        try:
            return await self._for_a_scene(data)
        except Exception:
            # Stored rather than lost: the worker asks again and drops it if it is not bound.
            log.warning("discord: could not read the channel's binding", exc_info=True)
            return True

    async def _for_a_scene(self, data: dict[str, Any]) -> bool:
        """A guild message not addressed to the bot that a worker's scene may still hear: in a
        bound channel, one that names a character of the channel's scene, or a reply to a
        character's line. Nothing else is stored, not even in the inbox."""
        channel = str(data["channel_id"])
        if await self._bindings.bound_character(PLATFORM, channel) is not None:
            return True
        members = await self._bindings.scene_members(PLATFORM, channel)
        cast = cast_of(members, None, self._characters, self._default)
        if names_a_character(str(data.get("content") or ""), cast):
            return True
        hook = (data.get("referenced_message") or {}).get("webhook_id")
        return hook is not None and await self._webhooks.is_ours(int(channel), int(hook))

    async def _defer(self, data: dict[str, Any]) -> None:
        """Acknowledge a stored interaction as the adapter does when an answer is slow."""
        interaction: discord.Interaction[discord.Client] = discord.Interaction(
            data=data,  # type: ignore[arg-type]
            state=self._client._connection,
        )
        try:
            if data["type"] == COMPONENT and own_panel(data):
                await interaction.response.defer()  # the answer will replace the panel
            else:
                # A new response: a button's answer goes to the presser alone.
                ephemeral = data["type"] == COMPONENT or (
                    "guild_id" in data and personal(data.get("data") or {})
                )
                await interaction.response.defer(ephemeral=ephemeral, thinking=True)
        except discord.HTTPException:
            # Too late (over 3 s) or a replayed event: the worker's answer then fails alone.
            self._metrics.errors += 1
            log.warning("discord: interaction %s could not be deferred", data["id"], exc_info=True)
