"""Rows of the PostgreSQL store into the typed records of memory/models.py.

The columns hold what the SQLite store's hold (ISO text for times, JSON text for lists), so the
records read back are the very ones written, the clock's offset included.
"""

from __future__ import annotations

import json
from datetime import date, datetime

import asyncpg

from memory.models import Conversation, Fact, Summary, SummaryFields, Thread, Turn


def ts(moment: datetime) -> str:
    return moment.isoformat()


def dt(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def fact(row: asyncpg.Record) -> Fact:
    return Fact(
        id=row["id"],
        user_id=row["user_id"],
        character_id=row["character_id"],
        kind=row["kind"],
        key=row["key"],
        value=row["value"],
        origin=row["origin"],
        scope=row["scope"],
        evidence=tuple(json.loads(row["evidence"])),
        lifetime=row["lifetime"],
        event_date=date.fromisoformat(row["event_date"]) if row["event_date"] else None,
        created_at=datetime.fromisoformat(row["created_at"]),
        confirmed_at=datetime.fromisoformat(row["confirmed_at"]),
        expires_at=dt(row["expires_at"]),
        status=row["status"],
    )


def conversation(row: asyncpg.Record) -> Conversation:
    return Conversation(
        id=row["id"],
        thread=Thread(row["user_id"], row["character_id"], row["scope"]),
        started_at=datetime.fromisoformat(row["started_at"]),
        last_activity_at=datetime.fromisoformat(row["last_activity_at"]),
        ended_at=dt(row["ended_at"]),
        end_reason=row["end_reason"],
        extracted_at=dt(row["extracted_at"]),
    )


def turn(row: asyncpg.Record) -> Turn:
    return Turn(
        id=row["id"],
        conversation_id=row["conversation_id"],
        role=row["role"],
        text=row["text"],
        created_at=datetime.fromisoformat(row["created_at"]),
        platform_message_id=row["platform_message_id"],
    )


def summary(row: asyncpg.Record) -> Summary:
    raw = json.loads(row["fields_json"])
    return Summary(
        fields=SummaryFields(**{name: tuple(raw.get(name, ())) for name in raw}),
        cited_ids=frozenset(json.loads(row["cited_ids_json"])),
        covers_up_to_turn_id=row["covers_up_to_turn_id"],
        created_at=datetime.fromisoformat(row["created_at"]),
        id=row["id"],
    )


# The columns of a turn the store reads (never the search vector).
TURN_COLUMNS = "id, conversation_id, role, text, created_at, platform_message_id"


_BIGINT = range(-(2**63), 2**63)


def ids_param(ids: list[int]) -> list[int]:
    """Ids as a bigint[] parameter: an id no bigint can hold (a model's invention) names no
    row, so it is left out instead of failing the whole query, as SQLite simply finds nothing."""
    return [i for i in ids if i in _BIGINT]

