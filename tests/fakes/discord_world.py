"""The state of the fake Discord: users, one guild, DM channels, messages, interactions.

Everything here builds the JSON shapes the real discord.py parses. The field lists follow what
discord.py 2.7 reads with ``data[...]`` (a missing key there is a KeyError inside the gateway
parser, which discord.py swallows and logs, so the event silently never reaches the bot).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tests.fakes.paced import PacedDownload

JSON = dict[str, Any]

DISCORD_EPOCH_MS = 1_420_070_400_000
EPHEMERAL = 1 << 6
LOADING = 1 << 7
# Every permission bit; the fake never denies anything.
ALL_PERMISSIONS = (1 << 50) - 1
# What a plain member may do in a channel: view, send, read history, use application commands.
MEMBER_PERMISSIONS = (1 << 10) | (1 << 11) | (1 << 16) | (1 << 31)
MANAGE_CHANNELS, MANAGE_GUILD = 1 << 4, 1 << 5
# GATEWAY_MESSAGE_CONTENT | GATEWAY_GUILD_MEMBERS: the privileged intents the bot may use.
APPLICATION_FLAGS = (1 << 19) | (1 << 15)
TEXT_CHANNEL, DM_CHANNEL = 0, 1


class Snowflakes:
    """Real-looking, strictly increasing ids, so ordering by id matches creation order."""

    def __init__(self) -> None:
        self._last = 0

    def next(self) -> int:
        candidate = (int(time.time() * 1000) - DISCORD_EPOCH_MS) << 22
        self._last = max(candidate, self._last + 1)
        return self._last


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


@dataclass(frozen=True)
class FakeUser:
    id: int
    username: str
    bot: bool = False

    def payload(self) -> JSON:
        return {
            "id": str(self.id),
            "username": self.username,
            "global_name": self.username,
            "discriminator": "0",
            "avatar": None,
            "bot": self.bot,
            "public_flags": 0,
        }


@dataclass(frozen=True)
class FakeAttachment:
    """A file a fake user attaches; its bytes are served back from the fake's own CDN route."""

    filename: str
    data: bytes = b""
    content_type: str = "application/octet-stream"
    width: int | None = None
    height: int | None = None
    # What the payload says the size is, when not the truth (a client must not trust it).
    declared_size: int | None = None
    # Served a part at a time (tests/fakes/paced.py), to count what the client read.
    paced: PacedDownload | None = None


@dataclass
class InteractionState:
    id: int
    token: str
    channel_id: int
    guild_id: int | None
    original: JSON | None = None
    callback_types: list[int] = field(default_factory=list)
    # A button press: the message its button is on (a deferred update's "@original").
    message: JSON | None = None


