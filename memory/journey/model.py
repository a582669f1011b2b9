"""The journey ("El Viaje", seed 002): the chronicle of a user's private thread with one
character, paragraphs of past-tense prose with `{cite:ID}` codes of the turns they rest on."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

CITE = re.compile(r"\{cite:\s*(\d+)\s*\}")
PARAGRAPH_BREAK = re.compile(r"\n\s*\n")
# Sentences end at . ! ? … followed by a space (a citation's braces are never split).
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")
# The scope of the one thread a journey tells: groups keep none (docs/memory.md).
JOURNEY_SCOPE = "dm"


def sentences_of(paragraph: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(paragraph) if s.strip()]


def cited_in(text: str) -> frozenset[int]:
    return frozenset(int(found) for found in CITE.findall(text))


@dataclass(frozen=True)
class Journey:
    user_id: int
    character_id: str
    paragraphs: tuple[str, ...]
    covers_conversation_id: int | None
    created_at: datetime
    id: int | None = None

    @property
    def text(self) -> str:
        return "\n\n".join(self.paragraphs)

    @property
    def cited_ids(self) -> frozenset[int]:
        return cited_in(self.text)

    @staticmethod
    def split(text: str) -> tuple[str, ...]:
        return tuple(p.strip() for p in PARAGRAPH_BREAK.split(text) if p.strip())


def remap_citations(text: str, turn_ids: dict[int, int]) -> str:
    """The journey's text with each citation renumbered to its imported turn; a sentence whose
    citation was not imported is dropped (it would cite nothing, or someone else's turn)."""
    paragraphs = []
    for paragraph in Journey.split(text):
        kept = [s for s in sentences_of(paragraph) if cited_in(s) <= set(turn_ids)]
        renumbered = [CITE.sub(lambda m: f"{{cite:{turn_ids[int(m.group(1))]}}}", s) for s in kept]
        if renumbered:
            paragraphs.append(" ".join(renumbered))
    return "\n\n".join(paragraphs)
