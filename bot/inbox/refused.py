"""Who may talk, checked by the platform process before an update is stored (issue 36): the
inbox keeps a message for INBOX_KEEP_HOURS, so a refused person's text must not reach it.

The rules are the database's (bot/access.py), which this process reads as every worker does.
A refused message is then:
- in a group: not stored at all (a worker would answer it with nothing);
- in a private chat: stored without its text, attachments or anything else the person wrote
  (its text replaced by WITHHELD), so that a worker still sends the refusal line, at most once
  a day, exactly as in one process;
- a command: stored with the command's name alone, unless it is one that stays open to refused
  people (/memoria, /yo), which is stored whole so that it works.
Button presses and Discord interactions carry no words of the person's own and are stored as
they are; the worker refuses them.
"""

from __future__ import annotations

from typing import Any

from bot.access import ALWAYS_OPEN, Access
from bot.answers import Caller
from bot.registry import REGISTRY

Raw = dict[str, Any]
# What a refused private message's text becomes: an invisible separator, no word of the
# person's. A worker refuses it before reading it; were the person admitted meanwhile (a rule
# lifted in the seconds between), it reads as an empty message and they are asked to write.
WITHHELD = "\u2063"
OPEN_NAMES = frozenset(
    name for command in REGISTRY if command.key in ALWAYS_OPEN
    for name in (command.names.es, command.names.en, *command.aliases)
)  # fmt: skip
TELEGRAM_MESSAGES = ("message", "edited_message")
TELEGRAM_KEPT = ("message_id", "date", "chat", "from", "message_thread_id")
DISCORD_DROPPED = ("attachments", "embeds", "sticker_items", "referenced_message",
                   "message_reference", "poll", "components")  # fmt: skip


def withheld_command(text: str) -> str | None:
    """A command's text as it may be stored for a refused person: whole when it stays open to
    them, its name alone otherwise; None when the text is no command."""
    if not text.startswith("/"):
        return None
    word = text.split(maxsplit=1)[0]
    name = word[1:].split("@", 1)[0].casefold()
    return text if name in OPEN_NAMES else word


class PlatformAccess:
    """The access check of the platform process (see the module's text)."""

    def __init__(self, access: Access) -> None:
        self._access = access

    async def telegram(self, update: Raw) -> Raw | None:
        """The update to store for this Telegram update: as it is, without its text, or None."""
        kind = next((k for k in TELEGRAM_MESSAGES if isinstance(update.get(k), dict)), None)
        if kind is None:
            return update  # a button's press, a member update: no words of the person's
        body = update[kind]
        sender, chat = body.get("from") or {}, body.get("chat") or {}
        if "id" not in sender or "id" not in chat:
            return update
        dm = chat.get("type") == "private"
        caller = Caller("telegram", str(sender["id"]), "", "dm" if dm else "group", str(chat["id"]))
        if await self._access.reason(caller) is None:
            return update
        said = str(body.get("text") or "")
        command = withheld_command(said)
        if command == said:
            return update  # /memoria, /yo: open to them, stored whole
        if command is None and not dm:
            return None
        kept = {k: body[k] for k in TELEGRAM_KEPT if k in body}
        kept["text"] = WITHHELD if command is None else command
        if command is not None:  # the command's own entity, which makes it one for the bot
            entities = body.get("entities") or ()
            kept["entities"] = [
                e for e in entities if e.get("type") == "bot_command" and e.get("offset") == 0
            ]
        return {"update_id": update["update_id"], kind: kept}

    async def discord(self, event: str, data: Raw) -> Raw | None:
        """The gateway message to store: as it is, without its words, or None."""
        author = data.get("author") or {}
        if event != "MESSAGE_CREATE" or "id" not in author:
            return data
        guild = data.get("guild_id")
        roles = tuple(str(r) for r in (data.get("member") or {}).get("roles") or ())
        caller = Caller("discord", str(author["id"]), "", "group" if guild else "dm",
                        str(data.get("channel_id")), guild_id=str(guild) if guild else None,
                        role_ids=roles)  # fmt: skip
        if await self._access.reason(caller) is None:
            return data
        if guild:
            return None  # a refused guild message gets nothing (slash commands are interactions)
        kept = {k: v for k, v in data.items() if k not in DISCORD_DROPPED}
        return kept | {"content": WITHHELD, "mentions": [], "mention_roles": []}
