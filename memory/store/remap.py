"""An export loaded into a user's memory gets fresh ids: every reference is rewritten to them
(summary citations, the turn a summary covers up to, fact evidence and history). The rules,
once for every backend; each backend only inserts what these functions give."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memory.journey.model import Journey, remap_citations
from memory.profile.fact_keys import registry_key, storage_key
from memory.store.records import ts

_CITE = re.compile(r"\{cite:(\d+)\}")


def recited(text: str, turn_ids: dict[int, int]) -> str:
    """`{cite:OLD}` as `{cite:NEW}`; a citation of a turn the export lacks cites 0 (nothing)."""
    return _CITE.sub(lambda m: f"{{cite:{turn_ids.get(int(m.group(1)), 0)}}}", text)


def evidence(ids: list[int], turn_ids: dict[int, int]) -> str:
    """The JSON list of the new ids of the turns in `ids` that the export holds."""
    return json.dumps([turn_ids[i] for i in ids if i in turn_ids])


def summary_values(row: dict[str, Any], turn_ids: dict[int, int]) -> tuple[str, str, int]:
    """(fields_json, cited_ids_json, covers_up_to_turn_id) of an exported summary, rewritten."""
    fields = {
        name: [recited(claim, turn_ids) for claim in claims]
        for name, claims in row["fields_json"].items()
    }
    cited = sorted(turn_ids[i] for i in row["cited_ids_json"] if i in turn_ids)
    covered = max(
        (new for old, new in turn_ids.items() if old <= row["covers_up_to_turn_id"]), default=0
    )
    return json.dumps(fields, ensure_ascii=False), json.dumps(cited), covered


@dataclass
class Load:
    """One import: whose memory it fills, the export (gated), its time, the new ids so far."""

    user_id: int
    character_id: str
    data: dict[str, Any]
    now: datetime
    conversation_ids: dict[int, int] = field(default_factory=dict)
    turn_ids: dict[int, int] = field(default_factory=dict)


def conversation(row: dict[str, Any], load: Load) -> tuple[Any, ...]:
    """user_id, character_id, scope, started_at, last_activity_at, ended_at, end_reason,
    extracted_at, extraction_status of an exported conversation: history, ended and extracted."""
    return (
        load.user_id,
        load.character_id,
        row["scope"],
        row["started_at"],
        row["last_activity_at"],
        row["ended_at"] or ts(load.now),
        row["end_reason"] or "imported",
        row["extracted_at"] or ts(load.now),
        row.get("extraction_status") or "imported",
    )


def turn(row: dict[str, Any], load: Load) -> tuple[Any, ...]:
    """conversation_id (the new one), user_id, character_id, scope, role, text, created_at."""
    return (
        load.conversation_ids[row["conversation_id"]],
        load.user_id,
        load.character_id,
        row["scope"],
        row["role"],
        row["text"],
        row["created_at"],
    )


def summary(row: dict[str, Any], load: Load) -> tuple[Any, ...]:
    """user_id, character_id, scope, fields_json, cited_ids_json, covers_up_to_turn_id,
    created_at of an exported summary, its citations rewritten."""
    fields, cited, covered = summary_values(row, load.turn_ids)
    owner = (load.user_id, load.character_id)
    return (*owner, row["scope"], fields, cited, covered, row["created_at"])


def fact_keys(
    facts: list[dict[str, Any]], stored: Iterable[tuple[str, str, str]]
) -> Iterator[tuple[dict[str, Any], str]]:
    """Each exported fact with the key it is stored under, given the (scope, kind, key) of the
    facts the pair already has: a key outside the registry is never stored as free text but as
    its registry fallback, clear of the keys its scope and kind hold (stored, or imported
    before it)."""
    taken: dict[tuple[str, str], set[str]] = {}
    for scope, kind, key in stored:
        taken.setdefault((scope, kind), set()).add(key)
    for row in facts:
        key = row["key"]
        held = taken.setdefault((row["scope"], row["kind"]), set())
        if registry_key(key) is None:
            key = storage_key(key, held, row["kind"])
        held.add(key)
        yield row, key


def fact(row: dict[str, Any], key: str, load: Load) -> tuple[Any, ...]:
    """user_id, character_id, kind, key, value, origin, scope, evidence, lifetime, event_date,
    created_at, confirmed_at, expires_at, status of an exported fact stored under `key`."""
    return (load.user_id, load.character_id, row["kind"], key, row["value"], row["origin"],
            row["scope"], evidence(row["evidence"], load.turn_ids), row["lifetime"],
            row["event_date"], row["created_at"], row["confirmed_at"], row["expires_at"],
            row["status"])  # fmt: skip


def fact_version(row: dict[str, Any], fact_id: int, load: Load) -> tuple[Any, ...]:
    """fact_id (the new one), user_id, value, origin, evidence, valid_from, superseded_at,
    reason of an exported version of a fact."""
    moved = evidence(row["evidence"], load.turn_ids)
    return (fact_id, load.user_id, row["value"], row["origin"], moved,
            row["valid_from"], row["superseded_at"], row["reason"])  # fmt: skip


def journey(load: Load) -> Journey | None:
    """The export's journey, its citations rewritten to the new turn ids (one citing a turn not
    imported loses that sentence, in memory/privacy.py's gate); None when nothing is left."""
    found = load.data.get("journeys") or []
    text = remap_citations(str(found[-1].get("text", "")), load.turn_ids) if found else ""
    if not text.strip():
        return None
    return Journey(load.user_id, load.character_id, Journey.split(text), None, load.now)


def without_citing(fields_json: str, gone: set[int]) -> tuple[str, str] | None:
    """A summary's (fields_json, cited_ids_json) with every claim that cites a turn of `gone`
    left out, and every claim that cites nothing: a summary a forget touches keeps only what
    shows it rests on turns still there (an uncited claim may repeat the forgotten person's
    words, and nothing could tell). None when nothing is left out (the row stays as it is). A
    scene participant's forget deletes their lines, and a claim resting on them goes too."""
    fields = json.loads(fields_json)
    kept = {name: [c for c in claims if _rests_on_kept(c, gone)] for name, claims in fields.items()}
    if kept == fields:
        return None
    cited = sorted({int(i) for claims in kept.values() for c in claims for i in _CITE.findall(c)})
    return json.dumps(kept, ensure_ascii=False), json.dumps(cited)


def _rests_on_kept(claim: str, gone: set[int]) -> bool:
    cited = {int(i) for i in _CITE.findall(claim)}
    return bool(cited) and not cited & gone
