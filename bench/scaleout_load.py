"""One set-up of bench/scaleout.py: its database, its processes, and steady arrivals through the
fake Telegram at each offered rate, with every reply matched to the message it answers."""

from __future__ import annotations

import asyncio
import itertools
import math
import signal
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg

from bench.common import REPO, distribution_ms
from bench.load_common import user_line
from bench.scaleout_procs import (
    FIRST_USER_ID,
    MARKER,
    DatabaseCpu,
    cpu_seconds,
    seed_history,
    start_child,
    start_platform,
)
from tests.fakes.telegram_api import FakeTelegram
from tests.scaleout_helpers import free_port

DRAIN_SECONDS = 15.0
# A process that starts: long enough for a shared machine whose load is ten times its cores.
STARTUP_SECONDS = 300.0
_NAMES = itertools.count(1)


@dataclass(frozen=True)
class Config:
    name: str
    workers: int  # 0: one process on SQLite


@dataclass
class Step:
    rate: float
    offered: int = 0
    answered: int = 0
    unanswered: int = 0
    duplicates: int = 0
    orders: int = 0  # replies to an older message after a newer one's
    achieved: float = 0.0
    overhead_p50_ms: float = 0.0
    overhead_p99_ms: float = 0.0
    bot_cpu: float = 0.0
    platform_cpu: float = 0.0
    database_cpu: float = 0.0
    driver_cpu: float = 0.0
    # Each bot process's own (the single process, or each worker): bot_cpu is their sum.
    bots_cpu: tuple[float, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for name in ("bot_cpu", "platform_cpu", "database_cpu", "driver_cpu"):
            seconds = out.pop(name)
            out[f"{name}_ms_per_msg"] = self.ms_per_msg(seconds)
        out["bots_cpu_ms_per_msg"] = [self.ms_per_msg(s) for s in out.pop("bots_cpu")]
        out["order_violations"] = out.pop("orders")
        return out

    def ms_per_msg(self, seconds: float) -> float:
        return round(seconds * 1000 / self.answered, 3) if self.answered else 0.0


class TimedTelegram(FakeTelegram):
    """The fake Bot API, each reply matched to the message it answers as it arrives."""

    def __init__(self) -> None:
        super().__init__()
        self.sent_at: dict[tuple[int, int], float] = {}
        self.outstanding: dict[int, int] = {}  # user -> its message waiting for an answer
        self.free: deque[int] = deque()
        self.e2e: list[float] = []
        self.answered = 0
        self.duplicates = 0
        self.orders = 0
        self.last_reply = 0.0
        self._highest: dict[int, int] = {}

    def _record_sent(self, method: str, message: dict[str, Any], params: dict[str, Any]) -> None:
        super()._record_sent(method, message, params)
        found = MARKER.search(message.get("text") or "")
        if not found:
            return
        now = time.perf_counter()
        user, seq = int(found.group(1)), int(found.group(2))
        if seq <= self._highest.get(user, -1):
            self.duplicates += seq == self._highest[user]
            self.orders += seq < self._highest[user]
            return
        self._highest[user] = seq
        if self.outstanding.get(user) == seq:
            del self.outstanding[user]
            self.e2e.append(now - self.sent_at[(user, seq)])
            self.answered += 1
            self.last_reply = now
            self.free.append(user)

    def write(self, user: int, seq: int) -> None:
        self.outstanding[user] = seq
        self.sent_at[(user, seq)] = time.perf_counter()
        self.send_private_text(FIRST_USER_ID + user, f"{user_line(user, seq)} #u{user}m{seq}")


@dataclass
class Processes:
    bots: list[asyncio.subprocess.Process] = field(default_factory=list)
    platform: asyncio.subprocess.Process | None = None
    database: DatabaseCpu | None = None

    def cpu(self) -> tuple[float, ...]:
        """Each bot process's CPU seconds, then the platform's, the database's, the driver's."""
        bots = [cpu_seconds(p.pid) for p in self.bots]
        platform = cpu_seconds(self.platform.pid) if self.platform else 0.0
        database = self.database.seconds() if self.database else 0.0
        return *bots, platform, database, time.process_time()

    def start_profiles(self) -> None:
        """The measured steps begin: the profiled bots start counting (bench/scaleout_profile)."""
        for process in self.bots:
            process.send_signal(signal.SIGUSR1)

    async def stop(self) -> None:
        for process in [*self.bots, *([self.platform] if self.platform else [])]:
            if process.returncode is None:
                process.terminate()
        for process in [*self.bots, *([self.platform] if self.platform else [])]:
            try:
                await asyncio.wait_for(process.wait(), 30)
            except TimeoutError:
                process.kill()


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:]


