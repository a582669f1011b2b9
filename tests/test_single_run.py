"""One `companion run` per database: a second refuses to start with a one-line message naming
the file, while the admin's `companion memory` commands still work beside the running bot."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from bot.runner import single_run
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.telegram_api import FakeTelegram
from tests.fault_helpers import BotProcess, run_companion, subprocess_env, until
from tests.patience import PATIENCE

ANA = 1001


async def test_a_second_run_on_the_same_database_refuses_to_start(tmp_path: Path) -> None:
    database = tmp_path / "c.db"
    async with FakeAnthropic() as llm, FakeTelegram() as telegram:
        env = subprocess_env(
            database,
            ANTHROPIC_API_KEY=llm.api_key,
            ANTHROPIC_BASE_URL=llm.url,
            TELEGRAM_BOT_TOKEN=telegram.token,
            TELEGRAM_API_BASE_URL=telegram.url,
        )
        first = await BotProcess.start("run", env=env, stderr_path=tmp_path / "first.err")
        try:
            await until(lambda: bool(telegram.calls_to("getUpdates")), what="polling")
            telegram.send_private_text(ANA, "Hola")
            await telegram.wait_for_messages(ANA, 1)

            asked = len(telegram.calls_to("getMe"))
            second = await BotProcess.start("run", env=env, stderr_path=tmp_path / "second.err")
            started = lambda: len(telegram.calls_to("getMe")) > asked  # noqa: E731
            code = await second.exit_code(started, "started beside the first")
            err = second.stderr()
            assert code == 3, err
            [line] = err.strip().splitlines()  # one clear line, no traceback
            assert "another `companion run` is already using" in line and str(database) in line

            code, _, err = await run_companion(
                "memory", "show", "--platform", "telegram", "--user", str(ANA), env=env
            )
            assert code == 0, err

            assert first.process.returncode is None  # the first one is untouched
        finally:
            first.process.send_signal(signal.SIGTERM)
            code = await asyncio.wait_for(first.finish(), PATIENCE)
    assert code == 0, first.stderr()
    with single_run(database):  # released when the process ended
        pass


def test_the_lock_is_per_database(tmp_path: Path) -> None:
    with single_run(tmp_path / "a.db"), single_run(tmp_path / "b.db"):
        pass
