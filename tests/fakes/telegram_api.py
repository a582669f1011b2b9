"""A fake Telegram Bot API on 127.0.0.1 that the real python-telegram-bot talks to unchanged.

Point PTB at it with ``ApplicationBuilder().token(fake.token).base_url(fake.base_url)
.base_file_url(fake.base_file_url)``; PTB appends the token itself, so requests arrive at
``/bot<token>/<method>`` and file downloads at ``/file/bot<token>/<file_path>``.

Tests inject updates with the ``send_*`` / ``press_button`` / ``push_update`` helpers (plain
functions: they only queue) and observe the bot through the recorded lists and the
``wait_for_*`` coroutines.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import defaultdict, deque
from collections.abc import Callable
from types import TracebackType
from typing import Any

from aiohttp import web

from tests.fakes.paced import PacedDownload
from tests.fakes.telegram_methods import BotApiMethods
from tests.fakes.telegram_objects import (
    DEFAULT_EXCLUDED_UPDATES,
    JSON,
    ApiError,
    callback_datas,
    entity_for,
    make_chat,
    make_message,
    make_photo_sizes,
    make_sticker,
    make_user,
    read_params,
    update_kind,
    utf16_len,
)
from tests.patience import PATIENCE

__all__ = ["ApiError", "FakeTelegram"]

_MESSAGE_KINDS = ("message", "edited_message", "channel_post", "edited_channel_post")


class FakeTelegram(BotApiMethods):
    """The fake server. Use as ``async with FakeTelegram() as fake:``."""

    def __init__(
        self,
        token: str = "123456:TEST-token",
        *,
        bot_id: int = 7_000_001,
        bot_username: str = "companion_test_bot",
        bot_name: str = "Companion",
    ) -> None:
        bot_user = make_user(bot_id, bot_name, username=bot_username, is_bot=True)
        bot_user.update(
            can_join_groups=True, can_read_all_group_messages=False, supports_inline_queries=False
        )
        super().__init__(token, bot_user)
        self.url = ""
        self.users: dict[int, JSON] = {}
        # The language each user's client reports (language_code); none unless a test sets it.
        self.languages: dict[int, str | None] = {}
        self._methods = self.method_table()
        self._faults: defaultdict[str, deque[ApiError]] = defaultdict(deque)
        # method -> (calls let through, the gate the later ones wait at; see `hold_after`)
        self._holds: dict[str, tuple[int, asyncio.Event]] = {}
        self._allowed_updates: list[str] | None = None
        self._last_update_id = 0
        self._callback_ids = itertools.count(1)
        self._poll_generation = 0
        self._closing = False
        self._pulse = asyncio.Event()
        self._runner: web.AppRunner | None = None
        # Files served a part at a time (tests/fakes/paced.py), by file path.
        self.paced: dict[str, PacedDownload] = {}

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/bot{token}/{method}", self._handle_api)
        app.router.add_get("/file/bot{token}/{path:.+}", self._handle_file)
        # handler_cancellation: a long poll whose client hung up must not linger server-side.
        self._runner = web.AppRunner(
            app, access_log=None, handler_cancellation=True, shutdown_timeout=1.0
        )
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"

    async def stop(self) -> None:
        self._closing = True
        self._changed()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeTelegram:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    @property
    def base_url(self) -> str:
        return f"{self.url}/bot"

    @property
    def base_file_url(self) -> str:
        return f"{self.url}/file/bot"

    # -- HTTP ----------------------------------------------------------------------------------

    async def _handle_api(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return ApiError(401, "Unauthorized").response()
        method = request.match_info["method"]
        params = await read_params(request)
        self.calls.append((method, params))
        self._changed()
        try:
            result = await self._dispatch(method, params)
        except ApiError as error:
            return error.response()
        finally:
            self._changed()
        return web.json_response({"ok": True, "result": result})

    async def _dispatch(self, method: str, params: JSON) -> Any:
        faults = self._faults.get(method.lower())
        if faults:
            raise faults.popleft()
        hold = self._holds.get(method.lower())
        if hold is not None and not hold[1].is_set():
            if hold[0] <= 0:
                await hold[1].wait()
                raise ApiError(502, "Bad Gateway: the held call never reached Telegram")
            self._holds[method.lower()] = (hold[0] - 1, hold[1])
        if method.lower() == "getupdates":
            return await self._get_updates(params)
        handler = self._methods.get(method.lower())
        if handler is None:
            self.unknown_methods.append(method)
            raise ApiError(404, f"Not Found: method {method}")
        return handler(params)

    async def _handle_file(self, request: web.Request) -> web.StreamResponse:
        path = request.match_info["path"]
        if request.match_info["token"] == self.token:
            if path in self.paced:
                return await self.paced[path].serve(request, "image/jpeg")
            for file_path, content in self.files.values():
                if file_path == path:
                    return web.Response(body=content)
        return ApiError(404, "Not Found").response()

    # -- long polling --------------------------------------------------------------------------

    async def _get_updates(self, params: JSON) -> list[JSON]:
        if self.webhook is not None:
            raise ApiError(409, "Conflict: can't use getUpdates method while webhook is active")
        self._confirm(params.get("offset"))
        if "allowed_updates" in params:
            self._allowed_updates = list(params["allowed_updates"] or []) or None
        # Like the real server, a newer poll ends an older one still waiting.
        self._poll_generation += 1
        generation = self._poll_generation
        self._changed()
        timeout = float(params.get("timeout") or 0)
        if timeout > 0:
            await self._wait_until(
                lambda: bool(self._pending) or self._closing or generation != self._poll_generation,
                timeout,
            )
        if generation != self._poll_generation:
            raise ApiError(409, "Conflict: terminated by other getUpdates request")
        limit = min(max(int(params.get("limit") or 100), 1), 100)
        return self._pending[:limit]

    def _confirm(self, offset: Any) -> None:
        # Updates stay queued until a later getUpdates confirms them with offset > update_id.
        if offset is None:
            return
        offset = int(offset)
        if offset < 0:
            self._pending = self._pending[offset:]
        else:
            self._pending = [update for update in self._pending if update["update_id"] >= offset]

    def _changed(self) -> None:
        # Wake every waiter; each re-checks its own predicate. Sync, so helpers can call it.
        self._pulse.set()
        self._pulse = asyncio.Event()

    async def _wait_until(self, predicate: Callable[[], bool], seconds: float) -> bool:
        try:
            async with asyncio.timeout(seconds):
                while not predicate():
                    await self._pulse.wait()
        except TimeoutError:
            return False
        return True

    # -- injecting updates ---------------------------------------------------------------------

    def push_update(self, update: JSON) -> JSON:
        """Queue a raw update (an ``update_id`` is assigned if missing) and return it."""
        update = dict(update)
        update.setdefault("update_id", self._last_update_id + 1)
        self._last_update_id = max(self._last_update_id, update["update_id"])
        for kind in _MESSAGE_KINDS:
            if kind in update:
                self._remember(update[kind])
        allowed = self._allowed_updates
        kind = update_kind(update)
        if (kind in allowed) if allowed else (kind not in DEFAULT_EXCLUDED_UPDATES):
            self._pending.append(update)
        self._changed()
        return update

    def _remember(self, message: JSON) -> None:
        chat = message["chat"]
        self.chats[chat["id"]] = {**self.chats.get(chat["id"], {}), **chat}
        self.messages[(chat["id"], message["message_id"])] = message
        self._last_message_id = max(self._last_message_id, message["message_id"])

    def _sender(
        self, user_id: int, first_name: str | None, username: str | None, is_bot: bool
    ) -> JSON:
        # Remember users so later helpers without names still describe the same person.
        known = self.users.get(user_id, {})
        user = make_user(
            user_id,
            first_name or known.get("first_name") or f"User{user_id}",
            username=username or known.get("username"),
            is_bot=is_bot,
            language_code=None if is_bot else self.languages.get(user_id),
        )
        self.users[user_id] = user
        return user

    def _chat(self, chat_id: int, chat_type: str, sender: JSON, title: str | None) -> JSON:
        known = self.chats.get(chat_id)
        if known is not None and known["type"] == chat_type and title is None:
            return known
        return make_chat(chat_id, chat_type, sender, title)

    def _push_message(
        self, chat: JSON, sender: JSON, reply_to_message_id: int | None, **content: Any
    ) -> JSON:
        reply_to = None
        if reply_to_message_id is not None:
            reply_to = self.messages.get((chat["id"], reply_to_message_id))
            if reply_to is None:
                raise ValueError(f"no message {reply_to_message_id} in chat {chat['id']}")
            reply_to = {key: value for key, value in reply_to.items() if key != "reply_to_message"}
        message = make_message(
            self.next_message_id(), chat, sender, reply_to_message=reply_to, **content
        )
        return self.push_update({"message": message})

    def send_private_text(
        self,
        user_id: int,
        text: str,
        first_name: str | None = None,
        reply_to_message_id: int | None = None,
        *,
        username: str | None = None,
        is_bot: bool = False,
        entities: list[JSON] | None = None,
    ) -> JSON:
        sender = self._sender(user_id, first_name, username, is_bot)
        chat = self._chat(user_id, "private", sender, None)
        return self._push_message(chat, sender, reply_to_message_id, text=text, entities=entities)

    def send_group_text(
        self,
        chat_id: int,
        user_id: int,
        text: str,
        entities: list[JSON] | None = None,
        reply_to_bot_message_id: int | None = None,
        *,
        mention_bot: bool = False,
        first_name: str | None = None,
        username: str | None = None,
        is_bot: bool = False,
        chat_type: str = "supergroup",
        title: str | None = None,
    ) -> JSON:
        """With ``mention_bot``, "@<bot username>" is prepended unless already in ``text``,
        and a ``mention`` entity with UTF-16 offsets is added."""
        entities = list(entities or [])
        if mention_bot:
            handle = f"@{self.bot_user['username']}"
            text = text if handle in text else f"{handle} {text}"
            entities.append(entity_for(text, handle, "mention"))
        if reply_to_bot_message_id is not None:
            target = self.messages.get((chat_id, reply_to_bot_message_id), {})
            if target.get("from", {}).get("id") != self.bot_user["id"]:
                raise ValueError(f"message {reply_to_bot_message_id} is not the bot's")
        sender = self._sender(user_id, first_name, username, is_bot)
        chat = self._chat(chat_id, chat_type, sender, title)
        content = {"text": text, "entities": sorted(entities, key=lambda e: e["offset"]) or None}
        return self._push_message(chat, sender, reply_to_bot_message_id, **content)

    def send_command(
        self,
        chat_id: int,
        user_id: int,
        command: str,
        args: str = "",
        chat_type: str = "private",
        *,
        addressed: bool = False,
        first_name: str | None = None,
        is_bot: bool = False,
    ) -> JSON:
        """``addressed`` writes "/cmd@bot_username", as clients do in groups."""
        head = "/" + command.lstrip("/")
        if addressed:
            head += f"@{self.bot_user['username']}"
        text = f"{head} {args}" if args else head
        entity = {"type": "bot_command", "offset": 0, "length": utf16_len(head)}
        sender = self._sender(user_id, first_name, None, is_bot)
        chat = self._chat(chat_id, chat_type, sender, None)
        return self._push_message(chat, sender, None, text=text, entities=[entity])

    def send_sticker(
        self, chat_id: int, user_id: int, emoji: str = "👍", chat_type: str = "private"
    ) -> JSON:
        sender = self._sender(user_id, None, None, False)
        chat = self._chat(chat_id, chat_type, sender, None)
        file_id = self.store_file(b"RIFF-fake-webp", "stickers", ".webp")
        return self._push_message(chat, sender, None, sticker=make_sticker(file_id, emoji))

    def send_photo(
        self,
        chat_id: int,
        user_id: int,
        content: bytes = b"\x89PNG fake image",
        caption: str | None = None,
        chat_type: str = "private",
        *,
        declared: bool = True,
        held_after: int | None = None,
    ) -> JSON:
        """The photo's bytes are downloadable through getFile and the file URL. `declared`
        False: no file_size, in the update or from getFile. `held_after`: the download is
        served a part at a time (`self.paced`, by the file's path)."""
        sender = self._sender(user_id, None, None, False)
        chat = self._chat(chat_id, chat_type, sender, None)
        file_id = self.store_file(content, "photos", ".jpg")
        self.files[f"{file_id}_s"] = self.files[file_id]
        photo = make_photo_sizes(file_id, len(content) if declared else None)
        if not declared:
            self.undeclared_sizes.update((file_id, f"{file_id}_s"))
        if held_after is not None:
            self.paced[self.files[file_id][0]] = PacedDownload(content, held_after)
        return self._push_message(chat, sender, None, photo=photo, caption=caption)

    def press_button(self, chat_id: int, user_id: int, message_id: int, callback_data: str) -> JSON:
        message = self.messages.get((chat_id, message_id))
        if message is None:
            raise ValueError(f"no message {message_id} in chat {chat_id}")
        if callback_data not in callback_datas(message):
            raise ValueError(f"no button {callback_data!r}; have {callback_datas(message)}")
        query_id = f"cbq{next(self._callback_ids)}"
        self._open_callbacks.add(query_id)
        query = {
            "id": query_id,
            "from": self._sender(user_id, None, None, False),
            "chat_instance": f"instance{chat_id}",
            "message": dict(message),
            "data": callback_data,
        }
        return self.push_update({"callback_query": query})

    # -- observing the bot ---------------------------------------------------------------------

    @property
    def pending_updates(self) -> list[JSON]:
        """Updates queued and not yet confirmed by an offset."""
        return list(self._pending)

    def sent_messages(self, chat_id: int | None = None) -> list[JSON]:
        return [sent for sent in self._sent if chat_id is None or sent["chat_id"] == chat_id]

    def calls_to(self, method: str) -> list[JSON]:
        return [params for name, params in self.calls if name.lower() == method.lower()]

    # A timeout argument reads better in tests than wrapping every call in asyncio.timeout.
    async def wait_until(
        self,
        predicate: Callable[[], bool],
        timeout: float = PATIENCE,  # noqa: ASYNC109
    ) -> None:
        """Wait until ``predicate()`` holds; it is re-checked whenever the fake sees traffic."""
        if not await self._wait_until(predicate, timeout):
            raise AssertionError(f"condition not met within {timeout}s; calls: {self.calls}")

    async def wait_for_messages(
        self,
        chat_id: int,
        count: int = 1,
        timeout: float = PATIENCE,  # noqa: ASYNC109
    ) -> list[JSON]:
        """The bot's messages to ``chat_id`` once at least ``count`` exist."""
        if not await self._wait_until(lambda: len(self.sent_messages(chat_id)) >= count, timeout):
            texts = [sent["text"] for sent in self.sent_messages(chat_id)]
            raise AssertionError(
                f"expected {count} messages to {chat_id} within {timeout}s, got {texts}"
            )
        return self.sent_messages(chat_id)

    async def wait_for_calls(
        self,
        method: str,
        count: int = 1,
        timeout: float = PATIENCE,  # noqa: ASYNC109
    ) -> list[JSON]:
        """Params of every call to ``method`` once at least ``count`` were made."""
        if not await self._wait_until(lambda: len(self.calls_to(method)) >= count, timeout):
            seen = [name for name, _ in self.calls]
            raise AssertionError(f"expected {count} {method} calls within {timeout}s; saw {seen}")
        return self.calls_to(method)

    def hold_after(self, method: str, count: int) -> asyncio.Event:
        """Let ``count`` calls to ``method`` through, then hold the later ones unanswered (a
        sender killed meanwhile never hears back) until the returned event is set, when they
        fail, as a call that never reached Telegram: they send nothing. Later calls pass."""
        gate = asyncio.Event()
        self._holds[method.lower()] = (count, gate)
        return gate

    def fail_next(
        self,
        method: str,
        error_code: int = 429,
        description: str | None = None,
        retry_after: int | None = None,
        times: int = 1,
    ) -> None:
        """Make the next ``times`` calls to ``method`` fail. PTB raises RetryAfter only when
        ``retry_after`` is set; the exception class follows the HTTP status otherwise."""
        if description is None:
            description = (
                f"Too Many Requests: retry after {retry_after or 1}"
                if error_code == 429
                else "Bad Request: injected failure"
            )
        for _ in range(times):
            self._faults[method.lower()].append(ApiError(error_code, description, retry_after))
