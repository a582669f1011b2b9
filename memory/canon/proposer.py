"""After a conversation ends (private or a scene's): one forced call proposes what the
character established about itself or its world that its sheet and lore do not say, checked
by code (memory/canon/checks.py), and stored for an admin to approve or reject.

Never on the reply path: it runs beside the profile's extraction and the journey, once per
conversation (canon_runs says which were read). A malformed answer is asked for again with the
reason; after the retries nothing is stored (the previous state stays) and the conversation is
marked rejected. A character with `canon: false` is never asked about. While the provider
fails, the conversation is asked for again on the bounded schedule of memory/engine/retries.py.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Protocol

from cards.character import Character, CharacterBook
from memory.budget.policy import payer_of
from memory.canon import checks
from memory.canon.people import PeopleReader, is_person_line, people_data
from memory.canon.prompting import CANON_TOOL, instructions, request_body
from memory.canon.sheet import sheet_fields, sheet_vocabulary
from memory.engine.forced_tool import OutputRejected, call_until_valid
from memory.engine.llm import LLM, ChatMessage, LLMRequest, LLMResponse, TextBlock
from memory.engine.retries import backoff_of
from memory.integrity.credentials import credential_values
from memory.journey.model import JOURNEY_SCOPE, cited_in
from memory.models import Conversation, NewCanonProposal, Thread, Turn, UsageRecord
from memory.store.canon import CanonStore
from memory.store.protocols import TurnLog, Usage

log = logging.getLogger(__name__)
KIND = "canon"


class ProposerStore(CanonStore, TurnLog, Usage, PeopleReader, Protocol):
    async def record_rejection(
        self, thread: Thread, conversation_id: int | None, reason: str, now: datetime
    ) -> None: ...


def read_here(thread: Thread) -> bool:
    """Private threads and scenes are read; a group thread from before scenes is not."""
    return thread.scope == JOURNEY_SCOPE or thread.is_scene


class CanonProposer:
    def __init__(
        self,
        llm: LLM,
        store: ProposerStore,
        characters: CharacterBook,
        clock: Callable[[], datetime],
        attempts: int = 3,
        model: str | None = None,
        enabled: bool = True,
    ) -> None:
        self._llm = llm
        self._enabled = enabled
        self._store = store
        self._characters = characters
        self._clock = clock
        self._attempts = attempts
        self._model = model
        self._in_flight: dict[int, tuple[Thread, asyncio.Task[str]]] = {}

    async def write_pending(self) -> int:
        """Every conversation the database says is owed; safe to call at every start."""
        pending = await self._store.conversations_pending_canon()
        for conversation in pending:
            await self.write(conversation)
        return len(pending)

    async def write(self, conversation: Conversation) -> str:
        """Read one ended conversation for proposals once; returns what happened."""
        if conversation.id in self._in_flight:
            return "in flight"
        work = asyncio.ensure_future(self._write(conversation))
        self._in_flight[conversation.id] = (conversation.thread, work)
        try:
            return await work
        except asyncio.CancelledError:
            if asyncio.current_task().cancelling():  # type: ignore[union-attr]
                raise
            return "forgotten"
        finally:
            del self._in_flight[conversation.id]

    async def cancel_for(self, user_id: int, character_id: str) -> None:
        """Stop the reads of this pair's private conversations (a forget is coming); a read
        of a scene is not stopped: its save is refused if a line it read was forgotten."""
        works = [
            work
            for thread, work in self._in_flight.values()
            if (thread.user_id, thread.character_id) == (user_id, character_id)
        ]
        for work in works:
            work.cancel()
        await asyncio.gather(*works, return_exceptions=True)

    async def _mark(self, conversation: Conversation, status: str) -> str:
        thread = conversation.thread
        await self._store.save_canon_run(
            conversation.id, thread.character_id, [], status, self._clock()
        )
        return status

    async def _write(self, conversation: Conversation) -> str:
        thread = conversation.thread
        if await self._store.canon_run_status(conversation.id) is not None:
            return "done before"
        character = self._characters.get(thread.character_id)
        off = not self._enabled or character is None or not character.canon
        if off or not read_here(thread):
            return await self._mark(conversation, "off")  # no call is made
        backoff = await backoff_of(self._store, KIND, conversation.id)
        if backoff.exhausted:
            log.error("canon proposals of conversation %s given up after %s provider "
                      "failures; the last: %s", conversation.id, backoff.failures,
                      backoff.cause)  # fmt: skip
            return await self._mark(conversation, "failed")
        if not backoff.due(self._clock()):
            return "waiting"
        turns = await self._store.conversation_turns(conversation.id)
        if not any(t.role == "assistant" for t in turns) or not any(map(is_person_line, turns)):
            return await self._mark(conversation, "empty")
        return await self._propose(conversation, character, turns)

    async def _context(
        self, conversation: Conversation, character: Character, turns: Sequence[Turn]
    ) -> checks.Context:
        return checks.Context(
            character=character,
            own_turns=frozenset(t.id for t in turns if t.role == "assistant"),
            people=await people_data(self._store, conversation, turns),
            fields=sheet_fields(character),
            world=frozenset(sheet_vocabulary(character)),
            credentials=credential_values(t.text for t in turns),
        )

    async def _propose(
        self, conversation: Conversation, character: Character, turns: Sequence[Turn]
    ) -> str:
        context = await self._context(conversation, character, turns)
        body = request_body(tuple(context.fields.values()), turns, character.name)
        system = instructions(character.name, character.language)

        def validate(response: LLMResponse) -> checks.Sorted:
            arguments = next(
                (c.arguments for c in response.tool_calls if c.name == CANON_TOOL.name), None
            )
            return checks.sort(checks.parse(arguments, context.fields), context)

        async def rejected(exc: OutputRejected, attempt: int) -> None:
            log.warning("canon proposals of conversation %s rejected (attempt %s): %s",
                        conversation.id, attempt, exc)  # fmt: skip

        outcome = await call_until_valid(
            self._llm,
            lambda feedback: self._request(conversation.thread, system, body, feedback),
            validate,
            lambda model, error, response: self._record(conversation, model, error, response),
            attempts=self._attempts,
            on_rejected=rejected,
        )
        if outcome.provider_failed:
            return "pending"  # still owed: a sweep asks again when the schedule says
        if outcome.value is None:
            log.error("canon proposals of conversation %s rejected after %s attempts: %s",
                      conversation.id, self._attempts, outcome.failure)  # fmt: skip
            return await self._mark(conversation, "rejected")
        return await self._save(conversation, turns, outcome.value)

    def _request(self, thread: Thread, system: str, body: str, feedback: str) -> LLMRequest:
        text = body
        if feedback:
            text += f"\n\nYour previous answer was rejected: {feedback}. Answer again."
        return LLMRequest(
            kind=KIND,
            system=(TextBlock(system),),
            messages=(ChatMessage("user", (TextBlock(text),)),),
            max_tokens=800,
            temperature=0.2,
            model=self._model,
            tools=(CANON_TOOL,),
            force_tool=CANON_TOOL.name,
            payer=payer_of(thread),
        )

    async def _record(
        self,
        conversation: Conversation,
        model: str,
        error: str | None,
        response: LLMResponse | None,
    ) -> None:
        thread = conversation.thread
        usage = UsageRecord(
            kind=KIND,
            model=model,
            ok=error is None,
            user_id=thread.user_id,
            character_id=thread.character_id,
            conversation_id=conversation.id,
            error=error[:500] if error else None,
        )
        await self._store.record_usage(usage.measured(response), self._clock())

    async def _save(
        self, conversation: Conversation, turns: Sequence[Turn], checked: checks.Sorted
    ) -> str:
        thread = conversation.thread
        now = self._clock()
        for reason in checked.refused:
            log.warning("canon proposal refused: %s", reason)
            await self._store.record_rejection(thread, conversation.id, f"canon: {reason}", now)
        proposals = [
            NewCanonProposal(checks.bare(raw.text), tuple(sorted(cited_in(raw.text))), line)
            for raw, line in checked.kept
        ]
        status = "done" if proposals else "nothing"
        read = tuple(t.id for t in turns if is_person_line(t))
        stored = await self._store.save_canon_run(
            conversation.id, thread.character_id, proposals, status, now, read
        )
        if stored is None:
            return "forgotten"  # gone, read by another worker, or a line read was forgotten
        return status
