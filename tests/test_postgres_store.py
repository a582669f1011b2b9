"""Conformance of the PostgreSQL store: every test body runs against the SQLite `Store` and
the `PostgresStore` (the `any_store` fixture), so the two backends are held to the same
expectations as tests/test_store*.py, test_retrieval.py, test_forget*.py and test_profile.py
hold the SQLite one. The module is skipped where no PostgreSQL server binaries exist."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from memory.journey.model import Journey
from memory.models import Fact, ReplySources, Summary, SummaryFields, Thread, UsageRecord
from memory.search.retrieval import Retriever
from memory.search.terms import query_terms
from memory.store import ConversationGone
from tests import pg_fixtures
from tests.patience import PATIENCE

pytestmark = pg_fixtures.needs_postgres
# The fixtures, by name: the SQLite and PostgreSQL stores, and the server behind the latter.

NOW = datetime(2026, 11, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))
DETECTIVE, KEEPER = "detective_bilbao", "lighthouse_keeper"


def fact(thread: Thread, key: str, value: str, evidence: tuple[int, ...] = ()) -> Fact:
    return Fact(
        id=0, user_id=thread.user_id, character_id=thread.character_id, kind="semantic",
        key=key, value=value, origin="stated", scope=thread.scope, evidence=evidence,
        lifetime="days:30", event_date=NOW.date(), created_at=NOW, confirmed_at=NOW,
        expires_at=NOW + timedelta(days=30),
    )  # fmt: skip


async def talk(store: Any, name: str, texts: list[str], character: str = DETECTIVE) -> Thread:
    user = await store.upsert_user("telegram", name, name.title(), NOW)
    thread = Thread(user.id, character, "dm")
    conversation = await store.start_conversation(thread, NOW)
    for text in texts:
        await store.add_turn(conversation, "user", text, NOW)
        await store.add_turn(conversation, "assistant", f"Entendido: {text}", NOW)
    return thread


async def test_users_conversations_and_turns_round_trip(any_store: Any) -> None:
    store = any_store
    ana = await store.upsert_user("telegram", "1", "Ana", NOW)
    assert (await store.upsert_user("telegram", "1", "Ana R.", NOW)).id == ana.id
    assert await store.find_user("telegram", "1") == replace(ana, display_name="Ana R.")
    assert await store.find_user("discord", "1") is None
    thread = Thread(ana.id, DETECTIVE, "dm")
    conversation = await store.start_conversation(thread, NOW)
    assert await store.open_conversation(thread) == conversation
    assert conversation.started_at == NOW and conversation.started_at.utcoffset() == NOW.utcoffset()
    first = await store.add_turn(conversation, "user", "¿Qué tal?", NOW, "m1")
    later = NOW + timedelta(minutes=5)
    tool = await store.add_turn(conversation, "tool", "lore page", later)
    [read_first, read_tool] = await store.turns_after(thread, 0)
    assert read_first == first and read_tool == tool
    assert str(read_first.created_at) == str(NOW)  # the offset kept, not moved to UTC
    assert await store.conversation_turns(conversation.id) == [first, tool]
    assert await store.count_turns(thread) == 2
    assert await store.turns_after(thread, first.id) == [tool]
    idle = await store.conversations_idle_since(later + timedelta(seconds=1))
    assert [c.id for c in idle] == [conversation.id]
    assert idle[0].last_activity_at == later
    assert await store.conversations_idle_since(later) == []
    assert await store.end_conversation(conversation.id, "idle", later) is True
    assert await store.end_conversation(conversation.id, "idle", later) is False
    assert await store.open_conversation(thread) is None
    [pending] = await store.conversations_pending_extraction()
    assert pending.ended_at == later and pending.end_reason == "idle"
    await store.mark_extracted(conversation.id, "done", later)
    assert await store.conversations_pending_extraction() == []


async def test_replies_carry_their_sources_and_usage(any_store: Any) -> None:
    store = any_store
    thread = await talk(store, "ana", ["hola"])
    conversation = await store.open_conversation(thread)
    summary_id = await store.save_summary(
        thread, Summary(SummaryFields(tone=("cálido",)), frozenset({1}), 1, NOW)
    )
    sources = ReplySources(0, (3, 4), summary_id, (1, 2), (7,), NOW - timedelta(days=1))
    usage = UsageRecord(
        "reply", "m", True, user_id=thread.user_id, character_id=DETECTIVE,
        conversation_id=conversation.id, latency_ms=12.5, tools_called="a,b",
    )  # fmt: skip
    reply = await store.add_reply(conversation, "Respuesta", NOW, sources, usage)
    assert await store.last_reply_sources(thread.user_id, DETECTIVE) == replace(
        sources, turn_id=reply.id, created_at=NOW
    )
    assert await store.last_reply_sources(thread.user_id, KEEPER) is None
    await store.record_usage(UsageRecord("extract", "m", False, error="boom"), NOW)
    records = await store.usage_records()
    assert [r.kind for r in records] == ["reply", "extract"]
    assert records[0] == replace(usage, latency_ms=12.5)
    assert [r.kind for r in await store.usage_records(user_id=thread.user_id)] == ["reply"]
    assert await store.usage_records(since=NOW + timedelta(seconds=1)) == []
    # The same instant written in UTC: compared as instants, not as text.
    assert len(await store.usage_records(since=NOW.astimezone(UTC))) == 2


async def test_summaries_and_the_conversation_gate(any_store: Any) -> None:
    store = any_store
    thread = await talk(store, "ana", ["hola"])
    conversation = await store.open_conversation(thread)
    fields = SummaryFields(established_facts=("Vive en Getxo {cite:1}",), tone=("ñ",))
    first = Summary(fields, frozenset({1, 2}), 2, NOW)
    first_id = await store.save_summary(thread, first, conversation.id)
    assert await store.latest_summary(thread) == replace(first, id=first_id)
    assert await store.summary_by_id(thread.user_id, first_id) == replace(first, id=first_id)
    assert await store.summary_by_id(thread.user_id + 1, first_id) is None
    await store.forget(thread.user_id, DETECTIVE)
    assert await store.save_summary(thread, first, conversation.id) is None
    assert await store.latest_summary(thread) is None
    with pytest.raises(ConversationGone):
        await store.add_turn(conversation, "user", "¿sigues?", NOW)


async def test_facts_history_and_extraction_marks(any_store: Any) -> None:
    store = any_store
    thread = await talk(store, "ana", ["vivo en Getxo"])
    conversation = await store.open_conversation(thread)
    await store.end_conversation(conversation.id, "idle", NOW)
    adds = [fact(thread, "city", "Getxo", (1,)), fact(thread, "pet", "gato")]
    assert await store.apply_fact_changes(adds, [], [], [], conversation.id, NOW)
    assert await store.conversations_pending_extraction() == []
    city, pet = await store.facts(thread.user_id, DETECTIVE, "dm")
    assert replace(city, id=0) == adds[0] and city.event_date == NOW.date()
    later = NOW + timedelta(days=1)
    moved = replace(city, value="Bilbao", origin="inferred", confirmed_at=later)
    confirmed = replace(pet, confirmed_at=later, status="pending")
    assert await store.apply_fact_changes(
        [], [(city, moved, "moved")], [], [confirmed], None, later
    )
    assert await store.facts(thread.user_id, DETECTIVE) == [moved, confirmed]
    [version] = await store.fact_history(thread.user_id, city.id)
    assert (version.value, version.valid_from, version.superseded_at) == ("Getxo", NOW, later)
    assert version.reason == "moved" and version.fact_id == city.id
    assert await store.apply_fact_changes([], [], [moved], [], None, later)
    assert await store.facts(thread.user_id, DETECTIVE) == [confirmed]
    assert await store.facts(thread.user_id, DETECTIVE, "group:x") == []
    assert await store.fact(thread.user_id, DETECTIVE, pet.id) == confirmed
    assert await store.delete_fact(thread.user_id, DETECTIVE, pet.id) is True
    assert await store.delete_fact(thread.user_id, DETECTIVE, pet.id) is False
    await store.forget(thread.user_id, DETECTIVE)
    gone = [fact(thread, "late", "nada")]
    assert await store.apply_fact_changes(gone, [], [], [], conversation.id, NOW) is False
    assert await store.facts(thread.user_id, DETECTIVE) == []


async def test_rejections_channels_choices_and_review_mode(any_store: Any) -> None:
    store = any_store
    thread = await talk(store, "ana", ["hola"])
    conversation = await store.open_conversation(thread)
    await store.record_rejection(thread, conversation.id, "instruction", NOW)
    await store.record_rejection(thread, None, "shape", NOW)
    assert await store.count_rejections() == 2
    assert await store.count_rejections(thread.user_id) == 2
    assert await store.count_rejections(thread.user_id + 1) == 0
    assert await store.chosen_character_of("telegram", "ana", "dm-1") is None
    await store.choose_character(thread.user_id, "dm-1", KEEPER, NOW)
    await store.choose_character(thread.user_id, "dm-1", DETECTIVE, NOW)
    assert await store.chosen_character_of("telegram", "ana", "dm-1") == DETECTIVE
    await store.bind_channel("telegram", "-100", KEEPER, "telegram:42", NOW)
    assert await store.bound_character("telegram", "-100") == KEEPER
    await store.bind_channel("telegram", "-100", None, "telegram:42", NOW)
    assert await store.bound_character("telegram", "-100") is None
    assert await store.review_mode(thread.user_id) is False
    await store.set_review_mode(thread.user_id, True)
    assert await store.review_mode(thread.user_id) is True
    await store.set_review_mode(thread.user_id, False)
    assert await store.review_mode(thread.user_id) is False


async def test_search_is_the_threads_own_and_counts_agree(any_store: Any) -> None:
    store = any_store
    ana = await talk(store, "ana", ["Pintamos la canción del barco", "Mi barco se llama Txo"])
    await talk(store, "bea", ["El barco de Bea pinta canciones"])
    await talk(store, "ana", ["barco ajeno del faro"], KEEPER)
    group = Thread(ana.user_id, DETECTIVE, "group:telegram:-1")
    conversation = await store.start_conversation(group, NOW)
    in_group = await store.add_turn(conversation, "user", "barco en el grupo", NOW)
    await store.add_turn(conversation, "tool", "barco barco barco", NOW)
    terms = query_terms("¿Recuerdas las canciones del barco que pintaba?")
    assert [t.stem for t in terms] == ["cancion", "barc", "pint"]
    counts = await store.search_term_counts(ana.user_id, DETECTIVE, "dm", terms)
    assert counts == [2, 4, 2]  # the replies echo the user's words
    assert await store.search_term_counts(ana.user_id, DETECTIVE, None, terms) == [2, 5, 2]
    ids, rows = await store.search_exchanges(ana.user_id, DETECTIVE, "dm", terms, 50)
    own = [t.id for t in await store.turns_after(Thread(ana.user_id, DETECTIVE, "dm"), 0)]
    assert sorted(ids) == own and ids[0] in own[:2]  # the turns holding every term rank first
    assert sorted({row[3].id for row in rows}) == own
    assert [row[0] for row in rows] == [own[0], own[0], own[2], own[2]]
    assert [row[1] for row in rows] == [own[2], own[2], None, None]
    assert [row[2] for row in rows] == [None, None, own[1], own[1]]
    everywhere, _ = await store.search_exchanges(ana.user_id, DETECTIVE, None, terms, 50)
    assert sorted(everywhere) == [*own, in_group.id]
    assert (await store.search_exchanges(ana.user_id, DETECTIVE, "dm", terms, 1))[0] == ids[:1]
    assert await store.search_exchanges(ana.user_id, DETECTIVE, "dm", [], 5) == ([], [])
    assert await store.thread_text_stats(ana.user_id, DETECTIVE, "dm") == (
        4, sum(len(t.text) for t in await store.turns_by_ids(ana.user_id, DETECTIVE, own))
    )  # fmt: skip
    found = await store.turns_by_ids(ana.user_id, DETECTIVE, [own[2], 99999, own[0]])
    assert [t.id for t in found] == [own[2], own[0]]


async def test_exchange_turns_and_thread_turns_by_ids(any_store: Any) -> None:
    store = any_store
    ana = await talk(store, "ana", ["uno", "dos"])
    bea = await talk(store, "bea", ["tres"])
    mine = [t.id for t in await store.turns_after(ana, 0)]
    theirs = [t.id for t in await store.turns_after(bea, 0)]
    rows = await store.exchange_turns(ana.user_id, DETECTIVE, "dm", [mine[3], *theirs])
    assert [(r[0], r[1], r[2], r[3].id) for r in rows] == [
        (mine[2], None, mine[1], mine[2]),
        (mine[2], None, mine[1], mine[3]),
    ]
    assert await store.exchange_turns(ana.user_id, DETECTIVE, "group:x", mine) == []
    found = await store.thread_turns_by_ids(ana, [*theirs, mine[1], mine[0]])
    assert [t.id for t in found] == mine[:2]
    assert await store.thread_turns_by_ids(replace(ana, scope="group:x"), mine) == []


async def test_retrieval_ranks_the_same_on_both(any_store: Any) -> None:
    """The same Python BM25 over each backend's candidates: the same exchanges, same scores."""
    store = any_store
    texts = [f"Hoy hablamos del tema {i} y de nada más" for i in range(30)]
    texts[7] = "Mi hermana Itziar toca el violín en Bilbao"
    texts[19] = "El violín de Itziar se rompió en el concierto"
    ana = await talk(store, "ana", texts)
    found = await Retriever(store).search(ana, "¿Qué pasó con el violín de Itziar?", 3)
    assert [e.text.count("Itziar") for e in found[:2]] == [2, 2]
    assert [round(e.score, 3) for e in found] == [0.52, 0.52, 0.26]


