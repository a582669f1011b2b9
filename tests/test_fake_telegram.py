"""The fake Telegram Bot API, driven by the real python-telegram-bot Application.

The handlers here are a tiny echo bot, not the project's adapter: the point is that PTB itself
runs unchanged against the fake, so the adapter's tests can trust it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from telegram import (
    BotCommand,
    BotCommandScopeChat,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    MessageEntity,
    Update,
)
from telegram.constants import ChatAction
from telegram.error import BadRequest, EndPointNotFound, RetryAfter
from telegram.ext import (
    Application,
    ApplicationBuilder,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    filters,
)

from tests.fakes.telegram_api import FakeTelegram

TOKEN = "123456:TEST-token"
USER = 1001
GROUP = -1_000_500
DOC_BYTES = b"line one\nline two\x00\xff binary tail"
Context = ContextTypes.DEFAULT_TYPE


def seen(context: Context) -> list[Update]:
    return context.bot_data.setdefault("seen", [])


async def on_text(update: Update, context: Context) -> None:
    message = update.effective_message
    assert message is not None and message.text is not None
    seen(context).append(update)
    await context.bot.send_chat_action(message.chat_id, ChatAction.TYPING)
    await message.reply_text(f"echo: {message.text}")


async def on_start(update: Update, context: Context) -> None:
    assert update.effective_message is not None
    keyboard = InlineKeyboardMarkup(
        [
            [InlineKeyboardButton("Again", callback_data="again")],
            [InlineKeyboardButton("Site", url="https://example.org")],
        ]
    )
    args = " ".join(context.args or [])
    await update.effective_message.reply_text(f"welcome ({args})", reply_markup=keyboard)


async def on_doc(update: Update, _context: Context) -> None:
    assert update.effective_message is not None
    await update.effective_message.reply_document(DOC_BYTES, filename="notes.txt", caption="notes")


async def on_button(update: Update, _context: Context) -> None:
    query = update.callback_query
    assert query is not None
    await query.answer("noted")
    await query.edit_message_text(f"pressed {query.data}")


async def on_media(update: Update, _context: Context) -> None:
    message = update.effective_message
    assert message is not None
    if message.sticker is not None:
        await message.reply_text(f"sticker {message.sticker.emoji}")
        return
    photo_file = await message.photo[-1].get_file()
    data = await photo_file.download_as_bytearray()
    await message.reply_text(f"photo {bytes(data)!r}")


def build_app(fake: FakeTelegram) -> Application[Any, Any, Any, Any, Any, Any]:
    app = (
        ApplicationBuilder()
        .token(TOKEN)
        .base_url(fake.base_url)
        .base_file_url(fake.base_file_url)
        .build()
    )
    app.add_handler(CommandHandler("start", on_start))
    app.add_handler(CommandHandler("doc", on_doc))
    app.add_handler(MessageHandler(filters.TEXT & ~filters.COMMAND, on_text))
    app.add_handler(MessageHandler(filters.Sticker.ALL | filters.PHOTO, on_media))
    app.add_handler(CallbackQueryHandler(on_button))
    return app


async def stop_app(app: Application[Any, Any, Any, Any, Any, Any]) -> None:
    if app.updater is not None and app.updater.running:
        await app.updater.stop()
    if app.running:
        await app.stop()
    await app.shutdown()


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(token=TOKEN) as server:
        yield server


@pytest.fixture
async def app(fake: FakeTelegram) -> AsyncIterator[Application[Any, Any, Any, Any, Any, Any]]:
    application = build_app(fake)
    await application.initialize()
    await application.start()
    assert application.updater is not None
    await application.updater.start_polling()
    yield application
    await stop_app(application)


async def test_private_message_round_trip(fake: FakeTelegram, app: Application) -> None:
    fake.send_private_text(USER, "hello there", first_name="Alice")

    [reply] = await fake.wait_for_messages(USER, 1)

    assert reply["text"] == "echo: hello there"
    # PTB does not quote in private chats unless asked to.
    assert reply["reply_to_message_id"] is None
    assert fake.chat_actions == [{"chat_id": USER, "action": "typing"}]
    [update] = app.bot_data["seen"]
    assert update.effective_user.first_name == "Alice"
    assert [name for name, _ in fake.calls[:3]] == ["getMe", "deleteWebhook", "getUpdates"]


async def test_command_gets_args_and_inline_keyboard(fake: FakeTelegram, app: Application) -> None:
    fake.send_command(USER, USER, "/start", args="now please")

    [reply] = await fake.wait_for_messages(USER, 1)

    assert reply["text"] == "welcome (now please)"
    buttons = reply["reply_markup"]["inline_keyboard"]
    assert buttons[0][0] == {"text": "Again", "callback_data": "again"}
    assert reply["message"]["reply_markup"] == reply["reply_markup"]


async def test_callback_query_is_answered_and_message_edited(
    fake: FakeTelegram, app: Application
) -> None:
    fake.send_command(USER, USER, "start")
    [menu] = await fake.wait_for_messages(USER, 1)

    fake.press_button(USER, USER, menu["message_id"], "again")
    await fake.wait_for_calls("editMessageText")

    [answer] = fake.answered_callbacks
    assert answer["text"] == "noted"
    [edit] = fake.edited_messages
    assert (edit["chat_id"], edit["message_id"]) == (USER, menu["message_id"])
    assert edit["text"] == "pressed again"
    current = fake.messages[(USER, menu["message_id"])]
    assert current["text"] == "pressed again"
    assert "reply_markup" not in current  # an edit without a keyboard drops it


async def test_set_my_commands_per_language_and_scope(fake: FakeTelegram, app: Application) -> None:
    english = [BotCommand("reset", "Forget our conversation")]
    russian = [BotCommand("reset", "Забыть разговор")]
    await app.bot.set_my_commands(english, language_code="en")
    await app.bot.set_my_commands(russian, language_code="ru")
    await app.bot.set_my_commands(english, scope=BotCommandScopeChat(GROUP))

    assert fake.commands[("default", "ru")] == [
        {"command": "reset", "description": "Забыть разговор"}
    ]
    assert set(fake.commands) == {("default", "en"), ("default", "ru"), (f"chat:{GROUP}", "")}
    assert await app.bot.get_my_commands(language_code="ru") == tuple(russian)
    assert await app.bot.get_my_commands() == ()
    # PTB strips "Bad Request: " and capitalize()s the rest, hence the odd casing.
    with pytest.raises(BadRequest, match="Bot_command_invalid"):
        await app.bot.set_my_commands([BotCommand("Reset", "capitals are rejected")])


async def test_send_document_uploads_bytes(fake: FakeTelegram, app: Application) -> None:
    fake.send_command(USER, USER, "/doc")

    [sent] = await fake.wait_for_messages(USER, 1)

    [document] = fake.documents
    assert document["content"] == DOC_BYTES
    assert document["filename"] == "notes.txt"
    assert document["caption"] == "notes"
    assert sent["method"] == "sendDocument"
    assert sent["message"]["document"]["file_size"] == len(DOC_BYTES)


async def test_update_is_delivered_once(fake: FakeTelegram, app: Application) -> None:
    update = fake.send_private_text(USER, "only once")
    await fake.wait_for_messages(USER, 1)

    # PTB confirms an update by asking for the next id; after that it is gone for good.
    confirm = update["update_id"] + 1
    await fake.wait_until(
        lambda: any(call.get("offset") == confirm for call in fake.calls_to("getUpdates"))
    )

    assert fake.pending_updates == []
    assert len(app.bot_data["seen"]) == 1
    assert len(fake.sent_messages(USER)) == 1


async def test_get_updates_offset_and_long_poll(fake: FakeTelegram) -> None:
    first = fake.send_private_text(USER, "one")["update_id"]
    second = fake.send_private_text(USER, "two")["update_id"]
    url = f"{fake.base_url}{TOKEN}/getUpdates"

    async with aiohttp.ClientSession() as http:

        async def poll(**params: Any) -> list[int]:
            async with http.post(url, data={k: str(v) for k, v in params.items()}) as response:
                body = await response.json()
            assert body["ok"] is True
            return [update["update_id"] for update in body["result"]]

        assert await poll() == [first, second]
        assert await poll() == [first, second]  # nothing confirmed yet
        assert await poll(offset=second) == [second]
        assert await poll(offset=second + 1, timeout=0.2) == []

        asyncio.get_running_loop().call_later(0.1, fake.send_private_text, USER, "three")
        started = time.monotonic()
        [third] = await poll(offset=second + 1, timeout=5)
        assert time.monotonic() - started < 1.0
        assert third == second + 1


async def test_group_mention_reply_and_other_bots(fake: FakeTelegram, app: Application) -> None:
    mentions: list[str] = []
    replies_to_bot: list[bool] = []

    async def spy(update: Update, _context: Context) -> None:
        message = update.effective_message
        assert message is not None
        mentions.extend(message.parse_entities([MessageEntity.MENTION]).values())
        replied = message.reply_to_message
        replies_to_bot.append(replied is not None and replied.from_user.id == app.bot.id)

    # Group -1 runs before the echo handler, so the spy is done once the echo reply exists.
    app.add_handler(MessageHandler(filters.ChatType.GROUPS, spy), group=-1)
    sent = fake.send_group_text(
        GROUP, USER, "hey 👋 @companion_test_bot you there?", mention_bot=True
    )
    [reply] = await fake.wait_for_messages(GROUP, 1)
    fake.send_group_text(GROUP, USER, "answer me", reply_to_bot_message_id=reply["message_id"])
    fake.send_group_text(GROUP, 2002, "beep", is_bot=True, first_name="OtherBot")
    await fake.wait_for_messages(GROUP, 3)

    assert mentions == ["@companion_test_bot"]  # only right if offsets count UTF-16 units
    assert reply["reply_to_message_id"] == sent["message"]["message_id"]  # groups quote
    assert replies_to_bot == [False, True, False]
    assert app.bot_data["seen"][-1].effective_user.is_bot is True


async def test_photo_download_and_sticker(fake: FakeTelegram, app: Application) -> None:
    fake.send_photo(USER, USER, content=b"JPEGDATA")
    await fake.wait_for_messages(USER, 1)
    fake.send_sticker(USER, USER, emoji="🐱")

    first, second = await fake.wait_for_messages(USER, 2)

    assert first["text"] == "photo b'JPEGDATA'"
    assert second["text"] == "sticker 🐱"


# PTB itself warns while building RetryAfter's message; nothing a caller can change.
@pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")
async def test_errors_look_like_the_real_api(fake: FakeTelegram, app: Application) -> None:
    with pytest.raises(EndPointNotFound):
        await app.bot.do_api_request("sendTelepathy", api_kwargs={"chat_id": USER})
    assert fake.unknown_methods == ["sendTelepathy"]
    with pytest.raises(BadRequest, match="Chat not found"):
        await app.bot.send_message(424242, "nobody home")

    fake.send_private_text(USER, "hi")
    [reply] = await fake.wait_for_messages(USER, 1)
    with pytest.raises(BadRequest, match="not modified"):
        await app.bot.edit_message_text(reply["text"], USER, reply["message_id"])

    fake.fail_next("sendMessage", retry_after=3)
    with pytest.raises(RetryAfter, match="Retry in 3"):
        await app.bot.send_message(USER, "too fast")
    assert (await app.bot.send_message(USER, "later")).text == "later"


async def test_shutdown_is_prompt_during_long_poll(fake: FakeTelegram) -> None:
    app = build_app(fake)
    await app.initialize()
    await app.start()
    assert app.updater is not None
    await app.updater.start_polling(timeout=30)
    await fake.wait_for_calls("getUpdates")

    started = time.monotonic()
    await app.updater.stop()
    await app.stop()
    await app.shutdown()

    assert time.monotonic() - started < 2.0
    method, params = fake.calls[-1]
    assert method == "getUpdates"
    assert params["timeout"] == 0  # PTB's final confirming poll must not long-poll
