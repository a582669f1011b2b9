"""Helpers shared by the fault tests (tests/test_faults_*.py): a `companion` subprocess driven
line by line, waiting on conditions instead of sleeping, and plain reads of the database file."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from bot.adapters.telegram_adapter import TelegramAdapter
from bot.app import App, open_app
from bot.llm import ClosableLLM
from tests.conftest import CHARACTERS, make_settings
from tests.fakes.anthropic_api import FakeAnthropic, Text, route_of
from tests.fakes.anthropic_api import _default as fake_default
from tests.fakes.telegram_api import FakeTelegram
from tests.patience import PATIENCE
from tests.raw_db import raw_database

SPEAKER = "Koldo Arrieta: "  # how the terminal prints detective_bilbao's lines


def subprocess_env(database: Path, **extra: str) -> dict[str, str]:
    """The environment of a `companion` subprocess: none of the developer's provider settings."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("ANTHROPIC_", "LLM_", "OPENAI_", "DATABASE_", "TELEGRAM_"))
        and not key.startswith(("DISCORD_", "LOG_", "WINDOW_"))
    }
    env.update(
        {
            "DATABASE_PATH": str(database),
            "CHARACTERS_DIR": str(CHARACTERS),
            "LLM_MAX_RETRIES": "0",
            "RATE_LIMIT_MESSAGES": "1000",
            "STREAM_REPLIES": "false",  # a reply is one message (streaming: test_streaming.py)
        }
    )
    env.update(extra)
    return env


async def until(predicate: Callable[[], bool], timeout: float = PATIENCE, what: str = "") -> None:  # noqa: ASYNC109
    """Wait for a condition another task makes true (a request arriving at a fake)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        await asyncio.sleep(0.002)


class BotProcess:
    """`python -m bot ...` with stdin and stdout piped; stderr goes to a file for diagnosis."""

    def __init__(self, process: asyncio.subprocess.Process, stderr: IO[bytes], path: Path):
        self.process = process
        self.lines: list[str] = []
        self._stderr = stderr
        self.stderr_path = path
        self._changed = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, *args: str, env: dict[str, str], stderr_path: Path) -> BotProcess:
        stderr = stderr_path.open("wb")
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bot",
            *args,
            env=env,
            # Away from the repository, so that a developer's .env cannot leak into the test.
            cwd=str(stderr_path.parent),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
        )
        return cls(process, stderr, stderr_path)

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            self.lines.append(line.decode("utf-8", "replace").rstrip("\n"))
            self._changed.set()
        self._changed.set()

    @property
    def stdout(self) -> str:
        return "\n".join(self.lines)

    def stderr(self) -> str:
        if not self._stderr.closed:
            self._stderr.flush()
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def said(self) -> list[str]:
        """Every line the character said (openings included), in order."""
        return [line.removeprefix(SPEAKER) for line in self.lines if line.startswith(SPEAKER)]

    async def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode() + b"\n")
        await self.process.stdin.drain()

    async def wait_for_line(self, expected: str, timeout: float = PATIENCE) -> None:  # noqa: ASYNC109
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while expected not in self.lines:
            if self._reader.done():
                raise AssertionError(
                    f"the bot exited before printing {expected!r}:\n{self.stderr()}"
                )
            self._changed.clear()
            remaining = deadline - loop.time()
            if remaining <= 0:
                printed = "\n".join(self.lines[-10:])
                raise AssertionError(
                    f"no line {expected!r} within {timeout}s; last printed:\n{printed}\n"
                    f"stderr:\n{self.stderr()}"
                )
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except TimeoutError:
                continue

    async def exit_code(self, went_on: Callable[[], bool], what: str) -> int:
        """The code the process exits with; fails as soon as `went_on` shows that it carried on
        instead (`what` it did), rather than when the wait's patience runs out."""
        finished = asyncio.ensure_future(self.finish())
        await until(lambda: finished.done() or went_on(), what=f"an exit, or {what}")
        if not finished.done():
            self.process.send_signal(signal.SIGKILL)
            await finished
            raise AssertionError(f"the process {what} instead of exiting:\n{self.stderr()}")
        return finished.result()

    async def kill(self) -> int:
        """SIGKILL: no clean-up of any kind runs in the bot."""
        self.process.send_signal(signal.SIGKILL)
        return await self.finish()

    async def close(self, timeout: float = PATIENCE) -> int:  # noqa: ASYNC109
        """End of input: the bot leaves cleanly."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        return await asyncio.wait_for(self.finish(), timeout)

    async def finish(self) -> int:
        code = await self.process.wait()
        await self._reader
        self._stderr.close()
        return code


async def run_companion(
    *args: str,
    env: dict[str, str],
    stdin: str = "",
    timeout: float = PATIENCE,  # noqa: ASYNC109
) -> tuple[int, str, str]:
    """Run `companion ARGS` to completion: (exit code, stdout, stderr)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        *args,
        env=env,
        cwd=str(Path(env["DATABASE_PATH"]).parent),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(stdin.encode()), timeout)
    code = process.returncode
    assert code is not None
    return code, out.decode(), err.decode()


