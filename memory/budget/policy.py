"""What each scope may spend, in which period, and what a call costs (issue 36, item 2).

Budgets are kept in one unit: USD at the price table of `companion stats` (MODEL_PRICES, cache
reads and writes at their own prices), or tokens when the configured model is priced at 0 (a
local model), where money says nothing. A person's budget is their own when the operator named
them (BUDGET_PEOPLE), else the guest budget; a community's and the global cap are per day.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta
from typing import Literal

from memory.engine.llm import ImageBlock, LLMRequest, Payer, TextBlock, ToolUseBlock
from memory.engine.tokens import TokenEstimator
from memory.models import SCENE_PREFIX, Thread, UsageRecord
from memory.usage_stats import FREE, PriceTable

Unit = Literal["usd", "tokens"]
Period = Literal["day", "month"]
GLOBAL = "global"
# An image's tokens are not in its text: the providers bill about this many for a photo at
# the sizes the adapters pass on.
IMAGE_TOKENS = 1600
# The input estimate is local (about 3.5 characters a token, calibrated by the replies'
# usage): the worst case adds half again, so that a text denser in tokens than the
# calibration (another language, code) is still covered.
INPUT_MARGIN = 1.5


def payer_of(thread: Thread) -> Payer:
    """A DM's calls are the person's; a group thread's the person's and their community's; a
    scene's (a group's shared conversation, owned by the scene's row) its community's."""
    if thread.is_scene:
        return Payer(None, thread.scope.removeprefix(SCENE_PREFIX))
    if thread.scope.startswith("group:"):
        return Payer(thread.user_id, thread.scope.removeprefix("group:"))
    return Payer(thread.user_id, None)


@dataclass(frozen=True)
class Claim:
    """One counter a call must fit in: its scope ('person:telegram:42', 'community:...',
    'global'), its period key and its limit."""

    scope: str
    period: str
    limit: float
    kind: str  # person | community | global
    resets_at: datetime


@dataclass(frozen=True)
class BudgetPolicy:
    person_day: float | None = None
    person_month: float | None = None
    guest_day: float | None = None
    guest_month: float | None = None
    community_day: float | None = None
    global_day: float | None = None
    # "platform:id" of the people with a budget of their own -> (day, month) or the defaults.
    people: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    unit: Unit = "usd"
    # The global cap kept in this many counters ("global#0".."global#N-1"), each holding an
    # N-th of it: a reservation takes one stripe with room, so concurrent calls lock different
    # rows instead of all waiting on one, and the stripes' sum can never pass the cap.
    global_stripes: int = 1

    @property
    def active(self) -> bool:
        limits = (
            self.person_day,
            self.person_month,
            self.guest_day,
            self.guest_month,
            self.community_day,
            self.global_day,
        )
        return any(limit is not None for limit in limits) or bool(self.people)

    def person_limits(self, person: str) -> tuple[float | None, float | None]:
        if person in self.people:
            day, month = self.people[person]
            return (
                self.person_day if day is None else day,
                self.person_month if month is None else month,
            )
        return self.guest_day, self.guest_month

    def global_scopes(self) -> list[str]:
        """The counters the global cap is kept in (one, unstriped: 'global')."""
        if self.global_stripes <= 1:
            return [GLOBAL]
        return [f"{GLOBAL}#{k}" for k in range(self.global_stripes)]

    def claims(
        self, person: str | None, community: str | None, now: datetime, stripe: int = 0
    ) -> list[Claim]:
        """Every counter a call of this person in this community must fit in, now (of the
        global cap, its stripe number `stripe`)."""
        day, month = day_key(now), month_key(now)
        found: list[Claim] = []
        if person is not None:
            per_day, per_month = self.person_limits(person)
            if per_day is not None:
                found.append(Claim(f"person:{person}", day, per_day, "person", next_day(now)))
            if per_month is not None:
                found.append(Claim(f"person:{person}", month, per_month, "person", next_month(now)))
        if community is not None and self.community_day is not None:
            found.append(
                Claim(f"community:{community}", day, self.community_day, "community", next_day(now))
            )
        if self.global_day is not None:
            scopes = self.global_scopes()
            share = self.global_day / len(scopes)
            found.append(Claim(scopes[stripe % len(scopes)], day, share, "global", next_day(now)))
        return found


def day_key(now: datetime) -> str:
    return f"d:{now:%Y-%m-%d}"


def month_key(now: datetime) -> str:
    return f"m:{now:%Y-%m}"


def next_day(now: datetime) -> datetime:
    return datetime.combine(now.date() + timedelta(days=1), time(), now.tzinfo)


def next_month(now: datetime) -> datetime:
    first = now.date().replace(day=1) + timedelta(days=32)
    return datetime.combine(first.replace(day=1), time(), now.tzinfo)


def parse_people(text: str) -> dict[str, tuple[float | None, float | None]]:
    """'telegram:42, discord:7=0.5/10' -> {person: (day, month)}; the error names the entry."""
    found: dict[str, tuple[float | None, float | None]] = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        person, _, amounts = entry.partition("=")
        platform, _, user = person.strip().partition(":")
        day, _, month = amounts.partition("/")
        try:
            limits = (float(day) if day.strip() else None, float(month) if month.strip() else None)
        except ValueError:
            platform = ""
        if not platform or not user or any(x is not None and x < 0 for x in limits):
            raise ValueError(
                f"BUDGET_PEOPLE entry '{entry}': expected platform:user_id, optionally "
                "=DAY/MONTH (e.g. telegram:42=0.5/10)"
            )
        found[f"{platform}:{user}"] = limits
    return found


@dataclass(frozen=True)
class Pricing:
    """What a call costs in the budgets' unit: its worst case before, its real cost after."""

    prices: PriceTable
    default_model: str
    tokens: TokenEstimator
    unit: Unit = "usd"

    @classmethod
    def for_model(cls, prices: PriceTable, model: str, tokens: TokenEstimator) -> Pricing:
        return cls(prices, model, tokens, "tokens" if prices.of(model) == FREE else "usd")

    def worst_case(self, request: LLMRequest) -> float:
        estimated = math.ceil(input_tokens(request, self.tokens) * INPUT_MARGIN)
        if self.unit == "tokens":
            return float(estimated + request.max_tokens)
        prices = self.prices.of(request.model or self.default_model)
        # Every input token written to the cache is the dearest way to send it.
        return max(
            prices.cost(estimated, 0, 0, request.max_tokens),
            prices.cost(0, 0, estimated, request.max_tokens),
        )

    def cost(self, record: UsageRecord) -> float:
        if self.unit == "tokens":
            return float(
                record.input_tokens
                + record.cache_read_tokens
                + record.cache_write_tokens
                + record.output_tokens
            )
        return self.prices.cost(record)


def input_tokens(request: LLMRequest, tokens: TokenEstimator) -> int:
    """The local estimate of everything a request sends: system, messages, tool definitions."""
    count = sum(tokens.count(block.text) for block in request.system)
    for message in request.messages:
        for block in message.blocks:
            if isinstance(block, TextBlock):
                count += tokens.count(block.text)
            elif isinstance(block, ToolUseBlock):
                count += tokens.count(json.dumps(block.arguments, ensure_ascii=False))
            elif isinstance(block, ImageBlock):
                count += IMAGE_TOKENS
            else:
                count += tokens.count(block.content)
    for tool in request.tools:
        count += tokens.count(tool.description + json.dumps(tool.input_schema))
    return count
