"""A bounded retry schedule for the calls owed once per ended conversation (the profile's
extraction, the journey) while their provider fails.

Without it every sweep (once a minute) called the provider again for every conversation still
owed: a provider down for an hour cost sixty calls per conversation, and an outage that never
ends, calls for ever. Now, after the n-th failed attempt of a job for a conversation, the next
waits `RETRY_AFTER[n - 1]` from that failure: 1, 5, then 30 minutes (a blip is over in a
minute, a deploy or an incident takes minutes; past about half an hour the job is given up
rather than kept owed for days). When the attempt after the last wait fails too, the job's
next run gives up instead of asking: the conversation is marked 'failed' (never owed again),
the log says why at ERROR, and `companion stats` counts it for the admin.

The schedule's state is the usage rows every call already leaves (llm_usage: ok = 0 and an
error that starts with PROVIDER_FAILURE, stamped with the job's clock), so it holds across
restarts and across workers, which share them, and needs no table of its own. A rejected
answer is not a provider failure: it has its own retries (memory/engine/forced_tool.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

RETRY_AFTER: tuple[timedelta, ...] = (
    timedelta(minutes=1),
    timedelta(minutes=5),
    timedelta(minutes=30),
)


class ProviderFailures(Protocol):
    async def provider_failures(
        self, kind: str, conversation_id: int
    ) -> tuple[int, datetime | None, str]:
        """How many calls of `kind` for the conversation failed at the provider (usage rows
        whose error starts with PROVIDER_FAILURE), the latest one's time and error."""
        ...


@dataclass(frozen=True)
class Backoff:
    """Where a job for one conversation stands in the schedule."""

    failures: int
    last: datetime | None
    cause: str = ""  # the latest failure's error, for the admin
    schedule: tuple[timedelta, ...] = RETRY_AFTER

    @property
    def exhausted(self) -> bool:
        """Every attempt the schedule allows has failed: the job gives up (one place decides,
        at the job's next run, so a crash between the last failure and the mark loses
        nothing)."""
        return self.failures > len(self.schedule)

    def due(self, now: datetime) -> bool:
        """May the provider be asked now? (Once exhausted, the job gives up before asking.)"""
        if self.failures == 0 or self.last is None:
            return True
        wait = self.schedule[min(self.failures, len(self.schedule)) - 1]
        return now >= self.last + wait


async def backoff_of(store: ProviderFailures, kind: str, conversation_id: int) -> Backoff:
    return Backoff(*await store.provider_failures(kind, conversation_id))
