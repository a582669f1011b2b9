"""`companion db check`: SQLite's check of the file and FTS5's of the search index, what it
tells a person when the index is damaged, and `--repair`, which rebuilds it from the turns."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.cli import main
from memory.models import Thread
from memory.search.terms import Term
from memory.store.sqlite import SqliteStore

pytestmark = pytest.mark.sqlite_only  # breaks the SQLite file's index on purpose

NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
CHARACTER = "detective_bilbao"


async def filled(path: Path) -> Thread:
    store = await SqliteStore.open(path)
    try:
        user = await store.upsert_user("telegram", "bea", "Bea", NOW)
        thread = Thread(user.id, CHARACTER, "dm")
        conversation = await store.start_conversation(thread, NOW)
        for i in range(200):
            await store.add_turn(conversation, "user", f"Bea habla del monte numero {i}", NOW)
    finally:
        await store.close()
    return thread


async def found(path: Path, thread: Thread) -> int:
    store = await SqliteStore.open(path)
    try:
        [count] = await store.search_term_counts(
            thread.user_id, CHARACTER, "dm", [Term("monte", "monte", False)]
        )
    finally:
        await store.close()
    return count


def test_a_sound_database_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.db"
    asyncio.run(filled(path))  # main() runs its own loop: these tests are synchronous
    assert main(["db", "check", "--database", str(path)]) == 0
    assert f"{path}: ok" in capsys.readouterr().out


def test_a_damaged_search_index_is_reported_with_the_repair_and_repaired(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.db"
    thread = asyncio.run(filled(path))
    with sqlite3.connect(path) as raw:
        # The pages of the index's segments (1 and 10 are its totals and its structure):
        # PRAGMA integrity_check cannot see this, only FTS5's own check.
        raw.execute("DELETE FROM turn_search_data WHERE id > 10")
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert main(["db", "check", "--database", str(path)]) == 1
    out = capsys.readouterr().out
    assert "PROBLEM: search index:" in out
    assert "companion db check --repair" in out
    assert main(["db", "check", "--database", str(path), "--repair"]) == 0
    out = capsys.readouterr().out
    assert "search index rebuilt from 200 turn(s)" in out
    assert f"{path}: ok" in out
    assert asyncio.run(found(path, thread)) == 200


def test_a_missing_file_is_refused_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["db", "check", "--database", str(tmp_path / "none.db")]) == 2
    assert "no SQLite database at" in capsys.readouterr().err
    assert not (tmp_path / "none.db").exists()
