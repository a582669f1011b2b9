"""What bench/scene.py found beyond its targets: whether the memory built from a scene keeps
who said what.

- The summariser's input: every line of a character's copy that is not its own is a "user"
  turn there; the compaction request lists each as `[id] date user: <person ...>text</person>`
  or `<character ...>` (memory/summary/rolling.py, format_turns; memory/scene/voices.py).
  Counted: such lines, those that were another character's words, and those that carry
  their speaker's name.
- The recalled fragments (block 5): each is rendered with the two names of a private thread
  (memory/engine/responder.py, `_names`: the thread owner's display name, "User" for a scene,
  and the character's). Counted: fragment lines, and those shown under "User" although a
  person or another character said them.
"""

from __future__ import annotations

import re
from typing import Any

from bench.scene_run import SceneRun
from bench.scene_script import CAST, PEOPLE
from bench.scripted_llm import parse_turns
from memory.scene.voices import voices_in

FRAGMENT_LINE = re.compile(r"^\[\d{4}-\d{2}-\d{2}\] (.+?): (.*)$")


def _said_by(run: SceneRun) -> dict[str, str]:
    """Every line of the run -> who said it (a person's or a character's name)."""
    said = {m.text: m.person.name for m in run.script.messages}
    names = {role.id: role.name for role in CAST}
    said.update({line.text: names[line.character] for line in run.lines if line.ok})
    return said


def summary_input(run: SceneRun) -> dict[str, int]:
    said = _said_by(run)
    characters = {role.name for role in CAST}
    speakers = {p.name for p in PEOPLE} | characters
    lines = characters_lines = named = 0
    for request in run.requests:
        if request.kind != "summary":
            continue
        text = request.body["messages"][-1]["content"][0]["text"]
        for _, role, line in parse_turns(text, "Turns to fold in:\n"):
            if role != "user":
                continue
            lines += 1
            voices = voices_in(line)
            characters_lines += bool(voices) and said.get(voices[0][2]) in characters
            # The summariser's input puts a scene line in its speaker's container.
            named += bool(voices) and voices[0][1] in speakers
    return {
        "user_lines": lines,
        "of_them_a_characters_words": characters_lines,
        "of_them_with_the_speakers_name": named,
    }


def fragments(run: SceneRun) -> dict[str, int]:
    said = _said_by(run)
    own = {role.id: role.name for role in CAST}
    total = as_user = persons = characters = 0
    for request in run.requests:
        if request.kind != "reply" or request.character is None:
            continue
        context = request.body["messages"][-1]["content"][-2]["text"]
        for line in context.splitlines():
            match = FRAGMENT_LINE.match(line)
            if match is None:
                continue
            label, text = match.groups()
            total += 1
            speaker = said.get(text)
            if label != own[request.character] and speaker is not None and speaker != label:
                as_user += 1
                persons += speaker in {p.name for p in PEOPLE}
                characters += speaker not in {p.name for p in PEOPLE}
    return {
        "lines": total,
        "shown_under_another_name": as_user,
        "of_them_a_persons_words": persons,
        "of_them_another_characters_words": characters,
    }


def findings(run: SceneRun) -> dict[str, Any]:
    return {"summary_input": summary_input(run), "recalled_fragments": fragments(run)}
