"""Telegram, through python-telegram-bot v22: long polling by default, a webhook by settings.

Private chats are always answered; in groups the bot answers when it is mentioned, when someone
replies to one of its messages, or in every message of a group an admin bound to a character.
Telegram's privacy mode (on by default for bots) already limits group messages to those cases;
see the README for the BotFather settings. Handlers only parse, call `Commands`, and reply.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from telegram import (
    BotCommand,
    Message,
    MessageEntity,
    Update,
)
from telegram.constants import ParseMode
from telegram.error import BadRequest, Forbidden, TelegramError
from telegram.ext import (
    Application,
    ApplicationBuilder,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
    ExtBot,
    MessageHandler,
    filters,
)

from bot.adapters.base import InFlight
from bot.adapters.live import LiveReply
from bot.adapters.split import split_html
from bot.adapters.telegram_format import to_telegram_html
from bot.adapters.telegram_parts import caller_of, keyboard, typing_shown
from bot.adapters.telegram_roles import GroupAdmins
from bot.adapters.telegram_scene import TelegramScenes
from bot.answers import Answer, Caller
from bot.command_line import menu, run, run_line
from bot.commands import Commands
from bot.config import Settings
from bot.downloads import DownloadFailed, read_capped
from bot.registry import REGISTRY, Command
from bot.texts import LANGUAGES, text
from memory.errors import UserFacingError

log = logging.getLogger(__name__)
Context = ContextTypes.DEFAULT_TYPE
CommandCallback = Callable[[Update, Context], Awaitable[None]]
LIMIT = 4096


class TelegramAdapter:
    name = "telegram"

    def __init__(self, settings: Settings, commands: Commands, bot: ExtBot | None = None) -> None:
        """`bot`: a Bot of the caller's (a worker's, which records its sends: bot/inbox/)."""
        assert settings.telegram_bot_token is not None
        self._settings = settings
        self._commands = commands
        self._in_flight = InFlight()
        base = settings.telegram_api_base_url.rstrip("/")
        builder = ApplicationBuilder()
        if bot is not None:
            builder = builder.bot(bot)
        else:
            builder = (
                builder.token(settings.telegram_bot_token.get_secret_value())
                .base_url(f"{base}/bot")
                .base_file_url(f"{base}/file/bot")
            )
        # Different chats run concurrently; one user's messages keep their order through the
        # commands' per-caller gate and the engine's per-session lock.
        self.application: Application = builder.concurrent_updates(True).build()  # type: ignore[type-arg]
        self._scenes = TelegramScenes(commands, settings, self.application)
        self._admins = GroupAdmins(self.application.bot, settings.community_admins_cache_seconds)
        self._register()

    def _register(self) -> None:
        app = self.application
        for command in REGISTRY:  # every name in both languages, and the aliases
            app.add_handler(CommandHandler(list(command.all_names), self._on_command(command)))
        app.add_handler(CallbackQueryHandler(self.on_button))
        app.add_handler(
            MessageHandler(filters.COMMAND & filters.ChatType.PRIVATE, self.on_unknown_command)
        )
        app.add_handler(MessageHandler(filters.TEXT & ~filters.COMMAND, self.on_text))
        app.add_handler(MessageHandler(filters.PHOTO | filters.Document.IMAGE, self.on_photo))
        app.add_handler(
            MessageHandler(
                (
                    filters.ATTACHMENT
                    | filters.PHOTO
                    | filters.Sticker.ALL
                    | filters.VOICE
                    | filters.VIDEO
                    | filters.LOCATION
                )
                & ~filters.COMMAND,
                self.on_attachment,
            )
        )
        app.add_error_handler(self.on_error)

    async def start(self) -> None:
        app = self.application
        await app.initialize()
        for language in LANGUAGES:
            listed = [BotCommand(name, description) for name, description in menu(language)]
            await app.bot.set_my_commands(listed, language_code=language)
        await app.bot.set_my_commands([BotCommand(n, d) for n, d in menu("en")])
        await app.start()
        assert app.updater is not None
        if self._settings.telegram_webhook_url:
            secret = self._settings.telegram_webhook_secret
            await app.updater.start_webhook(
                listen=self._settings.telegram_webhook_listen,
                port=self._settings.telegram_webhook_port,
                webhook_url=self._settings.telegram_webhook_url,
                secret_token=secret.get_secret_value() if secret else None,
                allowed_updates=Update.ALL_TYPES,
            )
        else:
            await app.updater.start_polling(allowed_updates=Update.ALL_TYPES)
        log.info("telegram: running as @%s", app.bot.username)

    async def send_private(self, platform_user_id: str, message: str) -> bool:
        """An unprompted message to the user's private chat (its id is the user's)."""
        try:
            await self._deliver(int(platform_user_id), Answer(message), reply_to=None)
        except (TelegramError, ValueError):
            log.warning("telegram: could not write to user %s", platform_user_id, exc_info=True)
            return False
        return True

    async def stop(self) -> None:
        app = self.application
        if app.updater is not None and app.updater.running:
            await app.updater.stop()  # no new updates from here on
        await self._in_flight.drain(self._settings.shutdown_grace_seconds)
        if app.running:
            await app.stop()
        await app.shutdown()

    # ---- when to answer ----------------------------------------------------------------------

    async def _addressed(self, message: Message, caller: Caller) -> bool:
        """In a group: a mention, a reply to the bot, or a channel bound to a character."""
        if caller.channel_kind == "dm":
            return True
        me = self.application.bot
        if (
            message.reply_to_message
            and message.reply_to_message.from_user
            and (message.reply_to_message.from_user.id == me.id)
        ):
            return True
        mentions = message.parse_entities([MessageEntity.MENTION]).values()
        if any(m.lstrip("@").lower() == (me.username or "").lower() for m in mentions):
            return True
        return await self._commands.is_bound(caller)

    def _strip_mention(self, message_text: str) -> str:
        username = self.application.bot.username or ""
        return message_text.replace(f"@{username}", "").strip() if username else message_text

    def _typing(self, chat_id: int) -> contextlib.AbstractAsyncContextManager[None]:
        return typing_shown(self.application.bot, chat_id)

    # ---- handlers ----------------------------------------------------------------------------

    async def on_text(self, update: Update, _context: Context) -> None:
        """A message to the character."""
        message, user = update.effective_message, update.effective_user
        if message is None or message.text is None or user is None or user.is_bot:
            return
        caller = caller_of(update)
        if not self._in_flight.accepting:
            return
        if caller.channel_kind == "group":
            await self._to_scene(message, caller, message.text)
            return
        if not await self._addressed(message, caller):
            return

        async def notify(notice: Answer) -> None:
            await self._send(message, caller, notice)

        live = self._live(message, caller)
        async with self._in_flight.track(), self._typing(message.chat_id):
            # A burst is answered once, on its newest message; the others get "" (sent as nothing).
            answer = await self._commands.chat(
                caller,
                self._strip_mention(message.text),
                str(message.message_id),
                notify,
                live.update if live is not None else None,
            )
        await self._send(message, caller, answer, live)

    async def _to_scene(self, message: Message, caller: Caller, words: str) -> None:
        """A group message to the group's scene (bot/adapters/telegram_scene.py)."""

        @contextlib.asynccontextmanager
        async def busy() -> AsyncIterator[None]:
            async with self._in_flight.track(), self._typing(message.chat_id):
                yield

        async def send(answer: Answer) -> None:
            await self._send(message, caller, answer)

        await self._scenes.hear(message, caller, self._strip_mention(words), busy, send)

    def _live(self, message: Message, caller: Caller) -> LiveReply[int] | None:
        """The reply's message while the model writes it (STREAM_REPLIES), edited in place."""
        if not self._settings.stream_replies:
            return None
        bot = self.application.bot
        reply_to = message.message_id if caller.channel_kind == "group" else None

        async def send(html: str) -> int:
            sent = await bot.send_message(
                message.chat_id, html, parse_mode=ParseMode.HTML, reply_to_message_id=reply_to
            )
            return sent.message_id

        async def edit(message_id: int, html: str) -> None:
            await bot.edit_message_text(
                html, chat_id=message.chat_id, message_id=message_id, parse_mode=ParseMode.HTML
            )

        def render(text: str) -> str:
            return split_html(to_telegram_html(text), LIMIT)[0]

        return LiveReply(send, edit, render, self._settings.stream_edit_seconds)

    async def on_photo(self, update: Update, _context: Context) -> None:
        """A photo (or an image sent as a file): shown to the character with its caption."""
        message, user = update.effective_message, update.effective_user
        if message is None or user is None or user.is_bot or not self._in_flight.accepting:
            return
        caller = caller_of(update)
        caption = message.caption or ""
        if not await self._addressed(message, caller) and not self._named_in(caption):
            return
        item = message.photo[-1] if message.photo else message.document  # the largest size
        photos = self._commands.photos
        if item is None or photos is None:
            await self._send(message, caller, await self._commands.refusal(caller, "attachment"))
            return

        async def fetch(limit: int) -> bytes:
            # Streamed, not download_as_bytearray: a file with no declared size stops at limit.
            found = await item.get_file()
            if found.file_path is None:
                raise DownloadFailed("Telegram gave no path for the file")
            return await read_capped(found.file_path, limit)

        if caller.channel_kind == "group":  # described, then a line of the group's scene
            async with self._in_flight.track(), self._typing(message.chat_id):
                turn = await photos.describe(caller, item.file_size or 0, fetch, caption)
            if isinstance(turn, Answer):
                await self._send(message, caller, turn)
            else:
                await self._to_scene(message, caller, turn)
            return
        async with self._in_flight.track(), self._typing(message.chat_id):
            caption = self._strip_mention(caption)
            pending = await photos.submit(
                caller, item.file_size or 0, fetch, caption, str(message.message_id)
            )
            answer = await pending
        await self._send(message, caller, answer)

    def _named_in(self, caption: str) -> bool:
        """A group photo is addressed to the bot when its caption mentions it."""
        username = self.application.bot.username or ""
        return bool(username) and f"@{username}".lower() in caption.lower()

    async def on_attachment(self, update: Update, _context: Context) -> None:
        """Stickers, photos, files: a graceful answer instead of silence."""
        message, user = update.effective_message, update.effective_user
        if message is None or user is None or user.is_bot:
            return
        caller = caller_of(update)
        if caller.channel_kind == "group" and not await self._addressed(message, caller):
            return
        await self._send(message, caller, await self._commands.refusal(caller, "attachment"))

    def _on_command(self, command: Command) -> CommandCallback:
        """The handler of one registry command: its words go to the registry's runner."""

        # Only a command that manages the group asks Telegram who its admins are.
        manages = any(leaf.admin for leaf in command.leaves())

        async def handle(update: Update, context: Context) -> None:
            caller = caller_of(update)
            if manages:
                caller = await self._admins.with_role(caller)
            work = run(self._commands, caller, command, list(context.args or []))
            await self._reply_command(update, work)

        return handle

    async def on_unknown_command(self, update: Update, _context: Context) -> None:
        """A "/word" in a private chat that is no command: say which ones exist."""
        message = update.effective_message
        if message is None or message.text is None:
            return
        answer = await run_line(self._commands, caller_of(update), message.text)
        if answer is not None:
            await self._send(message, caller_of(update), answer)

    async def on_button(self, update: Update, _context: Context) -> None:
        """An inline keyboard button: switch character, confirm a forget, review a fact."""
        query = update.callback_query
        if query is None or query.data is None or query.message is None:
            return
        await query.answer()
        answer = await self._commands.button(caller_of(update), query.data)
        await query.edit_message_text(
            to_telegram_html(answer.text), parse_mode=ParseMode.HTML, reply_markup=keyboard(answer)
        )

    async def on_error(self, update: object, context: Context) -> None:
        """The one error handler: a safe message for the user, the traceback for the log."""
        error = context.error
        if not isinstance(update, Update) or update.effective_message is None:
            log.error("telegram error outside a message", exc_info=error)
            return
        caller = caller_of(update)
        if isinstance(error, UserFacingError):
            answer = await self._commands.user_error(caller, error)
        else:
            log.error("telegram handler failed", exc_info=error)
            answer = Answer(text(await self._commands.language(caller), "error"), ok=False)
        await self._send(update.effective_message, caller, answer)

    # ---- replying ----------------------------------------------------------------------------

    async def _reply_command(self, update: Update, pending: object) -> None:
        assert update.effective_message is not None
        answer = await pending  # type: ignore[misc]
        await self._send(update.effective_message, caller_of(update), answer)

    async def _send(
        self, message: Message, caller: Caller, answer: Answer, live: LiveReply[int] | None = None
    ) -> None:
        """Split to 4,096 characters; private answers in a group go to the private chat; a
        streamed reply's message receives the final text's first part."""
        if not answer.text and answer.document is None:
            return  # a message whose burst is answered on a later message
        chat_id = message.chat_id
        if answer.private and caller.channel_kind == "group":
            try:
                await self._deliver(int(caller.user_id), answer, reply_to=None)
            except (Forbidden, BadRequest):  # never started, or a chat Telegram does not know
                answer = Answer(text(await self._commands.language(caller), "start_private"))
                await self._deliver(chat_id, answer, reply_to=message.message_id)
                return
            pointer = text(await self._commands.language(caller), "private_pointer")
            await self._deliver(chat_id, Answer(pointer), reply_to=message.message_id)
            return
        reply_to = message.message_id if caller.channel_kind == "group" else None
        await self._deliver(chat_id, answer, reply_to=reply_to, live=live)

    async def _deliver(
        self,
        chat_id: int,
        answer: Answer,
        reply_to: int | None,
        live: LiveReply[int] | None = None,
    ) -> None:
        bot = self.application.bot
        # Markdown from the model and the catalogue becomes Telegram HTML; the split keeps each
        # part's tags balanced, as Telegram refuses a message whose HTML does not parse.
        chunks = split_html(to_telegram_html(answer.text), LIMIT) if answer.text else []
        if chunks and live is not None and not answer.buttons and await live.finish(chunks[0]):
            chunks, reply_to = chunks[1:], None  # the first part is already on screen
        for index, chunk in enumerate(chunks):
            last = index == len(chunks) - 1
            await bot.send_message(
                chat_id,
                chunk,
                parse_mode=ParseMode.HTML,
                reply_to_message_id=reply_to if index == 0 else None,
                reply_markup=keyboard(answer) if last else None,
            )
        if answer.document is not None:
            name, payload = answer.document
            await bot.send_document(chat_id, payload, filename=name)
