"""Running the roles of issue 16 as real subprocesses (`companion run --role ...`) against the
fake Telegram API, the fake LLM and a throwaway PostgreSQL; and checking what users received.
Shared by tests/test_scaleout*.py and bench/scaleout.py."""

from __future__ import annotations

import asyncio
import re
import signal
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from tests.fakes.telegram_api import FakeTelegram
from tests.fault_helpers import subprocess_env

REPLY = re.compile(r"Re: u(\d+)-m(\d+)\b")


def role_env(
    tmp_path: Path, url: str, telegram: FakeTelegram, llm_url: str, llm_key: str, **extra: str
) -> dict[str, str]:
    return subprocess_env(
        tmp_path / "unused.db",
        DATABASE_URL=url,
        TELEGRAM_BOT_TOKEN=telegram.token,
        TELEGRAM_API_BASE_URL=telegram.url,
        ANTHROPIC_API_KEY=llm_key,
        ANTHROPIC_BASE_URL=llm_url,
        LLM_TIMEOUT_SECONDS="30",
        LOG_LEVEL="WARNING",
        **extra,
    )


@dataclass
class RoleProcess:
    """`python -m bot run --role ROLE`, its output to a file (read when a test fails)."""

    role: str
    process: asyncio.subprocess.Process
    log: Path

    @classmethod
    async def start(cls, role: str, env: dict[str, str], folder: Path, n: int) -> RoleProcess:
        log = folder / f"{role}-{n}.log"
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
        return cls(role, process, log)

    async def kill(self) -> None:
        """SIGKILL: nothing runs in the process after it."""
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGKILL)
        await self.process.wait()

    async def stop(self) -> int:
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        return await asyncio.wait_for(self.process.wait(), 30)

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
        """Replies that came after a reply to a later message of the same user."""
        return sum(
            sum(1 for a, b in zip(r, r[1:], strict=False) if b <= a) for r in self.replies.values()
        )

    def lost(self) -> int:
        """Users whose last message got no answer (every earlier one is covered by a later
        reply, as a burst is answered on its newest message)."""
        return sum(
            1
            for u, n in self.sent.items()
            if n and (not self.replies.get(u) or max(self.replies[u]) != n - 1)
        )
