"""The story of each scene (issue 37 A) on the fake Telegram, with the real python-telegram-bot,
the real engine and chronicler, and the fake Anthropic API playing the chronicler: every
character present keeps its own chronicle of the scene, written from its own copy when the
scene's conversation ends, shown in its block 2 there, read with /escena historia, deleted by
an admin's reset; a person's forget in the group takes out every sentence citing or naming
them (the bytes too); their export carries only the sentences citing their lines."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bot.texts import text
from memory.integrity.render import DATA_CLOSE, DATA_OPEN
from memory.models import Thread, User
from memory.scene.engine import scene_owner_id
from memory.scene.voices import unescaped
from memory.store import is_postgres
from tests.conftest import FakeClock
from tests.fakes.anthropic_api import ToolUse, route_of
from tests.fault_helpers import query
from tests.test_scene_forget import _forget_in_the_group, _purged
from tests.test_scenes import (  # noqa: F401
    ANA,
    BEA,
    GROUP,
    IDS,
    ITZIAR,
    KOLDO,
    MAGGIE,
    SCOPE,
    Scene,
    scene,
)

ROUTE = "write_journey"
CANARY = "Zorrotzaurre"  # Ana's words
NAMED = "Mundaka"  # in a sentence that names Ana and cites only Bea's line
UNNAMED = "Deusto"  # in a sentence that cites Ana's line and does not name her
_LINE = re.compile(r'^\[(\d+)\] <person ref="p\d+" name="([^"]*)">(.*)</person>$', re.M)
Story = Callable[[dict[str, Any]], str]


def people_lines(body: dict[str, Any]) -> list[tuple[int, str, str]]:
    """(id, person, words) of every person's line the chronicler was shown."""
    shown = body["messages"][0]["content"][0]["text"]
    return [(int(i), unescaped(n), unescaped(w)) for i, n, w in _LINE.findall(shown)]


def told(body: dict[str, Any]) -> str:
    """A sound chronicle: one sentence per person's line, each citing it."""
    sentences = []
    for line_id, person, words in people_lines(body):
        plain = re.sub(r"[.!?¿¡…,:]", "", words.split(":", 1)[-1]).strip()
        sentences.append(f"{person} habló de {plain} {{cite:{line_id}}}.")
    return " ".join(sentences)


class Chronicler:
    """The fake model as the scene's chronicler: a queued story per character, else `told`."""

    def __init__(self, stage: Scene) -> None:
        self.scene = stage
        self.queued: dict[str, list[Story]] = {}
        self._plain = stage.llm.default
        stage.llm.default = self.answer

    def answer(self, body: dict[str, Any]) -> Any:
        if route_of(body) != ROUTE:
            return self._plain(body)
        queued = self.queued.get(self.scene.speaker_of(body))
        story = queued.pop(0) if queued else told
        return ToolUse(ROUTE, {"journey": story(body)})

    def bodies_of(self, name: str) -> list[dict[str, Any]]:
        return [b for b in self.scene.llm.bodies(ROUTE) if self.scene.speaker_of(b) == name]


async def end_by_timer(stage: Scene, clock: FakeClock) -> None:
    clock.advance(hours=2)
    await stage.app.sweep()
    await stage.app.companion.drain()


async def owner(stage: Scene) -> User:
    found = await stage.app.store.find_user("telegram", scene_owner_id(str(GROUP)))
    assert found is not None
    return found


def stories(stage: Scene) -> dict[str, str]:
    """character id -> its stored chronicle of the scene."""
    rows = query(
        stage.app.settings.database_target,
        "SELECT j.character_id, j.text FROM journeys j JOIN users u ON u.id = j.user_id"
        " WHERE u.platform_user_id = ?",
        scene_owner_id(str(GROUP)),
    )
    return {character: story for character, story in rows}


async def copy_ids(stage: Scene, name: str) -> set[int]:
    thread = Thread((await owner(stage)).id, IDS[name], SCOPE)
    return {t.id for t in await stage.app.store.turns_after(thread, 0)}


