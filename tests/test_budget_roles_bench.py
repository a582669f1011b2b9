"""A tiny run of bench/budget.py's `postgres_2_role_workers` (issue 36): the real platform and
two workers on PostgreSQL, 20 people in 2 Telegram groups, the fake Anthropic API with varying
costs. Its JSON must keep the budget rules: no scope over its budget by more than one call's
worst case, no call after exhaustion, every refusal with the line naming when it resets, every
message answered or refused (none lost), and both a person's and a group's budget ran out."""

from __future__ import annotations

from pathlib import Path

from bench.budget_roles import Plan, run_role_workers
from tests import pg_fixtures

pytestmark = pg_fixtures.needs_postgres


async def test_role_workers_keep_every_budget_rule(tmp_path: Path, pg_base: str) -> None:
    plan = Plan(people=20, communities=2)
    result = await run_role_workers(plan, pg_base, tmp_path)
    messages = result["messages"]
    assert set(result["overspend_max"]) == {"person", "community", "global"}
    assert all(0.0 <= v <= 1.0 for v in result["overspend_max"].values()), result
    assert result["calls_after_exhaustion"] == 0, result
    assert result["refused_without_reason"] == 0, result
    assert messages["lost"] == 0, result
    assert messages["answered"] + messages["refused"] == messages["sent"] > 0, result
    # Both kinds of budget ran out mid-run (a run where nothing is refused proves nothing),
    # and some messages were still answered: the budgets are not refused from the start.
    assert result["people_out"] >= 1 and result["communities_out"] >= 1, result
    assert set(result["refusals_by_budget"]) >= {"de tu cuenta", "de este grupo"}, result
    assert messages["answered"] > 0 and result["model_calls"] > 0, result
