"""The small values passed between adapters and commands: who is asking, and what to answer."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Literal

from memory.models import Incoming
from memory.platform_text import storable


def clean_input(value: str) -> str:
    """Text as a platform delivered it, made storable (memory/platform_text.py): U+0000
    dropped, lone surrogates replaced by U+FFFD."""
    return storable(value)


def is_blank(value: str) -> bool:
    """Nothing visible: only whitespace and format characters (zero-width space and joiners,
    BOM, direction marks), which str.strip() keeps."""
    return all(ch.isspace() or unicodedata.category(ch) == "Cf" for ch in value)


@dataclass(frozen=True)
class Caller:
    """Who wrote, and where: enough to find their own memory and nobody else's."""

    platform: str
    user_id: str
    display_name: str
    channel_kind: Literal["dm", "group"]
    channel_id: str
    locale: str | None = None  # the user's language as the platform reports it ("es-ES")
    # The caller's standing in this group as the platform reports it (bot/community.py):
    # "admin" for a Telegram group's creator or administrators and a Discord member with Manage
    # Server or Manage Channels here. Filled by the adapter for the commands that need it.
    role: Literal["member", "admin"] = "member"
    # The platform marks this channel for adults (a Discord age-restricted channel).
    age_restricted: bool = False
    # Discord: the server of a guild channel (its community; a Telegram group is its own), and
    # the member's role ids there (access rules, bot/access.py).
    guild_id: str | None = None
    role_ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # A display name comes from the platform as is; see clean_input.
        object.__setattr__(self, "display_name", clean_input(self.display_name))

    @property
    def channel_key(self) -> str:
        return "dm" if self.channel_kind == "dm" else f"group:{self.platform}:{self.channel_id}"

    @property
    def community(self) -> str:
        """The community this group belongs to: "telegram:<chat id>", "discord:<server id>"."""
        return f"{self.platform}:{self.guild_id or self.channel_id}"

    def incoming(self, character_id: str, message: str, message_id: str | None = None) -> Incoming:
        return Incoming(
            self.platform,
            self.user_id,
            self.display_name,
            self.channel_kind,
            self.channel_id,
            character_id,
            message,
            message_id,
        )


@dataclass(frozen=True)
class Button:
    label: str
    data: str  # short: Telegram allows 64 bytes of callback data


@dataclass(frozen=True)
class Answer:
    text: str
    ok: bool = True
    private: bool = False  # in a group, answer only the caller (ephemeral / private chat)
    buttons: tuple[Button, ...] = ()
    document: tuple[str, bytes] | None = None