async def test_forget_deletes_the_pair_and_purges(any_store: Any) -> None:
    store = any_store
    ana = await talk(store, "ana", ["clave zorionak", "vivo en Getxo"])
    await talk(store, "ana", ["otro personaje"], KEEPER)
    bea = await talk(store, "bea", ["txakoli"])
    conversation = await store.open_conversation(ana)
    reply = await store.add_reply(
        conversation, "ok", NOW, ReplySources(0, (), None, (), (), NOW),
        UsageRecord("reply", "m", True, user_id=ana.user_id, character_id=DETECTIVE,
                    conversation_id=conversation.id),
    )  # fmt: skip
    await store.apply_fact_changes([fact(ana, "city", "Getxo", (reply.id,))], [], [], [], None, NOW)
    await store.save_summary(ana, Summary(SummaryFields(tone=("x",)), frozenset(), 1, NOW))
    await store.record_rejection(ana, None, "shape", NOW)
    await store.choose_character(ana.user_id, "dm", DETECTIVE, NOW)
    await store.set_followups(ana.user_id, DETECTIVE, True)
    [city] = await store.facts(ana.user_id, DETECTIVE)
    await store.record_followup(ana.user_id, DETECTIVE, city.id, reply.id, NOW)
    await store.set_off_record(ana, NOW)  # only the flag: the words were never written
    story = Journey(ana.user_id, DETECTIVE, ("Ana contó que vivía en Getxo {cite:2}.",), None, NOW)
    assert await store.save_journey(story, conversation.id, None, NOW)  # and its run row
    assert await store.characters_of(ana.user_id) == [DETECTIVE, KEEPER]
    counts = await store.forget(ana.user_id, DETECTIVE)
    assert counts == {"reply_sources": 1, "llm_usage": 1, "memory_rejections": 1,
                      "summaries": 1, "facts": 1, "turns": 5, "conversations": 1,
                      "followups": 1, "followup_settings": 1, "dead_letters": 0,
                      "scene_lines": 0, "off_record_threads": 1, "journeys": 1,
                      "journey_runs": 1, "canon_proposals": 0}  # fmt: skip
    assert await store.journey(ana.user_id, DETECTIVE) is None
    assert await store.off_record_until(ana) is None
    assert not await store.followups_enabled(ana.user_id, DETECTIVE)
    assert await store.purge_settled(timeout=PATIENCE)
    assert await store.pending_purges() == 0
    assert await store.count_turns(ana) == 0 and await store.count_turns(bea) == 2
    terms = query_terms("zorionak getxo")
    assert await store.search_term_counts(ana.user_id, DETECTIVE, None, terms) == [0, 0]
    assert await store.characters_of(ana.user_id) == [DETECTIVE, KEEPER]  # the choice stays
    assert await store.forget_user_if_unreferenced(ana.user_id) is False  # the keeper's rows
    await store.forget(ana.user_id, KEEPER)
    assert await store.forget_user_if_unreferenced(ana.user_id) is True
    assert await store.find_user("telegram", "ana") is None
    assert await store.characters_of(ana.user_id) == []
    assert await store.purge_settled(timeout=PATIENCE)
    assert await store.integrity_check() == "ok"


