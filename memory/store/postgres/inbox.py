"""The durable inbox on PostgreSQL (migrations/postgres/0012): what a platform process stores,
what workers claim, and what they record as sent.

The claim is PostgreSQL's own machinery, no broker: the oldest pending message whose pair (one
user in one chat) is unclaimed or whose lease ran out is found with `FOR UPDATE OF pair SKIP
LOCKED`, so two workers claiming at once never take the same pair and never wait on each other;
the lease (`claimed_until`, on the database's clock, so the workers' clocks do not matter) is
what the row lock leaves behind when the claim's short transaction commits. A worker extends
its lease while it works; one that died loses the pair when the lease runs out. Workers sleep
on LISTEN companion_inbox_for and poll slowly besides, for leases that ran out. A stored message
wakes only the worker that answered its pair last (it alone may claim it before the affinity
runs out, and by then that worker has, unless it is busy or dead: the poll finds those), or
every worker for a pair nobody answered yet: waking them all cost every other worker an empty
claim per message (issue 38). The statement trigger on companion_inbox (migration 0012) still
notifies on every insert, for workers of an earlier version.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Self

import asyncpg

from memory.store.inbox import DONE_SEQ, Arrival, Claim, InboxStats, Pending
from memory.store.postgres.base import normalise_url

log = logging.getLogger(__name__)
# The wake-up: its payload is the worker a stored message waits for ('' for any worker).
CHANNEL = "companion_inbox_for"
# The namespace of the per-conversation extraction locks (the two-key form of the lock).
EXTRACTION_LOCKS = 0x636F6D72


_CLAIM = """
WITH candidate AS (
    SELECT p.pair_key, p.last_worker
    FROM inbox i JOIN inbox_pairs p ON p.pair_key = i.pair_key
    WHERE i.answered_at IS NULL
      AND (p.claimed_until IS NULL OR p.claimed_until < clock_timestamp())
      AND (p.last_worker IS NULL OR p.last_worker = $1
           OR i.received_at < clock_timestamp() - make_interval(secs => $3))
    ORDER BY i.id
    LIMIT $4
    FOR UPDATE OF p SKIP LOCKED
)
UPDATE inbox_pairs p
SET claimed_by = $1, claimed_until = clock_timestamp() + make_interval(secs => $2),
    last_worker = $1
FROM (SELECT DISTINCT pair_key, last_worker FROM candidate) c
WHERE p.pair_key = c.pair_key
RETURNING p.pair_key, c.last_worker
"""

# Stores the updates and wakes, at COMMIT, the worker each new one waits for: its pair's last
# worker, or every worker ('') for a pair nobody answered yet (one notice per payload: the
# identical ones of a transaction are folded into one).
_PUT = f"""
WITH added AS (
    INSERT INTO inbox (platform, update_key, pair_key, payload)
    SELECT platform, update_key, pair_key, payload
    FROM unnest($1::text[], $2::text[], $3::text[], $4::jsonb[])
        WITH ORDINALITY AS u(platform, update_key, pair_key, payload, n)
    ORDER BY n ON CONFLICT (platform, update_key) DO NOTHING RETURNING id, pair_key
)
SELECT a.id, pg_notify('{CHANNEL}', coalesce(p.last_worker, ''))
FROM added a JOIN inbox_pairs p ON p.pair_key = a.pair_key
"""

_PENDING = """
UPDATE inbox SET attempts = attempts + 1
WHERE pair_key = ANY($1::text[]) AND answered_at IS NULL
RETURNING id, pair_key, payload, attempts,
    ARRAY(SELECT o.seq FROM outbox o WHERE o.inbox_id = inbox.id ORDER BY o.seq) AS seqs,
    ARRAY(SELECT o.platform_message_id FROM outbox o WHERE o.inbox_id = inbox.id
          ORDER BY o.seq) AS message_ids
