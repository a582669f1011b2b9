"""An imported journey is checked as a chronicle is before it is stored: the whole-output
rules (prose, integrated citations) or it is refused, every sentence through the gate,
credentials masked, the budget kept by cutting the oldest paragraphs. Its citations are
rewritten to the imported turns by the store (`remap_citations`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memory.engine.tokens import TokenEstimator
from memory.journey import checks
from memory.journey.chronicler import JOURNEY_MAX_TOKENS
from memory.journey.model import Journey


def gate_journeys(
    rows: Sequence[dict[str, Any]], names: Sequence[str] = (), cap: int = JOURNEY_MAX_TOKENS
) -> tuple[list[dict[str, Any]], list[str]]:
    """The rows that may be imported (their text cleaned), and a reason per refusal."""
    kept: list[dict[str, Any]] = []
    refusals: list[str] = []
    for row in rows:
        text = checks.normalise_citations(str(row.get("text", "")))
        paragraphs = Journey.split(text)
        if problem := checks.prose_not_list(text) or checks.citations_integrated(paragraphs):
            refusals.append(f"journey: {problem}")
            continue
        paragraphs, refused = checks.gate_sentences(paragraphs, names)
        refusals += [f"journey sentence: {r.reason}" for r in refused]
        paragraphs = checks.mask_sentences(paragraphs, ())
        paragraphs = checks.cut_oldest(paragraphs, cap, TokenEstimator())
        if paragraphs:
            kept.append({**row, "text": "\n\n".join(paragraphs)})
    return kept, refusals
