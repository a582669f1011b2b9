"""/admin canon on the real python-telegram-bot and discord.py against the fakes, on the real
store: the operator, in a private chat, lists the pending proposals with their evidence and the
contradiction mark, approves one (written, marked, and the very next turn's sheet carries it)
and rejects one; in a group it is refused with the reason and nothing is shown there; anyone
else is refused as for every operator command."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.canon_commands import listing
from bot.canon_review import Shown
from bot.texts import text
from memory.models import CanonEvidenceLine, CanonProposal, NewCanonProposal, Thread
from tests.conftest import CHARACTERS, FakeClock
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.discord_api import FakeDiscord
from tests.fault_helpers import telegram_bot
from tests.test_burst import echo
from tests.test_discord_adapter import ALICE, BOB, EPHEMERAL, running

DETECTIVE = "detective_bilbao"
SISTER = "Tiene una hermana, Ane, que vive en Getxo."
BAR = "El bar de debajo del despacho se llama Txoko."
CATS = "No soporta a los gatos y vive con un perro."
ANA, BEA, GROUP = 1001, 1002, -100500  # Ana is the operator on Telegram


def characters_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "characters"
    shutil.copytree(CHARACTERS, folder)
    return folder


async def propose(store: Any, now: datetime) -> tuple[list[int], list[Any]]:
    """Three pending proposals resting on the detective's lines in Bea's private thread, the
    third marked as contradicting the sheet."""
    user = await store.upsert_user("telegram", str(BEA), "Bea", now)
    conversation = await store.start_conversation(Thread(user.id, DETECTIVE, "dm"), now)
    await store.add_turn(conversation, "user", "¿Tienes familia, Koldo?", now)
    lines = [
        await store.add_turn(conversation, "assistant", said, now)
        for said in ("Mi hermana Ane vive en Getxo.", "Abajo está el Txoko.", "Odio los gatos.")
    ]
    ids = await store.add_canon_proposals(
        DETECTIVE,
        [
            NewCanonProposal(SISTER, (lines[0].id,)),
            NewCanonProposal(BAR, (lines[1].id,)),
            NewCanonProposal(CATS, (lines[2].id,), "traits: Observador obsesivo"),
        ],
        now,
    )
    return ids, lines


async def statuses(store: Any, ids: list[int]) -> list[str]:
    return [(await store.get_canon_proposal(i)).status for i in ids]


async def test_the_operator_reviews_canon_in_a_private_telegram_chat(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    fake_anthropic.default = echo()
    folder = characters_copy(tmp_path)
    admins = [f"telegram:{ANA}"]
    async with telegram_bot(
        tmp_path, fake_anthropic, clock, admin_ids=admins, characters_dir=folder
    ) as bot:
        bot.fake.languages.update({ANA: "es"})
        (sister, bar, cats), lines = await propose(bot.app.store, clock())
        bot.fake.send_command(ANA, ANA, "/admin", "canon")
        [listing] = await bot.fake.wait_for_messages(ANA, 1)
        shown = listing["text"]
        assert shown.startswith(text("es", "canon_title", count=3))
        for proposal_id, said, line in ((sister, SISTER, lines[0]), (cats, CATS, lines[2])):
            assert f"#{proposal_id} · {DETECTIVE}" in shown and said in shown
            assert f"turno {line.id}" in shown and line.text in shown
        assert "Contradice la ficha: traits: Observador obsesivo" in shown
        assert shown.count("Contradice la ficha") == 1  # only the marked one
        assert "¿Tienes familia" not in shown  # the person's words are no evidence
        bot.fake.send_command(ANA, ANA, "/admin", f"canon aprobar {sister}")
        approved = (await bot.fake.wait_for_messages(ANA, 2))[-1]["text"]
        assert approved.startswith(text("es", "canon_approved_sheet", id=sister))
        bot.fake.send_command(ANA, ANA, "/admin", f"canon rechazar {bar}")
        rejected = (await bot.fake.wait_for_messages(ANA, 3))[-1]["text"]
        assert rejected == text("es", "canon_rejected", id=bar)
        bot.fake.send_command(ANA, ANA, "/admin", f"canon aprobar {sister}")
        again = (await bot.fake.wait_for_messages(ANA, 4))[-1]["text"]
        assert again.startswith(f"La propuesta #{sister} ya estaba aprobada")
        bot.fake.send_command(ANA, ANA, "/admin", f"canon aprobar {cats}")
        refused = (await bot.fake.wait_for_messages(ANA, 5))[-1]["text"]
        assert refused.startswith(f"La propuesta #{cats} contradice la ficha")
        assert await statuses(bot.app.store, [sister, bar, cats]) == [
            "approved", "rejected", "pending",
        ]  # fmt: skip
        sheet = (folder / f"{DETECTIVE}.yaml").read_text(encoding="utf-8")
        assert sheet.count(SISTER) == 1 and BAR not in sheet and CATS not in sheet
        bot.fake.send_private_text(BEA, "Hola, Koldo")  # reloaded at once: this turn sees it
        await bot.fake.wait_for_messages(BEA, 1)
        assert SISTER in fake_anthropic.bodies()[-1]["system"][0]["text"]


async def test_english_names_and_a_fact_about_the_world_on_the_lore_page(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    folder = characters_copy(tmp_path)
    async with telegram_bot(
        tmp_path, fake_anthropic, clock, admin_ids=[f"telegram:{ANA}"], characters_dir=folder
    ) as bot:
        bot.fake.languages.update({ANA: "en"})
        (_, bar, _), _ = await propose(bot.app.store, clock())
        bot.fake.send_command(ANA, ANA, "/admin", f"canon approve {bar} lore")
        [approved] = await bot.fake.wait_for_messages(ANA, 1)
        assert approved["text"].startswith(text("en", "canon_approved_lore", id=bar))
        page = folder / f"{DETECTIVE}.lore" / "canon.md"
        assert page.read_text(encoding="utf-8").endswith(f"\n- {BAR}\n")
        bot.fake.send_command(ANA, ANA, "/admin", "canon list 999999")
        [*_, unknown] = await bot.fake.wait_for_messages(ANA, 2)
        assert unknown["text"] == text("en", "canon_unknown", id=999999)


async def test_a_group_and_a_non_operator_are_refused_and_nothing_is_shown_or_written(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    folder = characters_copy(tmp_path)
    files = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    async with telegram_bot(
        tmp_path, fake_anthropic, clock, admin_ids=[f"telegram:{ANA}"], characters_dir=folder
    ) as bot:
        bot.fake.languages.update({ANA: "es", BEA: "es"})
        ids, _ = await propose(bot.app.store, clock())
        bot.fake.send_command(ANA, ANA, "/ayuda")  # so that Telegram lets the bot write to her
        await bot.fake.wait_for_messages(ANA, 1)
        for args in ("canon", f"canon aprobar {ids[0]}", f"canon rechazar {ids[1]}"):
            bot.fake.send_command(GROUP, ANA, "/admin", args, "supergroup", addressed=True)
        told = (await bot.fake.wait_for_messages(ANA, 4))[1:]  # the reason, to the operator only
        assert [m["text"] for m in told] == [text("es", "canon_private_only")] * 3
        in_group = await bot.fake.wait_for_messages(GROUP, 3)
        assert all(m["text"] == text("es", "private_pointer") for m in in_group)
        for args in ("canon", f"canon aprobar {ids[0]}", f"canon rechazar {ids[1]}"):
            bot.fake.send_command(BEA, BEA, "/admin", args)
        refused = await bot.fake.wait_for_messages(BEA, 3)
        assert [m["text"] for m in refused] == [text("es", "admins_only")] * 3
        assert await statuses(bot.app.store, ids) == ["pending"] * 3
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == files


async def test_the_operator_reviews_canon_in_a_discord_dm_and_is_refused_in_the_server(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    folder = characters_copy(tmp_path)
    async with FakeDiscord() as fake:
        fake.add_user(BOB)
        admins = [f"discord:{ALICE}"]
        async with running(
            tmp_path, fake, fake_anthropic, clock, admin_ids=admins, characters_dir=folder
        ) as h:
            (sister, bar, _), lines = await propose(h.app.store, clock())

            async def canon(subcommand: str, options: dict[str, object], who: int, dm: bool):
                interaction = await fake.slash_command(
                    "admin", options, who, not dm, group="canon", subcommand=subcommand
                )
                return await fake.wait_for_interaction_response(interaction)

            listing = await canon("lista", {}, ALICE, True)
            assert SISTER in (listing.content or "") and lines[0].text in (listing.content or "")
            in_server = await canon("aprobar", {"id": sister}, ALICE, False)
            assert in_server.flags & EPHEMERAL
            assert in_server.content == text("es", "canon_private_only")
            stranger = await canon("rechazar", {"id": bar}, BOB, True)
            assert stranger.content == text("es", "admins_only")
            assert await statuses(h.app.store, [sister, bar]) == ["pending", "pending"]
            done = await canon("aprobar", {"id": sister, "lugar": "ficha"}, ALICE, True)
            assert (done.content or "").startswith(text("es", "canon_approved_sheet", id=sister))
            assert await statuses(h.app.store, [sister, bar]) == ["approved", "pending"]
            served = h.app.companion.characters.get(DETECTIVE)
            assert served is not None and served.identity.description.endswith(SISTER)


def test_a_long_list_shows_ten_and_says_how_many_more() -> None:
    when = datetime(2026, 11, 2, 18, 30, tzinfo=UTC)
    waiting = [
        Shown(CanonProposal(n, DETECTIVE, f"Hecho {n}.", (n,), None, "pending", when, None),
              [CanonEvidenceLine(n, when, "x" * 500)])
        for n in range(1, 13)
    ]  # fmt: skip
    shown = listing("es", waiting)
    assert shown.startswith(text("es", "canon_title", count=12))
    assert "Hecho 10." in shown and "Hecho 11." not in shown
    assert text("es", "canon_more", count=2) in shown
    assert "x" * 199 + "…" in shown and "x" * 200 not in shown  # evidence cut in the list
