"""Who may talk on Discord (bot/access.py), through the real discord.py on the fake Discord:
a blocked role silences its members in the server, a blocked person in a DM is told once and
asks the model nothing, /admin acceso (a slash command group) changes the rules live, and /yo
lists the caller's ids with their roles."""

from __future__ import annotations

from pathlib import Path

from bot.texts import text
from tests.conftest import FakeClock
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.discord_api import FakeDiscord
from tests.raw_db import traces_of
from tests.test_burst import echo
from tests.test_discord_adapter import ALICE, BOB, EPHEMERAL, running

CAROL = 7171


async def test_a_blocked_role_silences_its_members_in_the_server(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    fake_anthropic.default = echo()
    async with FakeDiscord() as fake:
        muted = fake.add_role("silenciados")
        for person in (CAROL, BOB):
            fake.add_user(person)
        fake.give_role(CAROL, muted)
        blocked = [f"discord:role:{muted}"]
        async with running(tmp_path, fake, fake_anthropic, clock, access_blocked=blocked) as h:
            await fake.guild_message(CAROL, "canario del rol", mention_bot=True)
            await fake.guild_message(BOB, "hola", mention_bot=True)
            # The channel's scene is one queue: Bob's line comes after Carol was refused.
            await fake.webhooks.wait_for_messages(fake.channel_id, 1)
            assert len(fake.webhooks.messages(fake.channel_id)) == 1
            assert fake.sent_messages(fake.channel_id) == []  # no notice in the channel
            assert "canario" not in repr(fake_anthropic.bodies())
            assert traces_of(h.app.settings, "canario") == []
            interaction = await fake.slash_command("yo", {}, CAROL, True)
            response = await fake.wait_for_interaction_response(interaction)
            assert response.flags & EPHEMERAL
            assert f"discord:role:{muted}" in (response.content or "")
            assert f"discord:server:{fake.guild_id}" in (response.content or "")


async def test_a_blocked_person_in_a_dm_is_told_once_and_costs_nothing(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    async with FakeDiscord() as fake:
        blocked = [f"discord:user:{CAROL}"]
        async with running(tmp_path, fake, fake_anthropic, clock, access_blocked=blocked) as h:
            await fake.dm(CAROL, "canario uno")
            [told] = await fake.wait_for_dms(CAROL, 1)
            assert told.content == text("es", "access_blocked")
            interaction = await fake.slash_command(
                "personaje", {}, CAROL, False, subcommand="lista"
            )
            refused = await fake.wait_for_interaction_response(interaction)
            assert refused.content == text("es", "access_blocked")
            assert not fake_anthropic.bodies()
            assert traces_of(h.app.settings, "canario") == []


async def test_the_operator_blocks_a_member_live_with_the_admin_slash_group(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    fake_anthropic.default = echo()
    async with FakeDiscord() as fake:
        for person in (CAROL, BOB):
            fake.add_user(person)
        async with running(tmp_path, fake, fake_anthropic, clock, admin_ids=[f"discord:{ALICE}"]):
            options = {"tipo": "persona", "id": str(CAROL)}
            interaction = await fake.slash_command(
                "admin", options, ALICE, True, group="acceso", subcommand="bloquear"
            )
            done = await fake.wait_for_interaction_response(interaction)
            assert done.flags & EPHEMERAL and f"discord:user:{CAROL}" in (done.content or "")
            await fake.guild_message(CAROL, "canario", mention_bot=True)
            await fake.guild_message(BOB, "hola", mention_bot=True)
            await fake.webhooks.wait_for_messages(fake.channel_id, 1)
            assert len(fake.webhooks.messages(fake.channel_id)) == 1
            assert "canario" not in repr(fake_anthropic.bodies())
            interaction = await fake.slash_command(
                "admin", {"tipo": "persona", "id": str(CAROL)}, BOB, True, group="acceso",
                subcommand="desbloquear",
            )  # fmt: skip
            refused = await fake.wait_for_interaction_response(interaction)
            assert refused.content == text("es", "admins_only")
