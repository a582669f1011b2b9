"""Forget at the store: the purge recorded with the delete, resumed after a crash, checked
against readers; its cost on the user's path; background writes that land after it."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memory.models import Fact, Summary, SummaryFields, Thread, UsageRecord
from memory.store.sqlite import SqliteStore
from memory.store.sqlite.base import configure
from tests.conftest import REPO
from tests.patience import PATIENCE

pytestmark = pytest.mark.sqlite_only  # the SQLite file, its thread and its index themselves

NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
CHARACTER = "detective_bilbao"
CANARY = "zorionakcanary"


def canary_bytes(path: Path, canary: str = CANARY) -> int:
    """How many times the canary occurs in the database file and its WAL, byte for byte."""
    total = 0
    for file in (path, Path(f"{path}-wal")):
        if file.exists():
            total += file.read_bytes().lower().count(canary.encode())
    return total


async def talk(store: SqliteStore, name: str, texts: list[str]) -> Thread:
    user = await store.upsert_user("telegram", name, name.title(), NOW)
    thread = Thread(user.id, CHARACTER, "dm")
    conversation = await store.start_conversation(thread, NOW)
    for text in texts:
        await store.add_turn(conversation, "user", text, NOW)
        await store.add_turn(conversation, "assistant", f"Entendido: {text}", NOW)
    return thread


def index_blocks(path: Path) -> set[tuple[int, bytes]]:
    """The pages of the index's segments (ids 1 and 10 are its totals and its table of
    segments, rewritten by every change)."""
    with sqlite3.connect(path) as raw:
        return set(raw.execute("SELECT id, block FROM turn_search_data WHERE id > 10").fetchall())


async def test_the_store_sets_secure_delete_itself() -> None:
    """Some SQLite builds have secure_delete on by default (this one does): the store must not
    rely on that, so the test starts from a connection that has it off."""
    con = sqlite3.connect(":memory:")
    con.execute("PRAGMA secure_delete = OFF")
    assert con.execute("PRAGMA secure_delete").fetchone()[0] == 0
    configure(con)
    assert con.execute("PRAGMA secure_delete").fetchone()[0] == 1


async def test_a_forget_with_a_reader_holding_a_snapshot_ends_with_zero_bytes(
    tmp_path: Path,
) -> None:
    store = await SqliteStore.open(tmp_path / "c.db")
    store.purge_retry_seconds = 0.01
    try:
        ana = await talk(store, "ana", [f"Mi clave es {CANARY}", "Vivo en Getxo"])
        bea = await talk(store, "bea", ["Me gusta el txakoli"])
        reader = sqlite3.connect(tmp_path / "c.db", isolation_level=None)
        reader.execute("BEGIN")
        assert reader.execute("SELECT count(*) FROM turns").fetchone()[0] == 6  # a snapshot
        await store.forget(ana.user_id, CHARACTER)
        # The checkpoint cannot complete past the reader: the purge stays owed, and says so.
        assert not await store.purge_settled(timeout=0.5)
        assert await store.pending_purges() == 1
        assert canary_bytes(store.path) > 0
        reader.execute("COMMIT")
        reader.close()
        assert await store.purge_settled(timeout=PATIENCE)  # retried once the reader has gone
        assert canary_bytes(store.path) == 0
        assert await store.count_turns(bea) == 2
    finally:
        await store.close()


async def test_the_users_path_touches_only_what_was_deleted(tmp_path: Path) -> None:
    """The forget itself deletes the user's index rows (the trigger's FTS5 'delete'); it no
    longer merges or rebuilds everyone's index: every block of it is as it was."""
    store = await SqliteStore.open(tmp_path / "c.db")
    try:
        await talk(
            store, "bea", [f"Bea dice la frase numero {i} sobre el monte" for i in range(300)]
        )
        ana = await talk(store, "ana", [f"Mi clave es {CANARY}"])
        await store._execute("INSERT INTO turn_search (turn_search) VALUES ('optimize')")
        before = index_blocks(store.path)
        await store.forget(ana.user_id, CHARACTER)
        after = index_blocks(store.path)  # before the background purge has run a step
        assert before <= after, "the user's path rewrote index blocks it did not delete"
        assert len(after - before) <= 4  # the delete markers of two turns: one small segment
        assert await store.purge_settled(timeout=PATIENCE)
        assert canary_bytes(store.path) == 0
        bea = Thread(1, CHARACTER, "dm")
        assert await store.count_turns(bea) == 600
    finally:
        await store.close()


