"""Canon proposals in a group scene, on the fake Telegram with the real engine: the character's
own copy of the scene is read when its conversation ends; a proposal resting on a person's
line or naming a person is dropped; a participant's forget in the group (the buttons of
/memoria olvidar) removes the pending proposals resting on a conversation they spoke in."""

from __future__ import annotations

from typing import Any

from bot.texts import text
from memory.models import Thread
from memory.scene.engine import scene_owner_id
from tests.conftest import FakeClock
from tests.fakes.anthropic_api import ToolUse
from tests.test_canon import ROUTE
from tests.test_scenes import ANA, BEA, GROUP, IDS, KOLDO, SCOPE, Scene, scene  # noqa: F401


async def _koldos_copy(stage: Scene) -> Thread:
    owner = await stage.app.store.find_user("telegram", scene_owner_id(str(GROUP)))
    assert owner is not None
    return Thread(owner.id, IDS[KOLDO], SCOPE)


async def test_a_scene_is_read_for_canon_and_a_forget_in_the_group_drops_what_rests_on_it(
    scene: Scene,  # noqa: F811
    clock: FakeClock,
) -> None:
    scene.lines[KOLDO] = ["Mi bote se llama Gaviota, amarrado en Santurtzi.", "Bea, ya te digo."]
    scene.say(ANA, "Koldo, soy panadera en Deusto")
    await scene.group_lines(1)
    scene.say(BEA, "Koldo, ¿tienes barco?")
    await scene.group_lines(2)
    copy = await scene.app.store.turns_after(await _koldos_copy(scene), 0)
    boat, greeting = [t.id for t in copy if t.role == "assistant"]
    ana_line = next(t.id for t in copy if t.speaker and t.speaker.name == "Ana")

    def proposals(body: dict[str, Any]) -> ToolUse:
        shown = body["messages"][0]["content"][0]["text"]
        assert f"[{ana_line}] Ana:" in shown and f"[{boat}] Koldo Arrieta (you):" in shown
        return ToolUse(ROUTE, {"proposals": [
            {"text": f"Koldo tiene un bote, el Gaviota, en Santurtzi {{cite:{boat}}}.",
             "contradicts": None},
            {"text": f"Koldo es amigo de Bea desde hace años {{cite:{greeting}}}.",
             "contradicts": None},  # a person's name
            {"text": f"Koldo fue panadero en Deusto {{cite:{ana_line}}}.",
             "contradicts": None},  # a person's line
        ]})  # fmt: skip

    scene.llm.queue(proposals, route=ROUTE)
    clock.advance(hours=2)
    await scene.app.sweep()
    await scene.app.companion.drain()
    assert len(scene.llm.bodies(ROUTE)) == 1
    [kept] = await scene.app.store.list_canon_proposals(IDS[KOLDO])
    assert kept.evidence_turn_ids == (boat,) and "Gaviota" in kept.text

    scene.fake.send_command(ANA, ANA, "/start")
    await scene.fake.wait_for_messages(ANA, 1)
    scene.fake.send_command(GROUP, ANA, "/memoria", "olvidar", "supergroup")
    asked = (await scene.fake.wait_for_messages(ANA, 2))[-1]
    assert asked["text"] == text("es", "scene_ask_forget")
    scene.fake.press_button(ANA, ANA, asked["message_id"], f"mem:forget:@{GROUP}")
    await scene.fake.wait_until(lambda: bool(scene.fake.edited_messages))
    assert await scene.app.store.list_canon_proposals(IDS[KOLDO]) == []
