"""The small LLM interface the memory system needs; `bot/llm/` supplies implementations.

Requests are described in provider-neutral terms (blocks with optional cache breakpoints), so
the prompt layout is decided here once and every provider only translates it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

CacheTTL = Literal["5m", "1h"]
Role = Literal["user", "assistant"]


@dataclass(frozen=True)
class TextBlock:
    text: str
    # A cache breakpoint after this block: the provider may cache the prefix ending here.
    cache: CacheTTL | None = None


@dataclass(frozen=True)
class ToolUseBlock:
    """The model asked for a tool (inside an assistant message)."""

    call_id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ToolResultBlock:
    """A tool's answer (inside the user message that follows the request)."""

    call_id: str
    content: str
    is_error: bool = False


@dataclass(frozen=True)
class ImageBlock:
    """An image shown to a vision model (a user's photo); its bytes live only in the request."""

    media_type: str  # image/jpeg, image/png, image/gif or image/webp
    data: bytes = field(repr=False)


Block = TextBlock | ToolUseBlock | ToolResultBlock | ImageBlock


@dataclass(frozen=True)
class ChatMessage:
    role: Role
    blocks: tuple[Block, ...]

    @property
    def text(self) -> str:
        parts = []
        for block in self.blocks:
            if isinstance(block, TextBlock):
                parts.append(block.text)
            elif isinstance(block, ToolResultBlock):
                parts.append(block.content)
        return "\n\n".join(parts)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]
    call_id: str = ""


@dataclass(frozen=True)
class Payer:
    """Whose budgets a call is paid from (memory/budget): a person (their `users` row) and the
    community (a Telegram group or Discord server, "platform:id") it was made for. Nobody's
    call (an admin's probe) still counts to the global cap."""

    person: int | None = None
    community: str | None = None


NOBODY = Payer()


@dataclass(frozen=True)
class LLMRequest:
    kind: str  # reply | summary | extraction: recorded with the usage figures
    system: tuple[TextBlock, ...]
    messages: tuple[ChatMessage, ...]
    max_tokens: int = 600
    temperature: float | None = None
    model: str | None = None  # None: the provider's configured default
    tools: tuple[ToolSpec, ...] = ()
    # Name of a tool the model must call: how structured output is asked for.
    force_tool: str | None = None
    # False on the last tool round: the tools stay defined (the history holds tool calls) but
    # the model must answer in words.
    allow_tools: bool = True
    payer: Payer = NOBODY


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0  # uncached input tokens
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_input(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens


@dataclass(frozen=True)
class LLMResponse:
    text: str
    model: str
    usage: Usage = field(default_factory=Usage)
    tool_calls: tuple[ToolCall, ...] = ()
    latency_ms: float = 0.0


class LLMError(Exception):
    """The provider failed after its own retries; the cause is chained. `status` is the HTTP
    status the provider answered, `unreachable` that it could not be reached at all: what an
    admin needs to tell a wrong key from a server that is down."""

    def __init__(self, message: str, *, status: int | None = None, unreachable: bool = False):
        super().__init__(message)
        self.status = status
        self.unreachable = unreachable


class LLM(Protocol):
    async def complete(self, request: LLMRequest) -> LLMResponse: ...


# Called with the whole text of the answer so far (a snapshot, not a delta), so a receiver that
# skips some calls to respect a platform's edit limits still shows the right text.
TextSink = Callable[[str], Awaitable[None]]


@runtime_checkable
class StreamingLLM(Protocol):
    """A provider that can also hand over the answer while the model writes it."""

    async def complete(self, request: LLMRequest) -> LLMResponse: ...

    async def stream(self, request: LLMRequest, on_text: TextSink) -> LLMResponse: ...
