"""Characters handing the word on in a scene (memory/scene/engine.py, rule 3), on the fake
Telegram with the real engine: the cap on lines per turn holds through a chain longer than
it, and a character handed the word while already queued speaks once."""

from __future__ import annotations

import pytest

from tests.test_scenes import (  # noqa: F401
    BOB,
    GROUP,
    ITZIAR,
    KOLDO,
    MAGGIE,
    Scene,
    cast_of_three,
    scene,
)


async def _turn_over(stage: Scene, lines: int) -> None:
    """Until the turn under way is over: a scene's turns run one at a time, so the line that
    answers a later message comes after every line of the turn before it."""
    await stage.group_lines(lines)
    stage.lines[KOLDO].append("De nada.")
    stage.say(BOB, "Koldo, gracias")
    await stage.fake.wait_until(
        lambda: any(m["text"].endswith("De nada.") for m in stage.fake.sent_messages(GROUP))
    )


async def test_the_cap_holds_when_the_word_is_handed_on_in_a_chain_longer_than_it(
    scene: Scene,  # noqa: F811
) -> None:
    await cast_of_three(scene)
    scene.lines[KOLDO] = ["Eso lo sabe Maggie."]
    scene.lines[MAGGIE] = ["Itziar, cuéntaselo tú."]  # a third speaker: past the cap of 2
    scene.lines[ITZIAR] = ["No debería hablar."]
    scene.say(BOB, "Koldo, ¿quién cerró el faro?")
    await _turn_over(scene, 4)
    assert [scene.speaker_of(b) for b in scene.llm.bodies()] == [KOLDO, MAGGIE, KOLDO]


@pytest.mark.parametrize("scene", [{"scene_max_replies": 3}], indirect=True)
async def test_a_character_handed_the_word_while_already_queued_speaks_once(
    scene: Scene,  # noqa: F811
) -> None:
    await cast_of_three(scene)
    scene.lines[KOLDO] = ["Maggie, te toca."]  # hands the word to Maggie, already queued
    scene.lines[MAGGIE] = ["Ya voy, ya voy.", "Otra vez yo."]
    scene.say(BOB, "Koldo, Maggie: ¿quién paga?")
    await _turn_over(scene, 4)
    assert [scene.speaker_of(b) for b in scene.llm.bodies()] == [KOLDO, MAGGIE, KOLDO]
