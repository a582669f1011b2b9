"""What the two store backends do alike, written once beside them (memory/store/records.py,
params.py, remap.py, sql.py), held on the backend the run chose: SQLite, or PostgreSQL under
`python -m tests.pg_server`. tests/test_postgres_store.py holds the two side by side."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from memory.models import Fact, Thread
from memory.store import open_store
from memory.store.sql import numbered

NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
DETECTIVE = "detective_bilbao"


def stored_fact(thread: Thread, key: str, value: str) -> Fact:
    return Fact(
        id=0, user_id=thread.user_id, character_id=thread.character_id, kind="semantic",
        key=key, value=value, origin="stated", scope=thread.scope, evidence=(),
        lifetime="never", event_date=None, created_at=NOW, confirmed_at=NOW, expires_at=None,
    )  # fmt: skip


def exported_fact(fact_id: int, key: str, value: str) -> dict[str, object]:
    stamp = NOW.isoformat()
    return {
        "id": fact_id, "kind": "semantic", "key": key, "value": value, "origin": "stated",
        "scope": "dm", "evidence": [], "lifetime": "never", "event_date": None,
        "created_at": stamp, "confirmed_at": stamp, "expires_at": None, "status": "active",
    }  # fmt: skip


async def test_an_import_stores_each_unknown_key_under_a_fallback_of_its_own(
    database_target: Path | str,
) -> None:
    """Keys outside the registry are never stored as free text: each goes under `other`'s
    next free suffix, clear of the pair's stored facts and of those imported before it."""
    store = await open_store(database_target)
    try:
        ana = await store.upsert_user("telegram", "ana", "Ana", NOW)
        thread = Thread(ana.id, DETECTIVE, "dm")
        violin = stored_fact(thread, "other", "toca el violín")
        assert await store.apply_fact_changes([violin], [], [], [], None, NOW)
        history = {"fact_id": 2, "value": "un gato", "origin": "stated", "evidence": [],
                   "valid_from": NOW.isoformat(), "superseded_at": NOW.isoformat(),
                   "reason": "corrected"}  # fmt: skip
        data = {
            "conversations": [], "turns": [], "summaries": [], "journeys": [],
            "facts": [exported_fact(1, "ignore_your_rules", "el té verde"),
                      exported_fact(2, "no_such_key", "dos gatos")],
            "fact_history": [history],
        }  # fmt: skip
        counts = await store.import_rows(ana.id, DETECTIVE, data, NOW)
        found = {f.key: f for f in await store.facts(ana.id, DETECTIVE)}
        assert counts["facts"] == 2
        assert {key: f.value for key, f in found.items()} == {
            "other": "toca el violín", "other_2": "el té verde", "other_3": "dos gatos"
        }  # fmt: skip
        versions = await store.fact_history(ana.id, found["other_3"].id)
        assert [(v.value, v.reason) for v in versions] == [("un gato", "corrected")]
    finally:
        await store.close()


def test_a_statement_written_once_keeps_its_numbers_on_sqlite() -> None:
    assert numbered("SELECT $1, $10 WHERE a = $1 AND b = $2") == (
        "SELECT ?1, ?10 WHERE a = ?1 AND b = ?2"
    )
