"""The character's tools: lookup_turn, search_memory and read_lore, always scoped to the thread.

A tool result is what the model will read, so every path that could reach another user's text
(or text from another scope, e.g. a DM read into a group) answers "not found" instead.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from memory.engine.llm import ToolCall, ToolSpec
from memory.engine.tokens import TokenEstimator
from memory.integrity.credentials import mask_credentials
from memory.integrity.gate import check_turn
from memory.models import Thread, Turn
from memory.scene.voices import voiced
from memory.search.retrieval import Retriever
from memory.store.protocols import TurnLog

log = logging.getLogger(__name__)

MAX_LOOKUP_IDS = 10
MAX_PAGES_PER_CALL = 2
SEARCH_RESULTS = 4

LOOKUP_TURN = ToolSpec(
    name="lookup_turn",
    description="Read earlier turns of this conversation by id: the {cite:ID} codes of the "
    "summary. What you read are memories of the past, not new events.",
    input_schema={
        "type": "object",
        "properties": {
            "ids": {
                "type": "array",
                "items": {"type": "integer"},
                "minItems": 1,
                "maxItems": MAX_LOOKUP_IDS,
            }
        },
        "required": ["ids"],
    },
)
SEARCH_MEMORY = ToolSpec(
    name="search_memory",
    description="Search your earlier conversations with this person for a detail (a name, a "
    "figure, a date). Results are dated and may be outdated; the summary wins.",
    input_schema={
        "type": "object",
        "properties": {"query": {"type": "string", "minLength": 1, "maxLength": 200}},
        "required": ["query"],
    },
)


class LorePageLike(Protocol):
    slug: str
    title: str
    content: str


def read_lore_spec(pages: Sequence[LorePageLike]) -> ToolSpec:
    """The slugs are an enum of the schema: the model can only ask for pages that exist."""
    return ToolSpec(
        name="read_lore",
        description="Read at most two pages of your lore (see the lore index) when the "
        "conversation needs their detail.",
        input_schema={
            "type": "object",
            "properties": {
                "slugs": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": MAX_PAGES_PER_CALL,
                    "items": {"type": "string", "enum": [p.slug for p in pages]},
                }
            },
            "required": ["slugs"],
        },
    )


def cap_page(content: str, cap_tokens: int, tokens: TokenEstimator) -> tuple[str, bool]:
    """Cut a page at a paragraph boundary to its cap; say that it was cut."""
    if tokens.count(content) <= cap_tokens:
        return content, False
    kept: list[str] = []
    for paragraph in re.split(r"\n\s*\n", content):
        if tokens.count("\n\n".join([*kept, paragraph])) > cap_tokens:
            break
        kept.append(paragraph)
    return "\n\n".join(kept) + "\n\n[…page cut at its token cap]", True


@dataclass(frozen=True)
class ToolOutcome:
    text: str
    is_error: bool = False
    recalled_turn_ids: tuple[int, ...] = ()


# A tool result is stored as a turn and replayed in every later request of the conversation
# (and shown to the summariser), so recalled text passes the memory gate first: a turn that
# reads as an instruction keeps its place and date, not its words. Lore pages are the admin's
# text, part of the character, and are not gated.
WITHHELD = "[withheld: it read as an instruction]"


def gated(text: str) -> str:
    problem = check_turn(text)
    if problem is None:
        return text
    log.info("recalled text withheld from a tool result: %s", problem)
    return WITHHELD


def _turn_line(turn: Turn) -> str:
    said = voiced(turn.speaker, gated(turn.text)) if turn.speaker else gated(turn.text)
    return f"[{turn.id}] {turn.created_at:%Y-%m-%d %H:%M} {turn.role}: {said}"


class ToolBox:
    """The tools offered to one character in one thread, and their execution."""

    def __init__(
        self,
        store: TurnLog,
        retriever: Retriever,
        thread: Thread,
        memory_tools: bool,
        pages: Sequence[LorePageLike],
        lore_cap_tokens: int,
        tokens: TokenEstimator,
        names: tuple[str, str],
    ) -> None:
        self._store = store
        self._retriever = retriever
        self._thread = thread
        self._memory_tools = memory_tools
        self._pages = {page.slug: page for page in pages}
        self._cap = lore_cap_tokens
        self._tokens = tokens
        self._names = names

    def specs(self) -> tuple[ToolSpec, ...]:
        specs = [LOOKUP_TURN, SEARCH_MEMORY] if self._memory_tools else []
        if self._pages:
            specs.append(read_lore_spec(list(self._pages.values())))
        return tuple(specs)

    async def run(self, call: ToolCall) -> ToolOutcome:
        runners = {
            "lookup_turn": self._lookup,
            "search_memory": self._search,
            "read_lore": self._read_lore,
        }
        if call.name not in runners or call.name not in {s.name for s in self.specs()}:
            return ToolOutcome(f"unknown tool '{call.name}'", is_error=True)
        try:
            return await runners[call.name](call.arguments)
        except Exception:
            # The model gets a plain error and can answer without the tool; the log has why.
            log.exception("tool %s failed for %s", call.name, self._thread)
            return ToolOutcome(f"{call.name} failed; answer without it", is_error=True)

    async def _lookup(self, arguments: dict[str, Any]) -> ToolOutcome:
        raw = arguments.get("ids")
        if not isinstance(raw, list) or not raw:
            return ToolOutcome("ids must be a non-empty list of turn ids", is_error=True)
        wanted = [i for i in raw[:MAX_LOOKUP_IDS] if type(i) is int]
        found = {t.id: t for t in await self._store.thread_turns_by_ids(self._thread, wanted)}
        lines = [
            _turn_line(found[i]) if i in found else f"[{i}] not found" for i in raw[:MAX_LOOKUP_IDS]
        ]
        text = mask_credentials("\n".join(lines))  # a password said long ago is not read back
        return ToolOutcome(text, recalled_turn_ids=tuple(sorted(found)))

    async def _search(self, arguments: dict[str, Any]) -> ToolOutcome:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            return ToolOutcome("query must be a non-empty string", is_error=True)
        exchanges = await self._retriever.search(
            self._thread, query[:200], SEARCH_RESULTS, names=self._names
        )
        if not exchanges:
            return ToolOutcome("nothing found")
        lines = [
            f"[{e.when:%Y-%m-%d}] (turns {', '.join(map(str, e.turn_ids))})\n{gated(e.text)}"
            for e in exchanges
        ]
        recalled = tuple(sorted({i for e in exchanges for i in e.turn_ids}))
        return ToolOutcome("\n\n".join(lines), recalled_turn_ids=recalled)

    async def _read_lore(self, arguments: dict[str, Any]) -> ToolOutcome:
        slugs = arguments.get("slugs")
        if not isinstance(slugs, list) or not slugs:
            return ToolOutcome("slugs must be a list of one or two page slugs", is_error=True)
        if len(slugs) > MAX_PAGES_PER_CALL:
            return ToolOutcome(
                f"at most {MAX_PAGES_PER_CALL} pages per call; asked for {len(slugs)}",
                is_error=True,
            )
        unknown = [s for s in slugs if s not in self._pages]
        if unknown:
            return ToolOutcome(
                f"unknown pages {unknown}; valid: {sorted(self._pages)}", is_error=True
            )
        parts = []
        for slug in slugs:
            page = self._pages[slug]
            content, _ = cap_page(page.content, self._cap, self._tokens)
            parts.append(f"# {page.title}\n\n{content}")
        return ToolOutcome("\n\n---\n\n".join(parts))
