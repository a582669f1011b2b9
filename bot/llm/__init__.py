"""LLM providers; `build_llm` picks one from the settings."""

from __future__ import annotations

import asyncio
from typing import Protocol, runtime_checkable

from bot.config import Settings
from bot.llm.openai_compat import OpenAICompatibleLLM
from memory.engine.llm import LLM, LLMError, LLMRequest, LLMResponse, StreamingLLM, TextSink
from memory.errors import UserFacingError
from memory.integrity.redaction import Redactor


class ClosableLLM(LLM, Protocol):
    async def close(self) -> None: ...


# The start-up check waits this long at most: the bot starts anyway when it gets no answer.
CHECK_SECONDS = 5.0


@runtime_checkable
class CheckableLLM(Protocol):
    """A provider that can test its key and address with one cheap call."""

    async def check(self, seconds: float) -> None: ...


def _redacted(exc: LLMError, redact: Redactor) -> LLMError:
    return LLMError(redact(str(exc)), status=exc.status, unreachable=exc.unreachable)


class RedactingLLM:
    """Hides every configured secret in the provider's error messages. They are stored in
    llm_usage and logged, and a provider's error body may echo a key it was sent."""

    def __init__(self, llm: ClosableLLM, redact: Redactor) -> None:
        self._llm = llm
        self._redact = redact

    async def complete(self, request: LLMRequest) -> LLMResponse:
        try:
            return await self._llm.complete(request)
        except LLMError as exc:
            # The cause stays chained for the log, whose filter redacts tracebacks too.
            raise _redacted(exc, self._redact) from exc.__cause__

    async def stream(self, request: LLMRequest, on_text: TextSink) -> LLMResponse:
        """The provider's stream when it has one; else one plain call, and nothing is shown
        before the end (the adapter sends the whole reply as usual: no message to edit)."""
        try:
            if isinstance(self._llm, StreamingLLM):
                return await self._llm.stream(request, on_text)
            return await self._llm.complete(request)
        except LLMError as exc:
            raise _redacted(exc, self._redact) from exc.__cause__

    async def check(self, seconds: float) -> None:
        if not isinstance(self._llm, CheckableLLM):
            return
        try:
            await self._llm.check(seconds)
        except LLMError as exc:
            raise _redacted(exc, self._redact) from exc.__cause__

    async def close(self) -> None:
        await self._llm.close()


class ProviderNotConfigured(UserFacingError):
    """No usable provider in the settings; the message names the setting to add."""


def build_llm(settings: Settings) -> ClosableLLM:
    return RedactingLLM(_provider(settings), Redactor(settings.secrets()))


class DeferredLLM:
    """`build_llm`'s provider, built in a thread once `warm` is called (or at the first call):
    `companion chat` shows its prompt while the SDK is imported (seconds on a busy machine).
    A setting that is missing is still refused at once, before anything is shown."""

    def __init__(self, settings: Settings) -> None:
        _require_configured(settings)
        self._settings = settings
        self._built: asyncio.Future[ClosableLLM] | None = None

    def warm(self) -> None:
        if self._built is None:
            self._built = asyncio.ensure_future(asyncio.to_thread(build_llm, self._settings))

    async def _llm(self) -> ClosableLLM:
        self.warm()
        assert self._built is not None
        # Shielded: a reply cancelled (Ctrl-C) while the SDK loads must not cancel the build
        # that every later reply waits for.
        return await asyncio.shield(self._built)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        return await (await self._llm()).complete(request)

    async def stream(self, request: LLMRequest, on_text: TextSink) -> LLMResponse:
        llm = await self._llm()
        if isinstance(llm, StreamingLLM):
            return await llm.stream(request, on_text)
        return await llm.complete(request)

    async def close(self) -> None:
        if self._built is not None:
            await (await self._built).close()


def _require_configured(settings: Settings) -> None:
    if settings.llm_provider == "openai":
        if not settings.openai_base_url:
            raise ProviderNotConfigured(
                "LLM_PROVIDER=openai needs OPENAI_BASE_URL (for example "
                "http://127.0.0.1:11434/v1 for Ollama); add it to .env"
            )
        return
    if settings.anthropic_api_key is None or not settings.anthropic_api_key.get_secret_value():
        raise ProviderNotConfigured(
            "No LLM provider is configured: add ANTHROPIC_API_KEY=... to .env (or set "
            "LLM_PROVIDER=openai and OPENAI_BASE_URL=... for an OpenAI-compatible server)"
        )


def _provider(settings: Settings) -> ClosableLLM:
    _require_configured(settings)
    if settings.llm_provider == "openai":
        assert settings.openai_base_url is not None
        key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
        return OpenAICompatibleLLM(
            settings.openai_base_url,
            settings.llm_model,
            api_key=key,
            timeout=settings.llm_timeout_seconds,
            max_retries=settings.llm_max_retries,
        )
    assert settings.anthropic_api_key is not None
    # Imported here: the Anthropic SDK alone takes seconds to import, which every process
    # start (a restarted worker, an OpenAI-compatible setup) would pay for nothing.
    from bot.llm.anthropic_provider import AnthropicLLM

    return AnthropicLLM(
        settings.anthropic_api_key.get_secret_value(),
        settings.llm_model,
        base_url=settings.anthropic_base_url,
        timeout=settings.llm_timeout_seconds,
        max_retries=settings.llm_max_retries,
    )
