"""The story of each scene in bench/scene.py (issue 37 A): the fake model's chronicler, and the
figures read from the stored chronicles.

The chronicler tells, for the character it is asked for, who spoke of which topic in the lines
it was shown, citing each line, after the previous story condensed into its opening sentence.
On purpose, the late joiner's first attempt at each chronicle also cites a line it never
witnessed (one seen in another character's request): the product must reject that answer and
take the retry. After the run, one person forgets the scene (SceneRoom.forget) and the
chronicles are read again for any sentence citing that person's lines or naming them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bench.scene_script import CAST, LATE, TOPICS
from bot.answers import Caller
from bot.app import App
from memory.engine.tokens import TokenEstimator
from memory.journey.model import Journey, cited_in, sentences_of
from memory.models import Thread
from memory.scene.chronicle import name_forms, names_any
from memory.scene.engine import scene_owner_id, scene_scope
from memory.scene.voices import voices_in

_LINE = re.compile(r"^\[(\d+)\] (<(?:person|character) .*)$")
_PREVIOUS = re.compile(r"Previous story of the scene:\n(.*?)\n\nThe scene's conversation of", re.S)
# A chapter per conversation, and the older ones condensed into the story's opening sentence,
# as the chronicler is told ("condense the oldest into a short opening"): the story's size stays
# near one chapter's, so block 2 does not grow with the scene's age.
CHAPTER_SENTENCES = 3


def _topic(text: str) -> str | None:
    return next((t for t in TOPICS if t.split(" ", 1)[1] in text), None)


@dataclass
class BenchChronicler:
    """write_journey answers for the scene's characters."""

    seen: dict[str, set[int]] = field(default_factory=dict)  # character -> ids shown to it
    traps: int = 0  # unwitnessed citations proposed on purpose
    figures: ChronicleFigures = field(default_factory=lambda: ChronicleFigures())

    def answer(self, character: str, body: str) -> str:
        shown = [(int(m.group(1)), m.group(2)) for m in map(_LINE.match, body.splitlines()) if m]
        ids = {line_id for line_id, _ in shown}
        self.seen.setdefault(character, set()).update(ids)
        told: list[str] = []
        for line_id, line in shown:
            for kind, name, said in voices_in(line):
                topic = _topic(said)
                if kind == "person" and topic is not None and len(told) < CHAPTER_SENTENCES:
                    told.append(f"{name} habló de {topic} {{cite:{line_id}}}.")
        previous = _PREVIOUS.search(body)
        chapters = [] if previous is None or previous.group(1).startswith("(none") else [
            p for p in previous.group(1).split("\n\n") if p.strip()]  # fmt: skip
        if told and chapters:  # the older chapters condensed into their opening sentence
            chapters = sentences_of(chapters[0])[:1]
        if told:
            chapters.append(" ".join(told))
        if character == LATE.id and "previous answer was rejected" not in body:
            unwitnessed = sorted(set().union(*self.seen.values()) - self.seen[character])
            if unwitnessed and chapters:
                self.traps += 1
                trap = f"Antes de llegar, alguien habló del puerto {{cite:{unwitnessed[0]}}}."
                chapters[-1] += f" {trap}"
        return "\n\n".join(chapters)


@dataclass
class ChronicleFigures:
    """Every version of every chronicle the run stored, read after each sweep."""

    cites: int = 0
    cites_in_own_copy: int = 0
    tokens_max: int = 0
    versions: int = 0
    sentences_before_forget: int = 0  # citing or naming the person who then forgets
    sentences_left_after_forget: int = 0
    _read: set[tuple[str, str]] = field(default_factory=set)

    def read(self, character: str, journey: Journey, copy: set[int]) -> None:
        if (character, journey.text) in self._read:
            return
        self._read.add((character, journey.text))
        self.versions += 1
        cited = [int(i) for i in re.findall(r"\{cite:(\d+)\}", journey.text)]
        self.cites += len(cited)
        self.cites_in_own_copy += sum(1 for i in cited if i in copy)
        self.tokens_max = max(self.tokens_max, TokenEstimator().count(journey.text))

    def about(self, journeys: list[Journey], lines: set[int], names: set[str]) -> int:
        """Sentences that cite one of `lines` or name the person."""
        forms = name_forms(names)
        return sum(
            1
            for journey in journeys
            for paragraph in journey.paragraphs
            for s in sentences_of(paragraph)
            if cited_in(s) & lines or names_any(s, forms)
        )

    def figures(self, cap: int, traps: int) -> dict[str, object]:
        return {
            "scene_journey_cites_valid_share": round(self.cites_in_own_copy / self.cites, 4)
            if self.cites
            else None,
            "scene_journey_unwitnessed_cites": self.cites - self.cites_in_own_copy,
            "scene_journey_sentences_left_after_forget": self.sentences_left_after_forget,
            "scene_journey_tokens_max": self.tokens_max,
            "scene_journey_controls": {
                "cap_tokens": cap,
                "versions_stored": self.versions,
                "citations": self.cites,
                "unwitnessed_citations_proposed": traps,
                "sentences_about_the_forgetter_before": self.sentences_before_forget,
            },
        }


async def read_chronicles(app: App, figures: ChronicleFigures, platform: str, channel: str) -> None:
    """Every character's chronicle as stored now, against its own copy of the scene."""
    owner = await app.store.find_user(platform, scene_owner_id(channel))
    if owner is None:
        return
    for role in CAST:
        journey = await app.store.journey(owner.id, role.id)
        if journey is not None:
            thread = Thread(owner.id, role.id, scene_scope(platform, channel))
            copy = {t.id for t in await app.store.turns_after(thread, 0)}
            figures.read(role.id, journey, copy)


async def forget_one(app: App, figures: ChronicleFigures, callers: list[Caller]) -> None:
    """The forget in the group, as `/memoria olvidar` there runs it, of the person the stories
    tell most about; the sentences about them counted before and after, in every story."""
    owner = await app.store.find_user(callers[0].platform, scene_owner_id(callers[0].channel_id))
    assert owner is not None
    scope = scene_scope(callers[0].platform, callers[0].channel_id)
    found = [await app.store.journey(owner.id, role.id) for role in CAST]
    stories = [j for j in found if j is not None]
    about: list[tuple[int, int, set[int], set[str]]] = []
    for index, caller in enumerate(callers):
        person = await app.store.find_user(caller.platform, caller.user_id)
        assert person is not None
        speech = await app.store.scene_speech(person.id, scope)
        names = {person.display_name, *speech.names}
        lines = set(speech.line_ids)
        about.append((figures.about(stories, lines, names), -index, lines, names))
    count, index, lines, names = max(about, key=lambda item: item[:2])
    figures.sentences_before_forget = count
    await app.commands.scenes.forget(callers[-index])
    found = [await app.store.journey(owner.id, role.id) for role in CAST]
    left = figures.about([j for j in found if j is not None], lines, names)
    figures.sentences_left_after_forget = left