class FakeWorld:
    """Ids and payload builders shared by the REST side and the gateway side."""

    def __init__(self, bot_name: str, guild_name: str, channel_names: Sequence[str]) -> None:
        self.ids = Snowflakes()
        self.bot = FakeUser(self.ids.next(), bot_name, bot=True)
        # Discord gives bots created since 2020 an application id equal to the user id.
        self.application_id = self.bot.id
        self.owner = FakeUser(self.ids.next(), "app-owner")
        self.guild_id = self.ids.next()
        self.guild_name = guild_name
        self.channels: dict[int, str] = {self.ids.next(): name for name in channel_names}
        self.users: dict[int, FakeUser] = {self.bot.id: self.bot}
        self.guild_members: set[int] = {self.bot.id}
        # The guild's roles beside @everyone (id -> name), and each member's role ids.
        self.roles: dict[int, str] = {}
        self.member_roles: dict[int, list[int]] = {}
        self.dm_channels: dict[int, int] = {}
        self.messages: dict[int, JSON] = {}
        self.attachments: dict[int, FakeAttachment] = {}
        self.interactions: dict[str, InteractionState] = {}
        self.user_locale = "es-ES"  # what interactions report as the user's language
        # Age-restricted channels (Discord's "nsfw" flag), set before the bot connects.
        self.nsfw_channels: set[int] = set()
        # A member's permissions as interactions resolve them (else MEMBER_PERMISSIONS).
        self.member_permissions: dict[int, int] = {}
        self._tokens = itertools.count(1)
        self.created_at = now_iso()

    # -- users and channels -------------------------------------------------------------------

    def user(
        self, user_id: int, username: str | None = None, *, bot: bool | None = None
    ) -> FakeUser:
        """The user with this id, created on first use; a given name or bot flag updates it."""
        known = self.users.get(user_id) or FakeUser(user_id, f"user{user_id}")
        updated = FakeUser(
            user_id,
            known.username if username is None else username,
            known.bot if bot is None else bot,
        )
        self.users[user_id] = updated
        return updated

    def dm_channel_id(self, user_id: int) -> int:
        if user_id not in self.dm_channels:
            self.dm_channels[user_id] = self.ids.next()
        return self.dm_channels[user_id]

    def dm_recipient(self, channel_id: int) -> int | None:
        return next((u for u, c in self.dm_channels.items() if c == channel_id), None)

    def channel_payload(self, channel_id: int) -> JSON | None:
        if channel_id in self.channels:
            position = list(self.channels).index(channel_id)
            return {
                "id": str(channel_id),
                "type": TEXT_CHANNEL,
                "guild_id": str(self.guild_id),
                "name": self.channels[channel_id],
                "position": position,
                "permission_overwrites": [],
                "parent_id": None,
                "nsfw": channel_id in self.nsfw_channels,
                "topic": None,
                "last_message_id": None,
                "rate_limit_per_user": 0,
            }
        user_id = self.dm_recipient(channel_id)
        if user_id is None:
            return None
        recipient = self.user(user_id).payload()
        return {"id": str(channel_id), "type": DM_CHANNEL, "recipients": [recipient]}

    def member_payload(self, user_id: int, *, with_user: bool = True) -> JSON:
        member: JSON = {
            "roles": [str(role) for role in self.member_roles.get(user_id, [])],
            "joined_at": self.created_at,
            "deaf": False,
            "mute": False,
            "flags": 0,
            "pending": False,
            "nick": None,
        }
        if with_user:
            member["user"] = self.user(user_id).payload()
        return member

    def role_payload(self, role_id: int, name: str) -> JSON:
        return {
            "id": str(role_id), "name": name, "permissions": "0", "position": 1, "color": 0,
            "hoist": False, "managed": False, "mentionable": False, "flags": 0,
        }  # fmt: skip

    def guild_create(self) -> JSON:
        everyone = {
            "id": str(self.guild_id),
            "name": "@everyone",
            "permissions": str(ALL_PERMISSIONS),
            "position": 0,
            "color": 0,
            "hoist": False,
            "managed": False,
            "mentionable": False,
            "flags": 0,
        }
        members = [self.member_payload(uid) for uid in sorted(self.guild_members)]
        return {
            "id": str(self.guild_id),
            "name": self.guild_name,
            "icon": None,
            "owner_id": str(self.owner.id),
            "unavailable": False,
            "large": False,
            # Equal to len(members) so discord.py considers the guild chunked and never waits.
            "member_count": len(members),
            "members": members,
            "roles": [everyone, *(self.role_payload(i, n) for i, n in self.roles.items())],
            "channels": [self.channel_payload(cid) for cid in self.channels],
            "threads": [],
            "presences": [],
            "voice_states": [],
            "emojis": [],
            "stickers": [],
            "features": [],
            "joined_at": self.created_at,
            "preferred_locale": "en-US",
            "premium_tier": 0,
            "system_channel_id": None,
        }

    # -- messages -----------------------------------------------------------------------------

    def attachment_payload(self, attachment: FakeAttachment, base_url: str) -> JSON:
        attachment_id = self.ids.next()
        self.attachments[attachment_id] = attachment
        url = f"{base_url}/attachments/{attachment_id}/{attachment.filename}"
        payload: JSON = {
            "id": str(attachment_id),
            "filename": attachment.filename,
            "size": (
                len(attachment.data)
                if attachment.declared_size is None
                else attachment.declared_size
            ),
            "url": url,
            "proxy_url": url,
            "content_type": attachment.content_type,
        }
        if attachment.width is not None:
            payload.update(width=attachment.width, height=attachment.height)
        return payload

    def message_payload(
        self, channel_id: int, author: FakeUser, content: str, **extra: Any
    ) -> JSON:
        """A complete message object; ``extra`` overrides or adds top-level fields."""
        message: JSON = {
            "id": str(self.ids.next()),
            "channel_id": str(channel_id),
            "author": author.payload(),
            "content": content,
            "timestamp": now_iso(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "components": [],
            "pinned": False,
            "type": 0,
            "flags": 0,
        }
        if channel_id in self.channels:
            message["guild_id"] = str(self.guild_id)
        message.update(extra)
        self.messages[int(message["id"])] = message
        return message

    def user_message(
        self,
        channel_id: int,
        user_id: int,
        content: str,
        *,
        base_url: str,
        username: str | None,
        author_bot: bool,
        reply_to: int | None,
        attachments: Sequence[FakeAttachment] | None,
        stickers: Sequence[str],
        mention_bot: bool = False,
        reply_mention: bool = True,
    ) -> JSON:
        """A MESSAGE_CREATE from a user, shaped like Discord's for DMs and guild channels."""
        author = self.user(user_id, username, bot=author_bot)
        in_guild = channel_id in self.channels
        mentioned: list[int] = []
        extra: JSON = {}
        if mention_bot:
            tag = f"<@{self.bot.id}>"
            content = content if tag in content else f"{tag} {content}"
            mentioned.append(self.bot.id)
        if reply_to is not None:
            extra.update(self.reply_fields(reply_to))
            referenced = extra["referenced_message"]
            # Discord pings the replied author, never a webhook (it is nobody to ping).
            if reply_mention and referenced is not None and not referenced.get("webhook_id"):
                mentioned.append(int(referenced["author"]["id"]))
        if in_guild:
            extra["member"] = self.member_payload(user_id, with_user=False)
        extra["attachments"] = [self.attachment_payload(a, base_url) for a in attachments or ()]
        extra["sticker_items"] = [
            {"id": str(self.ids.next()), "name": name, "format_type": 1} for name in stickers
        ]
        unique = dict.fromkeys(mentioned)
        extra["mentions"] = [self.mention_payload(uid, in_guild) for uid in unique]
        return self.message_payload(channel_id, author, content, **extra)

    def reply_fields(self, reply_to: int) -> JSON:
        """The fields Discord adds to a reply; the referenced message is inlined when known."""
        referenced = self.messages.get(reply_to)
        channel_id = referenced["channel_id"] if referenced else None
        reference: JSON = {"type": 0, "message_id": str(reply_to), "channel_id": channel_id}
        if referenced and "guild_id" in referenced:
            reference["guild_id"] = referenced["guild_id"]
        # Type 19 is REPLY; discord.py resolves message.reference.resolved from referenced_message.
        return {"type": 19, "message_reference": reference, "referenced_message": referenced}

    def mention_payload(self, user_id: int, in_guild: bool) -> JSON:
        mention = self.user(user_id).payload()
        if in_guild:
            mention["member"] = self.member_payload(user_id, with_user=False)
        return mention

    # -- interactions -------------------------------------------------------------------------

    def new_interaction(self, channel_id: int, guild_id: int | None) -> InteractionState:
        interaction_id = self.ids.next()
        token = f"interaction-token-{next(self._tokens)}-{interaction_id}"
        state = InteractionState(interaction_id, token, channel_id, guild_id)
        self.interactions[token] = state
        return state

    def interaction_payload(
        self, state: InteractionState, user: FakeUser, data: JSON, locale: str | None = None
    ) -> JSON:
        """``locale``: the user's Discord language (default ``user_locale``, Spanish: the
        fixture characters' language, so tests read the same words either way)."""
        payload: JSON = {
            "id": str(state.id),
            "application_id": str(self.application_id),
            "type": 2,
            "token": state.token,
            "version": 1,
            "data": data,
            "channel_id": str(state.channel_id),
            "channel": self.channel_payload(state.channel_id),
            "app_permissions": str(ALL_PERMISSIONS),
            "locale": locale or self.user_locale,
            "entitlements": [],
            "attachment_size_limit": 10 * 1024 * 1024,
        }
        if state.guild_id is not None:
            member = self.member_payload(user.id)
            member["permissions"] = str(self.member_permissions.get(user.id, MEMBER_PERMISSIONS))
            payload.update(guild_id=str(state.guild_id), member=member, guild_locale="en-US")
            # context 0 = guild, 1 = the bot's DM; owners "0" = guild install, "1" = user install.
            payload.update(context=0, authorizing_integration_owners={"0": str(state.guild_id)})
        else:
            # A guild-installed app used in its own DM reports the guild owner as "0".
            payload.update(user=user.payload(), context=1)
            payload["authorizing_integration_owners"] = {"0": "0"}
        return payload


def option_type(value: object) -> int:
    # bool before int: bool is a subclass of int but Discord's BOOLEAN is its own type.
    if isinstance(value, bool):
        return 5
    if isinstance(value, int):
        return 4
    if isinstance(value, float):
        return 10
    return 3


def build_options(
    options: Mapping[str, object] | Sequence[JSON] | None,
    group: str | None = None,
    subcommand: str | None = None,
) -> list[JSON]:
    """Interaction options; a mapping is typed automatically, a list is used as raw options."""
    if options is None:
        leaf: list[JSON] = []
    elif isinstance(options, Mapping):
        leaf = [{"name": k, "type": option_type(v), "value": v} for k, v in options.items()]
    else:
        leaf = list(options)
    if group is not None and subcommand is None:
        raise ValueError("a subcommand group needs a subcommand")
    if subcommand is not None:
        leaf = [{"name": subcommand, "type": 1, "options": leaf}]
    if group is not None:
        leaf = [{"name": group, "type": 2, "options": leaf}]
    return leaf
