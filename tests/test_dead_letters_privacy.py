"""Issue 35 item 3 on both backends: off the record means nothing kept, dead letters included
(a letter written while its sender is off the record keeps no text, and still none after
`/incognito off`); a letter that names no sender, which no forget reaches, is deleted by the
sweep once older than DEAD_LETTER_NO_SENDER_DAYS. The platform process's own path on
PostgreSQL: tests/test_dead_letters_pg.py."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from bot.app import open_app
from memory.models import DeadLetter, Thread
from memory.store import open_store
from tests.conftest import FakeClock, make_settings
from tests.fakes.anthropic_api import FakeAnthropic
from tests.test_cli import cli_database, companion, env_for
from tests.test_forget_purge import canary_bytes

NOW = FakeClock().now
SECRET = "mi clave es tortuga42"
DETECTIVE = "detective_bilbao"


def letter(user: str | None, update: int, age: timedelta = timedelta()) -> DeadLetter:
    payload = json.dumps({"update_id": update, "message": {"text": SECRET}})
    error = f"DataError: invalid input in '{SECRET}'"  # a database may quote the text
    return DeadLetter("telegram", str(update), user, payload, error, NOW - age)


async def go_off_record(store: Any, platform_user: str) -> Thread:
    user = await store.upsert_user("telegram", platform_user, "Ana", NOW)
    thread = Thread(user.id, DETECTIVE, "dm")
    await store.set_off_record(thread, NOW + timedelta(minutes=30))
    return thread


async def test_an_off_record_senders_letter_keeps_no_text_after_incognito_off(
    any_store: Any,
) -> None:
    thread = await go_off_record(any_store, "41")
    await any_store.upsert_user("telegram", "42", "Bea", NOW)
    assert await any_store.record_dead_letter(letter("41", 1))
    assert await any_store.record_dead_letter(letter("42", 2))  # Bea is on the record
    assert await any_store.clear_off_record(thread)  # /incognito off
    bea, ana = await any_store.dead_letters(10)
    assert (ana.platform_user_id, ana.update_key) == ("41", "1")  # it failed, and whose
    assert (ana.payload, ana.error) == ("", "DataError")
    assert SECRET not in repr(ana)
    assert json.loads(bea.payload)["message"]["text"] == SECRET  # as the platform sent it
    # Still one row per update, and the sender's forget still reaches the empty letter.
    assert not await any_store.record_dead_letter(letter("41", 1))
    counts = await any_store.forget(thread.user_id, DETECTIVE)
    assert counts["dead_letters"] == 1


async def test_letters_with_no_sender_expire_and_the_others_stay(any_store: Any) -> None:
    await any_store.record_dead_letter(letter(None, 1, timedelta(days=8)))
    await any_store.record_dead_letter(letter(None, 2, timedelta(days=6)))
    await any_store.record_dead_letter(letter("41", 3, timedelta(days=30)))  # a forget's
    assert await any_store.expire_dead_letters(NOW - timedelta(days=7)) == 1
    left = sorted(d.update_key or "" for d in await any_store.dead_letters(10))
    assert left == ["2", "3"]
    assert await any_store.expire_dead_letters(NOW - timedelta(days=7)) == 0


async def test_the_sweep_expires_them_after_the_setting(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    settings = make_settings(tmp_path, fake_anthropic, dead_letter_no_sender_days=2)
    async with open_app(settings, clock=clock, start_scheduler=False) as app:
        await app.store.record_dead_letter(letter(None, 1, timedelta(days=3)))
        await app.store.record_dead_letter(letter(None, 2, timedelta(days=1)))
        await app.sweep()
        assert [d.update_key for d in await app.store.dead_letters(10)] == ["2"]
        clock.now += timedelta(days=1, minutes=1)
        await app.sweep()
        assert await app.store.dead_letters(10) == []


async def test_the_cli_shows_that_it_failed_and_no_word_of_it(tmp_path: Path) -> None:
    store = await open_store(cli_database(tmp_path))
    try:
        await go_off_record(store, "41")
        await store.record_dead_letter(letter("41", 7))
    finally:
        await store.close()
    code, out, err = await companion("inbox", "dead-letters", env=env_for(tmp_path, None))
    assert code == 0, err
    first, total = out.splitlines()
    assert first.startswith("#1 2026-11-02T18:30:00+00:00 telegram update 7 from user 41:")
    assert first.endswith(": DataError | (no text kept: the sender was off the record)")
    assert total == "1 dead letter(s)"
    database = cli_database(tmp_path)
    if isinstance(database, Path):  # nor a byte of it in the database's files
        assert canary_bytes(database, "tortuga42") == 0
