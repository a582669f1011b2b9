"""The global cap kept in stripes (memory/budget/policy.py, BUDGET_GLOBAL_STRIPES), on both
backends through the real guard: a call takes any stripe with room, so it is refused only when
none has; calls sent at once never spend more than the cap in all; the operators' notice and
`companion stats` read the stripes' sum as the one cap."""

from __future__ import annotations

import asyncio
import math
from datetime import UTC, datetime
from typing import Any

from bot.budgets import format_spend, spend_of, stripes_summed
from memory.budget.guard import BudgetedLLM, BudgetExhausted
from memory.budget.policy import INPUT_MARGIN, BudgetPolicy, Pricing, day_key, input_tokens
from memory.engine.llm import ChatMessage, LLMRequest, LLMResponse, Payer, TextBlock, Usage
from memory.engine.tokens import TokenEstimator
from memory.usage_stats import PriceTable

NOW = datetime(2026, 12, 3, 12, tzinfo=UTC)
DAY = day_key(NOW)
STRIPES = 4
PRICING = Pricing(PriceTable(), "claude-bench", TokenEstimator())


class Model:
    """Answers at once, billing the request's worst case (every input token a cache write):
    each call costs all it holds, so a stripe fits a whole number of calls."""

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.calls += 1
        await asyncio.sleep(0)
        written = math.ceil(input_tokens(request, PRICING.tokens) * INPUT_MARGIN)
        return LLMResponse("ok", "claude-bench", Usage(0, 0, written, request.max_tokens))


def request(person: int) -> LLMRequest:
    return LLMRequest(
        kind="reply",
        system=(TextBlock("Eres el detective."),),
        messages=(ChatMessage("user", (TextBlock("hola"),)),),
        max_tokens=600,
        payer=Payer(person, None),
    )


def guard(store: Any, cap: float, notices: list[tuple[int, float]] | None = None) -> BudgetedLLM:
    async def notify(level: int, spent: float, limit: float, unit: str) -> None:
        assert limit == cap
        if notices is not None:
            notices.append((level, spent))

    policy = BudgetPolicy(global_day=cap, global_stripes=STRIPES)
    return BudgetedLLM(Model(), store, policy, PRICING, lambda: NOW, notify)


async def total(store: Any) -> float:
    return sum(c.spent for c in await store.budget_counters(DAY) if c.scope.startswith("global"))


async def test_a_call_takes_whichever_stripe_has_room(any_store: Any) -> None:
    worst = PRICING.worst_case(request(1))
    cap = STRIPES * worst * 4.5  # each stripe holds four calls and a half
    for stripe in range(STRIPES - 1):  # every stripe but the last full
        await any_store.reserve_budget([(f"global#{stripe}", DAY, cap)], 0.0)
        await any_store.settle_budget([(f"global#{stripe}", DAY)], 0.0, cap / STRIPES)
    bot = guard(any_store, cap)
    for person in range(4):  # each fits the last stripe, whichever stripe it tried first
        await bot.complete(request(person))
    try:
        await bot.complete(request(5))
        raise AssertionError("no stripe had room: the call should have been refused")
    except BudgetExhausted as refused:
        assert refused.kind == "global"
    assert await total(any_store) <= cap


async def test_calls_sent_at_once_never_spend_past_the_cap(any_store: Any) -> None:
    worst = PRICING.worst_case(request(1))
    cap = STRIPES * worst * 5.5
    notices: list[tuple[int, float]] = []
    bot = guard(any_store, cap, notices)

    async def call(person: int) -> bool:
        try:
            await bot.complete(request(person))
            return True
        except BudgetExhausted:
            return False

    made = sum(await asyncio.gather(*(call(p) for p in range(60))))
    assert made == STRIPES * 5  # each stripe's five whole calls, no more, no fewer
    assert await total(any_store) <= cap
    # Told once each, of the whole cap (100% may come first: a refusal, while the stripes are
    # full of reservations not yet settled, tells it).
    assert sorted(level for level, _ in notices) == [80, 100]
    counters = await any_store.budget_counters(DAY)
    rows = stripes_summed([spend_of(BudgetPolicy(global_day=cap), c) for c in counters])
    table = format_spend(rows, "global", "usd")
    assert len(table.splitlines()) == 2  # one row: the cap, not its stripes
    assert f"{await total(any_store):.4f}" in table
