"""Running the roles of issue 16 as real subprocesses (`companion run --role ...`) against the
fake Telegram API, the fake LLM and a throwaway PostgreSQL; and checking what users received.
Shared by tests/test_scaleout*.py and bench/scaleout.py."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import signal
import socket
import sys
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from aiohttp import web

from tests.fakes.telegram_api import FakeTelegram
from tests.fault_helpers import subprocess_env
from tests.patience import PATIENCE

REPLY = re.compile(r"Re: u(\d+)-m(\d+)\b")
MESSAGE = re.compile(r"\bu(\d+)-m(\d+)\b")


class FakeChatLLM:
    """An OpenAI-compatible /chat/completions on 127.0.0.1 (LLM_PROVIDER=openai): a worker
    that needs no Anthropic SDK starts in a second, which a test restarting workers twenty
    times needs. Answers "Re: u<user>-m<newest message>" after `delay()` seconds."""

    def __init__(self, delay: Callable[[], float]) -> None:
        self._delay = delay
        self.requests = 0
        self.bodies: list[str] = []
        self.hold_from: int | None = None  # requests from this number on wait for `release`
        self.release = asyncio.Event()
        self.padding = ""  # appended to each answer (a reply long enough to be sent in parts)
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def __aenter__(self) -> FakeChatLLM:
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._complete)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}/v1"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release.set()  # a held request ends: the server can close
        if self._runner is not None:
            await self._runner.cleanup()

    async def _complete(self, request: web.Request) -> web.Response:
        self.requests += 1
        text = await request.text()
        self.bodies.append(text)
        if self.hold_from is not None and self.requests >= self.hold_from:
            await self.release.wait()
        contents = [str(m.get("content")) for m in json.loads(text).get("messages", [])]
        found = [(int(u), int(m)) for u, m in MESSAGE.findall("\n".join(contents))]
        await asyncio.sleep(self._delay())
        user, newest = max(found, key=lambda f: f[1]) if found else (0, -1)
        answer = f"Re: u{user}-m{newest} entendido{self.padding}" if found else "{}"
        return web.json_response(
            {
                "model": "fake",
                "choices": [{"message": {"role": "assistant", "content": answer}}],
                "usage": {"prompt_tokens": len(text) // 4, "completion_tokens": 8},
            }
        )


def role_env(
    tmp_path: Path, url: str, telegram: FakeTelegram, llm: FakeChatLLM, **extra: str
) -> dict[str, str]:
    return subprocess_env(
        tmp_path / "unused.db",
        DATABASE_URL=url,
        TELEGRAM_BOT_TOKEN=telegram.token,
        TELEGRAM_API_BASE_URL=telegram.url,
        LLM_PROVIDER="openai",
        OPENAI_BASE_URL=llm.url,
        LLM_TIMEOUT_SECONDS=str(PATIENCE),  # the fake answers; only a hang may end it
        # No compaction: the fake answers every request with text, a summary's too.
        WINDOW_TRIGGER_TURNS="10000",
        **({"LOG_LEVEL": "WARNING"} | extra),
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class RoleProcess:
    """`python -m bot run --role ROLE`, its output to a file (read when a test fails)."""

    role: str
    process: asyncio.subprocess.Process
    log: Path
    health_port: int

    @classmethod
    async def start(cls, role: str, env: dict[str, str], folder: Path, n: int) -> RoleProcess:
        log = folder / f"{role}-{n}.log"
        port = free_port()
        env = {**env, "HEALTH_PORT": str(port)}
        with log.open("wb") as out:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "bot",
                "run",
                "--role",
                role,
                env=env,
                cwd=str(folder),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
            )
        return cls(role, process, log, port)

    async def is_ready(self) -> bool:
        if self.process.returncode is not None:
            return False
        try:
            async with aiohttp.ClientSession() as session:
                url = f"http://127.0.0.1:{self.health_port}/healthz"
                async with session.get(url) as response:
                    return response.status == 200
        except aiohttp.ClientError:
            return False

    async def ready(self, timeout: float = PATIENCE) -> None:  # noqa: ASYNC109
        """Wait until /healthz answers: the role runs (a worker is claiming)."""
        deadline = time.monotonic() + timeout
        async with aiohttp.ClientSession() as session:
            while time.monotonic() < deadline:
                if self.process.returncode is not None:
                    raise AssertionError(f"{self.role} exited:\n{self.output()}")
                try:
                    url = f"http://127.0.0.1:{self.health_port}/healthz"
                    async with session.get(url) as response:
                        if response.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.05)
        raise AssertionError(f"{self.role} not ready within {timeout}s:\n{self.output()}")

    async def kill(self) -> None:
        """SIGKILL: nothing runs in the process after it."""
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGKILL)
        await self.process.wait()

    async def stop(self) -> int:
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        return await asyncio.wait_for(self.process.wait(), PATIENCE)

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


@dataclass
class Delivery:
    """What each user received, checked against what each one sent."""

    sent: dict[int, int] = field(default_factory=dict)  # user -> messages sent
    # user -> the message numbers the replies answered, in the order they arrived
    replies: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))

    def read(self, telegram: FakeTelegram) -> None:
        self.replies = defaultdict(list)
        for message in telegram.sent_messages():
            found = REPLY.search(message.get("text") or "")
            if found:
                self.replies[int(found.group(1))].append(int(found.group(2)))

    def complete(self) -> bool:
        """Each user's newest message is answered (a burst's answer comes on its newest)."""
        return all(
            n == 0 or (self.replies.get(u) and self.replies[u][-1] == n - 1)
            for u, n in self.sent.items()
        )

    def duplicates(self) -> int:
        return sum(len(r) - len(set(r)) for r in self.replies.values())

    def order_violations(self) -> int:
        """Replies that came after a reply to a later message of the same user (a reply sent
        twice is counted by the duplicate checks, not here)."""
        return sum(
            sum(1 for a, b in itertools.pairwise(r) if b < a) for r in self.replies.values()
        )

    def lost(self) -> int:
        """Users whose last message got no answer (every earlier one is covered by a later
        reply, as a burst is answered on its newest message)."""
        return sum(
            1
            for u, n in self.sent.items()
            if n and (not self.replies.get(u) or max(self.replies[u]) != n - 1)
        )


@contextlib.asynccontextmanager
async def watched(processes: list[RoleProcess]) -> AsyncIterator[None]:
    """Every process of the list (those added inside too) is killed when the block ends, and
    its log's end is printed when the block fails."""
    try:
        yield
    except BaseException:
        for process in processes:
            print(f"---- {process.role} {process.log.name}\n{process.output()[-3000:]}")
        raise
    finally:
        for process in processes:
            await process.kill()
