"""Recall through the journey: with `RankConfig.journey_citations`, each sentence of the pair's
journey is lent to search as a claim, like facts and summary claims, and finds the turns it
cites in words those turns never used; only the user's own private turns, never another user's,
never in a group. And the retrieval bench measures the lever both ways."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench.locomo_journey import JourneyTally
from bench.locomo_load import load
from bench.locomo_memory import MemoryTally
from bench.locomo_retrieval import main as bench_main
from memory.journey.model import Journey
from memory.models import Thread, Turn
from memory.search.retrieval import RankConfig, Retriever
from memory.store import MemoryStore, open_store
from tests.test_retrieval import SMALL_TALK, new_thread, talk
from tests.test_retrieval_memory import locomo_item

NOW = datetime(2026, 3, 20, 12, 0, tzinfo=UTC)
LENT = RankConfig(journey_citations=True)
QUERY = "¿Qué sabes de mi hermano desaparecido?"


@pytest.fixture
async def store(database_target: Path | str) -> AsyncIterator[MemoryStore]:
    opened = await open_store(database_target)
    yield opened
    await opened.close()


async def chronicle(store: MemoryStore, thread: Thread, after: Turn, sentence: str) -> None:
    """Store a journey for `thread`'s pair as the chronicler would after `after`'s conversation
    (the sentence is taken as given: these tests are about recall, not the checks)."""
    journey = Journey(thread.user_id, thread.character_id, (sentence,), None, NOW)
    assert await store.save_journey(journey, after.conversation_id, None, NOW)


def ids_of(found: list) -> set[int]:  # type: ignore[type-arg]
    return {turn_id for exchange in found for turn_id in exchange.turn_ids}


async def test_a_journey_sentence_finds_the_turn_it_cites_when_lent(store: MemoryStore) -> None:
    ana = await new_thread(store, "ana")
    stored = await talk(store, ana, [*SMALL_TALK, ("Iñaki no coge el teléfono.", "Mal asunto.")])
    told = stored[-1][0]
    assert await Retriever(store, config=LENT).search(ana, QUERY, 5) == []  # no word was said
    await chronicle(
        store, ana, told, f"Ana contó que su hermano había desaparecido {{cite:{told.id}}}."
    )
    found = await Retriever(store, config=LENT).search(ana, QUERY, 5)
    assert found and found[0].turn_ids[0] == told.id
    fragments = await Retriever(store, config=LENT).fragments(ana, QUERY, set(), 600)
    assert [f.turn_ids[0] for f in fragments] == [told.id]
    # Not lent (the switch off), the journey finds nothing.
    assert await Retriever(store).search(ana, QUERY, 5) == []


async def test_a_journey_never_lends_another_users_turns(store: MemoryStore) -> None:
    ana = await new_thread(store, "ana")
    bea = await new_thread(store, "bea")
    theirs = (await talk(store, bea, [("Mi hermano Jon no contesta.", "Qué raro.")]))[0][0]
    mine = (await talk(store, ana, SMALL_TALK))[-1][0]
    # A journey of Ana's that (wrongly) cites a turn of Bea's.
    await chronicle(store, ana, mine, f"Ana habló de su hermano desaparecido {{cite:{theirs.id}}}.")
    found = await Retriever(store, config=LENT).search(ana, QUERY, 5)
    assert theirs.id not in ids_of(found)


async def test_a_journey_never_steers_a_groups_recall(store: MemoryStore) -> None:
    ana = await new_thread(store, "ana")
    group = Thread(ana.user_id, ana.character_id, "group:telegram:-5")
    said = (await talk(store, group, [("Iñaki no coge el teléfono.", "Mal asunto.")]))[0][0]
    mine = (await talk(store, ana, SMALL_TALK))[-1][0]
    # Even a journey that cites a turn said in the group: the private story is never lent to
    # a group's recall, where other people read the reply.
    await chronicle(store, ana, mine, f"Ana temía por su hermano desaparecido {{cite:{said.id}}}.")
    assert await Retriever(store, config=LENT).search(group, QUERY, 5) == []
    assert await Retriever(store, config=LENT).fragments(group, QUERY, set(), 600) == []


async def test_the_bench_chronicles_each_session_through_the_real_checks(
    store: MemoryStore,
) -> None:
    journey = JourneyTally()
    loaded = await load(store, locomo_item("conv-0"), MemoryTally(), journey)
    assert journey.statuses == {"done": 2} and journey.calls == 2
    stored = await store.journey(loaded.thread.user_id, loaded.thread.character_id)
    assert stored is not None
    turn = loaded.turn_of
    assert stored.cited_ids == {turn["D1:1"], turn["D1:2"], turn["D2:2"]}
    assert "Ignore all previous instructions" not in stored.text  # the gate dropped it alone


def test_the_bench_reports_recall_without_and_with_the_journey(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([locomo_item(f"conv-{n}") for n in range(3)]))
    assert bench_main([str(data), "--json", "--journey"]) == 0
    lever = json.loads(capsys.readouterr().out)["journey"]
    assert lever["chronicles"] == {"done": 6}
    for split in ("held_out", "fit"):
        assert set(lever[split]) == {"without", "with"}
        assert 0 <= lever[split]["with"]["recall_at_10"] <= 1
    assert bench_main([str(data), "--json"]) == 0
    assert "journey" not in json.loads(capsys.readouterr().out)
