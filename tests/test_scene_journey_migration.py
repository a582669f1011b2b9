"""Migration 0026 (the story of each scene): a scene conversation that ended before it, and was
not yet marked, is not chronicled after the fact (an upgrade calls the model for no past
conversation); one that ends afterwards is owed."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory.models import Thread
from memory.scene.engine import scene_owner_id, scene_scope
from memory.store.sqlite import SqliteStore, available_migrations

NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


async def test_an_upgrade_marks_the_scene_conversations_ended_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    every = available_migrations()
    before = [m for m in every if m[0] < 26]
    monkeypatch.setattr("memory.store.sqlite.base.available_migrations", lambda: before)
    store = await SqliteStore.open(tmp_path / "a.db")
    owner = await store.upsert_user("telegram", scene_owner_id("-100"), "", NOW)
    thread = Thread(owner.id, "detective_bilbao", scene_scope("telegram", "-100"))
    old = await store.start_conversation(thread, NOW)
    await store.end_conversation(old.id, "idle", NOW)
    await store.close()
    monkeypatch.setattr("memory.store.sqlite.base.available_migrations", lambda: every)
    store = await SqliteStore.open(tmp_path / "a.db")
    try:
        assert await store.conversations_pending_scene_journey() == []
        later = await store.start_conversation(thread, NOW + timedelta(hours=3))
        await store.end_conversation(later.id, "idle", NOW + timedelta(hours=4))
        assert [c.id for c in await store.conversations_pending_scene_journey()] == [later.id]
    finally:
        await store.close()
    with sqlite3.connect(tmp_path / "a.db") as raw:
        runs = raw.execute("SELECT conversation_id, status FROM journey_runs").fetchall()
    assert runs == [(old.id, "predates")]
