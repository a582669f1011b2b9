"""The character's tools on their own: each reads the very thread it serves, and only a tool
that was offered runs. Recall's relevance threshold holds when the best hit is a weak one.

Real store on a SQLite file, the real Retriever and ToolBox; tests/mutants/rules.toml breaks
each rule in turn."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memory.engine.llm import ToolCall
from memory.engine.tokens import TokenEstimator
from memory.engine.tools import ToolBox
from memory.models import Thread
from memory.search.retrieval import Retriever
from memory.store import MemoryStore, open_store
from tests.test_retrieval import CHARACTER, SMALL_TALK, ids_of, new_thread, talk

GROUP = "group:telegram:-100"


@pytest.fixture
async def store(database_target: Path | str) -> AsyncIterator[MemoryStore]:
    opened = await open_store(database_target)
    yield opened
    await opened.close()


def toolbox(store: MemoryStore, thread: Thread, memory_tools: bool = True) -> ToolBox:
    return ToolBox(
        store, Retriever(store), thread, memory_tools, (), 1500, TokenEstimator(), ("Ana", "K")
    )


async def test_search_memory_in_a_group_never_finds_what_was_said_in_the_dm(
    store: MemoryStore,
) -> None:
    dm = await new_thread(store, "ana")
    group = Thread(dm.user_id, CHARACTER, GROUP)
    [(secret, _)] = await talk(store, dm, [("Mi contraseña es pez espada.", "Olvidada.")])
    in_group = await toolbox(store, group).run(ToolCall("search_memory", {"query": "pez espada"}))
    assert not in_group.is_error
    assert in_group.text == "nothing found" and in_group.recalled_turn_ids == ()
    [(public, reply)] = await talk(store, group, [("Un pez espada en la lonja.", "Ya.")])
    in_group = await toolbox(store, group).run(ToolCall("search_memory", {"query": "pez espada"}))
    assert in_group.recalled_turn_ids == (public.id, reply.id)
    assert "pez espada en la lonja" in in_group.text and "contraseña" not in in_group.text
    in_dm = await toolbox(store, dm).run(ToolCall("search_memory", {"query": "pez espada"}))
    assert secret.id in in_dm.recalled_turn_ids and public.id not in in_dm.recalled_turn_ids


async def test_a_tool_that_was_not_offered_does_not_run(store: MemoryStore) -> None:
    ana = await new_thread(store, "ana")
    [(said, _)] = await talk(store, ana, [("Mi gato se llama Lenteja.", "Buen nombre.")])
    without_memory = toolbox(store, ana, memory_tools=False)
    assert without_memory.specs() == ()
    for call in (
        ToolCall("search_memory", {"query": "gato Lenteja"}),
        ToolCall("lookup_turn", {"ids": [said.id]}),
        ToolCall("read_lore", {"slugs": ["faro"]}),
    ):
        outcome = await without_memory.run(call)
        assert outcome.is_error and outcome.text == f"unknown tool '{call.name}'"
        assert "Lenteja" not in outcome.text and outcome.recalled_turn_ids == ()
    offered = await toolbox(store, ana).run(ToolCall("lookup_turn", {"ids": [said.id]}))
    assert "Lenteja" in offered.text  # the same call runs when the tool is offered


async def test_a_weak_best_hit_is_not_a_fragment(store: MemoryStore) -> None:
    """The relative floor passes the best hit by definition: only the absolute threshold keeps
    an exchange that matches one word of a long question out of the prompt."""
    ana = await new_thread(store, "ana")
    history = [*SMALL_TALK, ("Ayer fui a un concierto de jazz.", "Qué bien."), *SMALL_TALK]
    await talk(store, ana, history)
    retriever = Retriever(store)
    query = "¿Qué dijo el notario de la hipoteca, del dentista y del jazz?"
    found = await retriever.search(ana, query, 5)
    assert found and "jazz" in found[0].text and found[0].score < retriever.config.threshold
    assert await retriever.fragments(ana, query, set(), 600) == []
    strong = await retriever.fragments(ana, "¿Qué tal el concierto de jazz?", set(), 600)
    assert ids_of(strong) == set(found[0].turn_ids)
