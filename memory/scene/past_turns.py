"""What a scene's copies tell a process that did not see its past turns (after a restart, or
when another worker answered the scene).

Who a person last spoke with: the character that spoke first after the person's previous line.

How far a turn run again after a crash had got (a worker killed mid-turn, Telegram
redelivering the updates of a process that died). Every message of the turn was stored
before, so each present character's copy holds the turn's newest message, and what follows it
there tells:
- a later line of a person: the scene went on, so the turn was answered (or folded into a
  later one) and is not answered again;
- the character's own reply: it spoke in that turn; its stored line is sent again (the
  worker's send record skips a send already made) and is not asked of the model twice;
- another character's named line: the copy witnessed that line already.
The characters that had not spoken yet speak as the first run would have let them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from memory.models import Thread, Turn

LinesAfter = Callable[[Thread, int], Awaitable[list[Turn]]]
Said = tuple[datetime, str] | None  # when the person spoke, and who answered


@dataclass(frozen=True)
class EarlierRun:
    """What the first run of a turn left in the copies."""

    spoken: dict[str, Turn] = field(default_factory=dict)  # character -> its line, in order
    witnessed: dict[str, set[str]] = field(default_factory=dict)  # copy -> speakers it holds

    def first_speaker(self) -> str | None:
        return next(iter(self.spoken), None)

    def missing_witnesses(self, speaker: str, cast: tuple[str, ...]) -> list[str]:
        """The copies of the others present that lack the speaker's line of this turn."""
        return [
            other
            for other in cast
            if other != speaker and speaker not in self.witnessed.get(other, set())
        ]


async def earlier_run(
    lines_after: LinesAfter, owner_id: int, scope: str, newest_turns: Mapping[str, int]
) -> EarlierRun | None:
    """What the turn's first run did, from each copy's lines after the turn's newest message;
    None when the scene went on after it (nothing is left to answer)."""
    spoken: list[tuple[int, str, Turn]] = []
    witnessed: dict[str, set[str]] = {}
    for character_id, turn_id in newest_turns.items():
        after = await lines_after(Thread(owner_id, character_id, scope), turn_id)
        if any(t.speaker is not None and t.speaker.person_id is not None for t in after):
            return None
        own = next((t for t in after if t.role == "assistant"), None)
        if own is not None:
            spoken.append((own.id, character_id, own))
        witnessed[character_id] = {
            t.speaker.character_id
            for t in after
            if t.speaker is not None and t.speaker.character_id is not None
        }
    return EarlierRun({c: turn for _, c, turn in sorted(spoken)}, witnessed)


def answered_last(window: Sequence[Turn], holder: str, person_id: int, before_id: int) -> Said:
    """In one character's copy (`holder`'s window), the person's latest line before the turn
    now answered (ids below `before_id`) and the character who spoke first after it: who the
    person last spoke with, read from what was stored, so a restart or another worker finds
    it as the process that answered did. None when the window holds no such line."""
    for index in range(len(window) - 1, -1, -1):
        turn = window[index]
        if turn.id >= before_id or turn.speaker is None or turn.speaker.person_id != person_id:
            continue
        for later in window[index + 1 :]:
            if later.role == "assistant":
                return (turn.created_at, holder)
            if later.speaker is not None and later.speaker.character_id is not None:
                return (turn.created_at, later.speaker.character_id)
        return None
    return None
