"""A worker's Telegram side: the claimed updates run through the ordinary Telegram adapter's
handlers (commands, buttons, chat, bursts: exactly as in one process), and every message the
adapter sends is recorded against the inbox message it answers, as soon as Telegram returns
its id.

Telegram's sendMessage has no idempotency key, so a reply is made once by record, not by
retry: a send that is recorded is never made again. A message whose handler ended is never
answered again, and neither is any message before it in its pair (a burst's answer goes on its
newest message); one whose worker died between two parts of its reply is run again, and only
the parts not recorded are sent (bot/inbox/sends.py). What no record can close
is the moment between Telegram's answer and the record's commit: a worker killed exactly then
has sent a reply that its successor cannot know of (a few milliseconds per reply).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from telegram import Chat, Message, Update
from telegram.ext import ExtBot
from telegram.request import HTTPXRequest

from bot.adapters.telegram_adapter import TelegramAdapter
from bot.app import App
from bot.config import Settings
from bot.health import Metrics
from bot.inbox.sends import LeaseLost, SendRecorder, answer_claim, drop_stale_sessions
from memory.store.inbox import Answered, Claim, Inbox

__all__ = ["LeaseLost", "RecordingBot", "TelegramWorker", "recording_bot"]
log = logging.getLogger(__name__)
# Connections to the Bot API, as an Application builds its own Bot with (PTB's default for a
# Bot made by hand is one: every send and typing action of the worker would queue on it).
CONNECTIONS = 256


class RecordingBot(ExtBot):  # type: ignore[type-arg]
    """The Bot whose sends are recorded in the outbox of the message they answer."""

    def __init__(self, *args: Any, recorder: SendRecorder, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # An underscore name: PTB freezes a Bot's other attributes after construction.
        self._recorder = recorder

    @property
    def recorder(self) -> SendRecorder:
        return self._recorder

    async def send_message(self, *args: Any, **kwargs: Any) -> Message:  # type: ignore[override]
        chat_id = kwargs.get("chat_id", args[0] if args else None)
        text = kwargs.get("text", args[1] if len(args) > 1 else "")
        slot = await self._recorder.before(f"message:{text}")
        if slot is not None and slot.sent is not None:
            return self._already_sent(chat_id, slot.sent)
        sent = await super().send_message(*args, **kwargs)
        await self._recorder.after(slot, str(sent.message_id))
        return sent

    async def send_document(self, *args: Any, **kwargs: Any) -> Message:  # type: ignore[override]
        chat_id = kwargs.get("chat_id", args[0] if args else None)
        slot = await self._recorder.before(f"document:{kwargs.get('filename')}")
        if slot is not None and slot.sent is not None:
            return self._already_sent(chat_id, slot.sent)
        sent = await super().send_document(*args, **kwargs)
        await self._recorder.after(slot, str(sent.message_id))
        return sent

    def _already_sent(self, chat_id: Any, message_id: str) -> Message:
        """The message a worker before this one sent (Telegram cannot be asked for it: only
        its id is known, which is all the adapter reads of a send)."""
        chat = Chat(int(chat_id), Chat.PRIVATE)
        return Message(int(message_id), datetime.now(UTC), chat)


def recording_bot(settings: Settings, recorder: SendRecorder) -> RecordingBot:
    assert settings.telegram_bot_token is not None
    base = settings.telegram_api_base_url.rstrip("/")
    return RecordingBot(
        settings.telegram_bot_token.get_secret_value(),
        base_url=f"{base}/bot",
        base_file_url=f"{base}/file/bot",
        request=HTTPXRequest(connection_pool_size=CONNECTIONS),
        recorder=recorder,
    )


class TelegramWorker:
    """Answers one claimed pair: its messages, in order, through the adapter's handlers."""

    def __init__(
        self,
        app: App,
        inbox: Inbox,
        worker_id: str,
        metrics: Metrics,
        lease_seconds: float,
    ) -> None:
        self._app = app
        self._lease = lease_seconds
        self._recorder = SendRecorder(inbox, worker_id, metrics)
        app.companion.on_unstored(self._recorder.unstored)
        self._bot = recording_bot(app.settings, self._recorder)
        self.adapter = TelegramAdapter(app.settings, app.commands, bot=self._bot)

    async def start(self) -> None:
        await self.adapter.application.initialize()  # getMe; no polling: the inbox feeds it

    async def stop(self) -> None:
        await self.adapter.application.shutdown()

    async def answer(self, claim: Claim) -> Answered:
        """The pair's pending messages through the adapter (bot/inbox/sends.py)."""

        async def moved(pair_key: str) -> None:
            await drop_stale_sessions(self._app, pair_key)

        return await answer_claim(claim, self._recorder, self._lease, self._run, moved)

    async def _run(self, payload: dict[str, Any]) -> None:
        application = self.adapter.application
        await application.process_update(Update.de_json(payload, application.bot))
