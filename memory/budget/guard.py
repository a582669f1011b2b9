"""The one wrapper every LLM call passes through when budgets are on (bot/app.py wraps the
provider in it, so no caller can forget it): before the call it reserves the request's worst
case on every counter of its payer (memory/engine/llm.py Payer), all or none, atomically in the
store; after it settles the real cost. A call that does not fit is refused with
`BudgetExhausted` before the model is asked: the reply path answers with the reset time, a
background job stays owed and runs again after the reset (memory/engine/forced_tool.py).

Reserving the worst case is what keeps messages sent at once from overspending: a budget can
only be exceeded by what a call really cost beyond its estimated worst case.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

from memory.budget.policy import BudgetPolicy, Claim, Pricing
from memory.engine.llm import (
    LLM,
    LLMError,
    LLMRequest,
    LLMResponse,
    Payer,
    StreamingLLM,
    TextSink,
)
from memory.models import UsageRecord
from memory.store.budgets import BudgetLedger

log = logging.getLogger(__name__)

NOTICE_LEVELS = (80, 100)
IDENTITIES_KEPT = 10_000
# level (80, 100), spent, cap, unit: told to the operators once per level and day.
Notice = Callable[[int, float, float, str], Awaitable[None]]

# (language, kind, resets_at) -> the one line a person out of budget is answered with. The
# wording is the bot's (bot/texts.py, passed in by bot/budgets.py): memory/ holds no user-facing
# catalogue; `plain_wording` serves callers without one (the bench).
Wording = Callable[[str, str, datetime], str]


def plain_wording(language: str, kind: str, resets_at: datetime) -> str:
    return f"The {kind} budget is spent until {resets_at:%Y-%m-%d %H:%M}."


class BudgetExhausted(LLMError):
    """A call refused before the model was asked: a budget of its payer is spent."""

    def __init__(self, kind: str, resets_at: datetime, wording: Wording = plain_wording) -> None:
        super().__init__(f"budget: the {kind} budget is spent until {resets_at.isoformat()}")
        self.kind = kind
        self.resets_at = resets_at
        self._wording = wording

    def line(self, language: str) -> str:
        """The one line a person is answered with: whose limit, and when it resets."""
        return self._wording(language, self.kind, self.resets_at)


@dataclass(frozen=True)
class _Hold:
    claims: tuple[Claim, ...]
    amount: float


class BudgetedLLM:
    def __init__(
        self,
        llm: LLM,
        ledger: BudgetLedger,
        policy: BudgetPolicy,
        pricing: Pricing,
        clock: Callable[[], datetime],
        notify: Notice | None = None,
        wording: Wording = plain_wording,
    ) -> None:
        self._llm = llm
        self._wording = wording
        self._ledger = ledger
        self._policy = policy
        self._pricing = pricing
        self._clock = clock
        self._notify = notify
        self._identities: dict[int, str] = {}
        self._communities: dict[str, str] = {}
        self._random = random.Random()

    async def complete(self, request: LLMRequest) -> LLMResponse:
        hold = await self.reserve(request)
        return await self._settled(hold, self._llm.complete(request))

    async def stream(self, request: LLMRequest, on_text: TextSink) -> LLMResponse:
        hold = await self.reserve(request)
        if isinstance(self._llm, StreamingLLM):
            return await self._settled(hold, self._llm.stream(request, on_text))
        return await self._settled(hold, self._llm.complete(request))

    async def check(self, seconds: float) -> None:
        check = getattr(self._llm, "check", None)
        if check is not None:
            await check(seconds)

    async def close(self) -> None:
        close = getattr(self._llm, "close", None)
        if close is not None:
            await close()

    async def reserve(self, request: LLMRequest) -> _Hold:
        """The request's worst case reserved on every counter of its payer, or BudgetExhausted.
        The global cap's stripes are tried from a random one until one has room."""
        person = await self._person(request.payer)
        community = await self._community(request.payer.community)
        now, amount = self._clock(), self._pricing.worst_case(request)
        stripes = max(1, self._policy.global_stripes)
        first = self._random.randrange(stripes)
        for attempt in range(stripes):
            claims = tuple(self._policy.claims(person, community, now, first + attempt))
            if not claims:
                return _Hold((), amount)
            refused = await self._ledger.reserve_budget(
                [(c.scope, c.period, c.limit) for c in claims], amount
            )
            if refused is None:
                return _Hold(claims, amount)
            claim = claims[refused]
            if claim.kind != "global":
                break
        if claim.kind == "global":
            await self._tell(claim, self._policy.global_day or 0.0, 100)
        log.info(
            "%s call refused: the %s budget %s is spent", request.kind, claim.kind, claim.scope
        )
        raise BudgetExhausted(claim.kind, claim.resets_at, self._wording)

    async def _settled(self, hold: _Hold, call: Awaitable[LLMResponse]) -> LLMResponse:
        cost = 0.0
        try:
            response = await call
            cost = self._pricing.cost(UsageRecord("", "", True).measured(response))
            return response
        finally:
            # A failed call is released whole: providers do not bill a request they refused.
            if hold.claims:
                after = await self._ledger.settle_budget(
                    [(c.scope, c.period) for c in hold.claims], hold.amount, cost
                )
                for claim, spent in zip(hold.claims, after, strict=True):
                    if claim.kind == "global":
                        await self._watch_global(claim, spent)

    async def _watch_global(self, stripe: Claim, spent: float) -> None:
        """The operators' notices at 80% and 100% of the whole cap. The stripes' total is read
        only when this stripe is past the level: the total cannot be past it otherwise (and
        the stripe that is tells, at its next settle)."""
        cap = self._policy.global_day or 0.0
        for level in NOTICE_LEVELS:
            if stripe.limit > 0 and spent >= stripe.limit * level / 100:
                scopes = self._policy.global_scopes()
                total = spent
                if len(scopes) > 1:
                    total = await self._ledger.budget_total(scopes, stripe.period)
                if total >= cap * level / 100:
                    await self._tell(stripe, total, level)

    async def _tell(self, claim: Claim, spent: float, level: int) -> None:
        """The operators hear of each level once per day, whichever worker gets there first
        (recorded on the first stripe's counter)."""
        if self._notify is None:
            return
        holder = self._policy.global_scopes()[0]
        if await self._ledger.claim_budget_notice(holder, claim.period, level):
            await self._notify(level, spent, self._policy.global_day or 0.0, self._pricing.unit)

    async def _person(self, payer: Payer) -> str | None:
        """The person's platform identity: a forget that deletes their row and a new row on
        their next message must not give them a fresh budget."""
        if payer.person is None:
            return None
        known = self._identities.get(payer.person)
        if known is None:
            known = await self._ledger.platform_identity(payer.person) or f"id:{payer.person}"
            if len(self._identities) >= IDENTITIES_KEPT:  # bounded: looked up again later
                self._identities.clear()
            self._identities[payer.person] = known
        return known

    async def _community(self, channel: str | None) -> str | None:
        """The community a thread's channel belongs to: a Discord channel's server, recorded
        when its messages are admitted (bot/budgets.py ChannelRecorder), so that a server's
        channels share one budget; a channel with no record (a Telegram group) is its own."""
        if channel is None:
            return None
        known = self._communities.get(channel)
        if known is None:
            known = await self._ledger.channel_community(channel)
            if known is None:
                return channel  # asked again next time: its first message records it
            if len(self._communities) >= IDENTITIES_KEPT:
                self._communities.clear()
            self._communities[channel] = known
        return known
