"""A group's scene on Discord: each character speaks through a channel webhook of its own, with
its name and avatar, so a channel reads like a conversation among people.

One webhook per (channel, character), named after the character, with the character's card
image as its avatar when there is one (`<id>.avatar.png` beside its YAML, cards/export.py); it
is created the first time the character speaks in the channel and found again after a restart
by listing the channel's webhooks (those the bot made). Each line is sent with `username=` the
character's name, split to Discord's 2,000 characters, and pings nobody.

Both calls need the Manage Webhooks permission. Without it (discord.Forbidden) the line is the
bot's own message, headed by the character's name in bold, and one warning per channel says
why and how to grant it; the channel is tried again after DENIED_RETRY_SECONDS, so a grant
takes effect without a restart.

Everything goes through REST by channel id (no gateway object is needed): a worker, which has
no gateway, speaks the same way (bot/inbox/discord_worker.py records each webhook send).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import discord

from bot.adapters.discord_views import MESSAGE_LIMIT, NO_PINGS
from bot.adapters.live import LiveReply
from bot.adapters.split import split_message
from bot.config import Settings
from cards.character import Character
from cards.export import avatar_path
from memory.engine.llm import TextSink
from memory.models import Reply

log = logging.getLogger(__name__)

# An admin who grants Manage Webhooks later is heard from within this many seconds.
DENIED_RETRY_SECONDS = 600.0
WEBHOOK_NAME_LIMIT = 80  # Discord's limit on a webhook's name
KNOWN_WEBHOOKS_LIMIT = 10_000  # other integrations' webhooks remembered as not ours
HEADER = re.compile(r"\*\*((?:\\.|[^*\\])+)\*\*")


def bold_header(name: str) -> str:
    """The head of a line the bot posts for a character (no webhook): its name in bold."""
    return f"**{discord.utils.escape_markdown(name)}**\n"


def header_name(content: str) -> str | None:
    """The character a fallback line was headed by, read back from the bot's message."""
    first = content.split("\n", 1)[0]
    found = HEADER.fullmatch(first)
    return re.sub(r"\\(.)", r"\1", found.group(1)) if found else None


class WebhookPoster:
    """How a line is posted through a webhook (a worker records each post)."""

    async def post(
        self, hook: discord.Webhook, content: str, username: str
    ) -> discord.WebhookMessage:
        return await hook.send(content, username=username, allowed_mentions=NO_PINGS, wait=True)


class SceneWebhooks:
    """The bot's webhooks in each channel, by name; shared by every outlet of one adapter."""

    def __init__(self, client: discord.Client, poster: WebhookPoster | None = None) -> None:
        self._client = client
        self.poster = poster or WebhookPoster()
        self._hooks: dict[int, dict[str, discord.Webhook]] = {}  # channel -> name -> webhook
        self._verdicts: dict[int, bool] = {}  # webhook id -> made by this bot
        self._denied_until: dict[int, float] = {}
        self._warned: set[int] = set()  # channels whose missing permission was logged
        # (channel, name) -> when to try again a webhook Discord would not make (a name it
        # refuses, a channel full of webhooks): logged once, not tried at every line.
        self._unmade: dict[tuple[int, str], float] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    def denied(self, channel_id: int) -> bool:
        return self._denied_until.get(channel_id, 0.0) > time.monotonic()

    async def for_character(
        self, channel_id: int, character: Character, where: str
    ) -> discord.Webhook | None:
        """The character's webhook in the channel, found or created; None when the bot may not
        manage webhooks there (its line is then the bot's own message)."""
        name = character.name[:WEBHOOK_NAME_LIMIT]
        if self.denied(channel_id) or self._unmade.get((channel_id, name), 0.0) > time.monotonic():
            return None
        async with self._locks.setdefault(channel_id, asyncio.Lock()):
            try:
                read_before = channel_id in self._hooks
                hooks = await self._listed(channel_id)
                if name not in hooks and read_before:  # another process may have made it
                    hooks = await self._listed(channel_id, again=True)
                if name not in hooks:
                    hooks[name] = await self._create(channel_id, name, character)
                return hooks[name]
            except discord.Forbidden:
                self._deny(channel_id, where)
            except discord.HTTPException:
                if (channel_id, name) not in self._unmade:
                    log.warning(
                        "discord: %s: Discord would not make the webhook of %s; its lines go"
                        " as the bot's",
                        where,
                        character.id,
                        exc_info=True,
                    )
                self._unmade[(channel_id, name)] = time.monotonic() + DENIED_RETRY_SECONDS
        return None

    def forget(self, channel_id: int) -> None:
        """The channel's webhooks are read again at the next line (one was deleted)."""
        self._hooks.pop(channel_id, None)

    async def is_ours(self, channel_id: int, webhook_id: int) -> bool:
        """Whether a webhook of the channel is one of the bot's (its messages are the scene's
        lines): asked of Discord once per webhook (a bot may read the webhooks it owns)."""
        if any(h.id == webhook_id for h in self._hooks.get(channel_id, {}).values()):
            return True
        if webhook_id not in self._verdicts:
            try:
                data = await self._client.http.get_webhook(webhook_id)
            except (discord.NotFound, discord.Forbidden):  # gone, or another's
                data = None
            except discord.HTTPException:
                log.warning("discord: could not read webhook %s", webhook_id, exc_info=True)
                return False
            if len(self._verdicts) >= KNOWN_WEBHOOKS_LIMIT:
                self._verdicts.clear()
            made = data is not None and self._made_by_us(data)
            self._verdicts[webhook_id] = made and data.get("channel_id") == str(channel_id)
        return self._verdicts[webhook_id]

    async def _listed(self, channel_id: int, again: bool = False) -> dict[str, discord.Webhook]:
        """The bot's webhooks in the channel, read once (or again), by name."""
        if again or channel_id not in self._hooks:
            found = await self._client.http.channel_webhooks(channel_id)
            self._hooks[channel_id] = {
                str(data["name"]): self._webhook(data) for data in found if self._made_by_us(data)
            }
        return self._hooks[channel_id]

    def _made_by_us(self, data: Any) -> bool:
        me = self._client.user
        creator = (data.get("user") or {}).get("id")
        made = me is not None and creator == str(me.id)
        owned = data.get("application_id") == str(self._client.application_id)
        return bool(data.get("token")) and data.get("name") is not None and (made or owned)

    async def _create(self, channel_id: int, name: str, character: Character) -> discord.Webhook:
        avatar = await _avatar(character)
        data = await self._client.http.create_webhook(channel_id, name=name, avatar=avatar)  # type: ignore[arg-type]
        log.info("discord: channel %s: webhook made for %s", channel_id, character.id)
        return self._webhook(data)

    def _webhook(self, data: Any) -> discord.Webhook:
        return discord.Webhook.partial(int(data["id"]), str(data["token"]), client=self._client)

    def _deny(self, channel_id: int, where: str) -> None:
        self._denied_until[channel_id] = time.monotonic() + DENIED_RETRY_SECONDS
        if channel_id in self._warned:
            return
        self._warned.add(channel_id)
        log.warning(
            "discord: %s: the bot lacks the Manage Webhooks permission there (Discord error"
            " 50013), so the characters speak as the bot, each line headed by its name in bold;"
            " grant Manage Webhooks to the bot's role (Server Settings > Roles, or the channel's"
            " Edit Channel > Permissions) for each character to speak with its own name and avatar",
            where,
        )


