"""The durable inbox between platform processes and workers (issue 16): the records it holds
and the interface the bot's roles use. Only PostgreSQL implements it (memory/store/postgres/
inbox.py): several workers need a database server; one process (`--role all`) needs no inbox.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

# The session-end sweep's lock: held by one worker at a time (any constant of ours).
SWEEP_LOCK = 0x636F6D71
# The follow-up job's lock: one worker at a time writes and sends the follow-ups due.
FOLLOWUP_LOCK = 0x636F6D72


@dataclass(frozen=True)
class Arrival:
    """One update as the platform delivered it."""

    platform: str
    update_key: str
    pair_key: str
    payload: dict[str, Any]
    # Who sent it, when the pair key does not say (a scene's pair is its channel's).
    sender: str | None = None


# The middle of a group scene's pair key ("<platform>:scene:<channel id>"): where a private
# pair names its user, a scene's names none, as every person in it shares one queue.
SCENE_PAIR = "scene"

# The outbox row that says a message's handler ran to its end: every send it made is recorded.
# Not a send (no send has a negative number), so it never collides with one.
DONE_SEQ = -1


@dataclass(frozen=True)
class Pending:
    id: int
    payload: dict[str, Any]
    attempts: int
    sent: bool  # a send is recorded for it: a worker answered it, or began to, then died
    # The recorded sends (their number -> the platform's message id): a successor that runs
    # the message again makes only the others.
    sends: dict[int, str] = field(default_factory=dict)
    done: bool = False  # its handler finished: all of its sends are in `sends`


@dataclass(frozen=True)
class Claim:
    pair_key: str
    # Another worker answered this pair last: what this worker holds of it in RAM is stale.
    moved: bool
    messages: tuple[Pending, ...]


@dataclass(frozen=True)
class Answered:
    """What a worker answered of a claim: every message id, and of them those whose words were
    never written (off the record, or refused when it ended): deleted from the inbox rather
    than kept blank, and purged as a forget's rows are."""

    ids: tuple[int, ...]
    unstored: tuple[int, ...] = ()


@dataclass(frozen=True)
class InboxStats:
    pending: int
    oldest_pending_seconds: float
    claimed_pairs: int
    oldest_claim_seconds: float
    answered: int


class Inbox(Protocol):
    """What a platform process stores and what workers claim, extend, send and finish."""

    async def connect(self) -> None: ...

    async def close(self) -> None: ...

    async def put(self, arrivals: Sequence[Arrival]) -> int: ...

    async def claim(
        self, worker: str, lease_seconds: float, affinity_seconds: float = 0.0
    ) -> Claim | None: ...

    async def claim_many(
        self, worker: str, lease_seconds: float, affinity_seconds: float, limit: int
    ) -> list[Claim]: ...

    async def extend(self, pair_key: str, worker: str, lease_seconds: float) -> bool: ...

    async def record_send(self, inbox_id: int, seq: int, message_id: str, worker: str) -> bool:
        """False when that send of that message was recorded already (by another worker)."""
        ...

    async def finish(
        self, pair_key: str, worker: str, answered: Sequence[int], unstored: Sequence[int] = ()
    ) -> bool: ...

    def wakeups(self, worker: str) -> AbstractAsyncContextManager[asyncio.Event]:
        """Set when a message `worker` may claim now is stored (not one that waits for another
        worker's affinity)."""
        ...

    def exclusive(self, key: int) -> AbstractAsyncContextManager[bool]: ...

    def extraction_claim(self, conversation_id: int) -> AbstractAsyncContextManager[bool]: ...

    def job_claim(self, job_key: str, lease_seconds: float) -> AbstractAsyncContextManager[bool]:
        """True when this process holds the job now (nobody else does, or their claim ran out);
        let go when the block ends."""
        ...

    async def take_call(self, rate_key: str, limit: int, window_seconds: float) -> float:
        """The per-user rate limit shared by every worker: 0 when a call may be made now (it
        is counted), else the seconds until the oldest call in the window leaves it."""
        ...

    async def prune(self, older_than_seconds: float) -> int: ...

    async def stats(self) -> InboxStats: ...
