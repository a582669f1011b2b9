"""`companion db copy` (issue 15, item 5): a deployment moves from SQLite to PostgreSQL and back
with ids, citations and fact history intact, verified by row counts and checksums."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.cli import main
from memory.journey.model import Journey
from memory.models import (
    DeadLetter,
    Fact,
    NewCanonProposal,
    ReplySources,
    Speaker,
    Summary,
    SummaryFields,
    Thread,
    UsageRecord,
)
from memory.search.terms import query_terms
from memory.store import MemoryStore, open_store
from memory.store.access import AccessRule
from memory.store.copy import COPY_TABLES, CopyRefused, copy_deployment
from memory.store.sqlite import SqliteStore
from tests import pg_fixtures

pytestmark = pg_fixtures.needs_postgres

NOW = datetime(2026, 11, 2, 18, 30, tzinfo=UTC)
DETECTIVE = "detective_bilbao"


def _fact(thread: Thread, key: str, value: str, evidence: tuple[int, ...]) -> Fact:
    return Fact(
        id=0, user_id=thread.user_id, character_id=thread.character_id, kind="semantic",
        key=key, value=value, origin="stated", scope=thread.scope, evidence=evidence,
        lifetime="never", event_date=None, created_at=NOW, confirmed_at=NOW, expires_at=None,
    )  # fmt: skip


async def populate(store: MemoryStore) -> Thread:
    """A deployment with a row in every table: turns, a reply with sources and usage, a summary
    citing turns, a fact changed once (history), a rejection, choices and a channel binding."""
    for name in ("ana", "bea"):
        user = await store.upsert_user("telegram", name, name.title(), NOW)
        thread = Thread(user.id, DETECTIVE, "dm")
        conversation = await store.start_conversation(thread, NOW)
        turns = [await store.add_turn(conversation, "user", f"Vivo en Getxo, {name}", NOW)]
        sources = ReplySources(0, (), None, (turns[0].id,), (), NOW)
        usage = UsageRecord("reply", "m", True, user_id=user.id, character_id=DETECTIVE,
                            conversation_id=conversation.id, latency_ms=12.0)  # fmt: skip
        turns.append(await store.add_reply(conversation, "Getxo, qué bonito.", NOW, sources, usage))
        fields = SummaryFields(established_facts=(f"Vive en Getxo {{cite:{turns[0].id}}}",))
        summary = Summary(fields, frozenset({turns[0].id}), turns[-1].id, NOW)
        await store.save_summary(thread, summary, conversation.id)
        await store.apply_fact_changes(
            [_fact(thread, "city", "Getxo", (turns[0].id,))], [], [], [], None, NOW
        )
        [old] = await store.facts(user.id, DETECTIVE)
        moved = replace(old, value="Bilbao", confirmed_at=NOW + timedelta(days=1))
        await store.apply_fact_changes([], [(old, moved, "moved")], [], [], None, NOW)
        await store.record_rejection(thread, conversation.id, "instruction", NOW)
        await store.choose_character(user.id, "dm", DETECTIVE, NOW)
        await store.set_review_mode(user.id, True)
        await store.set_user_timezone(user.id, "Europe/Madrid")
        await store.set_followups(user.id, DETECTIVE, True)
        await store.record_followup(user.id, DETECTIVE, moved.id, turns[-1].id, NOW)
        await store.end_conversation(conversation.id, "idle", NOW + timedelta(hours=1))
        story = (f"{name.title()} contó que vivía en Getxo {{cite:{turns[0].id}}}.",)
        await store.save_journey(Journey(user.id, DETECTIVE, story, None, NOW), conversation.id,
                                 None, NOW)  # fmt: skip
        payload = json.dumps({"update_id": len(name), "message": {"text": f"{name}\x00"}})
        letter = DeadLetter("telegram", name, name, payload, "DataError: refused", NOW)
        await store.record_dead_letter(letter)
        # Stopped while off the record: the first message after the move is refused.
        await store.set_off_record(Thread(user.id, DETECTIVE, "group:telegram:-100"), NOW)
    await store.bind_channel("telegram", "-100", DETECTIVE, "admin", NOW)
    # A scene: its members, and a line of bea's in the detective's copy (migration 0022).
    await store.add_scene_member("telegram", "-100", DETECTIVE, "admin", NOW)
    owner = await store.upsert_user("telegram", "scene:-100", "", NOW)
    witness = Thread(owner.id, DETECTIVE, "scene:telegram:-100")
    scene = await store.start_conversation(witness, NOW)
    said = Speaker("Bea", person_id=thread.user_id)
    await store.add_user_turn(scene, "Hola a todos", NOW, "7", "telegram:-100:7", said)
    # Budget counters (migration 0024): a day's spend, and a reservation still held.
    counters = [("person:telegram:ana", "d:2026-11-02", 1.0), ("global", "d:2026-11-02", 5.0)]
    await store.reserve_budget(counters, 0.25)
    await store.settle_budget([(s, p) for s, p, _ in counters], 0.25, 0.125)
    await store.reserve_budget(counters, 0.5)
    # Who may talk (migration 0023): a rule, a switch, a refused person told once.
    await store.set_access_rule(AccessRule("telegram", "user", "666", "block"), True, "cli", NOW)
    await store.set_access_flag("dms", False)
    await store.claim_access_notice("telegram", "666", NOW, NOW - timedelta(days=1))
    # A group marked for adults (migration 0025).
    await store.mark_chat_mature("telegram", "-100", True, "admin", NOW)
    # A canon proposal resting on the detective's reply in the scene (migration 0027).
    answer = await store.add_turn(scene, "assistant", "Mi barco se llama Gaviota", NOW)
    await store.add_canon_proposals(
        DETECTIVE, [NewCanonProposal("Su barco se llama Gaviota.", (answer.id,))], NOW
    )
    await store.save_canon_run(scene.id, DETECTIVE, [], "nothing", NOW)
    # A Discord channel's server, its budget community (migration 0028).
    await store.record_channel_community("discord:55", "discord:900")
    return thread


async def all_rows(store: MemoryStore) -> dict[str, list[dict[str, Any]]]:
    return {table: await store.read_rows(table, 0, 10_000) for table in COPY_TABLES}


async def test_sqlite_to_postgres_and_back_keeps_every_row(
    tmp_path: Path, pg_base: str, capsys: pytest.CaptureFixture[str]
) -> None:
    source_path = tmp_path / "source.db"
    source = await SqliteStore.open(source_path)
    bea = await populate(source)
    before = await all_rows(source)
    await source.close()
    assert all(before[table] for table in COPY_TABLES), "every table has a row to move"

    postgres = await pg_fixtures.fresh_database(pg_base)
    cli = ["db", "copy", "--from", str(source_path), "--to", postgres]
    assert await asyncio.to_thread(main, cli) == 0  # the CLI runs its own loop
    assert "counts and checksums verified" in capsys.readouterr().out
    back_path = tmp_path / "back.db"
    cli = ["db", "copy", "--from", postgres, "--to", str(back_path)]
    assert await asyncio.to_thread(main, cli) == 0

    for target in (postgres, back_path):
        store = await open_store(target)
        try:
            assert await all_rows(store) == before
            [fact] = await store.facts(bea.user_id, DETECTIVE)
            [version] = await store.fact_history(bea.user_id, fact.id)
            assert (fact.value, version.value) == ("Bilbao", "Getxo")
            summary = await store.latest_summary(bea)
            assert summary is not None
            [cited] = await store.turns_by_ids(bea.user_id, DETECTIVE, sorted(summary.cited_ids))
            assert cited.text == "Vivo en Getxo, bea"  # the citation still names its turn
            terms = query_terms("Getxo")
            assert await store.search_term_counts(bea.user_id, DETECTIVE, "dm", terms) == [2]
            conversation = await store.start_conversation(bea, NOW)
            new = await store.add_turn(conversation, "user", "nuevo", NOW)
            assert new.id > max(row["id"] for row in before["turns"])  # ids never reused
        finally:
            await store.close()


async def test_a_target_with_rows_is_refused_and_left_alone(tmp_path: Path, pg_base: str) -> None:
    source = await SqliteStore.open(tmp_path / "source.db")
    target = await open_store(await pg_fixtures.fresh_database(pg_base))
    try:
        await populate(source)
        await target.upsert_user("discord", "9", "Zoe", NOW)
        with pytest.raises(CopyRefused, match="already holds rows in users"):
            await copy_deployment(source, target)
        assert len(await target.read_rows("users", 0, 100)) == 1
    finally:
        await source.close()
        await target.close()


def test_the_cli_refuses_a_missing_source_and_an_existing_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    existing = tmp_path / "there.db"
    existing.write_bytes(b"")
    assert main(["db", "copy", "--from", str(tmp_path / "none.db"), "--to", "x.db"]) == 2
    assert "no SQLite database at" in capsys.readouterr().err
    assert main(["db", "copy", "--from", str(existing), "--to", str(existing)]) == 2
    assert "already exists" in capsys.readouterr().err


async def test_every_table_of_either_schema_is_copied(tmp_path: Path, pg_url: str) -> None:
    """A table added by a later migration cannot be forgotten by the copy."""
    store = await SqliteStore.open(tmp_path / "schema.db")
    await store.close()
    with sqlite3.connect(tmp_path / "schema.db") as raw:
        names = {row[0] for row in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    internal = {"schema_migrations", "pending_purges", "sqlite_sequence"}
    assert {n for n in names if not n.startswith("turn_search")} - internal == set(COPY_TABLES)
    import asyncpg

    connection = await asyncpg.connect(pg_url)
    try:
        rows = await connection.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    finally:
        await connection.close()
    # The workers' inbox holds messages in flight, not memory, and their claims and rate
    # counts last seconds: a deployment is moved stopped.
    in_flight = {"inbox", "inbox_pairs", "outbox", "job_claims", "rate_limits"}
    assert {row[0] for row in rows} - internal - in_flight == set(COPY_TABLES)