async def _healthy(port: int, process: asyncio.subprocess.Process, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            if process.returncode is not None:
                raise RuntimeError(f"{log.name} exited:\n{_tail(log)}")
            try:
                async with session.get(f"http://127.0.0.1:{port}/healthz") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError(f"{log.name} not ready:\n{_tail(log)}")


async def _printed_ready(process: asyncio.subprocess.Process, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while "ready" not in _tail(log):
        if process.returncode is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{log.name} did not start:\n{_tail(log)}")
        await asyncio.sleep(0.1)


async def _database(config: Config, base: str, folder: Path) -> dict[str, Any]:
    if not config.workers:
        return {"database_path": str(folder / f"{config.name}.db")}
    name = f"scaleout_{next(_NAMES)}"
    admin = await asyncpg.connect(f"{base}/postgres")
    try:
        await admin.execute(f"CREATE DATABASE {name}")  # our own name, never input
    finally:
        await admin.close()
    return {"database_path": str(folder / "unused.db"), "database_url": f"{base}/{name}"}


def profile_path(profiles: Path | None, config: Config, n: int) -> Path | None:
    """Where bot process `n` of a set-up saves its profile (None: not profiled)."""
    return profiles / f"{config.name}-{n}.pstats" if profiles is not None else None


async def _start(
    config: Config,
    overrides: dict[str, Any],
    latency: float,
    folder: Path,
    profiles: Path | None = None,
) -> Processes:
    processes = Processes()
    if not config.workers:
        log = folder / f"{config.name}.log"
        profile = profile_path(profiles, config, 0)
        processes.bots.append(await start_child("single", latency, overrides, log, profile))
        await _printed_ready(processes.bots[0], log)
        return processes
    url = overrides["database_url"]
    port = free_port()
    env = {
        "DATABASE_URL": url,
        "TELEGRAM_BOT_TOKEN": overrides["telegram_bot_token"],
        "TELEGRAM_API_BASE_URL": overrides["telegram_api_base_url"],
        "CHARACTERS_DIR": str(REPO / "characters"),
        "DATABASE_PATH": str(folder / "unused.db"),
        "HEALTH_PORT": str(port),
        "LOG_LEVEL": "WARNING",
    }
    log = folder / f"{config.name}-platform.log"
    processes.platform = await start_platform(env, log)
    await _healthy(port, processes.platform, log)
    for n in range(config.workers):
        port, log = free_port(), folder / f"{config.name}-worker-{n}.log"
        worker = await start_child(
            "worker",
            latency,
            overrides | {"health_port": port},
            log,
            profile_path(profiles, config, n),
        )
        processes.bots.append(worker)
        await _healthy(port, worker, log)
    processes.database = await DatabaseCpu.of(url)
    return processes


async def _offer(fake: TimedTelegram, rate: float, seconds: float, seqs: list[int]) -> int:
    """Steady arrivals: one message every 1/rate s, each from a user with none waiting."""
    count, loop = int(rate * seconds), asyncio.get_running_loop()
    began, offered = loop.time(), 0
    for i in range(count):
        delay = began + i / rate - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        if not fake.free:
            continue  # every user is waiting: the bot is far behind, the step will fail
        user = fake.free.popleft()
        fake.write(user, seqs[user])
        seqs[user] += 1
        offered += 1
    return offered


async def _drain(fake: TimedTelegram) -> None:
    deadline = time.monotonic() + DRAIN_SECONDS
    while fake.outstanding and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.05)


async def _step(
    fake: TimedTelegram,
    processes: Processes,
    rate: float,
    seconds: float,
    latency: float,
    seqs: list[int],
) -> Step:
    fake.e2e, fake.answered, fake.duplicates, fake.orders = [], 0, 0, 0
    before = processes.cpu()
    began = time.perf_counter()
    offered = await _offer(fake, rate, seconds, seqs)
    await _drain(fake)
    after = processes.cpu()
    wall = max(fake.last_reply - began, 1e-9)
    overhead = distribution_ms([e - latency for e in fake.e2e])
    *bots, platform, database, driver = (b - a for a, b in zip(before, after, strict=True))
    return Step(
        rate,
        offered,
        fake.answered,
        len(fake.outstanding),
        fake.duplicates,
        fake.orders,
        round(fake.answered / wall, 1),
        overhead["p50"],
        overhead["p99"],
        sum(bots),
        platform,
        database,
        driver,
        tuple(bots),
    )


async def measure(
    config: Config,
    rates: list[float],
    seconds: float,
    latency: float,
    history: int,
    base: str,
    folder: Path,
    profiles: Path | None = None,
) -> list[Step]:
    """Every rate in turn (stopping after the first one far out of reach); with `profiles`,
    each bot process is profiled over the measured steps and saves its profile there."""
    users = math.ceil(max(rates) * (latency + 0.25) * 2) + 8
    async with TimedTelegram() as fake:
        overrides = await _database(config, base, folder) | {
            "telegram_bot_token": fake.token,
            "telegram_api_base_url": fake.url,
            "stream_replies": False,
            "worker_concurrency": 1024,
        }
        await seed_history(dict(overrides), users, history)
        processes = await _start(config, overrides, latency, folder, profiles)
        try:
            fake.free.extend(range(users))
            seqs = [0] * users
            await _step(fake, processes, min(rates), users / min(rates), latency, seqs)  # warm
            if profiles is not None:
                processes.start_profiles()
            steps = []
            for rate in rates:
                steps.append(await _step(fake, processes, rate, seconds, latency, seqs))
                if steps[-1].unanswered or steps[-1].achieved < 0.5 * rate:
                    break
        finally:
            await processes.stop()
    return steps
