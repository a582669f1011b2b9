"""Scenes (issue 31) on the fake Telegram, with the real python-telegram-bot and the real engine
answering through the fake Anthropic API: a group is one shared conversation with one or
several characters, each knowing only what it witnessed."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.telegram_adapter import TelegramAdapter
from bot.app import App, open_app
from bot.texts import text
from memory.engine.settings import APOLOGY
from memory.models import Fact, Summary, SummaryFields, Thread
from memory.scene.engine import scene_owner_id, scene_scope
from memory.scene.voices import voices_in
from memory.search.terms import query_terms as terms_of
from tests.conftest import CHARACTERS, FakeClock, make_settings
from tests.fakes.anthropic_api import Error, FakeAnthropic, Text, ToolUse, route_of
from tests.fakes.anthropic_api import _default as fake_default
from tests.fakes.telegram_api import FakeTelegram
from tests.fault_helpers import query, until

ANA, BEA, BOB = 1001, 1002, 1003
GROUP = -100_555
KOLDO, MAGGIE, ITZIAR = "Koldo Arrieta", "Maggie Thornton", "Itziar Goikoetxea"
IDS = {KOLDO: "detective_bilbao", MAGGIE: "lighthouse_keeper", ITZIAR: "tabernera"}
SCOPE = scene_scope("telegram", str(GROUP))


@dataclass
class Scene:
    fake: FakeTelegram
    llm: FakeAnthropic
    app: App
    lines: dict[str, list[str]] = field(default_factory=dict)  # what each character will say

    def speaker_of(self, body: dict[str, Any]) -> str:
        first = body["system"][0]["text"].split("\n", 1)[0]
        return next(name for name in IDS if name in first)

    def answer(self, body: dict[str, Any]) -> Any:
        if route_of(body) != "reply":
            return fake_default(body)
        name = self.speaker_of(body)
        queued = self.lines.get(name)
        return Text(queued.pop(0) if queued else f"Soy {name.split()[0]}.")

    def requests_of(self, name: str) -> list[dict[str, Any]]:
        return [b for b in self.llm.bodies() if self.speaker_of(b) == name]

    def say(self, user: int, text: str, **kw: Any) -> None:
        names = {ANA: "Ana", BEA: "Bea", BOB: "Bob"}
        self.fake.send_group_text(GROUP, user, text, first_name=names[user], **kw)

    async def group_lines(self, count: int) -> list[str]:
        return [m["text"] for m in await self.fake.wait_for_messages(GROUP, count)]


def cast_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "characters"
    folder.mkdir()
    for name in ("detective_bilbao.yaml", "lighthouse_keeper.yaml"):
        shutil.copy(CHARACTERS / name, folder / name)
    shutil.copy(Path(__file__).parent / "scene_cast" / "tabernera.yaml", folder / "tabernera.yaml")
    return folder


@pytest.fixture
async def scene(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock, request: pytest.FixtureRequest
) -> AsyncIterator[Scene]:
    overrides: dict[str, Any] = getattr(request, "param", {})
    async with FakeTelegram() as fake:
        folder = cast_folder(tmp_path)
        async with scene_on(fake, tmp_path, fake_anthropic, clock, folder, ANA, **overrides) as on:
            yield on


@asynccontextmanager
async def scene_on(
    fake: FakeTelegram,
    tmp_path: Path,
    fake_anthropic: FakeAnthropic,
    clock: FakeClock,
    characters: Path,
    operator: int,
    **overrides: Any,
) -> AsyncIterator[Scene]:
    """The real app and Telegram adapter over `fake`, the operator in ADMIN_IDS, the fake
    model answering each character in its voice (shared with tests/test_community_telegram.py)."""
    settings = make_settings(
        tmp_path,
        fake_anthropic,
        telegram_bot_token=fake.token,
        telegram_api_base_url=fake.url,
        characters_dir=characters,
        default_character="detective_bilbao",
        admin_ids=[f"telegram:{operator}"],
        scene_seed=7,
        **overrides,
    )
    async with open_app(settings, clock=clock, start_scheduler=False) as app:
        adapter = TelegramAdapter(settings, app.commands)
        await adapter.start()
        staged = Scene(fake, fake_anthropic, app)
        fake_anthropic.default = staged.answer
        try:
            yield staged
        finally:
            await adapter.stop()


async def cast_of_three(scene: Scene) -> None:
    """Maggie, then Itziar, join Koldo's scene (each added once the previous one has joined:
    commands of one chat may run side by side)."""
    for count, (character, name) in enumerate(
        (("lighthouse_keeper", MAGGIE), ("tabernera", ITZIAR)), start=1
    ):
        scene.fake.send_command(GROUP, ANA, "/escena", f"añadir {character}", "supergroup")
        joined = await scene.group_lines(count)
        assert joined[-1].startswith(f"{name} entra en la escena")


async def test_a_character_named_answers_and_its_line_is_headed_by_its_name(
    scene: Scene,
) -> None:
    await cast_of_three(scene)
    scene.lines[MAGGIE] = ["Tea first, then stories."]
    scene.say(ANA, "Maggie, ¿qué tal la librería?")
    lines = await scene.group_lines(3)
    assert lines[-1] == f"{MAGGIE}\nTea first, then stories."
    assert [scene.speaker_of(b) for b in scene.llm.bodies()] == [MAGGIE]  # only the one named


async def test_a_reply_to_a_characters_line_is_answered_by_that_character(scene: Scene) -> None:
    await cast_of_three(scene)
    scene.say(ANA, "Hola, Itziar")
    itziar_line = (await scene.fake.wait_for_messages(GROUP, 3))[-1]
    assert itziar_line["text"].startswith(ITZIAR)
    scene.say(BEA, "¿y tú qué opinas?", reply_to_bot_message_id=itziar_line["message_id"])
    lines = await scene.group_lines(4)
    assert lines[-1].startswith(ITZIAR)
    assert [scene.speaker_of(b) for b in scene.llm.bodies()] == [ITZIAR, ITZIAR]


async def test_nobody_named_the_last_partner_answers_and_the_cap_holds(scene: Scene) -> None:
    await cast_of_three(scene)
    scene.say(ANA, "Koldo, una pregunta", mention_bot=True)
    await scene.group_lines(3)
    scene.say(ANA, "¿y ahora qué hacemos?", mention_bot=True)  # names nobody: Koldo again
    await scene.group_lines(4)
    assert [scene.speaker_of(b) for b in scene.llm.bodies()] == [KOLDO, KOLDO]
    scene.say(BEA, "Koldo, Maggie, Itziar: ¿quién invita?")  # three named, two may speak
    lines = await scene.group_lines(6)
    assert [line.split("\n")[0] for line in lines[-2:]] == [KOLDO, MAGGIE]
    await scene.app.companion.drain()
    assert len(scene.requests_of(ITZIAR)) == 0


async def test_a_character_named_by_another_answers_within_the_cap_and_no_loop(
    scene: Scene,
) -> None:
    await cast_of_three(scene)
    scene.lines[KOLDO] = ["Pregúntale a Itziar, ella lo sabe todo."]
    scene.lines[ITZIAR] = ["Koldo, no me líes. Bob, ¿otra ronda?"]
    scene.say(BOB, "Koldo, ¿quién robó la caja?")
    lines = await scene.group_lines(4)
    assert [line.split("\n")[0] for line in lines[-2:]] == [KOLDO, ITZIAR]
    await scene.app.companion.drain()
    # Itziar named Koldo back: he has spoken this turn, and the cap (2) is reached anyway.
    assert [scene.speaker_of(b) for b in scene.llm.bodies()] == [KOLDO, ITZIAR]
    itziar_request = scene.requests_of(ITZIAR)[0]
    said = [b["text"] for m in itziar_request["messages"] for b in m["content"] if "text" in b]
    assert f'<character name="{KOLDO}">Pregúntale a Itziar, ella lo sabe todo.</character>' in said
    assert any(s.endswith('name="Bob">Koldo, ¿quién robó la caja?</person>') for s in said)


async def test_a_character_added_midway_witnessed_nothing_before(scene: Scene) -> None:
    scene.say(ANA, "Koldo, mi contraseña del portal es el 4521", mention_bot=True)
    await scene.group_lines(1)
    scene.fake.send_command(GROUP, ANA, "/escena", "añadir lighthouse_keeper", "supergroup")
    await scene.group_lines(2)
    scene.say(BEA, "Maggie, ¿qué te ha contado Ana?")
    await scene.group_lines(3)
    request = scene.requests_of(MAGGIE)[0]
    assert "4521" not in str(request) and "contraseña" not in str(request)
    # Nor can she look it up: the first line's id is another thread's, "not found".
    owner = await scene.app.store.find_user("telegram", scene_owner_id(str(GROUP)))
    assert owner is not None
    koldo_copy = await scene.app.store.turns_after(Thread(owner.id, IDS[KOLDO], SCOPE), 0)
    first_id = koldo_copy[0].id
    maggie = Thread(owner.id, IDS[MAGGIE], SCOPE)
    assert await scene.app.store.thread_turns_by_ids(maggie, [first_id]) == []
    maggie_copy = await scene.app.store.turns_after(maggie, 0)
    assert maggie_copy[0].speaker is not None and maggie_copy[0].speaker.name == "Bea"
    assert maggie_copy[0].text == "Maggie, ¿qué te ha contado Ana?"


async def test_private_facts_never_reach_the_scene_group_facts_do(
    scene: Scene, clock: FakeClock
) -> None:
    now = clock()
    ana = await scene.app.store.upsert_user("telegram", str(ANA), "Ana", now)
    private = _fact(ana.id, "dm", "ciudad", "Getxo", now)
    learned_here = _fact(ana.id, f"group:telegram:{GROUP}", "trabajo", "panadera", now)
    await scene.app.store.apply_fact_changes([private, learned_here], [], [], [], None, now)
    scene.say(ANA, "Koldo, ¿te acuerdas de mí?", mention_bot=True)
    await scene.group_lines(1)
    people = scene.requests_of(KOLDO)[0]["system"][1]["text"]
    assert "panadera" in people and "Ana" in people  # labelled by person
    assert "Getxo" not in str(scene.requests_of(KOLDO)[0])


def _fact(user_id: int, scope: str, key: str, value: str, now: Any) -> Fact:
    return Fact(
        0, user_id, "detective_bilbao", "semantic", key, value, "stated", scope, (),
        "days:180", None, now, now, None,
    )  # fmt: skip


async def test_a_fact_from_someone_elses_words_is_refused(scene: Scene, clock: FakeClock) -> None:
    scene.say(BOB, "Koldo, Ana me dijo que tiene 12 años", mention_bot=True)
    await scene.group_lines(1)
    scene.say(ANA, "Koldo, yo soy panadera", mention_bot=True)
    await scene.group_lines(2)
    turns = query(
        scene.app.settings.database_target,
        "SELECT id, speaker_name FROM turns WHERE scope = ? AND speaker_name IS NOT NULL",
        SCOPE,
    )
    bob_line = next(i for i, name in turns if name == "Bob")
    ana_line = next(i for i, name in turns if name == "Ana")

    def extraction(body: dict[str, Any]) -> Any:
        if "profile of Ana" not in str(body["messages"]):
            return ToolUse("record_profile", {"operations": []})  # Bob said nothing of himself
        return ToolUse("record_profile", {"operations": [
            # About Ana, resting on Bob's words: dropped alone.
            {"op": "add", "kind": "semantic", "key": "age", "value": "12", "origin": "stated",
             "evidence": [bob_line]},
            {"op": "add", "kind": "semantic", "key": "job", "value": "panadera",
             "origin": "stated", "evidence": [ana_line]},
        ]})  # fmt: skip

    scene.llm.queue(extraction, extraction, route="record_profile")
    clock.advance(hours=2)
    await scene.app.sweep()  # ends the scene's conversation, extracts each person's facts
    await scene.app.companion.drain()
    facts = query(scene.app.settings.database_target, "SELECT key, value, user_id FROM facts")
    ana = await scene.app.store.find_user("telegram", str(ANA))
    assert ana is not None
    assert [(k, v) for k, v, _ in facts] == [("job", "panadera")]
    assert facts[0][2] == ana.id
    rejected = query(scene.app.settings.database_target, "SELECT reason FROM memory_rejections")
    assert any("someone else's words" in r for (r,) in rejected)


async def test_one_participants_forget_removes_their_lines_everywhere_and_nothing_else(
    scene: Scene, clock: FakeClock
) -> None:
    scene.fake.send_command(GROUP, ANA, "/escena", "añadir lighthouse_keeper", "supergroup")
    await scene.group_lines(1)
    scene.say(ANA, "Koldo, soy panadera en Deusto")
    await scene.group_lines(2)
    scene.say(BEA, "Maggie, yo vivo en Algorta")
    await scene.group_lines(3)
    store, now = scene.app.store, clock()
    owner = await store.find_user("telegram", scene_owner_id(str(GROUP)))
    ana = await store.find_user("telegram", str(ANA))
    bea = await store.find_user("telegram", str(BEA))
    assert owner is not None and ana is not None and bea is not None
    koldo = Thread(owner.id, IDS[KOLDO], SCOPE)
    copy = await store.turns_after(koldo, 0)
    ana_line = next(t.id for t in copy if t.speaker and t.speaker.name == "Ana")
    bea_line = next(t.id for t in copy if t.speaker and t.speaker.name == "Bea")
    claims = SummaryFields(
        established_facts=(
            f"Ana es panadera {{cite:{ana_line}}}",
            f"Bea vive en Algorta {{cite:{bea_line}}}",
        )
    )
    await store.save_summary(koldo, Summary(claims, frozenset({ana_line, bea_line}), bea_line, now))
    group = f"group:telegram:{GROUP}"
    planted = [_fact(ana.id, group, "trabajo", "panadera", now)]
    planted.append(_fact(bea.id, group, "ciudad", "Algorta", now))
    await store.apply_fact_changes(planted, [], [], [], None, now)
    scene.fake.send_command(GROUP, ANA, "/memoria", "olvidar", "supergroup")
    pointer = (await scene.group_lines(4))[-1]
    assert pointer == text("es", "start_private")  # she never opened a private chat
    scene.fake.send_command(ANA, ANA, "/start")
    await scene.fake.wait_for_messages(ANA, 1)
    scene.fake.send_command(GROUP, ANA, "/memoria", "olvidar", "supergroup")
    asked = (await scene.fake.wait_for_messages(ANA, 2))[-1]  # in the private chat
    assert asked["text"] == text("es", "scene_ask_forget")
    scene.fake.press_button(ANA, ANA, asked["message_id"], f"mem:forget:@{GROUP}")
    await scene.fake.wait_until(lambda: bool(scene.fake.edited_messages))
    assert scene.fake.edited_messages[-1]["text"].startswith("Hecho: he borrado tus mensajes")
    database = scene.app.settings.database_target
    speakers = query(
        database, "SELECT DISTINCT speaker_name FROM turns WHERE speaker_id IS NOT NULL"
    )
    assert [name for (name,) in speakers] == ["Bea"]  # Ana's lines gone from both copies
    summary = await store.latest_summary(koldo)
    assert summary is not None
    assert summary.fields.established_facts == (f"Bea vive en Algorta {{cite:{bea_line}}}",)
    assert [f.value for f in await store.facts(ana.id, IDS[KOLDO])] == []
    assert [f.value for f in await store.facts(bea.id, IDS[KOLDO])] == ["Algorta"]
    # Nor can search find her words in either copy.
    for character in (IDS[KOLDO], IDS[MAGGIE]):
        found = await store.search_exchanges(owner.id, character, SCOPE, terms_of("panadera"), 5)
        assert found[1] == []


async def test_a_burst_from_several_people_is_one_turn_of_the_scene_in_arrival_order(
    scene: Scene,
) -> None:
    released = asyncio.Event()

    async def held(body: dict[str, Any]) -> Any:
        await released.wait()
        return Text("Uno por uno, por favor.")

    scene.llm.queue(held)
    scene.say(ANA, "Koldo, ¿estás?", mention_bot=True)
    await until(lambda: len(scene.llm.bodies()) == 1, what="the first turn's request")
    for user, words in ((BEA, "yo primero"), (BOB, "no, yo"), (ANA, "¡silencio!")):
        scene.say(user, words, mention_bot=True)
    await until(lambda: scene.app.companion.messages_waiting() == 3, what="three waiting")
    released.set()
    lines = await scene.group_lines(2)
    assert len(scene.llm.bodies()) == 2  # the three are answered by one turn
    said = [b["text"] for m in scene.llm.bodies()[1]["messages"] for b in m["content"]]
    heard = [
        v for s in said for v in voices_in(s) if v[2] in ("yo primero", "no, yo", "¡silencio!")
    ]
    assert [(name, words) for _, name, words in heard] == [
        ("Bea", "yo primero"),
        ("Bob", "no, yo"),
        ("Ana", "¡silencio!"),
    ]
    assert lines[-1].startswith(KOLDO)


async def test_an_export_carries_the_persons_own_scene_lines_and_an_import_puts_none_back(
    scene: Scene, clock: FakeClock
) -> None:
    scene.say(ANA, "Koldo, apunta: trabajo en el puerto", mention_bot=True)
    await scene.group_lines(1)
    scene.say(BEA, "Koldo, y yo en la ría", mention_bot=True)
    await scene.group_lines(2)
    ana = await scene.app.store.find_user("telegram", str(ANA))
    assert ana is not None
    exported = await scene.app.memory.export(ana, IDS[KOLDO])
    # Hers alone, never Bea's.
    texts = [line["text"] for line in exported["scene_lines"]]
    assert texts == ["Koldo, apunta: trabajo en el puerto"]
    other = await scene.app.store.upsert_user("telegram", "2002", "Otra", clock())
    counts = await scene.app.memory.import_(other, IDS[KOLDO], exported)
    assert counts.get("turns", 0) == 0
    database = scene.app.settings.database_target
    placed = query(database, "SELECT count(*) FROM turns WHERE speaker_id = ?", other.id)
    assert placed == [(0,)]


async def test_forgetting_one_character_takes_what_it_witnessed_and_no_other_copy(
    scene: Scene,
) -> None:
    scene.fake.send_command(GROUP, ANA, "/escena", "añadir lighthouse_keeper", "supergroup")
    await scene.group_lines(1)
    scene.say(ANA, "Koldo, Maggie: me mudo a Getxo")
    await scene.group_lines(3)
    ana = await scene.app.store.find_user("telegram", str(ANA))
    assert ana is not None
    await scene.app.memory.forget(ana, IDS[KOLDO])  # her /memoria olvidar with Koldo, privately
    database = scene.app.settings.database_target
    left = query(database, "SELECT character_id FROM turns WHERE speaker_id = ?", ana.id)
    assert left == [(IDS[MAGGIE],)]  # Maggie's memory of the scene is hers to forget


async def test_in_a_group_reset_is_the_scenes_and_incognito_and_switching_are_refused(
    scene: Scene,
) -> None:
    scene.say(BEA, "Koldo, hola", mention_bot=True)
    await scene.group_lines(1)
    scene.fake.send_command(GROUP, BEA, "/incognito", "", "supergroup")
    assert (await scene.group_lines(2))[-1] == text("es", "incognito_group")
    scene.fake.send_command(GROUP, BEA, "/personaje", "cambiar lighthouse_keeper", "supergroup")
    assert (await scene.group_lines(3))[-1] == text("es", "scene_switch")
    scene.fake.send_command(GROUP, ANA, "/reset", "", "supergroup")  # an admin
    assert (await scene.group_lines(4))[-1] == text("es", "reset")
    open_scenes = query(
        scene.app.settings.database_target,
        "SELECT count(*) FROM conversations WHERE scope = ? AND ended_at IS NULL",
        SCOPE,
    )
    assert open_scenes == [(0,)]


async def test_a_failed_model_call_keeps_the_line_and_the_character_apologises(
    scene: Scene,
) -> None:
    scene.llm.queue(Error(500))
    scene.say(ANA, "Koldo, ¿me oyes?", mention_bot=True)
    [line] = await scene.group_lines(1)
    assert line == f"{KOLDO}\n{APOLOGY['es']}"
    stored = query(
        scene.app.settings.database_target,
        "SELECT text FROM turns WHERE scope = ? AND speaker_name = 'Ana'",
        SCOPE,
    )
    assert stored == [("Koldo, ¿me oyes?",)]


async def test_a_character_that_left_is_said_to_have_left_not_met_with_silence(
    scene: Scene,
) -> None:
    """A reply to the line of a character no longer in the scene, or a message naming it,
    gets one line saying so, in the writer's language; nothing is stored, no model call."""
    await cast_of_three(scene)
    scene.say(ANA, "Hola, Itziar")
    itziar_line = (await scene.fake.wait_for_messages(GROUP, 3))[-1]
    assert itziar_line["text"].startswith(ITZIAR)
    scene.fake.send_command(GROUP, ANA, "/escena", "quitar tabernera", "supergroup")
    assert (await scene.group_lines(4))[-1].startswith(f"{ITZIAR} sale de la escena")
    calls = len(scene.llm.bodies())
    scene.fake.languages[BOB] = "en-GB"
    scene.say(BOB, "and you?", reply_to_bot_message_id=itziar_line["message_id"])
    gone_en = f"{ITZIAR} is no longer in this scene; /scene lists who is."
    assert (await scene.group_lines(5))[-1] == gone_en
    scene.say(BEA, "Itziar, ¿sigues ahí?")
    gone_es = f"{ITZIAR} ya no está en esta escena; /escena dice quién está."
    assert (await scene.group_lines(6))[-1] == gone_es
    assert len(scene.llm.bodies()) == calls  # nobody was asked to answer
    scene.say(BEA, "Maggie, ¿y tú?")  # a character still present answers as before
    assert (await scene.group_lines(7))[-1].startswith(MAGGIE)
    database = scene.app.settings.database_target
    texts = [t for (t,) in query(database, "SELECT text FROM turns WHERE role = 'user'")]
    assert "and you?" not in texts and "Itziar, ¿sigues ahí?" not in texts
