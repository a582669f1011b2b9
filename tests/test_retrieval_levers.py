"""The cross-session levers probed by bench/locomo_spread.py (not adopted in the product): off,
they rank exactly as the Retriever does; on, each does what it says on a small real thread."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bench.locomo_levers import main as levers_main
from bench.locomo_levers import parse_setting
from bench.locomo_spread import LeverRetriever, Levers, feedback_words
from memory.engine.tokens import TokenEstimator
from memory.models import Thread, Turn
from memory.search.retrieval import RankConfig, Retriever
from memory.store import MemoryStore, open_store
from tests.test_retrieval import write_locomo

START = datetime(2026, 3, 2, 18, 0, tzinfo=UTC)
KAYAK = [
    ("We took the kayak out on the river at dawn.", "A kayak at dawn sounds peaceful."),
    ("The kayak flipped near the bridge, kayak and all.", "Did you get the kayak back?"),
    ("I bought a new paddle for the kayak, and went to Urdaibai.", "Urdaibai is lovely."),
]
LATER = [
    ("Work was long today.", "Rest tonight."),
    ("Back in Urdaibai with my cousin last weekend.", "What did you two do there?"),
    ("My cousin also tried the kayak once.", "Brave cousin."),
]


@pytest.fixture
async def store(database_target: Path | str) -> AsyncIterator[MemoryStore]:
    opened = await open_store(database_target)
    yield opened
    await opened.close()


async def session(
    store: MemoryStore, thread: Thread, exchanges: list[tuple[str, str]], at: datetime
) -> list[list[Turn]]:
    """One stored conversation holding every (user, reply) pair, a minute apart."""
    conversation = await store.start_conversation(thread, at)
    stored = []
    for user_text, reply_text in exchanges:
        user = await store.add_turn(conversation, "user", user_text, at)
        reply = await store.add_turn(conversation, "assistant", reply_text, at)
        stored.append([user, reply])
        at += timedelta(minutes=1)
    await store.end_conversation(conversation.id, "test", at)
    return stored


async def kayak_thread(store: MemoryStore) -> tuple[Thread, list[list[Turn]], list[list[Turn]]]:
    user = await store.upsert_user("telegram", "ana", "Ana", START)
    thread = Thread(user.id, "keeper", "dm")
    first = await session(store, thread, KAYAK, START)
    # Small talk between: the thread must be long enough that a word in two exchanges is rare.
    filler = [(f"Nothing much on day {n}, number {n}.", f"Day {n} noted.") for n in range(24)]
    await session(store, thread, filler, START + timedelta(days=1))
    later = await session(store, thread, LATER, START + timedelta(days=30))
    return thread, first, later


def first_ids(found: list[object]) -> list[int]:
    return [exchange.turn_ids[0] for exchange in found]  # type: ignore[attr-defined]


async def test_with_every_lever_off_the_ranking_is_the_products(store: MemoryStore) -> None:
    thread, _, _ = await kayak_thread(store)
    product = Retriever(store, TokenEstimator(), RankConfig())
    probe = LeverRetriever(store, TokenEstimator(), RankConfig(), Levers())
    for query in ("kayak", "kayak in Urdaibai", "cousin"):
        assert await probe.search(thread, query, 10) == await product.search(thread, query, 10)


async def test_spreading_brings_the_other_sessions_exchange_into_the_top_two(
    store: MemoryStore,
) -> None:
    thread, first, later = await kayak_thread(store)
    plain = LeverRetriever(store, TokenEstimator(), RankConfig(), Levers())
    spread = LeverRetriever(store, TokenEstimator(), RankConfig(), Levers(session_decay=0.3))
    cousin_kayak = later[2][0].id
    assert cousin_kayak not in first_ids(await plain.search(thread, "kayak", 2))
    top = first_ids(await spread.search(thread, "kayak", 2))
    assert cousin_kayak in top and top[0] in {pair[0].id for pair in first}


async def test_feedback_follows_the_best_hits_words_into_another_session(
    store: MemoryStore,
) -> None:
    thread, _, later = await kayak_thread(store)
    plain = LeverRetriever(store, TokenEstimator(), RankConfig(), Levers())
    follow = LeverRetriever(store, TokenEstimator(), RankConfig(), Levers(feedback_terms=2))
    # "paddle" finds only the exchange that also says Urdaibai; Urdaibai leads to session 3.
    urdaibai_later = later[1][0].id
    assert urdaibai_later not in first_ids(await plain.search(thread, "new paddle", 10))
    assert urdaibai_later in first_ids(await follow.search(thread, "new paddle", 10))


def test_feedback_words_are_the_hits_own_new_words() -> None:
    stem = str.lower
    known = frozenset({"kayak"})
    assert feedback_words(["The kayak went to Urdaibai, and the river."], known, stem, 2) == [
        "urdaibai",
        "river",
    ]
    # With several hits, only the words two of them share.
    assert feedback_words(["kayak river dawn", "river bridge", "bridge river"], known, stem, 5) == [
        "river",
        "bridge",
    ]


def test_a_setting_sets_fields_of_either_dataclass_and_refuses_others() -> None:
    name, config, levers = parse_setting("x:session_decay=0.5,candidates=80,feedback_terms=3")
    assert name == "x" and config.candidates == 80
    assert levers == Levers(session_decay=0.5, feedback_terms=3)
    with pytest.raises(SystemExit):
        parse_setting("y:nonsense=1")


def test_the_levers_bench_runs_on_a_small_locomo_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_locomo(tmp_path / "locomo.json")
    assert levers_main([str(data), "--no-memory", "--set", "spread:session_decay=0.5"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["setting"] for line in lines] == ["default", "spread"]
    assert all(0.0 <= line["recall_at_10"] <= 1.0 for line in lines)
