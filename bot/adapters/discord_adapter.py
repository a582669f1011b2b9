"""The Discord adapter: discord.py events in, `Commands` calls, replies out.

Setup in the Discord developer portal (https://discord.com/developers/applications):

* Bot > Privileged Gateway Intents: enable **Message Content**. Without it Discord sends guild
  messages with empty text (except those that mention the bot), and connecting with the intent
  requested but not enabled fails with ``PrivilegedIntentsRequired``.
* Invite the bot with the ``bot`` and ``applications.commands`` scopes. Slash commands are synced
  globally at start when they changed since the last sync (a hash next to the database);
  Discord may take a while to show changed ones everywhere.

Where the bot answers: always in DMs. A guild channel is a scene (bot/scenes.py): its messages
go to the scene, which hears those that mention the bot, reply to its messages or to one of
its characters' webhook messages, name a character present, or come in a bound channel
(``/personaje vincular``); each character answers through a webhook of its own
(bot/adapters/discord_scene.py). Photos and other attachments in a guild are answered, when
addressed to the bot, by the per-user path. Other bots, itself included, and webhooks (the
characters' own lines among them) are never answered.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable

import discord
import yarl
from discord import app_commands
from discord.gateway import DiscordWebSocket
from discord.http import Route

from bot.adapters.base import InFlight
from bot.adapters.discord_scene import (
    DiscordSceneOutlet,
    SceneWebhooks,
    WebhookPoster,
    header_name,
)
from bot.adapters.discord_slash import RegistryTranslator, add_slash_commands, sync_if_changed
from bot.adapters.discord_views import (
    NO_PINGS,
    InteractionAnswers,
    live_reply,
    message_caller,
    parts,
    reply_to,
)
from bot.adapters.live import LiveReply
from bot.commands import Answer, ArrivalOrder, Caller, Commands
from bot.config import Settings
from bot.downloads import read_capped
from memory.errors import UserFacingError

log = logging.getLogger(__name__)

DEFAULT_READY_TIMEOUT = 60.0
# Ordinary posts and replies; joins, pins, boosts and other system messages are not chat.
CHAT_MESSAGE_TYPES = (discord.MessageType.default, discord.MessageType.reply)


# Gateway close codes that mean a configuration problem rather than a network one.
GATEWAY_CLOSE_REASONS = {
    4004: "authentication failed; check DISCORD_BOT_TOKEN",
    4013: "invalid intents",
    4014: "privileged intents not enabled; turn on Message Content in the developer portal",
}


def gateway_failure(error: BaseException | None) -> str:
    if isinstance(error, discord.PrivilegedIntentsRequired):
        return GATEWAY_CLOSE_REASONS[4014]
    code = getattr(error, "code", None)
    return GATEWAY_CLOSE_REASONS.get(code or 0) or (repr(error) if error else "closed cleanly")


def intents() -> discord.Intents:
    chosen = discord.Intents.none()
    chosen.guilds = chosen.dm_messages = chosen.guild_messages = True
    chosen.message_content = True  # privileged: must be enabled in the developer portal
    return chosen


async def wait_until_ready(
    client: discord.Client,
    gateway: asyncio.Task[None],
    timeout: float,  # noqa: ASYNC109
) -> None:
    """Return once the gateway said READY; close the client and say why if it never does."""
    ready = asyncio.ensure_future(client.wait_until_ready())
    done, _ = await asyncio.wait(
        {gateway, ready}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
    )
    if ready in done:
        return
    ready.cancel()
    await client.close()
    if gateway in done:
        error = None if gateway.cancelled() else gateway.exception()
        raise RuntimeError(
            f"discord: the gateway connection ended before READY: {gateway_failure(error)}"
        ) from error
    raise TimeoutError(
        f"discord: no READY from the gateway within {timeout:.0f} s; check "
        "network access to Discord, DISCORD_API_BASE_URL and DISCORD_BOT_TOKEN"
    )


class DiscordRedirect:
    """Point discord.py at another Discord API (DISCORD_API_BASE_URL): a proxy or a test fake.

    discord.py has no per-client setting for this: the REST base (``Route.BASE``) and the
    gateway (``DiscordWebSocket.DEFAULT_GATEWAY``) are class attributes, so they are
    process-wide and every client in the process follows them. One process runs one Discord
    bot, which makes that acceptable; ``undo`` puts back what was there so that nothing leaks
    past the adapter's life (tests start several adapters in one process).

    The REST base is set at construction, before anything can call the API. The gateway is not
    guessed from the REST URL: after login, ``GET /gateway/bot`` of the configured API says
    where it is (a REST-only proxy answers with Discord's own gateway, a fake with its own).
    """

    def __init__(self, api_base_url: str) -> None:
        self._saved = (Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY)
        self.base = api_base_url.rstrip("/")
        self.active = self.base != Route.BASE
        if self.active:
            Route.BASE = self.base
        self._gateway: yarl.URL | None = None

    async def follow_gateway(self, client: discord.Client) -> None:
        if not self.active:
            return
        _, url, _ = await client.http.get_bot_gateway()
        self._gateway = yarl.URL(url)
        DiscordWebSocket.DEFAULT_GATEWAY = self._gateway
        log.info("discord: API at %s, gateway at %s", self.base, url)

    def undo(self) -> None:
        # Only our own values are put back: another adapter may have set newer ones since.
        if self.active and self.base == Route.BASE:
            Route.BASE = self._saved[0]
        if self._gateway is not None and self._gateway == DiscordWebSocket.DEFAULT_GATEWAY:
            DiscordWebSocket.DEFAULT_GATEWAY = self._saved[1]


class DiscordAdapter:
    name = "discord"

    def __init__(
        self,
        settings: Settings,
        commands: Commands,
        *,
        guild_ready_timeout: float = 2.0,
        ready_timeout: float = DEFAULT_READY_TIMEOUT,
        responder: InteractionAnswers | None = None,
        poster: WebhookPoster | None = None,
    ) -> None:
        """``guild_ready_timeout``: how long discord.py waits for more guilds before on_ready
        (tests pass a tiny value); ``ready_timeout``: how long start() waits to be connected;
        ``responder``: how interactions are answered, ``poster``: how the characters' lines
        are posted through webhooks (a worker records both kinds of send)."""
        self._settings = settings
        self._commands = commands
        self._ready_timeout = ready_timeout
        self._inflight = InFlight()
        self._order = ArrivalOrder()
        self._redirect = DiscordRedirect(settings.discord_api_base_url)
        self._client = discord.Client(
            intents=intents(), allowed_mentions=NO_PINGS, guild_ready_timeout=guild_ready_timeout
        )
        self._responder = responder or InteractionAnswers(commands)
        self._webhooks = SceneWebhooks(self._client, poster)
        self._client.add_dynamic_items(self._responder.button_type)
        self._tree = app_commands.CommandTree(self._client)
        self._tree.error(self._responder.on_command_error)
        add_slash_commands(self._tree, commands, self._responder)
        self._client.event(self.on_ready)
        self._client.event(self.on_message)
        self._gateway_task: asyncio.Task[None] | None = None

    @property
    def client(self) -> discord.Client:
        return self._client

    @property
    def tree(self) -> app_commands.CommandTree[discord.Client]:
        return self._tree

    @property
    def responder(self) -> InteractionAnswers:
        return self._responder

    async def start(self) -> None:
        """Log in, sync the slash commands, connect, and return once Discord says READY."""
        await self.login()
        self._gateway_task = asyncio.create_task(self._client.connect(), name="discord-gateway")
        await wait_until_ready(self._client, self._gateway_task, self._ready_timeout)

    async def login(self, *, sync: bool = True) -> None:
        """Log in over REST (a worker stops here: it answers without a gateway) and sync the
        slash commands when `sync` and they changed."""
        token = self._settings.discord_bot_token
        if token is None:
            raise UserFacingError("DISCORD_BOT_TOKEN is not set; put the bot's token in .env.")
        try:
            await self._client.login(token.get_secret_value())
            await self._redirect.follow_gateway(self._client)
            await self._tree.set_translator(RegistryTranslator())
            assert self._client.application_id is not None  # known once logged in
            state = self._settings.database_path.parent / "discord-commands.sha256"
            if sync:
                await sync_if_changed(self._tree, self._client.application_id, state)
        except BaseException:
            await self._client.close()  # login opened an HTTP session
            raise

    async def send_private(self, platform_user_id: str, message: str) -> bool:
        """An unprompted message to the user's DM channel, opened when needed."""
        try:
            user_id = int(platform_user_id)
            user = self.client.get_user(user_id) or await self.client.fetch_user(user_id)
            channel = user.dm_channel or await user.create_dm()
            for send in parts(Answer(message), None):
                await channel.send(**send)
        except (discord.DiscordException, ValueError):
            log.warning("discord: could not write to user %s", platform_user_id, exc_info=True)
            return False
        return True

    async def stop(self) -> None:
        """Take no new messages, let the replies in flight finish (bounded), disconnect."""
        await self._inflight.drain(self._settings.shutdown_grace_seconds)
        await self._client.close()
        if self._gateway_task is not None:
            try:
                await self._gateway_task
            except Exception:
                log.exception("discord: the gateway connection ended with an error")
        self._redirect.undo()

    async def on_ready(self) -> None:
        # Fired again after every new gateway session, not only the first one.
        user, guilds = self._client.user, len(self._client.guilds)
        log.info("discord: connected as %s (id %s) to %d guild(s)", user, user and user.id, guilds)

    async def on_message(self, message: discord.Message) -> None:
        """Every message the bot can see: a guild's chat to its scene, the rest answered when
        addressed to the bot."""
        if message.author.bot or message.webhook_id is not None:
            return  # answering bots, our own echo or a character's line risks endless loops
        if message.type not in CHAT_MESSAGE_TYPES:
            return
        if not self._inflight.accepting:
            log.info("discord: shutting down; message %s left unanswered", message.id)
            return
        if self._in_scene(message):
            await self._to_scene(message)
            return
        key = f"{message.channel.id}:{message.author.id}"
        async with self._inflight.track():
            caller = message_caller(message)
            live = live_reply(message, self._settings)
            try:
                # The gate keeps arrival order up to the hand-over to the engine, and no
                # further: messages arriving while this one is answered join its burst.
                async with self._order.hold(key):
                    if not await self._addressed(message, caller):
                        return
                    pending = await self._submit(message, caller, live)
                async with message.channel.typing():  # shown for the whole generation
                    answer = await pending
            except Exception as exc:
                answer = await self._responder.error_answer(caller, exc)
            if answer.text or answer.document is not None:  # "": its burst is answered later
                sends = parts(answer, self._responder.view_of(answer))
                shown = (
                    live is not None
                    and sends[0].keys() == {"content"}
                    and await live.finish(sends[0]["content"])
                )
                await reply_to(message, sends[1:] if shown else sends, first_is_reply=not shown)

    async def _addressed(self, message: discord.Message, caller: Caller) -> bool:
        """DMs always; in a guild: a mention, a reply to the bot, or a bound channel."""
        if caller.channel_kind == "dm" or self._mentions_me(message):
            return True
        replied = message.reference.resolved if message.reference else None
        if isinstance(replied, discord.Message) and replied.author.id == self._me.id:
            return True
        return await self._commands.is_bound(caller)

    @property
    def _me(self) -> discord.ClientUser:
        me = self._client.user
        assert me is not None  # messages only arrive once logged in
        return me

    def _mentions_me(self, message: discord.Message) -> bool:
        """The bot's user or its own role is mentioned."""
        if any(user.id == self._me.id for user in message.mentions):
            return True
        own_role = message.guild.self_role if message.guild else None
        return own_role is not None and own_role in message.role_mentions

    # ---- scenes ---------------------------------------------------------------------------

    def _in_scene(self, message: discord.Message) -> bool:
        """A guild channel's chat goes to its scene; a photo, or a message with nothing but
        attachments or stickers, keeps the per-user path (as on Telegram)."""
        if message.guild is None:
            return False
        if any((a.content_type or "").startswith("image/") for a in message.attachments):
            return False
        has_text = bool(self._without_own_mentions(message))
        return has_text or not (message.attachments or message.stickers)

    async def _to_scene(self, message: discord.Message) -> None:
        """A guild message to its channel's scene (bot/scenes.py decides whether it is heard);
        the characters' lines are posted by the outlet as each is written."""
        caller, scenes = message_caller(message), self._commands.scenes

        async def notify(notice: Answer) -> None:
            await reply_to(message, parts(notice, None))

        async with self._inflight.track():
            try:
                # A scene is one queue: its messages reach the engine in arrival order.
                async with self._order.hold(f"scene:{message.channel.id}"):
                    cast = await scenes.cast(caller)
                    outlet = DiscordSceneOutlet(self._webhooks, message, cast, self._settings)
                    to_scene, replied_name = await self._scene_reply(message)
                    pending = await scenes.hear(
                        caller,
                        self._without_own_mentions(message),
                        outlet,
                        message_id=str(message.id),
                        mentioned=to_scene or self._mentions_me(message),
                        replied_name=replied_name,
                        notify=notify,
                    )
                if pending is None:
                    return
                async with message.channel.typing():  # shown while the characters write
                    answer = (await pending).refusal
            except Exception as exc:
                answer = await self._responder.error_answer(caller, exc)
            if answer is not None and answer.text:
                await reply_to(message, parts(answer, self._responder.view_of(answer)))

    async def _scene_reply(self, message: discord.Message) -> tuple[bool, str | None]:
        """Whether the message replies to the scene (a message of the bot, or of one of its
        characters' webhooks), and the name shown on the message it replies to."""
        replied = message.reference.resolved if message.reference else None
        if not isinstance(replied, discord.Message):
            return False, None
        if replied.author.id == self._me.id:
            return True, header_name(replied.content)  # a line without webhook, or None
        hook = replied.webhook_id
        if hook is not None and await self._webhooks.is_ours(replied.channel.id, hook):
            return True, replied.author.name
        return False, None

    async def _submit(
        self, message: discord.Message, caller: Caller, live: LiveReply[discord.Message] | None
    ) -> Awaitable[Answer]:
        text = self._without_own_mentions(message)
        image = next(
            (a for a in message.attachments if (a.content_type or "").startswith("image/")), None
        )
        if image is not None and self._commands.photos is not None:
            # The caption is the message's text; the bytes are fetched only within the limit,
            # whatever size the attachment declares.
            async def fetch(limit: int) -> bytes:
                return await read_capped(image.url, limit)

            return await self._commands.photos.submit(
                caller, image.size, fetch, text, str(message.id)
            )
        if not text and (message.attachments or message.stickers):
            return asyncio.ensure_future(self._commands.refusal(caller, "attachment"))

        async def notify(notice: Answer) -> None:
            await reply_to(message, parts(notice, None))

        on_text = live.update if live is not None else None
        return await self._commands.submit(caller, text, str(message.id), notify, on_text)

    def _without_own_mentions(self, message: discord.Message) -> str:
        tags = [rf"<@!?{self._me.id}>"]
        if message.guild and message.guild.self_role:
            tags.append(rf"<@&{message.guild.self_role.id}>")
        return re.sub(rf"\s*(?:{'|'.join(tags)})\s*", " ", message.content).strip()
