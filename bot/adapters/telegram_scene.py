"""A group's scene on Telegram: one bot, so each character's line is headed by its name in bold
(HTML), as a reply to the message it answers; streamed per character as a private reply is.

A reply to one of these lines names its character by that header: `header_name` reads it back
from the replied message (its first line, when it is the bold entity the header made)."""

from __future__ import annotations

import html

from telegram import Message, MessageEntity
from telegram.constants import ParseMode
from telegram.ext import ExtBot

from bot.adapters.live import LiveReply
from bot.adapters.split import split_html
from bot.adapters.telegram_format import to_telegram_html
from bot.config import Settings
from memory.engine.llm import TextSink
from memory.models import Reply

LIMIT = 4096


def header(name: str) -> str:
    return f"<b>{html.escape(name)}</b>\n"


def header_name(replied: Message | None) -> str | None:
    """The character a replied-to line of the bot's was headed by, if it was a scene line."""
    if replied is None or not replied.text:
        return None
    first = replied.text.split("\n", 1)[0]
    for entity in replied.entities or ():
        if entity.type == MessageEntity.BOLD and entity.offset == 0:
            return first if entity.length >= len(first.encode("utf-16-le")) // 2 else None
    return None


class TelegramSceneOutlet:
    """The lines of one scene turn, sent into the group as replies to `message`."""

    def __init__(
        self, bot: ExtBot, message: Message, names: dict[str, str], settings: Settings
    ) -> None:
        self._bot = bot
        self._message = message
        self._names = names  # character id -> name
        self._settings = settings
        self._live: dict[str, LiveReply[int]] = {}

    def _parts(self, character_id: str, text: str) -> list[str]:
        head = header(self._names.get(character_id, character_id))
        chunks = split_html(to_telegram_html(text), LIMIT - len(head)) if text else [""]
        return [head + chunks[0], *chunks[1:]]

    def live(self, character_id: str) -> TextSink | None:
        if not self._settings.stream_replies:
            return None
        chat_id, reply_to = self._message.chat_id, self._message.message_id

        async def send(rendered: str) -> int:
            sent = await self._bot.send_message(
                chat_id, rendered, parse_mode=ParseMode.HTML, reply_to_message_id=reply_to
            )
            return sent.message_id

        async def edit(message_id: int, rendered: str) -> None:
            await self._bot.edit_message_text(
                rendered, chat_id=chat_id, message_id=message_id, parse_mode=ParseMode.HTML
            )

        live = LiveReply(
            send,
            edit,
            lambda text: self._parts(character_id, text)[0],
            self._settings.stream_edit_seconds,
        )
        self._live[character_id] = live
        return live.update

    async def send(self, character_id: str, reply: Reply) -> None:
        parts = self._parts(character_id, reply.text)
        reply_to: int | None = self._message.message_id
        live = self._live.pop(character_id, None)
        if live is not None and await live.finish(parts[0]):
            parts, reply_to = parts[1:], None
        for index, part in enumerate(parts):
            await self._bot.send_message(
                self._message.chat_id,
                part,
                parse_mode=ParseMode.HTML,
                reply_to_message_id=reply_to if index == 0 else None,
            )
