"""The checks an extraction's answer passes before anything is written: its schema, its
evidence (only the session's turns; a "stated" fact backed by a user turn), the key registry and
the memory gate, value by value and read together. Any problem rejects the answer whole
(memory/profile/extraction.py asks again with the reason)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    WithJsonSchema,
    model_validator,
)

from memory.engine.forced_tool import OutputRejected
from memory.engine.llm import ToolSpec
from memory.integrity.credentials import credential_values, find_credentials
from memory.integrity.gate import check_fact
from memory.integrity.together import check_joined, check_together
from memory.models import Conversation, Fact, Turn
from memory.profile.fact_keys import KEY_SYNTAX, key_json_schema, spec_of, storage_key
from memory.profile.view import Lifetimes

log = logging.getLogger(__name__)


class ProfileOperation(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    op: Literal["add", "update", "delete", "confirm"]
    kind: Literal["semantic", "emotional", "episodic"]
    # The model is shown the registry's keys; an unknown one is stored as `other` (see
    # memory/profile/fact_keys.py), so a key is never free text in the profile.
    key: Annotated[str, Field(pattern=KEY_SYNTAX.pattern), WithJsonSchema(key_json_schema())]
    value: str | None = Field(default=None, max_length=300)
    origin: Literal["stated", "inferred"] = "inferred"
    evidence: list[int] = Field(min_length=1, max_length=20)
    event_date: date | None = None
    reason: str | None = Field(default=None, max_length=200)

    @model_validator(mode="after")
    def _value_when_writing(self) -> ProfileOperation:
        if self.op in ("add", "update") and not self.value:
            raise ValueError(f"'{self.op}' needs a value")
        return self


class ExtractionOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    operations: list[ProfileOperation] = Field(max_length=40)


EXTRACTION_TOOL = ToolSpec(
    name="record_profile",
    description="Record operations on the long-term profile of the user.",
    input_schema=ExtractionOutput.model_json_schema(),
)


class ExtractionRejected(OutputRejected):
    """The proposed operations broke a rule (fed back to the model on the next attempt)."""


@dataclass
class Plan:
    adds: list[Fact] = field(default_factory=list)
    updates: list[tuple[Fact, Fact, str]] = field(default_factory=list)
    deletes: list[Fact] = field(default_factory=list)
    confirms: list[Fact] = field(default_factory=list)


def plan_operations(
    operations: Sequence[ProfileOperation],
    conversation: Conversation,
    turns: Sequence[Turn],
    existing: Sequence[Fact],
    lifetimes: Lifetimes,
    now: datetime,
    review_mode: bool = False,
    names: Sequence[str] = (),
) -> Plan:
    """Check every operation against the session, the key registry and the memory gate; raise
    on the first problem. ``names`` are the character's names (memory.integrity.gate.check_text).

    In review mode new facts are written as pending: they wait for the user's approval.
    """
    roles = {turn.id: turn.role for turn in turns}
    by_key = {(f.kind, f.key): f for f in existing}
    taken = {(f.kind, f.key) for f in existing}
    seen: set[tuple[str, str]] = set()
    secrets = credential_values(turn.text for turn in turns)
    plan = Plan()
    values: list[str] = []
    for index, op in enumerate(operations):
        where = f"operation {index} ({op.op} {op.kind}/{op.key})"
        invented = sorted(set(op.evidence) - set(roles))
        if invented:
            raise ExtractionRejected(f"{where} cites turn ids {invented} that were not given")
        if op.origin == "stated" and not any(roles[i] == "user" for i in op.evidence):
            raise ExtractionRejected(f"{where} is 'stated' but no evidence turn is the user's")
        if op.value is not None:
            verdict = check_fact(op.key, op.value, kind=op.kind, names=names, learned=True)
            if verdict.reason is not None:
                raise ExtractionRejected(f"{where}: {verdict.reason}", poisoned=True)
            op = op.model_copy(update={"value": verdict.value})
        if find_credentials(f"{op.key.replace('_', ' ')}: {op.value or ''}", secrets):
            log.info("%s dropped: a credential is never remembered", where)
            continue
        if op.value is not None:
            values.append(op.value)
        op, current = _resolve_key(op, by_key, taken)
        if (op.kind, op.key) in seen:
            raise ExtractionRejected(f"{where}: the same fact appears twice")
        seen.add((op.kind, op.key))
        taken.add((op.kind, op.key))
        _plan_one(plan, op, current, conversation, lifetimes, now, where)
    if problem := check_joined(values, names=names):
        raise ExtractionRejected(problem, poisoned=True)
    held = [f.value for f in existing if f.status == "active"]
    for value in values:  # half an instruction said today, its other half stored before
        if problem := check_together(value, held, names=names):
            raise ExtractionRejected(problem, poisoned=True)
    if review_mode:
        plan.adds = [replace(fact, status="pending") for fact in plan.adds]
    return plan


def _resolve_key(
    op: ProfileOperation,
    by_key: dict[tuple[str, str], Fact],
    taken: set[tuple[str, str]],
) -> tuple[ProfileOperation, Fact | None]:
    """The stored fact an operation is about, and the registry key a new fact is written
    under. A stored key (even one from before the registry) is addressed as it is; a new fact
    takes its registry key, `other` when unknown, with the next free suffix for multi keys."""
    current = by_key.get((op.kind, op.key))
    spec = spec_of(op.key, op.kind)
    if op.op != "add":
        if current is None:  # "diet" for the fact stored as `other`: only if unambiguous
            same = [f for (k, key), f in by_key.items() if k == op.kind and spec_of(key, k) == spec]
            current = same[0] if len(same) == 1 else None
        return (op.model_copy(update={"key": current.key}) if current else op), current
    if current is not None and not (spec.multi and current.value != op.value):
        return op, current
    kind_keys = {key for kind, key in taken if kind == op.kind}
    return op.model_copy(update={"key": storage_key(op.key, kind_keys, op.kind)}), None


def _plan_one(
    plan: Plan,
    op: ProfileOperation,
    current: Fact | None,
    conversation: Conversation,
    lifetimes: Lifetimes,
    now: datetime,
    where: str,
) -> None:
    if op.op in ("delete", "confirm"):
        if current is None:
            raise ExtractionRejected(f"{where}: there is no such fact to {op.op}")
        if op.op == "delete":
            plan.deletes.append(current)
        else:
            plan.confirms.append(
                replace(
                    current,
                    confirmed_at=now,
                    expires_at=lifetimes.expires_at(current.lifetime, now),
                )
            )
        return
    assert op.value is not None
    lifetime = lifetimes.lifetime_of(op.kind, op.key, op.event_date)
    thread = conversation.thread
    fact = Fact(
        id=current.id if current else 0,
        user_id=thread.user_id,
        character_id=thread.character_id,
        kind=op.kind,
        key=op.key,
        value=op.value,
        origin=op.origin,
        scope=thread.scope,
        evidence=tuple(sorted(set(op.evidence))),
        lifetime=lifetime,
        event_date=op.event_date,
        created_at=current.created_at if current else now,
        confirmed_at=now,
        expires_at=lifetimes.expires_at(lifetime, now),
    )
    if current is None:
        plan.adds.append(fact)
    elif current.value == fact.value:
        plan.confirms.append(replace(current, confirmed_at=now, expires_at=fact.expires_at))
    elif current.origin == "stated" and fact.origin == "inferred":
        log.info("%s skipped: an inference does not overwrite what the user stated", where)
    else:
        plan.updates.append((current, fact, op.reason or "updated in a later conversation"))


def parse_extraction(arguments: dict[str, Any]) -> list[ProfileOperation]:
    try:
        return ExtractionOutput.model_validate(arguments).operations
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ExtractionRejected(f"invalid output at '{where}': {first['msg']}") from exc