async def test_export_then_import_gives_fresh_ids_and_rewritten_references(
    any_store: Any,
) -> None:
    store = any_store
    ana = await talk(store, "ana", ["vivo en Getxo", "tengo un gato"])
    turns = await store.turns_after(ana, 0)
    await store.save_summary(
        ana, Summary(SummaryFields(established_facts=(f"Getxo {{cite:{turns[0].id}}}",)),
                     frozenset({turns[0].id}), turns[-1].id, NOW),
    )  # fmt: skip
    [city] = [fact(ana, "city", "Getxo", (turns[0].id,))]
    await store.apply_fact_changes([city], [], [], [], None, NOW)
    [stored] = await store.facts(ana.user_id, DETECTIVE)
    await store.apply_fact_changes([], [(stored, replace(stored, value="Bilbao"), "m")], [], [],
                                   None, NOW)  # fmt: skip
    [conversation_id] = {t.conversation_id for t in turns}
    said = f"Ana dijo que vivía en Getxo {{cite:{turns[0].id}}}."
    story = Journey(ana.user_id, DETECTIVE, (said,), None, NOW)
    assert await store.save_journey(story, conversation_id, None, NOW)
    exported = await store.export_rows(ana.user_id, DETECTIVE)
    assert set(exported) == {"conversations", "turns", "summaries", "facts", "fact_history",
                             "journeys", "scene_lines"}  # fmt: skip
    assert exported["scene_lines"] == []  # no group scene in this one
    assert [r["text"] for r in exported["turns"]] == [t.text for t in turns]
    assert exported["turns"][0]["created_at"] == NOW.isoformat()
    data = _parsed(exported)
    bea = await store.upsert_user("telegram", "bea", "Bea", NOW)
    counts = await store.import_rows(bea.id, KEEPER, data, NOW)
    assert counts == {"conversations": 1, "turns": 4, "summaries": 1, "facts": 1, "journeys": 1}
    theirs = Thread(bea.id, KEEPER, "dm")
    new_turns = await store.turns_after(theirs, 0)
    assert [t.text for t in new_turns] == [t.text for t in turns]
    assert all(n.id > o.id for n, o in zip(new_turns, turns, strict=True))
    summary = await store.latest_summary(theirs)
    assert summary.fields.established_facts == (f"Getxo {{cite:{new_turns[0].id}}}",)
    assert summary.cited_ids == {new_turns[0].id}
    [copied] = await store.facts(bea.id, KEEPER)
    assert copied.value == "Bilbao" and copied.evidence == (new_turns[0].id,)
    journey = await store.journey(bea.id, KEEPER)
    assert journey is not None and journey.cited_ids == {new_turns[0].id}  # rewritten
    assert [v.value for v in await store.fact_history(bea.id, copied.id)] == ["Getxo"]
    terms = query_terms("gato")
    assert await store.search_term_counts(bea.id, KEEPER, "dm", terms) == [2]


