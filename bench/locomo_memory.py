"""What the product's memory would hold after each LoCoMo session, written through its real code.

In the product, two jobs run over every session: extraction (memory/profile/extraction.py) stores
facts about the user with the ids of the turns they come from, and compaction
(memory/summary/rolling.py) rewrites the thread's one rolling summary, whose claims end with
`{cite:ID}`. LoCoMo ships what an LLM drew from each session, and this module stands it in for
what our models would have answered, then lets the product's own code decide what is kept:

- speaker_a's (the user's) `observation` items of the session -> one extraction answer: an `add`
  of kind episodic, key `event` (the registry's key for something that happened; values up to 160
  characters), the observation as the value, its `D<s>:<n>` ids as the evidence ("stated" when
  one of them is the user's turn). At most 40 operations, as the schema allows. The answer goes
  through `plan_operations` (evidence inside the session, the memory gate, key suffixes) and
  `apply_fact_changes`. An operation the gate refuses would make the real extractor reject the
  whole answer and ask again; the stand-in cannot rewrite it, so it is left out alone (counted).
- speaker_b's (the character's) `observation` items -> the claims of `established_facts`, each
  ending with the cites of its evidence; the session's `session_summary` -> `open_threads`, one
  claim a sentence and no cite (LoCoMo's summaries cite nothing: they stand for the fields the
  summariser rewrites each time, and only take their share of the cap). This answer goes through
  `Summariser.compact`: the gate per claim, established facts accumulated verbatim, anchors,
  and the trim to `summary_cap_tokens` (450, bot/config.py), oldest claims first. Only the
  latest summary is read by recall, as in the product: after 30 sessions it holds the last few
  sessions' claims, not 30 sessions' worth.
- `event_summary` is left out: it cites nothing and repeats the observations.

The QA annotations (questions, answers, evidence) are never read here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from memory.engine.llm import LLMRequest, LLMResponse, ToolCall
from memory.engine.tokens import TokenEstimator
from memory.journey.model import Journey
from memory.models import Conversation, Fact, Summary, SummaryFields, Thread, Turn, UsageRecord
from memory.profile.planning import (
    ExtractionOutput,
    ExtractionRejected,
    Plan,
    plan_operations,
)
from memory.profile.view import Lifetimes
from memory.search.terms import Term
from memory.store import MemoryStore
from memory.store.protocols import ExchangeRow
from memory.summary.rolling import (
    CITE,
    MAX_CLAIM_CHARS,
    SUMMARY_TOOL,
    CompactionInput,
    Summariser,
)

SUMMARY_CAP_TOKENS = 450  # bot/config.py: Settings.summary_cap_tokens
MAX_OPERATIONS = 40  # memory/profile/planning.py: ExtractionOutput.operations
_DIA = re.compile(r"D:?(\d+):(\d+)")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class MemoryMode:
    """What the bench stores besides the turns, and how recall reads it."""

    memory: bool = True  # facts and the rolling summary after each session (--no-memory: off)
    versions: bool = False  # recall through every summary version (--summary-versions)
    journey: bool = False  # chronicle each session; recall with and without it lent (--journey)


@dataclass
class MemoryTally:
    """What the stand-in offered and what the product's code kept."""

    facts_offered: int = 0
    facts_stored: int = 0
    facts_refused: int = 0  # refused by plan_operations (the gate, the evidence rules)
    claims_offered: int = 0
    claims_refused: int = 0  # dropped by the memory gate (filter_claims), one by one
    summaries: int = 0


class _Answer:
    """An LLM whose every answer is the summary it is told to give (write_summary)."""

    def __init__(self) -> None:
        self.arguments: dict[str, Any] = {}

    async def complete(self, request: LLMRequest) -> LLMResponse:
        return LLMResponse(
            "", "locomo-memory", tool_calls=(ToolCall(SUMMARY_TOOL.name, self.arguments),)
        )


async def _no_usage(record: UsageRecord) -> None:
    """A stand-in answer costs nothing: no usage row."""


