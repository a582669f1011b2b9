"""What a scene's stored copies tell a process that did not see the past turns (memory/scene/
past_turns.py). A turn run again after its process died (a worker killed mid-turn, Telegram
redelivering the updates of a crashed process): the characters that had not spoken yet speak,
the lines already stored are said again with no model call, and a turn the scene went past is
not answered twice. Each test runs the real engine twice on one database, as a crash and its
successor would, with the fake Anthropic API answering."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.app import open_app
from bot.config import Settings
from bot.inbox.sends import drop_stale_sessions
from memory.engine.llm import TextSink
from memory.models import Reply
from memory.scene.engine import SceneMessage, scene_owner_id
from memory.store import is_postgres
from memory.store.inbox import SCENE_PAIR
from tests.conftest import FakeClock, make_settings
from tests.fakes.anthropic_api import FakeAnthropic, Text, route_of
from tests.fakes.anthropic_api import _default as fake_default
from tests.fault_helpers import query

KOLDO, MAGGIE = "detective_bilbao", "lighthouse_keeper"
NAMES = {KOLDO: "Koldo Arrieta", MAGGIE: "Maggie Thornton"}
GROUP = "-100777"


class Crash(Exception):
    """The process dies here."""


@dataclass
class Group:
    """The group as the engine's sink: what each character said, in order; `dies_before` makes
    the process die right before that character's line is asked of the model."""

    dies_before: str | None = None
    dies_after_sending: str | None = None
    said: list[tuple[str, str]] = field(default_factory=list)

    def live(self, character_id: str) -> TextSink | None:
        if character_id == self.dies_before:
            raise Crash(character_id)
        return None

    async def send(self, character_id: str, reply: Reply) -> None:
        self.said.append((character_id, reply.text))
        if character_id == self.dies_after_sending:
            raise Crash(character_id)


def speaker_answers(llm: FakeAnthropic) -> list[str]:
    """Each reply call's character, in order; lines say who speaks and how many times."""
    spoken: list[str] = []

    def answer(body: dict[str, Any]) -> Any:
        if route_of(body) != "reply":
            return fake_default(body)
        first = body["system"][0]["text"].split("\n", 1)[0]
        who = next(c for c, name in NAMES.items() if name in first)
        spoken.append(who)
        return Text(f"{NAMES[who].split()[0]} habla ({spoken.count(who)}).")

    llm.default = answer
    return spoken


def message(
    text: str, message_id: str, group: str = GROUP, person: tuple[str, str] = ("1001", "Ana")
) -> SceneMessage:
    who, name = person
    return SceneMessage(
        "telegram", group, who, name, text, (KOLDO, MAGGIE), platform_message_id=message_id
    )


async def run(settings: Settings, clock: FakeClock, group: Group, *said: SceneMessage) -> None:
    """One process's life: the messages, one after the other, until it ends or dies."""
    async with open_app(settings, clock=clock, start_scheduler=False) as app:
        for one in said:
            try:
                await app.companion.scene(one, group)
            except Crash:
                return


def copy_of(settings: Settings, character_id: str) -> list[tuple[str, str]]:
    """(speaker, text) of every line in one character's copy of the scene, oldest first."""
    rows = query(
        settings.database_target,
        "SELECT t.role, COALESCE(t.speaker_character, ''), t.text FROM turns t"
        " JOIN users u ON u.id = t.user_id WHERE u.platform_user_id = ? AND t.character_id = ?"
        " AND t.role <> 'tool' ORDER BY t.id",
        scene_owner_id(GROUP),
        character_id,
    )
    return [("self" if role == "assistant" else who or "person", text) for role, who, text in rows]


def finished_copy(asked: SceneMessage, holder: str) -> list[tuple[str, str]]:
    """A character's copy of a turn answered by Koldo, then Maggie: each line once."""
    return [("person", asked.text)] + [
        ("self" if who == holder else who, f"{NAMES[who].split()[0]} habla (1).")
        for who in (KOLDO, MAGGIE)
    ]


async def test_a_turn_cut_after_its_first_line_is_finished_without_asking_that_line_again(
    settings: Settings, clock: FakeClock, fake_anthropic: FakeAnthropic
) -> None:
    spoken = speaker_answers(fake_anthropic)
    asked = message("Koldo y Maggie, ¿qué pasó anoche?", "5")
    cut = Group(dies_before=MAGGIE)
    await run(settings, clock, cut, asked)
    assert cut.said == [(KOLDO, "Koldo habla (1).")] and spoken == [KOLDO]
    successor = Group()
    await run(settings, clock, successor, asked)
    # Koldo's line is said again as it was stored (a worker's send record skips it); only
    # Maggie, who had not spoken, is asked of the model.
    assert successor.said == [(KOLDO, "Koldo habla (1)."), (MAGGIE, "Maggie habla (1).")]
    assert spoken == [KOLDO, MAGGIE]
    assert copy_of(settings, KOLDO) == finished_copy(asked, KOLDO)
    assert copy_of(settings, MAGGIE) == finished_copy(asked, MAGGIE)