def _parsed(exported: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """An export as the CLI writes it to a file and reads it back: JSON columns parsed."""
    import json

    data: dict[str, Any] = {name: [dict(r) for r in rows] for name, rows in exported.items()}
    for row in data["summaries"]:
        row["fields_json"] = json.loads(row["fields_json"])
        row["cited_ids_json"] = json.loads(row["cited_ids_json"])
    for row in data["facts"] + data["fact_history"]:
        row["evidence"] = json.loads(row["evidence"])
    return data


async def test_turn_ids_are_never_reused(any_store: Any) -> None:
    store = any_store
    ana = await talk(store, "ana", ["uno"])
    before = max(t.id for t in await store.turns_after(ana, 0))
    await store.forget(ana.user_id, DETECTIVE)
    again = await talk(store, "ana2", ["dos"])
    assert min(t.id for t in await store.turns_after(again, 0)) > before


async def test_ids_and_words_no_backend_can_hold_find_nothing(any_store: Any) -> None:
    """A model's invented citation (past bigint) and a 3,000-letter word find nothing and
    break nothing, on either backend."""
    store = any_store
    thread = await talk(store, "ana", ["Mi barco se llama Itsaso", "x" * 3000])
    first = (await store.turns_after(thread, 0))[0]
    huge = [first.id, 2**70, -(2**70), 2**63]
    assert [t.id for t in await store.turns_by_ids(thread.user_id, DETECTIVE, huge)] == [first.id]
    assert [t.id for t in await store.thread_turns_by_ids(thread, huge)] == [first.id]
    rows = await store.exchange_turns(thread.user_id, DETECTIVE, "dm", huge)
    assert {row[3].id for row in rows} >= {first.id}
    terms = query_terms("y" * 3000 + " barco")
    counts = await store.search_term_counts(thread.user_id, DETECTIVE, "dm", terms)
    assert counts == [0, 2]  # the turn and its echo
    ids, _ = await store.search_exchanges(thread.user_id, DETECTIVE, "dm", terms[:1], 10)
    assert ids == []
