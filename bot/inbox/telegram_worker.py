"""A worker's Telegram side: the claimed updates run through the ordinary Telegram adapter's
handlers (commands, buttons, chat, bursts: exactly as in one process), and every message the
adapter sends is recorded against the inbox message it answers, as soon as Telegram returns
its id.

Telegram's sendMessage has no idempotency key, so a reply is made once by record, not by
retry: a message with a recorded send is never answered again, and neither is any message
before it in its pair (a burst's answer goes on its newest message). What no record can close
is the moment between Telegram's answer and the record's commit: a worker killed exactly then
has sent a reply that its successor cannot know of (a few milliseconds per reply).
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import logging
from dataclasses import dataclass, field
from typing import Any

from telegram import Message, Update
from telegram.ext import ExtBot
from telegram.request import HTTPXRequest

from bot.adapters.telegram_adapter import TelegramAdapter
from bot.app import App
from bot.config import Settings
from bot.health import Metrics
from memory.store.inbox import Claim, Inbox

log = logging.getLogger(__name__)
# Connections to the Bot API, as an Application builds its own Bot with (PTB's default for a
# Bot made by hand is one: every send and typing action of the worker would queue on it).
CONNECTIONS = 256


class LeaseLost(Exception):
    """The pair's lease ran out (this worker stalled): another worker answers it now."""


@dataclass
class PairWork:
    """One claimed pair being answered: whether it is still this worker's."""

    pair_key: str
    lease_seconds: float
    lost: bool = False


@dataclass
class SendLog:
    """The inbox message being answered in this task, and its sends so far."""

    inbox_id: int
    pair: PairWork
    seq: itertools.count[int] = field(default_factory=itertools.count)


class RecordingBot(ExtBot):  # type: ignore[type-arg]
    """The Bot whose sends are recorded in the outbox of the message they answer."""

    def __init__(
        self, *args: Any, inbox: Inbox, worker_id: str, metrics: Metrics, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        # Underscore names: PTB freezes a Bot's other attributes after construction.
        self._inbox = inbox
        self._worker_id = worker_id
        self._metrics = metrics
        self._current: contextvars.ContextVar[SendLog | None] = contextvars.ContextVar(
            "inbox_send_log", default=None
        )

    @property
    def current(self) -> contextvars.ContextVar[SendLog | None]:
        return self._current

    async def _may_send(self) -> None:
        """Renew the lease just before a send, or refuse the send: a successor may claim the
        pair only a whole lease after this, so no two workers ever send for one message."""
        log_ = self._current.get()
        if log_ is None:
            return
        pair = log_.pair
        if pair.lost or not await self._inbox.extend(
            pair.pair_key, self._worker_id, pair.lease_seconds
        ):
            pair.lost = True
            raise LeaseLost(pair.pair_key)

    async def _recorded(self, sent: Message) -> Message:
        self._metrics.replies_sent += 1
        log_ = self._current.get()
        if log_ is not None:
            seq = next(log_.seq)
            await self._inbox.record_send(log_.inbox_id, seq, str(sent.message_id), self._worker_id)
        return sent

    async def send_message(self, *args: Any, **kwargs: Any) -> Message:  # type: ignore[override]
        await self._may_send()
        return await self._recorded(await super().send_message(*args, **kwargs))

    async def send_document(self, *args: Any, **kwargs: Any) -> Message:  # type: ignore[override]
        await self._may_send()
        return await self._recorded(await super().send_document(*args, **kwargs))


def recording_bot(
    settings: Settings, inbox: Inbox, worker_id: str, metrics: Metrics
) -> RecordingBot:
    assert settings.telegram_bot_token is not None
    base = settings.telegram_api_base_url.rstrip("/")
    return RecordingBot(
        settings.telegram_bot_token.get_secret_value(),
        base_url=f"{base}/bot",
        base_file_url=f"{base}/file/bot",
        request=HTTPXRequest(connection_pool_size=CONNECTIONS),
        inbox=inbox,
        worker_id=worker_id,
        metrics=metrics,
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
        self._bot = recording_bot(app.settings, inbox, worker_id, metrics)
        self.adapter = TelegramAdapter(app.settings, app.commands, bot=self._bot)

    async def start(self) -> None:
        await self.adapter.application.initialize()  # getMe; no polling: the inbox feeds it

    async def stop(self) -> None:
        await self.adapter.application.shutdown()

    async def answer(self, claim: Claim) -> list[int]:
        """Run the pair's pending messages; the ids answered (all of them, as each got its
        answer, an error message, or a place in a burst answered on a later message)."""
        messages = list(claim.messages)
        last_sent = max((i for i, m in enumerate(messages) if m.sent), default=-1)
        # Up to the newest one with a recorded send, the pair was answered by a worker that
        # died before it marked them: answered, not run again.
        todo = messages[last_sent + 1 :]
        log.debug(
            "claim %s: %s, answering %s",
            claim.pair_key,
            [m.id for m in messages],
            [m.id for m in todo],
        )
        if claim.moved and todo:
            await self._drop_stale_sessions(claim.pair_key)
        pair = PairWork(claim.pair_key, self._lease)
        tasks = []
        for message in todo:
            # Each task starts with its own SendLog (a task copies the context it is made in);
            # made in arrival order, they reach the commands' per-caller gate in that order,
            # and messages that arrive together join one burst as on one process.
            token = self._bot.current.set(SendLog(message.id, pair))
            tasks.append(asyncio.create_task(self._run(message.payload)))
            self._bot.current.reset(token)
        await asyncio.gather(*tasks)
        if pair.lost:  # not answered here: the worker that holds the pair now answers them
            raise LeaseLost(claim.pair_key)
        return [m.id for m in messages]

    async def _run(self, payload: dict[str, Any]) -> None:
        application = self.adapter.application
        await application.process_update(Update.de_json(payload, application.bot))

    async def _drop_stale_sessions(self, pair_key: str) -> None:
        """Another worker answered this user since this one did: the sessions this worker
        keeps in RAM lack those turns, so they are read again from the store."""
        _, user_id, _ = pair_key.split(":", 2)
        user = await self._app.store.find_user("telegram", user_id)
        if user is None:
            return
        for character_id in self._app.companion.characters.ids():
            self._app.companion.forget_cached(user.id, character_id)