class SessionMemory:
    """Extraction and compaction after each session of one conversation."""

    def __init__(self, store: MemoryStore, names: tuple[str, str], tally: MemoryTally) -> None:
        self.store = store
        self.user_name, self.character_name = names
        self.tally = tally
        self._answer = _Answer()
        self._summariser = Summariser(
            self._answer,
            _no_usage,
            TokenEstimator(),
            cap_tokens=SUMMARY_CAP_TOKENS,
            attempts=1,
            record_rejection=self._refused,
        )

    async def after_session(
        self,
        conversation: Conversation,
        turns: Sequence[Turn],
        turn_of: dict[str, int],
        observations: dict[str, Any],
        summary: str,
        now: datetime,
    ) -> None:
        await self._extract(conversation, turns, turn_of, observations.get(self.user_name, []), now)
        await self._compact(
            conversation, turns, turn_of, observations.get(self.character_name, []), summary, now
        )

    async def _extract(
        self,
        conversation: Conversation,
        turns: Sequence[Turn],
        turn_of: dict[str, int],
        items: list[Any],
        now: datetime,
    ) -> None:
        roles = {turn.id: turn.role for turn in turns}
        raw = []
        for text, evidence in _items(items, turn_of, roles):
            stated = any(roles[i] == "user" for i in evidence)
            raw.append(
                {
                    "op": "add",
                    "kind": "episodic",
                    "key": "event",
                    "value": text,
                    "origin": "stated" if stated else "inferred",
                    "evidence": evidence,
                }
            )
        operations = ExtractionOutput.model_validate({"operations": raw[:MAX_OPERATIONS]})
        thread = conversation.thread
        existing = await self.store.facts(thread.user_id, thread.character_id, thread.scope)
        kept = []
        for op in operations.operations:
            self.tally.facts_offered += 1
            try:  # alone first: the one operation the gate refuses is left out, not the rest
                plan_operations(
                    [op], conversation, turns, existing, Lifetimes(), now, names=self._names
                )
                kept.append(op)
            except ExtractionRejected:
                self.tally.facts_refused += 1
        try:
            plan = plan_operations(
                kept, conversation, turns, existing, Lifetimes(), now, names=self._names
            )
        except ExtractionRejected:
            self.tally.facts_refused += len(kept)
            return  # read together they are refused: the profile stays as it was
        await self._write(plan, conversation.id, now)

    async def _write(self, plan: Plan, conversation_id: int, now: datetime) -> None:
        await self.store.apply_fact_changes(
            plan.adds, plan.updates, plan.deletes, plan.confirms, conversation_id, now
        )
        self.tally.facts_stored += len(plan.adds)

    async def _compact(
        self,
        conversation: Conversation,
        turns: Sequence[Turn],
        turn_of: dict[str, int],
        items: list[Any],
        summary: str,
        now: datetime,
    ) -> None:
        roles = {turn.id: turn.role for turn in turns}
        claims = []
        for text, evidence in _items(items, turn_of, roles):
            cites = " ".join(f"{{cite:{i}}}" for i in evidence)
            claims.append(f"{text[: MAX_CLAIM_CHARS - len(cites) - 1]} {cites}")
        self.tally.claims_offered += len(claims)
        sentences = [s.strip()[:MAX_CLAIM_CHARS] for s in _SENTENCE.split(summary) if s.strip()]
        self._answer.arguments = {
            "established_facts": claims,
            "relationship": [],
            "commitments": [],
            "tone": [],
            "open_threads": sentences,
            "canon": [],
        }
        thread = conversation.thread
        job = CompactionInput(
            thread=thread,
            character_name=self.character_name,
            language="en",
            previous=await self.store.latest_summary(thread),
            folded=tuple(turns),
            conversation_id=conversation.id,
        )
        written = await self._summariser.compact(job, now)
        if written is not None:
            await self.store.save_summary(thread, written, conversation.id)
            self.tally.summaries += 1

    async def _refused(self, thread: Thread, conversation_id: int | None, reason: str) -> None:
        self.tally.claims_refused += 1

    @property
    def _names(self) -> tuple[str, ...]:
        return (self.character_name,)


def _items(
    items: list[Any], turn_of: dict[str, int], roles: dict[int, str]
) -> list[tuple[str, list[int]]]:
    """(text, evidence turn ids of this session) of each observation that cites one."""
    found = []
    for item in items:
        if not isinstance(item, list) or len(item) < 2 or not str(item[0]).strip():
            continue
        cited = item[1] if isinstance(item[1], list) else [item[1]]
        ids = sorted(
            {
                turn_of[f"D{number}:{line}"]
                for raw in cited
                for number, line in _DIA.findall(str(raw))
                if turn_of.get(f"D{number}:{line}") in roles
            }
        )
        if ids:
            found.append((str(item[0]).strip(), ids[:20]))
    return found


def session_memory(item: dict[str, Any], number: int) -> tuple[dict[str, Any], str]:
    """The session's observations (by speaker) and its summary, from a LoCoMo sample."""
    observations = item.get("observation", {}).get(f"session_{number}_observation", {})
    summary = item.get("session_summary", {}).get(f"session_{number}_summary", "")
    return (observations if isinstance(observations, dict) else {}), str(summary or "")


class EverySummary:
    """A RecallStore whose `latest_summary` holds every cited claim any stored version of the
    thread's summary held (`--summary-versions`): a probe of a lever the product could have, as
    it keeps every version (table summaries) but recalls through the latest only. The versions
    are found by id, 1 to the latest's, once per thread: a scan fit for the bench's fresh
    database only."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self._merged: dict[Thread, Summary | None] = {}

    async def latest_summary(self, thread: Thread) -> Summary | None:
        if thread not in self._merged:
            self._merged[thread] = await self._merge(thread)
        return self._merged[thread]

    async def _merge(self, thread: Thread) -> Summary | None:
        latest = await self.store.latest_summary(thread)
        if latest is None:
            return None
        claims: dict[str, None] = {}
        for summary_id in range(1, latest.id + 1):
            version = await self.store.summary_by_id(thread.user_id, summary_id)
            for _, items in version.fields.items() if version else ():
                claims.update((claim, None) for claim in items if CITE.search(claim))
        fields = SummaryFields(established_facts=tuple(claims))
        return replace(latest, fields=fields)

    async def facts(self, user_id: int, character_id: str, scope: str | None = None) -> list[Fact]:
        return await self.store.facts(user_id, character_id, scope)

    async def journey(self, user_id: int, character_id: str) -> Journey | None:
        return await self.store.journey(user_id, character_id)

    async def search_term_counts(
        self, user_id: int, character_id: str, scope: str | None, terms: list[Term]
    ) -> list[int]:
        return await self.store.search_term_counts(user_id, character_id, scope, terms)

    async def thread_text_stats(
        self, user_id: int, character_id: str, scope: str | None
    ) -> tuple[int, int]:
        return await self.store.thread_text_stats(user_id, character_id, scope)

    async def search_exchanges(
        self, user_id: int, character_id: str, scope: str | None, terms: list[Term], limit: int
    ) -> tuple[list[int], list[ExchangeRow]]:
        return await self.store.search_exchanges(user_id, character_id, scope, terms, limit)

    async def exchange_turns(
        self, user_id: int, character_id: str, scope: str | None, turn_ids: list[int]
    ) -> list[ExchangeRow]:
        return await self.store.exchange_turns(user_id, character_id, scope, turn_ids)
