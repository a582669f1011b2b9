"""A person's forget in a scene (issue 35): delete means delete, read in the database's bytes
(tests/raw_db.py; on SQLite the file and its WAL too).

- A summary claim that cites nothing cannot show it rests on no forgotten line: a forget that
  touches a summary (every version of it) drops its uncited claims, in a group's forget and in
  a private forget with one character (which takes that character's copy of the person's lines).
- A forget in one group leaves the person's lines in their other groups, and takes that group's
  threads from before scenes (turns, summaries, conversations)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

from bot.texts import text
from memory.models import Summary, SummaryFields, Thread, User
from memory.scene.engine import scene_owner_id, scene_scope
from memory.store import is_postgres
from tests.conftest import FakeClock
from tests.fault_helpers import until
from tests.patience import PATIENCE
from tests.raw_db import raw_database
from tests.test_scenes import ANA, BEA, GROUP, IDS, KOLDO, MAGGIE, SCOPE, Scene, scene  # noqa: F401

GROUP2 = -100_777
CANARY = "Zorrotzaurre"
UNCITED = f"Ana trabaja de panadera en {CANARY}"


def _stored(stage: Scene, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with raw_database(stage.app.settings) as db:
        return list(db.execute(sql, params).fetchall())


async def _canary_on_disk(stage: Scene, canary: str) -> int:
    """How many times `canary` is in the stored rows; on SQLite, in the file and its WAL once
    the forget's purge is done (the bytes, not only the rows)."""
    rows = _stored(stage, "SELECT fields_json FROM summaries") + _stored(
        stage, "SELECT text FROM turns"
    )
    found = sum(str(row[0]).count(canary) for row in rows)
    target = stage.app.settings.database_target
    if is_postgres(target):
        return found
    await _purged(stage)
    path = Path(target)
    files = (path, Path(f"{path}-wal"))
    return found + sum(f.read_bytes().count(canary.encode()) for f in files if f.exists())


async def _purged(stage: Scene) -> None:
    """Until the purges the forget owes are done (they run in the background)."""
    store: Any = stage.app.store
    for _ in range(int(PATIENCE * 20)):
        if await store.pending_purges() == 0:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the forget's purge never finished")


async def _owner_and(stage: Scene, person: int) -> tuple[User, User]:
    owner = await stage.app.store.find_user("telegram", scene_owner_id(str(GROUP)))
    found = await stage.app.store.find_user("telegram", str(person))
    assert owner is not None and found is not None
    return owner, found


async def _plant_summaries(stage: Scene, clock: FakeClock, character: str) -> Thread:
    """Two versions of the character's summary of the scene, each with a claim repeating Ana's
    words that cites nothing, one citing Ana's line and one citing Bea's."""
    owner, _ = await _owner_and(stage, ANA)
    thread = Thread(owner.id, IDS[character], SCOPE)
    copy = await stage.app.store.turns_after(thread, 0)
    ana_line = next(t.id for t in copy if t.speaker and t.speaker.name == "Ana")
    bea_line = next(t.id for t in copy if t.speaker and t.speaker.name == "Bea")
    for version in range(2):
        claims = SummaryFields(
            established_facts=(
                UNCITED,
                f"Ana habló de su barrio {{cite:{ana_line}}}",
                f"Bea vive en Algorta {{cite:{bea_line}}}",
            ),
            tone=(f"cercano, versión {version}",),
        )
        cited = frozenset({ana_line, bea_line})
        now = clock() + timedelta(seconds=version)
        await stage.app.store.save_summary(thread, Summary(claims, cited, bea_line, now))
    return thread


async def _two_people_talk(stage: Scene) -> None:
    stage.fake.send_command(GROUP, ANA, "/escena", "añadir lighthouse_keeper", "supergroup")
    await stage.group_lines(1)
    stage.say(ANA, f"Koldo, Maggie: trabajo de panadera en {CANARY}")
    await stage.group_lines(3)
    stage.say(BEA, "Koldo, yo vivo en Algorta")
    await stage.group_lines(4)


async def _forget_in_the_group(stage: Scene) -> None:
    """Ana's /memoria olvidar in the group, confirmed in her private chat."""
    stage.fake.send_command(ANA, ANA, "/start")
    await stage.fake.wait_for_messages(ANA, 1)
    stage.fake.send_command(GROUP, ANA, "/memoria", "olvidar", "supergroup")
    asked = (await stage.fake.wait_for_messages(ANA, 2))[-1]
    assert asked["text"] == text("es", "scene_ask_forget")
    stage.fake.press_button(ANA, ANA, asked["message_id"], f"mem:forget:@{GROUP}")
    await stage.fake.wait_until(lambda: bool(stage.fake.edited_messages))
    assert stage.fake.edited_messages[-1]["text"].startswith("Hecho: he borrado tus mensajes")


