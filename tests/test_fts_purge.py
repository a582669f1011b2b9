"""The purge's merging of the search index under another user's writes: thousands of its real
steps, each followed by a real turn of another user, leave an index FTS5 itself finds sound,
and the forgotten users' words gone from the file and the WAL (notes/fts.md)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memory.models import Conversation, Thread
from memory.search.terms import Term
from memory.store.sqlite import SqliteStore
from tests.test_forget_purge import canary_bytes

pytestmark = pytest.mark.sqlite_only  # the SQLite file and its FTS5 index themselves

NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
CHARACTER = "detective_bilbao"
CANARY = "zorionakcanary"
STEPS = 5000
# Each purge merges the whole index once: a forget every step would make the test quadratic.
FORGET_EVERY = 20


def fts_problem(path: Path) -> str | None:
    """FTS5's integrity-check of the file's index, from a connection of its own."""
    with sqlite3.connect(path) as raw:
        try:
            # Contentless: there is no content to compare, rank 0 and 1 check the same.
            raw.execute("INSERT INTO turn_search (turn_search, rank) VALUES ('integrity-check', 0)")
        except sqlite3.DatabaseError as error:
            return str(error)
    return None


async def victim(store: SqliteStore, n: int) -> int:
    """A user who says two things with a canary word, to be forgotten."""
    user = await store.upsert_user("telegram", f"victim{n}", f"Victim {n}", NOW)
    conversation = await store.start_conversation(Thread(user.id, CHARACTER, "dm"), NOW)
    await store.add_turn(conversation, "user", f"Mi clave es {CANARY}{n}", NOW)
    await store.add_turn(conversation, "assistant", f"Guardo {CANARY}{n} y nada mas", NOW)
    return user.id


async def writer(store: SqliteStore) -> tuple[Thread, Conversation]:
    user = await store.upsert_user("telegram", "bea", "Bea", NOW)
    thread = Thread(user.id, CHARACTER, "dm")
    conversation = await store.start_conversation(thread, NOW)
    for i in range(60):
        await store.add_turn(conversation, "user", f"Bea habla del monte numero {i}", NOW)
    return thread, conversation


async def run_purge_between_writes(
    store: SqliteStore, conversation: Conversation, steps: int = STEPS, every: int = FORGET_EVERY
) -> int:
    """`steps` purge steps, a turn of Bea's after each; every `every` steps a new user is
    forgotten if the last purge is done. The number of forgets."""
    forgets = 0
    for step in range(steps):
        result = await store._purge_step()
        if result == "cleared":
            # The round covered the last forget alone: its words are gone now, traffic or not.
            assert canary_bytes(store.path, f"{CANARY}{forgets - 1}") == 0, step
        if result == "done" and step % every == 0:
            # The delete and its record, without the background runner: the steps are ours.
            await store._forget_rows(await victim(store, forgets), CHARACTER)
            forgets += 1
        await store.add_turn(conversation, "user", f"Bea sigue con la frase {step}", NOW)
    for _ in range(steps):  # the last purge, with no writes between its steps
        if await store._purge_step() == "done":
            break
    return forgets


async def test_thousands_of_purge_steps_between_writes_leave_a_sound_index(
    tmp_path: Path,
) -> None:
    """Until now the purge's every step was a negative 'merge': with a write between two
    steps it regrouped the index's levels each time, never finished, and after about 1000
    steps SQLite 3.40 read the index as "database disk image is malformed"."""
    store = await SqliteStore.open(tmp_path / "c.db")
    store.purge_step_pages = 1  # so that each merge spans several steps, and writes between
    try:
        thread, conversation = await writer(store)
        forgets = await run_purge_between_writes(store, conversation)
        assert forgets > 50  # the rounds end under traffic, and start again
        assert await store.pending_purges() == 0
        assert fts_problem(store.path) is None
        assert canary_bytes(store.path) == 0
        # Bea's turns are all still found: 60 first, then one for each step.
        [count] = await store.search_term_counts(
            thread.user_id, CHARACTER, "dm", [Term("bea", "bea", False)]
        )
        assert count == 60 + STEPS
    finally:
        await store.close()


async def test_an_index_past_its_level_budget_is_rebuilt_whole(tmp_path: Path) -> None:
    """SQLite 3.40 never drops an empty level of an FTS5 index, and each purge's merge under
    writes adds up to two: past the budget the purge rebuilds the index from the turns."""
    from memory.store.sqlite import fts_index  # here: the file's first test predates it

    store = await SqliteStore.open(tmp_path / "c.db")
    store.purge_step_pages = 1
    store.fts_level_budget = 12
    try:
        thread, conversation = await writer(store)
        widest = 0
        for _ in range(30):  # about 40 rounds: 80 levels without the rebuilds
            await run_purge_between_writes(store, conversation, steps=10, every=2)
            with sqlite3.connect(store.path) as raw:
                shape = fts_index.shape(raw)
            assert shape is not None
            widest = max(widest, len(shape.levels))
        assert widest <= store.fts_level_budget + 2, "levels beyond the budget"
        assert fts_problem(store.path) is None
        assert canary_bytes(store.path) == 0
        [count] = await store.search_term_counts(
            thread.user_id, CHARACTER, "dm", [Term("bea", "bea", False)]
        )
        assert count == 60 + 30 * 10
    finally:
        await store.close()
