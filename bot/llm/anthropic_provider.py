"""Anthropic Messages API: cache breakpoints, tool use, the SDK's retries and timeouts."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anthropic

from memory.engine.llm import (
    Block,
    ImageBlock,
    LLMError,
    LLMRequest,
    LLMResponse,
    TextSink,
    ToolCall,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)


def _block(block: Block) -> dict[str, Any]:
    if isinstance(block, ImageBlock):
        data = base64.b64encode(block.data).decode("ascii")
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": block.media_type, "data": data},
        }
    if isinstance(block, ToolUseBlock):
        return {
            "type": "tool_use",
            "id": block.call_id,
            "name": block.name,
            "input": block.arguments,
        }
    if isinstance(block, ToolResultBlock):
        return {
            "type": "tool_result",
            "tool_use_id": block.call_id,
            "content": block.content,
            "is_error": block.is_error,
        }
    payload: dict[str, Any] = {"type": "text", "text": block.text}
    if block.cache == "1h":
        payload["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    elif block.cache == "5m":
        payload["cache_control"] = {"type": "ephemeral"}
    return payload


def request_body(request: LLMRequest, default_model: str) -> dict[str, Any]:
    """The JSON body sent to /v1/messages; public so tests and benches can read the layout."""
    body: dict[str, Any] = {
        "model": request.model or default_model,
        "max_tokens": request.max_tokens,
        "system": [_block(block) for block in request.system],
        "messages": [
            {"role": message.role, "content": [_block(block) for block in message.blocks]}
            for message in request.messages
        ],
    }
    # No sampling parameters: API version 2026-10-21, which this SDK sends, rejects temperature,
    # top_p and top_k on every model. Structured calls stay steady through their forced tool.
    if request.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in request.tools
        ]
    if request.force_tool:
        body["tool_choice"] = {"type": "tool", "name": request.force_tool}
    elif request.tools and not request.allow_tools:
        body["tool_choice"] = {"type": "none"}
    return body


class AnthropicLLM:
    def __init__(
        self,
        api_key: str,
        model: str,
        *,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
    ) -> None:
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries
        )
        self._model = model

    async def close(self) -> None:
        await self._client.close()

    async def check(self, seconds: float) -> None:
        """One cheap authenticated call (the models list, no tokens spent), once, without
        retries: a wrong key fails here rather than as every user's first reply."""
        with _as_llm_error():
            client = self._client.with_options(max_retries=0, timeout=seconds)
            await client.models.list(limit=1)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        body = request_body(request, self._model)
        started = time.perf_counter()
        with _as_llm_error():
            message = await self._client.messages.create(**body)
        return _response(message, started)

    async def stream(self, request: LLMRequest, on_text: TextSink) -> LLMResponse:
        """The same call, streamed: `on_text` gets the text so far at every text delta."""
        body = request_body(request, self._model)
        started = time.perf_counter()
        with _as_llm_error():
            async with self._client.messages.stream(**body) as stream:
                async for event in stream:
                    if event.type == "text":
                        await on_text(event.snapshot)
                message = await stream.get_final_message()
        return _response(message, started)


@contextmanager
def _as_llm_error() -> Iterator[None]:
    """The SDK's errors, after its own retries, as the one error the engine handles."""
    try:
        yield
    except anthropic.APIStatusError as exc:
        raise LLMError(
            f"Anthropic API answered {exc.status_code}: {exc.message}", status=exc.status_code
        ) from exc
    except anthropic.APITimeoutError as exc:
        raise LLMError("Anthropic API timed out", unreachable=True) from exc
    except anthropic.APIConnectionError as exc:
        raise LLMError(f"cannot reach the Anthropic API: {exc}", unreachable=True) from exc
    except anthropic.APIError as exc:
        raise LLMError(f"Anthropic API error: {exc}") from exc


def _response(message: Any, started: float) -> LLMResponse:
    latency_ms = (time.perf_counter() - started) * 1000
    texts, calls = [], []
    for block in message.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            arguments = block.input if isinstance(block.input, dict) else {}
            if not isinstance(block.input, dict):
                arguments = {"_raw": json.dumps(block.input)}
            calls.append(ToolCall(block.name, arguments, block.id))
    usage = message.usage
    return LLMResponse(
        text="".join(texts),
        model=message.model,
        usage=Usage(
            input_tokens=usage.input_tokens or 0,
            cache_read_tokens=usage.cache_read_input_tokens or 0,
            cache_write_tokens=usage.cache_creation_input_tokens or 0,
            output_tokens=usage.output_tokens or 0,
        ),
        tool_calls=tuple(calls),
        latency_ms=latency_ms,
    )