async def test_a_rejection_without_a_conversation_is_forgotten_too(tmp_path: Path) -> None:
    """memory_rejections rows tied to a conversation go with it (cascade); this one is tied to
    none, so only forget's own step deletes it."""
    store = await SqliteStore.open(tmp_path / "c.db")
    try:
        ana = await talk(store, "ana", ["Hola"])
        await store.record_rejection(ana, None, f"refused {CANARY}", NOW)
        assert await store.count_rejections(ana.user_id) == 1
        await store.forget(ana.user_id, CHARACTER)
        assert await store.count_rejections(ana.user_id) == 0
    finally:
        await store.close()


async def test_background_writes_after_a_forget_write_nothing(tmp_path: Path) -> None:
    """A summary, facts or a usage row computed before the forget and written after it (what a
    compaction or an extraction that raced past the engine's lock would do) are not written."""
    store = await SqliteStore.open(tmp_path / "c.db")
    try:
        ana = await talk(store, "ana", [f"Mi clave es {CANARY}"])
        conversation = await store.open_conversation(ana)
        assert conversation is not None
        await store.forget(ana.user_id, CHARACTER)
        fields = SummaryFields(canon=(f"La clave es {CANARY}",))
        summary = Summary(fields, frozenset(), 1, NOW)
        assert await store.save_summary(ana, summary, conversation.id) is None
        fact = Fact(
            0, ana.user_id, CHARACTER, "semantic", "secret", CANARY, "stated", "dm", (1,),
            "never", None, NOW, NOW, None,
        )  # fmt: skip
        assert not await store.apply_fact_changes([fact], [], [], [], conversation.id, NOW)
        usage = UsageRecord(
            kind="extraction",
            model="m",
            ok=False,
            user_id=ana.user_id,
            character_id=CHARACTER,
            conversation_id=conversation.id,
            error=f"echo {CANARY}",
        )
        await store.record_usage(usage, NOW)
        assert await store.latest_summary(ana) is None
        assert await store.facts(ana.user_id, CHARACTER) == []
        assert await store.usage_records(ana.user_id) == []
        # The same writes for a conversation that exists are stored (the condition is no wall).
        bea = await talk(store, "bea", ["Hola"])
        live = await store.open_conversation(bea)
        assert live is not None
        assert await store.save_summary(bea, summary, live.id) is not None
        await store.record_usage(
            UsageRecord("extraction", "m", True, bea.user_id, CHARACTER, live.id), NOW
        )
        assert len(await store.usage_records(bea.user_id)) == 1
    finally:
        await store.close()


CHILD = textwrap.dedent(
    """
    import asyncio, sqlite3, sys
    from datetime import UTC, datetime
    from pathlib import Path
    from memory.models import Thread
    from memory.store.sqlite import SqliteStore

    async def main(path: Path) -> None:
        store = await SqliteStore.open(path)
        now = datetime(2026, 11, 1, tzinfo=UTC)
        user = await store.upsert_user("telegram", "ana", "Ana", now)
        thread = Thread(user.id, "detective_bilbao", "dm")
        conversation = await store.start_conversation(thread, now)
        for text in ("Mi clave es {canary}", "Vivo en Getxo"):
            await store.add_turn(conversation, "user", text, now)
        # A reader's snapshot (a backup, an export) keeps the purge's checkpoint from ending.
        reader = sqlite3.connect(path, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM turns").fetchall()
        await store.forget(user.id, "detective_bilbao")
        print("committed", await store.pending_purges(), flush=True)
        await asyncio.sleep(60)

    asyncio.run(main(Path(sys.argv[1])))
    """
).replace("{canary}", CANARY)


async def test_a_kill_between_the_delete_and_the_purge_is_finished_at_the_next_start(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.db"
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CHILD, str(path), cwd=REPO, stdout=asyncio.subprocess.PIPE
    )
    assert child.stdout is not None
    line = await asyncio.wait_for(child.stdout.readline(), PATIENCE)
    assert line.split() == [b"committed", b"1"]  # deleted, the purge owed and not done
    child.send_signal(signal.SIGKILL)
    await child.wait()
    assert canary_bytes(path) > 0  # what the kill left behind
    store = await SqliteStore.open(path)  # resumes the owed purge, in the background
    try:
        assert await store.purge_settled(timeout=PATIENCE)
        assert canary_bytes(path) == 0
        assert await store.pending_purges() == 0
    finally:
        await store.close()
