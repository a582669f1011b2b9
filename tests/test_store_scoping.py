"""Every read of the store is scoped by user, character and (where it has one) scope, each on
its own: the layers above (the owner check of /memoria, the FTS owner tokens, the cascade of a
conversation) must not be what keeps another person's memory out.

One real SQLite file holds Ana's thread with the detective in her DM, and beside it the same
kind of rows for Bea (another user), for Ana with another character, and for Ana in a group.
The foreign rows are written AFTER Ana's, so a query that lost a filter and takes "the newest"
returns a foreign row instead of hers. tests/mutants/rules.toml breaks each filter in turn.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory.models import Fact, ReplySources, Summary, SummaryFields, Thread, Turn
from memory.search.terms import query_terms
from memory.store import MemoryStore, open_store

NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
DETECTIVE, KEEPER = "detective_bilbao", "lighthouse_keeper"


@dataclass
class World:
    store: MemoryStore
    ana: Thread  # Ana with the detective, in her DM: the thread every test reads
    foreign: dict[str, Thread]  # "user", "character", "scope": differ from `ana` in that only
    ana_turns: list[Turn]
    foreign_turns: dict[str, list[Turn]]


def summary(claim: str, turn: Turn, minutes: int) -> Summary:
    return Summary(
        SummaryFields(established_facts=(f"{claim} {{cite:{turn.id}}}",)),
        frozenset({turn.id}),
        turn.id,
        NOW + timedelta(minutes=minutes),
    )


def fact(thread: Thread, value: str, evidence: Turn) -> Fact:
    return Fact(
        id=0,
        user_id=thread.user_id,
        character_id=thread.character_id,
        kind="semantic",
        key="city",
        value=value,
        origin="stated",
        scope=thread.scope,
        evidence=(evidence.id,),
        lifetime="never",
        event_date=None,
        created_at=NOW,
        confirmed_at=NOW,
        expires_at=None,
    )


async def thread_with_turns(store: MemoryStore, thread: Thread, owner: str) -> list[Turn]:
    conversation = await store.start_conversation(thread, NOW)
    return [
        await store.add_turn(conversation, "user", f"Mi barco se llama {owner}", NOW),
        await store.add_turn(conversation, "assistant", f"Bonito nombre, {owner}", NOW),
    ]


@pytest.fixture
async def world(database_target: Path | str) -> AsyncIterator[World]:
    store = await open_store(database_target)
    ana = await store.upsert_user("telegram", "1", "Ana", NOW)
    bea = await store.upsert_user("telegram", "2", "Bea", NOW)
    mine = Thread(ana.id, DETECTIVE, "dm")
    foreign = {
        "user": Thread(bea.id, DETECTIVE, "dm"),
        "character": Thread(ana.id, KEEPER, "dm"),
        "scope": Thread(ana.id, DETECTIVE, "group:telegram:-100"),
    }
    ana_turns = await thread_with_turns(store, mine, "Ana")
    await store.save_summary(mine, summary("Ana navega", ana_turns[0], 0))
    await store.apply_fact_changes([fact(mine, "Getxo", ana_turns[0])], [], [], [], None, NOW)
    foreign_turns = {}
    for index, (kind, thread) in enumerate(foreign.items(), start=1):
        turns = await thread_with_turns(store, thread, f"Ajeno{kind}")
        foreign_turns[kind] = turns
        await store.save_summary(thread, summary(f"ajeno {kind}", turns[0], index))
        await store.apply_fact_changes(
            [fact(thread, f"Ajeno{kind}", turns[0])], [], [], [], None, NOW
        )
    yield World(store, mine, foreign, ana_turns, foreign_turns)
    await store.close()


def foreign_ids(world: World) -> list[int]:
    return [t.id for turns in world.foreign_turns.values() for t in turns]


async def test_latest_summary_is_the_threads_own(world: World) -> None:
    latest = await world.store.latest_summary(world.ana)
    assert latest is not None
    assert latest.fields.established_facts[0].startswith("Ana navega")
    for kind, thread in world.foreign.items():
        theirs = await world.store.latest_summary(thread)
        assert theirs is not None and f"ajeno {kind}" in theirs.fields.established_facts[0]


async def test_open_conversation_is_the_threads_own(world: World) -> None:
    conversation = await world.store.open_conversation(world.ana)
    assert conversation is not None and conversation.thread == world.ana
    assert conversation.id == world.ana_turns[0].conversation_id


async def test_turn_reads_stay_in_the_thread(world: World) -> None:
    store, ana = world.store, world.ana
    assert [t.id for t in await store.turns_after(ana, 0)] == [t.id for t in world.ana_turns]
    assert await store.count_turns(ana) == 2
    everything = [t.id for t in world.ana_turns] + foreign_ids(world)
    found = await store.thread_turns_by_ids(ana, everything)
    assert [t.id for t in found] == [t.id for t in world.ana_turns]
    # The why view reads by user and character (every scope of the pair): never Bea's.
    by_pair = await store.turns_by_ids(ana.user_id, DETECTIVE, everything)
    expected = world.ana_turns + world.foreign_turns["scope"]
    assert sorted(t.id for t in by_pair) == sorted(t.id for t in expected)


async def test_the_exchange_fetch_filters_on_its_own(world: World) -> None:
    """Handed another thread's turn ids (as a bug upstream might), it returns none of them."""
    store, ana = world.store, world.ana
    ours = [t.id for t in world.ana_turns]
    rows = await store.exchange_turns(ana.user_id, DETECTIVE, ana.scope, ours + foreign_ids(world))
    assert sorted({row[3].id for row in rows}) == ours
    for kind in ("user", "character"):  # and with no scope (every scope of the pair)
        theirs = [t.id for t in world.foreign_turns[kind]]
        assert await store.exchange_turns(ana.user_id, DETECTIVE, None, theirs) == []


