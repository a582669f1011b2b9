"""Who may talk (bot/access.py) across processes and on both backends: a change made by one
process (another worker, `companion access`) is followed by the others within seconds; the
.env's rules are added at every start and only ever tighten the switches; the decision's
order (operators first, a block wins over an allow, roles and channels in a community)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.access import Access, decide
from bot.answers import Caller
from bot.texts import text
from memory.store import open_store
from memory.store.access import AccessRule, AccessState
from tests.conftest import FakeClock
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fault_helpers import telegram_bot
from tests.patience import PATIENCE
from tests.pg_fixtures import fresh_database
from tests.test_burst import echo
from tests.test_cli import companion, env_for

NOW = datetime(2026, 11, 2, 18, 30, tzinfo=UTC)
BEA = Caller("telegram", "1002", "Bea", "dm", "1002")


def member(*roles: str, user: str = "7") -> Caller:
    return Caller("discord", user, "Carol", "group", "55", guild_id="900", role_ids=roles)


def rule(spec: str, effect: str) -> AccessRule:
    platform, kind, target = spec.split(":")
    return AccessRule(platform, kind, target, effect)  # type: ignore[arg-type]


async def until(condition: Any) -> None:
    """Wait until the async `condition()` holds (a database read), within the patience."""
    async with asyncio.timeout(PATIENCE):
        while not await condition():  # noqa: ASYNC110 (the condition is a database read)
            await asyncio.sleep(0.02)


def test_the_order_of_the_rules() -> None:
    blocked_role = AccessState(frozenset({rule("discord:role:13", "block"),
                                          rule("discord:user:7", "allow")}))  # fmt: skip
    assert decide(blocked_role, member("13")) == "blocked"  # a block wins over an allow
    assert decide(blocked_role, member("14")) is None
    listed = frozenset({rule("discord:role:21", "allow"), rule("discord:channel:56", "allow")})
    invite = AccessState(listed, invite_only=True)
    assert decide(invite, member("21")) is None  # a listed role admits its members
    assert decide(invite, member("22")) == "invite_only"
    assert decide(invite, Caller("discord", "8", "X", "group", "56", guild_id="900")) is None
    server = AccessState(frozenset({rule("discord:server:900", "block")}))
    assert decide(server, member()) == "blocked"
    assert decide(server, Caller("discord", "7", "Carol", "dm", "3")) is None  # not in DMs
    other_platform = AccessState(frozenset({rule("discord:user:1002", "block")}))
    assert decide(other_platform, BEA) is None  # an id is a platform's own


async def test_operators_are_never_refused(any_store: Any) -> None:
    await any_store.set_access_rule(rule("telegram:user:1002", "block"), True, "t", NOW)
    await any_store.set_access_flag("invite_only", True)
    assert await Access(any_store, [], FakeClock()).reason(BEA) == "blocked"
    assert await Access(any_store, ["telegram:1002"], FakeClock()).reason(BEA) is None


@pytest.fixture(params=["sqlite", "postgres"])
async def two_stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """Two stores on one database, as two workers have: a SQLite file, a PostgreSQL one."""
    target: str | Path = tmp_path / "shared.db"
    if request.param == "postgres":
        target = await fresh_database(request.getfixturevalue("pg_base"))
    first = await open_store(target)
    second = await open_store(target)
    try:
        yield first, second
    finally:
        await second.close()
        await first.close()


async def test_a_change_by_one_process_is_followed_by_another_within_seconds(
    two_stores: tuple[Any, Any],
) -> None:
    """The second re-reads the rules once their version moved, without a restart."""
    here = Access(two_stores[0], [], FakeClock(), refresh_seconds=0.05)
    there = Access(two_stores[1], [], FakeClock(), refresh_seconds=0.05)
    assert await there.reason(BEA) is None  # read and cached
    await here.set_rule(rule("telegram:user:1002", "block"), True, "telegram:1")
    await until(lambda: _is(there, BEA, "blocked"))
    await here.set_rule(rule("telegram:user:1002", "block"), False, "telegram:1")
    await here.set_flag("dms", False)
    await until(lambda: _is(there, BEA, "dms_off"))


async def _is(access: Access, caller: Caller, reason: str | None) -> bool:
    return await access.reason(caller) == reason


async def test_told_once_a_day_whichever_process_refuses(any_store: Any) -> None:
    clock = FakeClock(NOW)
    first, second = Access(any_store, [], clock), Access(any_store, [], clock)
    await any_store.set_access_rule(rule("telegram:user:1002", "block"), True, "t", NOW)
    told = await first.refusal(BEA, "es")
    assert told is not None and told.text == text("es", "access_blocked")
    again = await second.refusal(BEA, "es")
    assert again is not None and again.text == ""  # refused, nothing to send
    clock.advance(hours=23)
    assert (await first.refusal(BEA, "es")).text == ""  # type: ignore[union-attr]
    clock.advance(hours=2)
    assert (await second.refusal(BEA, "es")).text == text("es", "access_blocked")  # type: ignore[union-attr]


async def test_env_rules_are_added_at_every_start_and_only_tighten(any_store: Any) -> None:
    access = Access(any_store, [], FakeClock())
    env = AccessState(frozenset({rule("telegram:user:1002", "block")}), dms=False)
    assert await access.merge(env, NOW) == 2  # the rule, DMs off
    await access.set_rule(rule("telegram:user:1002", "block"), False, "cli")
    await access.set_flag("dms", True)
    await access.set_rule(rule("telegram:user:1003", "block"), True, "cli")
    assert await access.merge(env, NOW) == 2  # a restart: what .env says holds again
    state = await any_store.access_state()
    assert not state.dms
    assert state.rules == {rule("telegram:user:1002", "block"), rule("telegram:user:1003", "block")}
    await access.set_flag("dms", True)
    assert await access.merge(AccessState(), NOW) == 0  # defaults change nothing
    assert (await any_store.access_state()).dms


async def test_companion_access_changes_a_running_bot(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    fake_anthropic.default = echo()
    async with telegram_bot(tmp_path, fake_anthropic, clock, access_refresh_seconds=0.1) as bot:
        bot.fake.languages[1002] = "es"
        env = env_for(tmp_path, None, DATABASE_PATH=str(bot.app.settings.database_path))
        code, out, err = await companion("access", "block", "telegram:user:1002", env=env)
        assert code == 0, err
        assert "block: telegram:user:1002" in out
        await until(lambda: _is(bot.app.commands.access, BEA, "blocked"))
        bot.fake.send_private_text(1002, "canario")
        [line] = await bot.fake.wait_for_messages(1002, 1)
        assert line["text"] == text("es", "access_blocked")
        code, _, err = await companion("access", "allow", "telegram:nadie:1", env=env)
        assert code == 2 and "PLATFORM:KIND:ID" in err
    assert not fake_anthropic.bodies()


async def test_a_group_refusal_says_nothing_and_records_no_notice(any_store: Any) -> None:
    await any_store.set_access_rule(rule("discord:user:7", "block"), True, "t", NOW)
    access = Access(any_store, [], FakeClock(NOW))
    silent = await access.refusal(member(), "es")
    assert silent is not None and silent.text == ""
    # Nobody was told, so the person's first private message is still told.
    told = await access.refusal(Caller("discord", "7", "Carol", "dm", "3"), "es")
    assert told is not None and told.text == text("es", "access_blocked")
