"""Every call of a conversation from the cache (issue 38 item 6): with LLM_SHARE_REPLY_PREFIX,
a compaction, an extraction and a journey send the reply's prefix first, byte for byte (the
same tools in the same order, the same system blocks with the same breakpoints), and their own
instructions after it; read from the raw request bytes on the fake Messages API. Without it
(the default: measured to cost more than it saves), every call keeps its own prefix."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from bench.cache_sim import PromptCache
from bot.app import App, open_app
from memory.budget.policy import input_tokens
from memory.engine.llm import ChatMessage, LLMRequest, TextBlock, ToolSpec
from memory.engine.prefix import UPKEEP_NOTE, CachedPrefix, ReplyPrefixes, framed
from memory.engine.tokens import TokenEstimator
from tests.conftest import FakeClock, make_settings
from tests.fakes.anthropic_api import FakeAnthropic, Text, ToolUse
from tests.helpers import as_bytes, dm, summary_input
from tests.raw_db import raw_database

UPKEEP = ["write_summary", "record_profile", "write_journey"]


@pytest.fixture
async def app(tmp_path, fake_anthropic: FakeAnthropic, clock: FakeClock) -> AsyncIterator[App]:
    """The bot with the replies lending their prefix."""
    settings = make_settings(tmp_path, fake_anthropic, llm_share_reply_prefix=True)
    async with open_app(settings, clock=clock, start_scheduler=False) as running:
        yield running


def sent(fake: FakeAnthropic, route: str) -> list[dict[str, Any]]:
    """The bodies of one route as they came over the wire."""
    return [json.loads(r.raw) for r in fake.requests if r.route == route]


def assert_borrows(reply: dict[str, Any], background: dict[str, Any], tool: str) -> None:
    """The background request begins with the reply's tools and system blocks, breakpoints
    included, and adds only its instructions after the last one."""
    assert as_bytes(background["tools"]) == as_bytes(reply["tools"])
    system = reply["system"]
    assert any("cache_control" in block for block in system)  # a breakpoint to read up to
    assert as_bytes(background["system"][: len(system)]) == as_bytes(system)
    own = background["system"][len(system) :]
    assert len(own) == 1 and "cache_control" not in own[0]
    assert own[0]["text"].startswith(UPKEEP_NOTE)
    assert background["tool_choice"] == {"type": "tool", "name": tool}


def prefix_tokens(body: dict[str, Any], count: Any) -> int:
    """The tokens of the tools and the system blocks up to the last system breakpoint."""
    cache = PromptCache(min_cacheable=1)
    probe = {**body, "messages": []}
    return cache.request(probe, FakeClock().now, count).write


async def test_a_compaction_reads_the_reply_prefix(app: App, fake_anthropic) -> None:
    fake_anthropic.queue(
        ToolUse("write_summary", summary_input(tone=["tranquilo"])), route="write_summary"
    )
    for i in range(app.settings.window_trigger_turns // 2):
        await app.companion.handle(dm(f"mensaje {i}"))
    await app.companion.drain()
    replies, [summary] = sent(fake_anthropic, "reply"), sent(fake_anthropic, "write_summary")
    reply = replies[-1]
    assert [t["name"] for t in reply["tools"]][-3:] == UPKEEP  # after the reply's own tools
    assert_borrows(reply, summary, "write_summary")
    assert summary["messages"][0]["content"][0]["text"].startswith("Previous summary:")
    # The simulator of the provider's cache, fed with both bodies a minute apart: everything
    # before the background call's own instructions is read, nothing of it written again.
    count = TokenEstimator().count
    cache = PromptCache(min_cacheable=1)
    now = FakeClock().now
    cache.request(reply, now, count)
    read = cache.request(summary, now + timedelta(minutes=1), count)
    assert read.read == prefix_tokens(reply, count) > 0
    assert read.write == 0


async def test_extraction_and_journey_read_the_last_reply_prefix(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    await app.companion.handle(dm("Me da miedo volar"))
    await app.companion.handle(dm("Mañana cojo un avión a Lisboa"))
    clock.advance(hours=2)
    await app.sweep()
    await app.companion.drain()
    reply = sent(fake_anthropic, "reply")[-1]
    [extraction] = sent(fake_anthropic, "record_profile")
    [journey] = sent(fake_anthropic, "write_journey")
    assert_borrows(reply, extraction, "record_profile")
    assert_borrows(reply, journey, "write_journey")
    assert "Session turns:" in extraction["messages"][0]["content"][0]["text"]


async def test_on_another_model_the_calls_keep_their_own_short_prefix(
    tmp_path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    """A prefix is cached per model: lent to another, it would only cost more."""
    settings = make_settings(
        tmp_path, fake_anthropic, llm_summary_model="claude-other", llm_share_reply_prefix=True
    )
    fake_anthropic.queue(
        ToolUse("write_summary", summary_input(tone=["tranquilo"])), route="write_summary"
    )
    async with open_app(settings, clock=clock, start_scheduler=False) as app:
        for i in range(app.settings.window_trigger_turns // 2):
            await app.companion.handle(dm(f"mensaje {i}"))
        await app.companion.drain()
    reply = sent(fake_anthropic, "reply")[-1]
    [summary] = sent(fake_anthropic, "write_summary")
    assert not {t["name"] for t in reply.get("tools", [])} & set(UPKEEP)
    assert [t["name"] for t in summary["tools"]] == ["write_summary"]
    assert len(summary["system"]) == 1
    assert summary["system"][0]["text"].startswith("You maintain the memory")


async def test_an_upkeep_tool_called_in_a_reply_is_refused_and_the_reply_goes_on(
    app: App, fake_anthropic: FakeAnthropic
) -> None:
    """The replies define the upkeep tools only to share their prefix: the reply path never
    runs one; the model is told so and answers in words."""
    fake_anthropic.queue(
        ToolUse("write_summary", summary_input(tone=["inventado"])), Text("Perdona. Sigue.")
    )
    reply = await app.companion.handle(dm("Hola"))
    assert reply.ok and reply.text == "Perdona. Sigue."
    second = sent(fake_anthropic, "reply")[-1]
    result = second["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["is_error"] is True
    with raw_database(app.settings) as raw:
        assert raw.execute("SELECT count(*) FROM summaries").fetchone() == (0,)


def test_a_prefix_is_lent_only_on_its_model_and_with_the_call_tool() -> None:
    tool = ToolSpec("write_summary", "d", {"type": "object"})
    other = ToolSpec("lookup_turn", "d", {"type": "object"})
    system = (TextBlock("sheet", cache="1h"), TextBlock("profile", cache="5m"))
    prefix = CachedPrefix(None, (other, tool), system)
    tools, blocks = framed(prefix, None, tool, "do it")
    assert tools == (other, tool) and blocks[:2] == system and blocks[2].cache is None
    assert framed(prefix, "claude-other", tool, "do it") == ((tool,), (TextBlock("do it"),))
    no_tool = CachedPrefix(None, (other,), system)
    assert framed(no_tool, None, tool, "do it") == ((tool,), (TextBlock("do it"),))
    assert framed(None, None, tool, "do it") == ((tool,), (TextBlock("do it"),))


async def test_kept_prefixes_are_bounded_and_a_forget_drops_the_users() -> None:
    prefixes = ReplyPrefixes(capacity=2)
    prefix = CachedPrefix(None, (), (TextBlock("Ana vive en Bilbao"),))
    prefixes.keep(1, (7, "detective_bilbao"), prefix)
    prefixes.keep(2, (8, "detective_bilbao"), prefix)
    prefixes.keep(3, (7, "lighthouse_keeper"), prefix)
    assert prefixes.of(1) is None and len(prefixes) == 2  # the oldest went first
    await prefixes.forget(7, "lighthouse_keeper")
    assert prefixes.of(3) is None and prefixes.of(2) == prefix


async def test_by_default_every_call_keeps_its_own_prefix(
    tmp_path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    """The default: the replies carry only their own tools, the background calls theirs."""
    settings = make_settings(tmp_path, fake_anthropic)
    fake_anthropic.queue(
        ToolUse("write_summary", summary_input(tone=["tranquilo"])), route="write_summary"
    )
    async with open_app(settings, clock=clock, start_scheduler=False) as app:
        for i in range(app.settings.window_trigger_turns // 2):
            await app.companion.handle(dm(f"mensaje {i}"))
        await app.companion.drain()
    reply = sent(fake_anthropic, "reply")[-1]
    [summary] = sent(fake_anthropic, "write_summary")
    assert [t["name"] for t in reply["tools"]] == ["lookup_turn", "search_memory"]
    assert [t["name"] for t in summary["tools"]] == ["write_summary"]
    assert [b["text"][:22] for b in summary["system"]] == ["You maintain the memor"]


def test_the_budget_reserves_the_lent_prefix() -> None:
    """The worst case a background call reserves counts the prefix it borrows: its tools and
    every system block, not only its own instructions and body."""
    tokens = TokenEstimator()
    tool = ToolSpec("write_summary", "Record the summary.", {"type": "object"})
    reply_tools = (ToolSpec("lookup_turn", "Read turns. " * 40, {"type": "object"}), tool)
    system = (TextBlock("Eres Koldo. " * 300, cache="1h"), TextBlock("Ana. " * 200, cache="5m"))
    body = (ChatMessage("user", (TextBlock("Turns to fold in: ..."),)),)

    def request(prefix: CachedPrefix | None) -> LLMRequest:
        tools, blocks = framed(prefix, None, tool, "Rewrite the summary.")
        return LLMRequest("summary", blocks, body, tools=tools, force_tool=tool.name)

    own, lent = request(None), request(CachedPrefix(None, reply_tools, system))
    borrowed = sum(tokens.count(b.text) for b in system) + tokens.count("Read turns. " * 40)
    assert input_tokens(lent, tokens) >= input_tokens(own, tokens) + borrowed
