"""A Discord server is one community for budgets (issue 36, item 2; migration 0028): the
calls of a scene in any of a server's channels are paid from the server's one daily budget,
so its channels share it; `companion stats --by community` and /metrics name the server. A
Telegram group stays its own community. Through the real discord.py on the fake Discord."""

from __future__ import annotations

from pathlib import Path

from bot.budgets import format_spend, metric_lines, spend_rows
from memory.budget.policy import day_key
from tests.conftest import FakeClock
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.discord_api import FakeDiscord
from tests.test_burst import echo
from tests.test_discord_adapter import BOB, running


async def test_a_servers_channels_share_the_servers_community_budget(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    fake_anthropic.default = echo()
    async with FakeDiscord() as fake:
        fake.add_user(BOB)
        first, second = fake.channel_ids
        server = f"discord:{fake.guild_id}"
        async with running(tmp_path, fake, fake_anthropic, clock, budget_community_day=50.0) as h:
            await fake.guild_message(BOB, "hola desde general", mention_bot=True, channel_id=first)
            await fake.webhooks.wait_for_messages(first, 1)
            await fake.guild_message(BOB, "hola desde random", mention_bot=True, channel_id=second)
            await fake.webhooks.wait_for_messages(second, 1)
            counters = {c.scope: c for c in await h.app.store.budget_counters(day_key(clock()))}
            assert f"community:{server}" in counters
            assert counters[f"community:{server}"].calls == 2  # both channels' replies
            assert not any(f"discord:{channel}" in scope for scope in counters
                           for channel in (first, second))  # fmt: skip
            rows = await spend_rows(h.app.settings, h.app.store, clock())
            table = format_spend(rows, "community", "usd")
            assert server in table and str(first) not in table
            lines = metric_lines(rows, "usd")
            assert any(f'scope="{server}"' in line for line in lines)
            assert not any(f'scope="discord:{first}"' in line for line in lines)


async def test_a_server_out_of_budget_refuses_in_every_channel(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    """The server's budget spent (from its first channel) refuses a scene in its second."""
    fake_anthropic.default = echo()
    async with FakeDiscord() as fake:
        fake.add_user(BOB)
        first, second = fake.channel_ids
        server = f"community:discord:{fake.guild_id}"
        async with running(tmp_path, fake, fake_anthropic, clock, budget_community_day=1.0) as h:
            await fake.guild_message(BOB, "hola", mention_bot=True, channel_id=first)
            await fake.webhooks.wait_for_messages(first, 1)
            day = day_key(clock())
            await h.app.store.reserve_budget([(server, day, 10.0)], 0.0)
            await h.app.store.settle_budget([(server, day)], 0.0, 1.0)  # the server's day spent
            asked = len(fake_anthropic.bodies())
            await fake.guild_message(BOB, "canario", mention_bot=True, channel_id=second)
            # The scene's character says the line (memory/engine/turns.py), as it would answer.
            refused = await fake.webhooks.wait_for_messages(second, 1)
            assert "este grupo" in (refused[-1].content or "")
            assert len(fake_anthropic.bodies()) == asked  # the model was not asked
            [counter] = [c for c in await h.app.store.budget_counters(day) if c.scope == server]
            assert counter.refused == 1
