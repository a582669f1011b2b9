"""The small values passed between adapters and commands: who is asking, and what to answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from memory.models import Incoming


@dataclass(frozen=True)
class Caller:
    """Who wrote, and where: enough to find their own memory and nobody else's."""

    platform: str
    user_id: str
    display_name: str
    channel_kind: Literal["dm", "group"]
    channel_id: str

    @property
    def channel_key(self) -> str:
        return "dm" if self.channel_kind == "dm" else f"group:{self.platform}:{self.channel_id}"

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
