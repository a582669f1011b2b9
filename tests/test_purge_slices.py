"""The purge's merge of the search index is done by the purge's own slices, never inside a
user's write, and a slow slice makes the next one smaller (memory/store/sqlite/fts_index.py,
memory/store/sqlite/base.py): what bench/purge_traffic.py --writers 2 --gap-ms 0:3 measures."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memory.models import Conversation
from memory.store.sqlite import SqliteStore
from memory.store.sqlite.base import PURGE_STEP_PAGES, PURGE_STEP_PAGES_MIN
from memory.store.sqlite.fts_index import AUTOMERGE_DEFAULT
from tests.test_forget_purge import canary_bytes
from tests.test_fts_purge import CANARY, CHARACTER, NOW, fts_problem, victim, writer

pytestmark = pytest.mark.sqlite_only  # the SQLite file and its FTS5 index themselves

# Enough distinct words that merging the index takes many slices of PURGE_STEP_PAGES_MIN pages.
BULK_TURNS = 20000
BULK = (
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)"
    " INSERT INTO turns (conversation_id, user_id, character_id, scope, role, text, created_at)"
    " SELECT ?, ?, ?, 'dm', 'user', 'palabra' || i || ' otra' || (i * 7) || ' mas' || (i * 13)"
    " || ' monte' || (i % 97) || ' rio' || (i * 31), ? FROM n"
)


def automerge(path: Path) -> int:
    """FTS5's automerge setting as stored in the file (absent: FTS5's default)."""
    with sqlite3.connect(path) as raw:
        row = raw.execute("SELECT v FROM turn_search_config WHERE k = 'automerge'").fetchone()
    return int(row[0]) if row else AUTOMERGE_DEFAULT


async def crowded_store(tmp_path: Path) -> tuple[SqliteStore, Conversation]:
    """Bea's turns, a bulk of other words, and a victim whose forget is recorded (its purge
    left to the test's own steps)."""
    store = await SqliteStore.open(tmp_path / "c.db")
    _, conversation = await writer(store)
    user, character, now = conversation.thread.user_id, CHARACTER, NOW.isoformat()
    await store._execute(BULK, (BULK_TURNS, conversation.id, user, character, now))
    await store._forget_rows(await victim(store, 0), CHARACTER)
    return store, conversation


async def test_the_users_writes_leave_the_purges_merge_to_the_purge(tmp_path: Path) -> None:
    store, conversation = await crowded_store(tmp_path)
    store.purge_step_pages = 1  # the merge spans many slices, with writes between them
    try:
        assert await store._purge_step() == "merging"
        # While the merge is under way a write does none of it (automerge off)...
        assert automerge(store.path) == 0
        steps = 1
        while (step := await store._purge_step()) == "merging":
            await store.add_turn(conversation, "user", f"Bea escribe {steps}", NOW)
            assert automerge(store.path) == 0
            steps += 1
        assert step == "cleared" and steps > 10
        # ...and once it is complete, writes merge small segments again as they go.
        assert automerge(store.path) == AUTOMERGE_DEFAULT
        assert await store._purge_step() == "done"
        assert canary_bytes(store.path, CANARY) == 0
        assert fts_problem(store.path) is None
    finally:
        await store.close()


async def test_a_slow_slice_makes_the_next_smaller_and_a_quick_one_larger(
    tmp_path: Path,
) -> None:
    store, _ = await crowded_store(tmp_path)
    try:
        store.purge_step_seconds = 0.0  # every slice is slower than wanted: they shrink
        assert await store._purge_step() == "merging"
        sizes = [store._step_pages]
        while sizes[-1] > PURGE_STEP_PAGES_MIN and await store._purge_step() == "merging":
            sizes.append(store._step_pages)
        assert sizes[-1] == PURGE_STEP_PAGES_MIN, sizes
        assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) > 1, sizes
        store.purge_step_seconds = 3600.0  # every slice is quick: they grow back to the most
        while await store._purge_step() == "merging" and store._step_pages < PURGE_STEP_PAGES:
            pass
        assert store._step_pages == PURGE_STEP_PAGES
        while await store._purge_step() != "done":
            pass
        assert canary_bytes(store.path, CANARY) == 0
    finally:
        await store.close()