def query(database: Path | str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Rows of `sql` on the test's database (a SQLite path, or a PostgreSQL URL)."""
    with raw_database(database) as raw:
        return raw.execute(sql, params).fetchall()


def integrity(database: Path) -> str:
    return str(query(database, "PRAGMA integrity_check")[0][0])


def turns(database: Path | str) -> list[tuple[int, str, str]]:
    """(id, role, text) of every turn, oldest first (none before the SQLite file exists)."""
    if isinstance(database, Path) and not database.exists():
        return []
    return query(database, "SELECT id, role, text FROM turns ORDER BY id")  # type: ignore[return-value]


def summary_cover(database: Path | str) -> int:
    """The turn id the newest summary covers up to (0 without a summary)."""
    if not database.exists():
        return 0
    rows = query(database, "SELECT covers_up_to_turn_id FROM summaries ORDER BY id DESC LIMIT 1")
    return int(rows[0][0]) if rows else 0


def request_texts(body: dict[str, Any]) -> list[str]:
    """The text blocks of a reply request's messages, without this turn's context and the
    closing reminder (the last two blocks)."""
    texts = [block["text"] for m in body["messages"] for block in m["content"]]
    return texts[:-2]


def newest_user_text(body: dict[str, Any]) -> str:
    return request_texts(body)[-1]


@dataclass
class TelegramBot:
    fake: FakeTelegram
    llm: FakeAnthropic
    app: App
    adapter: TelegramAdapter


@asynccontextmanager
async def telegram_bot(
    tmp_path: Path,
    llm: FakeAnthropic,
    clock: Callable[[], datetime],
    engine_llm: ClosableLLM | None = None,
    **overrides: Any,
) -> AsyncIterator[TelegramBot]:
    """The real Telegram adapter (real PTB) on the fake Bot API, with the real engine (its LLM
    the real provider on `llm`, unless `engine_llm` is given)."""
    async with FakeTelegram(token=overrides.pop("token", "123456:TEST-token")) as fake:
        settings = make_settings(
            tmp_path,
            llm,
            telegram_bot_token=fake.token,
            telegram_api_base_url=fake.url,
            **overrides,
        )
        async with open_app(settings, llm=engine_llm, clock=clock, start_scheduler=False) as app:
            adapter = TelegramAdapter(settings, app.commands)
            await adapter.start()
            try:
                yield TelegramBot(fake, llm, app, adapter)
            finally:
                await adapter.stop()


def echo_llm(body: dict[str, Any]) -> Any:
    """A fake LLM answer that repeats the user's newest text: the worst case for injection."""
    if route_of(body) != "reply":
        return fake_default(body)
    return Text(f"Re: {newest_user_text(body)}")
