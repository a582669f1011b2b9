"""Several workers on one PostgreSQL (issue 16), killed at random: real `companion run --role`
subprocesses (one platform process, five workers) against the fake Telegram API and a fake
LLM of varying latency. Users write in bursts and one at a time while workers are SIGKILLed
(at least 20 kills: some at a random moment, some just as an LLM request arrives) and
restarted, two of five always running; the platform process is killed and restarted too.

Every user's newest message is answered, no reply is sent twice, each user's replies come in
the order of their messages, nothing the platform acknowledged is lost (Telegram has no update
left unconfirmed, and every stored message ends answered), and the turn log holds each user
message once, however often a killed worker's successor ran it again.
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

import asyncpg

from tests import pg_fixtures
from tests.fakes.telegram_api import FakeTelegram
from tests.fault_helpers import until
from tests.patience import PATIENCE
from tests.scaleout_helpers import REPLY, Delivery, FakeChatLLM, RoleProcess, role_env

pytestmark = pg_fixtures.needs_postgres

SEED = 20261130
USERS = 6
WORKERS = 5
RUNNING = 2  # workers still running while one is down
KILLS = 22
PLATFORM_KILLS = 3
# Longer than any stall of a process on a loaded machine between renewing its lease and
# Telegram's answer to the send (a stalled worker past its lease would let a successor answer
# again); short enough that the pairs of a killed worker are answered within the test.
LEASE = "3.0"


class Scene:
    def __init__(self, tmp_path: Path, url: str, telegram: FakeTelegram, llm: FakeChatLLM):
        self.tmp_path = tmp_path
        self.url = url
        self.telegram = telegram
        self.llm = llm
        self.rng = random.Random(SEED)
        self.env = role_env(
            tmp_path,
            url,
            telegram,
            llm,
            INBOX_LEASE_SECONDS=LEASE,
            INBOX_POLL_SECONDS="0.5",
            LOG_LEVEL="WARNING",
        )
        self.started = 0
        self.everyone: list[RoleProcess] = []
        self.workers: list[RoleProcess] = []
        self.platform: RoleProcess | None = None
        self.delivery = Delivery()
        self.kills = 0
        self.platform_kills = 0
        self.killing = True

    async def start(self, role: str) -> RoleProcess:
        self.started += 1
        process = await RoleProcess.start(role, self.env, self.tmp_path, self.started)
        self.everyone.append(process)  # killed ones too: their logs are read at the end
        return process

    async def user(self, user: int) -> None:
        """Writes until the killing ends: sometimes waits for the answer, sometimes not."""
        sent = 0
        while self.killing:
            # A burst of one to three messages, then the answer is awaited, then a pause.
            for _ in range(self.rng.choice((1, 1, 2, 3))):
                self.telegram.send_private_text(10_000 + user, f"u{user}-m{sent} sigo aqui")
                sent += 1
                self.delivery.sent[user] = sent
                await asyncio.sleep(self.rng.uniform(0.0, 0.05))
            await self._answered(user, sent - 1)
            await asyncio.sleep(self.rng.uniform(0.2, 0.8))

    async def _answered(self, user: int, message: int) -> None:
        deadline = time.monotonic() + PATIENCE
        while time.monotonic() < deadline:
            self.delivery.read(self.telegram)
            replies = self.delivery.replies.get(user) or []
            if replies and replies[-1] >= message:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"user {user} got no answer to m{message}")

    async def killer(self) -> None:
        """Kill one worker at a time and start another at once: two always run."""
        for n in range(KILLS):
            if n % 2:
                seen = self.llm.requests
                await until(lambda s=seen: self.llm.requests > s, PATIENCE, "an LLM request")
                await asyncio.sleep(self.rng.uniform(0.0, 0.1))
            else:
                await asyncio.sleep(self.rng.uniform(0.1, 0.4))
            victim = await self._victim()
            await victim.kill()
            self.kills += 1
            self.workers.append(await self.start("worker"))
            if n % (KILLS // PLATFORM_KILLS) == KILLS // PLATFORM_KILLS - 1:
                await self._kill_platform()
        self.killing = False

    async def _victim(self) -> RoleProcess:
        """A running worker, taken when RUNNING others run too (replacements start aside)."""
        deadline = time.monotonic() + PATIENCE
        while time.monotonic() < deadline:
            running = [w for w in self.workers if await w.is_ready()]
            if len(running) > RUNNING:
                victim = self.rng.choice(running)
                self.workers.remove(victim)
                return victim
            await asyncio.sleep(0.05)
        raise AssertionError(f"fewer than {RUNNING + 1} workers ready within {PATIENCE}s")

    async def _kill_platform(self) -> None:
        assert self.platform is not None
        await self.platform.kill()
        self.platform_kills += 1
        await asyncio.sleep(self.rng.uniform(0.1, 0.5))  # messages arrive meanwhile
        self.platform = await self.start("platform")
        await self.platform.ready()


async def inbox_state(url: str) -> str:
    """The inbox's pending rows and claims, for a failure's message."""
    con = await asyncpg.connect(url)
    try:
        pending = await con.fetch(
            "SELECT id, pair_key, attempts, received_at FROM inbox WHERE answered_at IS NULL"
        )
        pairs = await con.fetch("SELECT * FROM inbox_pairs WHERE claimed_by IS NOT NULL")
        now = await con.fetchval("SELECT clock_timestamp()")
        rows = await con.fetch(
            "SELECT i.id, i.update_key, i.pair_key, i.attempts, i.answered_at IS NOT NULL AS done,"
            " i.answered_by, (SELECT count(*) FROM outbox o WHERE o.inbox_id = i.id) AS sends"
            " FROM inbox i ORDER BY i.id"
        )
        log = await con.fetch(
            "SELECT t.id, u.platform_user_id AS user, t.role, left(t.text, 24) AS text,"
            " t.source_key FROM turns t JOIN users u ON u.id = t.user_id ORDER BY t.id"
        )
    finally:
        await con.close()
    turns = "\n".join(str(tuple(r)) for r in log)
    inbox = "\n".join(str(tuple(r)) for r in rows)
    return (
        f"now={now}\npending={[dict(r) for r in pending]}\nclaims={[dict(r) for r in pairs]}"
        f"\nturns:\n{turns}\ninbox:\n{inbox}"
    )


async def inbox_counts(url: str) -> tuple[int, int]:
    """(rows, unanswered rows) of the inbox."""
    con = await asyncpg.connect(url)
    try:
        row = await con.fetchrow(
            "SELECT count(*) AS rows, count(*) FILTER (WHERE answered_at IS NULL) AS open"
            " FROM inbox"
        )
        assert row is not None
        return int(row["rows"]), int(row["open"])
    finally:
        await con.close()


async def settled_inbox(url: str, within_seconds: float) -> tuple[int, int]:
    """`inbox_counts` once no row is left unanswered, or as they stand after `within_seconds`.
    A reply is sent before its rows are marked answered, and the rows of a worker killed in
    between are marked by the next claim of the pair (its outbox row says the reply went out)
    once the lease runs out: the marks trail the deliveries by up to a lease and a poll."""
    deadline = time.monotonic() + within_seconds
    while True:
        counts = await inbox_counts(url)
        if counts[1] == 0 or time.monotonic() > deadline:
            return counts
        await asyncio.sleep(0.2)


async def turn_counts(url: str) -> tuple[int, int]:
    """(user turns, user turns of a message stored more than once) in the turn log."""
    con = await asyncpg.connect(url)
    try:
        row = await con.fetchrow(
            "SELECT count(*) AS turns, count(*) - count(DISTINCT (user_id, platform_message_id))"
            " AS repeated FROM turns WHERE role = 'user'"
        )
        assert row is not None
        return int(row["turns"]), int(row["repeated"])
    finally:
        await con.close()


async def unrecorded_duplicates(url: str, telegram: FakeTelegram) -> tuple[int, int]:
    """(replies delivered twice, of those the ones with no more than one copy recorded). A
    copy with no outbox row is the window Telegram leaves open (it accepted the send, the
    worker was killed before its record committed, the successor sent it again): only that
    may repeat a reply. Two recorded copies would be two workers sending under one lease."""
    con = await asyncpg.connect(url)
    try:
        recorded = {r["platform_message_id"] for r in await con.fetch("SELECT * FROM outbox")}
    finally:
        await con.close()
    copies: dict[tuple[str, str], list[bool]] = {}
    for message in telegram.sent_messages():
        found = REPLY.search(message.get("text") or "")
        if found:
            copies.setdefault(found.groups(), []).append(str(message["message_id"]) in recorded)
    twice = [marks for marks in copies.values() if len(marks) > 1]
    return len(twice), sum(1 for marks in twice if sum(marks) <= 1)


async def test_workers_killed_at_random_lose_and_repeat_nothing(
    tmp_path: Path, pg_base: str
) -> None:
    url = await pg_fixtures.fresh_database(pg_base)
    rng = random.Random(SEED + 1)
    async with FakeTelegram() as telegram, FakeChatLLM(lambda: rng.uniform(0.02, 0.35)) as llm:
        scene = Scene(tmp_path, url, telegram, llm)
        scene.platform = await scene.start("platform")
        scene.workers = [await scene.start("worker") for _ in range(WORKERS)]
        await asyncio.gather(*(p.ready() for p in [scene.platform, *scene.workers]))
        try:
            # No bound on the whole: 22 worker restarts on two loaded cores took over 350 s;
            # each step (a worker ready, an answer, an LLM request) has its own PATIENCE.
            async with asyncio.TaskGroup() as group:  # a failing step cancels the others
                for task in (scene.killer(), *(scene.user(u) for u in range(USERS))):
                    group.create_task(task)

            def done() -> bool:
                scene.delivery.read(telegram)
                return scene.delivery.complete()

            await until(done, PATIENCE, "every user's newest message answered")
            await until(lambda: not telegram.pending_updates, PATIENCE, "every update acknowledged")
            stored, unanswered = await settled_inbox(url, PATIENCE)
            user_turns, repeated_turns = await turn_counts(url)
            twice, unrecorded = await unrecorded_duplicates(url, telegram)
        except BaseException:
            print(f"kills={scene.kills} sent={scene.delivery.sent}")
            print(f"got={dict(scene.delivery.replies)}\n{await inbox_state(url)}")
            for process in [scene.platform, *scene.workers]:
                print(f"---- {process.role} {process.log.name}\n{process.output()[-3000:]}")
            print("sent:", [m.get("text") for m in telegram.sent_messages()][-60:])
            raise
        finally:
            for process in [scene.platform, *scene.workers]:
                await process.kill()
    delivery = scene.delivery
    total = sum(delivery.sent.values())
    print(f"kills={scene.kills} platform_kills={scene.platform_kills} messages={total}")
    assert scene.kills >= 20 and scene.platform_kills >= PLATFORM_KILLS
    # Each message the users sent was stored once (a platform process killed before it acked
    # saw its updates again: one row each), and each was answered.
    assert (stored, unanswered) == (total, 0)
    # A message run again by the successor of a worker killed mid-answer found its turn: the
    # turn log holds each message once (a second copy would show in the next prompts).
    assert (user_turns, repeated_turns) == (total, 0)
    assert delivery.lost() == 0
    # A reply comes twice only through the moment no record can close (see
    # unrecorded_duplicates); no worker saw its send recorded already by another.
    assert twice == unrecorded, dict(delivery.replies)
    assert delivery.duplicates() == twice
    assert not [p.log.name for p in scene.everyone if "sent twice" in p.output()]
    print(f"replies delivered twice (unrecorded sends of killed workers): {twice}")
    assert delivery.order_violations() == 0, dict(delivery.replies)
    assert total >= 40  # enough traffic for the kills to land mid-conversation
