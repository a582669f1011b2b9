"""The fake Discord REST API: the routes discord.py 2.7 uses for a chat bot with slash commands.

Every request is recorded; unknown routes answer 404 JSON like Discord and are listed in
``unknown_routes``. A bug in a handler answers 400 rather than 500, because discord.py retries a
500 five times with growing sleeps and a fake bug would then look like a 25 s hang.
"""

from __future__ import annotations

import asyncio
from contextlib import suppress
from typing import Any

from aiohttp import web

from tests.fakes.discord_gateway import FakeGateway
from tests.fakes.discord_hooks import InteractionRoutes
from tests.fakes.discord_http import (
    API,
    OCTET_STREAM,
    RECORD,
    Handler,
    apply_edit,
    error,
    json_response,
    read_body,
)
from tests.fakes.discord_records import (
    Changes,
    Followup,
    InteractionCallback,
    RecordedRequest,
    SentMessage,
    UploadedFile,
)
from tests.fakes.discord_webhooks import ChannelWebhooks, by_webhook_id
from tests.fakes.discord_world import (
    APPLICATION_FLAGS,
    JSON,
    FakeAttachment,
    FakeWorld,
)


class FakeRest(InteractionRoutes):
    def __init__(self, world: FakeWorld, changes: Changes, gateway: FakeGateway, token: str | None):
        self.world = world
        self.changes = changes
        self.gateway = gateway
        self.token = token
        self.base_url = ""
        self.echo_own_messages = True
        self.requests: list[RecordedRequest] = []
        self.sent: list[SentMessage] = []
        self.edits: list[SentMessage] = []
        self.deleted: list[tuple[int, int]] = []
        self.typing_calls: list[int] = []
        self.registered_commands: dict[int | None, list[JSON]] = {}
        self.interaction_responses: list[InteractionCallback] = []
        self.followups: list[Followup] = []
        self.unknown_routes: list[tuple[str, str]] = []
        self.errors: list[BaseException] = []
        # Create-message nonces sent with enforce_nonce, and the sends they made a repeat of.
        self.nonces: dict[str, JSON] = {}
        self.deduplicated: list[SentMessage] = []
        # Set: each created message's response waits for it (a sender killed meanwhile).
        self.send_gate: asyncio.Event | None = None
        # Set: opening a DM channel waits for it (nothing is sent yet); `dm_requested` is set
        # when such a request arrives.
        self.dm_gate: asyncio.Event | None = None
        self.dm_requested = asyncio.Event()
        self._command_ids: dict[tuple[int | None, str, int], int] = {}
        self.webhooks = ChannelWebhooks(world, changes, gateway)

    def routes(self) -> list[web.RouteDef]:
        msg = API + r"/channels/{channel_id:\d+}/messages/{message_id:\d+}"
        # Interactions' webhooks (the application's id) and channel webhooks share these.
        hook = API + r"/webhooks/{webhook_id:\d+}/{token}"
        channel_hooks = API + r"/channels/{channel_id:\d+}/webhooks"
        hooks = self.webhooks
        guild_commands = API + r"/applications/{app_id}/guilds/{guild_id:\d+}/commands"
        return [
            web.get(API + "/users/@me", self._get_me),
            web.get(API + r"/users/{user_id:\d+}", self._get_user),
            web.get(API + "/oauth2/applications/@me", self._get_application),
            web.get(API + "/applications/@me", self._get_application),
            web.get(API + "/gateway", self._get_gateway),
            web.get(API + "/gateway/bot", self._get_gateway),
            web.post(API + "/users/@me/channels", self._create_dm),
            web.get(API + r"/channels/{channel_id:\d+}", self._get_channel),
            web.get(API + r"/guilds/{guild_id:\d+}", self._get_guild),
            web.post(API + r"/channels/{channel_id:\d+}/messages", self._post_message),
            web.get(msg, self._get_message),
            web.patch(msg, self._edit_message),
            web.delete(msg, self._delete_message),
            web.post(API + r"/channels/{channel_id:\d+}/typing", self._typing),
            web.put(API + "/applications/{app_id}/commands", self._put_commands),
            web.get(API + "/applications/{app_id}/commands", self._get_commands),
            web.put(guild_commands, self._put_commands),
            web.get(guild_commands, self._get_commands),
            web.post(API + "/interactions/{interaction_id}/{token}/callback", self._callback),
            web.post(channel_hooks, hooks.create),
            web.get(API + r"/webhooks/{webhook_id:\d+}", hooks.get),
            web.get(channel_hooks, hooks.list),
            web.post(hook, by_webhook_id(hooks, hooks.execute, self._followup)),
            web.get(
                hook + "/messages/{message_id}",
                by_webhook_id(hooks, hooks.get_message, self._get_hook_message),
            ),
            web.patch(
                hook + "/messages/{message_id}",
                by_webhook_id(hooks, hooks.edit_message, self._edit_hook_message),
            ),
            web.delete(hook + "/messages/{message_id}", self._delete_hook_message),
            web.get(r"/attachments/{attachment_id:\d+}/{filename}", self._attachment),
            # Last on purpose: aiohttp tries routes in order, so this only sees unmatched paths.
            web.route("*", "/{tail:.*}", self._unknown),
        ]

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        record = RecordedRequest(request.method, request.path, dict(request.query))
        self.requests.append(record)
        request[RECORD] = record
        try:
            if self._authorized(request):
                response = await handler(request)
            else:
                response = error(401, "401: Unauthorized")
        except Exception as exc:
            self.errors.append(exc)
            response = error(400, f"fake Discord failed on {request.method} {request.path}: {exc}")
        record.status = response.status
        self.changes.notify()
        return response

    def _authorized(self, request: web.Request) -> bool:
        # Interaction callbacks and webhooks authenticate with the token in the URL, not a header.
        path = request.path
        exempt = not path.startswith("/api/") or "/webhooks/" in path or "/interactions/" in path
        if exempt or self.token is None:
            return True
        return request.headers.get("Authorization") == f"Bot {self.token}"

    # -- identity and startup -------------------------------------------------------------------

    async def _get_me(self, request: web.Request) -> web.Response:
        me = {**self.world.bot.payload(), "verified": True, "mfa_enabled": False, "flags": 0}
        return json_response(me)

    async def _get_user(self, request: web.Request) -> web.Response:
        user = self.world.users.get(int(request.match_info["user_id"]))
        return json_response(user.payload()) if user else error(404, "Unknown User", 10013)

    async def _get_application(self, request: web.Request) -> web.Response:
        return json_response(
            {
                "id": str(self.world.application_id),
                "name": self.world.bot.username,
                "description": "",
                "icon": None,
                "bot_public": True,
                "bot_require_code_grant": False,
                "owner": self.world.owner.payload(),
                "verify_key": "0" * 64,
                "flags": APPLICATION_FLAGS,
                "bot": self.world.bot.payload(),
            }
        )

    async def _get_gateway(self, request: web.Request) -> web.Response:
        limit = {"total": 1000, "remaining": 1000, "reset_after": 0, "max_concurrency": 1}
        body = {"url": self.gateway.ws_url, "shards": 1, "session_start_limit": limit}
        return json_response(body)

    # -- channels and messages ------------------------------------------------------------------

    async def _create_dm(self, request: web.Request) -> web.Response:
        payload, _ = await read_body(request)
        self.dm_requested.set()
        if self.dm_gate is not None:
            await self.dm_gate.wait()
        channel_id = self.world.dm_channel_id(int(payload["recipient_id"]))
        return json_response(self.world.channel_payload(channel_id))

    async def _get_channel(self, request: web.Request) -> web.Response:
        channel = self.world.channel_payload(int(request.match_info["channel_id"]))
        return json_response(channel) if channel else error(404, "Unknown Channel", 10003)

    async def _get_guild(self, request: web.Request) -> web.Response:
        if int(request.match_info["guild_id"]) != self.world.guild_id:
            return error(404, "Unknown Guild", 10004)
        gateway_only = ("members", "channels", "threads", "presences", "voice_states")
        guild = {k: v for k, v in self.world.guild_create().items() if k not in gateway_only}
        return json_response(guild)

    async def _post_message(self, request: web.Request) -> web.Response:
        channel_id = int(request.match_info["channel_id"])
        if self.world.channel_payload(channel_id) is None:
            return error(404, "Unknown Channel", 10003)
        payload, files = await read_body(request)
        nonce = (
            str(payload["nonce"]) if payload.get("enforce_nonce") and "nonce" in payload else None
        )
        if nonce is not None and nonce in self.nonces:
            # Discord: the same author's message with this nonce, sent again, is returned as
            # it was and not created twice.
            earlier = self.nonces[nonce]
            self.deduplicated.append(SentMessage(int(earlier["id"]), channel_id, payload, earlier))
            return json_response(earlier)
        message = self._bot_message(channel_id, payload, files)
        if nonce is not None:
            self.nonces[nonce] = message
        self.sent.append(SentMessage(int(message["id"]), channel_id, payload, message, files))
        if self.echo_own_messages and self.gateway.current is not None:
            # Discord echoes the bot's own messages on the gateway; bots must ignore them. A
            # gateway closing at this moment must not turn the REST call into an error.
            with suppress(ConnectionError, RuntimeError):
                await self.gateway.dispatch("MESSAGE_CREATE", message)
        if self.send_gate is not None:
            await self.send_gate.wait()
        return json_response(message)

    def _bot_message(
        self, channel_id: int, payload: JSON, files: list[UploadedFile], **extra: Any
    ) -> JSON:
        reference = payload.get("message_reference") or {}
        if reference.get("message_id"):
            extra = {**self.world.reply_fields(int(reference["message_id"])), **extra}
        attachments = [
            FakeAttachment(f.filename or f.field, f.data, f.content_type or OCTET_STREAM)
            for f in files
        ]
        return self.world.message_payload(
            channel_id,
            self.world.bot,
            payload.get("content") or "",
            embeds=payload.get("embeds") or [],
            components=payload.get("components") or [],
            flags=int(payload.get("flags") or 0),
            tts=bool(payload.get("tts")),
            nonce=payload.get("nonce"),
            attachments=[self.world.attachment_payload(a, self.base_url) for a in attachments],
            **extra,
        )

    def _stored_message(self, request: web.Request) -> JSON | None:
        message = self.world.messages.get(int(request.match_info["message_id"]))
        if message is None or message["channel_id"] != request.match_info["channel_id"]:
            return None
        return message

    async def _get_message(self, request: web.Request) -> web.Response:
        message = self._stored_message(request)
        return json_response(message) if message else error(404, "Unknown Message", 10008)

    async def _edit_message(self, request: web.Request) -> web.Response:
        message = self._stored_message(request)
        if message is None:
            return error(404, "Unknown Message", 10008)
        payload, files = await read_body(request)
        apply_edit(message, payload)
        channel_id = int(message["channel_id"])
        self.edits.append(SentMessage(int(message["id"]), channel_id, payload, message, files))
        return json_response(message)

    async def _delete_message(self, request: web.Request) -> web.Response:
        message = self._stored_message(request)
        if message is None:
            return error(404, "Unknown Message", 10008)
        self.deleted.append((int(message["channel_id"]), int(message["id"])))
        del self.world.messages[int(message["id"])]
        return web.Response(status=204)

    async def _typing(self, request: web.Request) -> web.Response:
        channel_id = int(request.match_info["channel_id"])
        if self.world.channel_payload(channel_id) is None:
            return error(404, "Unknown Channel", 10003)
        self.typing_calls.append(channel_id)
        return web.Response(status=204)

    async def _attachment(self, request: web.Request) -> web.StreamResponse:
        attachment = self.world.attachments.get(int(request.match_info["attachment_id"]))
        if attachment is None:
            return error(404, "404: Not Found")
        if attachment.paced is not None:
            return await attachment.paced.serve(request, attachment.content_type)
        return web.Response(body=attachment.data, content_type=attachment.content_type)

    async def _unknown(self, request: web.Request) -> web.Response:
        self.unknown_routes.append((request.method, request.path))
        return error(404, "404: Not Found")

    # -- application commands -------------------------------------------------------------------

    async def _put_commands(self, request: web.Request) -> web.Response:
        guild = request.match_info.get("guild_id")
        guild_id = int(guild) if guild else None
        payload, _ = await read_body(request)
        commands = [self._registered(command, guild_id) for command in payload]
        self.registered_commands[guild_id] = commands
        return json_response(commands)

    async def _get_commands(self, request: web.Request) -> web.Response:
        guild = request.match_info.get("guild_id")
        return json_response(self.registered_commands.get(int(guild) if guild else None, []))

    def _registered(self, command: JSON, guild_id: int | None) -> JSON:
        kind = int(command.get("type", 1))
        # Re-syncing keeps a command's id, as Discord does for an unchanged name and type.
        key = (guild_id, command["name"], kind)
        command_id = self._command_ids.setdefault(key, self.world.ids.next())
        registered = {
            "description": "",
            "options": [],
            "default_member_permissions": None,
            "nsfw": False,
            **command,
            "id": str(command_id),
            "application_id": str(self.world.application_id),
            "type": kind,
            "version": str(self.world.ids.next()),
        }
        if guild_id is not None:
            registered["guild_id"] = str(guild_id)
        return registered

    def command_id(self, name: str, guild_id: int | None) -> int | None:
        """The registered id of a chat-input command, guild commands before global ones."""
        for scope in (guild_id, None):
            if (scope, name, 1) in self._command_ids and scope in self.registered_commands:
                return self._command_ids[(scope, name, 1)]
        return None
