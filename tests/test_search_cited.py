"""Recall also finds an exchange by what memory knows of it: the facts whose evidence it is and
the summary claims that cite it, in words the exchange itself may never have used."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory.models import Fact, Summary, SummaryFields, Thread
from memory.search.retrieval import RankConfig, Retriever
from memory.store import MemoryStore, open_store
from tests.test_retrieval import SMALL_TALK, new_thread, talk

NOW = datetime(2026, 3, 20, 12, 0, tzinfo=UTC)


@pytest.fixture
async def store(database_target: Path | str) -> AsyncIterator[MemoryStore]:
    opened = await open_store(database_target)
    yield opened
    await opened.close()


def fact(thread: Thread, key: str, value: str, evidence: tuple[int, ...]) -> Fact:
    return Fact(
        0, thread.user_id, thread.character_id, "semantic", key, value, "stated",
        thread.scope, evidence, "never", None, NOW, NOW, None,
    )  # fmt: skip


async def test_an_exchange_is_found_by_the_fact_it_is_evidence_of(store: MemoryStore) -> None:
    ana = await new_thread(store, "ana")
    stored = await talk(
        store, ana, [*SMALL_TALK, ("Iñaki no coge el teléfono desde el martes.", "Mal asunto.")]
    )
    told = stored[-1][0]
    retriever = Retriever(store)
    query = "¿Qué sabes de mi hermano desaparecido?"
    assert await retriever.search(ana, query, 5) == []  # no word of the query was said
    await store.apply_fact_changes(
        [fact(ana, "brother", "su hermano Iñaki ha desaparecido", (told.id,))],
        [], [], [], None, NOW,
    )  # fmt: skip
    found = await retriever.search(ana, query, 5)
    assert found and found[0].turn_ids[0] == told.id
    fragments = await retriever.fragments(ana, query, set(), 600)
    assert [f.turn_ids[0] for f in fragments] == [told.id]
    # Without the citation share, the fact alone finds nothing.
    assert await Retriever(store, config=RankConfig(citation=0.0)).search(ana, query, 5) == []


async def test_a_summary_claim_finds_the_turns_it_cites(store: MemoryStore) -> None:
    ana = await new_thread(store, "ana")
    stored = await talk(store, ana, [*SMALL_TALK, ("Me voy a vivir a Getxo en abril.", "Bien.")])
    told = stored[-1][0]
    claim = f"Ana se muda de casa pronto {{cite:{told.id}}}"
    await store.save_summary(
        ana, Summary(SummaryFields(established_facts=(claim,)), frozenset({told.id}), told.id, NOW)
    )
    found = await Retriever(store).search(ana, "¿cuándo es la mudanza de casa?", 5)
    assert found and found[0].turn_ids[0] == told.id


async def test_a_claim_never_brings_in_another_threads_turns(store: MemoryStore) -> None:
    ana = await new_thread(store, "ana")
    bea = await new_thread(store, "bea")
    theirs = (await talk(store, bea, [("Mi hermano Jon vive en Londres.", "Qué lejos.")]))[0][0]
    await talk(store, ana, SMALL_TALK, NOW - timedelta(days=30))
    # A fact of Ana's that (wrongly) names a turn of Bea's as its evidence.
    await store.apply_fact_changes(
        [fact(ana, "brother", "su hermano desaparecido", (theirs.id,))], [], [], [], None, NOW
    )
    found = await Retriever(store).search(ana, "hermano desaparecido", 5)
    assert theirs.id not in {turn_id for exchange in found for turn_id in exchange.turn_ids}
