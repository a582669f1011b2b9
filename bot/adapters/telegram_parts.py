"""Small pieces of the Telegram adapter: who wrote, the buttons of an answer, and "typing…"
kept visible while a reply is written."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.constants import ChatAction, ChatType

from bot.answers import Answer, Caller

TYPING_EVERY_SECONDS = 4.0  # Telegram shows "typing" for about 5 s per chat action


def caller_of(update: Update) -> Caller:
    user, chat = update.effective_user, update.effective_chat
    assert user is not None and chat is not None
    kind = "dm" if chat.type == ChatType.PRIVATE else "group"
    return Caller("telegram", str(user.id), user.full_name, kind, str(chat.id), user.language_code)


def keyboard(answer: Answer) -> InlineKeyboardMarkup | None:
    if not answer.buttons:
        return None
    rows = [[InlineKeyboardButton(b.label, callback_data=b.data)] for b in answer.buttons]
    return InlineKeyboardMarkup(rows)


@contextlib.asynccontextmanager
async def typing_shown(bot: Bot, chat_id: int) -> AsyncIterator[None]:
    """Keep "typing…" visible for the whole generation, however long it takes."""

    async def keep_typing() -> None:
        while True:
            with contextlib.suppress(Exception):
                await bot.send_chat_action(chat_id, ChatAction.TYPING)
            await asyncio.sleep(TYPING_EVERY_SECONDS)

    task = asyncio.create_task(keep_typing())
    try:
        yield
    finally:
        task.cancel()
