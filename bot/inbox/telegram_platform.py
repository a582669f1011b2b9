"""The Telegram platform process: receive updates, store each one, then acknowledge it.

Long polling: the updates of one getUpdates are stored in one transaction, and only then does
the next getUpdates carry `offset` past them, which is Telegram's acknowledgement. A process
killed between the two sees the same updates again at its next start (Telegram keeps what was
not acknowledged for 24 hours) and the inbox's unique (platform, update id) drops the repeats.
A webhook: the update is stored before the 200 goes back; Telegram retries anything else.
Nothing here parses a message: workers do, with the adapter they already have.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp
from aiohttp import web

from bot.command_line import menu
from bot.config import Settings
from bot.health import Metrics
from bot.inbox.dead_letters import DeadLetterSink, InboxKeeper
from bot.inbox.refused import PlatformAccess
from bot.texts import LANGUAGES
from memory.platform_text import storable_json
from memory.store.inbox import SCENE_PAIR, Arrival, Inbox

log = logging.getLogger(__name__)
POLL_TIMEOUT_SECONDS = 20
RETRY_SECONDS = 1.0
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


GROUP_CHATS = ("group", "supergroup")


def telegram_arrival(update: dict[str, Any]) -> Arrival:
    """The inbox row of an update: its pair is the sender in the chat it came from, or for a
    group's message the group's scene, which is one queue for everyone in it (a worker answers
    its turns one at a time, in order); its text made storable on the way in
    (memory/platform_text.py)."""
    update = storable_json(update)
    body = next((v for k, v in update.items() if k != "update_id" and isinstance(v, dict)), {})
    sender = body.get("from") or {}
    chat = body.get("chat") or (body.get("message") or {}).get("chat") or {}
    sender_id = str(sender.get("id", "-"))
    pair = f"telegram:{sender_id}:{chat.get('id', '-')}"
    if "chat" in body and chat.get("type") in GROUP_CHATS:  # a message, not a button's press
        pair = f"telegram:{SCENE_PAIR}:{chat.get('id', '-')}"
    known = sender_id if sender_id != "-" else None
    return Arrival("telegram", str(update["update_id"]), pair, update, known)


class TelegramIngest:
    def __init__(
        self,
        settings: Settings,
        inbox: Inbox,
        metrics: Metrics,
        dead_letters: DeadLetterSink,
        access: PlatformAccess | None = None,
    ) -> None:
        assert settings.telegram_bot_token is not None
        token = settings.telegram_bot_token.get_secret_value()
        self._api = f"{settings.telegram_api_base_url.rstrip('/')}/bot{token}"
        self._settings = settings
        self._keeper = InboxKeeper(inbox, dead_letters, metrics, [token])
        self._metrics = metrics
        self._access = access
        self._session: aiohttp.ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._runner: web.AppRunner | None = None
        self.name = "telegram"

    async def _call(self, method: str, params: dict[str, Any], timeout: float = 30) -> Any:  # noqa: ASYNC109
        assert self._session is not None
        async with self._session.post(
            f"{self._api}/{method}", json=params, timeout=aiohttp.ClientTimeout(total=timeout)
        ) as response:
            body = await response.json()
        if not body.get("ok"):
            raise RuntimeError(f"telegram {method}: {body.get('description', 'failed')}")
        return body["result"]

    async def start(self) -> None:
        self._session = aiohttp.ClientSession()
        for language in LANGUAGES:
            commands = [{"command": n, "description": d} for n, d in menu(language)]
            await self._call("setMyCommands", {"commands": commands, "language_code": language})
        await self._call(
            "setMyCommands", {"commands": [{"command": n, "description": d} for n, d in menu("en")]}
        )
        if self._settings.telegram_webhook_url:
            await self._start_webhook()
        else:
            await self._call("deleteWebhook", {})
            self._task = asyncio.create_task(self._poll())
        log.info("telegram platform: storing updates in the inbox")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _poll(self) -> None:
        offset: int | None = None
        while True:
            params: dict[str, Any] = {"timeout": POLL_TIMEOUT_SECONDS, "allowed_updates": []}
            if offset is not None:
                params["offset"] = offset  # the acknowledgement of everything stored before
            try:
                updates = await self._call("getUpdates", params, POLL_TIMEOUT_SECONDS + 10)
                await self._store(updates)
            except asyncio.CancelledError:
                raise
            except Exception:
                self._metrics.errors += 1
                log.warning("telegram: getUpdates or the store failed; retrying", exc_info=True)
                await asyncio.sleep(RETRY_SECONDS)
                continue
            ids = [u["update_id"] for u in updates if isinstance(u.get("update_id"), int)]
            if ids:
                offset = max(ids) + 1

    async def _store(self, updates: list[dict[str, Any]]) -> None:
        """Each update in the inbox, or else a dead letter (bot/inbox/dead_letters.py); a
        refused person's without their words (bot/inbox/refused.py). Raises, and nothing is
        acknowledged, when the rules cannot be read."""
        if self._access is not None:
            screened = [await self._access.telegram(u) for u in updates]
            updates = [u for u in screened if u is not None]
        await self._keeper.keep("telegram", updates, telegram_arrival)

    async def _start_webhook(self) -> None:
        settings = self._settings
        secret = settings.telegram_webhook_secret
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._on_webhook)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        listen, port = settings.telegram_webhook_listen, settings.telegram_webhook_port
        await web.TCPSite(self._runner, listen, port).start()
        params: dict[str, Any] = {"url": settings.telegram_webhook_url, "allowed_updates": []}
        if secret is not None:
            params["secret_token"] = secret.get_secret_value()
        await self._call("setWebhook", params)

    async def _on_webhook(self, request: web.Request) -> web.Response:
        secret = self._settings.telegram_webhook_secret
        if secret is not None and request.headers.get(SECRET_HEADER) != secret.get_secret_value():
            return web.Response(status=403)
        try:
            await self._store([await request.json()])
        except Exception:
            self._metrics.errors += 1
            log.warning("telegram webhook: the update could not be stored", exc_info=True)
            return web.Response(status=503)  # Telegram delivers it again later
        return web.Response(text="ok")
