"""The OpenAI-compatible provider against a fake /chat/completions on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from bot.llm.openai_compat import OpenAICompatibleLLM
from memory.engine.llm import ChatMessage, LLMError, LLMRequest, TextBlock
from memory.summary.rolling import SUMMARY_TOOL


class FakeOpenAI:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.statuses: list[int] = []
        self.answers: list[dict[str, Any]] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.bodies.append(await request.json())
        if self.statuses:
            return web.json_response({"error": "busy"}, status=self.statuses.pop(0))
        return web.json_response(self.answers.pop(0))


@pytest.fixture
async def fake_openai() -> AsyncIterator[tuple[FakeOpenAI, str]]:
    fake = FakeOpenAI()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", fake.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield fake, f"http://127.0.0.1:{port}/v1"
    await runner.cleanup()


def answer(content: str | None, tool: tuple[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool:
        message["tool_calls"] = [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": tool[0], "arguments": json.dumps(tool[1])},
            }
        ]
    return {
        "model": "llama",
        "choices": [{"message": message}],
        "usage": {
            "prompt_tokens": 120,
            "completion_tokens": 9,
            "prompt_tokens_details": {"cached_tokens": 100},
        },
    }


REQUEST = LLMRequest(
    "summary",
    (TextBlock("sheet", cache="1h"), TextBlock("summary", cache="5m")),
    (ChatMessage("user", (TextBlock("hola"),)),),
    temperature=0.2,
    tools=(SUMMARY_TOOL,),
    force_tool=SUMMARY_TOOL.name,
)


async def test_reply_tool_call_usage_and_retry(fake_openai: tuple[FakeOpenAI, str]) -> None:
    fake, url = fake_openai
    llm = OpenAICompatibleLLM(url, "llama", api_key="local-key", max_retries=2)
    fake.statuses = [503]
    fake.answers = [answer(None, ("write_summary", {"tone": ["calm"]}))]
    response = await llm.complete(REQUEST)
    await llm.close()
    assert len(fake.bodies) == 2  # one retry after the 503
    body = fake.bodies[-1]
    assert body["messages"][0] == {"role": "system", "content": "sheet\n\nsummary"}
    assert body["temperature"] == 0.2  # these servers still take sampling parameters
    assert body["tool_choice"]["function"]["name"] == "write_summary"
    assert response.tool_calls[0].arguments == {"tone": ["calm"]}
    assert (response.usage.input_tokens, response.usage.cache_read_tokens) == (20, 100)


async def test_gives_up_with_an_llm_error(fake_openai: tuple[FakeOpenAI, str]) -> None:
    fake, url = fake_openai
    llm = OpenAICompatibleLLM(url, "llama", max_retries=1)
    fake.statuses = [500, 500]
    with pytest.raises(LLMError, match=r"500 \(after 2 attempts"):
        await llm.complete(REQUEST)
    await llm.close()
