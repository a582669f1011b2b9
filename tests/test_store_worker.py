"""Group commit on the store's thread (memory/store/sqlite/worker.py): jobs queued together
share one
transaction, each in its own savepoint, and nobody is answered before the COMMIT."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memory.models import Conversation, Thread
from memory.store.sqlite import SqliteStore

pytestmark = pytest.mark.sqlite_only  # the SQLite file, its thread and its index themselves

NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


async def _open(tmp_path: Path) -> tuple[SqliteStore, Conversation]:
    store = await SqliteStore.open(tmp_path / "a.db")
    user = await store.upsert_user("telegram", "u1", "Ana", NOW)
    conversation = await store.start_conversation(Thread(user.id, "luna", "dm"), NOW)
    return store, conversation


@asynccontextmanager
async def _thread_held(store: SqliteStore) -> AsyncIterator[None]:
    """Keep the store's thread busy inside the block: what is started there waits in its
    queue, and runs once the block ends."""
    release, busy = threading.Event(), threading.Event()

    def hold() -> None:
        busy.set()
        release.wait(timeout=10)

    holder = asyncio.create_task(store._run(hold))
    await asyncio.to_thread(busy.wait, 10)
    try:
        yield
    finally:
        release.set()
        await holder


async def _queued_behind_a_busy_thread(
    store: SqliteStore, make: list[Callable[[], Awaitable[Any]]]
) -> list[Any]:
    """Start every call of `make` while the store's thread is held busy, then let it go: they
    all wait in its queue at once, so they run as one group."""
    async with _thread_held(store):
        tasks = [asyncio.create_task(call()) for call in make]
        await asyncio.sleep(0)  # every task has put its job in the queue
    return await asyncio.gather(*tasks, return_exceptions=True)


def _texts(path: Path) -> list[str]:
    with sqlite3.connect(path) as raw:
        return [row[0] for row in raw.execute("SELECT text FROM turns ORDER BY id")]


async def test_a_group_commits_once_and_keeps_the_order(tmp_path: Path) -> None:
    store, conversation = await _open(tmp_path)
    commits: list[int] = []
    store._con.set_trace_callback(lambda sql: commits.append(1) if sql == "COMMIT" else None)
    make = [
        (lambda i=i: store.add_turn(conversation, "user", f"mensaje {i}", NOW)) for i in range(20)
    ]
    turns = await _queued_behind_a_busy_thread(store, make)
    assert [t.text for t in turns] == [f"mensaje {i}" for i in range(20)]
    assert [t.id for t in turns] == sorted(t.id for t in turns)
    assert len(commits) == 1  # twenty transactions' worth of writes, one COMMIT
    assert _texts(tmp_path / "a.db") == [f"mensaje {i}" for i in range(20)]
    await store.close()


async def test_a_failing_job_rolls_back_only_itself(tmp_path: Path) -> None:
    store, conversation = await _open(tmp_path)

    def half_a_write() -> None:
        store._con.execute(
            "INSERT INTO turns (conversation_id, user_id, character_id, scope, role, text,"
            " created_at) SELECT conversation_id, user_id, character_id, scope, role, 'a medias',"
            " created_at FROM turns LIMIT 1"
        )
        raise ValueError("broken after writing")

    await store.add_turn(conversation, "user", "antes", NOW)
    results = await _queued_behind_a_busy_thread(
        store,
        [
            lambda: store.add_turn(conversation, "user", "uno", NOW),
            lambda: store._run(half_a_write),
            lambda: store.add_turn(conversation, "user", "dos", NOW),
        ],
    )
    assert isinstance(results[1], ValueError)
    assert _texts(tmp_path / "a.db") == ["antes", "uno", "dos"]
    assert await store.integrity_check() == "ok"
    await store.close()


async def test_a_lost_group_runs_again_job_by_job(tmp_path: Path) -> None:
    """When the group's transaction ends under it (SQLite rolls back on a full disk), nothing
    of the group was kept: every job runs again alone, and only the broken one fails."""
    store, conversation = await _open(tmp_path)

    def ends_the_transaction() -> None:
        store._con.execute("ROLLBACK")  # as SQLITE_FULL does, from inside the job

    results = await _queued_behind_a_busy_thread(
        store,
        [
            lambda: store.add_turn(conversation, "user", "uno", NOW),
            lambda: store._run(ends_the_transaction),
            lambda: store.add_turn(conversation, "user", "dos", NOW),
        ],
    )
    assert isinstance(results[1], sqlite3.OperationalError)  # alone, there is nothing to end
    assert [results[0].text, results[2].text] == ["uno", "dos"]
    assert _texts(tmp_path / "a.db") == ["uno", "dos"]
    await store.close()


async def test_nobody_is_answered_before_the_commit(tmp_path: Path) -> None:
    """Each caller, once answered, finds its turn from another connection: on disk."""
    store, conversation = await _open(tmp_path)
    seen: list[bool] = []

    async def add_and_look(i: int) -> None:
        turn = await store.add_turn(conversation, "user", f"m{i}", NOW)
        with sqlite3.connect(tmp_path / "a.db") as other:
            found = other.execute("SELECT 1 FROM turns WHERE id = ?", (turn.id,)).fetchall()
        seen.append(bool(found))

    await _queued_behind_a_busy_thread(store, [lambda i=i: add_and_look(i) for i in range(10)])
    assert seen == [True] * 10
    await store.close()


async def test_a_caller_cancelled_while_queued_writes_nothing(tmp_path: Path) -> None:
    store, conversation = await _open(tmp_path)
    async with _thread_held(store):
        kept = asyncio.create_task(store.add_turn(conversation, "user", "queda", NOW))
        dropped = asyncio.create_task(store.add_turn(conversation, "user", "cancelado", NOW))
        await asyncio.sleep(0)
        dropped.cancel()
        await asyncio.sleep(0)
    await kept
    with pytest.raises(asyncio.CancelledError):
        await dropped
    assert _texts(tmp_path / "a.db") == ["queda"]
    await store.close()


async def test_a_closed_store_refuses_work_instead_of_hanging(tmp_path: Path) -> None:
    store, conversation = await _open(tmp_path)
    await store.close()
    with pytest.raises(RuntimeError, match="closed"):
        await asyncio.wait_for(store.add_turn(conversation, "user", "¿hola?", NOW), 5)


async def test_other_connections_writes_are_counted_and_ours_are_not(tmp_path: Path) -> None:
    store, conversation = await _open(tmp_path)
    await store.add_turn(conversation, "user", "nuestro", NOW)
    await store.add_turn(conversation, "user", "nuestro otra vez", NOW)
    assert store.external_changes == 0
    with sqlite3.connect(tmp_path / "a.db") as other:
        other.execute("UPDATE users SET display_name = 'Ana María'")
    assert store.external_changes == 0  # seen at the next job, before it runs
    await store.count_turns(conversation.thread)
    assert store.external_changes == 1
    await store.count_turns(conversation.thread)
    assert store.external_changes == 1
    await store.close()
