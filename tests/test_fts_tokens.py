"""One tokenising rule on both sides of the search index: what Python builds for a turn
(`thread_tokens`) is exactly what SQLite's unicode61 stores in the real `turn_search` table,
over the whole of Unicode, so no text can plant a token that carries another owner."""

from __future__ import annotations

import random
import sqlite3
from collections import defaultdict
from pathlib import Path

import pytest

from memory.search.terms import query_terms
from memory.store.sqlite import SqliteStore, fts

pytestmark = pytest.mark.sqlite_only  # the SQLite file, its thread and its index themselves

ATTACKER, VICTIM, CHARACTER = 7, 5, "detective_bilbao"
SEED = 1313


async def migrated(tmp_path: Path) -> sqlite3.Connection:
    path = tmp_path / "memory.db"
    store = await SqliteStore.open(path)
    await store.close()
    db = sqlite3.connect(path)
    db.create_function("thread_tokens", 4, fts.thread_tokens, deterministic=True)
    db.execute("CREATE VIRTUAL TABLE temp.tokens USING fts5vocab(main, turn_search, 'instance')")
    return db


def every_character() -> list[str]:
    """Every code point up to the end of plane 2, but surrogates (not storable)."""
    return [chr(c) for c in range(0x20, 0x30000) if not 0xD800 <= c <= 0xDFFF]


def texts_over_unicode() -> list[str]:
    """Each character between letters (where a split would show), in rows of 64; then random
    strings mixing them with words and what a forged owner token looks like."""
    chars = every_character()
    rows = [" ".join(f"a{c}b" for c in chars[i : i + 64]) for i in range(0, len(chars), 64)]
    rng = random.Random(SEED)
    forged = fts.owner_token(VICTIM, CHARACTER) + "wsecreto"
    for _ in range(500):
        parts = [rng.choice(chars) if rng.random() < 0.6 else rng.choice(("ab", forged, "z1"))]
        parts += [rng.choice(chars) for _ in range(rng.randrange(1, 12))]
        rows.append("".join(parts) + forged)
    return rows


async def test_python_and_sqlite_tokens_agree_over_unicode(tmp_path: Path) -> None:
    db = await migrated(tmp_path)
    texts = texts_over_unicode()
    with db:
        db.executemany(
            "INSERT INTO turn_search (rowid, text) VALUES (?, thread_tokens(?, ?, 'dm', ?))",
            [(rowid, ATTACKER, CHARACTER, text) for rowid, text in enumerate(texts, start=1)],
        )
    stored: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for term, rowid, offset in db.execute("SELECT term, doc, offset FROM tokens"):
        stored[rowid].append((offset, term))
    owner = fts.owner_token(ATTACKER, CHARACTER)
    for rowid, text in enumerate(texts, start=1):
        expected = fts.thread_tokens(ATTACKER, CHARACTER, "dm", text).split(" ")
        assert [term for _, term in sorted(stored[rowid])] == expected, repr(text)
    terms = {term for (term,) in db.execute("SELECT DISTINCT term FROM tokens")}
    assert all(term.startswith(owner) for term in terms)
    victim = fts.owner_token(VICTIM, CHARACTER)
    assert not any(term.startswith(victim) for term in terms)  # none planted


async def test_queries_find_words_of_every_script(tmp_path: Path) -> None:
    db = await migrated(tmp_path)
    texts = ["Москва зимой", "東京タワー", "Ἀθῆναι", "canción ¼ ﬁesta", "zumalakarregi"]
    with db:
        db.executemany(
            "INSERT INTO turn_search (rowid, text) VALUES (?, thread_tokens(?, ?, 'dm', ?))",
            [(rowid, ATTACKER, CHARACTER, text) for rowid, text in enumerate(texts, start=1)],
        )
    for rowid, text in enumerate(texts, start=1):
        terms = query_terms(text)
        assert terms, text
        found = fts.matching_turns(db, ATTACKER, CHARACTER, "dm", terms[:1], 10)
        assert found == [rowid], text
        assert fts.matching_turns(db, VICTIM, CHARACTER, "dm", terms, 10) == []
