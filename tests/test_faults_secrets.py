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
from aiohttp import web

from bot.app import open_app
from bot.config import Settings
from bot.llm import build_llm
from bot.logging_setup import MODEL_SDKS, NOISY, PLATFORM_SDKS, configure_logging
from memory.engine.llm import LLMError, LLMRequest, TextBlock
from memory.integrity.redaction import Redactor
from memory.models import Incoming
from tests.conftest import FakeClock, make_settings
from tests.fakes.anthropic_api import Error, FakeAnthropic
from tests.fakes.telegram_api import FakeTelegram
from tests.fault_helpers import (
    BotProcess,
    query,
    run_companion,
    subprocess_env,
    telegram_bot,
    until,
)
from tests.patience import PATIENCE

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
    names = (*MODEL_SDKS, *PLATFORM_SDKS, *NOISY)
    noisy = {name: logging.getLogger(name).level for name in names}
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
        # As `companion run` does with LOG_SDK_PAYLOADS=true: the model SDK's dump is written.
        configure_logging("DEBUG", SECRETS, sdk_payloads=True)
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
            LOG_SDK_PAYLOADS="true",  # the model SDK's request dump, where the secrets are
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
    # The chat's logs go to the data folder's log file, not into the conversation.
    log = (tmp_path / "companion.log").read_text()
    assert "Request options" in log and "mi clave es [redacted] y el token [redacted]" in log
    assert leaks(out, err, log) == []


async def test_companion_run_subprocess_at_debug_then_sigterm(tmp_path: Path) -> None:
    async with FakeAnthropic(api_key=API_KEY) as llm, FakeTelegram(token=BOT_TOKEN) as telegram:
        env = subprocess_env(
            tmp_path / "c.db",
            ANTHROPIC_API_KEY=API_KEY,
            ANTHROPIC_BASE_URL=llm.url,
            TELEGRAM_BOT_TOKEN=BOT_TOKEN,
            TELEGRAM_API_BASE_URL=telegram.url,
            LOG_LEVEL="DEBUG",
            # The model SDK's request dump holds the user's message; Telegram's own dump of
            # the update is never written any more (bot/logging_setup.py, PLATFORM_SDKS).
            LOG_SDK_PAYLOADS="true",
        )
        bot = await BotProcess.start("run", env=env, stderr_path=tmp_path / "run.err")
        await until(lambda: bool(telegram.calls_to("getUpdates")), what="polling")
        telegram.send_private_text(ANA, f"toma {BOT_TOKEN}")
        await telegram.wait_for_messages(ANA, 1)
        bot.process.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(bot.finish(), PATIENCE)
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


# -- every secret setting, in the log and in what is stored -------------------------------------

SECRET_FIELDS = {  # each with a canary; a new secret setting must be added here
    "anthropic_api_key": "sk-ant-api03-CANARY-anthropic-9f8e7d",
    "openai_api_key": "sk-proj-CANARY-openai-compatible-1a2b",
    "telegram_bot_token": "123456:AAH-CANARY-telegram-token-77",
    "telegram_webhook_secret": "CANARY-webhook-secret-Xy81",
    "discord_bot_token": "MTA-CANARY.discord-token.Gh55",
    "database_url": "postgresql://bot:CANARY-pg-password-5c@127.0.0.1:5432/companion",
}


def test_every_secret_setting_is_a_secret_field() -> None:
    # A setting that looks like a secret and is a plain str would never be redacted.
    looks_secret = {
        name
        for name in Settings.model_fields
        if name.endswith(("_key", "_token", "_secret", "_password")) or name == "database_url"
    }
    secret_fields = {
        name for name, info in Settings.model_fields.items() if "SecretStr" in str(info.annotation)
    }
    assert looks_secret == secret_fields == set(SECRET_FIELDS)


