"""The summariser is asked for events in the past tense, the form the memory gate keeps: the
character as the subject of a verb in the present reads as a standing rule and is dropped."""

from __future__ import annotations

from pathlib import Path

from bot.app import App
from cards.character import CharacterBook
from memory.integrity.gate import check_claim
from memory.summary.rolling import past_example
from tests.fakes.anthropic_api import FakeAnthropic
from tests.helpers import dm

CHARACTERS = Path(__file__).resolve().parent.parent / "characters"


def test_the_example_the_summariser_is_given_is_kept_and_its_present_twin_is_not() -> None:
    book = CharacterBook.load(CHARACTERS)
    for character in book.all():
        example = past_example(character.name)
        names = character.names_in_memory()
        assert example.startswith(character.name.split()[0])
        assert check_claim(example, names=names, learned=True) is None, example
        present = example.replace(" told ", " tells ")
        assert present != example
        assert check_claim(present, names=names, learned=True) is not None, present


async def test_the_summary_request_asks_for_the_past_tense(
    app: App, fake_anthropic: FakeAnthropic
) -> None:
    for i in range(app.settings.window_trigger_turns // 2):
        await app.companion.handle(dm(f"mensaje {i}"))
    await app.companion.drain()
    bodies = fake_anthropic.bodies("write_summary")
    assert bodies, "no compaction ran"
    system = " ".join(block["text"] for block in bodies[0]["system"])
    assert past_example("Koldo Arrieta") in system and "past tense" in system
