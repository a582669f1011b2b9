"""The counters budgets are kept in (migration 0024), as the store offers them: reserve a call's
worst case on every counter it must fit in, all or none, then settle its real cost."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

# (scope, period, limit): one counter a reservation must fit in.
Limit = tuple[str, str, float]
# (scope, period)
Counter = tuple[str, str]


@dataclass(frozen=True)
class BudgetCounter:
    scope: str
    period: str
    spent: float
    reserved: float
    calls: int
    refused: int


class BudgetLedger(Protocol):
    async def reserve_budget(self, limits: Sequence[Limit], amount: float) -> int | None:
        """Add `amount` to the reserve of every counter when each still fits it (spent +
        reserved + amount <= limit): None. Else nothing is reserved, the first counter that
        does not fit counts a refusal, and its index is returned. Atomic across workers."""
        ...

    async def settle_budget(
        self, counters: Sequence[Counter], reserved: float, spent: float
    ) -> list[float]:
        """Release a reservation and add the call's real cost; each counter's spent after."""
        ...

    async def claim_budget_notice(self, scope: str, period: str, level: int) -> bool:
        """True once per counter and level (the first worker to ask): who sends the notice."""
        ...

    async def budget_total(self, scopes: Sequence[str], period: str) -> float:
        """The spent of these counters of one period, summed (a striped cap's stripes)."""
        ...

    async def budget_counters(self, period: str) -> list[BudgetCounter]:
        """Every counter of one period ('d:2026-12-03', 'm:2026-12')."""
        ...

    async def platform_identity(self, user_id: int) -> str | None:
        """'platform:platform_user_id' of a users row, None when it is gone."""
        ...

    async def channel_community(self, channel: str) -> str | None:
        """The community recorded for a group channel ('discord:<channel>' ->
        'discord:<server>', migration 0028), None when none is."""
        ...


class ChannelCommunities(Protocol):
    async def record_channel_community(self, channel: str, community: str) -> None:
        """Remember the community of a group channel (a Discord channel's server)."""
        ...
