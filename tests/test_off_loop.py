"""The memory gate's work runs off the event loop: a session start (block 2) and a background
job's validation (summary, extraction) never hold up other users' messages."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Any

from bot.app import App
from memory.engine.forced_tool import call_until_valid
from memory.engine.llm import LLMRequest, LLMResponse, Usage
from memory.engine.tokens import TokenEstimator
from memory.models import Fact, Thread
from memory.profile.view import Lifetimes, ProfileService
from tests.conftest import FakeClock
from tests.helpers import dm
from tests.raw_db import store_facts_directly

VALUES = (
    "enfermera en el hospital de Cruces", "su gata se llama Txuri", "le gusta el jazz",
    "tiene miedo a las alturas", "corre los domingos por la ría", "su hermano vive en Londres",
    "estudia alemán por las tardes", "toca la guitarra desde niña", "no come carne",
    "su madre es de Zamora", "quiere aprender a bucear", "trabaja a turnos de noche",
)  # fmt: skip


class CountingLoop:
    """Counts the event loop's turns while it is free to run other tasks."""

    def __init__(self) -> None:
        self.turns = 0
        self.running = True

    async def spin(self) -> None:
        while self.running:
            self.turns += 1
            await asyncio.sleep(0)


class WatchedFacts:
    """The real store's facts, noting how many loop turns had passed when they arrived."""

    def __init__(self, app: App, loop: CountingLoop) -> None:
        self._store, self._loop = app.store, loop
        self.turns_at_fetch: int | None = None

    async def facts(self, *args: Any) -> list[Fact]:
        rows = await self._store.facts(*args)
        self.turns_at_fetch = self._loop.turns
        return rows


async def test_block_2_is_ranked_and_gated_while_the_loop_serves_others(
    app: App, clock: FakeClock
) -> None:
    await app.companion.handle(dm("Hola"))
    ana = await app.store.upsert_user("telegram", "u1", "Ana", clock())
    rows = [(f"other_{index}", value) for index, value in enumerate(VALUES)]
    store_facts_directly(app.settings, ana.id, "detective_bilbao", rows, clock().isoformat())
    loop = CountingLoop()
    watched = WatchedFacts(app, loop)
    service = ProfileService(watched, Lifetimes(), 800, TokenEstimator(), app.characters)
    spinning = asyncio.create_task(loop.spin())
    now: datetime = clock()
    lines = await service.lines_for(Thread(ana.id, "detective_bilbao", "dm"), now)
    loop.running = False
    await spinning
    assert lines.shown == len(VALUES)
    assert watched.turns_at_fetch is not None
    # on the loop, ranking and the gate's re-reading would run between the fetch and the
    # return with no turn for anyone else
    assert loop.turns > watched.turns_at_fetch


class ReplayedLLM:
    """Answers each request with the next text of its queue."""

    def __init__(self, *texts: str) -> None:
        self._texts = list(texts)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        return LLMResponse(self._texts.pop(0), "replayed", Usage())


async def test_a_forced_tool_answer_is_validated_while_the_loop_serves_others() -> None:
    loop = CountingLoop()
    turns_during: list[int] = []

    def validate(response: LLMResponse) -> str:
        before = loop.turns
        time.sleep(0.05)  # stands for the gate reading a summary's claims
        turns_during.append(loop.turns - before)
        return response.text

    async def record(model: str, error: str | None, response: LLMResponse | None) -> None:
        return None

    spinning = asyncio.create_task(loop.spin())
    request = LLMRequest(kind="summary", system=(), messages=())
    outcome = await call_until_valid(
        ReplayedLLM("ok"), lambda _feedback: request, validate, record, attempts=1
    )
    loop.running = False
    await spinning
    assert outcome.value == "ok"
    assert turns_during and turns_during[0] > 0
