"""Channel webhooks in the fake Discord, as Discord's REST API has them: create and list a
channel's webhooks (both need the Manage Webhooks permission), execute one with a username
override, get and edit the messages it posted.

A message a webhook posts comes back on the gateway as MESSAGE_CREATE, as on Discord: its
author is the webhook (its id, the username the execution gave, ``bot`` true, discriminator
``0000``), ``webhook_id`` is set and there is no ``member``. Such messages are kept with the
others, so a user's reply to one inlines it as ``referenced_message``.

A webhook is also read by id alone (Get Webhook, with the bot's token).
``/webhooks/{id}/{token}`` is shared with interactions (their webhook id is the application
id): `by_webhook_id` sends a request to a channel webhook's handler when the id is one of
theirs, to the interaction handler otherwise.

The permission switch: ``deny_manage_webhooks(channel_id)`` (or no channel: the whole guild)
makes creating and listing answer 403 "Missing Permissions" (code 50013), as Discord does for a
bot whose role lacks Manage Webhooks there.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tests.fakes.discord_gateway import FakeGateway
from tests.fakes.discord_http import Handler, apply_edit, error, json_response, read_body
from tests.fakes.discord_records import Changes, SentMessage
from tests.fakes.discord_world import JSON, FakeWorld
from tests.patience import PATIENCE

MISSING_PERMISSIONS = 50013
UNKNOWN_WEBHOOK = 10015
INVALID_WEBHOOK_TOKEN = 50027
INCOMING = 1  # the webhook type a channel webhook has


@dataclass
class FakeWebhook:
    id: int
    token: str
    channel_id: int
    guild_id: int
    name: str
    avatar: bytes | None  # the image it was created with (decoded from its data URI)
    creator: JSON  # the user payload of who created it
    application_id: int | None

    @property
    def avatar_hash(self) -> str | None:
        return hashlib.md5(self.avatar).hexdigest() if self.avatar else None

    def payload(self) -> JSON:
        return {
            "id": str(self.id),
            "type": INCOMING,
            "guild_id": str(self.guild_id),
            "channel_id": str(self.channel_id),
            "user": self.creator,
            "name": self.name,
            "avatar": self.avatar_hash,
            "token": self.token,
            "application_id": str(self.application_id) if self.application_id else None,
        }


def decode_image_data(data: str | None) -> bytes | None:
    """Discord's image data: ``data:image/png;base64,...``."""
    if not data:
        return None
    _, _, encoded = data.partition(";base64,")
    return base64.b64decode(encoded)


