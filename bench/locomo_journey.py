"""The journey for the retrieval bench: after each LoCoMo session, bench/journey.py's oracle
chronicler (no injected fault) writes the chapter through the real Chronicler, its checks and
the real store, so that recall can be measured with the journey's sentences lent to search
(bench/locomo_retrieval.py --journey). Nothing is read from the QA annotations.

The bench's thread is with the character id `locomo` (bench/locomo_load.py): it is played here
by the shipped detective's sheet, as in bench/journey.py, so the gate reads the same names.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.journey import Oracle, chapter_of
from cards.character import CharacterBook
from memory.engine.tokens import TokenEstimator
from memory.journey.chronicler import JOURNEY_MAX_TOKENS, Chronicler
from memory.models import Conversation
from memory.store import MemoryStore

REPO = Path(__file__).resolve().parent.parent
PLAYED_BY = "detective_bilbao"


@dataclass
class JourneyTally:
    """How each session's chronicle ended (Chronicler.write's status), and its calls."""

    statuses: Counter[str] = field(default_factory=Counter)
    calls: int = 0


def _book(character_id: str) -> CharacterBook:
    sheet = CharacterBook.load(REPO / "characters").get(PLAYED_BY)
    assert sheet is not None, f"characters/ has no {PLAYED_BY}"
    return CharacterBook({character_id: sheet.model_copy(update={"id": character_id})})


class SessionJourney:
    """The chronicle of each ended session of one store's LoCoMo threads."""

    def __init__(
        self,
        store: MemoryStore,
        character_id: str,
        tally: JourneyTally,
        cap: int = JOURNEY_MAX_TOKENS,
    ) -> None:
        self.tally = tally
        self._oracle = Oracle(TokenEstimator(), cap)
        self._now = datetime.min
        self._chronicler = Chronicler(
            self._oracle, store, _book(character_id), lambda: self._now, self._oracle.tokens, cap
        )

    async def after_session(
        self,
        conversation: Conversation,
        item: dict[str, Any],
        number: int,
        turn_of: dict[str, int],
        now: datetime,
    ) -> None:
        self._oracle.chapter = chapter_of(item, number, turn_of)
        self._now = now
        calls = self._oracle.calls
        self.tally.statuses[await self._chronicler.write(conversation)] += 1
        self.tally.calls += self._oracle.calls - calls