async def line_of(stage: Scene, name: str, person: str) -> int:
    """The id of the person's line in the character's copy."""
    thread = Thread((await owner(stage)).id, IDS[name], SCOPE)
    turns = await stage.app.store.turns_after(thread, 0)
    return next(t.id for t in turns if t.speaker is not None and t.speaker.name == person)


def cited(story: str) -> set[int]:
    return {int(i) for i in re.findall(r"\{cite:(\d+)\}", story)}


async def conversation_with_a_late_joiner(stage: Scene) -> None:
    """Ana speaks to Koldo alone; Maggie joins; Bea speaks to both."""
    stage.say(ANA, f"Koldo: trabajo de panadera en {CANARY}", mention_bot=True)
    await stage.group_lines(1)
    stage.fake.send_command(GROUP, ANA, "/escena", "añadir lighthouse_keeper", "supergroup")
    await stage.group_lines(2)
    stage.say(BEA, "Koldo, Maggie: yo vivo en Algorta")
    await stage.group_lines(4)


async def test_each_character_tells_only_what_it_witnessed_and_sees_it_in_block_2(
    scene: Scene,  # noqa: F811
    clock: FakeClock,
) -> None:
    chronicler = Chronicler(scene)
    await conversation_with_a_late_joiner(scene)
    await end_by_timer(scene, clock)
    koldo, maggie = chronicler.bodies_of(KOLDO), chronicler.bodies_of(MAGGIE)
    assert len(koldo) == len(maggie) == 1  # one forced call each, when the conversation ended
    assert CANARY in str(koldo[0]) and CANARY not in str(maggie[0])  # Maggie came later
    written = stories(scene)
    assert cited(written[IDS[KOLDO]]) <= await copy_ids(scene, KOLDO)
    assert cited(written[IDS[MAGGIE]]) <= await copy_ids(scene, MAGGIE)
    assert CANARY in written[IDS[KOLDO]] and CANARY not in written[IDS[MAGGIE]]
    scene.say(BEA, "Maggie, ¿te acuerdas de lo de ayer?")
    await scene.group_lines(5)
    block2 = scene.requests_of(MAGGIE)[-1]["system"][1]["text"]
    shown = block2.split("## The story of the scene")[-1]  # Maggie speaks English
    assert "Bea habló de yo vivo en Algorta" in shown
    data = shown.split(f"\n{DATA_OPEN}\n")[-1]  # the block's data, after its note
    assert "Algorta" in data and data.rstrip().endswith(DATA_CLOSE)


async def test_an_unwitnessed_citation_is_retried_then_rejected_and_the_previous_story_stays(
    scene: Scene,  # noqa: F811
    clock: FakeClock,
) -> None:
    chronicler = Chronicler(scene)
    await conversation_with_a_late_joiner(scene)
    await end_by_timer(scene, clock)
    before = stories(scene)[IDS[MAGGIE]]
    unwitnessed = min(await copy_ids(scene, KOLDO))  # Ana's line, said before Maggie came
    assert unwitnessed not in await copy_ids(scene, MAGGIE)

    def invented(body: dict[str, Any]) -> str:
        return f"{told(body)} Ana ya había hablado de su trabajo {{cite:{unwitnessed}}}."

    chronicler.queued[MAGGIE] = [invented, invented, invented]
    scene.say(BEA, "Maggie, ¿qué tal el faro?")
    await scene.group_lines(5)
    await end_by_timer(scene, clock)
    assert len(chronicler.bodies_of(MAGGIE)) == 4  # three attempts for the second
    retried = chronicler.bodies_of(MAGGIE)[-1]["messages"][0]["content"][0]["text"]
    assert f"[{unwitnessed}]" in retried and "were not given" in retried  # told the reason
    assert stories(scene)[IDS[MAGGIE]] == before
    status = query(
        scene.app.settings.database_target,
        "SELECT status FROM journey_runs WHERE character_id = ? ORDER BY conversation_id",
        IDS[MAGGIE],
    )
    assert [s for (s,) in status] == ["done", "rejected"]


