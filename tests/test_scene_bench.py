"""bench/scene.py on a short scene: its keys, the invariants of a scene (the counts that must
be 0, the cap on calls), the controls that show those zeros could have been more, and three
mutants of the product's rules that each count must catch."""

from __future__ import annotations

from typing import Any

import pytest

import bot.scenes as scenes_module
from bench import scene
from bench.scene_script import CAST
from bot.answers import Caller
from bot.scenes import SceneRoom
from cards.character import Character
from memory.journey import checks
from memory.models import Thread, Turn
from memory.scene import facts as scene_facts

# The benches open stores of their own or start processes that may (tests/store_rule.py).
pytestmark = pytest.mark.usefixtures("database_target")

SHORT = {"messages": 40, "conversation": 20, "join_at": 21}  # two conversations, a late join
ZEROS = ("facts_from_other_peoples_words", "private_facts_in_scene_prompts",
         "unwitnessed_lines_in_prompts")  # fmt: skip


def short_run() -> dict[str, Any]:
    result, _ = scene.run(**SHORT)
    return result


def test_the_short_scene_reports_every_figure_and_keeps_the_rules() -> None:
    result = short_run()
    ids = [role.id for role in CAST]
    calls = result["calls_per_human_message"]
    assert 1 <= calls["mean"] <= calls["max"] <= result["engine"]["scene_max_replies"]
    assert sorted(result["prompt_tokens_turn300_vs_turn60"]) == sorted(ids)
    assert all(ratio and ratio > 0 for ratio in result["prompt_tokens_turn300_vs_turn60"].values())
    assert sorted(result["cache_read_share_steady"]) == sorted(ids)
    for name in ZEROS:
        assert result[name] == 0, name
    controls = result["controls"]
    # The zeros mean something: the fake model proposed facts on someone else's words and the
    # product refused each; group facts reach the prompts; the late joiner was asked, and sees
    # what was said after it came.
    assert controls["facts_about_a_person_proposed_on_others_words"] > 0
    assert (
        controls["facts_refused_for_others_words"]
        == (controls["facts_about_a_person_proposed_on_others_words"])
    )
    assert controls["facts_stored"] > 0
    assert controls["group_facts_in_scene_prompts"] > 0
    assert controls["lines_before_join"] > 0 and controls["late_joiner_requests"] > 0
    assert controls["lines_after_join_in_late_prompts"] > 0
    names = {t["name"] for t in result["targets"]}
    assert {"calls_per_human_message.max", *ZEROS} <= names
    assert {f"prompt_tokens_turn300_vs_turn60.{i}" for i in ids} <= names
    assert {"cache_read_share_steady.detective_bilbao",
            "cache_read_share_steady.lighthouse_keeper"} <= names  # fmt: skip
    passed = {t["name"]: t["pass"] for t in result["targets"]}
    assert passed["calls_per_human_message.max"] and all(passed[name] for name in ZEROS)


def test_the_same_seed_gives_the_same_figures() -> None:
    first, second = short_run(), short_run()
    for result in (first, second):
        result.pop("run_seconds")
    assert first == second


def _everyones_lines_are_own(turns: list[Turn], person_id: int) -> list[Turn]:
    return [turn for turn in turns if turn.role == "user"]


async def _everyone_present(self: SceneRoom, caller: Caller) -> tuple[Any, ...]:
    book = self._companion.characters
    present: list[Character] = [c for role in CAST if (c := book.get(role.id)) is not None]
    return tuple(present)


@pytest.mark.parametrize(
    ("count", "target", "mutant"),
    [
        # a person's own lines are everyone's: facts about them may rest on anyone's words
        # (the check of the evidence and the turns planning accepts both read own_lines)
        ("facts_from_other_peoples_words", scene_facts, ("own_lines",
                                                         _everyones_lines_are_own)),
        # a scene's thread shows the facts learned in private chats
        ("private_facts_in_scene_prompts", Thread, ("fact_scope", property(lambda t: "dm"))),
        # the third character is in the scene (and hears everything) before it joins
        ("unwitnessed_lines_in_prompts", SceneRoom, ("cast", _everyone_present)),
    ],
)  # fmt: skip
def test_each_count_catches_its_rule_broken(
    monkeypatch: pytest.MonkeyPatch, count: str, target: Any, mutant: tuple[str, Any]
) -> None:
    monkeypatch.setattr(target, *mutant)
    assert short_run()[count] > 0


def test_the_story_of_each_scene_keeps_its_rules_and_the_zeros_mean_something() -> None:
    result = short_run()
    assert result["scene_journey_cites_valid_share"] == 1.0
    assert result["scene_journey_unwitnessed_cites"] == 0
    assert result["scene_journey_sentences_left_after_forget"] == 0
    cap = result["engine"]["scene_journey_max_tokens"]
    assert 0 < result["scene_journey_tokens_max"] <= cap
    controls = result["scene_journey_controls"]
    # the late joiner's chronicler proposed unwitnessed citations, and the person who forgot
    # the scene was in the stories before
    assert controls["unwitnessed_citations_proposed"] > 0 and controls["versions_stored"] > 0
    assert controls["sentences_about_the_forgetter_before"] > 0
    names = {t["name"] for t in result["targets"]}
    assert {"scene_journey_cites_valid_share", "scene_journey_tokens_max"} <= names


async def _forget_nothing(*args: Any, **kwargs: Any) -> int:
    return 0


@pytest.mark.parametrize(
    ("count", "target", "mutant"),
    [
        # an unwitnessed (or invented) citation is accepted
        ("scene_journey_unwitnessed_cites", checks, ("known_ids", lambda text, allowed: None)),
        # a forget in the group leaves the stories as they were
        ("scene_journey_sentences_left_after_forget", scenes_module,
         ("forget_in_chronicles", _forget_nothing)),
    ],
)  # fmt: skip
def test_each_story_count_catches_its_rule_broken(
    monkeypatch: pytest.MonkeyPatch, count: str, target: Any, mutant: tuple[str, Any]
) -> None:
    monkeypatch.setattr(target, *mutant)
    assert short_run()[count] > 0
