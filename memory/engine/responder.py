"""One reply: recall fragments, render the prompt, call the LLM, run at most two tool rounds.

Every call is recorded in llm_usage with its tool round and fragment count, so the cost and the
latency of retrieval can be read from the database.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol

from cards.character import Character
from memory.budget.guard import BudgetExhausted
from memory.budget.policy import payer_of
from memory.engine.labels import label
from memory.engine.llm import (
    LLM,
    ChatMessage,
    LLMError,
    LLMRequest,
    LLMResponse,
    StreamingLLM,
    TextBlock,
    TextSink,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)
from memory.engine.lore import render_lore_index
from memory.engine.off_record import counts_only, ram_turn
from memory.engine.prefix import CachedPrefix, ReplyPrefixes, Upkeep
from memory.engine.prompt import (
    Budgets,
    PromptState,
    RenderedPrompt,
    min_cacheable_tokens,
    render,
    tool_definitions,
)
from memory.engine.session import Session
from memory.engine.tokens import TokenEstimator
from memory.engine.tools import ToolBox
from memory.models import Fragment, Turn, UsageRecord
from memory.search.retrieval import Retriever
from memory.store.protocols import TurnLog, Usage
from memory.summary.format import format_summary

log = logging.getLogger(__name__)

MAX_TOOL_ROUNDS = 2
MAX_FRAGMENTS = 4


@dataclass(frozen=True)
class Generated:
    text: str
    fragment_turn_ids: tuple[int, ...] = ()
    # The final round's usage row: the caller stores it with the reply, in one transaction.
    usage: UsageRecord | None = None


def own_line(text: str, name: str) -> str:
    """A scene's line as the character says it: the window heads other people's lines with
    their names, and a model may head its own the same way ("Koldo: ..."), which the group
    would read twice (the platform already shows who speaks)."""
    for prefix in (f"{name}:", f"**{name}**:", f"**{name}:**"):
        if text.lstrip().startswith(prefix):
            return text.lstrip()[len(prefix) :].lstrip()
    return text


@dataclass(frozen=True)
class ProbeResult:
    """A control question's answer, and what memory held when it was asked."""

    reply: str
    window: tuple[str, ...]
    summary: str
    profile: tuple[str, ...]
    fragments: tuple[str, ...]


@dataclass(frozen=True)
class _Call:
    session: Session
    character: Character
    turn_id: int
    fragments: int
    on_text: TextSink | None = None  # shows each round's text while the model writes it


class ReplyStore(TurnLog, Usage, Protocol):
    """What one reply writes: the tool turns and the usage of each call."""


