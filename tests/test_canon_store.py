"""Canon proposals at the store (migration 0027), on both backends: stored with the
character's own assistant turns as evidence only, listed, decided once from pending, and
dropped by a forget of a person whose threads (private, group, scene) they rest on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory.models import NewCanonProposal, Speaker, Thread
from memory.store.sqlite import SqliteStore
from tests.patience import PATIENCE
from tests.test_forget_purge import canary_bytes

NOW = datetime(2026, 11, 2, 18, 30, tzinfo=UTC)
DETECTIVE = "detective_bilbao"
OTHER = "pirate_anne"
CANARY = "barcoamarillocanary"


async def private_talk(store: Any, name: str, character: str = DETECTIVE) -> tuple[Thread, list]:
    user = await store.upsert_user("telegram", name, name.title(), NOW)
    thread = Thread(user.id, character, "dm")
    conversation = await store.start_conversation(thread, NOW)
    said = await store.add_turn(conversation, "user", f"Hola, soy {name}", NOW)
    answer = await store.add_turn(conversation, "assistant", "Mi barco se llama Gaviota", NOW)
    return thread, [said, answer]


async def scene_talk(store: Any, person: Thread, channel: str = "-100") -> list:
    """A scene in `channel` where the person speaks and the detective answers."""
    owner = await store.upsert_user("telegram", f"scene:{channel}", "", NOW)
    witness = Thread(owner.id, DETECTIVE, f"scene:telegram:{channel}")
    conversation = await store.start_conversation(witness, NOW)
    said = Speaker("Ana", person_id=person.user_id)
    line = await store.add_user_turn(conversation, "Hola a todos", NOW, None, None, said)
    answer = await store.add_turn(conversation, "assistant", "Tengo una hermana, Miren", NOW)
    return [line.turn, answer]


def proposal(text: str, *turns: Any, contradicts: str | None = None) -> NewCanonProposal:
    return NewCanonProposal(text, tuple(t.id for t in turns), contradicts)


async def test_a_proposal_is_stored_pending_with_its_evidence(any_store: Any) -> None:
    _, (_, answer) = await private_talk(any_store, "ana")
    [pid] = await any_store.add_canon_proposals(
        DETECTIVE,
        [proposal("Su barco se llama Gaviota.", answer, contradicts="boat: Itsaso")],
        NOW,
    )
    [listed] = await any_store.list_canon_proposals(DETECTIVE)
    assert listed == await any_store.get_canon_proposal(pid)
    assert (listed.text, listed.evidence_turn_ids, listed.contradicts) == (
        "Su barco se llama Gaviota.",
        (answer.id,),
        "boat: Itsaso",
    )
    assert (listed.status, listed.created_at, listed.decided_at) == ("pending", NOW, None)
    [line] = await any_store.canon_evidence(pid)
    assert (line.turn_id, line.created_at, line.text) == (answer.id, NOW, answer.text)
    assert await any_store.list_canon_proposals(OTHER) == []
    assert await any_store.list_canon_proposals(None) == [listed]
    assert await any_store.list_canon_proposals(DETECTIVE, "approved") == []
    assert await any_store.get_canon_proposal(pid + 1000) is None
    assert await any_store.get_canon_proposal(2**70) is None  # no row, not an error


async def test_only_the_characters_own_assistant_turns_are_evidence(any_store: Any) -> None:
    _, (said, answer) = await private_talk(any_store, "ana")
    _, (_, others) = await private_talk(any_store, "bea", OTHER)
    stored = await any_store.add_canon_proposals(
        DETECTIVE,
        [
            proposal("Resting on a person's line.", said),
            proposal("Resting on another character's line.", others),
            NewCanonProposal("Resting on nothing stored.", (999_999, 2**70)),
            proposal("Mixed: the person's line is dropped.", said, answer),
        ],
        NOW,
    )
    assert len(stored) == 1
    [kept] = await any_store.list_canon_proposals(DETECTIVE)
    assert kept.id == stored[0]
    assert kept.evidence_turn_ids == (answer.id,)


async def test_a_decision_is_taken_once_from_pending(any_store: Any) -> None:
    _, (_, answer) = await private_talk(any_store, "ana")
    first, second = await any_store.add_canon_proposals(
        DETECTIVE, [proposal("Uno.", answer), proposal("Dos.", answer)], NOW
    )
    later = NOW + timedelta(hours=1)
    assert await any_store.decide_canon_proposal(first, "approved", later)
    assert not await any_store.decide_canon_proposal(first, "rejected", later)
    assert await any_store.decide_canon_proposal(second, "rejected", later)
    assert not await any_store.decide_canon_proposal(second + 1000, "approved", later)
    with pytest.raises(ValueError, match="approved"):
        await any_store.decide_canon_proposal(second, "pending", later)
    approved = await any_store.get_canon_proposal(first)
    assert (approved.status, approved.decided_at) == ("approved", later)
    assert [p.id for p in await any_store.list_canon_proposals(DETECTIVE, "rejected")] == [second]
    assert await any_store.list_canon_proposals(DETECTIVE) == []


async def test_a_private_forget_drops_the_pending_proposals_resting_on_it(any_store: Any) -> None:
    ana, (_, ana_answer) = await private_talk(any_store, "ana")
    _, (_, bea_answer) = await private_talk(any_store, "bea")
    pending, approved, both, beas = await any_store.add_canon_proposals(
        DETECTIVE,
        [
            proposal("Gaviota.", ana_answer),
            proposal("Aprobada.", ana_answer),
            proposal("Dos hilos.", ana_answer, bea_answer),
            proposal("De Bea.", bea_answer),
        ],
        NOW,
    )
    await any_store.decide_canon_proposal(approved, "approved", NOW)
    counts = await any_store.forget(ana.user_id, DETECTIVE)
    assert counts["canon_proposals"] == 2
    assert await any_store.get_canon_proposal(pending) is None
    assert await any_store.get_canon_proposal(both) is None
    assert [p.id for p in await any_store.list_canon_proposals(DETECTIVE)] == [beas]
    # A decided one stays (the admin's decision), without the link to the forgotten thread.
    kept = await any_store.get_canon_proposal(approved)
    assert (kept.status, kept.evidence_turn_ids) == ("approved", ())


async def test_a_forget_with_another_character_leaves_this_ones(any_store: Any) -> None:
    ana, (_, answer) = await private_talk(any_store, "ana")
    await private_talk(any_store, "ana", OTHER)
    [pid] = await any_store.add_canon_proposals(DETECTIVE, [proposal("Gaviota.", answer)], NOW)
    await any_store.forget(ana.user_id, OTHER)
    assert await any_store.get_canon_proposal(pid) is not None


async def test_a_scene_forget_drops_proposals_resting_on_a_conversation_they_spoke_in(
    any_store: Any,
) -> None:
    ana, _ = await private_talk(any_store, "ana")
    bea, _ = await private_talk(any_store, "bea")
    _, ana_scene = await scene_talk(any_store, ana, "-100")
    _, bea_scene = await scene_talk(any_store, bea, "-200")
    in_ana, in_bea = await any_store.add_canon_proposals(
        DETECTIVE, [proposal("Hermana.", ana_scene), proposal("Otra.", bea_scene)], NOW
    )
    erased = await any_store.forget_scene_lines(ana.user_id, "scene:telegram:-100")
    assert erased.lines == 1
    assert await any_store.get_canon_proposal(in_ana) is None
    assert await any_store.get_canon_proposal(in_bea) is not None
    # The whole forget with the character reaches their scenes too.
    await any_store.forget(bea.user_id, DETECTIVE)
    assert await any_store.list_canon_proposals(None) == []


async def test_a_group_thread_from_before_scenes_is_the_persons_own(any_store: Any) -> None:
    ana = await any_store.upsert_user("telegram", "ana", "Ana", NOW)
    group = Thread(ana.id, DETECTIVE, "group:telegram:-100")
    conversation = await any_store.start_conversation(group, NOW)
    answer = await any_store.add_turn(conversation, "assistant", "Mi barco es azul", NOW)
    [pid] = await any_store.add_canon_proposals(DETECTIVE, [proposal("Azul.", answer)], NOW)
    await any_store.forget_scene_lines(ana.id, "scene:telegram:-200")  # another group
    assert await any_store.get_canon_proposal(pid) is not None
    await any_store.forget_scene_lines(ana.id, "scene:telegram:-100")
    assert await any_store.get_canon_proposal(pid) is None


async def test_the_forget_hook_alone(any_store: Any) -> None:
    ana, (_, answer) = await private_talk(any_store, "ana")
    [pid] = await any_store.add_canon_proposals(DETECTIVE, [proposal("Gaviota.", answer)], NOW)
    assert await any_store.forget_canon_evidence(ana.user_id, OTHER) == 0
    assert await any_store.forget_canon_evidence(ana.user_id, None) == 1
    assert await any_store.get_canon_proposal(pid) is None


@pytest.mark.sqlite_only
async def test_a_forgotten_proposals_text_leaves_the_file_and_its_wal(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "c.db")
    store.purge_retry_seconds = 0.01
    try:
        ana, (_, answer) = await private_talk(store, "ana")
        await store.add_canon_proposals(DETECTIVE, [proposal(f"El {CANARY}.", answer)], NOW)
        assert canary_bytes(store.path, CANARY) > 0
        await store.forget(ana.user_id, DETECTIVE)
        assert await store.purge_settled(timeout=PATIENCE)
        assert canary_bytes(store.path, CANARY) == 0
    finally:
        await store.close()


async def test_each_ended_private_or_scene_conversation_is_read_once(any_store: Any) -> None:
    ana, (_, answer) = await private_talk(any_store, "ana")
    scene_line, _ = await scene_talk(any_store, ana)
    group = await any_store.start_conversation(Thread(ana.user_id, DETECTIVE, "group:x:1"), NOW)
    open_one = await any_store.start_conversation(Thread(ana.user_id, OTHER, "dm"), NOW)
    assert await any_store.conversations_pending_canon() == []  # none ended yet
    for ended in (answer.conversation_id, scene_line.conversation_id, group.id):
        await any_store.end_conversation(ended, "idle", NOW)
    pending = await any_store.conversations_pending_canon()
    assert [c.id for c in pending] == [answer.conversation_id, scene_line.conversation_id]
    assert open_one.id not in [c.id for c in pending]
    stored = await any_store.save_canon_run(
        answer.conversation_id, DETECTIVE, [proposal("Gaviota.", answer)], "done", NOW
    )
    assert stored is not None and len(stored) == 1
    assert await any_store.canon_run_status(answer.conversation_id) == "done"
    again = await any_store.save_canon_run(
        answer.conversation_id, DETECTIVE, [proposal("Otra vez.", answer)], "done", NOW
    )
    assert again is None  # read already: nothing written
    assert len(await any_store.list_canon_proposals(DETECTIVE)) == 1
    assert (
        await any_store.save_canon_run(scene_line.conversation_id, DETECTIVE, [], "nothing", NOW)
        == []
    )
    assert await any_store.conversations_pending_canon() == []
    await any_store.forget(ana.user_id, DETECTIVE)
    gone = await any_store.save_canon_run(answer.conversation_id, DETECTIVE, [], "done", NOW)
    assert gone is None  # the conversation was forgotten
    assert await any_store.canon_run_status(answer.conversation_id) is None


async def test_a_run_whose_person_lines_were_forgotten_meanwhile_writes_nothing(
    any_store: Any,
) -> None:
    ana, _ = await private_talk(any_store, "ana")
    line, answer = await scene_talk(any_store, ana)
    await any_store.end_conversation(answer.conversation_id, "idle", NOW)
    await any_store.forget_scene_lines(ana.user_id, "scene:telegram:-100")  # while it was read
    saved = await any_store.save_canon_run(
        answer.conversation_id, DETECTIVE, [proposal("Hermana.", answer)], "done", NOW, [line.id]
    )
    assert saved is None
    assert await any_store.list_canon_proposals(None) == []
    assert await any_store.canon_run_status(answer.conversation_id) is None  # owed again
