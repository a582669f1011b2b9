"""After a private conversation ends: the chronicler rewrites the journey ("El Viaje", seed 002)
from the previous one and the conversation's turns, by one forced tool call, checked by code.

Never on the reply path: it runs beside the profile's extraction, once per conversation (the
journey_runs table says which were written). Each check is a named rule of
memory/journey/checks.py; a rejected chronicle is asked for again with the reason; after the
retries the previous journey stays, and the failure is logged and counted in llm_usage. While
the provider fails, the conversation is asked for again on a bounded schedule, then given up
(memory/engine/retries.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from cards.character import Character, CharacterBook
from memory.budget.policy import payer_of
from memory.engine.forced_tool import OutputRejected, call_until_valid
from memory.engine.llm import LLM, ChatMessage, LLMRequest, LLMResponse, TextBlock, ToolSpec
from memory.engine.prefix import ReplyPrefixes, framed
from memory.engine.retries import Backoff, backoff_of
from memory.engine.tokens import TokenEstimator
from memory.integrity.credentials import credential_values
from memory.journey import checks
from memory.journey.model import JOURNEY_SCOPE, Journey
from memory.journey.prompting import instructions, request_body
from memory.journey.scene_prompting import scene_instructions, scene_request_body
from memory.journey.source import JourneyReader, resolving_journey
from memory.models import Conversation, Thread, Turn, UsageRecord
from memory.store.protocols import Facts, Usage
from memory.store.scene_journeys import SceneJourneys
from memory.summary.supersede import date_journey

log = logging.getLogger(__name__)

# About a chronicle of eight to ten paragraphs: with the profile's 500 it keeps block 2 near
# 1,200 tokens, a tenth of a reply's request, while a month of conversations still fits when the
# oldest chapters are condensed into an opening (docs/memory.md, "The journey").
JOURNEY_MAX_TOKENS = 700

JOURNEY_TOOL = ToolSpec(
    name="write_journey",
    description="Record the rewritten journey: the chronicle of the relationship so far.",
    input_schema={
        "type": "object",
        "properties": {
            "journey": {
                "type": "string",
                "description": "The whole chronicle, in prose, past tense, paragraphs separated "
                "by one blank line, each key point followed at once by {cite:ID} of its turn.",
            }
        },
        "required": ["journey"],
        "additionalProperties": False,
    },
)


class ChroniclerStore(JourneyReader, SceneJourneys, Facts, Usage, Protocol):
    """What the chronicler reads (the conversation's turns, the journey) and writes."""

    async def record_rejection(
        self, thread: Thread, conversation_id: int | None, reason: str, now: datetime
    ) -> None: ...


class JourneyRejected(OutputRejected):
    """The chronicle broke a whole-output rule."""


class OverBudget(JourneyRejected):
    """Every rule kept but the budget: after the retries, code cuts the oldest paragraphs."""

    def __init__(self, reason: str, paragraphs: tuple[str, ...]) -> None:
        super().__init__(reason)
        self.paragraphs = paragraphs


@dataclass(frozen=True)
class Telling:
    """What differs between a private thread's journey and a scene's chronicle (one per
    character present, from its own copy): what the chronicler is told and shown, and the
    cap. Every check, retry and save is the same."""

    cap: int
    instructions: Callable[[str, str, int], str]
    body: Callable[[Journey | None, Sequence[Turn], str, str], str]


@dataclass(frozen=True)
class Checked:
    paragraphs: tuple[str, ...]
    refused: tuple[checks.SentenceRefusal, ...]


def check_chronicle(
    arguments: dict[str, object] | None,
    allowed: set[int],
    known_credentials: frozenset[str],
    cap: int,
    tokens: TokenEstimator,
    names: Sequence[str] = (),
    may_be_empty: bool = False,
) -> Checked:
    """Every rule, in order; raises JourneyRejected with the reason the model is shown. An
    empty journey is an answer only when there is none yet (nothing worth telling so far):
    otherwise it would erase the story."""
    text = arguments.get("journey") if isinstance(arguments, dict) else None
    if may_be_empty and isinstance(text, str) and not text.strip():
        return Checked((), ())
    if not isinstance(text, str) or not text.strip():
        raise JourneyRejected("no write_journey call with a non-empty 'journey' string")
    text = checks.normalise_citations(text.strip())
    paragraphs = Journey.split(text)
    for reason in (
        checks.prose_not_list(text),
        checks.citations_integrated(paragraphs),
        checks.known_ids(text, allowed),
    ):
        if reason:
            raise JourneyRejected(f"the journey {reason}")
    kept, refused = checks.gate_sentences(paragraphs, names)
    kept = checks.mask_sentences(kept, known_credentials)
    if not kept:
        raise JourneyRejected("no sentence of the journey passed the memory gate")
    if reason := checks.within_budget("\n\n".join(kept), cap, tokens):
        raise OverBudget(f"the journey {reason}", kept)
    return Checked(kept, refused)


class Chronicler:
    def __init__(
        self,
        llm: LLM,
        store: ChroniclerStore,
        characters: CharacterBook,
        clock: Callable[[], datetime],
        tokens: TokenEstimator,
        cap_tokens: int = JOURNEY_MAX_TOKENS,
        attempts: int = 3,
        model: str | None = None,
        prefixes: ReplyPrefixes | None = None,
        scene_cap_tokens: int = 0,
    ) -> None:
        """`scene_cap_tokens`: the cap of each character's chronicle of a group scene; 0
        keeps none."""
        self._llm = llm
        self._store = store
        self._characters = characters
        # The conversation's reply prefix, sent first so the call reads the reply's cache.
        self._prefixes = prefixes
        self._clock = clock
        self._tokens = tokens
        self._attempts = attempts
        self._model = model
        self._private = Telling(cap_tokens, instructions, request_body)
        self._scene = Telling(scene_cap_tokens, scene_instructions, scene_request_body)
        self._in_flight: dict[int, tuple[tuple[int, str], asyncio.Task[str]]] = {}
        # One chronicle at a time per pair: each is built on the one before.
        self._pair_locks: dict[tuple[int, str], tuple[asyncio.Lock, int]] = {}

    async def write_pending(self) -> int:
        """Every chronicle the database says is owed; safe to call at every start."""
        pending = await self._store.conversations_pending_journey()
        if self._scene.cap:
            pending += await self._store.conversations_pending_scene_journey()
        for conversation in pending:
            await self.write(conversation)
        return len(pending)

    async def write(self, conversation: Conversation) -> str:
        """Chronicle one ended conversation once; returns what happened."""
        if conversation.id in self._in_flight:
            return "in flight"
        work = asyncio.ensure_future(self._write_locked(conversation))
        owner = (conversation.thread.user_id, conversation.thread.character_id)
        self._in_flight[conversation.id] = (owner, work)
        try:
            return await work
        except asyncio.CancelledError:
            if asyncio.current_task().cancelling():  # type: ignore[union-attr]
                raise
            return "forgotten"
        finally:
            del self._in_flight[conversation.id]

    async def cancel_for(self, user_id: int, character_id: str) -> None:
        """Stop this pair's chronicles and wait until they stopped (a forget is coming)."""
        works = [w for owner, w in self._in_flight.values() if owner == (user_id, character_id)]
        for work in works:
            work.cancel()
        await asyncio.gather(*works, return_exceptions=True)

    async def _write_locked(self, conversation: Conversation) -> str:
        thread = conversation.thread
        pair = (thread.user_id, thread.character_id)
        lock, users = self._pair_locks.get(pair, (asyncio.Lock(), 0))
        self._pair_locks[pair] = (lock, users + 1)
        try:
            async with lock:
                return await self._write(conversation)
        finally:
            lock, users = self._pair_locks[pair]
            if users <= 1:
                del self._pair_locks[pair]
            else:
                self._pair_locks[pair] = (lock, users - 1)

    async def _skip(self, conversation: Conversation, status: str) -> str:
        await self._store.mark_journey_run(conversation, status, self._clock())
        return status

    async def _write(self, conversation: Conversation) -> str:
        """Chronicle now, unless it is done, off, or the provider failed lately and the
        schedule says to wait (memory/engine/retries.py)."""
        thread = conversation.thread
        if await self._store.journey_run_status(conversation.id) is not None:
            return "done before"
        character = self._characters.get(thread.character_id)
        telling = self._telling(thread)
        if telling is None or character is None or not character.journey:
            return await self._skip(conversation, "off")
        backoff = await backoff_of(self._store, "journey", conversation.id)
        if backoff.exhausted:
            return await self._give_up(conversation, backoff)
        if not backoff.due(self._clock()):
            return "waiting"
        return await self._chronicle(conversation, character, telling)

    def _telling(self, thread: Thread) -> Telling | None:
        """A private thread's journey, or a scene's chronicle by one character; a group
        thread from before scenes keeps none."""
        if thread.scope == JOURNEY_SCOPE:
            return self._private
        return self._scene if thread.is_scene and self._scene.cap else None

    async def _give_up(self, conversation: Conversation, backoff: Backoff) -> str:
        """The provider failed every attempt of the schedule: the previous journey stays, the
        conversation is not owed again, and the admin is told (the log, `companion stats`)."""
        log.error("journey of conversation %s given up after %s provider failures; the last: %s",
                  conversation.id, backoff.failures, backoff.cause)  # fmt: skip
        return await self._skip(conversation, "failed")

    async def _chronicle(
        self, conversation: Conversation, character: Character, telling: Telling
    ) -> str:
        thread = conversation.thread
        turns = await self._store.conversation_turns(conversation.id)
        if not any(t.role == "user" for t in turns):
            return await self._skip(conversation, "empty")
        # the sentences citing a turn deleted since are gone: the chronicler never sees them
        previous = await resolving_journey(self._store, thread)
        allowed = {t.id for t in turns} | set(previous.cited_ids if previous else ())
        known = credential_values(t.text for t in turns)
        names = character.names_in_memory()
        cap = telling.cap
        prefix = self._prefixes.of(conversation.id) if self._prefixes else None
        own = telling.instructions(character.name, character.language, cap)
        tools, system = framed(prefix, self._model, JOURNEY_TOOL, own)
        over: list[tuple[str, ...]] = []

        def validate(response: LLMResponse) -> Checked:
            arguments = next(
                (c.arguments for c in response.tool_calls if c.name == JOURNEY_TOOL.name), None
            )
            try:
                return check_chronicle(
                    arguments, allowed, known, cap, self._tokens, names, previous is None
                )
            except OverBudget as exc:
                over[:] = [exc.paragraphs]
                raise

        async def rejected(exc: OutputRejected, attempt: int) -> None:
            log.warning("journey of conversation %s rejected (attempt %s): %s",
                        conversation.id, attempt, exc)  # fmt: skip

        async def record(model: str, error: str | None, response: LLMResponse | None) -> None:
            usage = UsageRecord(
                kind="journey",
                model=model,
                ok=error is None,
                user_id=thread.user_id,
                character_id=thread.character_id,
                conversation_id=conversation.id,
                error=error[:500] if error else None,
            )
            await self._store.record_usage(usage.measured(response), self._clock())

        body = telling.body(previous, turns, character.name, character.language)

        def request_for(feedback: str) -> LLMRequest:
            text = body
            if feedback:
                text += f"\n\nYour previous answer was rejected: {feedback}. Answer again."
            return LLMRequest(
                kind="journey",
                system=system,
                messages=(ChatMessage("user", (TextBlock(text),)),),
                max_tokens=2 * cap + 300,
                temperature=0.3,
                model=self._model,
                tools=tools,
                force_tool=JOURNEY_TOOL.name,
                payer=payer_of(thread),
            )

        outcome = await call_until_valid(
            self._llm, request_for, validate, record, attempts=self._attempts, on_rejected=rejected
        )
        if outcome.provider_failed:
            return "pending"  # still owed: a sweep tries again when the schedule says
        if outcome.value is None and over:
            # every attempt over the budget, the last one otherwise sound: code cuts the oldest
            outcome_value = Checked(checks.cut_oldest(over[0], cap, self._tokens), ())
        elif outcome.value is None:
            log.error("journey of conversation %s rejected after %s attempts; previous kept: %s",
                      conversation.id, self._attempts, outcome.failure)  # fmt: skip
            return await self._skip(conversation, "rejected")
        else:
            outcome_value = outcome.value
        return await self._save(conversation, previous, outcome_value)

    async def _save(
        self, conversation: Conversation, previous: Journey | None, checked: Checked
    ) -> str:
        thread = conversation.thread
        now = self._clock()
        for refusal in checked.refused:
            log.warning("journey sentence refused: %s", refusal.reason)
            reason = f"journey sentence: {refusal.reason}"
            await self._store.record_rejection(thread, conversation.id, reason, now)
        if not checked.paragraphs:
            await self._store.mark_journey_run(conversation, "nothing", now)
            return "nothing"
        journey = Journey(thread.user_id, thread.character_id, checked.paragraphs, None, now)
        # written from turns that may predate a change the profile has recorded since
        language = self._characters.language_of(thread.character_id)
        journey = await date_journey(self._store, thread, journey, language)
        previous_id = previous.id if previous is not None else None
        if not await self._store.save_journey(journey, conversation.id, previous_id, now):
            return "forgotten"  # the conversation or the journey changed while the model wrote
        return "done"


def recollected(turns: Sequence[Turn]) -> frozenset[int]:
    """The turns the character brought back with lookup_turn or search_memory: flashbacks."""
    return frozenset(t.id for t in turns if t.role == "tool")