"""

# A WITH's data-modifying parts all run, once, on one snapshot; `marked` reads what `released`
# returned, so nothing is marked unless the pair was still this worker's.
_FINISH = """
WITH released AS (
    UPDATE inbox_pairs SET claimed_by = NULL, claimed_until = NULL
    WHERE pair_key = $1 AND claimed_by = $2
    RETURNING pair_key
), marked AS (
    -- The text is emptied once answered: it lives on as a turn, where a forget reaches it;
    -- the row stays (until pruned) only so that a redelivered update is still recognised.
    UPDATE inbox SET answered_at = clock_timestamp(), answered_by = $2, payload = '{}'::jsonb
    WHERE id = ANY($3::bigint[]) AND NOT id = ANY($4::bigint[]) AND answered_at IS NULL
      AND EXISTS (SELECT 1 FROM released)
    RETURNING id
), dropped AS (
    -- Words never written anywhere else (off the record): the row goes, and its dead tuple is
    -- owed the purge a forget runs (VACUUM), recorded in this same statement.
    DELETE FROM inbox
    WHERE id = ANY($3::bigint[]) AND id = ANY($4::bigint[]) AND answered_at IS NULL
      AND EXISTS (SELECT 1 FROM released)
    RETURNING id
), owed AS (
    INSERT INTO pending_purges (requested_at) SELECT $5 WHERE EXISTS (SELECT 1 FROM dropped)
)
SELECT EXISTS (SELECT 1 FROM released)
"""

_JOB_CLAIM = """
INSERT INTO job_claims (job_key, holder, held_until)
VALUES ($1, $2, clock_timestamp() + make_interval(secs => $3))
ON CONFLICT (job_key) DO UPDATE SET holder = excluded.holder, held_until = excluded.held_until
WHERE job_claims.held_until < clock_timestamp()
RETURNING true
"""

# The key's calls inside the window, oldest first; this one is added when fewer than the limit
# are. ON CONFLICT DO UPDATE locks the row and reads its newest version, so concurrent calls
# for one key are counted one after another. Returns 0 when this call was taken (its time is
# the newest), else the seconds until the oldest call in the window leaves it.
_TAKE_CALL = """
WITH now AS (SELECT statement_timestamp() AS t)
INSERT INTO rate_limits AS r (rate_key, hits) SELECT $1, ARRAY[now.t] FROM now
ON CONFLICT (rate_key) DO UPDATE SET hits = (
    WITH kept AS (
        SELECT array(SELECT h FROM unnest(r.hits) AS h
                     WHERE h > statement_timestamp() - make_interval(secs => $3) ORDER BY h) AS a
    )
    SELECT CASE WHEN cardinality(kept.a) < $2 THEN kept.a || statement_timestamp() ELSE kept.a END
    FROM kept
)
RETURNING CASE WHEN r.hits[cardinality(r.hits)] = statement_timestamp() THEN 0
    ELSE extract(epoch FROM r.hits[1] + make_interval(secs => $3) - statement_timestamp())
