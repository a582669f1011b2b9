"""Who runs each community, and which characters may speak where (issue 36).

A community is a Telegram group or a Discord server. Its admins (a Telegram group's creator
and administrators; on Discord, members with Manage Server, or Manage Channels in the channel)
manage its scene and bindings, as the operator (ADMIN_IDS) may everywhere. The platform says
who they are: the adapter puts it on the Caller (`role`), for the chat the command came from,
so an admin of one group is a plain member in any other. Budgets, access rules and reloading
the character files stay the operator's.

Which characters a community may hear: the ones the operator allows it (COMMUNITY_CHARACTERS;
all when it is not listed), and of those, a character rated `mature` only where adults are:
a Discord age-restricted channel, a Telegram group marked mature (/escena madura on), a private
chat when MATURE_DMS is on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from bot.answers import Answer, Caller
from bot.texts import text
from cards.character import Character, CharacterBook
from memory.store.protocols import ChatRatings

Usable = Callable[[Character], bool]


@dataclass(frozen=True)
class Community:
    """The rules above, with what the operator set (bot/config.py)."""

    operators: frozenset[str]
    allowed: Mapping[str, list[str]]
    mature_dms: bool
    ratings: ChatRatings

    def is_operator(self, caller: Caller) -> bool:
        return f"{caller.platform}:{caller.user_id}" in self.operators

    def can_manage(self, caller: Caller) -> bool:
        """The operator anywhere; a community's admin in a group chat of their community."""
        if self.is_operator(caller):
            return True
        return caller.channel_kind == "group" and caller.role == "admin"

    def not_managing(self, caller: Caller, language: str) -> Answer | None:
        """The private refusal saying who can manage this chat, when the caller cannot."""
        if self.can_manage(caller):
            return None
        return Answer(text(language, self.who_manages(caller)), ok=False, private=True)

    @staticmethod
    def who_manages(caller: Caller) -> str:
        """The catalogue key of the sentence saying who may manage this chat."""
        if caller.channel_kind != "group":
            return "admins_only"
        return "manage_discord" if caller.platform == "discord" else "manage_telegram"

    async def mature_here(self, caller: Caller) -> bool:
        """Whether adults-only characters may speak in this chat."""
        if caller.channel_kind == "dm":
            return self.mature_dms
        if caller.age_restricted:
            return True
        # Discord has its own age gate (age-restricted channels); only Telegram has the mark.
        return caller.platform == "telegram" and await self.ratings.chat_is_mature(
            caller.platform, caller.channel_id
        )

    def refusal(self, caller: Caller, character: Character, mature_here: bool) -> str | None:
        """Why this character may not speak here (a catalogue key), or None."""
        listed = self.allowed.get(caller.community) if caller.channel_kind == "group" else None
        if listed is not None and character.id not in listed:
            return "character_not_here"
        if character.rating == "mature" and not mature_here:
            if caller.channel_kind == "dm":
                return "mature_dm"
            return "mature_discord" if caller.platform == "discord" else "mature_telegram"
        return None

    async def usable(self, caller: Caller) -> Usable:
        """A test of which characters may speak in this chat, read once per message."""
        mature = await self.mature_here(caller)
        return lambda character: self.refusal(caller, character, mature) is None

    async def unusable(
        self,
        caller: Caller,
        character: Character | None,
        given: str,
        book: CharacterBook,
        language: str,
    ) -> Answer | None:
        """Why a character cannot be chosen, bound or added here: unknown (naming the ones
        that can), not allowed in this community, or mature where adults are not."""
        mature = await self.mature_here(caller)
        if character is None:
            valid = ", ".join(c.id for c in book.all() if not self.refusal(caller, c, mature))
            return Answer(text(language, "unknown_character", given=given, valid=valid), ok=False)
        if key := self.refusal(caller, character, mature):
            return Answer(text(language, key, name=character.name), ok=False)
        return None
