"""The background purge every backend runs after a forget: how the bytes of deleted rows leave
the disk is the backend's (`_purge_step`); when it runs, retries and is waited for is here.

A purge is recorded as owed (`pending_purges`) in the same transaction as the delete, so a
crash between the two leaves it owed, and the next start (or the sweep) resumes it.
"""

from __future__ import annotations

import asyncio
import logging

log = logging.getLogger(__name__)
PURGE_RETRY_MAX_SECONDS = 30.0


class BackgroundPurge:
    # Errors a step may meet that leave the record in place, to try again later (a locked
    # file, a lost connection); anything else is a bug and ends the runner.
    PURGE_ERRORS: tuple[type[BaseException], ...] = ()

    def __init__(self) -> None:
        self._purge: asyncio.Task[None] | None = None
        # First wait before trying a blocked step again; doubled at each failure.
        self.purge_retry_seconds = 0.05

    async def pending_purges(self) -> int:
        raise NotImplementedError

    async def _purge_step(self) -> str:
        """One short step: "done" when nothing is owed, "blocked" to wait and try again."""
        raise NotImplementedError

    async def resume_purge(self) -> None:
        """Start the purge if one is recorded as owed (by a crash, or by another process such
        as `companion memory forget`)."""
        if await self.pending_purges():
            # Where a purge was cut short, an index damaged by it would show in the check; the
            # check itself reads the whole index (seconds at 10^5 turns), so not at every start.
            log.info(
                "resuming a purge the last run left pending; `companion db check` checks the "
                "database and its search index"
            )
            self._start_purge()

    def _start_purge(self) -> None:
        """Purge in the background, one runner for every pending record: deletes that arrive
        while it runs are finished by the same pass (coalesced), and nobody waits for it."""
        if self._purge is None or self._purge.done():
            self._purge = asyncio.create_task(self._purge_until_done(), name="store-purge")

    async def purge_settled(self, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        """Wait (at most `timeout` seconds) for the background purge; True once nothing is
        pending. For tests and the admin CLI: the bot never waits for it."""
        if self._purge is not None and not self._purge.done():
            try:
                await asyncio.wait_for(asyncio.shield(self._purge), timeout)
            except TimeoutError:
                return False
        return await self.pending_purges() == 0

    async def _stop_purge(self) -> None:
        """At close: what the runner has not finished stays recorded for the next start."""
        if self._purge is not None:
            self._purge.cancel()
            await asyncio.gather(self._purge, return_exceptions=True)

    async def _purge_until_done(self) -> None:
        delay = self.purge_retry_seconds
        while True:
            try:
                step = await self._purge_step()
            except self.PURGE_ERRORS:
                log.warning("purge step failed; retrying in %.1fs", delay, exc_info=True)
                step = "blocked"
            if step == "done":
                return
            if step == "blocked":
                await asyncio.sleep(delay)
                delay = min(2 * delay, PURGE_RETRY_MAX_SECONDS)
            else:
                delay = self.purge_retry_seconds
