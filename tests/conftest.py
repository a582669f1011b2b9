from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.app import App, open_app
from bot.config import Settings
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.telegram_api import FakeTelegram

REPO = Path(__file__).resolve().parent.parent
# The tests' own characters: copies of the shipped ones, so that an admin's additions to the
# live ./characters folder (an imported card, say) can never change what a test sees.
CHARACTERS = REPO / "tests" / "data" / "characters"


class FakeClock:
    """Injected time: tests move it forward instead of sleeping."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 11, 2, 18, 30, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def fake_anthropic() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as fake:
        yield fake


def make_settings(tmp_path: Path, fake: FakeAnthropic, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "database_path": tmp_path / "companion.db",
        "characters_dir": CHARACTERS,
        "anthropic_api_key": fake.api_key,
        "anthropic_base_url": fake.url,
        "llm_max_retries": 0,
        "llm_timeout_seconds": 5,
        "llm_model": "claude-test",
        "rate_limit_messages": 1000,
        # Streaming is tested on its own (tests/test_streaming.py); elsewhere a reply is one
        # message, so that tests can read it once it is there.
        "stream_replies": False,
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


@asynccontextmanager
async def running_telegram(
    tmp_path: Path, fake: FakeAnthropic, clock: FakeClock, **overrides: Any
) -> AsyncIterator[tuple[FakeTelegram, App]]:
    """The whole bot on the fake Telegram API: the real adapter, started, and stopped after."""
    from bot.adapters.telegram_adapter import TelegramAdapter  # only the Telegram tests need it

    async with FakeTelegram() as telegram:
        settings = make_settings(
            tmp_path,
            fake,
            telegram_bot_token=telegram.token,
            telegram_api_base_url=telegram.url,
            **overrides,
        )
        async with open_app(settings, clock=clock, start_scheduler=False) as app:
            adapter = TelegramAdapter(settings, app.commands)
            await adapter.start()
            try:
                yield telegram, app
            finally:
                await adapter.stop()


@pytest.fixture
def settings(tmp_path: Path, fake_anthropic: FakeAnthropic) -> Settings:
    return make_settings(tmp_path, fake_anthropic)


@pytest.fixture
async def app(settings: Settings, clock: FakeClock) -> AsyncIterator[App]:
    async with open_app(settings, clock=clock, start_scheduler=False) as running:
        yield running
