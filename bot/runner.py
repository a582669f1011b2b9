"""`companion run`: every adapter whose token is set, in one event loop, with the scheduler."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import gc
import logging
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

from bot.adapters.base import Adapter
from bot.app import open_app
from bot.budgets import spend_metrics
from bot.commands import Commands
from bot.config import Settings
from bot.health import Metrics, TimedLLM, serve_health
from bot.llm import build_llm
from bot.llm.diagnosis import checked_meanwhile
from bot.logging_setup import FILE_ONLY
from bot.network_errors import network_cause
from memory.errors import UserFacingError

log = logging.getLogger(__name__)

NO_ADAPTER = (
    "No chat platform is configured: add TELEGRAM_BOT_TOKEN=... and/or DISCORD_BOT_TOKEN=... "
    "to .env (see the README for how to create each bot), or use `companion chat` for the "
    "terminal."
)


class AlreadyRunning(Exception):
    """Another `companion run` holds the database."""


@contextlib.contextmanager
def single_run(database: Path) -> Iterator[None]:
    """Hold `<database>.run.lock` for the life of the process: a second `companion run` on the
    same file would run every background job twice. An flock, not a pid file: the kernel frees
    it when the process ends however it ends, so a crash leaves nothing stale. The admin
    commands (`companion memory ...`) do not take it, and may run beside the bot."""
    path = database.with_name(f"{database.name}.run.lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as lock:
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise AlreadyRunning(
                f"another `companion run` is already using {database} (it holds {path}); "
                "stop it first: two would run every background job twice"
            ) from None
        yield  # closing the file releases the lock


def build_adapters(settings: Settings, commands: Commands) -> list[Adapter]:
    adapters: list[Adapter] = []
    if settings.telegram_bot_token is not None:
        from bot.adapters.telegram_adapter import TelegramAdapter

        adapters.append(TelegramAdapter(settings, commands))
    if settings.discord_bot_token is not None:
        from bot.adapters.discord_adapter import DiscordAdapter

        adapters.append(DiscordAdapter(settings, commands))
    return adapters


def _platform_url(settings: Settings, adapter: Adapter) -> tuple[str, str]:
    if adapter.name == "telegram":
        return settings.telegram_api_base_url, "TELEGRAM_API_BASE_URL"
    return settings.discord_api_base_url, "DISCORD_API_BASE_URL"


async def start_adapters(settings: Settings, adapters: list[Adapter]) -> None:
    """Start each adapter; when a platform cannot be reached, stop the ones already started and
    say which host failed, in one line (the traceback goes to the log file)."""
    started: list[Adapter] = []
    try:
        for adapter in adapters:
            await adapter.start()
            started.append(adapter)
    except Exception as exc:
        await asyncio.gather(*(a.stop() for a in started), return_exceptions=True)
        cause = network_cause(exc)
        if cause is None:
            raise
        log.error("%s: cannot connect", adapter.name, exc_info=True, extra=FILE_ONLY)
        url, setting = _platform_url(settings, adapter)
        host = urlparse(url).netloc or url
        raise UserFacingError(
            f"cannot reach {adapter.name} at {host} ({cause or type(cause).__name__}); check "
            f"the network connection, or {setting} if you changed it"
        ) from exc


def settle_garbage_collector() -> None:
    """Collect cyclic garbage rarely, and never scan what start-up built.

    Reference counting frees nearly all of a message's garbage; the cycle collector's default
    pace (a pass every 700 allocations, a full pass walking every session in RAM) made pauses
    that set the bot's p99 overhead (bench/throughput.py, steady arrivals, 167 messages/s:
    48 ms with the defaults, 14 ms with these).
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


def _install_signal_handlers(stop: asyncio.Event) -> None:
    """First SIGINT/SIGTERM: a clean stop. Second: exit at once (SQLite's WAL keeps the file
    consistent even then; only replies still being generated are lost)."""
    loop = asyncio.get_running_loop()

    def on_signal(signum: int) -> None:
        if stop.is_set():
            log.warning("second signal: exiting now")
            os._exit(128 + signum)
        log.info("signal %s: finishing the replies in flight, then stopping", signum)
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal, signum)


async def run_bot(settings: Settings, stop: asyncio.Event | None = None) -> int:
    """Run until a signal (or `stop` is set); returns the process exit code."""
    if settings.telegram_bot_token is None and settings.discord_bot_token is None:
        print(NO_ADAPTER)
        return 2
    stop = stop or asyncio.Event()
    try:
        with single_run(settings.database_path):
            return await _run(settings, stop)
    except AlreadyRunning as exc:
        print(f"companion: {exc}", file=sys.stderr)
        return 3


async def _run(settings: Settings, stop: asyncio.Event) -> int:
    metrics = Metrics("all")
    llm = build_llm(settings)
    timed = TimedLLM(llm, metrics)
    # The key is checked while the app is built (seconds): the check adds no wait of its own,
    # and no platform is connected before it passed.
    async with (
        checked_meanwhile(settings, llm) as checked,
        open_app(settings, llm=timed) as app,
        serve_health(settings, metrics) as health,
    ):
        await checked()
        metrics.spend = spend_metrics(settings, app.store)
        adapters = build_adapters(settings, app.commands)
        await start_adapters(settings, adapters)
        for adapter in adapters:
            app.followups.use(adapter)
        _install_signal_handlers(stop)
        settle_garbage_collector()
        log.info("running: %s", ", ".join(a.name for a in adapters))
        if health is not None:
            health.ready()
        await stop.wait()
        await asyncio.gather(*(adapter.stop() for adapter in adapters))
    log.info("stopped cleanly")
    return 0
