"""Who speaks in a scene, as a pure function of what was said (no store, no clock).

The rule, in order:
1. Every character the new messages address: a reply to one of its lines, then its name or an
   alias in the text (a word of its own, accents and case aside), in the order they appear.
2. When nobody is named: the character the newest message's author last spoke with in this
   scene, if it is still present; else one chosen at random, weighted by each character's
   `talkativeness` (a seeded generator makes the choice repeatable in tests and benches).
3. At most `cap` lines per turn of the scene. A character's line that names another present
   character lets that one answer next, within the same cap; nobody speaks twice in a turn, so
   characters cannot talk among themselves in a loop.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from memory.search.terms import fold


@dataclass(frozen=True)
class Castmember:
    """A character present in a scene, as routing sees it."""

    id: str
    names: tuple[str, ...]  # its name, first name and aliases
    talkativeness: float = 0.5


@dataclass(frozen=True)
class Heard:
    """One person's message of the turn: its text, and the character it replies to, if any."""

    text: str
    replied_to: str | None = None  # a character id


def _pattern(names: Sequence[str]) -> re.Pattern[str] | None:
    words = sorted({fold(n).strip() for n in names if len(n.strip()) >= 3}, key=len, reverse=True)
    if not words:
        return None
    alternatives = "|".join(re.escape(w) for w in words)
    # Grouped: the word bounds hold for every alternative, not only the first and the last.
    return re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)")


def named_at(text: str, member: Castmember) -> int | None:
    """Where the text first names the character (its position), None when it does not."""
    pattern = _pattern(member.names)
    found = pattern.search(fold(text)) if pattern is not None else None
    return found.start() if found else None


def addressed(messages: Sequence[Heard], cast: Sequence[Castmember]) -> list[str]:
    """The characters the messages address, in order, each once."""
    present = {member.id for member in cast}
    order: list[str] = []
    for message in messages:
        if message.replied_to in present and message.replied_to not in order:
            order.append(message.replied_to)
        positions = [(named_at(message.text, m), m.id) for m in cast]
        for _, member_id in sorted((p, i) for p, i in positions if p is not None):
            if member_id not in order:
                order.append(member_id)
    return order


def weighted_choice(cast: Sequence[Castmember], rng: random.Random) -> str:
    weights = [max(member.talkativeness, 0.0) for member in cast]
    if not any(weights):
        weights = [1.0] * len(cast)
    return rng.choices([member.id for member in cast], weights=weights, k=1)[0]


def first_speakers(
    messages: Sequence[Heard],
    cast: Sequence[Castmember],
    last_partner: str | None,
    rng: random.Random,
    cap: int,
) -> list[str]:
    """Who answers the people's messages of a turn (rules 1 and 2), at most `cap`."""
    if not cast or cap <= 0:
        return []
    named = addressed(messages, cast)
    if named:
        return named[:cap]
    if last_partner in {member.id for member in cast}:
        return [last_partner]  # type: ignore[list-item]
    return [weighted_choice(cast, rng)]


def next_speaker(
    line: str, speaker: str, cast: Sequence[Castmember], spoken: Sequence[str]
) -> str | None:
    """The character a character's line hands the word to (rule 3): the first other present
    character it names that has not spoken in this turn."""
    others = [m for m in cast if m.id != speaker and m.id not in spoken]
    for member_id in addressed([Heard(line)], others):
        return member_id
    return None
