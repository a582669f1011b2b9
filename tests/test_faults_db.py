"""The database failing under the bot: a full disk mid-conversation, and a schema written by a
newer version of the bot.

Tests run as root, which ignores file permissions, so a read-only file cannot be simulated with
chmod; a full disk is simulated instead with `PRAGMA max_page_count` on the bot's own connection
(SQLite then answers SQLITE_FULL exactly as on a full filesystem)."""

from __future__ import annotations

import logging
import random
import sqlite3
import string
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.app import App
from bot.llm import ClosableLLM, build_llm
from bot.texts import text
from memory.engine.llm import LLMRequest, LLMResponse
from memory.store.sqlite import SqliteStore, available_migrations
from tests.conftest import FakeClock
from tests.fakes.anthropic_api import FakeAnthropic, Text
from tests.fault_helpers import (
    TelegramBot,
    integrity,
    query,
    run_companion,
    subprocess_env,
    telegram_bot,
)

pytestmark = pytest.mark.sqlite_only  # the SQLite file, its thread and its index themselves

ANA = 1001
APOLOGY = text("es", "error")
UNLIMITED = 1_073_741_823  # SQLite's default max_page_count


def random_words(seed: int, count: int = 450) -> str:
    """Text that cannot fit in free space: new words all, so the search index grows too."""
    rng = random.Random(seed)
    return " ".join("".join(rng.choices(string.ascii_lowercase, k=7)) for _ in range(count))


async def fill_disk(app: App) -> None:
    """From now on the database cannot grow by a single page."""
    [row] = await app.store._execute("PRAGMA page_count")
    await app.store._execute(f"PRAGMA max_page_count = {row[0]}")


async def free_disk(app: App) -> None:
    await app.store._execute(f"PRAGMA max_page_count = {UNLIMITED}")


def disk_full_logged(caplog: pytest.LogCaptureFixture) -> bool:
    """The log names the real cause (not a follow-up error such as a failed ROLLBACK)."""
    return any(
        r.levelno >= logging.ERROR
        and isinstance(r.exc_info[1], sqlite3.OperationalError)
        and "database or disk is full" in str(r.exc_info[1])
        for r in caplog.records
        if r.exc_info
    )


class DiskFillsAfterAnswer:
    """The real provider, filling the disk once the model has answered, when armed: the user's
    turn is stored, the reply cannot be."""

    def __init__(self, inner: ClosableLLM) -> None:
        self.inner = inner
        self.app: App | None = None
        self.armed = False

    async def complete(self, request: LLMRequest) -> LLMResponse:
        response = await self.inner.complete(request)
        if self.armed and self.app is not None:
            await fill_disk(self.app)
        return response

    async def close(self) -> None:
        await self.inner.close()


@dataclass
class Harness:
    bot: TelegramBot
    llm: DiskFillsAfterAnswer

    @property
    def app(self) -> App:
        return self.bot.app

    async def say(self, message: str) -> str:
        before = len(self.bot.fake.sent_messages(ANA))
        self.bot.fake.send_private_text(ANA, message, first_name="Ana")
        return str((await self.bot.fake.wait_for_messages(ANA, before + 1))[-1]["text"])

    def turns(self) -> list[tuple[str, str]]:
        return query(self.app.settings.database_path, "SELECT role, text FROM turns ORDER BY id")


