"""`companion run --role all|platform|worker`.

- all (the default): one process takes messages from the platforms and answers them, as
  always (bot/runner.py), on SQLite or PostgreSQL.
- platform: receives Telegram's updates and Discord's gateway events (each platform whose token
  is set) and stores each one in the inbox before acknowledging it (bot/inbox/*_platform.py);
  answers nothing. One per bot token (per Discord shard).
- worker: claims stored messages, answers them through the platforms' REST APIs, and runs the
  background jobs, each claimed by one worker at a time (bot/inbox/). Run as many as needed.

platform and worker need PostgreSQL (DATABASE_URL): the inbox and the claims are its tables and
locks. Each process serves /healthz and /metrics when HEALTH_PORT is set.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import signal
import socket
import sys
import uuid

from bot.access import Access
from bot.app import App, open_app, system_clock
from bot.budgets import spend_metrics
from bot.config import Settings
from bot.health import Metrics, TimedLLM, serve_health
from bot.inbox.claimed_jobs import (
    ClaimedCompactions,
    claim_canon,
    claim_extractions,
    claim_journeys,
)
from bot.inbox.discord_platform import DiscordIngest
from bot.inbox.discord_worker import DiscordWorker
from bot.inbox.refused import PlatformAccess
from bot.inbox.shared_limits import SharedRateLimiter
from bot.inbox.telegram_platform import TelegramIngest
from bot.inbox.telegram_worker import TelegramWorker
from bot.inbox.worker import ClaimLoop
from bot.jobs import IDLE_SWEEP_SECONDS
from bot.llm import ClosableLLM, build_llm
from bot.llm.diagnosis import check_provider
from bot.runner import run_bot, settle_garbage_collector
from memory.store import inbox_over, open_inbox, open_store
from memory.store.inbox import FOLLOWUP_LOCK, SWEEP_LOCK, Answered, Claim, Inbox

log = logging.getLogger(__name__)
NEEDS_POSTGRES = (
    "--role {role} needs PostgreSQL: set DATABASE_URL=postgresql://... (the inbox and the "
    "workers' claims live there); on SQLite, run one process with --role all"
)
NEEDS_PLATFORM = (
    "--role {role} needs a platform: set TELEGRAM_BOT_TOKEN=..., DISCORD_BOT_TOKEN=... or both"
)


def _on_signals(stop: asyncio.Event) -> None:
    """SIGINT/SIGTERM: finish the pairs in hand, then stop (their claims are released)."""
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)


async def run_role(
    settings: Settings,
    role: str,
    stop: asyncio.Event | None = None,
    llm: ClosableLLM | None = None,
) -> int:
    """Run one role until a signal (or `stop`); `llm` replaces the configured provider in a
    worker (the benches' fixed-latency fake)."""
    if role == "all":
        return await run_bot(settings, stop)
    if settings.database_url is None:
        print(f"companion: {NEEDS_POSTGRES.format(role=role)}", file=sys.stderr)
        return 2
    if settings.telegram_bot_token is None and settings.discord_bot_token is None:
        print(f"companion: {NEEDS_PLATFORM.format(role=role)}", file=sys.stderr)
        return 2
    stop = stop or asyncio.Event()
    _on_signals(stop)
    metrics = Metrics(role)
    if role == "platform":
        return await _platform(settings, metrics, stop)
    return await _worker(settings, metrics, stop, llm)


async def _platform(settings: Settings, metrics: Metrics, stop: asyncio.Event) -> int:
    assert settings.database_url is not None
    url = settings.database_url.get_secret_value()
    # Migrates (0012's inbox among them); kept open for the one read Discord needs (whether a
    # channel is bound to a character: its messages are stored even unaddressed) and for the
    # dead letters, the updates the inbox will not take (bot/inbox/dead_letters.py).
    store = await open_store(url)
    inbox = await open_inbox(url)
    # Who may talk, checked before an update is stored (bot/inbox/refused.py): the same rules
    # as the workers', .env's merged here too so that they hold before any worker starts.
    clock = system_clock(settings)
    access = Access(store, settings.admin_ids, clock, settings.access_refresh_seconds)
    await access.merge(settings.access_start(), clock())
    screen = PlatformAccess(access)
    ingests: list[TelegramIngest | DiscordIngest] = []
    try:
        async with serve_health(settings, metrics, inbox.stats) as health:
            if settings.telegram_bot_token is not None:
                ingests.append(TelegramIngest(settings, inbox, metrics, store, screen))
            if settings.discord_bot_token is not None:
                ingests.append(DiscordIngest(settings, inbox, metrics, store, access=screen))
            for ingest in ingests:
                await ingest.start()
            if health is not None:
                health.ready()
            log.info("running: platform (%s)", ", ".join(i.name for i in ingests))
            await stop.wait()
    finally:
        for ingest in reversed(ingests):
            await ingest.stop()
        await inbox.close()
        await store.close()
    log.info("stopped cleanly")
    return 0


def worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


async def _worker(
    settings: Settings, metrics: Metrics, stop: asyncio.Event, llm: ClosableLLM | None
) -> int:
    assert settings.database_url is not None
    # A streamed reply is a message sent before the answer is complete: one that a successor
    # worker could neither finish nor take back. Workers send each reply whole.
    settings = settings.model_copy(update={"stream_replies": False})
    me = worker_id()
    if llm is None:
        llm = build_llm(settings)
        await check_provider(settings, llm)
    timed = TimedLLM(llm, metrics)
    async with open_app(settings, llm=timed, start_scheduler=False, catch_up=False) as app:
        metrics.spend = spend_metrics(settings, app.store)
        url = settings.database_url.get_secret_value()
        inbox = inbox_over(url)
        claim_background_jobs(app, inbox)
        limit, window = settings.rate_limit_messages, settings.rate_limit_window_seconds
        app.commands.use_rate_limiter(SharedRateLimiter(inbox, limit, window))
        await inbox.connect()
        # Only now: the owed work's job claims go through the inbox's pool (issue 35).
        app.catch_up()
        platforms = _platform_workers(app, inbox, me, metrics)
        try:
            async with serve_health(settings, metrics, inbox.stats) as health:
                for platform in platforms.values():
                    await platform.start()
                    app.followups.use(platform.adapter)
                loop = ClaimLoop(
                    inbox,
                    functools.partial(_answer, platforms),
                    metrics,
                    me,
                    purge=app.store.resume_purge,
                    concurrency=settings.worker_concurrency,
                    lease_seconds=settings.inbox_lease_seconds,
                    poll_seconds=settings.inbox_poll_seconds,
                    affinity_seconds=settings.inbox_affinity_ms / 1000,
                )
                sweeper = asyncio.create_task(_sweep_forever(app, inbox, settings))
                follower = asyncio.create_task(_followups_forever(app, inbox, settings))
                settle_garbage_collector()
                log.info("running: worker %s", me)
                if health is not None:
                    health.ready()
                await loop.run(stop)
                sweeper.cancel()
                follower.cancel()
                await asyncio.gather(sweeper, follower, return_exceptions=True)
        finally:
            for platform in platforms.values():
                await platform.stop()
            # The background work still running claims through the inbox: done before it closes.
            await app.companion.drain()
            await inbox.close()
    log.info("stopped cleanly")
    return 0


def claim_background_jobs(app: App, inbox: Inbox) -> None:
    """Route the worker's extractions, chronicles and compactions through the database's job
    claims (bot/inbox/claimed_jobs.py), so that each is done once whichever worker reaches it."""
    claim_extractions(app.extractor, inbox)
    if app.chronicler is not None:
        claim_journeys(app.chronicler, inbox)
    if app.canon is not None:
        claim_canon(app.canon, inbox)
    app.companion.claim_compactions(ClaimedCompactions(inbox, app.store))


PlatformWorker = TelegramWorker | DiscordWorker


def _platform_workers(
    app: App, inbox: Inbox, me: str, metrics: Metrics
) -> dict[str, PlatformWorker]:
    """The platforms this worker answers, by the prefix of their pair keys."""
    settings = app.settings
    lease = settings.inbox_lease_seconds
    platforms: dict[str, PlatformWorker] = {}
    if settings.telegram_bot_token is not None:
        platforms["telegram"] = TelegramWorker(app, inbox, me, metrics, lease)
    if settings.discord_bot_token is not None:
        platforms["discord"] = DiscordWorker(app, inbox, me, metrics, lease)
    return platforms


async def _answer(platforms: dict[str, PlatformWorker], claim: Claim) -> Answered:
    platform = claim.pair_key.split(":", 1)[0]
    worker = platforms.get(platform)
    if worker is None:  # left claimed: a worker that has this platform's token answers it
        raise RuntimeError(f"no {platform} token in this worker for {claim.pair_key}")
    return await worker.answer(claim)


async def _sweep_forever(app: App, inbox: Inbox, settings: Settings) -> None:
    """The session-end sweep (ends idle conversations, extracts their profiles, finishes
    purges) on one worker at a time: the others find the lock taken and skip that round."""
    while True:
        await asyncio.sleep(IDLE_SWEEP_SECONDS)
        try:
            await sweep_once(app, inbox, settings)
        except Exception:
            log.error("sweep failed", exc_info=True)


async def _followups_forever(app: App, inbox: Inbox, settings: Settings) -> None:
    while True:
        await asyncio.sleep(settings.followup_check_seconds)
        try:
            await followups_once(app, inbox)
        except Exception:
            log.error("follow-ups failed", exc_info=True)


async def followups_once(app: App, inbox: Inbox) -> int | None:
    """Write and send the follow-ups due, if no other worker does it now (None when one
    does): the job reads what is due, then records each send, so two workers at once would
    both send it."""
    async with inbox.exclusive(FOLLOWUP_LOCK) as held:
        return await app.followups.run() if held else None


async def sweep_once(app: App, inbox: Inbox, settings: Settings) -> bool:
    """Run the sweep if no other worker runs it now; True when this one did."""
    async with inbox.exclusive(SWEEP_LOCK) as held:
        if not held:
            return False
        await app.sweep()
        await inbox.prune(settings.inbox_keep_hours * 3600)
        return True
