"""What every platform's worker does the same way: answer a claimed pair's messages in order,
renew the lease before each send (or refuse it), and record each send against the inbox message
it answers. The Telegram and Discord workers differ only in how a payload is run and how a
send reaches the platform.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from bot.app import App
from bot.health import Metrics
from memory.models import Incoming
from memory.store.inbox import Answered, Claim, Inbox

log = logging.getLogger(__name__)


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
    # The engine never wrote the message's words (off the record): the inbox row must not
    # keep them either.
    unstored: bool = False


@dataclass(frozen=True)
class Slot:
    """One send about to be made for an inbox message: its place among that message's sends."""

    inbox_id: int
    seq: int

    @property
    def nonce(self) -> str:
        """The same for the same send made again by a successor (Discord's limit: 25
        characters; inbox ids are a sequence, never reused)."""
        return f"{self.inbox_id}.{self.seq}"


class SendRecorder:
    """The send log of the task being run (a context variable: each message's task has its
    own), and the two steps around every send made for it."""

    def __init__(self, inbox: Inbox, worker_id: str, metrics: Metrics) -> None:
        self._inbox = inbox
        self._worker_id = worker_id
        self._metrics = metrics
        self.current: contextvars.ContextVar[SendLog | None] = contextvars.ContextVar(
            "inbox_send_log", default=None
        )

    async def before(self) -> Slot | None:
        """Renew the lease just before a send, or refuse the send: a successor may claim the
        pair only a whole lease after this, so no two workers ever send for one message.
        None outside an inbox message (nothing to record)."""
        log_ = self.current.get()
        if log_ is None:
            return None
        pair = log_.pair
        if pair.lost or not await self._inbox.extend(
            pair.pair_key, self._worker_id, pair.lease_seconds
        ):
            pair.lost = True
            raise LeaseLost(pair.pair_key)
        return Slot(log_.inbox_id, next(log_.seq))

    def unstored(self, _incoming: Incoming) -> None:
        """The engine's word (Companion.on_unstored, in the message's own context) that this
        message's words were never written."""
        log_ = self.current.get()
        if log_ is not None:
            log_.unstored = True

    async def after(self, slot: Slot | None, message_id: str) -> None:
        """Record a send as soon as the platform returned its id."""
        self._metrics.replies_sent += 1
        if slot is not None:
            await self._inbox.record_send(slot.inbox_id, slot.seq, message_id, self._worker_id)


async def answer_claim(
    claim: Claim,
    recorder: SendRecorder,
    lease_seconds: float,
    run: Callable[[dict[str, Any]], Awaitable[None]],
    on_moved: Callable[[str], Awaitable[None]],
) -> Answered:
    """Run the pair's pending messages; the ids answered (all of them, as each got its answer,
    an error message, or a place in a burst answered on a later message), and those of them
    whose words the engine never wrote."""
    messages = list(claim.messages)
    last_sent = max((i for i, m in enumerate(messages) if m.sent), default=-1)
    # Up to the newest one with a recorded send, the pair was answered by a worker that died
    # before it marked them: answered, not run again.
    todo = messages[last_sent + 1 :]
    log.debug(
        "claim %s: %s, answering %s", claim.pair_key, [m.id for m in messages], [m.id for m in todo]
    )
    if claim.moved and todo:
        await on_moved(claim.pair_key)
    pair = PairWork(claim.pair_key, lease_seconds)
    tasks, logs = [], []
    for message in todo:
        # Each task starts with its own SendLog (a task copies the context it is made in);
        # made in arrival order, they reach the commands' per-caller gate in that order, and
        # messages that arrive together join one burst as on one process.
        logs.append(SendLog(message.id, pair))
        token = recorder.current.set(logs[-1])
        tasks.append(asyncio.create_task(run(message.payload)))
        recorder.current.reset(token)
    await asyncio.gather(*tasks)
    if pair.lost:  # not answered here: the worker that holds the pair now answers them
        raise LeaseLost(claim.pair_key)
    return Answered(
        tuple(m.id for m in messages), tuple(log_.inbox_id for log_ in logs if log_.unstored)
    )


async def drop_stale_sessions(app: App, pair_key: str) -> None:
    """Another worker answered this user since this one did: the sessions this worker keeps in
    RAM lack those turns, so they are read again from the store."""
    platform, user_id, _ = pair_key.split(":", 2)
    user = await app.store.find_user(platform, user_id)
    if user is None:
        return
    for character_id in app.companion.characters.ids():
        app.companion.forget_cached(user.id, character_id)