async def test_anyone_in_the_group_reads_a_characters_story_by_its_name(
    scene: Scene,  # noqa: F811
    clock: FakeClock,
) -> None:
    Chronicler(scene)
    await conversation_with_a_late_joiner(scene)
    await end_by_timer(scene, clock)
    scene.fake.send_command(GROUP, BEA, "/escena", "historia Itziar", "supergroup")  # never here
    assert (await scene.group_lines(5))[-1] == text("es", "scene_story_none", name=ITZIAR)
    scene.fake.send_command(GROUP, BEA, "/escena", "historia Maggie", "supergroup")  # no admin
    shown = (await scene.group_lines(6))[-1]
    assert shown.startswith(text("es", "scene_story_title", name=MAGGIE))
    assert "yo vivo en Algorta (" in shown and "{cite:" not in shown  # dated, no codes
    assert CANARY not in shown
    scene.fake.send_command(GROUP, BEA, "/scene", "story detective_bilbao", "supergroup")
    assert CANARY in (await scene.group_lines(7))[-1]
    scene.fake.send_command(GROUP, BEA, "/escena", "historia Nadie", "supergroup")
    assert (await scene.group_lines(8))[-1].startswith("No conozco a «Nadie»")


async def _canary_on_disk(stage: Scene, canary: str) -> int:
    """`canary` in the stored chronicles; on SQLite, in the file and its WAL once the purge
    is done (the bytes, not only the rows)."""
    found = sum(story.count(canary) for story in stories(stage).values())
    target = stage.app.settings.database_target
    if is_postgres(target):
        return found
    await _purged(stage)
    path = Path(target)
    files = (path, Path(f"{path}-wal"))
    return found + sum(f.read_bytes().count(canary.encode()) for f in files if f.exists())


async def test_a_reset_by_an_admin_deletes_every_story_and_a_member_cannot(
    scene: Scene,  # noqa: F811
    clock: FakeClock,
) -> None:
    chronicler = Chronicler(scene)

    def story_only(body: dict[str, Any]) -> str:  # the canary only in the chronicle
        return f"{told(body)} Aquella tarde sonó la sirena de Arriluze."

    chronicler.queued[KOLDO] = [story_only]
    await conversation_with_a_late_joiner(scene)
    await end_by_timer(scene, clock)
    assert set(stories(scene)) == {IDS[KOLDO], IDS[MAGGIE]}
    scene.fake.send_command(GROUP, BEA, "/reset", "", "supergroup")  # a plain member
    await scene.group_lines(5)
    assert set(stories(scene)) == {IDS[KOLDO], IDS[MAGGIE]}
    scene.say(BEA, "Koldo, una cosa más")
    await scene.group_lines(6)
    scene.fake.send_command(GROUP, ANA, "/reset", "", "supergroup")  # the operator
    assert (await scene.group_lines(7))[-1] == text("es", "reset")
    await scene.app.companion.drain()
    await scene.app.sweep()  # nothing from before the reset is written afterwards
    assert stories(scene) == {}
    assert await _canary_on_disk(scene, "Arriluze") == 0


async def test_a_forget_in_the_group_takes_every_sentence_citing_or_naming_the_person(
    scene: Scene,  # noqa: F811
    clock: FakeClock,
) -> None:
    chronicler = Chronicler(scene)

    def naming_ana(body: dict[str, Any]) -> str:
        bea = next(i for i, person, _ in people_lines(body) if person == "Bea")
        return f"{told(body)}\n\nBea le contó a Ana que veraneaba en {NAMED} {{cite:{bea}}}."

    def citing_ana(body: dict[str, Any]) -> str:  # her line cited, her name not written
        ana = next(i for i, person, _ in people_lines(body) if person == "Ana")
        return f"{naming_ana(body)} Una voz habló de amasar en {UNNAMED} {{cite:{ana}}}."

    chronicler.queued[KOLDO] = [citing_ana]
    chronicler.queued[MAGGIE] = [naming_ana]
    await conversation_with_a_late_joiner(scene)
    await end_by_timer(scene, clock)
    assert NAMED in stories(scene)[IDS[MAGGIE]] and UNNAMED in stories(scene)[IDS[KOLDO]]
    await _forget_in_the_group(scene)
    for story in stories(scene).values():
        assert "Ana" not in story and NAMED not in story and UNNAMED not in story
        assert "Bea habló de yo vivo en Algorta" in story  # hers stays
    assert await _canary_on_disk(scene, CANARY) == 0
    assert await _canary_on_disk(scene, NAMED) == 0
    assert await _canary_on_disk(scene, UNNAMED) == 0


