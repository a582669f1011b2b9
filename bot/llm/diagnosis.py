"""What an admin can do about a failing LLM provider, in one line: the start-up check of the key
(`companion run`), and the cause of a failed reply for the terminal (where the admin is the
user: a platform's user still gets the character's apology, and the cause goes to the log)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from bot.config import Settings
from bot.llm import CHECK_SECONDS, CheckableLLM, ClosableLLM
from memory.engine.llm import LLMError, LLMRequest, LLMResponse, StreamingLLM, TextSink
from memory.errors import UserFacingError

log = logging.getLogger(__name__)
REFUSED = (401, 403)


def _names(settings: Settings) -> tuple[str, str, str]:
    """The provider as a person names it, its key's setting, its address's setting."""
    if settings.llm_provider == "openai":
        return "the OpenAI-compatible endpoint", "OPENAI_API_KEY", "OPENAI_BASE_URL"
    return "the Anthropic API", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"


def advice(settings: Settings, error: LLMError) -> str:
    """The failure and the setting to look at."""
    _, key, url = _names(settings)
    if error.status in REFUSED:
        return f"{error}; check {key} in .env"
    if error.unreachable:
        return f"{error}; check the network connection, or {url} if you set it"
    if error.status == 404:
        return f"{error}; check LLM_MODEL (or the character's model:)"
    return str(error)


async def check_provider(settings: Settings, llm: object) -> None:
    """One cheap call at start-up. A refused key stops the start (every reply would fail); a
    provider that cannot be reached now is a warning (it may come back, and the bot retries
    every reply)."""
    if not isinstance(llm, CheckableLLM):
        return
    name, key, _ = _names(settings)
    try:
        async with asyncio.timeout(CHECK_SECONDS + 1):  # name resolution has no timeout of its own
            await llm.check(CHECK_SECONDS)
    except TimeoutError:
        log.warning(
            "could not check %s at start-up (no answer within %s s); starting anyway: "
            "replies fail until it answers; check the network connection, or %s if you set it",
            name,
            CHECK_SECONDS,
            _names(settings)[2],
        )
        return
    except LLMError as exc:
        if exc.status in REFUSED:
            raise UserFacingError(f"{name} refused {key}: {advice(settings, exc)}") from exc
        log.warning(
            "could not check %s at start-up (%s); starting anyway: replies fail until it "
            "answers",
            name,
            advice(settings, exc),
        )
        return
    log.info("%s accepted %s", name, key)


@contextlib.asynccontextmanager
async def checked_meanwhile(
    settings: Settings, llm: object
) -> AsyncIterator[Callable[[], Awaitable[None]]]:
    """`check_provider` started now, in the background; the block awaits its outcome (the
    function it is given) when it needs it, and leaving the block early cancels it."""
    task = asyncio.create_task(check_provider(settings, llm))
    try:
        yield lambda: task
    finally:
        if not task.done():
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)


class ReplyFailures:
    """The LLM, keeping the cause of the last failed reply for whoever asks (`take`)."""

    def __init__(self, llm: ClosableLLM, explain: Callable[[LLMError], str]) -> None:
        self._llm = llm
        self._explain = explain
        self._last: LLMError | None = None

    def take(self) -> str | None:
        """The last reply's failure, explained, once; None when none failed since."""
        last, self._last = self._last, None
        return self._explain(last) if last is not None else None

    def _saw(self, request: LLMRequest, exc: LLMError) -> None:
        if request.kind == "reply":  # not a background call's (summary, profile)
            self._last = exc

    async def complete(self, request: LLMRequest) -> LLMResponse:
        try:
            return await self._llm.complete(request)
        except LLMError as exc:
            self._saw(request, exc)
            raise

    async def stream(self, request: LLMRequest, on_text: TextSink) -> LLMResponse:
        try:
            if isinstance(self._llm, StreamingLLM):
                return await self._llm.stream(request, on_text)
            return await self._llm.complete(request)
        except LLMError as exc:
            self._saw(request, exc)
            raise

    async def close(self) -> None:
        await self._llm.close()