class ChannelWebhooks:
    """The channel webhooks of the fake's guild, what was posted through them, and waits."""

    def __init__(self, world: FakeWorld, changes: Changes, gateway: FakeGateway) -> None:
        self.world = world
        self.changes = changes
        self.gateway = gateway
        self.hooks: dict[int, FakeWebhook] = {}
        # Channel ids where the bot lacks Manage Webhooks; None in it: the whole guild.
        self.denied: set[int | None] = set()
        self.sends: list[SentMessage] = []  # executions, in order
        self.edits: list[SentMessage] = []  # edits of their messages, in order
        self.refused: list[tuple[str, int]] = []  # (method, channel id) answered 403

    # -- the switch and what tests read ---------------------------------------------------------

    def deny_manage_webhooks(self, channel_id: int | None = None) -> None:
        self.denied.add(channel_id)

    def allow_manage_webhooks(self) -> None:
        self.denied.clear()

    def in_channel(self, channel_id: int) -> list[FakeWebhook]:
        return [h for h in self.hooks.values() if h.channel_id == channel_id]

    def messages(self, channel_id: int) -> list[SentMessage]:
        return [m for m in self.sends if m.channel_id == channel_id]

    async def wait_for_messages(
        self,
        channel_id: int,
        count: int = 1,
        timeout: float = PATIENCE,  # noqa: ASYNC109
    ) -> list[SentMessage]:
        def check() -> list[SentMessage] | None:
            found = self.messages(channel_id)
            return found if len(found) >= count else None

        def what() -> str:
            seen = [(m.message["author"]["username"], m.content) for m in self.sends]
            return f"expected {count} webhook message(s) in {channel_id}; all: {seen}"

        return await self.changes.wait_for(check, timeout, what)

    async def wait_for_edits(
        self,
        message_id: int,
        count: int = 1,
        timeout: float = PATIENCE,  # noqa: ASYNC109
    ) -> list[SentMessage]:
        def check() -> list[SentMessage] | None:
            found = [e for e in self.edits if e.id == message_id]
            return found if len(found) >= count else None

        def what() -> str:
            return f"expected {count} edit(s) of {message_id}; edits: {self.edits}"

        return await self.changes.wait_for(check, timeout, what)

    # -- routes ---------------------------------------------------------------------------------

    def owns(self, request: web.Request) -> bool:
        webhook_id = request.match_info["webhook_id"]
        return webhook_id.isdigit() and int(webhook_id) in self.hooks

    def _channel(self, request: web.Request) -> tuple[int, web.Response | None]:
        channel_id = int(request.match_info["channel_id"])
        if channel_id not in self.world.channels:  # DMs have no webhooks
            return channel_id, error(404, "Unknown Channel", 10003)
        if channel_id in self.denied or None in self.denied:
            self.refused.append((request.method, channel_id))
            return channel_id, error(403, "Missing Permissions", MISSING_PERMISSIONS)
        return channel_id, None

    async def create(self, request: web.Request) -> web.Response:
        channel_id, refusal = self._channel(request)
        if refusal is not None:
            return refusal
        payload, _ = await read_body(request)
        name = str(payload.get("name") or "")
        if not 1 <= len(name) <= 80 or "discord" in name.lower() or "clyde" in name.lower():
            return error(400, "Invalid Form Body", 50035)
        hook = FakeWebhook(
            self.world.ids.next(),
            secrets.token_urlsafe(48),
            channel_id,
            self.world.guild_id,
            name,
            decode_image_data(payload.get("avatar")),
            self.world.bot.payload(),
            self.world.application_id,
        )
        self.hooks[hook.id] = hook
        return json_response(hook.payload())

    async def list(self, request: web.Request) -> web.Response:
        channel_id, refusal = self._channel(request)
        if refusal is not None:
            return refusal
        return json_response([h.payload() for h in self.in_channel(channel_id)])

    async def get(self, request: web.Request) -> web.Response:
        """Get Webhook (by id, with the bot's token): needs Manage Webhooks unless the bot's
        application made the webhook."""
        hook = self.hooks.get(int(request.match_info["webhook_id"]))
        if hook is None:
            return error(404, "Unknown Webhook", UNKNOWN_WEBHOOK)
        owned = hook.application_id == self.world.application_id
        if not owned and (hook.channel_id in self.denied or None in self.denied):
            self.refused.append((request.method, hook.channel_id))
            return error(403, "Missing Permissions", MISSING_PERMISSIONS)
        payload = hook.payload()
        if not owned:
            del payload["token"]  # another application's webhook: its token stays its own
        return json_response(payload)

    def _hook(self, request: web.Request) -> tuple[FakeWebhook | None, web.Response | None]:
        hook = self.hooks.get(int(request.match_info["webhook_id"]))
        if hook is None:
            return None, error(404, "Unknown Webhook", UNKNOWN_WEBHOOK)
        if request.match_info["token"] != hook.token:
            return None, error(401, "Invalid Webhook Token", INVALID_WEBHOOK_TOKEN)
        return hook, None

    async def execute(self, request: web.Request) -> web.Response:
        hook, refusal = self._hook(request)
        if hook is None:
            assert refusal is not None
            return refusal
        payload, files = await read_body(request)
        if not (payload.get("content") or payload.get("embeds") or files):
            return error(400, "Cannot send an empty message", 50006)
        message = self.world.message_payload(
            hook.channel_id,
            self.world.bot,
            payload.get("content") or "",
            webhook_id=str(hook.id),
            application_id=str(hook.application_id) if hook.application_id else None,
            embeds=payload.get("embeds") or [],
            tts=bool(payload.get("tts")),
        )
        message["author"] = self._author(hook, payload)  # the same dict the world keeps
        self.sends.append(SentMessage(int(message["id"]), hook.channel_id, payload, message, files))
        if self.gateway.current is not None:
            # Discord shows every bot a webhook's message; a gateway closing at this moment
            # must not turn the REST call into an error.
            with suppress(ConnectionError, RuntimeError):
                await self.gateway.dispatch("MESSAGE_CREATE", message)
        if request.query.get("wait") not in ("1", "true", "True"):
            return web.Response(status=204)
        return json_response(message)

    def _author(self, hook: FakeWebhook, payload: JSON) -> JSON:
        """The webhook as the message's author, named by the execution's override."""
        return {
            "id": str(hook.id),
            "username": payload.get("username") or hook.name,
            "global_name": None,
            "avatar": hook.avatar_hash,
            "discriminator": "0000",
            "bot": True,
            "public_flags": 0,
        }

    def _message(self, request: web.Request) -> tuple[JSON | None, web.Response | None]:
        hook, refusal = self._hook(request)
        if hook is None:
            return None, refusal
        target = request.match_info["message_id"]
        message = self.world.messages.get(int(target)) if target.isdigit() else None
        if message is None or message.get("webhook_id") != str(hook.id):
            return None, error(404, "Unknown Message", 10008)
        return message, None

    async def get_message(self, request: web.Request) -> web.Response:
        message, refusal = self._message(request)
        return json_response(message) if message is not None else refusal or error(404, "?")

    async def edit_message(self, request: web.Request) -> web.Response:
        message, refusal = self._message(request)
        if message is None:
            return refusal or error(404, "?")
        payload, files = await read_body(request)
        apply_edit(message, payload)
        channel_id = int(message["channel_id"])
        self.edits.append(SentMessage(int(message["id"]), channel_id, payload, message, files))
        return json_response(message)


def by_webhook_id(hooks: ChannelWebhooks, channel: Handler, interaction: Handler) -> Handler:
    """One route for both kinds of webhook: a channel webhook's id, else an interaction's."""

    async def handle(request: web.Request) -> Any:
        return await (channel if hooks.owns(request) else interaction)(request)

    return handle
