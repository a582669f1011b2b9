"""Typed records into the values of their rows, for every backend: the other way of
memory/store/records.py. Each function gives the values in the order of its statement's
placeholders (said in its docstring); the statements themselves stay with each backend."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from memory.journey.model import Journey
from memory.models import Fact, ReplySources, Summary, Thread, UsageRecord
from memory.store.records import ts


def fact_state(fact: Fact) -> tuple[object, ...]:
    """value, origin, evidence, lifetime, event_date, confirmed_at, expires_at, status."""
    return (
        fact.value,
        fact.origin,
        json.dumps(list(fact.evidence)),
        fact.lifetime,
        fact.event_date.isoformat() if fact.event_date else None,
        ts(fact.confirmed_at),
        ts(fact.expires_at) if fact.expires_at else None,
        fact.status,
    )


def new_fact(fact: Fact) -> tuple[object, ...]:
    """user_id, character_id, kind, key, scope, created_at, then `fact_state`."""
    return (
        fact.user_id,
        fact.character_id,
        fact.kind,
        fact.key,
        fact.scope,
        ts(fact.created_at),
        *fact_state(fact),
    )


def overwritten_fact(fact: Fact) -> tuple[object, ...]:
    """`fact_state`, then id and user_id (the WHERE)."""
    return (*fact_state(fact), fact.id, fact.user_id)


def fact_version(old: Fact, reason: str, now: datetime) -> tuple[object, ...]:
    """fact_id, user_id, value, origin, evidence, valid_from, superseded_at, reason: the value
    a fact had until now, into its history."""
    return (
        old.id,
        old.user_id,
        old.value,
        old.origin,
        json.dumps(list(old.evidence)),
        ts(old.confirmed_at),
        ts(now),
        reason,
    )


def fact_changes(
    adds: list[Fact],
    updates: list[tuple[Fact, Fact, str]],
    deletes: list[Fact],
    confirms: list[Fact],
    now: datetime,
) -> Iterator[tuple[str, tuple[object, ...]]]:
    """One extraction's operations as (statement of sql.FACT_WRITES, values), in the order
    they are written: an update archives the old value into the history before it is
    overwritten; a confirmation overwrites in place."""
    for fact in adds:
        yield "insert", new_fact(fact)
    for old, new, reason in updates:
        yield "archive", fact_version(old, reason, now)
        yield "overwrite", overwritten_fact(new)
    for fact in confirms:
        yield "overwrite", overwritten_fact(fact)
    for fact in deletes:
        yield "delete", (fact.id, fact.user_id)


def summary(thread: Thread, summary: Summary, conversation_id: int | None) -> tuple[Any, ...]:
    """user_id, character_id, scope, fields_json, cited_ids_json, covers_up_to_turn_id,
    created_at, and the conversation it must still exist with (None: none)."""
    return (
        thread.user_id,
        thread.character_id,
        thread.scope,
        json.dumps(dict(summary.fields.items()), ensure_ascii=False),
        json.dumps(sorted(summary.cited_ids)),
        summary.covers_up_to_turn_id,
        ts(summary.created_at),
        conversation_id,
    )


def reply_sources(sources: ReplySources) -> tuple[Any, ...]:
    """fact_ids, summary_id, window_turn_ids, fragment_turn_ids (the JSON lists and the
    summary a reply was built from; the turn, owner and time are the statement's)."""
    return (
        json.dumps(list(sources.fact_ids)),
        sources.summary_id or None,
        json.dumps(list(sources.window_turn_ids)),
        json.dumps(list(sources.fragment_turn_ids)),
    )


def usage(record: UsageRecord) -> tuple[Any, ...]:
    """user_id, character_id, conversation_id, turn_id, kind, model, ok, error, input_tokens,
    cache_read_tokens, cache_write_tokens, output_tokens, latency_ms, tool_round, fragments,
    tools_called (the time is the statement's)."""
    return (record.user_id, record.character_id, record.conversation_id, record.turn_id,
            record.kind, record.model, int(record.ok),
            record.error, record.input_tokens, record.cache_read_tokens,
            record.cache_write_tokens, record.output_tokens, float(record.latency_ms),
            record.tool_round, record.fragments, record.tools_called)  # fmt: skip


def journey(journey: Journey, covers_id: int | None, created_at: datetime) -> tuple[Any, ...]:
    """user_id, character_id, text, cited_ids_json, covers_conversation_id, created_at."""
    return (
        journey.user_id,
        journey.character_id,
        journey.text,
        json.dumps(sorted(journey.cited_ids)),
        covers_id,
        ts(created_at),
    )


def journey_key(journey: Journey) -> tuple[Any, ...]:
    """id, user_id, character_id: the stored journey a rewrite or a delete names."""
    return (journey.id, journey.user_id, journey.character_id)


def rewritten_journey(journey: Journey) -> tuple[Any, ...]:
    """text, cited_ids_json, then `journey_key`."""
    return (journey.text, json.dumps(sorted(journey.cited_ids)), *journey_key(journey))
