from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memory.models import Thread
from memory.store import SchemaTooNewError
from memory.store.sqlite import SqliteStore, available_migrations

NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


async def test_migrations_are_applied_in_order_and_recorded(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "a.db")
    await store.close()
    rows = (
        sqlite3.connect(tmp_path / "a.db")
        .execute("SELECT version, name FROM schema_migrations ORDER BY version")
        .fetchall()
    )
    assert [name for _, name in rows] == [name for _, name, _ in available_migrations()]
    assert rows[0] == (1, "0001_initial.sql")


async def test_reopening_applies_nothing_twice(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "a.db")
    assert await store.migrate() == []
    await store.close()
    store = await SqliteStore.open(tmp_path / "a.db")
    assert await store.migrate() == []
    await store.close()


async def test_connection_pragmas(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "a.db")
    for pragma, expected in [
        ("journal_mode", "wal"),
        ("foreign_keys", 1),
        ("secure_delete", 1),
        ("busy_timeout", 5000),
    ]:
        [row] = await store._execute(f"PRAGMA {pragma}")
        assert row[0] == expected, pragma
    await store.close()


async def test_refuses_a_database_from_a_newer_schema(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "a.db")
    await store.close()
    with sqlite3.connect(tmp_path / "a.db") as raw:
        raw.execute("INSERT INTO schema_migrations VALUES (999, '0999_future.sql', 'x')")
    with pytest.raises(SchemaTooNewError, match="999"):
        await SqliteStore.open(tmp_path / "a.db")


async def test_a_broken_migration_leaves_no_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = available_migrations()
    broken = [
        *good,
        (
            len(good) + 1,
            f"{len(good) + 1:04d}_broken.sql",
            "CREATE TABLE half_done (x INTEGER);\nTHIS IS NOT SQL;",
        ),
    ]
    monkeypatch.setattr("memory.store.sqlite.base.available_migrations", lambda: broken)
    with pytest.raises(sqlite3.OperationalError):
        await SqliteStore.open(tmp_path / "a.db")
    raw = sqlite3.connect(tmp_path / "a.db")
    tables = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "half_done" not in tables
    versions = [r[0] for r in raw.execute("SELECT version FROM schema_migrations")]
    assert versions == [v for v, _, _ in good]


async def test_turn_ids_are_permanent_and_queries_are_scoped(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "a.db")
    ana = await store.upsert_user("telegram", "1", "Ana", NOW)
    bea = await store.upsert_user("telegram", "2", "Bea", NOW)
    assert (await store.upsert_user("telegram", "1", "Ana R.", NOW)).id == ana.id
    ana_thread = Thread(ana.id, "detective_bilbao", "dm")
    bea_thread = Thread(bea.id, "detective_bilbao", "dm")
    conv_a = await store.start_conversation(ana_thread, NOW)
    conv_b = await store.start_conversation(bea_thread, NOW)
    first = await store.add_turn(conv_a, "user", "hola", NOW)
    await store.add_turn(conv_b, "user", "secreto de Bea", NOW)
    last = await store.add_turn(conv_a, "assistant", "¿Qué te trae?", NOW)
    texts = [t.text for t in await store.turns_after(ana_thread, 0)]
    assert texts == ["hola", "¿Qué te trae?"]
    await store._execute("DELETE FROM turns WHERE id = ?", (last.id,))
    again = await store.add_turn(conv_a, "user", "otra vez", NOW)
    assert again.id > last.id > first.id  # a deleted id is never handed out again
    assert await store.count_turns(bea_thread) == 1
    await store.close()


async def test_a_cancelled_caller_never_leaves_half_a_reply(tmp_path: Path) -> None:
    """A method runs whole on the store's thread: cancelling the task that awaits it (a
    shutdown, a timeout) leaves the reply, its sources and its usage row all there or none."""
    import asyncio

    from memory.models import ReplySources, UsageRecord

    store = await SqliteStore.open(tmp_path / "a.db")
    user = await store.upsert_user("telegram", "u1", "Ana", NOW)
    thread = Thread(user.id, "detective_bilbao", "dm")
    conversation = await store.start_conversation(thread, NOW)
    asked = await store.add_turn(conversation, "user", "¿Sigues ahí?", NOW)
    sources = ReplySources(0, (), None, (asked.id,), (), NOW)
    usage = UsageRecord("reply", "m", True, user_id=user.id, turn_id=asked.id)
    tasks = [
        asyncio.create_task(store.add_reply(conversation, f"Sí ({i})", NOW, sources, usage))
        for i in range(50)
    ]
    await asyncio.sleep(0)
    for task in tasks[::2]:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    replies = await store._execute("SELECT id FROM turns WHERE role = 'assistant'")
    with_sources = await store._execute("SELECT turn_id FROM reply_sources")
    usage_rows = await store._execute("SELECT count(*) FROM llm_usage")
    assert {r[0] for r in replies} == {r[0] for r in with_sources}
    assert usage_rows[0][0] == len(replies) > 0
    assert await store.integrity_check() == "ok"
    assert (await store.add_turn(conversation, "user", "¿Y ahora?", NOW)).id > asked.id
    await store.close()
