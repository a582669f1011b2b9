"""Any OpenAI-compatible /chat/completions endpoint: Ollama, llama.cpp server, vLLM, LM Studio."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx

from memory.engine.llm import (
    ChatMessage,
    LLMError,
    LLMRequest,
    LLMResponse,
    TextBlock,
    ToolCall,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)

_RETRY_STATUSES = {408, 409, 429, 500, 502, 503, 504, 529}


def request_body(request: LLMRequest, default_model: str) -> dict[str, Any]:
    # These servers have no prompt cache markers: breakpoints are dropped, the order is kept.
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "\n\n".join(b.text for b in request.system)}
    ]
    for message in request.messages:
        messages += _messages(message)
    body: dict[str, Any] = {
        "model": request.model or default_model,
        "max_tokens": request.max_tokens,
        "messages": messages,
    }
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.input_schema,
                },
            }
            for t in request.tools
        ]
    if request.force_tool:
        body["tool_choice"] = {"type": "function", "function": {"name": request.force_tool}}
    elif request.tools and not request.allow_tools:
        body["tool_choice"] = "none"
    return body


def _messages(message: ChatMessage) -> list[dict[str, Any]]:
    """Tool calls and results become the tool_calls / role "tool" messages of this API."""
    calls = [b for b in message.blocks if isinstance(b, ToolUseBlock)]
    results = [b for b in message.blocks if isinstance(b, ToolResultBlock)]
    out: list[dict[str, Any]] = [
        {"role": "tool", "tool_call_id": r.call_id, "content": r.content} for r in results
    ]
    text = "\n\n".join(b.text for b in message.blocks if isinstance(b, TextBlock))
    if calls:
        out.append(
            {
                "role": "assistant",
                "content": text or None,
                "tool_calls": [
                    {
                        "id": c.call_id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                    }
                    for c in calls
                ],
            }
        )
    elif text or not results:
        out.append({"role": message.role, "content": text})
    return out


def _parse(payload: dict[str, Any], model: str) -> LLMResponse:
    try:
        message = payload["choices"][0]["message"]
    except (KeyError, IndexError, TypeError) as exc:
        raise LLMError("the endpoint answered without choices[0].message") from exc
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function", {})
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except json.JSONDecodeError:
            arguments = {"_raw": function.get("arguments")}
        calls.append(ToolCall(function.get("name", ""), arguments, call.get("id", "")))
    usage = payload.get("usage") or {}
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return LLMResponse(
        text=message.get("content") or "",
        model=payload.get("model", model),
        usage=Usage(
            input_tokens=max(0, (usage.get("prompt_tokens") or 0) - cached),
            cache_read_tokens=cached,
            output_tokens=usage.get("completion_tokens") or 0,
        ),
        tool_calls=tuple(calls),
    )


class OpenAICompatibleLLM:
    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout
        )
        self._model = model
        self._max_retries = max_retries

    async def close(self) -> None:
        await self._client.aclose()

    async def complete(self, request: LLMRequest) -> LLMResponse:
        body = request_body(request, self._model)
        started = time.perf_counter()
        failure, status, unreachable = "", None, False
        for attempt in range(self._max_retries + 1):
            if attempt:
                await asyncio.sleep(min(8.0, 0.5 * 2 ** (attempt - 1)))
            try:
                answer = await self._client.post("/chat/completions", json=body)
            except httpx.TimeoutException:
                failure, status, unreachable = "the endpoint timed out", None, True
                continue
            except httpx.TransportError as exc:
                failure, status, unreachable = f"cannot reach the endpoint: {exc}", None, True
                continue
            if answer.status_code in _RETRY_STATUSES:
                failure, status = f"the endpoint answered {answer.status_code}", answer.status_code
                unreachable = False
                continue
            if answer.status_code >= 400:
                raise LLMError(
                    f"the endpoint answered {answer.status_code}: {answer.text[:300]}",
                    status=answer.status_code,
                )
            response = _parse(answer.json(), self._model)
            latency_ms = (time.perf_counter() - started) * 1000
            return LLMResponse(
                response.text, response.model, response.usage, response.tool_calls, latency_ms
            )
        attempts = self._max_retries + 1
        raise LLMError(
            f"{failure} (after {attempts} attempts)", status=status, unreachable=unreachable
        )

    async def check(self, seconds: float) -> None:
        """The models list (GET /models, which Ollama, llama.cpp, vLLM and LM Studio serve),
        once: a wrong key fails here rather than as every user's first reply."""
        try:
            answer = await self._client.get("/models", timeout=seconds)
        except httpx.TransportError as exc:
            raise LLMError(f"cannot reach the endpoint: {exc}", unreachable=True) from exc
        if answer.status_code >= 400:
            raise LLMError(
                f"the endpoint answered {answer.status_code}: {answer.text[:300]}",
                status=answer.status_code,
            )
