"""Rows into the typed records of memory/models.py, for every backend.

Both backends keep the same column values (ISO text for times, with the clock's offset; JSON
text for lists), so one mapping serves a `sqlite3.Row` and an `asyncpg.Record` alike, and the
records read back are the very ones written.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, date, datetime
from typing import Any, Protocol

from memory.journey.model import Journey
from memory.models import (
    Conversation,
    DeadLetter,
    Fact,
    FactVersion,
    FollowUpCandidate,
    ReplySources,
    Speaker,
    Summary,
    SummaryFields,
    Thread,
    Turn,
    UsageRecord,
    User,
)


class Row(Protocol):
    def __getitem__(self, key: str, /) -> Any: ...

    def keys(self) -> Any: ...


def ts(moment: datetime) -> str:
    return moment.isoformat()


def utc_ts(moment: datetime) -> str:
    """One zone for the rows compared as text (the dead letters' age)."""
    return moment.astimezone(UTC).isoformat()


def error_kind(error: str) -> str:
    """The type alone of an error said as "Type: message": the message may quote user text."""
    return error.split(":", 1)[0].strip()


def dt(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def fact(row: Row) -> Fact:
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


def fact_version(row: Row) -> FactVersion:
    return FactVersion(
        fact_id=row["fact_id"],
        value=row["value"],
        origin=row["origin"],
        valid_from=datetime.fromisoformat(row["valid_from"]),
        superseded_at=datetime.fromisoformat(row["superseded_at"]),
        reason=row["reason"],
    )


def followup_offers(rows: Iterable[Row]) -> list[FollowUpCandidate]:
    """The first dated fact of each user and character among rows of OFFERS_DUE
    (memory/store/followup_rules.py), in the rows' order."""
    offers: dict[tuple[int, str], FollowUpCandidate] = {}
    for r in rows:
        offers.setdefault(
            (r["user_id"], r["character_id"]),
            FollowUpCandidate(
                fact(r), r["platform"], r["platform_user_id"], r["display_name"], r["timezone"]
            ),
        )
    return list(offers.values())


def user(row: Row) -> User:
    return User(row["id"], row["platform"], row["platform_user_id"], row["display_name"])


def conversation(row: Row) -> Conversation:
    return Conversation(
        id=row["id"],
        thread=Thread(row["user_id"], row["character_id"], row["scope"]),
        started_at=datetime.fromisoformat(row["started_at"]),
        last_activity_at=datetime.fromisoformat(row["last_activity_at"]),
        ended_at=dt(row["ended_at"]),
        end_reason=row["end_reason"],
        extracted_at=dt(row["extracted_at"]),
    )


def turn(row: Row) -> Turn:
    return Turn(
        id=row["id"],
        conversation_id=row["conversation_id"],
        role=row["role"],
        text=row["text"],
        created_at=datetime.fromisoformat(row["created_at"]),
        platform_message_id=row["platform_message_id"],
        speaker=speaker(row),
    )


def speaker_columns(speaker: Speaker | None) -> tuple[int | None, str | None, str | None]:
    """speaker_id, speaker_character, speaker_name of a turn (all None outside a scene)."""
    if speaker is None:
        return (None, None, None)
    return (speaker.person_id, speaker.character_id, speaker.name)


def speaker(row: Row) -> Speaker | None:
    """A scene line's speaker (migration 0022), None for every other turn."""
    # keys(): `in` on a sqlite3.Row looks at its values.
    if "speaker_name" not in row.keys() or row["speaker_name"] is None:  # noqa: SIM118
        return None
    return Speaker(row["speaker_name"], row["speaker_id"], row["speaker_character"])


def summary(row: Row) -> Summary:
    raw = json.loads(row["fields_json"])
    return Summary(
        fields=SummaryFields(**{name: tuple(raw.get(name, ())) for name in raw}),
        cited_ids=frozenset(json.loads(row["cited_ids_json"])),
        covers_up_to_turn_id=row["covers_up_to_turn_id"],
        created_at=datetime.fromisoformat(row["created_at"]),
        id=row["id"],
    )


def reply_sources(row: Row) -> ReplySources:
    return ReplySources(
        turn_id=row["turn_id"],
        fact_ids=tuple(json.loads(row["fact_ids"])),
        summary_id=row["summary_id"],
        window_turn_ids=tuple(json.loads(row["window_turn_ids"])),
        fragment_turn_ids=tuple(json.loads(row["fragment_turn_ids"])),
        created_at=datetime.fromisoformat(row["created_at"]),
        journey_id=row["journey_id"],
    )


def journey(row: Row) -> Journey:
    return Journey(
        user_id=row["user_id"],
        character_id=row["character_id"],
        paragraphs=Journey.split(row["text"]),
        covers_conversation_id=row["covers_conversation_id"],
        created_at=datetime.fromisoformat(row["created_at"]),
        id=row["id"],
    )


def usage_record(row: Row) -> UsageRecord:
    return UsageRecord(
        kind=row["kind"],
        model=row["model"],
        ok=bool(row["ok"]),
        user_id=row["user_id"],
        character_id=row["character_id"],
        conversation_id=row["conversation_id"],
        turn_id=row["turn_id"],
        error=row["error"],
        input_tokens=row["input_tokens"],
        cache_read_tokens=row["cache_read_tokens"],
        cache_write_tokens=row["cache_write_tokens"],
        output_tokens=row["output_tokens"],
        latency_ms=row["latency_ms"],
        tool_round=row["tool_round"],
        fragments=row["fragments"],
        tools_called=row["tools_called"],
    )


def dead_letter(row: Row) -> DeadLetter:
    created = dt(row["created_at"])
    assert created is not None
    return DeadLetter(
        row["platform"],
        row["update_key"],
        row["platform_user_id"],
        row["payload"],
        row["error"],
        created,
        int(row["id"]),
    )