async def test_a_line_stored_but_not_yet_witnessed_reaches_the_others_copies_once(
    settings: Settings, clock: FakeClock, fake_anthropic: FakeAnthropic
) -> None:
    spoken = speaker_answers(fake_anthropic)
    asked = message("Koldo y Maggie, ¿qué pasó anoche?", "5")
    await run(settings, clock, Group(dies_before=MAGGIE), asked)
    # As if the process had died between storing Koldo's line and copying it to Maggie.
    [(witnessed,)] = query(
        settings.database_target,
        "SELECT id FROM turns WHERE character_id = ? AND speaker_character = ?",
        MAGGIE,
        KOLDO,
    )
    async with open_app(settings, clock=clock, start_scheduler=False) as app:
        # The two stores' raw hooks differ (SQLite runs its own SQL functions in triggers).
        if is_postgres(settings.database_target):
            await app.store._execute("DELETE FROM turns WHERE id = $1", witnessed)  # type: ignore[attr-defined]
        else:
            await app.store._execute("DELETE FROM turns WHERE id = ?", (witnessed,))  # type: ignore[attr-defined]
    await run(settings, clock, Group(), asked)
    assert spoken == [KOLDO, MAGGIE]
    assert copy_of(settings, MAGGIE) == finished_copy(asked, MAGGIE)


async def test_a_turn_cut_before_any_line_is_answered_by_the_successor(
    settings: Settings, clock: FakeClock, fake_anthropic: FakeAnthropic
) -> None:
    spoken = speaker_answers(fake_anthropic)
    asked = message("Maggie, ¿viste algo?", "9")
    cut = Group(dies_before=MAGGIE)
    await run(settings, clock, cut, asked)
    assert cut.said == [] and spoken == []  # stored in both copies, never answered
    successor = Group()
    await run(settings, clock, successor, asked)
    assert successor.said == [(MAGGIE, "Maggie habla (1).")]
    assert [who for who, _ in copy_of(settings, MAGGIE)] == ["person", "self"]


async def test_a_turn_the_scene_went_past_is_not_answered_again(
    settings: Settings, clock: FakeClock, fake_anthropic: FakeAnthropic
) -> None:
    spoken = speaker_answers(fake_anthropic)
    first, second = message("Koldo, hola", "1"), message("Koldo, ¿y el café?", "2")
    await run(settings, clock, Group(), first, second)
    assert spoken == [KOLDO, KOLDO]
    again = Group()
    await run(settings, clock, again, first)  # a redelivery of a message answered long ago
    assert again.said == [] and spoken == [KOLDO, KOLDO]
    assert len(copy_of(settings, KOLDO)) == 4


async def test_a_turn_answered_whole_is_said_again_with_no_model_call(
    settings: Settings, clock: FakeClock, fake_anthropic: FakeAnthropic
) -> None:
    spoken = speaker_answers(fake_anthropic)
    asked = message("Koldo y Maggie, ¿qué pasó anoche?", "5")
    cut = Group(dies_after_sending=MAGGIE)  # died before its messages were marked answered
    await run(settings, clock, cut, asked)
    successor = Group()
    await run(settings, clock, successor, asked)
    assert (
        successor.said == cut.said == [(KOLDO, "Koldo habla (1)."), (MAGGIE, "Maggie habla (1).")]
    )
    assert spoken == [KOLDO, MAGGIE]
    assert len(copy_of(settings, KOLDO)) == len(copy_of(settings, MAGGIE)) == 3


async def test_after_a_restart_nobody_named_goes_to_whom_the_person_last_spoke_with(
    tmp_path: Path, clock: FakeClock, fake_anthropic: FakeAnthropic
) -> None:
    settings = make_settings(tmp_path, fake_anthropic, scene_seed=3)
    spoken = speaker_answers(fake_anthropic)
    bob = ("1003", "Bob")
    partners = (MAGGIE, KOLDO, MAGGIE, MAGGIE, KOLDO, KOLDO, MAGGIE, KOLDO)
    for index, partner in enumerate(partners):
        group, other = f"-100{index}", other_of(partner)
        first_name = NAMES[partner].split()[0]
        await run(settings, clock, Group(), message(f"{first_name}, hola", "1", group))
        # Someone else speaks with the other character meanwhile; then every process restarts.
        other_name = NAMES[other].split()[0]
        await run(settings, clock, Group(), message(f"{other_name}, ¿y tú?", "2", group, bob))
        await run(settings, clock, Group(), message("¿Y ahora qué hacemos?", "3", group))
    assert spoken == [c for partner in partners for c in (partner, other_of(partner), partner)]


def other_of(character_id: str) -> str:
    return KOLDO if character_id == MAGGIE else MAGGIE


async def test_after_another_worker_answered_the_scene_who_spoke_last_is_read_again(
    settings: Settings, clock: FakeClock, fake_anthropic: FakeAnthropic
) -> None:
    spoken = speaker_answers(fake_anthropic)
    async with (
        open_app(settings, clock=clock, start_scheduler=False) as this,
        open_app(settings, clock=clock, start_scheduler=False) as other,
    ):
        await this.companion.scene(message("Maggie, hola", "1"), Group())
        await other.companion.scene(message("Koldo, hola", "2"), Group())
        # The inbox hands the scene back to this worker, which knows another answered it.
        await drop_stale_sessions(this, f"telegram:{SCENE_PAIR}:{GROUP}")
        await this.companion.scene(message("¿Y ahora qué hacemos?", "3"), Group())
    assert spoken == [MAGGIE, KOLDO, KOLDO]
