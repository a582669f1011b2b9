"""No secret reaches a log line, a traceback or the terminal, at DEBUG.

A test that finds no secret proves nothing unless the secret was there to be found: each test
also makes sure a log record carrying it was produced on the real path (an httpx request URL
with the Telegram token; the Anthropic SDK's DEBUG dump of a request whose text holds the key),
and that what came out says "[redacted]" in its place."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.config import Settings
from bot.logging_setup import configure_logging
from tests.conftest import FakeClock
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.telegram_api import FakeTelegram
from tests.fault_helpers import (
    BotProcess,
    run_companion,
    subprocess_env,
    telegram_bot,
    until,
)

API_KEY = "sk-ant-api03-CANARYk3y-Zq8W4xR2mN7vT5pL9sJ1"
BOT_TOKEN = "987654321:AAH-CANARYt0ken-x9Yq2Wm5Zr8Tn3Pk"
SECRETS = (API_KEY, BOT_TOKEN)
ANA = 1001


def leaks(*outputs: str) -> list[str]:
    return [secret for secret in SECRETS for output in outputs if secret in output]


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """configure_logging changes process-wide state; put it back for the other tests."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, logging.getLogRecordFactory())
    noisy = {name: logging.getLogger(name).level for name in ("httpx", "httpcore", "telegram")}
    yield
    root.handlers[:], level, factory = saved
    root.setLevel(level)
    logging.setLogRecordFactory(factory)
    for name, level in noisy.items():
        logging.getLogger(name).setLevel(level)


async def test_telegram_adapter_in_process_at_debug(
    tmp_path: Path,
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
    restore_logging: None,
) -> None:
    async with FakeAnthropic(api_key=API_KEY) as llm:
        configure_logging("DEBUG", SECRETS)  # as `companion run` does
        # configure_logging replaced the root handlers, pytest's capture among them: put it
        # back, or caplog would see nothing and the test would pass whatever leaked. First in
        # line, as any other handler may be (a library's, an operator's file): it must not
        # depend on the redacting stderr handler having touched the record before.
        logging.getLogger().handlers.insert(0, caplog.handler)
        caplog.set_level(logging.DEBUG)
        # The leak the redaction exists for: httpx logs every URL, and PTB's carry the token.
        caplog.set_level(logging.DEBUG, logger="httpx")
        async with telegram_bot(tmp_path, llm, clock, token=BOT_TOKEN) as bot:
            bot.fake.send_private_text(ANA, "Hola, soy Ana")
            await bot.fake.wait_for_messages(ANA, 1)
            bot.fake.send_private_text(ANA, f"mi clave es {API_KEY}")  # into the SDK's dump
            await bot.fake.wait_for_messages(ANA, 2)
    out, err = capfd.readouterr()
    records = [r.getMessage() + (r.exc_text or "") for r in caplog.records]
    # The secrets were there to leak, on the real path...
    assert any("/bot[redacted]/" in m for m in records if "HTTP Request" in m), records[:20]
    assert any("[redacted]" in m for m in records if "mi clave es" in m)
    # ...and came out redacted everywhere: in every record any handler sees, and on stderr.
    assert leaks(caplog.text, *records, out, err) == []
    assert "[redacted]" in err


async def test_companion_chat_subprocess_at_debug(tmp_path: Path) -> None:
    async with FakeAnthropic(api_key=API_KEY) as llm:
        env = subprocess_env(
            tmp_path / "c.db",
            ANTHROPIC_API_KEY=API_KEY,
            ANTHROPIC_BASE_URL=llm.url,
            TELEGRAM_BOT_TOKEN=BOT_TOKEN,
            LOG_LEVEL="DEBUG",
        )
        code, out, err = await run_companion(
            "chat",
            "--character",
            "detective_bilbao",
            env=env,
            stdin=f"Hola\nmi clave es {API_KEY} y el token {BOT_TOKEN}\n",
        )
        assert llm.rejected_keys == []
    assert code == 0, err
    assert "Koldo Arrieta: Entendido." in out
    assert "Request options" in err and "mi clave es [redacted] y el token [redacted]" in err
    assert leaks(out, err) == []


async def test_companion_run_subprocess_at_debug_then_sigterm(tmp_path: Path) -> None:
    async with FakeAnthropic(api_key=API_KEY) as llm, FakeTelegram(token=BOT_TOKEN) as telegram:
        env = subprocess_env(
            tmp_path / "c.db",
            ANTHROPIC_API_KEY=API_KEY,
            ANTHROPIC_BASE_URL=llm.url,
            TELEGRAM_BOT_TOKEN=BOT_TOKEN,
            TELEGRAM_API_BASE_URL=telegram.url,
            LOG_LEVEL="DEBUG",
        )
        bot = await BotProcess.start("run", env=env, stderr_path=tmp_path / "run.err")
        await until(lambda: bool(telegram.calls_to("getUpdates")), what="polling")
        telegram.send_private_text(ANA, f"toma {BOT_TOKEN}")
        await telegram.wait_for_messages(ANA, 1, timeout=15)
        bot.process.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(bot.finish(), 30)
    err = bot.stderr()
    assert code == 0, err
    assert "stopped cleanly" in err and "toma [redacted]" in err
    assert leaks(bot.stdout, err) == []


async def test_a_rejected_token_is_not_printed(tmp_path: Path) -> None:
    """Telegram refusing the token (revoked, or a wrong TELEGRAM_API_BASE_URL) makes PTB raise
    an error whose message holds the token: it must not reach stderr in a traceback."""
    async with FakeTelegram(token="111:another-token") as telegram:
        env = subprocess_env(
            tmp_path / "c.db",
            ANTHROPIC_API_KEY=API_KEY,
            TELEGRAM_BOT_TOKEN=BOT_TOKEN,
            TELEGRAM_API_BASE_URL=telegram.url,
        )
        code, out, err = await run_companion("run", env=env)
    assert code != 0
    assert "TELEGRAM_BOT_TOKEN" in err or "[redacted]" in err, err
    assert leaks(out, err) == [], err


def test_every_secret_of_the_settings_is_redacted(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], restore_logging: None
) -> None:
    """Each secret the settings read from the environment reaches the redaction, as `companion
    run` wires it (Settings.secrets() into configure_logging): a record and a traceback that
    hold them all come out with none of them. (This used to check only its own constants.)"""
    secrets = {
        "ANTHROPIC_API_KEY": API_KEY,
        "OPENAI_API_KEY": "sk-proj-CANARYopenai-7Hq2Lm9Xv4",
        "TELEGRAM_BOT_TOKEN": BOT_TOKEN,
        "DISCORD_BOT_TOKEN": "MTI0CANARYdiscord.GhX2aB.k9Lm3Qw7Er1Ty5",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    configure_logging("DEBUG", settings.secrets())
    everything = " ".join(secrets.values())
    logging.getLogger("companion.test").warning("request failed: %s", everything)
    try:
        raise RuntimeError(f"provider said: {everything}")
    except RuntimeError:
        logging.getLogger("companion.test").exception("call failed")
    out, err = capfd.readouterr()
    assert "request failed" in err and "provider said" in err  # the records were written
    assert [name for name, value in secrets.items() if value in out + err] == []
    assert err.count("[redacted]") == 2 * len(secrets)
