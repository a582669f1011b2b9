"""The user owns their memory: view, correct, delete, forget, export/import, review, expire, why.

Every operation is scoped to (user, character) before it touches a row: a fact number that
belongs to anyone else is indistinguishable from one that does not exist.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Protocol

from memory.errors import UserFacingError
from memory.integrity.gate import check_fact, check_reply, check_text, check_turn
from memory.integrity.together import filter_claims
from memory.journey.imports import gate_journeys
from memory.journey.model import JOURNEY_SCOPE, Journey
from memory.journey.source import JourneyReader, drop_citing, resolving_journey
from memory.models import (
    Fact,
    FactVersion,
    ReplySources,
    Summary,
    SummaryFields,
    Thread,
    Turn,
    User,
)
from memory.profile.view import FactState, Lifetimes
from memory.store.protocols import Erasure, Export, Facts, Summaries

EXPORT_FORMAT = "companion-memory"
EXPORT_VERSION = 1
_DURATION = re.compile(r"^(\d{1,4})\s*(d|w|m|y)$")
_DURATION_DAYS = {"d": 1, "w": 7, "m": 30, "y": 365}


@dataclass(frozen=True)
class FactView:
    fact: Fact
    state: FactState
    history: tuple[FactVersion, ...]


@dataclass(frozen=True)
class LearnedInGroup:
    """What another character learned of the user in the group the view is asked from."""

    character_id: str
    name: str
    facts: tuple[FactView, ...]


@dataclass(frozen=True)
class MemoryView:
    facts: tuple[FactView, ...]
    summary: Summary | None
    review_mode: bool
    journey: JourneyView | None = None  # a private thread's story (never a group's)
    summary_current: bool = False  # the summary covers the open conversation (not an ended one)
    # Asked from a group: the other characters' facts learned there, per character (each
    # fact of `facts` says its own scope: a group's is marked as learned there).
    others_in_group: tuple[LearnedInGroup, ...] = ()


@dataclass(frozen=True)
class JourneyView:
    """The journey as its owner reads it: each cited turn's moment, for dates instead of codes."""

    journey: Journey
    moments: dict[int, datetime]


@dataclass(frozen=True)
class WhyView:
    sources: ReplySources
    facts: tuple[Fact, ...]
    summary: Summary | None
    turns: tuple[Turn, ...]
    # The journey block 2 showed, as it reads now; `journey_rewritten` when that version was
    # since replaced by the next chronicle or deleted (its text is gone: delete means delete).
    journey: JourneyView | None = None
    journey_rewritten: bool = False


class MemoryServiceStore(Facts, Summaries, Export, Erasure, JourneyReader, Protocol):
    """What /memoria reads and changes."""


def parse_duration(text: str) -> int | None:
    """'30d', '2w', '6m', '1y' -> days; 'never'/'nunca' -> None; anything else is an error."""
    cleaned = text.strip().lower()
    if cleaned in ("never", "nunca"):
        return None
    match = _DURATION.match(cleaned)
    if not match:
        raise UserFacingError(
            f"'{text}' is not a duration: use a number and d, w, m or y (30d, 2w, 6m, 1y), "
            "or 'nunca'/'never'.",
            code="bad_duration",
            given=text,
        )
    return int(match.group(1)) * _DURATION_DAYS[match.group(2)]


