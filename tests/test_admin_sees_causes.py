"""What an admin sees when the deployment is wrong: `companion run` (the default role) serves
its health endpoint; a key the provider refuses stops it at start-up naming the setting, a
provider it cannot reach is a warning; and in the terminal a failed reply shows its cause (a
platform's user still gets the character's apology)."""

from __future__ import annotations

import asyncio
import signal
import socket
from pathlib import Path

import aiohttp

from memory.engine.settings import APOLOGY
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.telegram_api import FakeTelegram
from tests.fault_helpers import BotProcess, run_companion, subprocess_env, until

ANA = 1001


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


async def test_the_default_run_serves_health_and_metrics(tmp_path: Path) -> None:
    port = closed_port()
    async with FakeAnthropic() as llm, FakeTelegram() as telegram:
        env = subprocess_env(
            tmp_path / "c.db",
            ANTHROPIC_API_KEY=llm.api_key,
            ANTHROPIC_BASE_URL=llm.url,
            TELEGRAM_BOT_TOKEN=telegram.token,
            TELEGRAM_API_BASE_URL=telegram.url,
            HEALTH_PORT=str(port),
        )
        bot = await BotProcess.start("run", env=env, stderr_path=tmp_path / "run.err")
        try:
            await until(lambda: bool(telegram.calls_to("getUpdates")), 60, what="polling")
            telegram.send_private_text(ANA, "Hola")
            await telegram.wait_for_messages(ANA, 1, timeout=30)
            status, body = await _get(f"http://127.0.0.1:{port}/healthz")
            assert (status, body) == (200, "ok all\n")
            status, metrics = await _get(f"http://127.0.0.1:{port}/metrics")
            assert status == 200
            assert 'companion_up{role="all"} 1' in metrics
            calls = [line for line in metrics.splitlines() if line.startswith("companion_llm_")]
            assert 'companion_llm_latency_seconds_count{role="all"} 0' not in calls, calls
            assert llm.model_lists == 1  # the key was checked once, at start-up
        finally:
            bot.process.send_signal(signal.SIGTERM)
            code = await asyncio.wait_for(bot.finish(), 60)
    assert code == 0, bot.stderr()


async def test_a_refused_key_stops_run_at_start_up_naming_the_setting(tmp_path: Path) -> None:
    async with FakeAnthropic() as llm, FakeTelegram() as telegram:
        env = subprocess_env(
            tmp_path / "c.db",
            ANTHROPIC_API_KEY="sk-wrong-key",
            ANTHROPIC_BASE_URL=llm.url,
            TELEGRAM_BOT_TOKEN=telegram.token,
            TELEGRAM_API_BASE_URL=telegram.url,
        )
        bot = await BotProcess.start("run", env=env, stderr_path=tmp_path / "run.err")
        polling = lambda: bool(telegram.calls_to("getUpdates"))  # noqa: E731
        code = await bot.exit_code(polling, "took messages")
        err = bot.stderr()
    assert code == 2, err
    last = err.strip().splitlines()[-1]
    assert "refused ANTHROPIC_API_KEY" in last and "401" in last, err
    assert "sk-wrong-key" not in err
    assert not telegram.calls_to("getUpdates")  # it stopped before taking any message


async def test_an_unreachable_provider_is_a_warning_and_run_goes_on(tmp_path: Path) -> None:
    async with FakeTelegram() as telegram:
        env = subprocess_env(
            tmp_path / "c.db",
            ANTHROPIC_API_KEY="sk-any",
            ANTHROPIC_BASE_URL=f"http://127.0.0.1:{closed_port()}",
            TELEGRAM_BOT_TOKEN=telegram.token,
            TELEGRAM_API_BASE_URL=telegram.url,
        )
        bot = await BotProcess.start("run", env=env, stderr_path=tmp_path / "run.err")
        try:
            await until(lambda: bool(telegram.calls_to("getUpdates")), 60, what="polling")
        finally:
            bot.process.send_signal(signal.SIGTERM)
            code = await asyncio.wait_for(bot.finish(), 60)
    assert code == 0, bot.stderr()
    [warning] = [line for line in bot.stderr().splitlines() if "could not check" in line]
    assert "cannot reach the Anthropic API" in warning and "ANTHROPIC_BASE_URL" in warning


async def test_the_terminal_shows_why_the_reply_failed(tmp_path: Path) -> None:
    async with FakeAnthropic() as llm:
        env = subprocess_env(
            tmp_path / "c.db", ANTHROPIC_API_KEY="sk-wrong-key", ANTHROPIC_BASE_URL=llm.url
        )
        code, out, err = await run_companion(
            "chat", "--character", "detective_bilbao", env=env, stdin="Hola\n/quit\n", timeout=120
        )
    assert code == 0, err
    [line] = [line for line in out.splitlines() if line.startswith("! ")]
    assert "Anthropic API answered 401" in line and "check ANTHROPIC_API_KEY" in line, out
    assert APOLOGY["es"] not in out  # the admin is told the cause, not the character's excuse


async def test_the_terminal_names_the_address_when_the_model_is_unreachable(
    tmp_path: Path,
) -> None:
    env = subprocess_env(
        tmp_path / "c.db",
        ANTHROPIC_API_KEY="sk-any",
        ANTHROPIC_BASE_URL=f"http://127.0.0.1:{closed_port()}",
    )
    code, out, err = await run_companion(
        "chat", "--character", "detective_bilbao", env=env, stdin="Hola\n/quit\n", timeout=120
    )
    assert code == 0, err
    [line] = [line for line in out.splitlines() if line.startswith("! ")]
    assert "cannot reach the Anthropic API" in line and "ANTHROPIC_BASE_URL" in line, out
