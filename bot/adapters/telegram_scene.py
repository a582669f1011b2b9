"""A group's scene on Telegram: one bot, so each character's line is headed by its name in bold
(HTML), as a reply to the message it answers; streamed per character as a private reply is.

A reply to one of these lines names its character by that header: `header_name` reads it back
from the replied message (its first line, when it is the bold entity the header made)."""

from __future__ import annotations

import html
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from telegram import Message, MessageEntity
from telegram.constants import ParseMode
from telegram.ext import Application, ExtBot

from bot.adapters.live import LiveReply
from bot.adapters.split import split_html
from bot.adapters.telegram_format import to_telegram_html
from bot.answers import Answer, Caller
from bot.commands import Commands
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


class TelegramScenes:
    """The Telegram adapter's way into a group's scene: what addresses the bot, the outlet."""

    def __init__(
        self,
        commands: Commands,
        settings: Settings,
        application: Application[Any, Any, Any, Any, Any, Any],
    ) -> None:
        self._commands = commands
        self._settings = settings
        self._application = application

    def mentioned(self, message: Message) -> tuple[bool, bool]:
        """(the bot is addressed, the message replies to one of the bot's own)."""
        me = self._application.bot
        replied = message.reply_to_message
        to_me = bool(replied and replied.from_user and replied.from_user.id == me.id)
        handle = (me.username or "").lower()
        # PTB refuses to parse the entities of a text the message does not have.
        texts = [*message.parse_entities([MessageEntity.MENTION]).values()] if message.text else []
        if message.caption:
            texts += message.parse_caption_entities([MessageEntity.MENTION]).values()
        # A caption's mention may come without its entity (a forwarded or edited caption).
        in_caption = bool(handle) and f"@{handle}" in (message.caption or "").lower()
        named = any(m.lstrip("@").lower() == handle for m in texts)
        return to_me or named or in_caption, to_me

    async def hear(
        self,
        message: Message,
        caller: Caller,
        words: str,
        busy: Callable[[], AbstractAsyncContextManager[None]],
        send: Callable[[Answer], Awaitable[None]],
    ) -> None:
        """Hand the words to the scene (bot/scenes.py decides whether it hears them); the
        characters' lines are sent by the outlet as each is written, a refusal by `send`."""
        scenes = self._commands.scenes
        mentioned, to_me = self.mentioned(message)
        async with scenes.arrival(caller):  # before any await: the scene keeps arrival order
            names = {c.id: c.name for c in await scenes.cast(caller)}
            outlet = TelegramSceneOutlet(self._application.bot, message, names, self._settings)
            pending = await scenes.hear(
                caller,
                words,
                outlet,
                message_id=str(message.message_id),
                mentioned=mentioned,
                replied_name=header_name(message.reply_to_message) if to_me else None,
                notify=send,
            )
        if pending is None:
            return
        async with busy():
            result = await pending
        if result.refusal is not None:
            await send(result.refusal)