async def test_a_group_forget_drops_the_uncited_claims_of_every_summary_version_it_touches(
    scene: Scene,  # noqa: F811
    clock: FakeClock,
) -> None:
    await _two_people_talk(scene)
    koldo = await _plant_summaries(scene, clock, KOLDO)
    await _forget_in_the_group(scene)
    versions = _stored(
        scene,
        "SELECT fields_json FROM summaries WHERE user_id = ? AND character_id = ? AND scope = ?",
        koldo.user_id,
        koldo.character_id,
        koldo.scope,
    )
    assert len(versions) == 2
    for (fields,) in versions:
        assert "Bea vive en Algorta" in fields  # cited, and on a line still there
        assert "barrio" not in fields and "cercano" not in fields  # Ana's line; nothing
    assert await _canary_on_disk(scene, CANARY) == 0
    # Nor in a later prompt: Koldo's next request carries Bea's claim and nothing of Ana's.
    scene.say(BEA, "Koldo, ¿qué sabes de nosotras?")
    await until(lambda: len(scene.requests_of(KOLDO)) == 3, what="Koldo's next request")
    asked = str(scene.requests_of(KOLDO)[-1])
    assert "Bea vive en Algorta" in asked and CANARY not in asked


async def test_a_private_forget_with_one_character_drops_the_uncited_claims_of_its_copy(
    scene: Scene,  # noqa: F811
    clock: FakeClock,
) -> None:
    await _two_people_talk(scene)
    koldo = await _plant_summaries(scene, clock, KOLDO)
    maggie = await _plant_summaries(scene, clock, MAGGIE)
    _, ana = await _owner_and(scene, ANA)
    await scene.app.memory.forget(ana, IDS[KOLDO])  # her /memoria olvidar with Koldo, privately
    of_koldo = await scene.app.store.latest_summary(koldo)
    assert of_koldo is not None
    assert [c for c in of_koldo.fields.established_facts if "Algorta" not in c] == []
    # Maggie's copy was not touched: what she witnessed is Ana's to forget with her.
    of_maggie = await scene.app.store.latest_summary(maggie)
    assert of_maggie is not None and UNCITED in of_maggie.fields.established_facts
    await scene.app.memory.forget(ana, IDS[MAGGIE])
    assert await _canary_on_disk(scene, CANARY) == 0


async def test_a_group_forget_leaves_other_groups_and_takes_the_threads_from_before_scenes(
    scene: Scene,  # noqa: F811
    clock: FakeClock,
) -> None:
    scene.say(ANA, "Koldo, en este grupo hablo de Bilbao", mention_bot=True)
    await scene.group_lines(1)
    scene.fake.send_group_text(
        GROUP2, ANA, "Koldo, en el otro grupo hablo de Getxo", first_name="Ana"
    )
    await scene.fake.wait_for_messages(GROUP2, 1)
    _, ana = await _owner_and(scene, ANA)
    store, now = scene.app.store, clock()
    for channel, place in ((GROUP, "Lekeitio"), (GROUP2, "Bermeo")):  # threads from before
        old = Thread(ana.id, IDS[KOLDO], f"group:telegram:{channel}")
        conversation = await store.start_conversation(old, now)
        said = await store.add_turn(conversation, "user", f"antes vivía en {place}", now)
        claims = SummaryFields(established_facts=(f"Vivió en {place} {{cite:{said.id}}}",))
        await store.save_summary(old, Summary(claims, frozenset({said.id}), said.id, now))
    await _forget_in_the_group(scene)
    lines = _stored(scene, "SELECT scope, text FROM turns WHERE speaker_id = ?", ana.id)
    other = scene_scope("telegram", str(GROUP2))
    assert {scope for scope, _ in lines} == {other}  # two copies? one: Koldo alone there
    assert all("Getxo" in said for _, said in lines)
    before = _stored(
        scene,
        "SELECT scope FROM conversations WHERE user_id = ? UNION ALL "
        "SELECT scope FROM summaries WHERE user_id = ? UNION ALL "
        "SELECT scope FROM turns WHERE user_id = ?",
        ana.id,
        ana.id,
        ana.id,
    )
    assert sorted(scope for (scope,) in before) == [f"group:telegram:{GROUP2}"] * 3
    assert await _canary_on_disk(scene, "Lekeitio") == 0
    assert await _canary_on_disk(scene, "Bilbao") == 0
    assert await _canary_on_disk(scene, "Bermeo") > 0


async def test_a_group_forget_purges_the_threads_from_before_scenes_of_one_who_never_spoke_since(
    scene: Scene,  # noqa: F811
    clock: FakeClock,
) -> None:
    store, now = scene.app.store, clock()
    ana = await store.upsert_user("telegram", str(ANA), "Ana", now)  # no line in the scene
    old = Thread(ana.id, IDS[KOLDO], f"group:telegram:{GROUP}")
    conversation = await store.start_conversation(old, now)
    said = await store.add_turn(conversation, "user", "antes vivía en Lekeitio", now)
    claims = SummaryFields(established_facts=(f"Vivió en Lekeitio {{cite:{said.id}}}",))
    await store.save_summary(old, Summary(claims, frozenset({said.id}), said.id, now))
    await _forget_in_the_group(scene)
    assert _stored(scene, "SELECT count(*) FROM turns WHERE user_id = ?", ana.id) == [(0,)]
    assert await _canary_on_disk(scene, "Lekeitio") == 0
