"""Budgets wired into the bot (issue 36): the provider wrapped in the one guard every call
passes (memory/budget/guard.py), the operators' notices, and spend against budgets for
`companion stats --by` and `/metrics`."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from zoneinfo import ZoneInfo

from bot.config import Settings
from bot.followups import FollowUpJob
from bot.llm import ClosableLLM
from bot.texts import text
from memory.budget.guard import BudgetedLLM
from memory.budget.policy import GLOBAL, BudgetPolicy, Pricing, day_key, month_key
from memory.engine.tokens import TokenEstimator
from memory.store.budgets import BudgetCounter, BudgetLedger

log = logging.getLogger(__name__)

NOTICE = (
    "Budget notice: {level}% of today's global cap is spent ({spent:.4g} of {cap:.4g} {unit})."
    "{more}"
)
FULL = " New conversations get the reset-time line until midnight; commands keep working."


class OperatorNotices:
    """Tells every operator (ADMIN_IDS) privately; sent through the follow-ups' adapters, which
    the app hands over once it has built them (`followups`)."""

    def __init__(self, admin_ids: Sequence[str]) -> None:
        self._admins = tuple(admin_ids)
        self.followups: FollowUpJob | None = None

    async def __call__(self, level: int, spent: float, cap: float, unit: str) -> None:
        more = FULL if level >= 100 else ""
        text = NOTICE.format(level=level, spent=spent, cap=cap, unit=unit, more=more)
        log.warning("%s", text)
        for admin in self._admins:
            sent = self.followups is not None and await self.followups.tell(admin, text)
            if not sent:
                log.warning("budget notice not delivered to %s (platform not running here)", admin)


def budgeted(
    settings: Settings,
    ledger: BudgetLedger,
    llm: ClosableLLM,
    clock: Callable[[], datetime],
    notices: OperatorNotices,
) -> ClosableLLM:
    """The provider behind the budget guard, or as it is when no budget is set (as before)."""
    policy = settings.budget_policy()
    if not policy.active:
        return llm
    pricing = Pricing.for_model(settings.price_table(), settings.llm_model, TokenEstimator())
    policy = replace(policy, unit=pricing.unit)
    return BudgetedLLM(llm, ledger, policy, pricing, clock, notices, budget_line)


def budget_line(language: str, kind: str, resets_at: datetime) -> str:
    """The line a person out of budget gets (bot/texts.py): whose limit, and when it resets."""
    when = f"{resets_at:%Y-%m-%d %H:%M} ({resets_at.tzname() or 'UTC'})"
    return text(language, "budget_out", what=text(language, f"budget_out_{kind}"), when=when)


@dataclass(frozen=True)
class Spend:
    """One scope's spend in one period against its budget (None: unlimited)."""

    kind: str  # person | community | global
    name: str
    period: str
    spent: float
    reserved: float
    calls: int
    refused: int
    budget: float | None


async def spend_rows(settings: Settings, ledger: BudgetLedger, now: datetime) -> list[Spend]:
    """Today's and this month's counters, each with the budget it is held to."""
    policy = settings.budget_policy()
    rows: list[Spend] = []
    for period in (day_key(now), month_key(now)):
        for counter in await ledger.budget_counters(period):
            rows.append(spend_of(policy, counter))
    return stripes_summed(rows)


def stripes_summed(rows: list[Spend]) -> list[Spend]:
    """The global cap's stripes (memory/budget/policy.py) shown as the one cap they keep."""
    summed: dict[tuple[str, str, str], Spend] = {}
    for row in rows:
        key = (row.kind, row.name, row.period)
        if key in summed:
            was = summed[key]
            row = replace(
                was,
                spent=was.spent + row.spent,
                reserved=was.reserved + row.reserved,
                calls=was.calls + row.calls,
                refused=was.refused + row.refused,
            )
        summed[key] = row
    return list(summed.values())


def spend_of(policy: BudgetPolicy, counter: BudgetCounter) -> Spend:
    kind, _, name = counter.scope.partition(":")
    daily = counter.period.startswith("d:")
    if counter.scope == GLOBAL or counter.scope.startswith(f"{GLOBAL}#"):
        kind, name, budget = "global", "all", policy.global_day
    elif kind == "community":
        budget = policy.community_day
    else:
        day, month = policy.person_limits(name)
        budget = day if daily else month
    return Spend(kind, name, counter.period, counter.spent, counter.reserved, counter.calls,
                 counter.refused, budget)  # fmt: skip


def format_spend(rows: Sequence[Spend], kind: str, unit: str) -> str:
    """The table of `companion stats --by person|community`."""
    header = (f"{kind:<28} {'period':<13} {'calls':>6} {'refused':>7} "
              f"{'spent':>11} {'budget':>11} {'used':>6}  ({unit})")  # fmt: skip
    lines = [header]
    for row in rows:
        if row.kind != kind:
            continue
        budget = "unlimited" if row.budget is None else f"{row.budget:.4f}"
        used = f"{row.spent / row.budget:.0%}" if row.budget else "-"
        lines.append(
            f"{row.name[:28]:<28} {row.period:<13} {row.calls:>6} {row.refused:>7} "
            f"{row.spent:>11.4f} {budget:>11} {used:>6}"
        )
    if len(lines) == 1:
        lines.append(f"(no {kind} has spent anything in this day or month)")
    return "\n".join(lines)


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def metric_lines(rows: Sequence[Spend], unit: str) -> list[str]:
    """`/metrics`: each scope's spend and budget this day and month (Prometheus text)."""
    spent, budget = "companion_budget_spent", "companion_budget_limit"
    lines = [
        f"# HELP {spent} Spent in the period by the scope, in {unit} (calls settled).",
        f"# TYPE {spent} gauge",
    ]
    limits = [f"# HELP {budget} The scope's budget for the period, in {unit}.",
              f"# TYPE {budget} gauge"]  # fmt: skip
    for row in rows:
        period = "day" if row.period.startswith("d:") else "month"
        labels = f'kind="{row.kind}",scope="{_label(row.name)}",period="{period}"'
        lines.append(f"{spent}{{{labels}}} {row.spent}")
        if row.budget is not None:
            limits.append(f"{budget}{{{labels}}} {row.budget}")
    return lines + limits


def spend_metrics(settings: Settings, ledger: BudgetLedger) -> Callable[[], Awaitable[list[str]]]:
    """What a process's `/metrics` adds (Metrics.spend): read from the shared counters."""
    unit = Pricing.for_model(settings.price_table(), settings.llm_model, TokenEstimator()).unit
    zone = ZoneInfo(settings.timezone)

    async def lines() -> list[str]:
        return metric_lines(await spend_rows(settings, ledger, datetime.now(zone)), unit)

    return lines