class Responder:
    def __init__(
        self,
        llm: LLM,
        store: ReplyStore,
        retriever: Retriever | None,
        budgets: Budgets,
        max_reply_tokens: int,
        lore_cap_tokens: int,
        tokens: TokenEstimator,
        clock: Callable[[], datetime],
        upkeep: Upkeep | None = None,
        prefixes: ReplyPrefixes | None = None,
    ) -> None:
        self._llm = llm
        self._store = store
        self._retriever = retriever
        # The background calls' tools, and where each conversation's reply prefix is kept for
        # them (memory/engine/prefix.py): both or neither.
        self._upkeep = upkeep if prefixes is not None else None
        self._prefixes = prefixes
        self._budgets = budgets
        self._max_reply_tokens = max_reply_tokens
        self._lore_cap = lore_cap_tokens
        self._tokens = tokens
        self._clock = clock

    async def respond(
        self,
        session: Session,
        character: Character,
        now: datetime,
        turn_id: int,
        on_text: TextSink | None = None,
    ) -> Generated | None:
        """The reply to the newest user turn of the session's window, or None on failure;
        `on_text` sees the text so far while the model writes it, when the provider streams."""
        fragments = await self._fragments(session, character)
        toolbox = self._toolbox(session, character)
        upkeep = self._upkeep.for_reply(character.model) if self._upkeep else ()
        tools = (*toolbox.specs(), *upkeep)
        prompt = render(
            self._state(session, character, fragments),
            now,
            self._budgets_for(character),
            self._tokens,
            prefix_tokens=self._tokens.count(tool_definitions(tools)),
        )
        call = _Call(session, character, turn_id, len(fragments), on_text)
        messages = list(prompt.messages)
        for tool_round in range(MAX_TOOL_ROUNDS + 1):
            may_use_tools = tool_round < MAX_TOOL_ROUNDS
            answered = await self._call(call, prompt, messages, tools, may_use_tools, tool_round)
            if answered is None:
                return None
            response, usage = answered
            if upkeep and tool_round == 0 and self._prefixes is not None:
                owner = (session.thread.user_id, session.thread.character_id)
                sent = CachedPrefix(character.model, tools, prompt.system)
                self._prefixes.keep(session.conversation.id, owner, sent)
            if not (response.tool_calls and may_use_tools):
                break
            await self.save_usage(session, usage)
            messages += await self._run_tools(session, toolbox, response)
        fragment_ids = tuple(i for f in fragments for i in f.turn_ids)
        text = own_line(response.text, character.name) if session.thread.is_scene else response.text
        return Generated(text, fragment_ids, usage)

    async def follow_up(
        self, session: Session, character: Character, now: datetime, event: str
    ) -> Generated | None:
        """A message the character writes unprompted about `event`: the same prompt as a reply
        (its cached prefix included), with a note after the window; no tools, no recall."""
        state = replace(self._state(session, character, []), followup=event)
        prompt = render(state, now, self._budgets, self._tokens)
        call = _Call(session, character, 0, 0)
        request = LLMRequest(
            kind="followup",
            system=prompt.system,
            messages=prompt.messages,
            max_tokens=self._max_reply_tokens,
            temperature=character.temperature,
            model=character.model,
            payer=payer_of(session.thread),
        )
        record = replace(self._record(call, 0), kind="followup", turn_id=None)
        try:
            response = await self._llm.complete(request)
        except LLMError as exc:
            await self.save_usage(session, replace(record, error=str(exc)[:500]))
            return None
        measured = replace(record, ok=bool(response.text.strip())).measured(response)
        if not measured.ok:
            await self.save_usage(session, replace(measured, error="empty follow-up"))
            return None
        return Generated(response.text, (), measured)

    async def probe(
        self, session: Session, character: Character, now: datetime, question: str
    ) -> ProbeResult:
        """Ask without remembering (`companion eval`): nothing is stored, no tool is offered."""
        asked = Turn(0, session.conversation.id, "user", question, now)
        view = replace(session, window=[*session.window, asked])
        fragments = await self._fragments(view, character)
        budgets = self._budgets_for(character)
        prompt = render(self._state(view, character, fragments), now, budgets, self._tokens)
        request = LLMRequest(
            kind="eval",
            system=prompt.system,
            messages=prompt.messages,
            max_tokens=self._max_reply_tokens,
            model=character.model,
        )
        try:
            response = await self._llm.complete(request)
            reply = response.text
            record = replace(
                self._record(_Call(session, character, 0, len(fragments)), 0),
                kind="eval",
                ok=True,
                turn_id=None,
            )
            await self._store.record_usage(record.measured(response), self._clock())
        except LLMError as exc:
            reply = f"(the LLM failed: {exc})"
        summary = (
            format_summary(session.summary.fields, character.language) if (session.summary) else ""
        )
        return ProbeResult(
            reply,
            tuple(t.text for t in session.window),
            summary,
            session.profile.lines,
            tuple(f.text for f in fragments),
        )

    def _state(
        self, session: Session, character: Character, fragments: list[Fragment]
    ) -> PromptState:
        scene = session.thread.is_scene
        return PromptState(
            character=character,
            user_name=label(character.language, "the_group")
            if scene
            else session.user.display_name or session.user.platform_user_id,
            is_group=session.thread.is_group,
            scene=scene,
            profile_lines=session.profile.lines,
            journey=session.profile.journey,
            summary=session.summary,
            window=tuple(session.window),
            previous_activity=session.previous_activity,
            fragments=tuple(fragments),
            lore_index=render_lore_index(character.lore, character.language),
            timezone=session.timezone,
        )

    def _names(self, session: Session, character: Character) -> tuple[str, str]:
        return (session.user.display_name or "User", character.name)

    async def _fragments(self, session: Session, character: Character) -> list[Fragment]:
        """Automatic recall from earlier conversations: only above the relevance threshold.

        Recall is a bonus: if it fails, the reply goes ahead without it (and the log says why).
        """
        if self._retriever is None or character.retrieval != "auto":
            return []
        if session.thread.is_scene:
            # A scene recalls by the tool only: its window is already the shared scene, and
            # fragments re-sent uncached on every call cost the cache more than they bring
            # (bench/scene.py: steady cache-read share 0.84 with them, 0.89 without).
            return []
        if not session.has_turns_outside_window():  # what the window holds needs no recall
            return []
        window_ids = {t.id for t in session.window}
        try:
            return await self._retriever.fragments(
                session.thread,
                session.window[-1].text,
                window_ids,
                self._budgets.fragments,
                MAX_FRAGMENTS,
                names=self._names(session, character),
                language=character.language,
                now=session.window[-1].created_at,  # "yesterday" is the user's, as they wrote
            )
        except Exception:
            log.exception("recall failed for %s; answering without fragments", session.thread)
            return []

    def _budgets_for(self, character: Character) -> Budgets:
        """The budgets, with the cacheable minimum of the character's own model if it has one."""
        if character.model is None:
            return self._budgets
        return replace(self._budgets, cache_min_tokens=min_cacheable_tokens(character.model))

    def _toolbox(self, session: Session, character: Character) -> ToolBox:
        memory_tools = self._retriever is not None and character.retrieval != "off"
        return ToolBox(
            self._store,
            self._retriever,
            session.thread,
            memory_tools,  # type: ignore[arg-type]
            character.lore,
            self._lore_cap,
            self._tokens,
            self._names(session, character),
        )

    async def _run_tools(
        self, session: Session, toolbox: ToolBox, response: LLMResponse
    ) -> list[ChatMessage]:
        """Run the calls, store each result as a tool turn (it stays in the conversation)."""
        uses, results = [], []
        for call in response.tool_calls:
            outcome = await toolbox.run(call)
            uses.append(ToolUseBlock(call.call_id, call.name, call.arguments))
            results.append(ToolResultBlock(call.call_id, outcome.text, outcome.is_error))
            if not outcome.is_error:
                result = f"[{call.name}]\n{outcome.text}"
                if session.off_record:  # kept in RAM only, like the rest of the conversation
                    ram_turn(session, "tool", result, self._clock())
                    continue
                turn = await self._store.add_turn(
                    session.conversation, "tool", result, self._clock()
                )
                session.window.append(turn)
        said = (TextBlock(response.text),) if response.text.strip() else ()
        return [ChatMessage("assistant", (*said, *uses)), ChatMessage("user", tuple(results))]

    async def _call(
        self,
        call: _Call,
        prompt: RenderedPrompt,
        messages: list[ChatMessage],
        tools: tuple[ToolSpec, ...],
        may_use_tools: bool,
        tool_round: int,
    ) -> tuple[LLMResponse, UsageRecord] | None:
        """The model's answer and its usage row, still to be stored; None on failure (its
        row already stored)."""
        request = LLMRequest(
            kind="reply",
            system=prompt.system,
            messages=tuple(messages),
            max_tokens=self._max_reply_tokens,
            temperature=call.character.temperature,
            model=call.character.model,
            tools=tools,
            allow_tools=may_use_tools,
            payer=payer_of(call.session.thread),
        )
        try:
            if call.on_text is not None and isinstance(self._llm, StreamingLLM):
                response = await self._llm.stream(request, call.on_text)
            else:
                response = await self._llm.complete(request)
        except BudgetExhausted:
            raise  # no call was made: the person is told when it resets (memory/engine/turns.py)
        except LLMError as exc:
            await self._fail(call, tool_round, exc)
            return None
        # An empty answer is a failed reply whose tokens were still spent: one row says both.
        empty = not response.text.strip() and not (response.tool_calls and may_use_tools)
        record = replace(
            self._record(call, tool_round),
            ok=not empty,
            error="the model returned an empty reply" if empty else None,
            tools_called=",".join(c.name for c in response.tool_calls),
        ).measured(response)
        if empty:
            await self.save_usage(call.session, record)
            log.error(
                "reply failed for %s (turn %s kept): the model returned an empty reply",
                call.session.thread,
                call.turn_id,
            )
            return None
        usage = response.usage
        if tool_round == 0:
            # The upkeep tools lent to the background calls are counted: lending them leaves
            # the calibration where it was.
            lent = tuple(t for t in tools if self._upkeep and t in self._upkeep.tools)
            estimated = sum(self._tokens.count(b.text) for b in prompt.system) + sum(
                self._tokens.count(m.text) for m in prompt.messages
            )
            estimated += self._tokens.count(tool_definitions(lent)) if lent else 0
            self._tokens.calibrate(estimated, usage.total_input)
        return response, record

    def _record(self, call: _Call, tool_round: int) -> UsageRecord:
        return UsageRecord(
            kind="reply",
            model=call.character.model or "",
            ok=False,
            user_id=call.session.user.id,
            character_id=call.character.id,
            conversation_id=call.session.conversation.id,
            turn_id=call.turn_id,
            tool_round=tool_round,
            fragments=call.fragments,
        )

    async def _fail(self, call: _Call, tool_round: int, error: LLMError) -> None:
        log.error(
            "reply failed for %s (turn %s kept): %s",
            call.session.thread,
            call.turn_id,
            error,
            exc_info=error.__cause__ or error,
        )
        await self.save_usage(
            call.session, replace(self._record(call, tool_round), error=str(error)[:500])
        )

    async def save_usage(self, session: Session, record: UsageRecord) -> None:
        """A call's usage row; off the record, its counts only."""
        row = counts_only(record) if session.off_record else record
        await self._store.record_usage(row, self._clock())