@pytest.fixture
async def h(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> AsyncIterator[Harness]:
    from tests.conftest import make_settings

    llm = DiskFillsAfterAnswer(build_llm(make_settings(tmp_path, fake_anthropic)))
    async with telegram_bot(tmp_path, fake_anthropic, clock, engine_llm=llm) as bot:
        llm.app = bot.app
        yield Harness(bot, llm)


async def test_disk_full_before_the_users_turn(
    h: Harness, fake_anthropic: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    fake_anthropic.queue(Text("Siéntate."), Text("Ahora sí."))
    assert await h.say("Hola, soy Ana") == "Siéntate."
    await fill_disk(h.app)

    assert await h.say(random_words(1)) == APOLOGY  # short, and says nothing technical
    assert disk_full_logged(caplog)
    assert len(fake_anthropic.bodies()) == 1  # no LLM call for a turn that was not stored

    await free_disk(h.app)
    assert integrity(h.app.settings.database_path) == "ok"
    assert h.turns() == [("user", "Hola, soy Ana"), ("assistant", "Siéntate.")]
    assert await h.say("¿Sigues ahí?") == "Ahora sí."  # the same session carries on
    assert h.turns()[-2:] == [("user", "¿Sigues ahí?"), ("assistant", "Ahora sí.")]


async def test_disk_full_after_the_model_answered(
    h: Harness, fake_anthropic: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    fake_anthropic.queue(Text("Siéntate."), Text(random_words(2)), Text("Ahora sí."))
    assert await h.say("Hola, soy Ana") == "Siéntate."
    h.llm.armed = True

    assert await h.say("Cuéntamelo todo") == APOLOGY
    assert disk_full_logged(caplog)

    h.llm.armed = False
    await free_disk(h.app)
    assert integrity(h.app.settings.database_path) == "ok"
    # The question is kept (it was stored before the call); the lost reply left no trace.
    assert h.turns() == [
        ("user", "Hola, soy Ana"),
        ("assistant", "Siéntate."),
        ("user", "Cuéntamelo todo"),
    ]
    assert await h.say("¿Y bien?") == "Ahora sí."
    texts = [b["text"] for m in fake_anthropic.bodies()[-1]["messages"] for b in m["content"]]
    assert texts[-4:-2] == ["Cuéntamelo todo", "¿Y bien?"]  # the unanswered turn travels along


async def test_disk_full_repeatedly_never_corrupts(
    h: Harness, fake_anthropic: FakeAnthropic
) -> None:
    for index in range(5):
        await fill_disk(h.app)
        assert await h.say(random_words(10 + index)) == APOLOGY
        await free_disk(h.app)
        assert await h.say(f"mensaje corto {index}") == "Entendido."
    assert integrity(h.app.settings.database_path) == "ok"
    users = [t for role, t in h.turns() if role == "user"]
    assert users == [f"mensaje corto {index}" for index in range(5)]


# -- a database from a newer version ------------------------------------------------------------


async def future_database(tmp_path: Path) -> tuple[Path, int, int]:
    database = tmp_path / "c.db"
    store = await SqliteStore.open(database)
    await store.close()
    known = max(version for version, _, _ in available_migrations())
    future = known + 1
    raw = sqlite3.connect(database)
    with raw:
        raw.execute(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, '2027-01-01')",
            (future, f"{future:04d}_from_the_future.sql"),
        )
    raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # all in the main file: its bytes say it all
    raw.close()
    return database, known, future


@pytest.mark.parametrize(
    "command",
    [("migrate",), ("chat", "--character", "detective_bilbao"), ("run",)],
    ids=["migrate", "chat", "run"],
)
async def test_refuses_a_database_from_a_newer_version(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    database, known, future = await future_database(tmp_path)
    before = database.read_bytes()
    env = subprocess_env(
        database,
        ANTHROPIC_API_KEY="sk-test-unused",
        ANTHROPIC_BASE_URL="http://127.0.0.1:9",  # never reached
        TELEGRAM_BOT_TOKEN="123:unused",
        TELEGRAM_API_BASE_URL="http://127.0.0.1:9",
    )
    code, out, err = await run_companion(*command, env=env, stdin="hola\n")
    assert code == 2, (out, err)
    assert f"[{future}]" in err and f"knows up to {known}" in err, err
    assert str(database) in err and "upgrade the bot" in err
    assert "Traceback" not in err
    assert database.read_bytes() == before  # refused before writing anything
    assert integrity(database) == "ok"
