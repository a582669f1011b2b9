"""The Anthropic provider streams through the real SDK: the sink sees the text grow, and the
final response is the same as a non-streamed call's (text, tool calls, usage)."""

from __future__ import annotations

import itertools

import pytest

from bot.llm import RedactingLLM
from bot.llm.anthropic_provider import AnthropicLLM
from memory.engine.llm import (
    ChatMessage,
    LLMError,
    LLMRequest,
    LLMResponse,
    StreamingLLM,
    TextBlock,
    ToolSpec,
)
from memory.integrity.redaction import Redactor
from tests.fakes.anthropic_api import Error, FakeAnthropic, Text, ToolUse

REQUEST = LLMRequest(
    kind="reply",
    system=(TextBlock("You are Mira."),),
    messages=(ChatMessage("user", (TextBlock("Hola"),)),),
)


def _llm(fake: FakeAnthropic) -> AnthropicLLM:
    return AnthropicLLM(fake.api_key, "claude-test", base_url=fake.url, max_retries=0)


async def test_the_sink_sees_snapshots_that_grow_to_the_final_text(
    fake_anthropic: FakeAnthropic,
) -> None:
    fake_anthropic.queue(Text("Buenas tardes, ¿qué tal ha ido la entrevista del jueves?"))
    llm = _llm(fake_anthropic)
    seen: list[str] = []

    async def sink(text: str) -> None:
        seen.append(text)

    try:
        assert isinstance(llm, StreamingLLM)
        response = await llm.stream(REQUEST, sink)
    finally:
        await llm.close()
    assert response.text == "Buenas tardes, ¿qué tal ha ido la entrevista del jueves?"
    assert len(seen) == fake_anthropic.stream_pieces
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(seen))
    assert seen[-1] == response.text
    assert response.usage.output_tokens > 0
    assert fake_anthropic.bodies()[0]["stream"] is True


async def test_a_streamed_tool_call_arrives_whole_and_sends_no_text(
    fake_anthropic: FakeAnthropic,
) -> None:
    fake_anthropic.queue(ToolUse("search_memory", {"query": "perro Beltza"}))
    llm = _llm(fake_anthropic)
    seen: list[str] = []

    async def sink(text: str) -> None:
        seen.append(text)

    request = LLMRequest(
        kind="reply",
        system=REQUEST.system,
        messages=REQUEST.messages,
        tools=(ToolSpec("search_memory", "search", {"type": "object", "properties": {}}),),
    )
    try:
        response = await llm.stream(request, sink)
    finally:
        await llm.close()
    assert seen == []
    assert [(c.name, c.arguments) for c in response.tool_calls] == [
        ("search_memory", {"query": "perro Beltza"})
    ]


async def test_a_failed_stream_is_the_same_llm_error(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.queue(Error(500))
    llm = _llm(fake_anthropic)

    async def sink(text: str) -> None:
        raise AssertionError("no text on a failed call")

    try:
        with pytest.raises(LLMError, match="500"):
            await llm.stream(REQUEST, sink)
    finally:
        await llm.close()


class _PlainLLM:
    """A provider without streaming (as the OpenAI-compatible one): answers from a queue."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        return LLMResponse(self.answers.pop(0), "plain")

    async def close(self) -> None:
        return None


async def test_a_provider_that_cannot_stream_shows_nothing_before_the_end() -> None:
    llm = RedactingLLM(_PlainLLM("Hola, ¿qué tal te ha ido la semana en Bilbao?"), Redactor([]))
    seen: list[str] = []

    async def sink(text: str) -> None:
        seen.append(text)

    response = await llm.stream(REQUEST, sink)
    assert response.text.startswith("Hola") and seen == []  # the adapter sends it whole


async def test_each_breakpoint_reaches_the_api_with_its_lifetime(
    fake_anthropic: FakeAnthropic,
) -> None:
    """The sheet is cached for an hour, what changes more often for the default 5 minutes:
    the request the SDK sends says so, block by block."""
    fake_anthropic.queue(Text("Hola."))
    request = LLMRequest(
        kind="reply",
        system=(TextBlock("sheet", cache="1h"), TextBlock("profile", cache="5m"), TextBlock("x")),
        messages=(ChatMessage("user", (TextBlock("Hola", cache="5m"),)),),
    )
    llm = _llm(fake_anthropic)
    try:
        await llm.complete(request)
    finally:
        await llm.close()
    body = fake_anthropic.bodies()[-1]
    marks = [block.get("cache_control") for block in body["system"]]
    assert marks == [{"type": "ephemeral", "ttl": "1h"}, {"type": "ephemeral"}, None]
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
