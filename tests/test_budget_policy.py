"""Who pays for a call and which budgets hold it (memory/budget/policy.py): a scene's calls are
its community's, a group thread's the person's and the community's, a DM's the person's; a
named person has a budget of their own, anyone else the guest budget; periods reset at the
next midnight and the first of the next month, in the bot's time zone."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from memory.budget.policy import BudgetPolicy, next_month, parse_people, payer_of
from memory.engine.llm import Payer
from memory.models import Thread

MADRID = ZoneInfo("Europe/Madrid")


def test_each_thread_is_paid_by_its_person_and_community() -> None:
    assert payer_of(Thread(7, "koldo", "dm")) == Payer(7, None)
    assert payer_of(Thread(7, "koldo", "group:telegram:-100")) == Payer(7, "telegram:-100")
    assert payer_of(Thread(3, "koldo", "scene:discord:55")) == Payer(None, "discord:55")


def test_named_people_have_their_own_budget_and_the_rest_the_guest_one() -> None:
    policy = BudgetPolicy(
        person_day=1.0, person_month=20.0, guest_day=0.1, guest_month=1.0,
        people=parse_people("telegram:42, discord:7=0.5/"),
    )  # fmt: skip
    now = datetime(2026, 12, 31, 23, 30, tzinfo=MADRID)
    limits = {(c.scope, c.period): c.limit for c in policy.claims("telegram:42", None, now)}
    assert limits == {("person:telegram:42", "d:2026-12-31"): 1.0,
                      ("person:telegram:42", "m:2026-12"): 20.0}  # fmt: skip
    own = {c.period: c.limit for c in policy.claims("discord:7", None, now)}
    assert own == {"d:2026-12-31": 0.5, "m:2026-12": 20.0}
    guest = {c.period: c.limit for c in policy.claims("telegram:9", None, now)}
    assert guest == {"d:2026-12-31": 0.1, "m:2026-12": 1.0}
    [day, month] = policy.claims("telegram:9", None, now)
    assert day.resets_at == datetime(2027, 1, 1, tzinfo=MADRID) == month.resets_at


def test_community_and_global_caps_are_daily_and_off_when_unset() -> None:
    now = datetime(2026, 11, 2, 18, 30, tzinfo=MADRID)
    assert BudgetPolicy().claims("telegram:1", "telegram:-5", now) == []
    assert not BudgetPolicy().active
    kinds = [c.kind for c in BudgetPolicy(community_day=1, global_day=5).claims(None, "t:-5", now)]
    assert kinds == ["community", "global"]
    assert next_month(now) == datetime(2026, 12, 1, tzinfo=MADRID)


def test_a_malformed_people_entry_is_named() -> None:
    with pytest.raises(ValueError, match="'telegram42'"):
        parse_people("telegram42")
    with pytest.raises(ValueError, match="'discord:7=x'"):
        parse_people("discord:7=x")
