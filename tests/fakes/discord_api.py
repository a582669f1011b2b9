"""A fake of Discord's REST API and Gateway on 127.0.0.1 for the real, unmodified discord.py.

Usage::

    async with FakeDiscord() as fake:
        restore = point_discord_at(fake.url)
        try:
            task = asyncio.create_task(bot.start(fake.token))
            await fake.wait_until_identified()
            await fake.dm(4242, "hello")
            replies = await fake.wait_for_dms(4242)
        finally:
            await bot.close()
            restore()

discord.py has two hard-coded endpoints that must be redirected before ``login``/``start``
(``point_discord_at`` does both, plus the CDN base):

* ``discord.http.Route.BASE`` - every REST call. The webhook adapter used for interaction
  callbacks and followups builds its URLs from the same ``Route``, so it follows along.
* ``discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY`` - a plain ``Client``/``commands.Bot``
  never calls GET /gateway/bot; it connects straight to this URL. Only ``AutoShardedClient``
  asks /gateway/bot (answered with the fake's ws URL). After READY, reconnects use READY's
  ``resume_gateway_url``, which is the fake's too.

Behaviour worth knowing when testing a bot against it:

* ``dm``/``guild_message``/``slash_command`` are coroutines that wait (up to 5 s) for an
  identified gateway session, so they can be called right after starting the bot.
* discord.py fires ``on_ready`` only ``guild_ready_timeout`` (default 2 s) after the last
  GUILD_CREATE; pass ``guild_ready_timeout=0.05`` to the client to keep tests fast.
* Like Discord, the bot's own messages come back as MESSAGE_CREATE, and intents are enforced:
  no DIRECT_MESSAGES/GUILD_MESSAGES intent means no event (see ``suppressed_events``), no
  MESSAGE_CONTENT intent means blank guild messages unless the bot is mentioned.
* Sends to the bot's DM channel with a user are found with ``sent_dms(user_id)``.
* Channel webhooks (create, list, execute, edit) are in ``fake.webhooks``
  (tests/fakes/discord_webhooks.py), with the Manage Webhooks switch.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self

import yarl
from aiohttp import web
from discord.asset import Asset
from discord.gateway import DiscordWebSocket
from discord.http import Route

from tests.fakes.discord_gateway import FakeGateway, GatewayConnection
from tests.fakes.discord_records import (
    Changes,
    Followup,
    InteractionCallback,
    RecordedRequest,
    SentMessage,
)
from tests.fakes.discord_rest import FakeRest
from tests.fakes.discord_world import JSON, FakeAttachment, FakeUser, FakeWorld, build_options
from tests.patience import PATIENCE

__all__ = [
    "DEFAULT_USER_ID",
    "FakeAttachment",
    "FakeDiscord",
    "FakeUser",
    "Followup",
    "InteractionCallback",
    "SentMessage",
    "point_discord_at",
]

DEFAULT_USER_ID = 222_222_222_222_222_222


def point_discord_at(url: str) -> Callable[[], None]:
    """Redirect discord.py's REST, Gateway and CDN base URLs to ``url``; returns the undo."""
    saved = (Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY, Asset.BASE)
    base = url.rstrip("/")
    Route.BASE = f"{base}/api/v10"
    DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL("ws" + base.removeprefix("http") + "/gateway")
    # Only used if the bot downloads an avatar or icon; the fake answers 404 for those.
    Asset.BASE = f"{base}/cdn"

    def restore() -> None:
        Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY, Asset.BASE = saved

    return restore