class MemoryService:
    def __init__(
        self,
        store: MemoryServiceStore,
        lifetimes: Lifetimes,
        clock: Callable[[], datetime],
        forgetting: Callable[[int, str], AbstractAsyncContextManager[None]],
        on_change: Callable[[int, str], None],
        names_of: Callable[[str], tuple[str, ...]] = lambda _character: (),
    ) -> None:
        self._store = store
        # What each character is called (Character.names_in_memory): the gate refuses an
        # imported or corrected memory that makes one of them its subject.
        self._names_of = names_of
        self._lifetimes = lifetimes
        self._clock = clock
        # Holds the engine still around a forget: the pair's background work stopped, its
        # sessions out of RAM (Companion.forgetting).
        self._forgetting = forgetting
        # Tells live sessions that the facts changed: a deleted or corrected fact leaves the
        # prompt at the user's next message, not when the conversation ends.
        self._on_change = on_change

    async def _owned(self, user: User, character_id: str, fact_id: int) -> Fact:
        fact = await self._store.fact(user.id, character_id, fact_id)
        if fact is None:
            raise UserFacingError(
                f"There is no fact #{fact_id} in your memory.", code="no_fact", id=fact_id
            )
        return fact

    async def view(self, user: User, character_id: str, scope: str) -> MemoryView:
        """This character's facts (every scope), and asked from a group (`group:...`), what
        every other character learned of the user there."""
        views = await self._fact_views(user, await self._store.facts(user.id, character_id))
        thread = Thread(user.id, character_id, scope)
        summary = await self._store.latest_summary(thread)
        journey = await self.journey(user, character_id) if scope == JOURNEY_SCOPE else None
        others: list[LearnedInGroup] = []
        if scope.startswith("group:"):
            for other in await self._store.characters_of(user.id):
                if other != character_id:
                    learned = await self._store.facts(user.id, other, scope)
                    if learned:
                        name = (self._names_of(other) or (other,))[0]
                        others.append(
                            LearnedInGroup(other, name, await self._fact_views(user, learned))
                        )
        review = await self._store.review_mode(user.id)
        current = await self._covers_open(thread, summary)
        return MemoryView(views, summary, review, journey, current, tuple(others))

    async def _fact_views(self, user: User, facts: list[Fact]) -> tuple[FactView, ...]:
        now = self._clock()
        views = []
        for fact in facts:
            history = await self._store.fact_history(user.id, fact.id)
            views.append(FactView(fact, self._lifetimes.state(fact, now), tuple(history)))
        return tuple(views)

    async def _covers_open(self, thread: Thread, summary: Summary | None) -> bool:
        """Whether the summary folds turns of the conversation still open: after /reset or a
        timeout it tells of one that ended."""
        conversation = await self._store.open_conversation(thread)
        if summary is None or conversation is None:
            return False
        turns = await self._store.conversation_turns(conversation.id)
        return any(t.id <= summary.covers_up_to_turn_id for t in turns)

    async def correct(self, user: User, character_id: str, fact_id: int, value: str) -> Fact:
        """The user's correction is stored as stated; the old value goes to the history."""
        old = await self._owned(user, character_id, fact_id)
        now = self._clock()
        verdict = check_fact(
            old.key, value, kind=old.kind, names=self._names_of(character_id), learned=True
        )
        if verdict.reason is not None:
            thread = Thread(user.id, character_id, old.scope)
            await self._store.record_rejection(thread, None, verdict.reason, now)
            raise UserFacingError(
                f"That value cannot be stored: {verdict.reason}.",
                code="bad_value",
                fact_key=old.key,
            )
        new = replace(
            old,
            value=verdict.value,
            origin="stated",
            confirmed_at=now,
            expires_at=self._lifetimes.expires_at(old.lifetime, now),
            status="active",
        )
        await self._store.apply_fact_changes(
            [], [(old, new, "corrected by the user")], [], [], None, now
        )
        self._on_change(user.id, character_id)
        return new

    async def delete(self, user: User, character_id: str, fact_id: int) -> None:
        fact = await self._owned(user, character_id, fact_id)
        await self._store.delete_fact(user.id, character_id, fact_id)
        # The journey's sentences resting on the same turns go with it: delete means delete.
        await drop_citing(self._store, user.id, character_id, set(fact.evidence))
        self._on_change(user.id, character_id)

    async def journey(self, user: User, character_id: str) -> JourneyView | None:
        """/memoria historia: the journey, without what cites a turn deleted since."""
        journey = await resolving_journey(self._store, Thread(user.id, character_id, "dm"))
        if journey is None:
            return None
        turns = await self._store.turns_by_ids(user.id, character_id, sorted(journey.cited_ids))
        return JourneyView(journey, {t.id: t.created_at for t in turns})

    async def delete_journey(self, user: User, character_id: str) -> bool:
        """/memoria historia borrar: the journey goes (its bytes purged, as a fact's)."""
        deleted = await self._store.delete_journey(user.id, character_id)
        self._on_change(user.id, character_id)
        return deleted

    async def expire(self, user: User, character_id: str, fact_id: int, duration: str) -> Fact:
        fact = await self._owned(user, character_id, fact_id)
        days = parse_duration(duration)
        lifetime = "never" if days is None else f"days:{days}"
        updated = replace(
            fact,
            lifetime=lifetime,
            expires_at=self._lifetimes.expires_at(lifetime, fact.confirmed_at),
        )
        await self._store.apply_fact_changes([], [], [], [updated], None, self._clock())
        self._on_change(user.id, character_id)
        return updated

    async def review(self, user: User, character_id: str, fact_id: int, accept: bool) -> None:
        fact = await self._owned(user, character_id, fact_id)
        if fact.status != "pending":
            raise UserFacingError(
                f"Fact #{fact_id} is not waiting for review.", code="not_pending", id=fact_id
            )
        if accept:
            now = self._clock()
            await self._store.apply_fact_changes(
                [], [], [], [replace(fact, status="active")], None, now
            )
        else:
            await self._store.delete_fact(user.id, character_id, fact_id)
        self._on_change(user.id, character_id)

    async def set_review_mode(self, user: User, on: bool) -> None:
        await self._store.set_review_mode(user.id, on)

    async def why(self, user: User, character_id: str) -> WhyView | None:
        sources = await self._store.last_reply_sources(user.id, character_id)
        if sources is None:
            return None
        facts = [
            f for f in await self._store.facts(user.id, character_id) if f.id in sources.fact_ids
        ]
        summary = (
            await self._store.summary_by_id(user.id, sources.summary_id)
            if sources.summary_id
            else None
        )
        cited = set(summary.cited_ids) if summary else set()
        turns = await self._store.turns_by_ids(
            user.id,
            character_id,
            sorted(cited | set(sources.window_turn_ids) | set(sources.fragment_turn_ids)),
        )
        journey = await self._shown_journey(user, character_id, sources.journey_id)
        return WhyView(
            sources,
            tuple(facts),
            summary,
            tuple(sorted(turns, key=lambda t: t.id)),
            journey=journey,
            journey_rewritten=sources.journey_id is not None and journey is None,
        )

    async def _shown_journey(
        self, user: User, character_id: str, journey_id: int | None
    ) -> JourneyView | None:
        """The journey a reply was built with, if it is still the stored one."""
        if journey_id is None:
            return None
        current = await self.journey(user, character_id)
        return current if current is not None and current.journey.id == journey_id else None

    async def forget(self, user: User, character_id: str) -> dict[str, int]:
        """Everything with this character, from every table and the search index, with the
        user's background work stopped first: nothing computed from it lands afterwards."""
        async with self._forgetting(user.id, character_id):
            return await self._store.forget(user.id, character_id)

    async def export(self, user: User, character_id: str) -> dict[str, Any]:
        rows = await self._store.export_rows(user.id, character_id)
        return {
            "format": EXPORT_FORMAT,
            "version": EXPORT_VERSION,
            "exported_at": self._clock().isoformat(),
            "user": {
                "platform": user.platform,
                "id": user.platform_user_id,
                "display_name": user.display_name,
            },
            "character_id": character_id,
            **{table: [_public(row) for row in items] for table, items in rows.items()},
        }

    async def import_(self, user: User, character_id: str, data: dict[str, Any]) -> dict[str, int]:
        """Read an export back (the documented format) into this user's memory."""
        if data.get("format") != EXPORT_FORMAT or data.get("version") != EXPORT_VERSION:
            raise UserFacingError(
                f"not a {EXPORT_FORMAT} export of version {EXPORT_VERSION} (got format "
                f"{data.get('format')!r}, version {data.get('version')!r})"
            )
        now = self._clock()
        data, refusals = gate_import(data, self._names_of(character_id))
        counts = await self._store.import_rows(user.id, character_id, data, now)
        for scope, reason in refusals:
            thread = Thread(user.id, character_id, scope)
            await self._store.record_rejection(thread, None, f"import: {reason}", now)
        if refusals:
            counts["refused"] = len(refusals)
        self._on_change(user.id, character_id)
        return counts


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


def _public(row: dict[str, Any]) -> dict[str, Any]:
    """Drop internal columns that mean nothing outside this database."""
    hidden = {"user_id"}
    out = {key: value for key, value in row.items() if key not in hidden}
    for key in ("evidence", "fields_json", "cited_ids_json"):
        if isinstance(out.get(key), str):
            out[key] = json.loads(out[key])
    return out
