"""The one loop for calls that force a tool and check its arguments in code (compaction's
summary, the profile's extraction): call, validate, retry with the reason, record each call.

A provider failure ends the loop at once (the provider already retried; the caller's next
trigger tries again); an output that fails validation is recorded and asked for again, at most
`attempts` times, and then rejected: nothing is written and the previous state stays.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from memory.budget.guard import BudgetExhausted
from memory.engine.llm import LLM, LLMError, LLMRequest, LLMResponse
from memory.models import PROVIDER_FAILURE

T = TypeVar("T")


class OutputRejected(ValueError):
    """The model's output broke a rule; the reason is logged, recorded and fed back.
    `poisoned`: the output tried to plant an instruction in memory (counted as a rejection)."""

    def __init__(self, reason: str, poisoned: bool = False) -> None:
        super().__init__(reason)
        self.poisoned = poisoned


@dataclass(frozen=True)
class Outcome(Generic[T]):
    value: T | None  # None when the provider failed or every attempt was rejected
    failure: str = ""
    provider_failed: bool = False


# (model, error or None, the response when there was one): one usage row per call.
RecordCall = Callable[[str, str | None, LLMResponse | None], Awaitable[None]]


async def call_until_valid(
    llm: LLM,
    request_for: Callable[[str], LLMRequest],
    validate: Callable[[LLMResponse], T],
    record: RecordCall,
    *,
    attempts: int,
    on_rejected: Callable[[OutputRejected, int], Awaitable[None]] | None = None,
) -> Outcome[T]:
    """`request_for(feedback)` builds each attempt's request (feedback: why the last answer was
    rejected, '' at first); `validate` turns the response into a value or raises
    OutputRejected."""
    feedback = failure = ""
    for attempt in range(1, attempts + 1):
        request = request_for(feedback)
        try:
            response = await llm.complete(request)
        except BudgetExhausted as exc:
            # No call was made, so no usage row and no step of the provider's backoff: the
            # job stays owed and its next run after the reset asks again (deferred, not lost).
            return Outcome(None, str(exc), provider_failed=True)
        except LLMError as exc:
            failure = f"{PROVIDER_FAILURE}{exc}"
            await record(request.model or "", failure, None)
            return Outcome(None, failure, provider_failed=True)
        try:
            # validating runs the memory gate over every value (tens of ms for a summary): in a
            # thread, so a background job never holds up the users' messages
            value = await asyncio.to_thread(validate, response)
        except OutputRejected as exc:
            feedback, failure = str(exc), f"attempt {attempt}: {exc}"
            if on_rejected is not None:
                await on_rejected(exc, attempt)
            await record(response.model, failure[:500], response)
            continue
        await record(response.model, None, response)
        return Outcome(value)
    return Outcome(None, failure)