END
"""


def pending(row: asyncpg.Record) -> Pending:
    recorded = dict(zip(row["seqs"], row["message_ids"], strict=True))
    done = recorded.pop(DONE_SEQ, None) is not None
    sends = {int(seq): str(message_id) for seq, message_id in recorded.items()}
    return Pending(row["id"], json.loads(row["payload"]), row["attempts"], bool(sends), sends, done)


class PostgresInbox:
    """The inbox's tables, over a pool of its own (small: a claim is a few statements)."""

    def __init__(self, pool: asyncpg.Pool, url: str) -> None:
        self._pool = pool
        self._url = url

    @classmethod
    def over(cls, url: str, *, max_size: int = 4) -> Self:
        """The inbox of this database, its pool not yet connected (`connect`): usable as a
        plain object before the first await."""
        url = normalise_url(url)
        pool = asyncpg.create_pool(
            url,
            min_size=1,
            max_size=max_size,
            server_settings={"application_name": "companion-inbox"},
        )
        return cls(pool, url)

    async def connect(self) -> None:
        await self._pool  # an asyncpg pool connects when first awaited

    @classmethod
    async def open(cls, url: str, *, max_size: int = 4) -> Self:
        """Open on a database the store has migrated (PostgresStore.open runs 0012)."""
        inbox = cls.over(url, max_size=max_size)
        await inbox.connect()
        return inbox

    async def close(self) -> None:
        await self._pool.close()

    # ---- the platform side --------------------------------------------------------------------

    async def put(self, arrivals: Sequence[Arrival]) -> int:
        """Store updates (one transaction); a redelivered one is ignored. Returns how many were
        new. Only after this returns may the platform be told they were received."""
        if not arrivals:
            return 0
        async with self._pool.acquire() as con, con.transaction():
            await con.executemany(
                "INSERT INTO inbox_pairs (pair_key) VALUES ($1) ON CONFLICT DO NOTHING",
                [(a.pair_key,) for a in sorted(arrivals, key=lambda a: a.pair_key)],
            )
            rows = await con.fetch(
                _PUT,
                [a.platform for a in arrivals],
                [a.update_key for a in arrivals],
                [a.pair_key for a in arrivals],
                [json.dumps(a.payload) for a in arrivals],
            )
        return len(rows)

    # ---- the worker side ----------------------------------------------------------------------

    async def claim(
        self, worker: str, lease_seconds: float, affinity_seconds: float = 0.0
    ) -> Claim | None:
        """The pair of the oldest pending message that nobody holds (see `claim_many`)."""
        claims = await self.claim_many(worker, lease_seconds, affinity_seconds, 1)
        return claims[0] if claims else None

    async def claim_many(
        self, worker: str, lease_seconds: float, affinity_seconds: float, limit: int
    ) -> list[Claim]:
        """Up to `limit` pairs, those of the oldest pending messages that nobody holds, each
        with its pending messages in arrival order. A pair another worker answered last is
        left to it for `affinity_seconds` (it holds the user's session in RAM: no re-read),
        and is taken after that (that worker is busy, or dead). Two round trips, however
        many pairs: the claim is one statement, atomic without a BEGIN and COMMIT of its own (two
        round trips fewer, on every claim an idle worker makes too)."""
        async with self._pool.acquire() as con:
            pairs = await con.fetch(_CLAIM, worker, lease_seconds, affinity_seconds, limit)
            if not pairs:
                return []
            rows = await con.fetch(_PENDING, [p["pair_key"] for p in pairs])
        messages: dict[str, list[asyncpg.Record]] = {}
        for row in sorted(rows, key=lambda r: r["id"]):
            messages.setdefault(row["pair_key"], []).append(row)
        return [
            Claim(
                p["pair_key"],
                p["last_worker"] is not None and p["last_worker"] != worker,
                tuple(pending(r) for r in messages.get(p["pair_key"], [])),
            )
            for p in pairs
        ]

    async def extend(self, pair_key: str, worker: str, lease_seconds: float) -> bool:
        """Push the lease further; False when the pair is no longer this worker's."""
        status = await self._pool.execute(
            "UPDATE inbox_pairs SET claimed_until = clock_timestamp() + make_interval(secs => $3)"
            " WHERE pair_key = $1 AND claimed_by = $2",
            pair_key,
            worker,
            lease_seconds,
        )
        return status.endswith(" 1")

    async def record_send(self, inbox_id: int, seq: int, message_id: str, worker: str) -> bool:
        """The platform accepted a send for this message (or, as DONE_SEQ, the message's
        handler ended: every send it made is recorded)."""
        status = await self._pool.execute(
            "INSERT INTO outbox (inbox_id, seq, platform_message_id, sent_by)"
            " VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
            inbox_id,
            seq,
            message_id,
            worker,
        )
        return status.endswith(" 1")

    async def finish(
        self, pair_key: str, worker: str, answered: Sequence[int], unstored: Sequence[int] = ()
    ) -> bool:
        """Mark messages answered and let the pair go, in one statement (one round trip,
        atomic); False (nothing marked) when the pair is no longer this worker's. The
        `unstored` among them are deleted instead, with a purge recorded as owed: the store's
        purge (`resume_purge`) then VACUUMs the inbox as it does after a forget."""
        requested = datetime.now().astimezone().isoformat()
        return bool(
            await self._pool.fetchval(
                _FINISH, pair_key, worker, list(answered), list(unstored), requested
            )
        )

    @contextlib.asynccontextmanager
    async def wakeups(self, worker: str) -> AsyncIterator[asyncio.Event]:
        """An event set whenever a message that `worker` may claim now is stored: one of a
        pair it answered last, or of a pair nobody answered yet (LISTEN on its own
        connection)."""
        event = asyncio.Event()
        con = await asyncpg.connect(self._url, server_settings={"application_name": "inbox-wake"})

        def heard(_con: object, _pid: int, _channel: str, waits_for: str) -> None:
            if waits_for in ("", worker):
                event.set()

        await con.add_listener(CHANNEL, heard)
        try:
            yield event
        finally:
            with contextlib.suppress(asyncpg.PostgresError, OSError):
                await con.close(timeout=2)

    # ---- background jobs and operations ---------------------------------------------------------

    @contextlib.asynccontextmanager
    async def exclusive(self, key: int) -> AsyncIterator[bool]:
        """Try a session advisory lock on a connection held for the block: True when this
        process has it. A process that dies holding it frees it with its connection."""
        async with self._pool.acquire() as con:
            held = bool(await con.fetchval("SELECT pg_try_advisory_lock($1)", key))
            try:
                yield held
            finally:
                if held:
                    await con.execute("SELECT pg_advisory_unlock($1)", key)

    @contextlib.asynccontextmanager
    async def extraction_claim(self, conversation_id: int) -> AsyncIterator[bool]:
        """True when this process may extract the conversation now: it holds the
        conversation's advisory lock and the extraction is still owed (another worker may
        have just finished it)."""
        async with self._pool.acquire() as con:
            held = bool(
                await con.fetchval(
                    "SELECT pg_try_advisory_lock($1, $2)", EXTRACTION_LOCKS, conversation_id
                )
            )
            try:
                owed = held and bool(
                    await con.fetchval(
                        "SELECT extracted_at IS NULL FROM conversations WHERE id = $1",
                        conversation_id,
                    )
                )
                yield owed
            finally:
                if held:
                    await con.execute(
                        "SELECT pg_advisory_unlock($1, $2)", EXTRACTION_LOCKS, conversation_id
                    )

    @contextlib.asynccontextmanager
    async def job_claim(self, job_key: str, lease_seconds: float) -> AsyncIterator[bool]:
        """A claim row (job_claims) held for the block, taken over once its lease ran out."""
        holder = uuid.uuid4().hex
        held = bool(await self._pool.fetchval(_JOB_CLAIM, job_key, holder, lease_seconds))
        try:
            yield held
        finally:
            if held:
                await self._pool.execute(
                    "DELETE FROM job_claims WHERE job_key = $1 AND holder = $2", job_key, holder
                )

    async def take_call(self, rate_key: str, limit: int, window_seconds: float) -> float:
        """One statement under the key's row lock, so two workers never both take the last
        call of a window; the wait is the database's clock, like every lease here."""
        wait = await self._pool.fetchval(_TAKE_CALL, rate_key, limit, window_seconds)
        return max(0.0, float(wait))

    async def prune(self, older_than_seconds: float) -> int:
        """Delete answered messages past the redelivery horizon (their sends go with them),
        and the rate counts and job claims that no longer hold anything."""
        status = await self._pool.execute(
            "DELETE FROM inbox WHERE answered_at < clock_timestamp() - make_interval(secs => $1)",
            older_than_seconds,
        )
        await self._pool.execute(
            "DELETE FROM rate_limits WHERE hits[cardinality(hits)]"
            " < clock_timestamp() - make_interval(secs => $1)",
            older_than_seconds,
        )
        await self._pool.execute("DELETE FROM job_claims WHERE held_until < clock_timestamp()")
        return int(status.split()[-1])

    async def stats(self) -> InboxStats:
        row = await self._pool.fetchrow(
            "SELECT"
            " (SELECT count(*) FROM inbox WHERE answered_at IS NULL) AS pending,"
            " (SELECT coalesce(extract(epoch FROM clock_timestamp() - min(received_at)), 0)"
            "    FROM inbox WHERE answered_at IS NULL) AS oldest_pending,"
            " (SELECT count(*) FROM inbox_pairs WHERE claimed_until > clock_timestamp())"
            "    AS claimed,"
            " (SELECT coalesce(max(extract(epoch FROM clock_timestamp() - i.received_at)), 0)"
            "    FROM inbox_pairs p JOIN inbox i ON i.pair_key = p.pair_key"
            "    WHERE p.claimed_until > clock_timestamp() AND i.answered_at IS NULL)"
            "    AS oldest_claim,"
            " (SELECT count(*) FROM inbox WHERE answered_at IS NOT NULL) AS answered"
        )
        assert row is not None
        return InboxStats(
            int(row["pending"]),
            float(row["oldest_pending"]),
            int(row["claimed"]),
            float(row["oldest_claim"]),
            int(row["answered"]),
        )
