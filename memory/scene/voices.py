"""How a scene's line names who said it, in every prompt that shows one (the window, the
summariser's and the extraction's input, recalled turns): two structures a person's words can
never produce.

- A person's line is data inside a person container, with a label scoped to this scene's
  people (`ref="p17"`: their `users` row) beside the name they chose on the platform:
  `<person ref="p17" name="Koldo Arrieta">...</person>`.
- Another character's line is inside a character container, named by the character's sheet:
  `<character name="Koldo Arrieta">...</character>`; the character's own lines are its turns.

Whatever a person writes (a display name that is a character's, "Koldo Arrieta: ..." lines,
a closing tag) is escaped: no `<` or `>` of theirs reaches the prompt, so their text cannot
close the container nor open a character's. No list of names is involved.
"""

from __future__ import annotations

import re

from memory.models import Speaker, Turn

_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}
_UNESCAPES = {value: key for key, value in _ESCAPES.items()}
_VOICE = re.compile(r'<(person|character)(?: ref="p\d+")? name="([^"<>]*)">(.*?)</\1>', re.DOTALL)


def escaped(text: str) -> str:
    """Text as data inside a container: no bracket or quote of its own left."""
    return re.sub(r'[&<>"]', lambda m: _ESCAPES[m.group(0)], text)


def unescaped(text: str) -> str:
    return re.sub(r"&(amp|lt|gt|quot);", lambda m: _UNESCAPES[m.group(0)], text)


def _name(name: str) -> str:
    return escaped(" ".join(name.split())) or "?"


def voiced(speaker: Speaker, text: str) -> str:
    """A line said by someone other than the character reading it, in its container."""
    if speaker.person_id is not None:
        label = f'ref="p{speaker.person_id}" name="{_name(speaker.name)}"'
        return f"<person {label}>{escaped(text)}</person>"
    return f'<character name="{_name(speaker.name)}">{escaped(text)}</character>'


def witnessed(turn: Turn) -> str:
    """The turn as the character whose copy holds it reads it: its own lines (and a private
    thread's) as they are, a scene's other lines in their containers."""
    return voiced(turn.speaker, turn.text) if turn.speaker is not None else turn.text


def own_line(character_name: str, text: str) -> str:
    """The reading character's own line, where a listing shows every speaker alike."""
    return voiced(Speaker(character_name), text)


def voices_in(text: str) -> list[tuple[str, str, str]]:
    """(kind, name, text) of every container in a rendered text, unescaped (benches, tests)."""
    return [(kind, unescaped(name), unescaped(said)) for kind, name, said in _VOICE.findall(text)]
