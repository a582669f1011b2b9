"""A scripted chronicler for the prompt benches: answers write_journey from the turns it is
shown, as a well-behaved model would, so that block 2 carries a journey as the real renderer
puts it (bench/context_growth.py --journey).

Each conversation adds one paragraph (a sentence for each of its first user turns, its citation
inside the sentence); the oldest paragraphs are dropped first to stay within the cap, so after a
few conversations the journey sits near `JOURNEY_MAX_TOKENS`: the worst case for the prompt.
"""

from __future__ import annotations

import re

from memory.engine.tokens import TokenEstimator
from memory.journey.model import Journey

SENTENCES_PER_CHAPTER = 8
WORDS_PER_SENTENCE = 14
_USER_LINE = re.compile(r"^\[(\d+)\] user: (.*)$")
_STOPS = re.compile(r"[.!?…]+")


def _sentence(turn_id: int, text: str) -> str:
    words = _STOPS.sub(",", text).split()[:WORDS_PER_SENTENCE]
    said = " ".join(words).strip(" ,;:")
    return f"The user told of {said} {{cite:{turn_id}}}, and the talk went on from there."


def scripted_journey(body: str, cap: int, tokens: TokenEstimator) -> str:
    """The previous journey (as shown) continued with a chapter about this conversation, the
    oldest paragraphs dropped while over `cap` (never the new one)."""
    previous, _, conversation = body.partition("\n\nThe conversation of")
    shown = previous.removeprefix("Previous journey:\n")
    old = [] if shown.startswith("(none yet") else list(Journey.split(shown))
    users = [m for line in conversation.splitlines() if (m := _USER_LINE.match(line))]
    chapter = " ".join(
        _sentence(int(m.group(1)), m.group(2)) for m in users[:SENTENCES_PER_CHAPTER]
    )
    paragraphs = [*old, chapter] if chapter else old
    while len(paragraphs) > 1 and tokens.count("\n\n".join(paragraphs)) > cap:
        paragraphs.pop(0)
    return "\n\n".join(paragraphs)
