"""The checks an extraction's answer passes before anything is written: its schema, its
evidence (only the session's turns; a "stated" fact backed by a user turn), the key registry and
the memory gate, value by value and read together. An operation that fails is refused alone and
the rest of the answer is kept; only a structurally broken answer, or one with nothing left to
write, is rejected whole (memory/profile/extraction.py asks again with the reason)."""

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
from memory.integrity.together import check_joined, check_together, split_values
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
    """The answer as a whole broke a rule (fed back to the model on the next attempt): it is
    structurally broken, or every operation in it was refused (``refused``)."""

    def __init__(
        self, reason: str, poisoned: bool = False, refused: Sequence[Refusal] = ()
    ) -> None:
        super().__init__(reason, poisoned)
        self.refused = tuple(refused)


@dataclass(frozen=True)
class Refusal:
    """One operation left out of the answer, and why; the rest of the answer stands."""

    where: str
    reason: str
    poisoned: bool = False  # the memory gate read it as an instruction

    def __str__(self) -> str:
        return f"{self.where}: {self.reason}"


@dataclass
class Plan:
    adds: list[Fact] = field(default_factory=list)
    updates: list[tuple[Fact, Fact, str]] = field(default_factory=list)
    deletes: list[Fact] = field(default_factory=list)
    confirms: list[Fact] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)  # logged and counted by the caller

    def writes(self) -> bool:
        return bool(self.adds or self.updates or self.deletes or self.confirms)

    def merge(self, other: Plan) -> None:
        self.adds += other.adds
        self.updates += other.updates
        self.deletes += other.deletes
        self.confirms += other.confirms


@dataclass
class _Planned:
    """One operation that passed its own checks: what it writes, and its value."""

    where: str
    value: str | None
    plan: Plan


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
    """Check every operation against the session, the key registry and the memory gate. An
    operation that fails is refused alone (``Plan.refused``) and the others stand: one value
    over its length, or one false alarm, costs that value and not a second call. The answer is
    rejected whole (ExtractionRejected, asked again) only when it is structurally broken (a
    cited turn id that was not given) or when operations were refused and nothing is left to
    write. ``names`` are the character's names (memory.integrity.gate.check_text).

    In review mode new facts are written as pending: they wait for the user's approval.
    """
    roles = {turn.id: turn.role for turn in turns}
    for index, op in enumerate(operations):
        # an invented id means the model did not read the session: nothing in it is trusted
        if invented := sorted(set(op.evidence) - set(roles)):
            where = f"operation {index} ({op.op} {op.kind}/{op.key})"
            raise ExtractionRejected(f"{where} cites turn ids {invented} that were not given")
    by_key = {(f.kind, f.key): f for f in existing}
    taken = {(f.kind, f.key) for f in existing}
    seen: set[tuple[str, str]] = set()
    secrets = credential_values(turn.text for turn in turns)
    held = [f.value for f in existing if f.status == "active"]
    plan = Plan()
    planned: list[_Planned] = []
    for index, op in enumerate(operations):
        where = f"operation {index} ({op.op} {op.kind}/{op.key})"
        checked = _check_one(op, roles, held, names)
        if isinstance(checked, Refusal):
            plan.refused.append(replace(checked, where=where))
            continue
        op = checked
        if find_credentials(f"{op.key.replace('_', ' ')}: {op.value or ''}", secrets):
            log.info("%s dropped: a credential is never remembered", where)
            continue
        op, current = _resolve_key(op, by_key, taken)
        if (op.kind, op.key) in seen:
            plan.refused.append(Refusal(where, "the same fact appears twice"))
            continue
        one = Plan()
        if problem := _plan_one(one, op, current, conversation, lifetimes, now, where):
            plan.refused.append(Refusal(where, problem))
            continue
        seen.add((op.kind, op.key))
        taken.add((op.kind, op.key))
        planned.append(_Planned(where, op.value, one))
    split = _split_orders(planned, names)
    for position, item in enumerate(planned):
        if position in split:
            plan.refused.append(Refusal(item.where, split[position], poisoned=True))
        else:
            plan.merge(item.plan)
    for refusal in plan.refused:
        log.warning("%s refused, the rest of the answer kept: %s", refusal.where, refusal.reason)
    if plan.refused and not plan.writes():
        reasons = "; ".join(str(r) for r in plan.refused)
        poisoned = any(r.poisoned for r in plan.refused)
        raise ExtractionRejected(
            f"{reasons}; nothing was left to record", poisoned=poisoned, refused=plan.refused
        )
    if review_mode:
        plan.adds = [replace(fact, status="pending") for fact in plan.adds]
    return plan


def _check_one(
    op: ProfileOperation, roles: dict[int, str], held: Sequence[str], names: Sequence[str]
) -> ProfileOperation | Refusal:
    """The operation with its value as the gate cleaned it, or why it is refused (``where``
    is filled in by the caller)."""
    if op.origin == "stated" and not any(roles[i] == "user" for i in op.evidence):
        return Refusal("", "is 'stated' but no evidence turn is the user's")
    if op.value is None:
        return op
    verdict = check_fact(op.key, op.value, kind=op.kind, names=names, learned=True)
    if verdict.reason is not None:
        return Refusal("", verdict.reason, poisoned=True)
    # half an instruction said today, its other half stored before
    if problem := check_together(verdict.value, held, names=names):
        return Refusal("", problem, poisoned=True)
    return op.model_copy(update={"value": verdict.value})


def _split_orders(planned: Sequence[_Planned], names: Sequence[str]) -> dict[int, str]:
    """The operations to refuse because their values, read together, make an instruction:
    the pairs that do (`split_values`: neighbours in both orders, quoted halves anywhere), when
    the rest then reads clean; else every value. What is written never reads as an instruction
    when its values are read together."""
    valued = [(position, p.value) for position, p in enumerate(planned) if p.value is not None]
    values = [value for _, value in valued]
    problem = check_joined(values, names=names)
    if problem is None:
        return {}
    pairs = split_values(values, names=names)
    rest = [value for index, value in enumerate(values) if index not in pairs]
    if pairs and check_joined(rest, names=names) is None:
        return {valued[index][0]: reason for index, reason in pairs.items()}
    return {position: problem for position, _ in valued}


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
) -> str | None:
    """Add what the operation writes to ``plan``; the reason it cannot, if so."""
    if op.op in ("delete", "confirm"):
        if current is None:
            return f"there is no such fact to {op.op}"
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
        return None
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
    return None


def parse_extraction(arguments: dict[str, Any]) -> list[ProfileOperation]:
    try:
        return ExtractionOutput.model_validate(arguments).operations
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ExtractionRejected(f"invalid output at '{where}': {first['msg']}") from exc
