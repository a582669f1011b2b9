"""A worker's loop: claim a pair, answer it, let it go; up to `concurrency` pairs at once.

Each pair is held under a lease that a heartbeat pushes forward while the answer is written,
so a slow LLM keeps its pair and a dead worker's pair returns to the others when the lease runs
out. Idle, the worker sleeps on LISTEN until a message is stored (or `poll_seconds` pass: the
moment another worker's lease or affinity runs out is announced by nobody).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from bot.health import Metrics
from memory.store.inbox import Answered, Claim, Inbox

log = logging.getLogger(__name__)
ERROR_PAUSE_SECONDS = 0.5
# Pairs claimed by one query at most: under load one claim's two round trips serve many.
MAX_BATCH = 32


class ClaimLoop:
    def __init__(
        self,
        inbox: Inbox,
        answer: Callable[[Claim], Awaitable[Answered]],
        metrics: Metrics,
        worker_id: str,
        *,
        purge: Callable[[], Awaitable[None]],
        concurrency: int,
        lease_seconds: float,
        poll_seconds: float,
        affinity_seconds: float = 0.0,
    ) -> None:
        """`answer` handles a claim's messages and returns the ids it answered; `purge` starts
        the store's background purge, owed once an off-record message left the inbox."""
        self._inbox = inbox
        self._answer = answer
        self._purge = purge
        self._metrics = metrics
        self.worker_id = worker_id
        self._slots = asyncio.Semaphore(concurrency)
        self._lease = lease_seconds
        self._poll = poll_seconds
        self._affinity = affinity_seconds
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stopping = False

    async def run(self, stop: asyncio.Event) -> None:
        """Claim until `stop` is set, then let the pairs in hand finish."""
        async with self._inbox.wakeups(self.worker_id) as woken:
            stopper = asyncio.create_task(stop.wait())
            while not stop.is_set():
                await self._slots.acquire()
                free = 1
                while not self._slots.locked() and free < MAX_BATCH:
                    await self._slots.acquire()  # free: returns at once
                    free += 1
                # Cleared before the claim looks, not after: a message stored while the claim
                # is on its way sets it again, and is claimed at once instead of at the next
                # poll (or by another worker once the affinity ran out, re-reading the session).
                woken.clear()
                claims = await self._claims(free)
                for claim in claims:
                    task = asyncio.create_task(self._work(claim))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
                for _ in range(free - len(claims)):
                    self._slots.release()
                if claims:
                    continue
                waiter = asyncio.create_task(woken.wait())
                await asyncio.wait(
                    {waiter, stopper}, timeout=self._poll, return_when="FIRST_COMPLETED"
                )
                waiter.cancel()
            stopper.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _claims(self, limit: int) -> list[Claim]:
        try:
            return await self._inbox.claim_many(self.worker_id, self._lease, self._affinity, limit)
        except Exception:  # the database may be restarting: try again shortly
            self._metrics.errors += 1
            log.warning("inbox: claim failed", exc_info=True)
            await asyncio.sleep(ERROR_PAUSE_SECONDS)
            return []

    async def _work(self, claim: Claim) -> None:
        heartbeat = asyncio.create_task(self._keep_lease(claim.pair_key))
        try:
            self._metrics.redelivered += sum(1 for m in claim.messages if m.attempts > 1)
            answered = await self._answer(claim)
            pair, ids, unstored = claim.pair_key, answered.ids, answered.unstored
            if await self._inbox.finish(pair, self.worker_id, ids, unstored):
                self._metrics.messages_answered += len(ids)
                if unstored:
                    await self._purge()
            else:
                log.warning("inbox: %s was taken over before it was marked", claim.pair_key)
        except Exception:
            # Left claimed: the lease runs out and the messages are tried again.
            self._metrics.errors += 1
            log.error("inbox: answering pair %s failed", claim.pair_key, exc_info=True)
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
            self._slots.release()

    async def _keep_lease(self, pair_key: str) -> None:
        while True:
            await asyncio.sleep(self._lease / 3)
            try:
                if not await self._inbox.extend(pair_key, self.worker_id, self._lease):
                    log.warning("inbox: lost the lease of %s", pair_key)
                    return
            except Exception:
                log.warning("inbox: could not extend the lease of %s", pair_key, exc_info=True)
