"""What an imported memory may bring in: the export read back with everything the memory gate
refuses taken out (facts, summary claims, replies and tool turns, journeys), and the rows of an
export as the user reads them (memory/privacy.py exports and imports through these)."""

from __future__ import annotations

import json
from typing import Any

from memory.errors import UserFacingError
from memory.integrity.gate import check_fact, check_reply, check_text, check_turn
from memory.integrity.together import filter_claims
from memory.journey.imports import gate_journeys
from memory.models import SummaryFields

# An imported reply that reads as an instruction keeps its place in the conversation (ids,
# citations and order stay valid) but not its words.
WITHHELD = "[withheld at import: it read as an instruction]"


def gate_import(
    data: dict[str, Any], names: tuple[str, ...] = ()
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """The export with everything the memory gate refuses taken out, and (scope, reason) for
    each refusal: facts (key and value) and their history, every summary claim, the assistant's
    turns (`check_reply`, with the character's names) and the tools' turns (`check_turn`). The
    user's own turns are their literal log: kept as written."""
    refusals: list[tuple[str, str]] = []
    facts, kept_ids = [], set()
    for row in data.get("facts", []):
        key, value = str(row.get("key", "")), str(row.get("value", ""))
        verdict = check_fact(key, value, kind=row.get("kind"), names=names, learned=True)
        if verdict.reason is None:
            facts.append({**row, "value": verdict.value})
            kept_ids.add(row.get("id"))
        else:
            refusals.append((str(row.get("scope", "dm")), f"fact: {verdict.reason}"))
    history = []
    for row in data.get("fact_history", []):
        if row.get("fact_id") not in kept_ids:
            continue
        if problem := check_text(str(row.get("value", "")), names=names):
            refusals.append(("dm", f"fact history: {problem}"))
        else:
            history.append(row)
    summaries = []
    for row in data.get("summaries", []):
        fields, dropped = filter_claims(
            _summary_fields(row.get("fields_json", {})), names=names, learned=True
        )
        refusals += [(str(row.get("scope", "dm")), f"summary: {d.reason}") for d in dropped]
        summaries.append({**row, "fields_json": {k: list(v) for k, v in fields.items()}})
    turns = []
    for row in data.get("turns", []):
        text = str(row.get("text", ""))
        role = row.get("role")
        # The character's words get the gate with its names; a tool's result the turn rules.
        problem = (
            check_reply(text, names=names)
            if role == "assistant"
            else role != "user" and check_turn(text)
        )
        if problem:
            refusals.append((str(row.get("scope", "dm")), f"{row.get('role')} turn: {problem}"))
            row = {**row, "text": WITHHELD}
        turns.append(row)
    summaries = _covering_the_import(summaries, turns)
    journeys, journey_refusals = gate_journeys(data.get("journeys") or [], names)
    refusals += [("dm", reason) for reason in journey_refusals]
    cleaned = {**data, "facts": facts, "fact_history": history, "summaries": summaries}
    cleaned["journeys"] = journeys
    return {**cleaned, "turns": turns}, refusals


def _covering_the_import(
    summaries: list[dict[str, Any]], turns: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """An imported conversation is history, not a window to resume: the latest summary of each
    scope is made to cover every imported turn of that scope, so no imported reply is replayed
    word for word as the assistant's own in the next request (its words stay stored: export,
    search and /memoria still see them). A scope without a summary relies on `check_turn`."""
    last_turn: dict[str, int] = {}
    for row in turns:
        scope, turn_id = str(row.get("scope", "dm")), row.get("id")
        if isinstance(turn_id, int):
            last_turn[scope] = max(last_turn.get(scope, 0), turn_id)
    latest: dict[str, int] = {}
    for index, row in enumerate(summaries):
        scope = str(row.get("scope", "dm"))
        if scope not in latest or row.get("id", 0) > summaries[latest[scope]].get("id", 0):
            latest[scope] = index
    out = list(summaries)
    for scope, index in latest.items():
        row = out[index]
        covered = row.get("covers_up_to_turn_id") or 0
        if isinstance(covered, int) and last_turn.get(scope, 0) > covered:
            out[index] = {**row, "covers_up_to_turn_id": last_turn[scope]}
    return out


def _summary_fields(raw: object) -> SummaryFields:
    """An export's summary fields, whatever their shape: unknown fields and non-strings are
    refused by the import's schema, not silently kept."""
    if not isinstance(raw, dict):
        raise UserFacingError("a summary's fields_json is not an object")
    unknown = sorted(set(raw) - set(SummaryFields.names()))
    if unknown:
        raise UserFacingError(f"a summary has unknown fields {unknown}")
    fields = SummaryFields()
    for name, claims in raw.items():
        if not isinstance(claims, list) or not all(isinstance(c, str) for c in claims):
            raise UserFacingError(f"a summary's field '{name}' is not a list of strings")
        fields = fields.with_field(name, tuple(claims))
    return fields


def public_row(row: dict[str, Any]) -> dict[str, Any]:
    """Drop internal columns that mean nothing outside this database."""
    hidden = {"user_id"}
    out = {key: value for key, value in row.items() if key not in hidden}
    for key in ("evidence", "fields_json", "cited_ids_json"):
        if isinstance(out.get(key), str):
            out[key] = json.loads(out[key])
    return out