@pytest.mark.parametrize("field", sorted(SECRET_FIELDS))
def test_each_secret_setting_is_redacted_from_the_log(
    field: str, tmp_path: Path, caplog: pytest.LogCaptureFixture, restore_logging: None
) -> None:
    canary = SECRET_FIELDS[field]
    settings = Settings(_env_file=None, database_path=tmp_path / "c.db", **{field: canary})  # type: ignore[call-arg]
    configure_logging("DEBUG", settings.secrets())
    logging.getLogger().handlers.insert(0, caplog.handler)
    caplog.set_level(logging.DEBUG)
    # INFO: a platform SDK's DEBUG (its payloads) is not even logged any more (LOG_SDK_PAYLOADS).
    logging.getLogger("telegram.ext").info("sending with %s", canary)
    [record] = [r for r in caplog.records if r.name == "telegram.ext"]
    assert record.getMessage() == "sending with [redacted]"


def test_the_database_password_alone_is_redacted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, restore_logging: None
) -> None:
    url = SECRET_FIELDS["database_url"]
    settings = Settings(_env_file=None, database_path=tmp_path / "c.db", database_url=url)  # type: ignore[call-arg]
    configure_logging("DEBUG", settings.secrets())
    logging.getLogger().handlers.insert(0, caplog.handler)
    caplog.set_level(logging.DEBUG)
    logging.getLogger("asyncpg").debug("auth failed for password CANARY-pg-password-5c")
    [record] = [r for r in caplog.records if r.name == "asyncpg"]
    assert "CANARY" not in record.getMessage()
    assert "CANARY" not in settings.database_name and "127.0.0.1:5432" in settings.database_name


def test_the_canaries_are_long_enough_to_be_redacted() -> None:
    # Values under MIN_SECRET_CHARS are ignored (they would redact ordinary words): each canary
    # used by these tests must be one the real redaction replaces.
    redact = Redactor([*SECRETS, *SECRET_FIELDS.values()])
    for secret in [*SECRETS, *SECRET_FIELDS.values()]:
        assert redact(f"a {secret} b") == "a [redacted] b"
    assert Redactor(["abcde"])("abcde") == "abcde"
    # A body cut short before it was redacted still loses the part of the key it kept.
    assert redact(f"body: {API_KEY[:20]}") == "body: [redacted]"


async def test_an_error_body_echoing_the_key_is_stored_redacted(
    tmp_path: Path, clock: FakeClock
) -> None:
    async with FakeAnthropic(api_key=API_KEY) as llm:
        llm.queue(Error(400, "invalid_request_error", f"bad request for key {API_KEY} (echo)"))
        settings = make_settings(
            tmp_path, llm, telegram_webhook_secret=SECRET_FIELDS["telegram_webhook_secret"]
        )
        async with open_app(settings, clock=clock, start_scheduler=False) as app:
            reply = await app.companion.handle(
                Incoming("telegram", "1", "Ana", "dm", "1", "detective_bilbao", "hola")
            )
    assert not reply.ok
    [(error,)] = query(settings.database_target, "SELECT error FROM llm_usage WHERE ok = 0")
    assert "bad request for key [redacted] (echo)" in error
    assert API_KEY not in error


async def test_an_openai_error_body_cut_mid_key_is_redacted(tmp_path: Path) -> None:
    key = SECRET_FIELDS["openai_api_key"]

    async def echo_key(request: web.Request) -> web.Response:
        return web.Response(status=400, text="x" * (300 - 10) + key)  # cut at 300 characters

    server = web.Application()
    server.router.add_post("/v1/chat/completions", echo_key)
    runner = web.AppRunner(server)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        database_path=tmp_path / "c.db",
        llm_provider="openai",
        openai_base_url=f"http://127.0.0.1:{port}/v1",
        openai_api_key=key,
        llm_max_retries=0,
    )
    llm = build_llm(settings)
    try:
        with pytest.raises(LLMError) as failure:
            await llm.complete(LLMRequest("reply", (TextBlock("s"),), ()))
    finally:
        await llm.close()
        await runner.cleanup()
    assert key[:10] not in str(failure.value) and "[redacted]" in str(failure.value)


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
