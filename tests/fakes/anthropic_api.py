"""A fake of Anthropic's Messages API on 127.0.0.1, so the real anthropic SDK sends the requests.

Answers come from queues, one per route: "reply" for plain requests, or the name of the tool a
request forces (e.g. "write_summary"). An empty queue falls back to a default responder.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Text:
    text: str


@dataclass
class ToolUse:
    name: str
    input: Any


@dataclass
class Error:
    status: int
    error_type: str = "api_error"
    message: str | None = None  # the error body's message (default "fake <status>")


@dataclass
class Delay:
    seconds: float
    then: Any = None


@dataclass
class Drop:
    """Close the connection without an answer."""


Script = Text | ToolUse | Error | Delay | Drop | Callable[[dict[str, Any]], Any]


@dataclass
class Recorded:
    route: str
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes = b""  # the body as it came over the wire


def route_of(body: dict[str, Any]) -> str:
    choice = body.get("tool_choice") or {}
    return choice.get("name", "reply") if choice.get("type") == "tool" else "reply"


_EMPTY_TOOL_ANSWERS: dict[str, Any] = {
    "write_summary": {
        name: []
        for name in (
            "established_facts",
            "relationship",
            "commitments",
            "tone",
            "open_threads",
            "canon",
        )
    },
    "record_profile": {"operations": []},
    "write_journey": {"journey": ""},
    "propose_canon": {"proposals": []},
}


def empty_tool_answer(body: dict[str, Any]) -> ToolUse:
    """A valid, empty answer to a forced tool (a summary, an extraction, a first journey)."""
    route = route_of(body)
    return ToolUse(route, _EMPTY_TOOL_ANSWERS.get(route, {}))


def _default(body: dict[str, Any]) -> Any:
    return Text("Entendido.") if route_of(body) == "reply" else empty_tool_answer(body)


class FakeAnthropic:
    def __init__(self, api_key: str = "sk-test-fake") -> None:
        self.api_key = api_key
        self.requests: list[Recorded] = []
        self.rejected_keys: list[str] = []
        self.model_lists = 0  # GET /v1/models answered (the start-up check of the key)
        self._queues: dict[str, deque[Script]] = defaultdict(deque)
        self.default: Callable[[dict[str, Any]], Any] = _default
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self.url = ""
        # A streamed text answer is sent in this many deltas, with this pause between them.
        self.stream_pieces = 6
        self.stream_pause = 0.0

    async def __aenter__(self) -> FakeAnthropic:
        app = web.Application()
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_get("/v1/models", self._models)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner:
            await self._runner.cleanup()

    def queue(self, *items: Script, route: str = "reply") -> None:
        self._queues[route].extend(items)

    def bodies(self, route: str = "reply") -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.route == route]

    def requests_bodies(self) -> list[dict[str, Any]]:
        """Every request body, whatever its route, in order."""
        return [r.body for r in self.requests]

    def _refused(self, request: web.Request) -> bool:
        # SDK 2.x sends the key as a bearer token; older ones as x-api-key.
        bearer = request.headers.get("Authorization", "").removeprefix("Bearer ")
        key = request.headers.get("x-api-key") or bearer
        if key != self.api_key:
            self.rejected_keys.append(key)
            return True
        return False

    async def _models(self, request: web.Request) -> web.Response:
        """GET /v1/models, as the API answers it (one page)."""
        if self._refused(request):
            return _error(401, "authentication_error", "invalid x-api-key")
        self.model_lists += 1
        model = {
            "type": "model",
            "id": "claude-sonnet-5-5",
            "display_name": "Claude Sonnet",
            "created_at": "2026-01-01T00:00:00Z",
        }
        page = {"data": [model], "has_more": False, "first_id": model["id"], "last_id": model["id"]}
        return web.json_response(page)

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body = json.loads(raw)
        if self._refused(request):
            return _error(401, "authentication_error")
        route = route_of(body)
        self.requests.append(Recorded(route, body, dict(request.headers), raw))
        queue = self._queues[route]
        item: Any = queue.popleft() if queue else self.default
        while True:
            if callable(item) and not isinstance(item, type):
                item = item(body)
                if inspect.isawaitable(item):  # a script that waits for the test's signal
                    item = await item
            elif isinstance(item, Delay):
                await asyncio.sleep(item.seconds)
                item = item.then if item.then is not None else self.default
            else:
                break
        if isinstance(item, Drop):
            assert request.transport is not None
            request.transport.close()
            raise ConnectionResetError("dropped on purpose")
        if isinstance(item, Error):
            return _error(item.status, item.error_type, item.message)
        message = self._message(body, item)
        if body.get("stream"):
            return await _stream(request, message, self.stream_pieces, self.stream_pause)
        return web.json_response(message)

    def _message(self, body: dict[str, Any], item: Text | ToolUse) -> dict[str, Any]:
        if isinstance(item, Text):
            content = [{"type": "text", "text": item.text}]
            stop = "end_turn"
            out_chars = len(item.text)
        else:
            content = [
                {
                    "type": "tool_use",
                    "id": f"toolu_{next(self._ids)}",
                    "name": item.name,
                    "input": item.input,
                }
            ]
            stop = "tool_use"
            out_chars = len(json.dumps(item.input))
        return {
            "id": f"msg_{next(self._ids)}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "fake"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {
                "input_tokens": len(json.dumps(body)) // 4,
                "output_tokens": max(1, out_chars // 4),
                "cache_read_input_tokens": 0,
                "cache_creation_input_tokens": 0,
            },
        }


def _error(status: int, error_type: str, message: str | None = None) -> web.Response:
    message = message or f"fake {status}"
    payload = {"type": "error", "error": {"type": error_type, "message": message}}
    # A short retry-after keeps the SDK's real retry loop fast in tests.
    return web.json_response(payload, status=status, headers={"retry-after-ms": "20"})


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


async def _stream(
    request: web.Request, message: dict[str, Any], pieces: int, pause: float
) -> web.StreamResponse:
    """The message as the Messages API streams it: server-sent events, text in deltas."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    start = {**message, "content": [], "stop_reason": None}
    await response.write(_sse("message_start", {"type": "message_start", "message": start}))
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            empty: dict[str, Any] = {"type": "text", "text": ""}
            text = block["text"]
            size = max(1, -(-len(text) // pieces))
            deltas = [
                {"type": "text_delta", "text": text[at : at + size]}
                for at in range(0, len(text), size)
            ]
        else:
            empty = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
        await response.write(
            _sse(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": empty},
            )
        )
        for delta in deltas:
            await response.write(
                _sse(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
            if pause:
                await asyncio.sleep(pause)
        await response.write(
            _sse("content_block_stop", {"type": "content_block_stop", "index": index})
        )
    end = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    usage = {"output_tokens": message["usage"]["output_tokens"]}
    await response.write(
        _sse("message_delta", {"type": "message_delta", "delta": end, "usage": usage})
    )
    await response.write(_sse("message_stop", {"type": "message_stop"}))
    await response.write_eof()
    return response
