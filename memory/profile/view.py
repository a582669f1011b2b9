"""The long-term profile as the character sees it: facts age, and are ranked into block 2.

A fact past its lifetime is no longer stated as true but shown as a hypothesis to confirm; a
dated event turns, once past, into something the character may ask about; the lines are ranked
so that, when they do not all fit the budget, the least useful go first (see docs/memory.md).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from enum import Enum
from typing import Protocol

from cards.character import CharacterBook
from memory.engine.labels import label
from memory.engine.tokens import TokenEstimator
from memory.integrity.gate import as_data, check_text
from memory.integrity.learned import learned_reason
from memory.integrity.together import split_values
from memory.models import Fact, Thread
from memory.profile.fact_keys import canonical_key
from memory.store.protocols import Facts

# Keys that say who the person is: never dropped first, never aged by default.
IDENTITY_KEYS = ("name", "preferred_name", "pronouns", "age", "birthday", "language")


class FactState(Enum):
    CURRENT = "current"
    UPCOMING = "upcoming"  # a dated event still ahead (or just now)
    TO_ASK = "to_ask"  # a dated event that has just happened: ask how it went
    TO_CONFIRM = "to_confirm"  # past its lifetime: a hypothesis, not a truth
    PAST = "past"  # an event long gone: background only


@dataclass(frozen=True)
class Lifetimes:
    """Days a fact stays true without confirmation, by key first, then by kind; None = never."""

    by_key: dict[str, int | None] = field(
        default_factory=lambda: {
            "name": None,
            "preferred_name": None,
            "pronouns": None,
            "birthday": None,
            "language": None,
            "age": 365,
            "job": 180,
            "city": 180,
            "home": 180,
            "partner": 365,
        }
    )
    by_kind: dict[str, int | None] = field(
        default_factory=lambda: {"semantic": 180, "emotional": 60, "episodic": 120}
    )
    event_ask_days: int = 14  # after its date, the character may ask about an event this long

    def lifetime_of(self, kind: str, key: str, event_date: date | None) -> str:
        if event_date is not None:
            return "event"
        days = self.by_key.get(key, self.by_kind.get(kind))
        return "never" if days is None else f"days:{days}"

    def expires_at(self, lifetime: str, confirmed_at: datetime) -> datetime | None:
        if lifetime.startswith("days:"):
            return confirmed_at + timedelta(days=int(lifetime.removeprefix("days:")))
        return None

    def state(self, fact: Fact, now: datetime) -> FactState:
        if fact.event_date is not None:
            age = (now.date() - fact.event_date).days
            if age <= 0:
                return FactState.UPCOMING
            return FactState.TO_ASK if age <= self.event_ask_days else FactState.PAST
        if fact.expires_at is not None and now >= fact.expires_at:
            return FactState.TO_CONFIRM
        return FactState.CURRENT


# A few hypotheses to confirm always get a place, so that a full profile still asks about what
# may have changed instead of silently never mentioning it again.
CONFIRM_SLOTS = 2
# The block's own header and the group note are rendered around these lines
# (memory/engine/prompt.py).
HEADER_RESERVE_TOKENS = 60


def _rank(fact: Fact, state: FactState, confirm_slot: bool) -> tuple[int, float]:
    """Lower ranks first: who the person is, what is happening now, feelings, the rest."""
    if state is FactState.CURRENT and fact.key in IDENTITY_KEYS:
        group = 0
    elif state in (FactState.TO_ASK, FactState.UPCOMING):
        group = 1
    elif state is FactState.TO_CONFIRM:
        group = 2 if confirm_slot else 6
    elif state is FactState.CURRENT:
        group = {"emotional": 3, "semantic": 4, "episodic": 5}[fact.kind]
    else:
        group = 7
    return group, -fact.confirmed_at.timestamp()


def _line(fact: Fact, state: FactState, language: str) -> str:
    # The key is shown by its registry name (a key from before the registry, unknown to it,
    # reads as its kind's fallback: event, feeling or other), the value as data: one line,
    # nothing that can close the block.
    text = f"- {canonical_key(fact.key, fact.kind).replace('_', ' ')}: {as_data(fact.value)}"
    if fact.event_date is not None:
        text += f" ({fact.event_date.isoformat()})"
    if state is FactState.TO_CONFIRM:
        noted = fact.confirmed_at.date().isoformat()
        text += f" ({'anotado el' if language == 'es' else 'noted on'} {noted})"
    return text


@dataclass(frozen=True)
class ProfileLines:
    lines: tuple[str, ...] = ()
    fact_ids: tuple[int, ...] = ()  # the facts shown, for /memoria porque
    dropped: int = 0
    # The journey shown beside the facts (memory/journey/source.py), and its row for porque.
    journey: tuple[str, ...] = ()
    journey_id: int | None = None
    # In a scene: the people whose facts the lines hold (memory/scene/people.py).
    people: tuple[int, ...] = ()

    @property
    def shown(self) -> int:
        return len(self.fact_ids)


def profile_lines(
    facts: list[Fact],
    now: datetime,
    lifetimes: Lifetimes,
    language: str,
    budget: int,
    tokens: TokenEstimator,
) -> ProfileLines:
    """Rank the facts and keep what fits the budget (less the block's header); a section title
    is paid for, at its real cost, only above a fact that fits."""
    states = [(f, lifetimes.state(f, now)) for f in facts if f.status == "active"]
    stale = sorted(
        (f for f, state in states if state is FactState.TO_CONFIRM),
        key=lambda f: -f.confirmed_at.timestamp(),
    )
    slots = {f.id for f in stale[:CONFIRM_SLOTS]}
    ranked = sorted(states, key=lambda pair: _rank(pair[0], pair[1], pair[0].id in slots))
    # The gate reads what the block would show: each value alone (facts stored before the
    # gate existed pass it here too), then the values together, as the block is read (two
    # that make an instruction together, an import's or halves stored in different sessions,
    # are both left out). What it refuses frees budget for the next ranked facts, read in
    # turn. Only what fits is read: a profile of many facts costs what a full block costs.
    # A refused fact still appears in /memoria ver, where the user can correct or delete it.
    passed: set[int] = set()
    while True:
        sections, shown = _fit(ranked, language, budget, tokens)
        left_out = {f.id for f in shown if f.id not in passed and not _passes_alone(f)}
        passed.update(f.id for f in shown)
        if not left_out:
            split = split_values([fact.value for fact in shown])
            left_out = {shown[index].id for index in split}
        if not left_out:
            break
        ranked = [pair for pair in ranked if pair[0].id not in left_out]
    lines = list(sections["known"])
    for section in ("to_ask", "to_confirm"):
        if sections[section]:
            lines += ["", label(language, section), *sections[section]]
    return ProfileLines(tuple(lines), tuple(f.id for f in shown), len(ranked) - len(shown))


def _passes_alone(fact: Fact) -> bool:
    # the learned check too: a value stored before the model (or under an older one) is
    # read as today's writes are
    value = fact.value
    return check_text(value, max_len=len(value) + 1) is None and learned_reason(value) is None


def _fit(
    ranked: list[tuple[Fact, FactState]], language: str, budget: int, tokens: TokenEstimator
) -> tuple[dict[str, list[str]], list[Fact]]:
    """The lines of each section that fit the budget, in rank order, and their facts in the
    order the block shows them (section by section)."""
    sections: dict[str, list[str]] = {"known": [], "to_ask": [], "to_confirm": []}
    facts: dict[str, list[Fact]] = {name: [] for name in sections}
    used = HEADER_RESERVE_TOKENS
    for fact, state in ranked:
        section = {FactState.TO_ASK: "to_ask", FactState.TO_CONFIRM: "to_confirm"}.get(
            state, "known"
        )
        line = _line(fact, state, language)
        cost = tokens.count(line) + 1
        title_cost = (
            0
            if sections[section] or section == "known"
            else (tokens.count(label(language, section)) + 2)
        )
        if used + cost + title_cost > budget:
            continue  # a shorter, lower-ranked line may still fit
        sections[section].append(line)
        facts[section].append(fact)
        used += cost + title_cost
    return sections, [fact for name in sections for fact in facts[name]]


class ProfileService:
    """Block 2 for a new session: the facts of this scope only (DM facts never reach a group)."""

    def __init__(
        self,
        store: Facts,
        lifetimes: Lifetimes,
        budget: int,
        tokens: TokenEstimator,
        characters: CharacterBook,
    ) -> None:
        self._store = store
        self._lifetimes = lifetimes
        self._budget = budget
        self._tokens = tokens
        self._characters = characters

    async def lines_for(self, thread: Thread, now: datetime) -> ProfileLines:
        facts = await self._store.facts(thread.user_id, thread.character_id, thread.scope)
        language = self._characters.language_of(thread.character_id)
        # The gate re-reads every value shown (about 100 ms for twenty facts): in a thread, so
        # a session start never holds up the other users' messages.
        return await asyncio.to_thread(
            profile_lines, facts, now, self._lifetimes, language, self._budget, self._tokens
        )


class ProfileSource(Protocol):
    """What the engine needs of the long-term profile: its lines for a new session."""

    async def lines_for(self, thread: Thread, now: datetime) -> ProfileLines: ...
