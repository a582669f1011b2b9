"""What every platform's worker does the same way: answer a claimed pair's messages in order,
renew the lease before each send (or refuse it), and record each send against the inbox message
it answers. The Telegram and Discord workers differ only in how a payload is run and how a
send reaches the platform.

A send's number is drawn from what it says (and how many sends of the message said the same
before it), not from its place: a successor that runs a message again, after its worker died
having sent part of the reply, finds its parts' numbers recorded and makes only the others,
even where the first run also sent what the second does not (the rate limit's notice, the
message shown while the reply was written).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import zlib
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from bot.app import App
from bot.health import Metrics
from memory.models import Incoming
from memory.scene.engine import scene_owner_id
from memory.store.inbox import DONE_SEQ, SCENE_PAIR, Answered, Claim, Inbox, Pending

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
    """The inbox message being answered in this task, the sends a worker before this one
    recorded for it, and what this task has sent so far."""

    inbox_id: int
    pair: PairWork
    recorded: dict[int, str] = field(default_factory=dict)
    said: Counter[str] = field(default_factory=Counter)
    made: int = 0  # sends made or found recorded by this task
    # The engine never wrote the message's words (off the record): the inbox row must not
    # keep them either.
    unstored: bool = False


def send_number(content: str, repeat: int) -> int:
    """A send's number among its message's sends: the same for the same content (the same
    `repeat`-th time) in any run. 31 bits: the outbox's INTEGER, never negative (DONE_SEQ)."""
    return zlib.crc32(f"{repeat}\x00{content}".encode()) & 0x7FFFFFFF


@dataclass(frozen=True)
class Slot:
    """One send about to be made for an inbox message: its number among that message's sends,
    and the platform's id of it when a worker before this one made it already."""

    inbox_id: int
    seq: int
    sent: str | None = None

    @property
    def nonce(self) -> str:
        """The same for the same send made again by a successor (Discord's limit: 25
        characters: 14 digits of inbox id, a sequence never reused, and 10 of number)."""
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

    async def before(self, content: str) -> Slot | None:
        """Renew the lease just before a send of `content`, or refuse the send: a successor
        may claim the pair only a whole lease after this, so no two workers ever send for one
        message. A slot whose `sent` is set was sent by a worker before this one: the caller
        does not send it again. None outside an inbox message (nothing to record)."""
        log_ = self.current.get()
        if log_ is None:
            return None
        pair = log_.pair
        if pair.lost:
            raise LeaseLost(pair.pair_key)
        seq = send_number(content, log_.said[content])
        log_.said[content] += 1
        log_.made += 1
        if seq in log_.recorded:
            return Slot(log_.inbox_id, seq, log_.recorded[seq])
        if not await self._inbox.extend(pair.pair_key, self._worker_id, pair.lease_seconds):
            pair.lost = True
            raise LeaseLost(pair.pair_key)
        return Slot(log_.inbox_id, seq)

    def unstored(self, _incoming: Incoming) -> None:
        """The engine's word (Companion.on_unstored, in the message's own context) that this
        message's words were never written."""
        log_ = self.current.get()
        if log_ is not None:
            log_.unstored = True

    async def after(self, slot: Slot | None, message_id: str) -> None:
        """Record a send as soon as the platform returned its id."""
        self._metrics.replies_sent += 1
        if slot is not None and not await self._inbox.record_send(
            slot.inbox_id, slot.seq, message_id, self._worker_id
        ):
            # Another worker made and recorded this very send: this one's lease ran out between
            # its renewal and the platform's answer (a stall longer than the lease).
            self._metrics.errors += 1
            log.warning(
                "inbox: send %s of message %s was also made by another worker: sent twice",
                slot.seq,
                slot.inbox_id,
            )

    def start(
        self,
        message: Pending,
        pair: PairWork,
        run: Callable[[dict[str, Any]], Awaitable[None]],
        logs: list[SendLog],
    ) -> asyncio.Task[None]:
        """Start the message's handler in a task of its own, with the message's send log (added
        to `logs`). Must be called in arrival order, with no await between two calls (see
        answer_claim)."""
        send_log = SendLog(message.id, pair, dict(message.sends))
        logs.append(send_log)
        token = self.current.set(send_log)
        try:
            return asyncio.create_task(self._run(send_log, message.payload, run))
        finally:
            self.current.reset(token)

    async def _run(
        self,
        send_log: SendLog,
        payload: dict[str, Any],
        run: Callable[[dict[str, Any]], Awaitable[None]],
    ) -> None:
        await run(payload)
        # Its handler ended: a successor must not run it again for parts that are not missing
        # (a command would be done twice). A message that sent nothing needs no mark.
        if send_log.made and not send_log.pair.lost:
            await self._inbox.record_send(send_log.inbox_id, DONE_SEQ, "", self._worker_id)


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
    # Before the newest one with a recorded send, the pair was answered by a worker that died
    # before it marked them: answered, not run again. That one too, if its handler ended;
    # else it is run again, alone and first, to send the parts of its reply still missing (run
    # with the later ones it would join their burst and get no reply of its own).
    resumed = messages[last_sent] if last_sent >= 0 and not messages[last_sent].done else None
    todo = messages[last_sent + 1 :]
    log.debug(
        "claim %s: %s, answering %s", claim.pair_key, [m.id for m in messages], [m.id for m in todo]
    )
    if claim.moved and (todo or resumed):
        await on_moved(claim.pair_key)
    pair = PairWork(claim.pair_key, lease_seconds)
    logs: list[SendLog] = []
    if resumed is not None:
        await recorder.start(resumed, pair, run, logs)
    # Made in arrival order with no await between them, the tasks reach the commands' per-caller
    # gate in that order, and messages that arrive together join one burst as on one process.
    tasks = [recorder.start(message, pair, run, logs) for message in todo]
    await asyncio.gather(*tasks)
    if pair.lost:  # not answered here: the worker that holds the pair now answers them
        raise LeaseLost(claim.pair_key)
    return Answered(
        tuple(m.id for m in messages), tuple(log_.inbox_id for log_ in logs if log_.unstored)
    )


async def drop_stale_sessions(app: App, pair_key: str) -> None:
    """Another worker answered this user since this one did: the sessions this worker keeps in
    RAM lack those turns, so they are read again from the store."""
    platform, user_id, rest = pair_key.split(":", 2)
    if user_id == SCENE_PAIR:  # a group's scene: the copies its characters keep
        user_id = scene_owner_id(rest)
        app.companion.reread_scene(platform, rest)
    user = await app.store.find_user(platform, user_id)
    if user is None:
        return
    for character_id in app.companion.characters.ids():
        app.companion.forget_cached(user.id, character_id)
