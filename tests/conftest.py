from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.app import App, open_app
from bot.config import Settings
from tests import store_rule
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.telegram_api import FakeTelegram
from tests.pg_fixtures import (  # noqa: F401  (fixtures, for every test module)
    any_store,
    fresh_database,
    pg_base,
    pg_url,
    run_aside,
    suite_server,
)

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
def database_target(
    tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Path | str:
    """Where this test's store lives: a SQLite file, or (make test-postgres) a fresh database
    on the throwaway PostgreSQL server, which every Settings of the test then uses."""
    if suite_server() is None:
        return tmp_path / "companion.db"
    url = run_aside(fresh_database(request.getfixturevalue("pg_base")))
    monkeypatch.setenv("DATABASE_URL", url)
    return url


def pytest_configure(config: pytest.Config) -> None:
    if suite_server() is None:
        store_rule.install(config)


@pytest.fixture(autouse=True)
def _on_the_chosen_backend(request: pytest.FixtureRequest) -> Iterator[None]:
    """Under make test-postgres, every test that reaches the store (tests/store_rule.py) gets
    its database, whether it asks or not; under make test, a test outside that rule fails if
    it opens a SQLite file or starts a Python process all the same."""
    if suite_server() is not None:
        if not request.node.get_closest_marker("sqlite_only"):
            request.getfixturevalue("database_target")
        yield
        return
    watch = request.config.stash.get(store_rule.WATCH, None)
    if watch is None or store_rule.reaches_store(request.node):
        yield
        return
    with watch.watching(request.node.nodeid) as seen:
        yield
    if seen:
        pytest.fail(store_rule.complaint(request.node.nodeid, seen), pytrace=False)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if suite_server() is None:
        return
    # Only the tests that reach the store: the others run the same code on either backend.
    store_rule.keep_store_tests(config, items)
    skip = pytest.mark.skip(reason="reads or breaks the SQLite file itself")
    for item in items:
        if item.get_closest_marker("sqlite_only"):
            item.add_marker(skip)


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
        # Under make test-postgres, the test's own database (the database_target fixture).
        "database_url": os.environ.get("DATABASE_URL") if suite_server() else None,
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
