"""Rows of the PostgreSQL store: the shared record mappings (memory/store/records.py, the
columns hold what the SQLite store's hold) and what only this backend needs."""

from __future__ import annotations

from memory.store.records import (
    conversation,
    dt,
    fact,
    fact_version,
    journey,
    reply_sources,
    summary,
    ts,
    turn,
    usage_record,
    user,
)

# The columns of a turn the store reads (never the search vector).
TURN_COLUMNS = (
    "id, conversation_id, role, text, created_at, platform_message_id, speaker_id,"
    " speaker_character, speaker_name"
)


_BIGINT = range(-(2**63), 2**63)


def ids_param(ids: list[int]) -> list[int]:
    """Ids as a bigint[] parameter: an id no bigint can hold (a model's invention) names no
    row, so it is left out instead of failing the whole query, as SQLite simply finds nothing."""
    return [i for i in ids if i in _BIGINT]


__all__ = [
    "TURN_COLUMNS",
    "conversation",
    "dt",
    "fact",
    "fact_version",
    "ids_param",
    "journey",
    "reply_sources",
    "summary",
    "ts",
    "turn",
    "usage_record",
    "user",
]