async def _avatar(character: Character) -> str | None:
    """The card's image as Discord's image data, when the character has one."""
    if not character.source_path:
        return None
    path = avatar_path(Path(character.source_path))
    data = await asyncio.to_thread(lambda: path.read_bytes() if path.is_file() else None)
    return f"data:image/png;base64,{base64.b64encode(data).decode()}" if data else None


@dataclass
class _Posted:
    """A line's message on screen, and the header its text needs on every edit."""

    message: discord.Message
    header: str  # "" through a webhook; the bold name on the bot's own message

    async def edit(self, body: str) -> None:
        await self.message.edit(
            content=(self.header + body)[:MESSAGE_LIMIT], allowed_mentions=NO_PINGS
        )


class DiscordSceneOutlet:
    """The lines of one scene turn, posted into the channel of `message` (bot/scenes.py)."""

    def __init__(
        self,
        webhooks: SceneWebhooks,
        message: discord.Message,
        cast: Sequence[Character],
        settings: Settings,
    ) -> None:
        self._webhooks = webhooks
        self._message = message
        self._channel_id = message.channel.id
        self._where = f"channel {self._channel_id} (#{getattr(message.channel, 'name', '?')})"
        self._cast = {c.id: c for c in cast}
        self._settings = settings
        self._live: dict[str, LiveReply[_Posted]] = {}

    def _character(self, character_id: str) -> Character | None:
        return self._cast.get(character_id)

    def _name(self, character_id: str) -> str:
        character = self._character(character_id)
        return character.name if character is not None else character_id

    def _bodies(self, character_id: str, text: str) -> list[str]:
        """The line split to Discord's limit, room left for the bold name where it is needed
        (known once the channel was tried: a first streamed preview is clipped instead)."""
        room = (
            len(bold_header(self._name(character_id)))
            if self._webhooks.denied(self._channel_id)
            else 0
        )
        return split_message(text, MESSAGE_LIMIT - room)

    def live(self, character_id: str) -> TextSink | None:
        if not self._settings.stream_replies:
            return None

        async def send(body: str) -> _Posted:
            return await self._post(character_id, body, as_reply=True)

        async def edit(posted: _Posted, body: str) -> None:
            await posted.edit(body)

        def render(text: str) -> str:
            return (self._bodies(character_id, text) or [""])[0]

        live = LiveReply(send, edit, render, self._settings.stream_edit_seconds)
        self._live[character_id] = live
        return live.update

    async def send(self, character_id: str, reply: Reply) -> None:
        bodies = self._bodies(character_id, reply.text)
        if not bodies:
            log.warning("discord: %s: an empty line of %s, not posted", self._where, character_id)
        live = self._live.pop(character_id, None)
        streamed = bool(bodies) and live is not None and await live.finish(bodies[0])
        for index, body in enumerate(bodies[1:] if streamed else bodies):
            await self._post(character_id, body, as_reply=index == 0 and not streamed)

    async def _post(self, character_id: str, body: str, *, as_reply: bool) -> _Posted:
        """One message of a line: through the character's webhook, else as the bot's own."""
        character = self._character(character_id)
        name = self._name(character_id)
        for attempt in range(2):
            hook = None
            if character is not None:
                hook = await self._webhooks.for_character(self._channel_id, character, self._where)
            if hook is None:
                break
            try:
                sent = await self._webhooks.poster.post(hook, body[:MESSAGE_LIMIT], name)
                return _Posted(sent, "")
            except discord.NotFound:
                # Deleted by someone since it was found: read the channel's again, once.
                self._webhooks.forget(self._channel_id)
                if attempt:
                    raise
        header = bold_header(name)
        # A webhook cannot reply; the bot's line answers the message it follows, pinging nobody.
        extra: dict[str, Any] = {}
        if as_reply:
            extra["reference"] = self._message.to_reference(fail_if_not_exists=False)
        sent_by_bot = await self._message.channel.send(
            (header + body)[:MESSAGE_LIMIT], allowed_mentions=NO_PINGS, **extra
        )
        return _Posted(sent_by_bot, header)
