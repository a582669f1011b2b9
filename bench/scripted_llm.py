"""An in-process LLM that plays a script: replies come from the data, summaries and profile
operations are built from the turns they are given.

It implements `memory.engine.llm.LLM`, converts every request to the exact Anthropic body
(`bot.llm.anthropic_provider.request_body`), runs it through the prompt-cache simulator at the
fake clock's time, and reports those figures as the usage, as the real provider would.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bench.cache_sim import CacheResult, PromptCache, block_tokens
from bench.journey_script import scripted_journey
from bot.llm.anthropic_provider import request_body
from memory.engine.llm import LLMError, LLMRequest, LLMResponse, ToolCall, Usage
from memory.engine.tokens import TokenEstimator
from memory.integrity.gate import check_fact
from memory.journey.chronicler import JOURNEY_TOOL
from memory.profile.extraction import EXTRACTION_TOOL
from memory.summary.rolling import SUMMARY_TOOL

BENCH_MODEL = "claude-bench"
CLAIM_WORDS = 12
TURN_LINE = re.compile(
    # a role, then maybe a scene's speaker "(Ana)" and the recollection marker
    r"^\[(\d+)\] \d{4}-\d{2}-\d{2} \d{2}:\d{2} (user|assistant|tool)(?: \([^()\n]*\))*: (.*)$"
)
COMMITMENT = re.compile(r"\b(will|going to|gonna|plan(?:ning)? to)\b", re.IGNORECASE)


class BenchClock:
    """The engine's clock: an aware datetime that only the bench moves."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        self.now += delta


@dataclass(frozen=True)
class RecordedRequest:
    kind: str
    body: dict[str, Any]
    tokens: int  # every block of the body, as the cache simulator counts it
    cache: CacheResult
    at: datetime


def body_tokens(body: dict[str, Any], tokens: TokenEstimator) -> int:
    """Text of every tool definition (canonical JSON), system block and message block."""
    blocks = [*body.get("tools", []), *body.get("system", [])]
    blocks += [block for message in body["messages"] for block in message["content"]]
    return sum(block_tokens(block, tokens.count) for block in blocks)


def _short(text: str, limit: int = CLAIM_WORDS) -> str:
    words = text.split()
    return " ".join(words[:limit]) + (" …" if len(words) > limit else "")


def parse_turns(text: str, marker: str) -> list[tuple[int, str, str]]:
    """(id, role, text) of each `[ID] date role: text` line after `marker`; continuation lines
    (a message of several lines) are joined to their turn."""
    _, _, folded = text.partition(marker)
    turns: list[tuple[int, str, str]] = []
    for line in folded.splitlines():
        match = TURN_LINE.match(line)
        if match:
            turns.append((int(match.group(1)), match.group(2), match.group(3)))
        elif turns and line:
            turn_id, role, previous = turns[-1]
            turns[-1] = (turn_id, role, f"{previous} {line}")
    return turns


def scripted_summary(folded: list[tuple[int, str, str]]) -> dict[str, list[str]]:
    """A plausible, deterministic write_summary call: one short cited claim per user turn."""
    users = [(turn_id, text) for turn_id, role, text in folded if role == "user"]
    if not users:
        return {name: [] for name in SUMMARY_TOOL.input_schema["required"]}
    last_id, last_text = users[-1]
    last_any = folded[-1][0]
    commitments = [(i, t) for i, t in users if COMMITMENT.search(t)][-2:]
    return {
        "established_facts": [f"The user said: {_short(t)} {{cite:{i}}}" for i, t in users],
        "relationship": [f"Friendly and open; {len(users)} more exchanges {{cite:{last_id}}}"],
        "commitments": [f"The user plans: {_short(t)} {{cite:{i}}}" for i, t in commitments],
        "tone": [f"warm and attentive, following the user's news {{cite:{last_any}}}"],
        "open_threads": [f"{_short(last_text)} {{cite:{last_id}}}"],
        "canon": [],
    }


def scripted_profile(session: list[tuple[int, str, str]]) -> dict[str, Any]:
    """A plausible record_profile call: one new event per session (the longest user message,
    stated), and a mood and an interest rewritten each session (inferred)."""
    users = [(turn_id, text) for turn_id, role, text in session if role == "user"]
    if not users:
        return {"operations": []}
    longest = max(users, key=lambda user: len(user[1]))
    candidates = [
        ("episodic", f"event_{longest[0]}", longest, "stated"),
        ("emotional", "mood", users[-1], "inferred"),
        ("semantic", "recent_interest", users[0], "inferred"),
    ]
    operations = []
    for kind, key, (turn_id, text), origin in candidates:
        value = _short(text, 15)
        # a well-behaved model records nothing the memory gate refuses
        if check_fact(key, value, kind=kind).reason is None:
            operations.append(
                {
                    "op": "add",
                    "kind": kind,
                    "key": key,
                    "value": value,
                    "origin": origin,
                    "evidence": [turn_id],
                }
            )
    return {"operations": operations}


class ScriptedLLM:
    def __init__(
        self,
        clock: BenchClock,
        tokens: TokenEstimator,
        cache: PromptCache,
        journey_cap: int | None = None,
    ) -> None:
        self._clock = clock
        self._tokens = tokens
        self._cache = cache
        # None: journey requests fail as a provider error would (no journey is ever stored).
        self._journey_cap = journey_cap
        self.next_reply = ""
        self.requests: list[RecordedRequest] = []
        self.reply_delay = timedelta(minutes=1)

    async def close(self) -> None:
        return None

    async def complete(self, request: LLMRequest) -> LLMResponse:
        body = request_body(request, BENCH_MODEL)
        now = self._clock()
        cache = self._cache.request(body, now, self._tokens.count)
        self.requests.append(
            RecordedRequest(request.kind, body, body_tokens(body, self._tokens), cache, now)
        )
        if request.kind == "reply":
            text, calls = self.next_reply, ()
            self._clock.advance(self.reply_delay)  # the reply is the next message, a minute on
        elif request.kind == "summary":
            folded = parse_turns(request.messages[-1].text, "Turns to fold in:\n")
            text, calls = "", (ToolCall(SUMMARY_TOOL.name, scripted_summary(folded), "bench"),)
        elif request.kind == "extraction":
            session = parse_turns(request.messages[-1].text, "Session turns:\n")
            arguments = scripted_profile(session)
            text, calls = "", (ToolCall(EXTRACTION_TOOL.name, arguments, "bench"),)
        elif request.kind == "journey" and self._journey_cap is not None:
            journey = scripted_journey(request.messages[-1].text, self._journey_cap, self._tokens)
            text, calls = "", (ToolCall(JOURNEY_TOOL.name, {"journey": journey}, "bench"),)
        else:
            raise LLMError(f"the bench has no script for '{request.kind}' requests")
        output = text or json.dumps([call.arguments for call in calls], ensure_ascii=False)
        usage = Usage(
            input_tokens=cache.uncached,
            cache_read_tokens=cache.read,
            cache_write_tokens=cache.write,
            output_tokens=self._tokens.count(output),
        )
        return LLMResponse(text=text, model=BENCH_MODEL, usage=usage, tool_calls=calls)
