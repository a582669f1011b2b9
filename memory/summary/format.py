"""The rolling summary as text: its fields in fixed order, each claim rendered as data, and the
trim that keeps it within its cap (block 3 of the prompt, and the summariser's own check)."""

from __future__ import annotations

from memory.engine.labels import label
from memory.engine.tokens import TokenEstimator
from memory.integrity.gate import as_data_claim
from memory.models import SummaryFields


def format_summary(fields: SummaryFields, language: str) -> str:
    lines = [f"## {label(language, 'summary')}"]
    for name, claims in fields.items():
        if claims:
            lines.append(f"{label(language, name)}:")
            lines.extend(f"- {as_data_claim(claim)}" for claim in claims)
    return "\n".join(lines)


# Trimming drops the oldest claim of the least durable field first; canon goes last.
TRIM_ORDER = ("open_threads", "tone", "relationship", "commitments", "established_facts", "canon")


def trim_summary(
    fields: SummaryFields, language: str, cap: int, tokens: TokenEstimator
) -> SummaryFields:
    """Drop whole claims, oldest first, field by field, until the summary fits the cap.

    A first pass keeps the newest claim of every field, so that accumulated facts cannot crowd
    the tone or the relationship out of the summary; only if that is not enough do fields empty.
    """
    for keep_newest in (1, 0):
        for name in TRIM_ORDER:
            while tokens.count(format_summary(fields, language)) > cap:
                claims = getattr(fields, name)
                if len(claims) <= keep_newest:
                    break
                fields = fields.with_field(name, claims[1:])
            if tokens.count(format_summary(fields, language)) <= cap:
                return fields
    return fields
