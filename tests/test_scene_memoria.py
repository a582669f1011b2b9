"""`/memoria ver` asked in a group, and `companion memory show` (issue 35, item 7): the facts
learned in the group by every character, per character, marked as learned in that group."""

from __future__ import annotations

from bot.cli_memory_view import format_admin_view
from memory.models import Fact
from tests.conftest import FakeClock
from tests.test_scenes import ANA, GROUP, IDS, KOLDO, MAGGIE, Scene, scene  # noqa: F401

HERE = f"group:telegram:{GROUP}"
ELSEWHERE = "group:telegram:-100777"


def _fact(user_id: int, character: str, scope: str, key: str, value: str, now: object) -> Fact:
    return Fact(
        0, user_id, IDS[character], "semantic", key, value, "stated", scope, (),
        "days:180", None, now, now, None,  # type: ignore[arg-type]
    )  # fmt: skip


async def test_memoria_in_a_group_shows_each_characters_facts_learned_there_apart(
    scene: Scene,  # noqa: F811
    clock: FakeClock,
) -> None:
    scene.fake.send_command(GROUP, ANA, "/escena", "añadir lighthouse_keeper", "supergroup")
    await scene.group_lines(1)
    scene.fake.send_command(ANA, ANA, "/start")
    await scene.fake.wait_for_messages(ANA, 1)
    store, now = scene.app.store, clock()
    ana = await store.upsert_user("telegram", str(ANA), "Ana", now)
    planted = [
        _fact(ana.id, KOLDO, HERE, "trabajo", "panadera", now),
        _fact(ana.id, KOLDO, "dm", "mascota", "un gato", now),
        _fact(ana.id, MAGGIE, HERE, "ciudad", "Deusto", now),
        _fact(ana.id, MAGGIE, ELSEWHERE, "afición", "el remo", now),
    ]
    await store.apply_fact_changes(planted, [], [], [], None, now)
    scene.fake.send_command(GROUP, ANA, "/memoria", "ver", "supergroup")
    shown = (await scene.fake.wait_for_messages(ANA, 2))[-1]["text"]  # privately
    mine, _, maggies = shown.partition(f"Lo que {MAGGIE} aprendió de ti en este grupo:")
    assert maggies, shown  # Maggie's section, apart from Koldo's
    assert "panadera" in mine and "panadera" not in maggies
    assert "Deusto" in maggies and "Deusto" not in mine
    panadera = next(line for line in mine.splitlines() if "panadera" in line)
    assert panadera.endswith("aprendido en este grupo")
    gato = next(line for line in mine.splitlines() if "un gato" in line)
    assert "grupo" not in gato  # told privately: no mark
    assert "el remo" not in shown  # learned by Maggie in another group: not this group's

    # The admin's view: per character, each fact learned in a group names that group.
    views = {c: await scene.app.memory.view(ana, IDS[c], "dm") for c in (KOLDO, MAGGIE)}
    koldo = format_admin_view(views[KOLDO], IDS[KOLDO], ana)
    maggie = format_admin_view(views[MAGGIE], IDS[MAGGIE], ana)
    assert "panadera (told by the user" in koldo
    assert next(x for x in koldo.splitlines() if "panadera" in x).endswith(
        f"learned in telegram:{GROUP}"
    )
    assert next(x for x in maggie.splitlines() if "Deusto" in x).endswith(
        f"learned in telegram:{GROUP}"
    )
    assert next(x for x in maggie.splitlines() if "el remo" in x).endswith(
        "learned in telegram:-100777"
    )
    assert "learned in" not in next(x for x in koldo.splitlines() if "un gato" in x)
