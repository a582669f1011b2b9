"""What a platform process does with an update the inbox will not take (issue 28).

A batch of updates is stored in one transaction, so one update the database refuses (PostgreSQL
refuses U+0000 in jsonb; anything else nobody foresaw) would fail the whole batch, and the
platform, never acknowledged, delivers it again: the process retried it forever and stored no
later update from anyone. Now a batch that fails is stored update by update, each tried
MAX_TRIES times RETRY_SECONDS apart; one that still fails goes to the dead letters (the store's
dead_letters table: the update as the platform sent it, as JSON text, and what the database
said), and the updates after it go on. Only what is stored one way or the other is
acknowledged: when the dead letter cannot be written either (the database is down), `keep`
raises and the platform delivers the same updates again later, as before.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from bot.health import Metrics
from memory.models import DeadLetter
from memory.store.inbox import Arrival, Inbox

log = logging.getLogger(__name__)
MAX_TRIES = 3
RETRY_SECONDS = 1.0
ERROR_CHARS = 500
Raw = dict[str, Any]


class DeadLetterSink(Protocol):
    async def record_dead_letter(self, letter: DeadLetter) -> bool: ...


def sender_of(pair_key: str) -> str | None:
    """The platform user id in a pair key ("telegram:<user>:<chat>"), if it names one."""
    parts = pair_key.split(":")
    return parts[1] if len(parts) > 2 and parts[1] not in ("", "-") else None


class InboxKeeper:
    """Stores updates in the inbox, or else in the dead letters; see the module's text."""

    def __init__(
        self,
        inbox: Inbox,
        dead_letters: DeadLetterSink,
        metrics: Metrics,
        secrets: Sequence[str],
        retry_seconds: float = RETRY_SECONDS,
    ) -> None:
        self._inbox = inbox
        self._dead_letters = dead_letters
        self._metrics = metrics
        self._secrets = [s for s in secrets if s]
        self._retry = retry_seconds

    async def keep(
        self, platform: str, raws: Sequence[Raw], arrival_of: Callable[[Raw], Arrival]
    ) -> None:
        """Every update stored in the inbox or as a dead letter; raises when some is neither."""
        built: list[tuple[Raw, Arrival]] = []
        for raw in raws:
            try:
                built.append((raw, arrival_of(raw)))
            except Exception as error:  # an update with no shape we know: no retry mends it
                await self._dead(platform, raw, None, error)
        if not built:
            return
        try:
            self._metrics.messages_stored += await self._inbox.put([a for _, a in built])
            return
        except Exception:
            self._metrics.errors += 1
            log.warning("%s: the inbox refused a batch; storing it update by update", platform)
        for raw, arrival in built:
            await self._one(raw, arrival)

    async def _one(self, raw: Raw, arrival: Arrival) -> None:
        for attempt in range(1, MAX_TRIES + 1):
            try:
                self._metrics.messages_stored += await self._inbox.put([arrival])
                return
            except Exception as error:
                self._metrics.errors += 1
                if attempt == MAX_TRIES:
                    await self._dead(arrival.platform, raw, arrival, error)
                    return
                log.warning(
                    "%s: update %s not stored (try %s of %s)",
                    arrival.platform,
                    arrival.update_key,
                    attempt,
                    MAX_TRIES,
                )
                await asyncio.sleep(self._retry)

    async def _dead(
        self, platform: str, raw: Raw, arrival: Arrival | None, error: BaseException
    ) -> None:
        letter = DeadLetter(
            platform,
            arrival.update_key if arrival is not None else None,
            (arrival.sender or sender_of(arrival.pair_key)) if arrival is not None else None,
            json.dumps(raw, default=str),
            self._said(error),
            datetime.now(UTC),
        )
        await self._dead_letters.record_dead_letter(letter)  # raises: nothing acknowledged
        self._metrics.dead_letters += 1
        # The error's type only: a database's message may quote the update's text.
        log.error(
            "%s: update %s could not be stored (%s); kept as a dead letter, see"
            " `companion inbox dead-letters`",
            platform,
            letter.update_key,
            type(error).__name__,
        )

    def _said(self, error: BaseException) -> str:
        """What went wrong, short, with no token in it (an error may quote a URL)."""
        said = f"{type(error).__name__}: {error}".strip()
        for secret in self._secrets:
            said = said.replace(secret, "<token>")
        return said[:ERROR_CHARS]