async def test_an_export_carries_only_the_sentences_citing_the_persons_lines(
    scene: Scene,  # noqa: F811
    clock: FakeClock,
) -> None:
    Chronicler(scene)
    await conversation_with_a_late_joiner(scene)
    await end_by_timer(scene, clock)
    bea = await scene.app.store.find_user("telegram", str(BEA))
    assert bea is not None
    exported = await scene.app.memory.export(bea, IDS[KOLDO])
    [theirs] = exported["scene_journeys"]
    assert theirs["scope"] == SCOPE
    bea_line = await line_of(scene, KOLDO, "Bea")
    assert theirs["sentences"] == [f"Bea habló de yo vivo en Algorta {{cite:{bea_line}}}."]
    assert CANARY not in str(exported["scene_journeys"])
    # An import puts nothing of a scene's story back: not into the scene, not as a journey.
    before = stories(scene)
    counts = await scene.app.memory.import_(bea, IDS[KOLDO], exported)
    assert stories(scene) == before
    mine = query(
        scene.app.settings.database_target,
        "SELECT count(*) FROM journeys WHERE user_id = ?",
        bea.id,
    )
    assert mine == [(0,)] and "scene_journeys" not in counts


@pytest.mark.parametrize("scene", [{"scene_journey_max_tokens": 150}], indirect=True)
async def test_a_story_over_the_cap_is_asked_again_then_cut_to_it(
    scene: Scene,  # noqa: F811
    clock: FakeClock,
) -> None:
    chronicler = Chronicler(scene)

    def long(body: dict[str, Any]) -> str:
        bea = next(i for i, person, _ in people_lines(body) if person == "Bea")
        old = " ".join(f"Bea habló del puerto viejo número {n} {{cite:{bea}}}." for n in range(40))
        return f"{old}\n\nAl final Bea habló de Algorta {{cite:{bea}}}."

    chronicler.queued[MAGGIE] = [long, long, long]
    await conversation_with_a_late_joiner(scene)
    await end_by_timer(scene, clock)
    assert len(chronicler.bodies_of(MAGGIE)) == 3
    assert chronicler.bodies_of(MAGGIE)[-1]["max_tokens"] == 2 * 150 + 300
    bea_line = await line_of(scene, MAGGIE, "Bea")
    assert stories(scene)[IDS[MAGGIE]] == f"Al final Bea habló de Algorta {{cite:{bea_line}}}."


@pytest.mark.parametrize("scene", [{"scene_journey_max_tokens": 0}], indirect=True)
async def test_with_the_cap_at_zero_scenes_keep_no_story(
    scene: Scene,  # noqa: F811
    clock: FakeClock,
) -> None:
    chronicler = Chronicler(scene)
    await conversation_with_a_late_joiner(scene)
    await end_by_timer(scene, clock)
    assert chronicler.scene.llm.bodies(ROUTE) == [] and stories(scene) == {}


async def test_a_private_forget_with_one_character_clears_that_characters_story_only(
    scene: Scene,  # noqa: F811
    clock: FakeClock,
) -> None:
    Chronicler(scene)
    await conversation_with_a_late_joiner(scene)
    await end_by_timer(scene, clock)
    bea = await scene.app.store.find_user("telegram", str(BEA))
    assert bea is not None
    await scene.app.memory.forget(bea, IDS[KOLDO])  # her /memoria olvidar with Koldo, privately
    assert "Algorta" not in stories(scene)[IDS[KOLDO]]
    assert CANARY in stories(scene)[IDS[KOLDO]]  # Ana's sentence stays
    assert "Bea habló de yo vivo en Algorta" in stories(scene)[IDS[MAGGIE]]  # Maggie's own
    assert await _canary_on_disk(scene, "Algorta") > 0  # in Maggie's copy and story, still
