"""The processes of bench/scaleout.py: the bot's children (one process on SQLite; a worker with
the bench's fixed-latency LLM), their CPU time read from /proc, and the seeded history.

Children are started as `python bench/scaleout.py --child-single|--child-worker JSON`, the JSON
being the settings' overrides, so each runs the real code of its role with only the LLM swapped
for the in-process fake of bench/load_common.py (which echoes the message's marker, so that the
parent can tell which message each reply answers).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

import asyncpg

from bench.common import REPO
from bench.load_common import FixedLatencyLLM, bench_settings
from bench.load_common import seed_history as load_seed_history
from bench.scaleout_profile import profiled
from bot.answers import Caller
from bot.app import open_app
from bot.config import Settings
from bot.runner import build_adapters, settle_garbage_collector, start_adapters
from memory.engine.llm import LLMRequest, LLMResponse

MARKER = re.compile(r"#u(\d+)m(\d+)")
TICKS = os.sysconf("SC_CLK_TCK")
FIRST_USER_ID = 50_000


class EchoLLM(FixedLatencyLLM):
    """The fixed-latency fake, its reply ending with the newest marker it was asked about."""

    async def complete(self, request: LLMRequest) -> LLMResponse:
        response = await super().complete(request)
        if request.kind != "reply":
            return response
        markers = MARKER.findall("\n".join(m.text for m in request.messages))
        if not markers:
            return response
        user, seq = max(markers, key=lambda m: int(m[1]))
        return dataclasses.replace(response, text=f"{response.text} #u{user}m{seq}")


def telegram_caller(index: int) -> Caller:
    """The caller the Telegram adapter makes of the fake's private chat with user `index`."""
    uid = str(FIRST_USER_ID + index)
    return Caller("telegram", uid, f"User{uid}", "dm", uid, None)


async def seed_history(overrides: dict[str, Any], users: int, turns: int) -> None:
    """One earlier conversation per user, ended and summarised the day before, for Telegram's
    callers (bench/load_common.seed_history): recall has a turn log to search."""
    settings = bench_settings(Path(overrides.pop("database_path")), **overrides)
    async with open_app(settings, llm=FixedLatencyLLM(0), start_scheduler=False) as app:
        await load_seed_history(app, users, turns, telegram_caller)


def _stop_on_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)


async def child_single(overrides: dict[str, Any], latency: float, profile: Path | None) -> None:
    """`companion run` (role all) with the bench's LLM: the Telegram adapter on the fake."""
    settings = bench_settings(Path(overrides.pop("database_path")), **overrides)
    stop = asyncio.Event()
    _stop_on_signals(stop)
    with profiled(profile):
        await _serve_single(settings, latency, stop)


async def _serve_single(settings: Settings, latency: float, stop: asyncio.Event) -> None:
    async with open_app(settings, llm=EchoLLM(latency)) as app:
        adapters = build_adapters(settings, app.commands)
        await start_adapters(settings, adapters)
        settle_garbage_collector()
        print("ready", flush=True)
        await stop.wait()
        await asyncio.gather(*(adapter.stop() for adapter in adapters))


async def child_worker(overrides: dict[str, Any], latency: float, profile: Path | None) -> None:
    from bot.roles import run_role

    settings = bench_settings(Path(overrides.pop("database_path")), **overrides)
    with profiled(profile):
        await run_role(settings, "worker", llm=EchoLLM(latency))


def child_main(argv: list[str]) -> bool:
    """`--child-single|--child-worker LATENCY JSON [PROFILE]`: run that child here (under the
    profiler when a PROFILE file is named: bench/scaleout_profile.py); False otherwise."""
    if argv[:1] not in (["--child-single"], ["--child-worker"]):
        return False
    latency, overrides = float(argv[1]), json.loads(argv[2])
    profile = Path(argv[3]) if len(argv) > 3 else None
    run = child_single if argv[0] == "--child-single" else child_worker
    asyncio.run(run(overrides, latency, profile))
    return True


async def start_child(
    kind: str, latency: float, overrides: dict[str, Any], log: Path, profile: Path | None = None
) -> asyncio.subprocess.Process:
    script = str(REPO / "bench" / "scaleout.py")
    with log.open("wb") as out:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            script,
            f"--child-{kind}",
            str(latency),
            json.dumps(overrides),
            *([str(profile)] if profile is not None else []),
            env=os.environ | {"PYTHONPATH": str(REPO), "LOG_LEVEL": "WARNING"},
            cwd=str(log.parent),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
        )


async def start_platform(env: dict[str, str], log: Path) -> asyncio.subprocess.Process:
    """The real `companion run --role platform`."""
    with log.open("wb") as out:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bot",
            "run",
            "--role",
            "platform",
            env=os.environ | {"PYTHONPATH": str(REPO)} | env,
            cwd=str(log.parent),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
        )


def cpu_seconds(pid: int, children: bool = False) -> float:
    """user + system CPU of a live process (with its reaped children's when asked)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    # fields[0] is field 3 (state): utime is field 14, stime 15, cutime 16, cstime 17.
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / TICKS


def _parent_of(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (FileNotFoundError, ProcessLookupError, ValueError):
        return -1


class DatabaseCpu:
    """The PostgreSQL server's CPU: the postmaster with its reaped backends, and the backends
    still running (each connection is a process)."""

    def __init__(self, postmaster: int) -> None:
        self.postmaster = postmaster

    @classmethod
    async def of(cls, url: str) -> DatabaseCpu:
        con = await asyncpg.connect(url)
        try:
            folder = await con.fetchval("SHOW data_directory")
        finally:
            await con.close()
        pid = int((Path(folder) / "postmaster.pid").read_text().splitlines()[0])
        return cls(pid)

    def seconds(self) -> float:
        total = cpu_seconds(self.postmaster, children=True)
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and _parent_of(int(entry.name)) == self.postmaster:
                total += cpu_seconds(int(entry.name))
        return total