async def test_the_search_index_answers_only_for_the_thread(world: World) -> None:
    """The MATCH expression alone (owner and scope tokens) keeps foreign turns out, before the
    exchange fetch filters again."""
    store, ana = world.store, world.ana
    terms = query_terms("barco nombre")
    ids, rows = await store.search_exchanges(ana.user_id, DETECTIVE, ana.scope, terms, 50)
    assert sorted(ids) == [t.id for t in world.ana_turns]
    assert sorted({row[3].id for row in rows}) == sorted(ids)
    assert await store.search_term_counts(ana.user_id, DETECTIVE, ana.scope, terms) == [1, 1]
    both_scopes, _ = await store.search_exchanges(ana.user_id, DETECTIVE, None, terms, 50)
    expected = world.ana_turns + world.foreign_turns["scope"]
    assert sorted(both_scopes) == sorted(t.id for t in expected)


async def test_facts_and_their_history_are_the_owners(world: World) -> None:
    store, ana = world.store, world.ana
    [mine] = await store.facts(ana.user_id, DETECTIVE, "dm")
    assert mine.value == "Getxo"
    every_scope = await store.facts(ana.user_id, DETECTIVE)
    assert sorted(f.value for f in every_scope) == ["Ajenoscope", "Getxo"]
    [bea_fact] = await store.facts(world.foreign["user"].user_id, DETECTIVE)
    await store.apply_fact_changes(
        [],
        [(bea_fact, replace(bea_fact, value="Bilbao"), "moved")],
        [],
        [],
        None,
        NOW,
    )
    # Bea's fact: not found by Ana's id, its history not readable, not deletable by her.
    assert await store.fact(ana.user_id, DETECTIVE, bea_fact.id) is None
    assert await store.fact_history(ana.user_id, bea_fact.id) == []
    assert [v.value for v in await store.fact_history(bea_fact.user_id, bea_fact.id)] == [
        "Ajenouser"
    ]
    assert await store.delete_fact(ana.user_id, DETECTIVE, bea_fact.id) is False
    assert await store.fact(bea_fact.user_id, DETECTIVE, bea_fact.id) is not None
    # Ana's own fact, asked for with another character: not found, not deleted.
    assert await store.fact(ana.user_id, KEEPER, mine.id) is None
    assert await store.delete_fact(ana.user_id, KEEPER, mine.id) is False
    assert await store.delete_fact(ana.user_id, DETECTIVE, mine.id) is True


async def test_reply_sources_and_summaries_by_id_are_the_owners(world: World) -> None:
    store, ana = world.store, world.ana
    bea = world.foreign["user"]
    bea_conversation = await store.open_conversation(bea)
    assert bea_conversation is not None
    bea_summary = await store.latest_summary(bea)
    assert bea_summary is not None
    sources = ReplySources(0, (), bea_summary.id, (), (), NOW)
    await store.add_reply(bea_conversation, "Respuesta a Bea", NOW, sources)
    assert await store.last_reply_sources(ana.user_id, DETECTIVE) is None
    assert await store.last_reply_sources(bea.user_id, DETECTIVE) is not None
    assert await store.summary_by_id(ana.user_id, bea_summary.id) is None
    assert await store.summary_by_id(bea.user_id, bea_summary.id) is not None


async def test_the_export_holds_only_the_users_rows_with_the_character(world: World) -> None:
    store, ana = world.store, world.ana
    bea_fact = (await store.facts(world.foreign["user"].user_id, DETECTIVE))[0]
    await store.apply_fact_changes(
        [],
        [(bea_fact, replace(bea_fact, value="Bilbao"), "moved")],
        [],
        [],
        None,
        NOW,
    )
    rows = await store.export_rows(ana.user_id, DETECTIVE)
    own_conversations = {world.ana_turns[0].conversation_id}
    own_conversations.add(world.foreign_turns["scope"][0].conversation_id)
    assert {r["conversation_id"] for r in rows["turns"]} == own_conversations
    assert {r["id"] for r in rows["conversations"]} == own_conversations
    assert sorted(r["value"] for r in rows["facts"]) == ["Ajenoscope", "Getxo"]
    claims = sorted(r["fields_json"] for r in rows["summaries"])
    assert len(claims) == 2 and all("Ana navega" in c or "ajeno scope" in c for c in claims)
    assert rows["fact_history"] == []
    assert {r["user_id"] for table in rows.values() for r in table if "user_id" in r} == {
        ana.user_id
    }


async def test_the_same_id_on_two_platforms_is_two_people(world: World) -> None:
    """Telegram user 1 and Discord user 1 are strangers: their identity, their character
    choice per channel and a channel's binding never cross platforms."""
    store = world.store
    ana = await store.find_user("telegram", "1")
    stranger = await store.upsert_user("discord", "1", "Stranger", NOW)
    assert ana is not None and stranger.id != ana.id
    assert await store.find_user("discord", "1") == stranger
    assert await store.find_user("telegram", "1") == ana
    await store.choose_character(ana.id, "dm-1", KEEPER, NOW)
    assert await store.chosen_character_of("discord", "1", "dm-1") is None
    assert await store.chosen_character_of("telegram", "1", "dm-1") == KEEPER
    await store.bind_channel("telegram", "-100", KEEPER, "telegram:42", NOW)
    assert await store.bound_character("discord", "-100") is None
    assert await store.bound_character("telegram", "-100") == KEEPER