class FakeDiscord:
    """One bot user, one guild with text channels, DMs, and slash-command interactions."""

    def __init__(
        self,
        *,
        token: str | None = "fake-bot-token",
        bot_name: str = "Companion",
        guild_name: str = "Fake Guild",
        channel_names: Sequence[str] = ("general", "random"),
        heartbeat_interval_ms: int = 2_000,
        echo_own_messages: bool = True,
    ) -> None:
        if heartbeat_interval_ms < 1_000:
            raise ValueError("heartbeat_interval_ms below 1000 only adds noise")
        self.token = token
        self.world = FakeWorld(bot_name, guild_name, channel_names)
        self.changes = Changes()
        self.gateway = FakeGateway(self.world, self.changes, token, heartbeat_interval_ms)
        self.rest = FakeRest(self.world, self.changes, self.gateway, token)
        self.rest.echo_own_messages = echo_own_messages
        # Channel webhooks: their state, what was posted through them, the permission switch.
        self.webhooks = self.rest.webhooks
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        app = web.Application(middlewares=[self.rest.middleware])
        app.add_routes([web.get("/gateway", self.gateway.handle), *self.rest.routes()])
        # Binding the socket ourselves is the public way to learn an ephemeral port.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        # handler_cancellation: a still-open gateway websocket must not hold up shutdown.
        self._runner = web.AppRunner(
            app, access_log=None, handler_cancellation=True, shutdown_timeout=1.0
        )
        await self._runner.setup()
        await web.SockSite(self._runner, sock).start()
        self.url = f"http://127.0.0.1:{port}"
        self.gateway.ws_url = f"ws://127.0.0.1:{port}/gateway"
        self.rest.base_url = self.url

    async def stop(self) -> None:
        await self.gateway.close_all()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- identity -------------------------------------------------------------------------------

    @property
    def bot_user(self) -> FakeUser:
        return self.world.bot

    @property
    def application_id(self) -> int:
        return self.world.application_id

    @property
    def guild_id(self) -> int:
        return self.world.guild_id

    @property
    def channel_ids(self) -> list[int]:
        return list(self.world.channels)

    @property
    def channel_id(self) -> int:
        return self.channel_ids[0]

    @property
    def ws_url(self) -> str:
        return self.gateway.ws_url

    def add_user(self, user_id: int, username: str | None = None, *, bot: bool = False) -> FakeUser:
        """Make a guild member; members added before connecting are in GUILD_CREATE."""
        self.world.guild_members.add(user_id)
        return self.world.user(user_id, username, bot=bot)

    def add_role(self, name: str) -> int:
        """A role of the guild (in GUILD_CREATE: add it before connecting); its id."""
        role_id = self.world.ids.next()
        self.world.roles[role_id] = name
        return role_id

    def give_role(self, user_id: int, role_id: int) -> None:
        """The member holds the role in every member object sent from now on."""
        self.world.member_roles.setdefault(user_id, []).append(role_id)

    def dm_channel_id(self, user_id: int) -> int:
        """The DM channel with this user; the same id the bot gets from create_dm."""
        return self.world.dm_channel_id(user_id)

    # -- gateway --------------------------------------------------------------------------------

    async def wait_until_identified(self, timeout: float = PATIENCE) -> None:  # noqa: ASYNC109
        await self.gateway.wait_until_identified(timeout)

    @property
    def identify_payload(self) -> JSON | None:
        """The ``d`` of the last IDENTIFY (token, intents, properties...)."""
        identified = [c.identify for c in self.gateway.connections if c.identify]
        return identified[-1] if identified else None

    @property
    def gateway_connections(self) -> list[GatewayConnection]:
        return list(self.gateway.connections)

    @property
    def resumes(self) -> int:
        return self.gateway.resumes

    @property
    def suppressed_events(self) -> list[tuple[str, JSON]]:
        """Events not delivered because the bot lacked the intent, e.g. DIRECT_MESSAGES."""
        return list(self.gateway.suppressed)

    async def dispatch(self, event: str, data: JSON) -> bool:
        """Send any gateway event; False if the bot's intents filtered it out."""
        return await self.gateway.dispatch(event, data)

    async def drop_gateway(self, code: int = 4000) -> None:
        """Close the gateway connection; discord.py then reconnects and RESUMEs."""
        await self.gateway.drop(code)

    async def dm(
        self,
        user_id: int,
        content: str,
        *,
        username: str | None = None,
        author_bot: bool = False,
        reply_to: int | None = None,
        attachments: Sequence[FakeAttachment] | None = None,
        stickers: Sequence[str] = (),
    ) -> JSON:
        """A DM from ``user_id`` to the bot; returns the MESSAGE_CREATE payload."""
        return await self._user_message(
            self.dm_channel_id(user_id),
            user_id,
            content,
            username=username,
            author_bot=author_bot,
            reply_to=reply_to,
            attachments=attachments,
            stickers=stickers,
        )

    async def guild_message(
        self,
        user_id: int,
        content: str,
        mention_bot: bool = False,
        reply_to: int | None = None,
        author_bot: bool = False,
        attachments: Sequence[FakeAttachment] | None = None,
        *,
        channel_id: int | None = None,
        username: str | None = None,
        stickers: Sequence[str] = (),
        reply_mention: bool = True,
    ) -> JSON:
        """A message in a guild text channel (``fake.channel_id`` unless given).

        ``reply_to`` is a message id; the referenced message is inlined when the fake knows it
        and, like Discord's default reply ping, its author is mentioned unless ``reply_mention``
        is False. ``stickers`` are sticker names.
        """
        return await self._user_message(
            channel_id or self.channel_id,
            user_id,
            content,
            username=username,
            author_bot=author_bot,
            reply_to=reply_to,
            attachments=attachments,
            stickers=stickers,
            mention_bot=mention_bot,
            reply_mention=reply_mention,
        )

    async def _user_message(self, channel_id: int, user_id: int, content: str, **kw: Any) -> JSON:
        message = self.world.user_message(channel_id, user_id, content, base_url=self.url, **kw)
        await self.gateway.dispatch("MESSAGE_CREATE", message)
        return message

    async def slash_command(
        self,
        name: str,
        options: Mapping[str, object] | Sequence[JSON] | None = None,
        user_id: int = DEFAULT_USER_ID,
        guild: bool = True,
        *,
        group: str | None = None,
        subcommand: str | None = None,
        username: str | None = None,
        channel_id: int | None = None,
        locale: str | None = None,
    ) -> int:
        """Invoke ``/name [group] [subcommand] options...``; returns the interaction id.

        A mapping of options is typed from the values (str, int, float, bool); a list is sent
        as raw Discord options. ``guild=False`` invokes it in the user's DM with the bot.
        """
        user = self.world.user(user_id, username)
        guild_id = self.guild_id if guild else None
        channel = (channel_id or self.channel_id) if guild else self.dm_channel_id(user_id)
        state = self.world.new_interaction(channel, guild_id)
        command_id = self.rest.command_id(name, guild_id)
        data: JSON = {
            "id": str(command_id or self.world.ids.next()),
            "name": name,
            "type": 1,
            "options": build_options(options, group, subcommand),
        }
        # discord.py's tree looks a command up among guild commands only if data has guild_id.
        guild_commands = self.rest.registered_commands.get(guild_id) if guild_id else None
        if guild_commands and any(c["name"] == name for c in guild_commands):
            data["guild_id"] = str(guild_id)
        payload = self.world.interaction_payload(state, user, data, locale)
        await self.gateway.dispatch("INTERACTION_CREATE", payload)
        return state.id

    async def press_button(
        self, user_id: int, message: JSON, custom_id: str, *, guild: bool = False
    ) -> int:
        """Press the button ``custom_id`` of ``message``; returns the interaction id."""
        state = self.world.new_interaction(
            int(message["channel_id"]), self.guild_id if guild else None
        )
        state.message = message
        data = {"custom_id": custom_id, "component_type": 2}
        payload = self.world.interaction_payload(state, self.world.user(user_id), data)
        await self.gateway.dispatch(
            "INTERACTION_CREATE", {**payload, "type": 3, "message": message}
        )
        return state.id

    # -- recordings -----------------------------------------------------------------------------

    def sent_messages(self, channel_id: int | None = None) -> list[SentMessage]:
        return [m for m in self.rest.sent if channel_id is None or m.channel_id == channel_id]

    def sent_dms(self, user_id: int) -> list[SentMessage]:
        return self.sent_messages(self.dm_channel_id(user_id))

    @property
    def edited_messages(self) -> list[SentMessage]:
        return list(self.rest.edits)

    @property
    def deleted_messages(self) -> list[tuple[int, int]]:
        """(channel id, message id) pairs."""
        return list(self.rest.deleted)

    @property
    def typing_calls(self) -> list[int]:
        """Channel ids, one per POST /channels/{id}/typing."""
        return list(self.rest.typing_calls)

    @property
    def registered_commands(self) -> dict[int | None, list[JSON]]:
        """The last synced command list per guild id; None holds the global commands."""
        return dict(self.rest.registered_commands)

    @property
    def interaction_responses(self) -> list[InteractionCallback]:
        return list(self.rest.interaction_responses)

    @property
    def followups(self) -> list[Followup]:
        return list(self.rest.followups)

    @property
    def unknown_routes(self) -> list[tuple[str, str]]:
        """(method, path) of every request no fake route matched."""
        return list(self.rest.unknown_routes)

    @property
    def requests(self) -> list[RecordedRequest]:
        return list(self.rest.requests)

    @property
    def errors(self) -> list[BaseException]:
        """Exceptions raised inside the fake's own handlers (answered with 400)."""
        return list(self.rest.errors)

    # -- waiting --------------------------------------------------------------------------------
    # A timeout argument reads better in tests than wrapping every call in asyncio.timeout.

    async def wait_for_messages(
        self,
        channel_id: int,
        count: int = 1,
        timeout: float = PATIENCE,  # noqa: ASYNC109
    ) -> list[SentMessage]:
        def check() -> list[SentMessage] | None:
            found = self.sent_messages(channel_id)
            return found if len(found) >= count else None

        def what() -> str:
            seen = [(m.channel_id, m.content) for m in self.rest.sent]
            return f"expected {count} message(s) in channel {channel_id}; all sent: {seen}"

        return await self.changes.wait_for(check, timeout, what)

    async def wait_for_dms(
        self,
        user_id: int,
        count: int = 1,
        timeout: float = PATIENCE,  # noqa: ASYNC109
    ) -> list[SentMessage]:
        return await self.wait_for_messages(self.dm_channel_id(user_id), count, timeout)

    async def wait_for_typing(self, channel_id: int, timeout: float = PATIENCE) -> None:  # noqa: ASYNC109
        def check() -> bool | None:
            return True if channel_id in self.rest.typing_calls else None

        def what() -> str:
            return f"no typing in {channel_id}; typing calls: {self.rest.typing_calls}"

        await self.changes.wait_for(check, timeout, what)

    async def wait_for_commands(
        self,
        guild_id: int | None = None,
        timeout: float = PATIENCE,  # noqa: ASYNC109
    ) -> list[JSON]:
        def what() -> str:
            return f"no command sync for guild {guild_id}; synced: {list(self.registered_commands)}"

        return await self.changes.wait_for(
            lambda: self.rest.registered_commands.get(guild_id), timeout, what
        )

    async def wait_for_interaction_response(
        self,
        interaction_id: int,
        timeout: float = PATIENCE,  # noqa: ASYNC109
    ) -> InteractionCallback:
        def check() -> InteractionCallback | None:
            responses = self.rest.interaction_responses
            return next((r for r in responses if r.interaction_id == interaction_id), None)

        def what() -> str:
            return f"no response to interaction {interaction_id}; errors: {self.rest.errors}"

        return await self.changes.wait_for(check, timeout, what)

    async def wait_for_followups(
        self,
        interaction_id: int,
        count: int = 1,
        timeout: float = PATIENCE,  # noqa: ASYNC109
    ) -> list[Followup]:
        def check() -> list[Followup] | None:
            found = [f for f in self.rest.followups if f.interaction_id == interaction_id]
            return found if len(found) >= count else None

        def what() -> str:
            seen = [(f.interaction_id, f.method, f.content) for f in self.rest.followups]
            return f"expected {count} followup(s) to {interaction_id}; all followups: {seen}"

        return await self.changes.wait_for(check, timeout, what)
